"""The largest variance over per-query targets on prefix sums and all ranges, certified, without the query rows.

Notation: see README; cells 0 … n−1, W̃ = diag(τ)^{-1/2} W, vᵢ(X) = wᵢ X⁻¹ wᵢᵀ at unit privacy (diag X ≤ 1).
In prefix coordinates P_j = x_0 + … + x_{j−1} (j = 0 … n; P = Qx with Q the (n+1)×n matrix of the first j
cells' indicators) the range [a, b) is P_b − P_a, an *edge* (a, b) of a graph on n + 1 nodes (prefix sums are
the edges (0, b)). For edge weights c the weighted Gram and every query's variance cost O(n²), not O(m·n):

    G_c = Σ_{a<b} c_ab 1_{[a,b)} 1_{[a,b)}ᵀ,  (G_c)_{st} = Σ_{a ≤ s, b > t} c_ab   (s ≤ t),            (1)
    v_ab(X) = Y_aa + Y_bb − 2 Y_ab,           Y = Q X⁻¹ Qᵀ  (2-D cumulative sums of X⁻¹),

(1) a dominance sum of non-negative terms, so each entry is accurate to 2n·eps relative.

**Minimax.** min_X max_ab v_ab/τ_ab over {diag X ≤ 1} is γ₂(W̃)², whose dual is the maximum over query weights
λ ∈ Δ_m and cell weights μ ∈ Δ_n of T(λ, μ)² with T = tr (D_μ^{1/2} G_{λ/τ} D_μ^{1/2})^{1/2} (Lee, Shraibman &
Špalek, CCC 2008), as :mod:`mmopt.structured.orbit_maxvar`, here with every query its own weight (no symmetry
is needed, so heterogeneous targets are fine). Any (λ, μ) gives a lower bound; T's gradients are v/(2τ) and
diag X/2 at X = D^{-1/2} (D^{1/2} G D^{1/2})^{1/2} D^{-1/2}, and the multiplicative weights of
:func:`mmopt.structured.gamma2.ascend` raise it until max v/τ · max X_tt (X scaled to diag ≤ 1 is feasible) meets
T². One n×n eigendecomposition per step.
Measured (``benchmarks/bench_plan.py``): all ranges on 1,024 cells with 524,800 targets to a 5·10⁻⁴ gap in 148
steps, ~30 CPU s; the dense search over the query rows would need 537M entries.

Round-off. The lower bound is taken over the computed eigenvalues less a Weyl allowance δ = 4n·eps·‖H‖_F (the
rounding of (1), of the scaling and of the eigensolver), so T² stays a bound on the exact T(λ, μ)². The
objective is re-evaluated from the returned X by Cholesky (:func:`variances`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import linalg

from mmopt._base import validation as _v
from mmopt._base.cumulative import cumulative_rows, prefix_sums_2d
from mmopt.structured.gamma2 import RIDGE, ascend

__all__ = ["MAX_N", "RangeSolution", "edges", "gram", "solve", "variances"]

#: the largest n solved (a few (n+1)² arrays; one O(n³) eigendecomposition per step)
MAX_N = 4096
#: the multiplicative weights' step (halved when T falls); measured: η = 2 took 223 steps to a 5·10⁻⁴ gap at
#: n = 1,024, η = 3 148, η ≥ 4 overshoots and halves back
ETA = 3.0
_EPS = np.finfo(float).eps


@dataclass(frozen=True)
class RangeSolution:
    """X (diag ≤ 1), its exact max_i vᵢ/τᵢ, a certified lower bound, and how the search ended."""

    gram: np.ndarray = field(repr=False)
    objective: float
    lower_bound: float
    status: str
    iterations: int
    variances: np.ndarray = field(repr=False)  # vᵢ(X) at unit privacy, workload row order (not over τ)
    query_weights: np.ndarray = field(repr=False)
    cell_weights: np.ndarray = field(repr=False)
    history: tuple = field(default=(), repr=False)


def edges(kind: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(a, b), the queries [a, b) of ``kind`` ("prefix" or "all_range") in the workload's row order.

    >>> edges("all_range", 2)
    (array([0, 0, 1]), array([1, 2, 2]))
    """
    if kind not in ("prefix", "all_range"):  # anything else was read as all ranges
        raise ValueError(f"The 'kind' parameter of mmopt.toeplitz.maxvar must be 'prefix' or 'all_range'. Got "
                         f"{kind!r} instead.")
    if kind == "prefix":
        return np.zeros(n, dtype=np.intp), np.arange(1, n + 1)
    a, b = np.triu_indices(n + 1, 1)  # row-major: a ascending, then b, as mmopt.workload.all_range
    return a, b


def gram(a: np.ndarray, b: np.ndarray, c: np.ndarray, n: int) -> np.ndarray:
    """G_c = Σᵢ cᵢ 1_{[aᵢ,bᵢ)} 1_{[aᵢ,bᵢ)}ᵀ by (1), O(n²) (edges distinct, c ≥ 0).

    >>> a, b = edges("all_range", 3)
    >>> W = np.array([[float(a_ <= s < b_) for s in range(3)] for a_, b_ in zip(a, b)])
    >>> bool(np.allclose(gram(a, b, np.ones(len(a)), 3), W.T @ W))
    True
    """
    C = np.zeros((n + 1, n + 1))
    C[a, b] = c
    # S[s, t] = Σ_{a ≤ s, b ≥ t}: cumulative over a, reverse-cumulative over b (non-negative terms only)
    S = np.cumsum(cumulative_rows(C, out=C)[:, ::-1], axis=1)[:, ::-1]
    U = S[:n, 1:]  # G_st = S[s, t + 1] for s ≤ t
    return np.triu(U) + np.triu(U, 1).T


def _edge_variances(K: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    Y = prefix_sums_2d(K, padded=True)  # Y = Q K Qᵀ: Y_jk = Σ_{s<j, t<k} K_st
    d = np.diag(Y)
    return d[a] + d[b] - 2.0 * Y[a, b]


def variances(X: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """vᵢ(X) = 1_{[aᵢ,bᵢ)}ᵀ X⁻¹ 1_{[aᵢ,bᵢ)} for a positive definite X, by Cholesky and (2).

    >>> a, b = edges("prefix", 3)
    >>> variances(np.eye(3), a, b)      # the identity: the prefix of j cells has variance j
    array([1., 2., 3.])
    """
    L = linalg.cholesky((X + X.T) / 2, lower=True, check_finite=False)
    Li = linalg.solve_triangular(L, np.eye(len(X)), lower=True, check_finite=False)
    # Y = (Li Qᵀ)ᵀ (Li Qᵀ): the column cumulative sums of L⁻¹ are L⁻¹ applied to the prefix indicators
    Z = np.zeros((len(X), len(X) + 1))
    Z[:, 1:] = np.cumsum(Li, axis=1)
    Y = Z.T @ Z
    d = np.diag(Y)
    return d[a] + d[b] - 2.0 * Y[a, b]


def _step(a, b, n, lam, mu, inv_tau):
    """T (less its round-off allowance), X (unscaled), v/τ and diag X at normalised λ, μ."""
    G = gram(a, b, lam * inv_tau, n)
    d = np.sqrt(mu)
    H = G * np.outer(d, d)
    h, V = linalg.eigh(H, check_finite=False, driver="evd")
    allowance = 4.0 * n * _EPS * float(np.linalg.norm(H))
    T_low = float(np.sum(np.sqrt(np.maximum(h - allowance, 0.0))))
    s = np.sqrt(np.maximum(h, h[-1] * _EPS))  # floors only the iterate (any X is scored exactly at the end)
    Vs = V / np.sqrt(s)[None, :]
    K = (Vs @ Vs.T) * np.outer(d, d)  # X⁻¹ = D^{1/2} H^{-1/2} D^{1/2}
    diag = (V * V) @ s / mu  # diag X, X = D^{-1/2} H^{1/2} D^{-1/2}
    return T_low, float(np.sum(s)), V, s, d, _edge_variances(K, a, b) * inv_tau, diag


def solve(kind: str, n: int, targets: np.ndarray, *, tol: float = 1e-4, max_iterations: int = 1_000) -> RangeSolution:
    """min_X max_i vᵢ(X)/τᵢ s.t. diag X ≤ 1 on prefix sums or all ranges of n cells (module docstring).

    Parameters
    ----------
    kind : {"prefix", "all_range"}
    n : int, ≤ :data:`MAX_N`
    targets : ndarray of shape (m,)
        τ > 0 per query, in the workload's row order.
    tol : float
        Relative gap at which the search stops as certified.
    max_iterations : int
        Eigendecompositions at most ("user_limit" when spent).

    Examples
    --------
    >>> s = solve("prefix", 2, np.ones(2))     # x₀ and x₀ + x₁, certified
    >>> s.status, bool(s.lower_bound <= s.objective <= s.lower_bound * (1 + 1e-4))
    ('optimal', True)
    """
    caller = "mmopt.toeplitz.maxvar.solve"
    # before anything is allocated: n = 4,097 built its (n+1)² arrays, n = 0 divided by zero, max_iterations=0
    # failed unpacking None, and tol <= 0 spent every iteration
    n = _v.check_int(n, name="n", caller=caller, high=MAX_N)
    tol = _v.check_real(tol, name="tol", caller=caller, low=0.0, low_open=True)
    max_iterations = _v.check_int(max_iterations, name="max_iterations", caller=caller)
    a, b = edges(kind, n)
    tau = _v.check_vector(targets, name="targets", caller=caller, length=len(a),
                         meaning=f"one per query of {kind}({n})", bools=False)
    if np.any(tau <= 0):  # a LinAlgError deep in the ascent before
        raise ValueError(f"The 'targets' parameter of {caller} must be > 0 (each query's variance "
                         f"target). Got {int(np.sum(tau <= 0))} entries <= 0.")
    inv_tau = 1.0 / tau
    m = len(a)
    lam, mu = np.full(m, 1.0 / m), np.full(n, 1.0 / n)

    def evaluate(lam, mu):
        T_low, T, V, s, d, v, diag = _step(a, b, n, lam, mu, inv_tau)
        scale = float(lam.sum() * mu.sum())  # 1 up to the normalisation's rounding
        return T_low * T_low / scale, T, v, diag, (V, s, d)

    status, k, lower, best_weights, best, history = ascend(evaluate, lam, mu, eta=ETA, tol=tol,
                                                           max_iterations=max_iterations)
    _, (V, s, d), top = best
    X = ((V * s[None, :]) @ V.T) / np.outer(d, d)
    # (1 − ε)X/max X_tt + εI: diag ≤ 1 still, every variance at most 1/(1 − ε) times X's, definite
    X = (1 - RIDGE) * X / top + RIDGE * np.eye(n)
    v = variances(X, a, b)
    objective = float(np.max(v * inv_tau)) * float(np.max(np.diag(X)))
    if status == "optimal" and objective > lower * (1 + tol):
        status = "optimal_inaccurate"  # the iterate's variances were less accurate than the gap
    return RangeSolution(X, objective, lower, status, k, v, best_weights[0], best_weights[1], history)
