"""HDMM's OPT_M: the best weighted marginals strategy M(θ) for a union-of-products workload.

Notation: see README and :mod:`mmopt.structured.algebra`. M(θ) stacks θ_S·⊗ᵢ(I if i ∈ S else 1ᵀ) over the
subsets S ⊆ [d]; its Gram is X = Σ_S θ_S² ⊗ᵢ(I if i ∈ S else J). Factor I is αI + βJ with (α, β) = (1, 0)
and J with (0, 1), so by the algebra's λ_T = ∏_{i∈T} αᵢ ∏_{i∉T} (αᵢ + nᵢβᵢ) one block contributes
θ_S² [T ⊆ S] ∏_{i∉S} nᵢ, and

    X = Σ_T λ_T(θ) Q_T,   λ_T(θ) = Σ_{S ⊇ T} θ_S² w_S,   w_S = ∏_{i∉S} nᵢ        (a superset zeta transform).

With c_T = tr(G Q_T) = Σ_j w_j² ∏_{i∈T} (tr Gᵢ⁽ʲ⁾ − 1ᵀGᵢ⁽ʲ⁾1/nᵢ) ∏_{i∉T} 1ᵀGᵢ⁽ʲ⁾1/nᵢ (closed form for every
union of products) the unit-privacy error is (Li et al., PODS 2010, Prop. 4.4)

    f(θ) = Δ(θ)² · Σ_T c_T / λ_T(θ),   Δ = Σ_S θ_S (L1: each column holds one 1 per marginal) or ‖θ‖₂ (L2),

+∞ when some c_T > 0 has λ_T = 0 (M(θ) does not support W). f is scale invariant; its gradient is

    ∂f/∂θ_S = 2Δ ∂Δ/∂θ_S · Σ_T c_T/λ_T − 2Δ² θ_S w_S · Σ_{T ⊆ S} c_T/λ_T²,

a subset zeta transform, so f and ∇f cost O(d·2^d). For L2, u = θ² makes f = (Σu)·Σ_T c_T/λ_T(u) with λ
linear in u: on the simplex Σu = 1 this is convex, so every local optimum is global within M(θ). For L1 it
is not convex; we take the best of several L-BFGS-B runs: one from the data cubes' greedy θ where it applies
(:func:`_datacube_start`), the others from random starts (HDMM's uniform [0, 1]).
Source: McKenna, Miklau, Hay, Machanavajjhala, PVLDB 2018, §5 (OPT_M).
"""

from __future__ import annotations

import functools
import logging
import numbers
import time

import numpy as np

from mmopt._base import validation as v
from mmopt._base.parallel import check_n_jobs, ordered_map, plan, seed_root
from mmopt._base.solution import CONVERGED_MEANS, ImplicitSolution, worst_status
from mmopt.dense._strategy_core import NORMS
from mmopt.multidim.marginals_objective import (
    MAX_ATTRIBUTES,
    _check_d,
    _objective,
    marginals_objective,
    projection_traces,
    subset_weights,
)
from mmopt.search._local_objectives import lbfgs
from mmopt.structured.analysis import evaluate
from mmopt.structured.residual.workload import as_marginal_workload
from mmopt.structured.strategies import marginals_strategy
from mmopt.structured.workloads import ImplicitWorkload

__all__ = ["MAX_ATTRIBUTES", "WARM_MAX_ATTRIBUTES", "datacube_start_marginals", "marginals_objective",
           "projection_traces", "solve_marginals", "subset_weights"]

_LOG = logging.getLogger("mmopt")
_FUNC = "solve_marginals"
DEFAULT_MAX_ITERATIONS = 2000
DEFAULT_TOL = 1e-10
# Drop θ_S below this share of Σθ from the returned strategy when that does not raise the error: such
# blocks change nothing measurable but cost evaluate and the mechanism one Kronecker term each.
_PRUNE = 1e-9


def _check_seed(seed):
    if seed is None or isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, np.random.Generator):  # consumed, as everywhere (mmopt._base.parallel.seed_children)
        return seed_root(seed, caller=_FUNC)
    if isinstance(seed, bool | np.bool_) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise TypeError(f"The 'seed' parameter of {_FUNC} must be None, a non-negative int, a "
                        f"numpy.random.SeedSequence or a numpy.random.Generator. Got {seed!r:.60} "
                        f"({type(seed).__name__}) instead.")
    return int(seed)


def _normalise(theta, l1: bool):
    delta = float(np.sum(theta)) if l1 else float(np.linalg.norm(theta))
    return theta / delta


def _prune(theta, c, w, l1):
    """θ without its negligible weights when that does not raise f (see _PRUNE); θ itself otherwise."""
    small = (theta > 0) & (theta <= _PRUNE * float(np.sum(theta)))
    if not np.any(small):
        return theta
    cut = np.where(small, 0.0, theta)
    return cut if _objective(cut, c, w, l1, False) <= _objective(theta, c, w, l1, False) else theta


def _score(workload, theta, norm):
    """The exact unit-privacy error of M(θ) by mmopt.structured.evaluate; +∞ with the reason if it refuses."""
    try:
        r = evaluate(workload, marginals_strategy(workload.shape, theta, name="OPT_M"), norm=norm)
    except (ValueError, ArithmeticError) as exc:  # NumericalError / unsupported: never ranked
        return np.inf, str(exc)
    return r.total_squared_error, None


def _restart(child: np.random.SeedSequence, job: tuple):
    """One L-BFGS-B run from θ uniform on [0, 1] drawn from ``child``: (θ, its closed-form error, history
    record). The exact score is taken afterwards, for the runs that may be chosen (:func:`solve_marginals`)."""
    return _run(np.random.default_rng(child).uniform(size=job[0].size), job, "uniform")


#: The most attributes :func:`_datacube_start` searches the data cubes' lattice for.
WARM_MAX_ATTRIBUTES = 14


def datacube_start_marginals(workload):
    """The union of marginals the data cubes' warm start searches (:func:`_datacube_start`), or None where it does
    not apply: not a union of marginals, or past :data:`WARM_MAX_ATTRIBUTES` attributes. Its price in auto
    (:func:`mmopt.auto.costs.datacube_start`) follows the same rule."""
    if len(workload.shape) > WARM_MAX_ATTRIBUTES:
        return None
    return as_marginal_workload(workload, caller=_FUNC)


def _datacube_start(workload, d: int):
    """θ of Ding et al.'s data cubes (:func:`mmopt.multidim.datacube.solve_datacube`, deterministic, L1) as a
    length-2^d start, or None where it does not apply (not a union of marginals, or past its d). Random starts
    end in local optima that measure many small marginals: on 2-way marginals of (2,)¹⁰ three runs gave 35,298
    (HDMM's start), the data cubes' three 6–7-way cuboids 23,159, and L-BFGS-B from them 23,088. Up to
    :data:`WARM_MAX_ATTRIBUTES`, past the data cubes' own 12 (a helper's audit saw the cliff at 13: 2-way marginals of
    (2,)¹² 64,327, of (2,)¹³ 437,355 from random starts). Measured (3 restarts, one core): 2-way marginals of
    (2,)¹³ 437,355 → 93,639 (the start 0.07 s), of (2,)¹⁴ 932,769 → 157,794 (0.27 s); 3-way of (2,)¹³
    4,795,288 → 2,342,912 (0.61 s); at 16 attributes 3,912,877 → 329,463 for 3.9 s of start on 2-way marginals,
    its lattice (2^d × the marginals) 290 MB on 3-way ones: not taken."""
    from mmopt.multidim.datacube import solve_datacube
    if datacube_start_marginals(workload) is None:
        return None
    sol = solve_datacube(workload, norm="l1", max_attributes=WARM_MAX_ATTRIBUTES)
    theta = np.zeros(2**d)
    for cuboid, share in zip(sol.extra["cuboids"], sol.extra["theta"], strict=True):
        theta[sum(1 << a for a in cuboid)] = share  # bit i set iff attribute i ∈ S, as marginals_strategy's
    return theta


def _run(theta0: np.ndarray, job: tuple, start: str):
    """One L-BFGS-B run from ``theta0`` (scaled to Δ = 1): (θ, its closed-form error, history record)."""
    c, w, l1, max_iterations, tol = job
    t0 = time.perf_counter()
    theta0 = _normalise(theta0, l1)
    f0 = _objective(theta0, c, w, l1, False)
    theta, f, nit, status = lbfgs(functools.partial(_objective, c=c, w=w, l1=l1, gradient=True), theta0, f0,
                                  max_iterations, tol)
    theta = _prune(_normalise(theta, l1), c, w, l1)
    closed = float(_objective(theta, c, w, l1, False))
    return theta, closed, {"closed_form": closed, "start": float(f0), "iterations": nit, "status": status,
                           "support": int(np.count_nonzero(theta)), "seconds": time.perf_counter() - t0,
                           "start_from": start}


def solve_marginals(workload: ImplicitWorkload, *, norm: str = "l1", restarts: int = 3, seed=None,
                    max_iterations: int | None = None, tol: float | None = None,
                    verbose: bool = False, n_jobs: int | None = None,
                    iteration_budget: int | None = None) -> ImplicitSolution:
    r"""OPT_M: weights θ ≥ 0 of the marginals strategy M(θ) minimising Δ(θ)²·tr(G X(θ)⁺) (module docstring).

    Parameters
    ----------
    workload : ImplicitWorkload
        Any union of products on d ≤ :data:`MAX_ATTRIBUTES` attributes; it enters only through
        c_T = tr(G Q_T) (:func:`projection_traces`), so no approximation by marginals is made.
    norm : {"l1", "l2"}, default="l1"
        Sensitivity norm: Δ = Σθ (ε-DP, Laplace) or ‖θ‖₂ ((ε,δ)-DP, Gaussian; convex in θ², so the local
        optimum found is the global one within M(θ) up to ``tol``).
    restarts : int, default=3
        L-BFGS-B runs from θ uniform on [0, 1] (HDMM's start), scaled to Δ = 1; random run k draws from
        ``numpy.random.SeedSequence(seed).spawn(restarts)[k]``, so a seed reproduces the result. Under L1 on a
        union of marginals of at most 12 attributes one run more comes first, from the θ of Ding et al.'s data
        cubes (:func:`mmopt.multidim.datacube.solve_datacube`, deterministic): random starts end in local optima
        that measure many small marginals (2-way marginals of (2,)¹⁰: 35,298 against 23,088 from the data
        cubes' three large cuboids). ``history[k]["start_from"]`` says which start each run had (then random run
        k is ``history[k + 1]``, and ``extra["restart"]`` indexes ``history``).
    seed : None, int >= 0 or numpy.random.SeedSequence, default=None
    max_iterations : int or None, default=None
        L-BFGS-B iterations per run (None: 2000).
    tol : float or None, default=None
        L-BFGS-B's ``ftol`` and ``gtol`` on f/f(θ₀) (None: 1e-10).
    verbose : bool, default=False
        Log each run on the ``"mmopt"`` logger at INFO (else DEBUG); a tqdm bar over the runs.
    n_jobs : int or None, default=None
        Runs at once, joblib's convention (see :func:`mmopt.optimize`); the result does not depend on it.
        A run takes ~10 ms here, so workers pay off only for many restarts or large d.
    iteration_budget : int or None, default=None
        L-BFGS-B iterations over the random runs together (the data cubes' warm run under L1 takes at most as many
        again, uncharged, so the random runs are those without it): runs start in order while it lasts, the last
        one cut to what is left (its status then "user_limit"), so the work is bounded whatever the workload's
        conditioning (3-way marginals on (2,)¹³ under Laplace noise take ~1,500 iterations a run where 2-way ones
        take ~80). The runs are then sequential (``n_jobs`` unused), so the result does not depend on it. None: no
        limit.

    Returns
    -------
    ImplicitSolution
        ``strategy`` = M(θ) with Δ = 1; runs are ranked by their closed-form error (``history[k]["closed_form"]``)
        and the first that :func:`mmopt.structured.evaluate` accepts is returned, its exact error (unit privacy,
        ``norm``) in ``extra["objective"]`` and in its run's ``history[k]["objective"]``, θ in ``extra["theta"]``.
        ``status`` is the returned run's: "optimal" when L-BFGS-B's own test passed on it under L2 (convex),
        "local_optimum" under L1 (no bound stands behind it), "optimal_inaccurate" after a line-search stall, and
        "user_limit" when ``max_iterations`` ended it, or under L1 any run (it might have ended lower).

    Examples
    --------
    One marginal, on attributes {0, 2} (bitmask 5): all the weight goes to that marginal, error 9 = its
    9 queries with unit variance each.

    >>> from mmopt.structured import marginals
    >>> sol = solve_marginals(marginals((3, 3, 3), attributes=[(0, 2)]), seed=0)
    >>> sol.status, round(sol.extra["objective"], 6), int(sol.extra["theta"].argmax())   # L1: no certificate
    ('local_optimum', 9.0, 5)
    """
    began = time.perf_counter()
    if not isinstance(workload, ImplicitWorkload):
        raise TypeError(f"The 'workload' parameter of {_FUNC} must be an ImplicitWorkload (a union of products, "
                        f"e.g. mmopt.structured.marginals(shape, k)). Got {type(workload).__name__} instead.")
    v.check_choice(norm, name="norm", caller=_FUNC, choices=NORMS)
    restarts = v.check_int(restarts, name="restarts", caller=_FUNC, low=1)
    seed = _check_seed(seed)
    max_iterations = DEFAULT_MAX_ITERATIONS if max_iterations is None else \
        v.check_int(max_iterations, name="max_iterations", caller=_FUNC, low=1)
    tol = DEFAULT_TOL if tol is None else v.check_real(tol, name="tol", caller=_FUNC, low=0.0, high=1.0,
                                                        low_open=True, high_open=True)
    verbose = v.check_bool(verbose, name="verbose", caller=_FUNC)
    n_jobs = check_n_jobs(n_jobs, caller=_FUNC)
    log = _LOG.info if verbose else _LOG.debug
    shape, l1 = workload.shape, norm == "l1"
    _check_d(shape, _FUNC)
    c, w = projection_traces(workload), subset_weights(shape)
    if not float(np.sum(c)) > 0:
        raise ValueError(f"{_FUNC}: workload '{workload.name}' has a zero Gram (tr G = 0): every strategy has "
                         "zero error, there is nothing to optimise.")

    history, iterations, best = [], 0, (np.inf, None, -1)
    # A fresh copy of a given SeedSequence: spawn() advances its counter, which would break reproducibility.
    root = np.random.SeedSequence(seed.entropy, spawn_key=seed.spawn_key, pool_size=seed.pool_size) \
        if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    job, planned = (c, w, l1, max_iterations, tol), restarts
    # under L1 (not convex) a first run from the data cubes' θ where they apply; L2 is convex in θ²: no need
    warm = _datacube_start(workload, len(shape)) if l1 else None
    budget = None if iteration_budget is None else \
        v.check_int(iteration_budget, name="iteration_budget", caller=_FUNC, low=1)
    runs = [] if warm is None else [_run(warm, job if budget is None else (c, w, l1, min(max_iterations, budget),
                                                                           tol), "datacube")]
    if budget is None:
        workers, backend = plan(n_jobs, restarts)
        runs += list(ordered_map(_restart, ((child, job) for child in root.spawn(restarts)), n_jobs=n_jobs,
                                 desc=f"{_FUNC} restarts", progress=bool(verbose)))
    else:
        left = budget  # the data cubes' run is not charged: charged, it took iterations the random runs had
        # before, and the result came out worse than without it (2.4 % at a budget of 30; a helper's audit)
        workers, backend = 1, None
        for child in root.spawn(restarts):  # in order: each run's length depends on the ones before it
            if left <= 0:
                break
            cap = min(max_iterations, left)
            runs.append(_restart(child, (c, w, l1, cap, tol)))
            left -= runs[-1][2]["iterations"]
        for record in (r[2] for r in runs):  # cut by the budget, not by max_iterations
            record["cut"] = record["status"] == "user_limit" and record["iterations"] < max_iterations
    planned += warm is not None
    restarts = len(runs)
    for k, (_, closed, record) in enumerate(runs):
        iterations += record["iterations"]
        history.append({"restart": k, **record})
        log("%s: restart %d of %d (from %s θ): closed form %.8g (start %.8g) after %d iterations (%s), %d of %d "
            "subsets, %.2f s", _FUNC, k + 1, restarts, record["start_from"], closed, record["start"],
            record["iterations"], record["status"], record["support"], c.size, record["seconds"])
    # The exact score (mmopt.structured.evaluate) only for the run to be returned: in order of the closed form f(θ),
    # the same error in exact arithmetic, ties to the lowest restart whatever n_jobs, the first that evaluate
    # accepts (it refuses an M(θ) that does not support W numerically). Scoring every run cost more than the runs
    # themselves on many terms: 2-way marginals of (2,)¹², 50 restarts, 9.8 s against 3.1 s.
    for k in sorted(range(restarts), key=lambda j: (runs[j][1], j)):
        if not np.isfinite(runs[k][1]):
            break
        exact, why = _score(workload, runs[k][0], norm)
        history[k] |= {"objective": float(exact), **({"refused": why} if why else {})}
        if np.isfinite(exact):
            best = (exact, runs[k][0], k)
            break

    f, theta, k = best
    if theta is None:
        reasons = [h["refused"] for h in history if "refused" in h] or [
            "no run's M(θ) supports it (each closed-form error is infinite)"]
        raise ValueError(f"{_FUNC}: mmopt.structured.evaluate refused every run's strategy on workload "
                         f"'{workload.name}': {reasons[-1]}")
    # the returned run's status, and "user_limit" where another run stopped short of its test under L1 (it might
    # have ended lower); a run that lost after a line-search stall says nothing about the one returned (it made a
    # good result optimal_inaccurate, success False: a helper's audit). Under L1 (not convex) a converged run is a
    # local optimum, never "optimal" (no bound stands behind it)
    short = ["user_limit" for h in history if l1 and h["status"] == "user_limit"]
    status = worst_status([history[k]["status"]] + short)
    status = "local_optimum" if l1 and status == "optimal" else status
    hit = sum(h["status"] == "user_limit" and not h.get("cut") for h in history)
    stalled = sum(h["status"] == "optimal_inaccurate" for h in history)
    summary = (f"{hit} of {restarts} runs hit max_iterations={max_iterations}; raise it." if hit
               else f"All {restarts} runs stopped by L-BFGS-B's own test." if not history[-1].get("cut") and
               not stalled else "")
    if stalled:
        summary = f"{summary} {stalled} of {restarts} runs stopped in a line search (optimal_inaccurate).".strip()
    if restarts < planned or history[-1].get("cut"):
        summary = (f"{summary} The iteration budget ({iteration_budget:,}) ran {restarts} of the {planned} runs"
                   f"{', the last cut short' if history[-1].get('cut') else ''}.").strip()
    convex = ("convex in θ² (L2), so this is the best M(θ) up to tol" if not l1 else
              "a non-convex problem (L1): best of the runs, with no optimality certificate")
    message = (f"OPT_M over the {c.size} weighted marginals of {len(shape)} attributes, {convex}; run {k} of "
               f"{restarts} chosen by its exact error. {CONVERGED_MEANS}, tol={tol:g}. {summary}")
    strategy = marginals_strategy(shape, theta, name="OPT_M")
    return ImplicitSolution(strategy=strategy, status=status, message=message, iterations=iterations,
                            solver="mmopt-lbfgs", lower_bound=None, history=tuple(history),
                            extra={"theta": theta, "objective": float(f), "norm": norm, "restart": k,
                                   "seconds": time.perf_counter() - began, "n_jobs": workers,
                                   "backend": backend})
