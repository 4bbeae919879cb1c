"""The Low-Rank Mechanism (Yuan, Zhang, Winslett, Xiao, Yang, Hao, VLDB 2012): W = B L by a bi-convex program.

Notation: see README. LRM answers the r strategy queries L (r × n) with Laplace noise and reconstructs the
workload as B(Lx + noise), so with every column of L in the unit L1 ball (Δ_L ≤ 1) its unit-privacy total
error is ‖B‖_F² (times 2/ε²). The program (the seed's "choose AB ≈ W", bi-convex, O(n⁴)) is

    minimise ‖B‖_F²   subject to   W = B L,   Σᵢ |Lᵢⱼ| ≤ 1 for every column j,

solved, like the paper, by alternating over the augmented Lagrangian J(B, L, π, β) = ‖B‖_F² + ⟨π, W − BL⟩ +
β/2‖W − BL‖_F² (the step details and constants below are mmopt's, tuned on prefix and all ranges, n ≤ 256)
until W = BL holds to ``tol`` and ‖B‖_F² has stopped moving:

* B-step, closed form: B = (π + βW)(2I + β LᵀL)⁻¹ Lᵀ (an n × n solve, by the push-through identity);
* L-step: a few accelerated projected-gradient steps on β/2‖W + π/β − BL‖² over the product of L1 balls
  (each column projected by Duchi, Shalev-Shwartz, Singer and Chandra's sort, ICML 2008);
* multiplier step π ← π + β(W − BL), and β ← 1.01·β.

W enters only through its Gram: any W' with W'ᵀW' = G gives the same ‖B‖² for the same L, so the workload is
replaced by W' = diag(√σ) Q from G's eigendecomposition (k = rank G rows). The result is a heuristic (the
program is not convex): a local optimum at best. Choices the paper leaves open, made here: the relaxation
‖W − BL‖_F ≤ γ is not used — iterations continue until W = BL to ``tol`` (relative) because mmopt's exact
evaluation needs the workload in L's row space; the start is H₂ (deterministic: no seed is used) for a
full-rank workload, which the measured runs found far better than the SVD start (prefix, n = 64: 3.5× the
SVD bound against 4.3×), and Σ^{1/2}Vᵀ padded to ``rank`` rows for a low-rank one, the case LRM is made for.
:func:`mmopt.optimize` then scores L exactly: with least squares it uses B = W L⁺, which is never worse than
the B found here.
"""

from __future__ import annotations

import logging
import math
import time

import numpy as np

from mmopt import strategy as st
from mmopt._base import guards as g
from mmopt._base.solution import RawSolution
from mmopt._base.validation import check_gram_magnitude, check_matrix
from mmopt.search.eigen_design import eigen_weights

__all__ = ["SOLVER_NAME", "project_l1_columns", "solve_lrm"]

_LOG = logging.getLogger("mmopt")
SOLVER_NAME = "mmopt-lrm-alm"
_CALLER = "optimize(method='lrm')"
DEFAULT_MAX_ITERATIONS = 2000
DEFAULT_TOL = 1e-9
_INNER = 5           # projected-gradient steps per L-step (the paper's inner solver; 5 measured enough)
_BETA_START = 10.0   # β₀ = 10·‖B₀‖²/‖W‖²: the penalty starts above the objective, so L keeps W's row space
_BETA_GROWTH = 1.01
_STALL = 1e-7        # relative change of ‖B‖² per iteration counted as "stopped moving"


def project_l1_columns(L: np.ndarray, radius: float = 1.0) -> np.ndarray:
    """Each column of ``L`` projected onto {v : ‖v‖₁ ≤ radius} (Euclidean projection; Duchi et al. 2008).

    Examples
    --------
    >>> project_l1_columns(np.array([[3.0, 0.2], [1.0, -0.3]])).tolist()
    [[1.0, 0.2], [0.0, -0.3]]
    """
    out = np.array(L, dtype=float)
    A = np.abs(out)
    over = A.sum(axis=0) > radius
    if not np.any(over):
        return out
    U = -np.sort(-A[:, over], axis=0)
    css = np.cumsum(U, axis=0) - radius
    idx = np.arange(1, U.shape[0] + 1)[:, None]
    cond = U - css / idx > 0
    rho = cond.shape[0] - 1 - np.argmax(cond[::-1], axis=0)  # the last index where the condition holds
    shift = css[rho, np.arange(U.shape[1])] / (rho + 1)
    out[:, over] = np.sign(out[:, over]) * np.maximum(A[:, over] - shift, 0.0)
    return out


def _start(init, s, Q, rank, n):
    """The initial L (and the name of the start), every column scaled into the unit L1 ball."""
    k = s.size
    if init == "auto":
        init = "hierarchical" if (k == n and rank is None) else "svd"
    if init == "hierarchical":
        L = st.hierarchical(n).matrix
    elif init == "identity":
        L = np.eye(n)
    else:  # "svd": Theorem 5.25's Σ^{1/2}Vᵀ (rows σᵢ^{1/4} qᵢ), padded with zero rows to the rank asked for
        r = rank if rank is not None else math.ceil(1.2 * k)
        L = np.zeros((max(r, k), n))
        L[:k] = (s ** 0.25)[:, None] * Q
    if rank is not None and L.shape[0] != rank:
        raise ValueError(f"The 'rank' option of {_CALLER} is {rank}, but the {init!r} start has {L.shape[0]} rows. "
                         "Use options={'init': 'svd'} to choose the rank, or drop 'rank'.")
    return L / float(np.max(np.abs(L).sum(axis=0))), init


def _lipschitz(B, v):
    """‖BᵀB‖₂ by power iteration warm-started at ``v`` (returned too), raised 5% so steps stay below 1/L."""
    for _ in range(30):
        w = B.T @ (B @ v)
        nw = float(np.linalg.norm(w))
        if nw == 0.0:
            return 1.0, v
        v = w / nw
    return 1.05 * nw, v


def solve_lrm(G: np.ndarray, *, rank: int | None = None, init: str = "auto", tol: float | None = None,
              max_iterations: int | None = None, verbose: bool = False, rows=None) -> RawSolution:
    """LRM's strategy L for the Gram ``G`` by the augmented-Lagrangian alternation (module docstring).

    Parameters
    ----------
    G : ndarray of shape (n, n)
        WᵀW (:func:`mmopt.optimize` passes it normalised to mean diagonal 1).
    rank : int or None
        r, the rows of L. None: 2n − 1 (the H₂ start) for a full-rank workload, ⌈1.2·rank G⌉ otherwise.
        It must be at least rank G, or no L supports W.
    init : {"auto", "hierarchical", "svd", "identity"}
        The start (module docstring). The identity is a stationary point of the iteration for many workloads
        (B = W satisfies every step), so it rarely moves.
    tol : float or None
        Relative feasibility ‖W − BL‖_F/‖W‖_F required (default 10⁻⁹).
    max_iterations : int or None
        Outer iterations (default 2,000).
    verbose : bool
        Log every 100 iterations on the "mmopt" logger at INFO (else DEBUG).

    Returns
    -------
    RawSolution
        ``matrix`` = L (rows projected onto W's row space when the workload is rank-deficient, so that
        it supports W exactly). ``status`` "local_optimum" when W = BL to ``tol`` and ‖B‖² stopped moving,
        "user_limit" when ``max_iterations`` ended it first. ``extra``: ``B`` (for W'), ``lrm_objective`` =
        ‖B‖² (an upper bound on the exact objective), ``residual``, ``rank``, ``init``.

    Examples
    --------
    >>> from mmopt import workload as wl
    >>> G = wl.prefix(8).mean_gram * 8
    >>> sol = solve_lrm(G)
    >>> sol.status, sol.extra["residual"] <= 1e-9, bool(np.abs(sol.matrix).sum(axis=0).max() <= 1 + 1e-12)
    ('local_optimum', True, True)
    """
    t0 = time.perf_counter()
    log = _LOG.info if verbose else _LOG.debug
    tol = DEFAULT_TOL if tol is None else float(tol)
    max_iterations = DEFAULT_MAX_ITERATIONS if max_iterations is None else int(max_iterations)
    G = check_matrix(G, name="G", caller=_CALLER, square=True)
    check_gram_magnitude(G, name="G", caller=_CALLER)
    n = G.shape[0]
    r_max = max(2 * n - 1, rank or 0, math.ceil(1.2 * n))
    g.check_working_set({"eigenvectors and W": 2 * n * n, "L, its start and the step": 3 * r_max * n,
                         "B, π and the residual": 3 * n * r_max, "LᵀL": n * n}, what="the LRM iteration",
                        caller=_CALLER, remedy=" Use a smaller workload, or method='eigen_design' / 'l2_approx'.")
    s, Q = eigen_weights(G, rows)  # W's SVD when its rows are given (eigen_weights: light queries kept)
    k = s.size
    if k == 0:
        raise ValueError(f"{_CALLER}: the workload's Gram is zero; there is nothing to measure.")
    if rank is not None and rank < k:
        raise ValueError(f"The 'rank' option of {_CALLER} must be at least the workload's rank {k} (otherwise no "
                         f"strategy of {rank} rows answers it exactly). Got {rank} instead.")
    W = np.sqrt(s)[:, None] * Q
    L, init = _start(init, s, Q, rank, n)
    nW2 = float(np.sum(W * W))
    B = W @ np.linalg.pinv(L)
    beta = _BETA_START * float(np.sum(B * B)) / nW2
    pi = np.zeros_like(W)
    v = np.ones(L.shape[0]) / math.sqrt(L.shape[0])
    history, status, f_prev, it = [], "user_limit", np.inf, 0
    for it in range(1, max_iterations + 1):
        # B-step: B(2I + βLLᵀ) = (π + βW)Lᵀ, i.e. B = (π + βW)(2I + βLᵀL)⁻¹Lᵀ
        C = (pi + beta * W)
        B = np.linalg.solve(2.0 * np.eye(n) + beta * (L.T @ L), C.T).T @ L.T
        # L-step: accelerated projected gradient on ½‖R − BL‖² (the β factor cancels in the step 1/‖BᵀB‖)
        R = W + pi / beta
        lip, v = _lipschitz(B, v)
        Y, prev, t = L, L, 1.0
        for _ in range(_INNER):
            nxt = project_l1_columns(Y - (B.T @ (B @ Y - R)) / lip)
            t_next = (1.0 + math.sqrt(1.0 + 4.0 * t * t)) / 2.0
            Y = nxt + ((t - 1.0) / t_next) * (nxt - prev)
            prev, t = nxt, t_next
        L = prev
        res = W - B @ L
        pi = pi + beta * res
        beta *= _BETA_GROWTH
        f = float(np.sum(B * B))
        rel = math.sqrt(float(np.sum(res * res)) / nW2)
        if it % 100 == 0 or it == 1:
            history.append({"iteration": it, "objective": f, "residual": rel, "beta": beta})
            log("%s: iteration %d, ‖B‖² %.6g, residual %.2e", _CALLER, it, f, rel)
        if rel <= tol and abs(f_prev - f) <= _STALL * f:
            status = "local_optimum"
            break
        f_prev = f
    if k < n:  # keep W's row space exactly: drop the part of L outside it (round-off, for a converged run)
        L = (L @ Q.T) @ Q
    # for a full-rank W too: a weighted union (identity at 0.01 beside the total) ran out of iterations with L of
    # rank 1, and evaluate then refused "strategy 'lrm'" telling the user to add rows to A
    if np.linalg.matrix_rank(L @ Q.T) < k:
        raise ValueError(f"{_CALLER}: the iteration stopped ({status}, residual {rel:.1e}) before L spanned the "
                         f"workload's row space (rank {k}), so no reconstruction answers W. Raise max_iterations "
                         "or 'rank'; the alternation can stall where the queries' weights differ by orders of "
                         "magnitude (identity at 0.01 beside the total: still short after 20,000 iterations), where "
                         "method='l2_approx' or 'auto' solve it.")
    message = (f"Low-Rank Mechanism (Yuan et al. 2012): augmented-Lagrangian alternation over W = BL with every "
               f"column of L (r = {L.shape[0]} rows, start {init!r}) in the unit L1 ball; a heuristic for a "
               "non-convex (bi-convex) program. " +
               (f"Converged after {it} iterations: W = BL to {rel:.1e} and ‖B‖² stopped moving." if
                status == "local_optimum" else
                f"Stopped by max_iterations={max_iterations} at residual {rel:.1e}; raise it."))
    return RawSolution(L, None, status, message, it, SOLVER_NAME, None, tuple(history),
                       {"B": B, "lrm_objective": f, "residual": rel, "rank": L.shape[0], "init": init,
                        "seconds_solve": time.perf_counter() - t0})
