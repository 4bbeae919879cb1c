"""Banded Toeplitz strategies for a Toeplitz training workload (momentum) under a schema, and a certified bound.

Notation: see :mod:`mmopt.participation.workloads` (W = T(a)) and :mod:`mmopt.participation.toeplitz`. For
C = T(c) with at most b bands (c_m = 0 for m ≥ b, b the schema's separation) no pattern's cross terms survive and
column j has norm² Σ_{m ≤ n−1−j} c_m², non-increasing in j, so the worst pattern is p = {0, b, …, (k − 1)b} and

    Δ²(c) = Σ_m u_m c_m²,  u_m = #{i : p_i ≤ n − 1 − m}     (exact, both schemas; McKenna, ICLR 2025, §4).

The error is ‖W C⁻¹‖²_F = ‖T(h)‖²_F = Σ_m (n − m) h_m² with h = a·(1/c) mod xⁿ (products of lower-triangular
Toeplitz matrices are Toeplitz), so L(c) = Δ²(c)·F(c) is scale-free (c_0 = 1 fixed) with the exact gradient
∂F/∂c = −T(s)ᵀ T(a)ᵀ r, r_m = 2(n − m) h_m, s = (1/c)²: two FFT correlations. L-BFGS minimises it (not convex:
a local optimum); the reported error is recomputed with the exact sensitivity of
:func:`mmopt.participation.toeplitz.toeplitz_sensitivity_squared`.

**Bound** (any dense W, n ≤ 4,096): the pinching bound of :mod:`mmopt.participation.bound`, Σ_j S_j² with
S_j = Σ_{t∈P_j} ‖(G^{1/2})_{P_j P_j} e_t‖ on the disjoint allowed patterns P_j = {j, j + s, …}, G^{1/2} from one
eigendecomposition (O(n³)). It holds for every PSD G (the argument there uses only the pinching inequality). The
computed root R̃ = V diag(√w₊) Vᵀ differs from G^{1/2} by E, and ‖G^{1/2}M^{1/2}‖_* ≥ Σ_j √λ_j S_j −
‖E‖_F (Σ_j λ_j |P_j|)^{1/2} (‖E M^{1/2}‖_* ≤ ‖E‖_F ‖M^{1/2}‖_F); ‖E‖_2 ≤ ‖R̃² − G‖_2^{1/2} for PSD roots
(t ↦ t^{1/2} is operator monotone; R̃ is PSD up to its forming's round-off, added, as is the residual's own), and
‖E‖_F ≤ √n ‖E‖_2.
At λ_j ∝ S_j² the bound is (Σ S_j² − ‖E‖_F (Σ_j |P_j| S_j²)^{1/2})² / Σ S_j².
"""

from __future__ import annotations

import numpy as np
from scipy import optimize as sopt

from mmopt._base import validation as v
from mmopt.participation.schemas import Schema, as_schema
from mmopt.toeplitz import _series

__all__ = ["banded_error", "dense_diagonal_bound", "equalized_error", "optimize_banded"]

_EPS = np.finfo(float).eps


def _worst_pattern_weights(n: int, schema: Schema) -> np.ndarray:
    """u_m of the module docstring, m < n (the schema's separation b and participations k at n)."""
    b, k = schema.separation(n), schema.participations(n)
    p = np.arange(k) * b
    return (p[None, :] <= (n - 1 - np.arange(n))[:, None]).sum(axis=1).astype(float)


def banded_error(a: np.ndarray, c: np.ndarray, u: np.ndarray) -> tuple[float, np.ndarray]:
    """(L(c), ∂L/∂c) for W = T(a), C = T(c) (len(c) bands) and Δ² = Σ u_m c_m².

    >>> a, c = np.ones(4), np.array([1.0, 0.5])
    >>> C = np.eye(4) + 0.5 * np.eye(4, k=-1)
    >>> L, _ = banded_error(a, c, np.array([2.0, 2.0, 1.0, 1.0]))
    >>> bool(np.isclose(L, 2.5 * np.linalg.norm(np.tril(np.ones((4, 4))) @ np.linalg.inv(C)) ** 2))
    True
    """
    n, B = len(a), len(c)
    g = _series.reciprocal(c, n)
    h = _series.convolve(a, g, n)
    weight = n - np.arange(n)
    F = float(weight @ (h * h))
    D = float(u[:B] @ (c * c))
    r = 2 * weight * h
    dg = _series.correlate_tail(a, r, n)  # T(a)ᵀ r
    dc = -_series.correlate_tail(_series.convolve(g, g, n), dg, B)  # −T(s)ᵀ dg, first B entries
    return D * F, D * dc + F * 2 * u[:B] * c


def equalized_error(a: np.ndarray, c: np.ndarray, participations: int) -> tuple[float, np.ndarray]:
    """(L, ∂L/∂c) for C = D·T(c) with unit columns (:func:`mmopt.toeplitz.equalized`; y = d², y reversed =
    cumsum(1/(c∘c))): Δ² = k exactly (≤ b bands, every column of norm 1), ‖W C⁻¹‖²_F = ‖T(h) D⁻¹‖²_F =
    Σ_m r_m Σ_{l≤m} h_l² with r = 1/y reversed (:func:`mmopt.toeplitz.error.decoder_total` with h for b); the
    scaling's dependence on c is differentiated too (as :func:`mmopt.toeplitz.solve.objective_and_gradient`).

    >>> from mmopt.toeplitz import banded, equalized
    >>> a, c = np.array([1.0, 1.9, 2.71, 3.439]), np.array([1.0, 0.5])
    >>> C = equalized(banded(c, 4)).to_dense()
    >>> L, _ = equalized_error(a, c, 2)
    >>> W = np.array([[a[i - j] if i >= j else 0.0 for j in range(4)] for i in range(4)])
    >>> bool(np.isclose(L, 2 * np.linalg.norm(W @ np.linalg.inv(C)) ** 2))
    True
    """
    from mmopt.toeplitz.error import decoder_total, decoder_total_gradient
    n, B = len(a), len(c)
    g = _series.reciprocal(c, n)
    h = _series.convolve(a, g, n)
    q = _series.reciprocal(c * c, n)
    z = np.cumsum(q)
    if not (np.all(np.isfinite(h)) and np.all(np.isfinite(z))) or z.min() <= 0:
        return np.inf, np.zeros_like(c)
    r = 1.0 / z
    F = decoder_total("prefix", h, r)
    dg = _series.correlate_tail(a, decoder_total_gradient("prefix", h, r), n)  # T(a)ᵀ ∂F/∂h
    dF = -_series.correlate_tail(_series.convolve(g, g, n), dg, B)
    dF_dq = -_series.correlate_tail(_series.convolve(q, q, n), np.cumsum((-np.cumsum(h * h) * r * r)[::-1])[::-1], B)
    return participations * F, participations * (dF + 2.0 * c * dF_dq)


def optimize_banded(coefficients, schema: Schema, *, bands: int | None = None, equalize: bool = True,
                    max_iterations: int = 1000, tol: float = 1e-12):
    """(C, L-BFGS status, iterations): a local optimum of Δ²·‖T(a) C⁻¹‖²_F over C = T(c) with ≤ b bands.

    Parameters
    ----------
    coefficients : array_like (n,)
        a, the workload's first column (:func:`mmopt.participation.workloads.toeplitz_coefficients`).
    schema : a schema of :mod:`mmopt.participation`
    bands : int, optional
        At most the schema's separation b (default b, capped at n).

    Examples
    --------
    >>> import mmopt
    >>> from mmopt.participation import workloads
    >>> a = workloads.momentum(64, 0.9).matrix[:, 0]
    >>> C, status, _ = optimize_banded(a, mmopt.participation.fixed_epochs(4))
    >>> status, len(C.coefficients), C.name
    ('local_optimum', 16, 'banded(16)+rows')
    """
    from mmopt.toeplitz.strategies import banded, equalized, sqrt_coefficients
    caller = "optimize_banded"
    a = v.check_vector(coefficients, name="coefficients", caller=caller)
    n = len(a)
    schema = as_schema(schema, caller)  # None: once (an AttributeError before)
    schema.check_n(n, caller)
    b = schema.separation(n)
    B = min(n, b) if bands is None else v.check_int(bands, name="bands", caller=caller, high=min(n, b))
    u = _worst_pattern_weights(n, schema)
    if B == 1:
        return banded([1.0], n), "optimal", 0  # every 1-band strategy is a multiple of the identity
    k = schema.participations(n)
    error = (lambda c: equalized_error(a, c, k)) if equalize else (lambda c: banded_error(a, c, u))
    step = 0.01  # search y = (c − c⁰)/step: L-BFGS-B's unit first step in c overflows 1/c (mmopt.toeplitz.solve)
    c0 = sqrt_coefficients(n)[1:B]
    scale = 1.0 / error(np.concatenate([[1.0], c0]))[0]

    def fun(y):
        with np.errstate(over="ignore", invalid="ignore"):
            L, grad = error(np.concatenate([[1.0], c0 + step * y]))
        if not np.isfinite(L):
            return np.inf, np.zeros_like(y)
        return L * scale, grad[1:] * step * scale

    res = sopt.minimize(fun, np.zeros(B - 1), jac=True, method="L-BFGS-B",
                        options={"maxiter": max_iterations, "ftol": tol, "gtol": 0.0, "maxcor": 20})
    c = np.concatenate([[1.0], c0 + step * res.x])
    # converged: a small gradient relative to the objective in the coefficients themselves (as mmopt.toeplitz.solve)
    rel = float(np.max(np.abs(res.jac / step) * np.maximum(np.abs(c[1:]), 1.0))) / max(abs(res.fun), 1e-300)
    status = "local_optimum" if rel <= 1e-4 else "user_limit" if res.nit >= max_iterations else "solver_error"
    C = banded(c, n, name=f"banded({B})")
    return equalized(C) if equalize else C, status, int(res.nit)


def dense_diagonal_bound(gram, schema: Schema) -> float:
    """A certified lower bound on Δ²·tr(G X⁻¹) under ``schema`` for any PSD G (module docstring), O(n³).

    Examples
    --------
    >>> import mmopt
    >>> from mmopt.participation.bound import diagonal_bound
    >>> G, k4 = mmopt.workload.prefix(64).gram, mmopt.participation.fixed_epochs(4)
    >>> bool(np.isclose(dense_diagonal_bound(G, k4), diagonal_bound(mmopt.toeplitz.prefix(64), k4), rtol=1e-4))
    True
    """
    from mmopt.participation.bound import pattern_spacing
    caller = "dense_diagonal_bound"
    G = v.check_matrix(gram, name="gram", caller=caller, square=True)
    n = G.shape[0]
    schema = as_schema(schema, caller)
    schema.check_n(n, caller)
    v.check_allocation(4 * n * n, what=f"four {n:,}×{n:,} arrays", caller=caller)
    G = (G + G.T) / 2
    w, V = np.linalg.eigh(G)
    R = (V * np.sqrt(np.maximum(w, 0.0))) @ V.T
    R = (R + R.T) / 2
    normR = np.linalg.norm(R)
    # R̃ is PSD up to the round-off of forming it (Weyl: its eigenvalues move by ≤ n·u·‖R̃‖), so R̃ + δI is PSD and
    # ‖G^{1/2} − R̃‖₂ ≤ δ + ‖(R̃ + δI)² − G‖₂^{1/2} ≤ δ + (‖R̃² − G‖_F + 2δ‖R̃‖_F + δ²)^{1/2}; the computed
    # ‖R̃² − G‖_F is off by at most the product's round-off, 4n·u·‖R̃‖²_F
    delta = 8 * n * _EPS * normR
    resid = np.linalg.norm(R @ R - G) + 4 * n * _EPS * normR**2 + 2 * delta * normR + delta**2
    E = np.sqrt(n) * (np.sqrt(resid) + delta)
    s = pattern_spacing(schema, n)
    S, sizes = np.zeros(s), np.zeros(s)
    for j in range(s):
        P = np.arange(j, n, s)
        S[j] = np.linalg.norm(R[np.ix_(P, P)], axis=0).sum()
        sizes[j] = len(P)
    total = float(S @ S)
    if total <= 0:
        return 0.0
    head = total - E * np.sqrt(float(sizes @ (S * S)))
    return max(head, 0.0) ** 2 / total * (1 - 16 * n * _EPS)
