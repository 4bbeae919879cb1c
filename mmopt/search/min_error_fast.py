"""MinError (ε-DP) for prefix sums and all ranges at large n: HDMM's p-Identity search on the O(n) Gram operator.

Notation: see README. From :data:`FAST_MIN_N` cells on, ``mmopt.optimize(W, method="min_error")`` on the prefix or
all-range workload — the dense ``mmopt.workload.prefix(n)`` / ``all_range(n)`` or ``mmopt.toeplitz.prefix(n)`` /
``all_range(n)`` at any n — runs only the stage that wins there: the p-Identity local search
(:func:`mmopt.search.pidentity.search`), whose objective and gradient cost O(np²) with G applied by cumulative sums
(:mod:`mmopt.dense.gram_operator`). Past 1,024 cells it starts coarse to fine
(:mod:`mmopt.search.pidentity_ladder`): HDMM's random start needs more steps as n grows, each costing O(n³/256),
while a solution at n/2 tiled to n starts within a third of the optimum. The dense pipeline's other stages (the L2
optimum, the closed-form starts, the polish) cost O(n³) and did not win there: on prefix(1,024) its best other
candidates, the Haar wavelet and H₂, had 3.3× the p-Identity search's error, l2_approx 45× (176 CPU s for the whole
pipeline, 6 s before the search).

The objective reported is the exact Δ₁² tr(G X⁻¹) of the returned strategy (Δ₁ = 1 by construction), by Woodbury
on the structured G (:func:`mmopt.search.pidentity.true_error`); the lower bound is the certified diagonal bound of
:mod:`mmopt.toeplitz.bound`, an L2 bound and so valid under Laplace noise (Δ₁ ≥ Δ₂ column by column). Nothing
n×n is formed for a ``mmopt.toeplitz`` workload, whose strategy comes back as a
:class:`~mmopt.search.pidentity.PIdentityStrategy` (Θ only); a dense workload gets a dense :class:`~mmopt.Strategy`.
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings

import numpy as np

from mmopt._base import runtime as _runtime
from mmopt._base.guards import fmt_seconds
from mmopt._base.result import SUCCESS, OptimizeResult, reconcile
from mmopt.dense import _interval_trees as it
from mmopt.dense.gram_operator import all_range_gram, as_gram_operator, prefix_gram
from mmopt.error import NumericalError
from mmopt.search.pidentity import PIdentityStrategy, search, true_error
from mmopt.search.pidentity_ladder import BASE_N
from mmopt.search.pidentity_ladder import search as ladder_search

__all__ = ["CAPPED_SECONDS", "FAST_MIN_N", "default_iterations", "dense_twin", "from_optimize", "solve", "takes"]

#: Smallest n that takes this path (below it the dense pipeline, with its SDP, restarts and polish, is unchanged).
FAST_MIN_N = 512
_KINDS = ("prefix", "all_range")


#: CPU s of the default search on prefix sums / all ranges at n cells: measured, rounded up (prefix 2.1 s at 512,
#: 13.5 s at 1,024, all ranges 12.2 s at 1,024; 46 / 115 / 448 s at 2,048 / 4,096 / 8,192,
#: ``benchmarks/results/bench_eps_search.txt``); auto prices its candidate by it (:mod:`mmopt.auto.costs`).
MEASURED_SECONDS = {512: 4.0, 1024: 16.0, 2048: 55.0, 4096: 130.0, 8192: 520.0}
#: An explicit min_error expected to take longer than this warns before it starts (with the estimate and a remedy).
WARN_SECONDS = 600.0


#: CPU s of the search with ``max_iterations`` = m, which caps the steps at every size of the ladder, by m: measured
#: on prefix sums (one BLAS thread, 2026-12-02), rounded up by ~15 %; all ranges took 0.84–1.05× as long at 1,024
#: and 5,000 cells. The error it reaches (× the certified bound; the default search's in brackets): 4,096 cells
#: 7.13 / 6.49 / 6.40 (6.29) in 8.1 / 13.4 / 37.7 s at m = 100 / 300 / 1,000; 8,192 cells 8.23 / 7.62 / 6.90
#: (6.80) in 55 / 97 / 231 s; all ranges of 5,000 cells 7.66 / 6.15 / 6.13 in 8.9 / 22.6 / 56.8 s.
CAPPED_SECONDS = {100: {512: 0.6, 1024: 1.7, 2048: 4.2, 4096: 9.5, 8192: 64.0},
                  300: {512: 0.7, 1024: 3.5, 2048: 5.6, 4096: 15.5, 8192: 112.0},
                  1000: {512: 1.5, 1024: 8.1, 2048: 15.0, 4096: 44.0, 8192: 266.0}}


def expected_seconds(n: int, max_iterations: int | None = None) -> float:
    """CPU s of the search at n cells: the default one by :data:`MEASURED_SECONDS`, one capped at ``max_iterations``
    steps a size by :data:`CAPPED_SECONDS` (linear in the cap between its columns and the default's steps; below
    its first column as that column, since the ladder's set-up dominates there). Each table is interpolated
    log-log in n and grown as n² past its last point (a step's work grows as n·p with p ∝ n; with
    ``max_iterations=10`` the search still took 59 CPU s at 8,192 cells, the coarse sizes of the ladder and the
    H_b scores included).

    >>> round(expected_seconds(1024), 9), round(expected_seconds(16384)), expected_seconds(1024, 300)
    (16.0, 2080, 3.5)
    >>> round(expected_seconds(4096, 2000), 1)       # halfway between 1,000 steps (44 s) and the default 3,000
    87.0
    """
    full = _interpolate(MEASURED_SECONDS, n)
    if max_iterations is None or max_iterations >= default_iterations(n):
        return full
    points = [(m, _interpolate(CAPPED_SECONDS[m], n)) for m in sorted(CAPPED_SECONDS)]
    points.append((default_iterations(n), full))
    if max_iterations <= points[0][0]:
        return points[0][1]
    (m0, t0), (m1, t1) = next((a, b) for a, b in zip(points, points[1:], strict=False) if max_iterations <= b[0])
    return t0 + (t1 - t0) * (max_iterations - m0) / (m1 - m0)


def _interpolate(table: dict, n: int) -> float:
    """table[n], log-log between its sizes, its first value below them and grown as n² past them."""
    sizes = sorted(table)
    if n <= sizes[0]:
        return table[sizes[0]]
    if n >= sizes[-1]:
        return table[sizes[-1]] * (n / sizes[-1]) ** 2
    hi = next(s for s in sizes if s >= n)
    lo = sizes[sizes.index(hi) - 1]
    t = math.log(n / lo) / math.log(hi / lo)
    return math.exp((1 - t) * math.log(table[lo]) + t * math.log(table[hi]))


def default_iterations(n: int, start: str = "ladder") -> int:
    """L-BFGS-B steps at n of the default single run: 3,000 up to n = 1,024 (a random start), then the ladder's.

    ``start="ladder"`` (the default past :data:`mmopt.search.pidentity_ladder.BASE_N` cells): the steps at n itself, the
    coarser sizes taking the ladder's own schedule (past the base, working-set steps of
    :func:`mmopt.search.pidentity_sparse.refine`). Measured (``benchmarks/results/bench_eps_search.txt``, one BLAS
    thread, alone, timed before a last speed-up that changed no digit): 46 / 115 / 448 CPU s in all at
    n = 2,048 / 4,096 / 8,192, ending at 1.008× / 0.997× / 0.994× one random-start run of 6,000 steps
    (196 / 858 / 5,774 CPU s); at 8,192, 6.80× the certified bound and 12% below the error implied by the HDMM
    paper's Identity ratio there (6.40).
    ``start="random"`` (HDMM's start at every n): 3,000 up to 2,048, then 2,000 up to 4,096 and 350 beyond, where
    one step costs 0.5–1 CPU s and 350 steps end far from converged (33× the certified bound at 8,192).
    """
    if n <= BASE_N:
        return 3000
    if start == "random":
        return 3000 if n <= 2048 else (2000 if n <= 4096 else 350)
    return next((steps for m, steps in sorted(LADDER_ITERATIONS.items()) if n <= m), LADDER_ITERATIONS[8192])


#: Steps at n for the ladder's final size, by the smallest listed size ≥ n (measured; see default_iterations).
LADDER_ITERATIONS = {2048: 4000, 4096: 3000, 8192: 2000}


#: H_b branchings scored beside the search (H_b is a p-Identity strategy: Θ = its blocks above the leaves), up to
#: HIERARCHY_MAX_N cells (Θ has about n²/(b − 1) entries: 77 MB for H_8 at 8,192) and only when ``p`` is not given.
HIERARCHY_BRANCHINGS = (8, 16)
HIERARCHY_MAX_N = 8192


def hierarchy_theta(n: int, b: int) -> np.ndarray:
    """Θ of H_b as a p-Identity strategy: one row per internal node of mmopt's b-ary tree (near-equal splits,
    :func:`mmopt.dense._interval_trees.b_ary_tree`), root included; the leaves are the identity part.

    [I; Θ]D⁻¹ with d = 1 + 1ᵀΘ (a node count per column) is H_b with each column scaled to Δ₁ = 1 (for n = bᵏ,
    H_b with uniform level weights).
    """
    internal = [t for t in it.nodes(it.b_ary_tree(n, b)) if t.children]
    theta = np.zeros((len(internal), n))
    for i, t in enumerate(internal):
        theta[i, t.lo:t.hi] = 1.0
    return theta


def _hierarchies(G) -> list[tuple[float, int, np.ndarray]]:
    """(exact error, b, Θ) of H_b for b in :data:`HIERARCHY_BRANCHINGS` (those with fewer rows than cells)."""
    out = []
    for b in HIERARCHY_BRANCHINGS:
        theta = hierarchy_theta(G.n, b)
        if theta.shape[0] >= G.n:
            continue
        try:
            out.append((true_error(theta, G), b, theta))
        except NumericalError:
            continue
    return out


def kind_of(workload) -> str | None:
    """"prefix" or "all_range" for the workloads this path serves (dense family or mmopt.toeplitz), else None."""
    from mmopt.toeplitz.error import StreamWorkload
    from mmopt.workload import Workload

    if isinstance(workload, StreamWorkload):
        return workload.kind
    if isinstance(workload, Workload) and workload.family in _KINDS:
        return workload.family
    return None


def takes(workload, opts: dict, initial) -> bool:
    """Whether min_error runs here: prefix / all ranges with n ≥ FAST_MIN_N, and nothing asked of the dense
    pipeline (a warm start ``initial``, the SDP engine, the polish)."""
    if kind_of(workload) is None or workload.domain_size < FAST_MIN_N:
        return False
    return initial is None and opts.get("engine", "auto") != "sdp" and not opts.get("polish", False)


def solve(workload, opts: dict, *, tol, max_iterations, seed, verbose, n_jobs, threads) -> OptimizeResult:
    """Run the p-Identity search on ``workload`` and return the public result (see the module docstring).

    ``opts``: min_error's checked options (``restarts``, ``p``; ``engine`` "auto" or "local"; ``start``: "auto" is
    the coarse-to-fine ladder of :mod:`mmopt.search.pidentity_ladder` past its base size and HDMM's random start up to
    it, "random" HDMM's start at every n, "ladder" the ladder at every n).
    """
    from mmopt.toeplitz.bound import lower_bound
    from mmopt.toeplitz.error import StreamWorkload
    from mmopt.workload import Workload

    t0 = time.perf_counter()
    kind, n = kind_of(workload), workload.domain_size
    G = as_gram_operator(workload)
    normal = G.scaled(n / float(G.diagonal().sum()))  # mean diagonal 1, as every optimize method sees G
    restarts = opts.get("restarts") or 1
    start = opts.get("start") or "auto"
    ladder = start == "ladder" or (start == "auto" and n > BASE_N)
    budget = max_iterations or default_iterations(n, "ladder" if ladder else "random")
    say = _runtime.LOGGER.info if verbose is not False else _runtime.LOGGER.debug
    with _runtime.progress(verbose), _runtime.blas_threads(threads):
        common = {"p": opts.get("p"), "restarts": restarts, "max_iterations": budget, "tol": tol or 1e-9,
                  "seed": seed, "n_jobs": n_jobs, "verbose": verbose is not False}
        if ladder:
            say("optimize: method 'min_error' on %s(%d): p-Identity search on the O(n) Gram operator, coarse to "
                "fine, %d run(s) of at most %d L-BFGS-B iterations at n", kind, n, restarts, budget)
            # a max_iterations the caller gives caps every size of the ladder, not only the last
            res = ladder_search(prefix_gram if kind == "prefix" else all_range_gram, n,
                                coarse_iterations=max_iterations, **common)
        else:
            say("optimize: method 'min_error' on %s(%d): p-Identity search on the O(n) Gram operator, %d run(s) of "
                "at most %d L-BFGS-B iterations", kind, n, restarts, budget)
            res = search(normal, **common)
        objective = true_error(res.strategy.theta, G)  # exact, on the unscaled G (Δ₁ = 1)
        # a safety net where the search's budget ends far from convergence (n > 4,096): H_b is scored exactly
        # too, and the better strategy is returned (with a message saying which)
        hierarchies = _hierarchies(G) if opts.get("p") is None and n <= HIERARCHY_MAX_N else []
    raw_status, raw_message, chosen = res.status, res.message, res.strategy
    best_h = min(hierarchies, key=lambda t: t[0], default=None)
    searched = objective
    if best_h is not None and best_h[0] < objective:
        objective, chosen = best_h[0], PIdentityStrategy(best_h[2])
        # a construction: reconcile calls it "closed_form" unless the bound certifies it — but a search stopped by
        # its budget stays "user_limit" (success False), as the dense pipeline reports its stages' worst status
        raw_status = "optimal" if res.status == "optimal" else res.status
        raw_message = (f"H_{best_h[1]} (uniform level weights, scored exactly) beat the p-Identity search, whose "
                       f"budget ended at {searched / best_h[0]:.3g}× its error; raise max_iterations. "
                       + res.message)
    bound = lower_bound(StreamWorkload(kind, n)).value
    status, message, bound = reconcile(objective, bound, raw_status, raw_message,  # tol: L-BFGS's, not a gap
                                       closed=chosen is not res.strategy)
    strategy = dataclasses.replace(chosen, name="min_error")
    strategy = strategy.to_strategy() if isinstance(workload, Workload) else strategy
    m = n if kind == "prefix" else n * (n + 1) // 2
    extra = {"p": res.p, "restarts": restarts, "max_iterations": budget, "start": "ladder" if ladder else "random",
             "gram_operator": f"{kind} (semiseparable)",
             "bound_kind": "diagonal", "seconds": res.seconds, "n_jobs": res.n_jobs, "backend": res.backend,
             "stages": "p-Identity search only (n ≥ FAST_MIN_N; coarse to fine past "
                       f"{BASE_N:,} cells), and H_b scored beside it",
             "hierarchies": {f"H{b}": f for f, b, _ in hierarchies}}
    say("optimize: %s, objective %.6g, %.1f s", status, objective, time.perf_counter() - t0)
    return OptimizeResult(strategy, "l1", objective, bound, status, status in SUCCESS, message, "min_error",
                          "mmopt-lbfgs", res.iterations, time.perf_counter() - t0, objective / m, bound / m,
                          res.history, extra)


def from_optimize(workload, opts: dict, *, solver, tol, max_iterations, seed, verbose, n_jobs,
                  blas_threads) -> OptimizeResult:
    """:func:`mmopt.optimize`'s hand-off (``tol``, ``max_iterations``, ``seed``, ``verbose``, ``n_jobs`` checked)."""
    if solver is not None or opts.get("weight") is not None:
        raise ValueError(f"optimize(method='min_error') on {kind_of(workload)}({workload.domain_size}) runs only the "
                         "p-Identity local search (no SDP stage), so nothing reads 'solver' or 'weight'. Drop them, "
                         "or pass options={'engine': 'sdp'}.")
    threads = _runtime.check_blas_threads(blas_threads, caller="optimize", auto=1)  # min_error's own cap
    default = max_iterations is None and opts.get("p") is None  # what expected_seconds prices
    if default and (seconds := expected_seconds(workload.domain_size)) > WARN_SECONDS:
        # prefix(10⁶) ran for days without a word (a step's work grows as n², the coarse sizes' setup too)
        warnings.warn(f"optimize(method='min_error') on {kind_of(workload)}({workload.domain_size:,}): the p-Identity "
                      f"search is expected to take ~{fmt_seconds(seconds)} of CPU here (measured "
                      f"{MEASURED_SECONDS[8192]:g} s at 8,192 cells; its work grows as n²). method='auto' (the "
                      "default) chooses within a budget (budget='fast' | 'thorough' | CPU seconds) and shortens the "
                      "search to fit it; max_iterations caps the steps at every size of the ladder (the set-up of "
                      "the coarse sizes stays).", UserWarning, stacklevel=5)
    return solve(workload, opts, tol=tol, max_iterations=max_iterations, seed=seed, verbose=verbose, n_jobs=n_jobs,
                 threads=threads)


def dense_twin(workload, caller: str):
    """A mmopt.toeplitz prefix / all_range workload as the dense one, for the dense min_error pipeline."""
    from mmopt.structured._checks import DENSE_LIMIT
    from mmopt.toeplitz.error import StreamWorkload

    if not isinstance(workload, StreamWorkload):
        return workload
    if workload.n > DENSE_LIMIT:
        raise ValueError(f"{caller}(method='min_error') on {workload.kind}({workload.n:,}) with a warm start, the SDP "
                         f"engine, the polish or norm='l2' needs the dense pipeline, which stops at {DENSE_LIMIT:,} "
                         "cells. Drop them to run the p-Identity search on the O(n) Gram operator.")
    return workload.to_workload()
