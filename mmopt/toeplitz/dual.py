"""The certified (ε,δ) optimum for prefix sums and all ranges in O(n²) per iteration: the L2 program's dual with
the workload's tridiagonal inverse Gram.

Notation: see README and :mod:`mmopt.search.l2_fast`. Program 5.2 is min tr(G X⁻¹) s.t. diag X ≤ 1; its dual
g(λ) = 2 tr M^{1/2} − Σλ, M = Λ^{1/2} G Λ^{1/2}, is what :func:`mmopt.search.l2_fast.solve_l2` maximises with one dense
eigendecomposition, O(n³), per iteration. For these two workloads G⁻¹ is tridiagonal:

* prefix (W lower-triangular ones, G_ij = n − max(i, j) 0-indexed): W⁻¹ is the first-difference matrix, so
  G⁻¹ = W⁻¹W⁻ᵀ = tridiag(−1, [1, 2, …, 2], −1);
* all ranges: G = (n + 1)·L⁻¹ (:mod:`mmopt.toeplitz.bound`), so G⁻¹ = tridiag(−1, 2, −1)/(n + 1).

Hence T = M⁻¹ = Λ^{−1/2} G⁻¹ Λ^{−1/2} is tridiagonal, and its eigendecomposition T = Q diag(τ) Qᵀ (MRRR,
LAPACK stemr) takes O(n²). Everything else is O(n²) too:

* dual bound: max over c > 0 of g(cλ) = S²/Σλ, S = tr M^{1/2} = Σ_k τ_k^{−1/2};
* gradient: d = diag X(λ), X(λ) = Λ^{−1/2} M^{1/2} Λ^{−1/2}, so d_i = Σ_k Q_ik² τ_k^{−1/2} / λ_i;
* primal: X̃ = D^{−1/2} X(λ) D^{−1/2} (D = diag d) has unit diagonal (Δ₂ = 1) and
  tr(G X̃⁻¹) = Σ_k √τ_k q̂_kᵀ G q̂_k, q̂_k = (ΛD)^{1/2} Q e_k, with G applied by two cumulative sums
  (:mod:`mmopt.dense.gram_operator`).

The update log λ ← log λ + 2 log d is :func:`mmopt.search.l2_fast.solve_l2`'s fixed point (exact for diagonal G),
accelerated by Anderson mixing of the last three steps (:func:`_anderson`); it starts from the weights of the
diagonal bound (:func:`mmopt.toeplitz.bound.gram_sqrt_diagonal`), which is one
fixed-point step from λ = 1. Every iterate yields a certified lower bound and a feasible strategy, so the gap
between the best of each is a certificate whatever the steps do. The strategy A = diag(τ^{−1/4}) Qᵀ (ΛD)^{−1/2}
(AᵀA = X̃) is dense: this is the certified optimum where n² numbers fit (n ≤ :data:`MAX_N`), the reference for
the closed forms of :mod:`mmopt.toeplitz.weighted`, which reach any n.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.linalg.lapack

from mmopt._base import validation as v
from mmopt.dense import gram_operator
from mmopt.toeplitz import bound
from mmopt.toeplitz.error import as_stream_workload

__all__ = ["MAX_N", "SOLVER_NAME", "DualSolution", "inverse_gram", "quadratic_forms", "solve_dual"]

SOLVER_NAME = "mmopt-l2-tridiagonal"
#: The eigenvectors Q are the one n×n array (8·n² bytes: 0.5 GB at n = 8,192, 2.1 GB at 16,384, which is past
#: mmopt's default allocation limit of 1.6 GB; raise mmopt._base.validation.MAX_ALLOCATION_ENTRIES to go there).
MAX_N = 16_384
_MEMORY = 3
_CHUNK = 256  # columns of Q per block in the primal's quadratic forms


@dataclass(frozen=True)
class DualSolution:
    """The certified L2 optimum of prefix(n) or all_range(n) at unit privacy.

    Attributes
    ----------
    kind : {"prefix", "all_range"}
    n : int
    matrix : ndarray of shape (n, n)
        The strategy A (unit column norms: Δ₂ = 1).
    primal : float
        tr(G (AᵀA)⁻¹), the error of ``matrix`` (an upper bound on the optimum).
    dual : float
        A lower bound on the optimum certified in floating point, as :func:`mmopt.search.l2_fast.solve_l2`'s: the
        dual at
        the best iterate, less a round-off allowance of 256·n·u (relative).
    status : {"optimal", "user_limit"}
        "optimal" when (primal − dual)/primal ≤ ``tol``.
    iterations : int
    seconds : float
    weights : ndarray of shape (n,)
        The dual variable λ of the strategy (normalised to Σλ = n).
    history : tuple of dict
        iteration, primal, dual, gap (best so far), seconds.
    """

    kind: str
    n: int
    matrix: np.ndarray
    primal: float
    dual: float
    status: str
    iterations: int
    seconds: float
    weights: np.ndarray
    history: tuple

    @property
    def gap(self) -> float:
        return (self.primal - self.dual) / self.primal


def inverse_gram(kind: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(diagonal, off-diagonal) of G⁻¹ for G = WᵀW of prefix(n) or all_range(n), 0-indexed.

    Examples
    --------
    >>> a, b = inverse_gram("prefix", 3)
    >>> G = 3.0 - np.maximum.outer(np.arange(3), np.arange(3))
    >>> bool(np.allclose(G @ (np.diag(a) + np.diag(b, 1) + np.diag(b, -1)), np.eye(3)))
    True
    """
    if kind == "prefix":
        a = np.full(n, 2.0)
        a[0] = 1.0
        return a, np.full(n - 1, -1.0)
    return np.full(n, 2.0 / (n + 1)), np.full(n - 1, -1.0 / (n + 1))


def quadratic_forms(kind: str, V: np.ndarray) -> np.ndarray:
    """vᵀ G v for every column v of V (n×k), G applied in O(nk) (:mod:`mmopt.dense.gram_operator`)."""
    G = (gram_operator.prefix_gram if kind == "prefix" else gram_operator.all_range_gram)(V.shape[0])
    return np.einsum("ik,ik->k", V, G.matmat(V))


def _start(kind: str, n: int) -> np.ndarray:
    """λ ∝ h², h = diag(G^{1/2}) (the diagonal bound's weights), in this module's 0-indexed frame (cell order)."""
    return bound.gram_sqrt_diagonal(n, kind) ** 2


def _iterate(a, b, lam, kind):
    """(S, d, primal) at λ, and the strategy's pieces τ, Q (module docstring); Q is the only n×n array."""
    r = 1.0 / np.sqrt(lam)
    e = np.zeros(len(lam))
    e[:-1] = b * r[:-1] * r[1:]
    # LAPACK's dstemr directly: scipy.linalg.eigh_tridiagonal's wrapper holds a second n×n copy of Q
    m, tau, Q, info = scipy.linalg.lapack.dstemr(a * r * r, e, 0, 0.0, 0.0, 0, 0, compute_v=1)
    if info != 0 or m != len(lam) or tau[0] <= 0:  # T is positive definite in exact arithmetic
        raise FloatingPointError(f"the tridiagonal eigensolver (LAPACK dstemr) failed: info {info}, {m} of "
                                 f"{len(lam)} eigenvalues, smallest {tau[0]:.3g}")
    s = tau ** -0.5
    d = np.einsum("ik,ik,k->i", Q, Q, s) / lam
    w = np.sqrt(lam * d)[:, None]
    forms = np.concatenate([quadratic_forms(kind, Q[:, j:j + _CHUNK] * w)
                            for j in range(0, len(lam), _CHUNK)])
    return float(s.sum()), d, float(forms @ np.sqrt(tau)), tau, Q


def _anderson(memory: list, mu: np.ndarray, f: np.ndarray) -> np.ndarray:
    """The step for μ: Anderson acceleration (type II, the last :data:`_MEMORY` pairs) of μ ← μ + f, f = 2 log d.

    Measured on prefix sums: 13–15 iterations to a gap of 1e-9 at n = 1,024–4,096, against 23–36 for the plain
    (over-relaxed) fixed point. Steps are clipped to |Δμ| ≤ 30 against overflow.
    """
    memory.append((mu, f))
    del memory[:-(_MEMORY + 1)]
    step = f
    if len(memory) > 1:
        dX = np.stack([b[0] - a[0] for a, b in zip(memory, memory[1:], strict=False)], axis=1)
        dF = np.stack([b[1] - a[1] for a, b in zip(memory, memory[1:], strict=False)], axis=1)
        gamma = np.linalg.lstsq(dF, f, rcond=None)[0]
        step = f - (dX + dF) @ gamma
    return np.clip(step, -30.0, 30.0)


def solve_dual(workload, *, tol: float = 1e-8, max_iterations: int = 200) -> DualSolution:
    """The certified L2 optimum (Program 5.2) of prefix(n) or all_range(n), n ≤ :data:`MAX_N` (module docstring).

    Parameters
    ----------
    workload : mmopt.toeplitz.prefix(n) / all_range(n), or the dense mmopt.workload.prefix(n) / all_range(n)
    tol : float, default 1e-8
        Target relative gap (primal − dual)/primal.
    max_iterations : int, default 200
        Each costs one tridiagonal eigendecomposition and O(n²) work (about 1 s at n = 4,096 on one core).

    Examples
    --------
    >>> from mmopt import toeplitz
    >>> sol = solve_dual(toeplitz.prefix(256))
    >>> sol.status, bool(sol.gap <= 1e-8), sol.matrix.shape
    ('optimal', True, (256, 256))
    """
    caller = "solve_dual"
    W = as_stream_workload(workload, caller)
    tol = v.check_real(tol, name="tol", caller=caller, low=0.0, low_open=True)
    max_iterations = v.check_int(max_iterations, name="max_iterations", caller=caller, low=1)
    n, kind = W.n, W.kind
    if n > MAX_N:
        raise ValueError(f"{caller}: n = {n:,} is above {MAX_N:,}; this solver keeps n×n eigenvectors. Past it use "
                         "optimize(workload, method='weighted_sqrt'), certified by the diagonal bound at any n.")
    v.check_allocation(n * n, what=f"the {n:,}×{n:,} eigenvectors", caller=caller)
    t0 = time.perf_counter()
    a, b = inverse_gram(kind, n)
    lam = _start(kind, n)
    lam *= n / lam.sum()
    best_primal, best_lam, dual, history, status, k = np.inf, lam, 0.0, [], "user_limit", 0
    mu = np.log(lam)
    memory: list[tuple[np.ndarray, np.ndarray]] = []  # Anderson's last (μ, F(μ) − μ) pairs
    previous = (np.inf, 0.0)
    for k in range(1, max_iterations + 1):  # noqa: B007 (k is the iteration count)
        last = None  # only one iterate's eigenvectors are held at a time: peak memory n² numbers
        evaluated = lam = np.exp(mu - mu.max())
        lam *= n / lam.sum()
        S, d, primal, tau, Q = last = _iterate(a, b, lam, kind)
        # Round-off allowance, 256·n·u relative (6e-11 at n = 2,048): the eigenvalues that dominate S are T's
        # smallest, which stemr resolves to high relative accuracy here; S agreed with Σ √ω_k from a dense eigh
        # of M to 1.1e-11 (prefix) and 1.4e-11 (all ranges) at n = 2,048.
        g = S * S / lam.sum() * (1.0 - 256 * n * np.finfo(float).eps)
        dual = max(dual, g)
        if primal < best_primal:
            best_primal, best_lam = primal, lam
        gap = (best_primal - dual) / best_primal
        history.append({"iteration": k, "primal": primal, "dual": g, "gap": gap,
                        "seconds": time.perf_counter() - t0})
        del Q, tau
        if gap <= tol:
            status = "optimal"
            break
        if primal > previous[0] and g < previous[1]:
            memory.clear()  # the extrapolation made both sides worse: restart it from plain steps
        previous = (primal, g)
        mu = np.log(lam)
        mu -= mu.mean()
        f = 2.0 * np.log(d)
        f -= f.mean()  # λ is defined up to scale (the bound takes the best c·λ), so are μ and the step
        mu = mu + _anderson(memory, mu, f)
    if best_lam is not evaluated:  # the best strategy was an earlier iterate: recompute its eigenvectors
        last = None
        last = _iterate(a, b, best_lam, kind)
    _, d, primal, tau, Q = last
    del last
    # A = diag(τ^{−1/4}) Qᵀ (ΛD)^{−1/2}, in place: Q is Fortran-ordered, so Qᵀ is a C-ordered view
    Q *= (1.0 / np.sqrt(best_lam * d))[:, None]
    A = Q.T
    A *= (tau ** -0.25)[:, None]
    # diag AᵀA = 1 up to round-off; dividing by the largest column norm keeps Δ₂ ≤ 1 exactly, and the error
    # scales by its square.
    norm = float(np.sqrt(np.max(np.einsum("ij,ij->j", A, A))))
    A /= norm
    primal *= norm * norm
    return DualSolution(kind, n, A, float(primal), float(min(dual, primal)), status, k, time.perf_counter() - t0,
                        best_lam, tuple(history))
