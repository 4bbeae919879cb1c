"""Local search for ε-DP MinError: p-Identity L-BFGS-B with restarts, and a signed polish of any strategy.

Notation: see README. In function bodies G = WᵀW (n×n) is the workload Gram, A (p×n) the strategy,
X = AᵀA, Δ = ‖A‖₁ the maximum column L1 norm, and T (p×n) the extra rows of a p-Identity strategy.
Both searches keep Δ ≤ 1 by construction, so they minimise the unit-privacy MinError objective
Δ² tr(G X⁻¹) (Problem 5.15) as the smooth function tr(G X⁻¹).
"""

from __future__ import annotations

import functools
import logging
import numbers
import time
from dataclasses import dataclass

import numpy as np

from mmopt._base.parallel import check_n_jobs, ordered_map, plan, seed_children
from mmopt._base.solution import CONVERGED_MEANS, RawSolution, worst_status
from mmopt._base.validation import check_gram_magnitude
from mmopt.dense.profile import numerical_rank
from mmopt.error import NumericalError, unit_objective
from mmopt.search._local_objectives import (
    full_rank,
    general_matrix,
    general_objective,
    lbfgs,
    pidentity_matrix,
    pidentity_objective,
    split,
)

__all__ = ["minimize_l1", "general_objective", "pidentity_objective"]  # the objectives: for tests

_LOG = logging.getLogger("mmopt")
_FUNC = "minimize_l1"


@dataclass(frozen=True, eq=False)
class _Job:
    """What every restart shares: the search mode, G, the shapes, the polish start A1 and root F of G
    (F Fᵀ = G on its range), the objective scale and L-BFGS-B's budget. Pickled once per task."""

    mode: str
    G: np.ndarray
    p: int
    n: int
    A1: np.ndarray | None
    F: np.ndarray | None
    scale: float
    max_iterations: int
    tol: float


def _restart(k: int, child: np.random.SeedSequence, job: _Job):
    """Restart k, drawing only from ``child``: (A with Δ = 1, its exact objective, iterations, status, seconds).

    p-Identity: HDMM's start (U uniform on [0, 1], V = 0) on even runs; odd runs also draw V: signed starts
    reach other local optima (the only ones beating I at n = 8, p = 8) and match V = 0 for larger n.
    Polish: run 0 starts at A1, the others at random perturbations of it.
    """
    t0 = time.perf_counter()
    rng = np.random.default_rng(child)
    p, n = job.p, job.n
    if job.mode == "p-identity":
        objective = functools.partial(pidentity_objective, G=job.G, p=p, n=n)
        to_matrix = functools.partial(pidentity_matrix, p=p, n=n)
        z0 = np.r_[rng.random(p * n), 0.5 * rng.random(p * n) if k % 2 else np.zeros(p * n)]
    else:
        objective = functools.partial(general_objective, F=job.F, m=p, n=n)
        to_matrix = functools.partial(general_matrix, p=p, n=n)
        A = job.A1 if k == 0 else (job.A1 * (1 + 0.2 * rng.standard_normal(job.A1.shape))
                                   + 0.01 * rng.standard_normal(job.A1.shape))
        z0 = split(A / np.abs(A).sum(axis=0).max())
    z, _, nit, status = lbfgs(objective, z0, job.scale, job.max_iterations, job.tol)
    A = to_matrix(z)
    A = A / np.abs(A).sum(axis=0).max()
    # Choose among runs by the exact error of the returned A, not the optimiser's Woodbury value.
    return A, float(_score(A, job.G)), nit, status, time.perf_counter() - t0


def _score(A, G):
    """The exact Δ² tr(G X⁺) of a run's A; +∞ (never chosen) when float64 cannot resolve it."""
    try:
        return unit_objective(A, G)
    except NumericalError:
        return np.inf


def _run_summary(statuses, max_iterations):
    """'5 of 8 restarts hit max_iterations=1000; ...': which runs ended how, and what to do about it."""
    k, parts = len(statuses), []
    if (hit := statuses.count("user_limit")):
        parts.append(f"{hit} of {k} restarts hit max_iterations={max_iterations}; raise it for a tighter local "
                     "optimum.")
    if (stalled := statuses.count("optimal_inaccurate")):
        parts.append(f"{stalled} of {k} restarts stopped in a line search that found no decrease (stationary to "
                     "rounding, not to tol).")
    return " ".join(parts) or f"All {k} restarts converged."


def _invalid(name, expected, got):
    return ValueError(f"The '{name}' parameter of {_FUNC} must {expected}. Got {got} instead.")


def _positive_int(value, name, allow_none=False):
    if value is None and allow_none:
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise _invalid(name, "be a positive integer", repr(value))
    return int(value)


def _check_gram(gram):
    G = np.asarray(gram, dtype=float)
    if G.ndim != 2 or G.shape[0] != G.shape[1] or G.shape[0] == 0:
        raise _invalid("gram", "be a square, non-empty 2-D array (G = WᵀW)", f"shape {G.shape}")
    if not np.all(np.isfinite(G)):
        raise _invalid("gram", "be finite", "a NaN or infinite entry")
    check_gram_magnitude(G, caller=_FUNC)
    asym = np.abs(G - G.T).max()
    if asym > 1e-8 * max(1.0, np.abs(G).max()):
        raise _invalid("gram", "be symmetric (G = WᵀW)", f"maximum asymmetry {asym:.3g}")
    G = (G + G.T) / 2.0
    lam, Q = np.linalg.eigh(G)
    if lam[0] < -1e-10 * max(1.0, lam[-1]):
        raise _invalid("gram", "be positive semidefinite (G = WᵀW)", f"minimum eigenvalue {lam[0]:.3g}")
    return G, lam, Q


def _check_initial(initial, n, p, G):
    A0 = np.asarray(initial, dtype=float)
    if A0.ndim != 2 or A0.shape[1] != n:
        raise _invalid("initial", f"be a 2-D strategy with n = {n} columns, like 'gram'", f"shape {A0.shape}")
    if not np.all(np.isfinite(A0)):
        raise _invalid("initial", "be finite", "a NaN or infinite entry")
    if p is not None and p != A0.shape[0]:
        raise _invalid("p", f"equal the number of rows of 'initial' ({A0.shape[0]}) or be omitted", p)
    delta = np.abs(A0).sum(axis=0).max()
    f0 = unit_objective(A0, G) if delta > 0 else np.inf
    if not np.isfinite(f0):  # a rank-deficient A0 is fine as long as its row space contains range(G)
        rank = numerical_rank(np.linalg.svd(A0, compute_uv=False), A0.shape) if delta > 0 else 0
        raise ValueError(f"The 'initial' parameter of {_FUNC} must support the workload: its row space must "
                         f"contain range(G) (full column rank when G is invertible). Got rank {rank} of n = {n}, "
                         "which leaves part of G outside it. Add rows, e.g. a scaled identity.")
    return A0 / delta, f0


def minimize_l1(gram, *, initial=None, p=None, restarts=1, max_iterations=1000, tol=1e-9, seed=None,
                verbose=False, n_jobs=None) -> RawSolution:
    r"""Search locally for a strategy with small ε-DP (Laplace) total error; a heuristic for MinError.

    Parameters
    ----------
    gram : array_like of shape (n, n)
        The workload Gram matrix G = WᵀW (symmetric positive semidefinite).
    initial : array_like of shape (p0, n) or None, default=None
        None searches p-Identity strategies from random starts. A strategy A0 that supports G (full column
        rank, or any rank when range(G) lies in its row space) is instead polished: every entry (signs
        allowed) moves, under column L1 norms ≤ 1. A rank-deficient A0 gets rows α·Nᵀ spanning its null
        space first, which leave its error unchanged (see Notes).
    p : int or None, default=None
        Number of extra rows of a p-Identity strategy, which has n + p rows. None means max(4, n // 16):
        n // 16 is HDMM's choice for range workloads and was the best of n/32, n/16, n/8 on all-range and
        prefix workloads for n = 32 to 256. When polishing, leave it None (or equal to p0).
    restarts : int, default=1
        Independent L-BFGS-B runs; the best is returned. For p-Identity, U starts uniform on [0, 1] and
        V at 0 (even runs) or uniform on [0, 0.5] (odd runs). When polishing, run 0 starts at A0 and the
        others at random perturbations of it.
    max_iterations : int, default=1000
        L-BFGS-B iteration limit per run.
    tol : float, default=1e-9
        Stop when the relative decrease of the objective, or the largest projected gradient entry of the
        objective divided by tr G, falls below ``tol``.
    seed : int, numpy.random.SeedSequence, numpy.random.Generator or None, default=None
        Seed of the random starts: run k draws only from ``numpy.random.SeedSequence(seed).spawn(restarts)[k]``
        (a Generator is consumed to seed that root), so the same seed gives the same result whatever
        ``n_jobs``.
    verbose : bool, default=False
        Log each run on the ``"mmopt"`` logger at INFO (else DEBUG) level, and show a progress bar over the
        runs if tqdm is installed.
    n_jobs : int or None, default=None
        Runs at once, joblib's convention (:mod:`mmopt._base.parallel`): None or 1 runs them one after the other
        (None follows an enclosing ``joblib.parallel_config``, e.g. ``backend="dask"``), -1 on every core.

    Returns
    -------
    RawSolution
        ``matrix``: A with maximum column L1 norm 1. ``status``: the least converged run's ("optimal" only
        if every run met ``tol``, a local optimum; "user_limit" if any hit ``max_iterations``, since it
        might have ended lower; else "optimal_inaccurate" if a line search stalled); the message counts
        the runs of each kind. ``history``: per run, restart, objective (exact Δ² tr(G X⁺) by
        :func:`mmopt.error.unit_objective`), iterations, status, seconds.
        ``extra``: seconds, p (extra rows, or rows of A when polishing), mode ("p-identity" or "polish"),
        identity_fallback, n_jobs and backend (the workers and joblib backend that ran the restarts).

    Raises
    ------
    ValueError, TypeError
        If ``gram`` is not a finite symmetric PSD matrix, ``initial`` has the wrong shape, is not finite
        or does not support G, or ``p``, ``restarts``, ``max_iterations``, ``tol``, ``seed`` or ``n_jobs``
        is invalid.

    Notes
    -----
    MinError is not convex, so the result is a local optimum with no optimality certificate. The error is
    invariant under A → cA, so both modes keep Δ ≤ 1 by construction and run L-BFGS-B on a smooth function
    of z = (U, V) ≥ 0, where splitting entries into positive and negative parts makes the L1 norm smooth:

    .. math::

        \min_A \|A\|_1^2 \operatorname{tr}\bigl(G (A^T A)^{-1}\bigr) \le
        \min_{U, V \ge 0} \operatorname{tr}\bigl(G (A^T A)^{-1}\bigr), \qquad A = B D^{-1},

    with B = [I; U − V], D = diag(1 + 1ᵀ(U + V)) for p-Identity (HDMM's OPT_0, signs allowed) and
    B = U − V, D = diag(1ᵀ(U + V)) when polishing. The gradient ∂f/∂A = −2 A X⁻¹ G X⁻¹ is chained through D.
    Woodbury makes a p-Identity evaluation O(pn²); polishing costs O(n³). A numerically singular X counts
    as +∞, so a rank-deficient A0 (e.g. the workload's own rows, optimal for a rank-deficient W) starts
    from [A0; α Nᵀ], N spanning null(A0): G N = 0 makes its error that of A0, and the polish may shrink
    those rows again; if it finds nothing better, A0 itself is returned. The identity (U = V = 0) is a
    stationary point of the p-Identity search; if every run ends worse, the identity with p zero rows is
    returned.

    References
    ----------
    C. Li, M. Hay, V. Rastogi, G. Miklau and A. McGregor, "Optimizing linear counting queries under
    differential privacy", PODS 2010, §5 (Problem 5.15, Program 5.1).
    R. McKenna, G. Miklau, M. Hay and A. Machanavajjhala, "Optimizing error of high-dimensional
    statistical queries under differential privacy", VLDB 2018, §4 (OPT_0, p-Identity strategies).

    Examples
    --------
    >>> import numpy as np
    >>> from mmopt.search.local_search import minimize_l1
    >>> G = np.eye(8)
    >>> sol = minimize_l1(G, seed=0)
    >>> A = sol.matrix
    >>> bool(np.trace(np.linalg.solve(A.T @ A, G)) <= 8 + 1e-6)
    True
    >>> round(float(np.abs(A).sum(axis=0).max()), 12)
    1.0
    """
    began = time.perf_counter()
    G, lam, Q = _check_gram(gram)
    n = G.shape[0]
    p = _positive_int(p, "p", allow_none=True)
    restarts = _positive_int(restarts, "restarts")
    max_iterations = _positive_int(max_iterations, "max_iterations")
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real) or not 0.0 < tol < 1.0:
        raise _invalid("tol", "be a number in (0, 1)", repr(tol))
    children = seed_children(seed, restarts, caller=_FUNC)
    n_jobs = check_n_jobs(n_jobs, caller=_FUNC)
    log = _LOG.info if verbose else _LOG.debug
    # Dividing by tr G (the identity's error) makes tol mean the same for every workload scale.
    scale = float(np.trace(G)) if np.trace(G) > 0 else 1.0

    if initial is None:
        mode, p = "p-identity", (max(4, n // 16) if p is None else p)
        job = _Job(mode, G, p, n, None, None, scale, max_iterations, tol)
        how = f"over p-Identity strategies [I; T]D⁻¹ with p = {p} extra rows"
    else:
        A0, f0 = _check_initial(initial, n, p, G)
        A1 = full_rank(A0)
        mode, p = "polish", A1.shape[0]
        keep = lam > 1e-12 * max(lam[-1], 0.0)
        job = _Job(mode, G, p, n, A1, Q[:, keep] * np.sqrt(lam[keep]), scale, max_iterations, tol)
        how = "polishing the given strategy under column L1 norms ≤ 1"

    workers, backend = plan(n_jobs, restarts)
    history, iterations, best = [], 0, (np.inf, None)
    runs = ordered_map(_restart, ((k, child, job) for k, child in enumerate(children)), n_jobs=n_jobs,
                       desc=f"minimize_l1 {mode} restarts", progress=verbose)
    # In restart order, replacing only on a strict improvement: ties go to the lowest restart whatever n_jobs.
    for k, (A, f, nit, status, seconds) in enumerate(runs):
        iterations += nit
        history.append({"restart": k, "objective": f, "iterations": nit, "status": status, "seconds": seconds})
        log("minimize_l1 %s: restart %d of %d: objective %.8g after %d iterations (%s), %.2f s", mode, k + 1,
            restarts, f, nit, status, seconds)
        if f < best[0]:
            best = (f, A)

    f, A = best
    if mode == "polish" and not f <= f0:  # rounding aside, run 0 already starts at A0
        f, A = f0, A0
    fallback = mode == "p-identity" and not f <= np.trace(G)
    if fallback:
        f, A = float(np.trace(G)), np.vstack([np.eye(n), np.zeros((p, n))])
        log("minimize_l1: every run ended worse than the identity, a stationary point; returning it")
    how += " (the identity, which beat every run)" if fallback else ""
    # Even the best run's own test is not enough: a run cut short by the budget might have ended lower.
    status = worst_status(h["status"] for h in history)
    summary = _run_summary([h["status"] for h in history], max_iterations)
    message = (f"Local optimum of a non-convex problem: best of {restarts} L-BFGS-B run(s) {how}; "
               f"a heuristic with no optimality certificate. {CONVERGED_MEANS}, tol={tol:g}. {summary}")
    return RawSolution(matrix=A, gram=None, status=status, message=message, iterations=iterations,
                       solver="mmopt-lbfgs", dual_bound=None, history=tuple(history),
                       extra={"seconds": time.perf_counter() - began, "p": p, "mode": mode,
                              "identity_fallback": fallback, "run_summary": summary, "n_jobs": workers,
                              "backend": backend})
