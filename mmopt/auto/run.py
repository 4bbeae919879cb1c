"""optimize(method="auto"): the candidates of :mod:`mmopt.auto.plan` within a budget, the lowest error kept.

Notation: see README. Each candidate's cost is estimated before it runs (:mod:`mmopt.auto.costs`); it is skipped,
with the reason kept in ``extra["skipped"]``, when

* the incumbent already meets a proven lower bound (within 10⁻⁶: nothing can do better);
* the incumbent is within the candidate's ``unless`` ratio of the bound (a dense search where a structured
  strategy is already within 0.1 % of it, or, under Laplace noise, within 2×: see :mod:`mmopt.auto.plan`);
* its estimate is over its share of the budget or over what the estimates of the candidates run so far leave.

The budget is charged by estimates, never by the clock, so a call's result does not depend on the machine's load.
A candidate is scored exactly (or, where a union has no exact path, by the upper end of a certified bracket,
:func:`mmopt.structured.evaluate`), and one that fails is recorded in ``extra["failed"]``, never aborting the search.
Progress: one line per candidate run or skipped (name, value, seconds) and, while one runs, a line every
:data:`TICK` seconds; the candidates themselves run quietly (no bars, no inner records).
"""

from __future__ import annotations

import contextlib
import threading
import time

from mmopt._base import runtime as _runtime
from mmopt._base.result import CERTIFIED_GAP, CLOSED_FORMS, SUCCESS, OptimizeResult, gap_tol, reconcile
from mmopt.auto import costs
from mmopt.auto.budget import Budget
from mmopt.auto.plan import Context, plan
from mmopt.multidim.scoring import score
from mmopt.solvers import SolverError
from mmopt.structured.dual_bound import known_floor, optimum_floor

__all__ = ["TICK", "run_auto", "score"]

#: While a candidate runs, a progress line at least this often (seconds).
TICK = 10.0


def run_auto(ctx: Context, budget: Budget, *, verbose: bool | None) -> OptimizeResult:
    """Run the plan for ``ctx`` within ``budget`` (see the module docstring); ``verbose`` as :func:`mmopt.optimize`."""
    t0 = time.perf_counter()
    say = _runtime.LOGGER.info if verbose is not False else _runtime.LOGGER.debug
    planned = plan(ctx, budget.seconds)
    # before the bound, which is not charged: random ranges of 4,096 cells under 'fast' spent 51 CPU s on it, then
    # found that no candidate fitted (a helper's probe)
    unfit = {c.name: _skip_reason(c, None, 0.0, budget, 0.0) for c in planned}
    if all(reason is not None for reason in unfit.values()):
        raise ValueError(f"optimize(method='auto'): no method can run on '{ctx.workload.name}' within the budget "
                         f"{budget.describe()}: {unfit}. Give a larger budget (budget='thorough' or a number of CPU "
                         f"seconds), or choose a method.{_stream_laplace_remedy(ctx)}")
    b0 = time.process_time()
    svd, bound_exact = lower_bound(ctx)
    # not charged to the budget (a proven bound is always reported, and the candidates' own scoring reuses the
    # workload's spectrum it computes), but reported: 4.6 CPU s on 2,000 random ranges of 2,048 cells under 'fast'
    bound_seconds = time.process_time() - b0
    candidates, failures, skipped = [], {}, {}
    spent = 0.0
    for cand in planned:
        name = cand.name
        best = min(candidates, key=lambda c: c["objective"], default=None)
        bound = max([svd, *(c["lower_bound"] for c in candidates if c["lower_bound"] is not None)])
        reason = _skip_reason(cand, best, bound, budget, spent)
        if reason is not None:
            skipped[cand.name] = reason
            say("optimize(auto): skipped %s: %s", cand.name, reason)
            continue
        if cand.fit is not None:  # sized to what is left of the budget
            room = min(cand.share * budget.seconds, budget.seconds - spent)
            cand = cand.fit(room)
            if cand is None:
                skipped[name] = f"the budget {budget.describe()} leaves too little for a useful run"
                say("optimize(auto): skipped %s: %s", name, skipped[name])
                continue
            if cand.estimate > room:  # the user's max_iterations fixed its size: 47.5 s ran under 'fast' (5 s)
                skipped[name] = (f"max_iterations={ctx.max_iterations} makes it ~{cand.estimate:.3g} CPU s, over the "
                                 f"{room:.3g} s the budget {budget.describe()} leaves; lower max_iterations or pass a "
                                 "larger budget to run it")
                say("optimize(auto): skipped %s: %s", name, skipped[name])
                continue
        spent += cand.estimate
        c0, w0 = time.process_time(), time.perf_counter()
        try:
            with _ticker(say, cand.name, cand.estimate):
                found = cand.run()
            charged = cand.estimate if cand.charge is None else cand.charge(found)
            spent += charged - cand.estimate  # a fitted search charged what it ran, by its model (not the clock)
            candidates.append(score(ctx.workload, cand.name, found, ctx.norm, time.perf_counter() - w0,
                                    time.process_time() - c0, charged))
        except (ValueError, ArithmeticError, SolverError, MemoryError) as exc:  # one candidate never aborts auto
            failures[cand.name] = f"{type(exc).__name__}: {exc}"
            say("optimize(auto): %s failed (%s)", cand.name, failures[cand.name][:120])
            continue
        c = candidates[-1]
        say("optimize(auto): %s %s %.6g (%.1f s, expected %.1f s)", cand.name, "=" if c["exact"] else "≤",
            c["objective"], c["seconds"], cand.estimate)
    if not candidates:
        raise ValueError(f"optimize(method='auto'): no method could run on '{ctx.workload.name}' within the budget "
                         f"{budget.describe()}. Skipped: {skipped}; failed: {failures}. Give a larger budget "
                         f"(budget='thorough' or a number of CPU seconds), or choose a method."
                         f"{_stream_laplace_remedy(ctx)}")
    svd, bound_method, why = _raised(ctx, candidates, svd, budget.seconds - spent)
    if why is not None:
        skipped["dual_bound"] = why
        say("optimize(auto): skipped the certified dual bound: %s", why)
    return _result(ctx, candidates, failures, skipped, svd, bound_exact, budget, spent, time.perf_counter() - t0,
                   bound_method, bound_seconds)


def _raised(ctx: Context, candidates, svd: float, room: float) -> tuple[float, str, str | None]:
    """(the bound, "svd", "search" (a candidate's own certificate, e.g. OPT_⊗'s per-factor duals) or
    "dual_product", why it was not raised or None): raised to the certified Lagrange-dual bound
    (:func:`mmopt.structured.dual_bound.optimum_floor`, either noise) on symmetric 1- and 2-way unions, computed
    only when the best candidate is not already certified by the bounds at hand and its expected cost
    (:func:`mmopt.auto.costs.dual_floor`) fits the ``room`` the budget has left — or a candidate computed it already
    (it cost 6 CPU s of a 'fast' call on 2-way marginals of (32,)³, and 2.5 s on prefix 32 × 32)."""
    best = min(c["objective"] for c in candidates)
    known = max([svd, *(c["lower_bound"] for c in candidates if c["lower_bound"] is not None)])
    plain = "svd" if known <= svd else "search"
    if ctx.structure is None or best <= known * (1 + CERTIFIED_GAP):  # certified already (e.g. by OPT_⊗'s own)
        return svd, plain, None
    dual = known_floor(ctx.structure)
    if dual is None:
        if (cost := costs.dual_floor(ctx.structure)) > room:
            return svd, plain, (f"expected ~{cost:.3g} CPU s, over the {max(room, 0.0):.3g} s the budget leaves; "
                                "the result keeps the SVD bound (pass a larger budget for the tighter certificate)")
        dual = optimum_floor(ctx.structure)
    if dual >= known and dual > svd:  # equal: a candidate (coupled) attached this same bound as its certificate
        return dual, "dual_product", None
    return max(svd, dual), plain, None


def _skip_reason(cand, best, bound: float, budget: Budget, spent: float) -> str | None:
    if cand.requires is not None:
        return cand.requires
    if best is not None and best["objective"] <= bound * (1 + CERTIFIED_GAP):
        return (f"'{best['method']}' already meets the proven lower bound (within {CERTIFIED_GAP:g}): nothing can "
                "do better")
    if best is not None and cand.unless is not None and best["objective"] <= cand.unless * bound:
        return (f"'{best['method']}' is already within {cand.unless:g}× the lower bound "
                f"({best['objective'] / bound:.4g}×)")
    if cand.estimate > cand.share * budget.seconds:
        share = "" if cand.share >= 1 else f" (it rarely wins here, so it may take {cand.share:.0%} of it)"
        return (f"expected ~{cand.estimate:.3g} CPU s, over the budget {budget.describe()}{share}; pass a larger "
                "budget to run it")
    if cand.estimate > budget.seconds - spent:
        return (f"expected ~{cand.estimate:.3g} CPU s, but the candidates run before it were expected to take "
                f"{spent:.3g} of the budget {budget.describe()}; pass a larger budget to run it")
    return None


@contextlib.contextmanager
def _ticker(say, name: str, estimate: float):
    """A progress line every :data:`TICK` s while the candidate ``name`` runs (no silent stretch)."""
    stop, t0 = threading.Event(), time.perf_counter()

    def beat() -> None:
        while not stop.wait(TICK):
            say("optimize(auto): %s still running, %.0f s (expected ~%.0f CPU s)", name,
                time.perf_counter() - t0, estimate)
    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def lower_bound(ctx: Context) -> tuple[float, bool]:
    """(a proven lower bound at unit privacy, is it the exact SVD bound?): the SVD bound (exact for dense
    workloads, a flagged lower bound for some unions); on prefix sums / all ranges their certified diagonal
    bound (never below the SVD bound), from closed forms. :func:`_raised` may raise it after the run."""
    if ctx.stream is not None or ctx.family in ("prefix", "all_range"):
        from mmopt.toeplitz.bound import lower_bound as stream_bound
        from mmopt.toeplitz.bound import svd_bound as closed_svd_bound
        from mmopt.toeplitz.error import StreamWorkload
        kind, n = ctx.family, ctx.n
        return max(closed_svd_bound(n, kind), stream_bound(StreamWorkload(kind, n)).value), True
    from mmopt.multidim.search import _svd_bound  # lazy: that module scores with this one's score()
    return _svd_bound(ctx.workload)


def _gap(c, ctx) -> float | None:
    """A candidate's certified gap tolerance: its own (a route that certifies, extra["tol"]), or the caller's tol
    where that is the method's duality gap (:func:`mmopt._base.result.gap_tol`) — never a convergence test's."""
    return max(c["extra"].get("tol", 0.0), gap_tol(c["method"], ctx.norm, ctx.tol) or 0.0) or None


def _closed(c) -> bool:
    """The candidate is a construction: its converged status is "closed_form", never "optimal" uncertified."""
    return c["method"] in CLOSED_FORMS or c["status"] == "closed_form"


def _stream_laplace_remedy(ctx) -> str:
    """What runs at any n under ε-DP on prefix sums / all ranges when even H_b's O(n) pass does not fit the budget:
    the tree strategy itself, built directly (prefix(10⁵) was refused with "give a larger budget" alone)."""
    if ctx.stream is None or ctx.norm != "l1":
        return ""
    return (f" Under ε-DP the tree strategy mmopt.toeplitz.tree({ctx.n}) (Δ₁ exact) is built directly at any n, for "
            "mmopt.evaluate and mmopt.release.")


def _releasable_best(ctx, candidates) -> tuple[dict, dict]:
    """(the lowest-error candidate whose strategy mmopt.release takes on this workload, if any, else the lowest;
    {method: {"objective", "reason"}} of those it does not take). Past 4,096 cells a stream workload takes Toeplitz
    and weighted square-root strategies only: the tridiagonal dual's dense optimum (Gaussian noise, up to 16,384
    cells) and H_b as a p-Identity strategy were returned where release and evaluate refused them (a helper's
    probe); the dual's certified bound is kept either way."""
    from mmopt import dispatch
    from mmopt.structured._checks import DENSE_LIMIT
    blocked = {}
    if ctx.stream is not None and ctx.n > DENSE_LIMIT:  # below it release takes any strategy through the dense twin
        # (route itself would build that twin: the n×n Gram auto never forms on a stream workload)
        for c in candidates:
            if not dispatch.stream_native(c["strategy"]):
                try:
                    dispatch.route(ctx.workload, c["strategy"], "release")
                except dispatch.StrategyMismatch as exc:
                    blocked[c["method"]] = {"objective": c["objective"], "reason": str(exc)}
    usable = [c for c in candidates if c["method"] not in blocked] or candidates
    return min(usable, key=lambda c: c["objective"]), blocked


def _result(ctx, candidates, failures, skipped, svd, bound_exact, budget, spent, seconds,
            bound_method: str = "svd", bound_seconds: float = 0.0) -> OptimizeResult:
    best, unreleasable = _releasable_best(ctx, candidates)
    bound = svd
    for c in candidates:  # a candidate's own bound, where stronger, named as its source (it kept the SVD label)
        if c["lower_bound"] is not None and c["lower_bound"] > bound:
            bound, bound_method = c["lower_bound"], c["extra"].get("lower_bound_method") or f"{c['method']}'s own"
    m = ctx.workload.n_queries
    # the candidate's own verdict on the bound is restated by reconcile below, against the best bound of all
    own = best["message"].split(" Not certified optimal:")[0]
    # the candidate's own words under its name: min_error's "Best of 9 candidates is …" followed auto's "Best of 8
    # candidates is 'min_error'." as if one count contradicted the other (a helper's audit)
    message = f"Best of {len(candidates)} candidates is '{best['method']}'. {best['method']}: " + own
    if skipped:
        message += f" Skipped: {', '.join(skipped)} (reasons in extra['skipped'])."
    if failures:  # said where it is read: a failed l2_approx left H₂ at 3.5× the bound without a word here
        message += f" Failed: {', '.join(failures)} (reasons in extra['failed'])."
    if unreleasable:
        lowest = min(unreleasable, key=lambda name: unreleasable[name]["objective"])
        plural = "ies" if len(unreleasable) > 1 else "y"
        chosen = (f" ('{lowest}' had the lowest error, {unreleasable[lowest]['objective']:.6g}); returned the best "
                  "that it takes" if lowest != best["method"] else ", and no candidate's strategy is one it takes")
        message += (f" mmopt.release (and evaluate) cannot take the strateg{plural} of "
                    f"{', '.join(repr(k) for k in unreleasable)} on this workload{chosen} (reasons in "
                    "extra['unreleasable']).")
    # the winner's own certified gap, if it has one (_gap), and a construction's status (_closed)
    status, message, bound = reconcile(best["objective"], bound, best["status"], message, closed=_closed(best),
                                       tol=_gap(best, ctx))
    keys = ("objective", "lower", "lower_bound", "seconds", "cpu", "estimate", "exact")

    def verdict(c) -> str:  # each candidate's status against the best bound, as the result's own: a search that
        # converged is "optimal" only when certified (kron under ε-DP at 12.4× the bound was listed "optimal")
        return reconcile(c["objective"], bound, c["status"], "", closed=_closed(c), tol=_gap(c, ctx))[0]
    extra = dict(best["extra"]) | {
        "total_exact": best["exact"], "bound_exact": bound_exact, "bound_method": bound_method,
        "candidates": {c["method"]: {k: c[k] for k in keys} | {"status": verdict(c)} for c in candidates},
        "failed": failures, "skipped": skipped, "unreleasable": {k: c["reason"] for k, c in unreleasable.items()},
        "budget": {"label": budget.label, "seconds": budget.seconds, "planned": spent, "bound_seconds": bound_seconds}}
    return OptimizeResult(best["strategy"], ctx.norm, best["objective"], bound, status, status in SUCCESS, message,
                          f"auto:{best['method']}", best["solver"], best["iterations"], seconds,
                          best["objective"] / m, bound / m, (), extra)
