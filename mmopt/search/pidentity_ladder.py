"""HDMM's p-Identity search started coarse-to-fine: solve at n/2ᵏ, tile, refine at each size up to n; a heuristic.

Notation: see README. From a random start (HDMM's U[0, 1]), L-BFGS-B needs more steps as n grows to come within
1% of its converged error on prefix sums: about 350 steps at n = 1,024 and 800 at 2,048, while each step costs
O(p²n) = O(n³/256) with HDMM's p = n/16 (0.4 CPU s at n = 8,192, and L-BFGS-B's own work on pn bounded
variables about 1 s more). The ladder spends its steps where they are cheap. It solves the same family (prefix
sums, all ranges) at ``BASE_N`` cells or fewer from HDMM's random start, then doubles the size: the p×n solution
Θ becomes the 2p×2n block-diagonal [Θ 0; 0 Θ] — the strategy that answers each half of the domain as the coarse
one answers the whole — and a working-set L-BFGS-B (:func:`mmopt.search.pidentity_sparse.refine`) refines it at the new
size. A converged Θ is sparse (about 4–6 nonzero entries per cell), so the tiled start is too, and each step
costs O(nnz·p + np + p³) instead (0.17 CPU s at n = 8,192).

Measured on prefix sums (``benchmarks/bench_eps_search.py``; errors against a converged random start at the
fine size): the tiled start of 2,048 from a converged 1,024 is 1.32× that error, and comes within 1% of it in
about 180 steps (a random start: 800) and within 0.6% in 400. The number of steps at each size
(``BASE_ITERATIONS``, ``LEVEL_ITERATIONS``) is a measured schedule, not a derived one.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from mmopt._base import validation as v
from mmopt._base.parallel import ordered_map, plan, seed_children
from mmopt.dense.gram_operator import GramOperator
from mmopt.error import NumericalError
from mmopt.search.pidentity import SearchResult, _run, best_of, check_search, default_p, true_error
from mmopt.search.pidentity_sparse import refine

__all__ = ["BASE_N", "BASE_ITERATIONS", "LEVEL_ITERATIONS", "search", "sizes", "tile"]

#: The largest size solved from a random start (3,000 steps there: within 0.2% of three restarts at 1,024).
BASE_N = 1024
BASE_ITERATIONS = 3000
#: Working-set steps at each size strictly between the base and n (the final size takes ``max_iterations``).
LEVEL_ITERATIONS = 2000


def sizes(n: int, base: int = BASE_N) -> list[int]:
    """The ladder's sizes, coarsest first: n, ⌈n/2⌉, ⌈n/4⌉, … down to the first at most ``base``.

    Examples
    --------
    >>> sizes(8192)
    [1024, 2048, 4096, 8192]
    >>> sizes(3000), sizes(700)
    ([750, 1500, 3000], [700])
    """
    out = [n]
    while out[-1] > base:
        out.append(-(-out[-1] // 2))
    return out[::-1]


def tile(theta: np.ndarray, n: int, p: int, rng: np.random.Generator) -> np.ndarray:
    """The start at n cells and p rows from a solution Θ (p_c × n_c, n_c = ⌈n/2⌉): [Θ 0; 0 Θ'] with Θ' the first
    n − n_c columns of Θ (the right half gets the coarse strategy too, cut to its size).

    Rows beyond p are dropped, lightest (smallest sum) first; missing rows are drawn U[0, 10⁻³·mean Θ]: a row of
    zeros would stay zero (its gradient is d's, positive), so a new row needs some mass to start moving.

    Examples
    --------
    >>> t = tile(np.array([[1.0, 2.0]]), 4, 2, np.random.default_rng(0))
    >>> t.tolist()
    [[1.0, 2.0, 0.0, 0.0], [0.0, 0.0, 1.0, 2.0]]
    """
    p_c, n_c = theta.shape
    start = np.zeros((2 * p_c, n))
    start[:p_c, :n_c] = theta
    start[p_c:, n_c:] = theta[:, : n - n_c]
    if 2 * p_c > p:
        keep = np.sort(np.argsort(-start.sum(axis=1), kind="stable")[:p])
        return start[keep]
    extra = rng.random((p - 2 * p_c, n)) * (1e-3 * max(float(theta.mean()), 1e-12))
    return np.vstack([start, extra])


def _climb(k: int, child, make_gram: Callable[[int], GramOperator], ladder: list[tuple[int, int, int]], tol: float):
    """One restart up the ladder [(size, p, steps), …]: (Θ, exact error, iterations, status, seconds, record)."""
    t0, rng, theta = time.perf_counter(), np.random.default_rng(child), None
    total, levels = 0, []
    for size, p, steps in ladder:
        G = _normal(make_gram(size))
        if theta is None:  # the base: HDMM's random start, every entry a variable
            theta, f, nit, status, seconds = _run(k, rng, G, p, size, float(np.sum(G.diagonal())), steps, tol)
            record = {}
        else:
            theta, f, nit, status, seconds, rounds = refine(tile(theta, size, p, rng), G, max_iterations=steps,
                                                            tol=tol)
            try:
                f = true_error(theta, G)  # the dense Woodbury form, as every other size reports
            except NumericalError:
                f = np.inf
            record = {"rounds": len(rounds), "working_set": rounds[-1]["working_set"] if rounds else 0}
        total += nit
        levels.append({"n": size, "p": p, "iterations": nit, "status": status, "objective": f, "seconds": seconds,
                       **record})
    return theta, f, total, status, time.perf_counter() - t0, {"levels": levels}


def _normal(G: GramOperator) -> GramOperator:
    """G scaled to mean diagonal 1, as every size of the ladder is solved (tol then means the same at each)."""
    trace = float(np.sum(G.diagonal()))
    return G.scaled(G.n / trace) if trace > 0 else G


def search(make_gram: Callable[[int], GramOperator], n: int, *, p: int | None = None, restarts: int = 1,
           max_iterations: int = 1000, tol: float = 1e-9, seed=None, n_jobs=None, base: int = BASE_N,
           coarse_iterations: int | None = None, verbose: bool = False) -> SearchResult:
    """Best of ``restarts`` coarse-to-fine p-Identity searches for the Gram family ``make_gram`` at n cells.

    Parameters
    ----------
    make_gram : callable
        size ↦ :class:`~mmopt.dense.gram_operator.GramOperator` of the same workload family at that size
        (:func:`~mmopt.dense.gram_operator.prefix_gram`, :func:`~mmopt.dense.gram_operator.all_range_gram`).
    n : int
        The domain size.
    p : int or None
        Extra rows at n; None is :func:`~mmopt.search.pidentity.default_p` at every size, else p scaled with the size.
    max_iterations : int
        L-BFGS-B steps at n; the base takes ``BASE_ITERATIONS`` and each size between ``LEVEL_ITERATIONS`` (past the
        base, steps of the working-set search :func:`mmopt.search.pidentity_sparse.refine`).
    restarts, tol, seed, n_jobs, verbose
        As :func:`mmopt.search.pidentity.search` (restart k draws its random base start from child k of ``seed``).
    base : int
        The largest size solved from a random start; n ≤ base is one random-start run, as
        :func:`mmopt.search.pidentity.search`.
    coarse_iterations : int or None
        A cap on the steps at each coarser size (None: the schedule, ``BASE_ITERATIONS`` then
        ``LEVEL_ITERATIONS``).

    Returns
    -------
    SearchResult
        For the strategy at n (``objective`` on G scaled to mean diagonal 1); ``status`` is the final size's
        (the coarser sizes only make its start); each history record lists its sizes under "levels".

    Examples
    --------
    >>> from mmopt.dense.gram_operator import prefix_gram
    >>> res = search(prefix_gram, 256, base=64, max_iterations=200, seed=0)
    >>> [level["n"] for level in res.history[0]["levels"]], res.p
    ([64, 128, 256], 16)
    """
    caller = "pidentity_ladder.search"
    if not callable(make_gram):
        raise TypeError(f"The 'make_gram' parameter of {caller} must be a callable size -> GramOperator. "
                        f"Got {type(make_gram).__name__} instead.")
    n = v.check_int(n, name="n", caller=caller)
    base = v.check_int(base, name="base", caller=caller)
    given = p
    p, restarts, max_iterations, tol, n_jobs = check_search(caller, n, p, restarts, max_iterations, tol, n_jobs)
    cap = None if coarse_iterations is None else v.check_int(coarse_iterations, name="coarse_iterations",
                                                             caller=caller)
    steps = sizes(n, base)
    ladder = [(m, p if m == n else (default_p(m) if given is None else max(1, round(p * m / n))),
               max_iterations if m == n else min(BASE_ITERATIONS if i == 0 else LEVEL_ITERATIONS, cap or np.inf))
              for i, m in enumerate(steps)]
    children = seed_children(seed, restarts, caller=caller)
    began = time.perf_counter()
    workers, backend = plan(n_jobs, restarts)
    runs = ordered_map(_climb, ((k, c, make_gram, ladder, tol) for k, c in enumerate(children)), n_jobs=n_jobs,
                       desc="p-Identity ladder restarts", progress=verbose)
    sizes_text = " → ".join(f"{m:,}" for m in steps)
    how = (f"Best of {restarts} coarse-to-fine L-BFGS-B run(s) over p-Identity strategies [I; Θ]D⁻¹ (sizes "
           f"{sizes_text}: HDMM's random start at the first, each solution tiled block-diagonally to start a "
           "working-set search at the next)")
    return best_of(runs, how=how, restarts=restarts, p=p, n=n, trace_g=float(n), tol=tol,
                   max_iterations=max_iterations, began=began, workers=workers, backend=backend, verbose=verbose)
