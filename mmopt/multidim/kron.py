"""HDMM's OPT_⊗: the best product strategy A = A₁ ⊗ … ⊗ A_d for a union-of-products workload.

Notation: see README. For W with Gram G = Σ_j w_j² ⊗ᵢ Gᵢ⁽ʲ⁾ and a product strategy, Δ(⊗ᵢAᵢ) = ∏ᵢ Δ(Aᵢ)
(L1 and L2: a Kronecker column is the product of the factors' columns) and X⁺ = ⊗ᵢ Xᵢ⁺, so the unit-privacy
total error is

    Δ² tr(G X⁺) = ∏ᵢ Δ(Aᵢ)² · Σ_j w_j² ∏ᵢ tr(Gᵢ⁽ʲ⁾ Xᵢ⁺)          (Li et al., PODS 2010, Prop. 4.4).

With every factor normalised to Δ = 1, block-coordinate descent fixes all factors but Aᵢ and solves the
one-attribute problem min Δ(Aᵢ)² tr(Ĝᵢ Xᵢ⁺), Ĝᵢ = Σ_j w_j² (∏_{i'≠i} tr(G_{i'}⁽ʲ⁾ X_{i'}⁺)) Gᵢ⁽ʲ⁾
(:mod:`mmopt.multidim._factor`), sweeping over i until a sweep lowers the objective by less than ``tol``
relatively. Each block keeps its incumbent as a candidate, so the objective never increases. Source:
McKenna, Miklau, Hay, Machanavajjhala, PVLDB 2018, §4.2 (OPT_⊗ with p-Identity factors, "OPT_0").

For a single product W = w ⊗ᵢ Wᵢ the blocks decouple (Ĝᵢ ∝ Gᵢ), so one sweep is a converged descent: it
solves every block exactly for l2, and the product of the
factors' certified L2 dual bounds is a lower bound for *every* strategy (see :func:`product_lower_bound`).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

from mmopt._base.parallel import check_n_jobs, ordered_map, plan
from mmopt._base.solution import ImplicitSolution, worst_status
from mmopt.dense._strategy_core import Strategy
from mmopt.multidim import _common as cm
from mmopt.multidim._factor import INNER_TOL, inner_iterations, solve_factor
from mmopt.search.l2_fast import solve_l2
from mmopt.structured import factors as fc
from mmopt.structured.analysis import evaluate
from mmopt.structured.strategies import ImplicitStrategy, kron_strategy
from mmopt.structured.workloads import ImplicitWorkload

__all__ = ["solve_kron", "product_lower_bound"]

_LOG = logging.getLogger("mmopt")
_CALLER = "solve_kron"
DEFAULT_SWEEPS = 30
DEFAULT_TOL = 1e-6
CONVERGED = ("'optimal' means a local optimum of block-coordinate descent over product strategies: a full sweep "
             "lowered the objective by less than tol relatively, and every factor solve of the returned restart "
             "passed its own convergence test (L-BFGS-B's for l1, the certified duality gap for l2); "
             "a heuristic with no global certificate")


def _check_initial(initial, workload: ImplicitWorkload) -> list[np.ndarray] | None:
    if initial is None:
        return None
    if not isinstance(initial, ImplicitStrategy) or not initial.is_product:
        got = type(initial).__name__ if not isinstance(initial, ImplicitStrategy) else \
            f"a union of {len(initial.terms)} products"
        raise TypeError(f"The 'initial' parameter of {_CALLER} must be a product ImplicitStrategy "
                        f"(mmopt.structured.kron_strategy(A1, ..., Ad)) or None. Got {got} instead.")
    if tuple(initial.shape) != tuple(workload.shape):
        raise ValueError(f"The 'initial' parameter of {_CALLER} must have the workload's shape {workload.shape}. "
                         f"Got shape {initial.shape} instead.")
    return [f.matrix for f in initial.terms[0].factors]


def _traces(table: cm.GramTable, factors) -> np.ndarray:
    """traces[j, i] = tr(Gᵢ⁽ʲ⁾ Xᵢ⁺) for every term j and attribute i."""
    out = np.empty(table.index.shape)
    for i, A in enumerate(factors):
        out[:, i] = cm.factor_traces(A, table.roots[i], table.floors[i])[table.index[:, i]]
    return out


def _checker(table: cm.GramTable, i: int):
    def check(A):
        t = cm.factor_traces(A, table.roots[i], table.floors[i])[table.index[:, i]]
        return None if np.isnan(t).any() or np.isinf(t).any() else t
    return check


def _descend(table, factors, norm, ss, sweeps, tol, log, label, order):
    """Block-coordinate descent from ``factors`` (Δ = 1 each); returns (factors, objective, record)."""
    rng = np.random.default_rng(ss)
    T = _traces(table, factors)
    obj = table.objective(T)
    if not np.isfinite(obj):  # NaN (numerically singular factor) or +inf (unsupported)
        raise ValueError(f"The 'initial' parameter of {_CALLER} must support the workload: its error is infinite "
                         "(some factor's row space misses part of a workload factor). Add rows to that factor, "
                         "e.g. a scaled identity.")
    history = [{"sweep": 0, "objective": obj, "sources": ()}]
    statuses, converged = [], False
    for sweep in range(1, sweeps + 1):
        before, sources = obj, []
        for i in order:
            G = table.combined(i, table.others(T, i))
            res = solve_factor(G, factors[i], norm, rng, _checker(table, i))
            factors[i], T[:, i] = res.matrix, res.traces
            statuses.extend(res.solver_statuses)
            sources.append(res.source)
        obj = table.objective(T)
        history.append({"sweep": sweep, "objective": obj, "sources": tuple(sources)})
        log("%s sweep %d: objective %s (sources %s)", label, sweep, cm.fmt(obj), ", ".join(sources))
        # A single product is separable (Ĝᵢ ∝ Gᵢ whatever the other factors): one sweep solved every block.
        if before - obj <= tol * before or table.index.shape[0] == 1:
            converged = True
            break
    return factors, obj, {"converged": converged, "sweeps": len(history) - 1, "history": history,
                          "factor_status": worst_status(statuses), "statuses": statuses}


@dataclass(frozen=True, eq=False)
class _Job:
    """What every restart shares (pickled once per task for process and Dask workers)."""

    table: cm.GramTable
    workload: ImplicitWorkload
    start: list | None
    norm: str
    sweeps: int
    tol: float
    verbose: bool
    restarts: int


def _restart(r: int, ss: np.random.SeedSequence, job: _Job):
    """Restart r, drawing only from ``ss``: (exact unit error, r, product strategy, record)."""
    t0 = time.perf_counter()
    shape, d = job.workload.shape, job.table.d
    if r == 0 and job.start is not None:
        factors = [cm.normalised(A, job.norm) for A in job.start]
    else:
        factors = [np.eye(n) for n in shape]  # Δ = 1 in both norms
    order = list(range(d)) if r == 0 else list(np.random.default_rng(ss.spawn(1)[0]).permutation(d))
    log = _LOG.info if job.verbose else _LOG.debug
    with threadpool_limits(limits=1, user_api="blas"):
        factors, obj, rec = _descend(job.table, factors, job.norm, ss, job.sweeps, job.tol, log,
                                     f"solve_kron restart {r + 1}/{job.restarts}", order)
        strategy = kron_strategy(*[Strategy(A, f"A{i}") for i, A in enumerate(factors)],
                                 name=f"OPT_kron({job.workload.name})")
        exact = evaluate(job.workload, strategy, norm=job.norm).total_squared_error
    rec.update(restart=r, objective=exact, descent_objective=obj, seconds=time.perf_counter() - t0)
    return exact, r, strategy, rec


def solve_kron(workload: ImplicitWorkload, *, norm: str = "l1", restarts: int = 3, seed=None,
               max_iterations: int | None = None, tol: float | None = None, verbose: bool = False,
               initial: ImplicitStrategy | None = None, n_jobs: int | None = None) -> ImplicitSolution:
    r"""OPT_⊗: search product strategies ⊗ᵢ Aᵢ by block-coordinate descent (see the module docstring).

    Parameters
    ----------
    workload : ImplicitWorkload
        A union of products (:mod:`mmopt.structured`), e.g. ``mmopt.workload.sf1()``.
    norm : {"l1", "l2"}, default="l1"
        Sensitivity norm: "l1" for ε-DP (Laplace), "l2" for (ε,δ)-DP (Gaussian).
    restarts : int, default=3
        Independent descents, seeded by ``numpy.random.SeedSequence(seed).spawn(restarts)``. Restart 0
        starts from ``initial`` (or identity factors) and sweeps the attributes in order; the others start
        from identity factors in a random attribute order. The best by exact error is returned (ties: the
        lowest restart).
    seed : int, numpy.random.SeedSequence or None
        Same seed, same result.
    max_iterations : int or None, default=None (30)
        Sweeps per restart.
    tol : float or None, default=None (1e-6)
        Converged when a sweep lowers the objective by less than ``tol`` relatively.
    verbose : bool, default=False
        Log each sweep on the "mmopt" logger at INFO (else DEBUG); a worker process's sweeps are not
        logged, each restart's summary is. A tqdm progress bar over the restarts, if tqdm is installed.
    initial : ImplicitStrategy or None
        A product strategy to start restart 0 from (it must support the workload).
    n_jobs : int or None, default=None
        Restarts run at once, joblib's convention (see :func:`mmopt.optimize`); the result does not depend
        on it. ``extra`` records the workers and backend used.

    Returns
    -------
    ImplicitSolution
        ``strategy``: the product (factors with Δ = 1). ``status``: "optimal" when the returned restart
        converged and all its factor solves did; "user_limit" when it ran out of sweeps, or a factor solve
        hit its iteration limit. ``extra["objective"]`` is the exact unit error by
        :func:`mmopt.structured.evaluate`; ``lower_bound`` is set for a single product (any norm).

    Notes
    -----
    .. math::  \min_{A_1..A_d} \textstyle\prod_i \Delta(A_i)^2 \sum_j w_j^2 \prod_i tr(G_i^{(j)} X_i^+)

    Non-convex for l1 (each block is) and, for several terms, for l2 too; the result is a local optimum.

    Examples
    --------
    >>> from mmopt.structured.workloads import kron, identity_total, prefix
    >>> W = kron(prefix(8), identity_total(3))
    >>> sol = solve_kron(W, norm="l2", restarts=1, seed=0)
    >>> bool(sol.extra["objective"] >= sol.lower_bound * (1 - 1e-9))
    True
    """
    began = time.perf_counter()
    norm, restarts, seeds, sweeps, tol = cm.check_common(
        _CALLER, workload, norm, restarts, seed, max_iterations, tol, verbose,
        default_iterations=DEFAULT_SWEEPS, default_tol=DEFAULT_TOL)
    start = _check_initial(initial, workload)
    n_jobs = check_n_jobs(n_jobs, caller=_CALLER)
    log = _LOG.info if verbose else _LOG.debug
    with threadpool_limits(limits=1, user_api="blas"):  # many tiny factorisations: threads only synchronise
        job = _Job(cm.gram_table(workload), workload, start, norm, sweeps, tol, bool(verbose), restarts)
        workers, backend = plan(n_jobs, restarts)
        runs = []
        for run in ordered_map(_restart, ((r, ss, job) for r, ss in enumerate(seeds)), n_jobs=n_jobs,
                               desc="solve_kron restarts", progress=bool(verbose)):
            runs.append(run)
            exact, r, _, rec = run  # logged here: a worker process's log records go nowhere
            log("solve_kron restart %d/%d: exact unit error %s after %d sweeps (%s), %.2f s", r + 1, restarts,
                cm.fmt(exact), rec["sweeps"], "converged" if rec["converged"] else "sweep budget spent",
                rec["seconds"])
        # Lowest error, ties to the lowest restart index: the same choice whatever n_jobs ran the restarts.
        exact, r, strategy, rec = min(runs, key=lambda x: (x[0], x[1]))
        bound = product_lower_bound(workload) if workload.is_product else None
    status, why = _status(rec, sweeps)
    message = (f"OPT_⊗ ({norm}): best of {restarts} block-coordinate descent restart(s) (restart {r + 1}, "
               f"{rec['sweeps']} sweep(s)); {why}. {CONVERGED}, tol={tol:g}.")
    history = tuple({"restart": x[3]["restart"], "objective": x[0], "sweeps": x[3]["sweeps"],
                     "converged": x[3]["converged"], "factor_status": x[3]["factor_status"],
                     "trace": tuple(h["objective"] for h in x[3]["history"])} for x in runs)
    return ImplicitSolution(
        strategy=strategy, status=status, message=message, iterations=sum(x[3]["sweeps"] for x in runs),
        solver="mmopt-bcd-lbfgs" if norm == "l1" else "mmopt-bcd-l2-newton", lower_bound=bound, history=history,
        extra={"objective": exact, "norm": norm, "restart": r, "sweeps": rec["sweeps"],
               "sweep_objectives": tuple(h["objective"] for h in rec["history"]),
               "seconds": time.perf_counter() - began, "lower_bound_method": None if bound is None else
               "product of per-factor L2 dual bounds",
               "inner_iterations": {n: inner_iterations(n) for n in dict.fromkeys(workload.shape)},
               "inner_tol": INNER_TOL, "n_jobs": workers, "backend": backend})


def _status(rec, sweeps) -> tuple[str, str]:
    fs = rec["factor_status"]
    if not rec["converged"]:
        return "user_limit", f"the sweep budget (max_iterations={sweeps}) ended it before the relative " \
                             "improvement per sweep fell below tol: raise max_iterations"
    if fs == "user_limit":
        return "user_limit", "the descent converged but a factor solve hit its L-BFGS-B step limit (3,000, fewer " \
                             "on factors past ~270 cells: extra['inner_iterations'])"
    if fs != "optimal":
        return fs, f"the descent converged but a factor solve ended '{fs}'"
    return "optimal", "the descent converged and every factor solve converged"


def product_lower_bound(workload: ImplicitWorkload) -> float | None:
    r"""A certified lower bound on Δ₂²·tr(G X⁺) (hence on Δ₁²·tr(G X⁺)) over *all* strategies, W = w ⊗ᵢ Wᵢ.

    Proof. Program 5.2 (min tr(G X⁺) s.t. diag X ≤ 1, equal to min_A Δ₂(A)² tr(G (AᵀA)⁺) by scale
    invariance) has, for every λ ≥ 0, the weak-duality bound g(λ) = 2 tr (Λ^{1/2} G Λ^{1/2})^{1/2} − Σλ
    (:mod:`mmopt.search.l2_fast`). Take λ = c·⊗ᵢλᵢ with λᵢ ≥ 0 and c > 0. Then Λ^{1/2} G Λ^{1/2} =
    c w² ⊗ᵢ Mᵢ, Mᵢ = Λᵢ^{1/2} Gᵢ Λᵢ^{1/2}, so tr(·)^{1/2} = √c w ∏ᵢ aᵢ with aᵢ = tr Mᵢ^{1/2} (eigenvalues of a
    Kronecker product are the products), and Σλ = c ∏ᵢ bᵢ, bᵢ = Σλᵢ. Maximising 2√c w∏aᵢ − c∏bᵢ over c gives
    w² ∏ᵢ aᵢ²/bᵢ. Each factor's own bound gᵢ(λᵢ) = 2aᵢ − bᵢ ≤ aᵢ²/bᵢ (AM–GM), so w² ∏ᵢ gᵢ(λᵢ), the product of
    the certified per-factor dual bounds of :func:`mmopt.search.l2_fast.solve_l2`, is ≤ g(c*⊗λᵢ) ≤ the optimum.
    Δ₁ ≥ Δ₂ column by column makes it a bound for ε-DP too.
    """
    if not workload.is_product:
        raise ValueError("product_lower_bound needs a single-product workload. Got "
                         f"{len(workload.terms)} terms.")
    term = workload.terms[0]
    value = term.weight**2
    for f in term.factors:
        G = fc.workload_gram(f)
        if f.domain_size == 1:
            value *= float(G[0, 0])  # n = 1: every A = [a] gives a²·G/a² = G, exact
            continue
        scale = float(np.trace(G))
        g = solve_l2(G / scale).dual_bound  # certified for G/scale; the bound scales linearly in G
        if g is None or not math.isfinite(g) or g <= 0:
            return None  # the product argument needs every factor's bound > 0
        value *= g * scale
    return value
