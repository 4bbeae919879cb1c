"""The p-Identity search on a sparse Θ: a working set of entries, O(nnz·p + np + p³) per step; a heuristic.

Notation: see README and :mod:`mmopt.search.pidentity`. Local optima of HDMM's p-Identity search on prefix sums are
sparse: at n = 1,024 (p = 64) a converged Θ has about 4n nonzero entries of its pn, every other entry exactly
0 at its bound. Two costs of the dense search then go to waste at n = 8,192 (p = 512, 4.2 million entries):
the objective's dense p×p×n products (0.4 CPU s) and L-BFGS-B's own work on 4.2 million bounded variables
(about 1 CPU s per iteration, measured with scipy 1.17). This module searches only a *working set* S of entries:

* on S, with H = ΘD (D = diag d, d = 1 + 1ᵀΘ) and R = (I + ΘΘᵀ)⁻¹ (p×p), the objective of
  :mod:`mmopt.search.pidentity` is f = tr C − Σ_S Q∘H with Q = (R H) G, a p×n array from one sparse–dense product and
  one pass of G (:mod:`mmopt.dense.gram_operator`). Its gradient is g = 1 g_dᵀ − 2(Q D − (R S R) Θ), with
  S = H G Hᵀ = R⁻¹ Q Hᵀ and g_d,j = 2(d_j G_jj − Σ_k Q_kj Θ_kj): sparse–dense products, never p²n;
* L-BFGS-B moves the values on S (entries may reach 0 and stay there);
* after each round the gradient at *every* entry (the same O(np) arrays) finds the entries at 0 that the
  objective pushes up (g < 0, L-BFGS-B's own projected-gradient test); the most pushed are added to S, and
  entries left at 0 are dropped. A round on an unchanged S that passes L-BFGS-B's test is a point that passes
  it for all pn entries: status "optimal" (a local optimum; MinError is not convex).

Measured on prefix sums from a tiled coarser solution (``benchmarks/results/bench_eps_search.txt``): see
:mod:`mmopt.search.pidentity_ladder`, which uses it at every size past its base.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.linalg
import scipy.sparse as sps

from mmopt.dense.gram_operator import GramOperator
from mmopt.search._local_objectives import _CANCELLATION_MAX, lbfgs

__all__ = ["INNER_ITERATIONS", "column_pairs", "evaluate", "refine"]

#: L-BFGS-B steps per round on a fixed working set, before the full gradient is looked at again.
INNER_ITERATIONS = 200


def _pieces(rows, cols, x, p: int, n: int, G: GramOperator):
    """(d, Θ, R, H, Q, Q on S, Σ_k Q_kj Θ_kj, f, tr C) of the module docstring for Θ = x on (rows, cols)."""
    d = 1.0 + np.bincount(cols, weights=x, minlength=n)
    theta = sps.csr_array((x, (rows, cols)), shape=(p, n))
    K = (theta @ theta.T).toarray()
    K[np.diag_indices(p)] += 1.0
    L = scipy.linalg.cholesky(K, lower=True, check_finite=False)
    R, info = scipy.linalg.lapack.dpotri(L, lower=1)  # K⁻¹ from its factor: p³/3 flops, a third of a solve
    if info != 0:
        raise np.linalg.LinAlgError("dpotri")
    R = np.tril(R) + np.tril(R, -1).T
    H = sps.csr_array((x * d[cols], (rows, cols)), shape=(p, n))
    Q = G.rmatmat(np.ascontiguousarray((H.T @ R).T))  # (R H) G, row-major p×n
    q_on = Q[rows, cols]
    colsum = np.bincount(cols, weights=q_on * x, minlength=n)
    trace_c = float(np.sum(d * d * G.diagonal()))
    return d, theta, R, H, Q, q_on, colsum, trace_c - float(np.sum(colsum * d)), trace_c


def column_pairs(cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every pair (e, l) of entries in the same column (e = l included), as two index arrays into ``cols``.

    ((R S R) Θ)_e for an entry e = (k, j) is Σ_l (R S R)_{k, row l} Θ_l over the entries l of column j: with about
    5 entries a column, Σ_j c_j² pairs cost far less than the n×p product.

    Examples
    --------
    >>> [a.tolist() for a in column_pairs(np.array([3, 1, 3]))]
    [[0, 0, 1, 2, 2], [0, 2, 1, 0, 2]]
    """
    order = np.argsort(cols, kind="stable")
    counts = np.bincount(cols)
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    length = counts[cols]  # entries in each entry's column
    start = first[cols]  # where that column begins in ``order``
    offsets = np.repeat(start - np.concatenate([[0], np.cumsum(length)[:-1]]), length) + np.arange(length.sum())
    return np.repeat(np.arange(cols.size), length), order[offsets]


def evaluate(rows, cols, x, p: int, n: int, G: GramOperator, *, full: bool = False, pairs=None):
    """tr(G X⁻¹) of A = [I; Θ]D⁻¹ with Θ = x on the entries (rows, cols), and its gradient on those entries
    (``full=True``: also the p×n gradient at every entry). +∞ with a zero gradient where float64 cannot resolve
    the value (as :func:`mmopt.search.pidentity.objective`). ``pairs``: :func:`column_pairs` of ``cols``, if known.

    Examples
    --------
    >>> from mmopt.search import pidentity
    >>> from mmopt.dense.gram_operator import prefix_gram
    >>> theta = np.array([[1.0, 2.0, 0.0, 0.0], [0.0, 0.0, 0.5, 0.0]])
    >>> rows, cols = np.nonzero(theta)
    >>> f, g = evaluate(rows, cols, theta[rows, cols], 2, 4, prefix_gram(4))
    >>> f0, g0 = pidentity.objective(theta.ravel(), prefix_gram(4), 2, 4)
    >>> bool(np.isclose(f, f0) and np.allclose(g, g0.reshape(2, 4)[rows, cols]))
    True
    """
    try:
        d, theta, R, H, Q, q_on, colsum, f, trace_c = _pieces(rows, cols, x, p, n, G)
    except (np.linalg.LinAlgError, ValueError):  # overflow to inf/nan in I + ΘΘᵀ
        f, trace_c = np.inf, np.inf
    if not np.isfinite(f) or f <= 0.0 or trace_c > _CANCELLATION_MAX * f:
        return (np.inf, np.zeros_like(x)) + ((None,) if full else ())
    RSR = (H @ Q.T).T @ R  # R S R, S = H G Hᵀ (R S = Q Hᵀ)
    g_d = 2.0 * (d * G.diagonal() - colsum)
    if full:
        gradient = g_d[None, :] - 2.0 * (Q * d - (theta.T @ RSR.T).T)
        return f, gradient[rows, cols], gradient
    entry, other = column_pairs(cols) if pairs is None else pairs
    # ((R S R) Θ) on the entries
    P_on = np.bincount(entry, weights=RSR[rows[entry], rows[other]] * x[other], minlength=x.size)
    return f, g_d[cols] - 2.0 * (q_on * d[cols] - P_on)


def refine(theta0: np.ndarray, G: GramOperator, *, max_iterations: int = 4000, tol: float = 1e-9,
           inner: int = INNER_ITERATIONS, grow: int | None = None):
    """Working-set L-BFGS-B from ``theta0`` (p×n, ≥ 0): (Θ, tr(G X⁻¹), iterations, status, seconds, rounds).

    Parameters
    ----------
    theta0 : ndarray (p, n)
        The start; its nonzero entries are the first working set (with the entries the gradient pushes up).
    G : GramOperator
        The workload's Gram (:mod:`mmopt.dense.gram_operator`).
    max_iterations : int
        L-BFGS-B steps over all rounds; spent, the status is "user_limit".
    tol : float
        L-BFGS-B's ``ftol`` and ``gtol`` on f divided by its value at the round's start; an entry at 0 joins the
        working set when its gradient is below −tol times that value.
    inner : int
        Steps per round on a fixed working set.
    grow : int or None
        Most entries added per round (None: max(n, |support| / 4), the most pushed first).

    Returns
    -------
    tuple
        Θ (dense p×n), its objective, the steps taken, the status ("optimal": a round on an unchanged working
        set passed L-BFGS-B's test, so every entry passes it; "user_limit"; "optimal_inaccurate": a stalled
        line search on an unchanged set), seconds, and a record per round (working-set size, added, steps,
        status, objective).
    """
    t0 = time.perf_counter()
    p, n = theta0.shape
    theta = np.array(theta0, dtype=float)
    rows, cols = np.nonzero(theta)
    f, _, gradient = evaluate(rows, cols, theta[rows, cols], p, n, G, full=True)
    total, status, rounds = 0, "user_limit", []
    while total < max_iterations and np.isfinite(f):
        support = theta > 0
        pushed = ~support & (gradient < -tol * f)
        limit = grow or max(n, int(support.sum()) // 4)
        if pushed.sum() > limit:  # the most pushed entries first
            pushed &= gradient < np.partition(gradient[pushed], limit)[limit]
        rows, cols = np.nonzero(support | pushed)
        if rows.size == 0:  # Θ = 0 and nothing pushes an entry up: the identity passes the test
            status = "optimal"
            break
        budget = min(inner, max_iterations - total)
        pairs = column_pairs(cols)

        def fun(x, rows=rows, cols=cols, pairs=pairs):
            return evaluate(rows, cols, x, p, n, G, pairs=pairs)
        x, _, nit, round_status = lbfgs(fun, theta[rows, cols], f, budget, tol,
                                        max_evaluations=budget * 11 // 10 + 10)
        total += nit
        theta = np.zeros((p, n))
        theta[rows, cols] = x
        nz = np.nonzero(theta)
        f, _, gradient = evaluate(*nz, theta[nz], p, n, G, full=True)
        added = int(pushed.sum())
        rounds.append({"working_set": int(rows.size), "added": added, "iterations": nit, "status": round_status,
                       "objective": f})
        if added == 0 and round_status != "user_limit":
            status = round_status
            break
        if nit == 0 or not np.isfinite(f):  # no step from entries the gradient pushes up: a stalled search
            status = "optimal_inaccurate"
            break
    return theta, f, total, status, time.perf_counter() - t0, rounds
