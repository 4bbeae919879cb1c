"""HDMM's OPT_+: one product strategy per workload term, stacked with budget weights θ.

Notation: see README. Terms whose factor Grams coincide on every attribute form one group k (their Gram is
(Σ w_j²) ⊗ᵢ Gᵢ, one product workload W⁽ᵏ⁾). OPT_⊗ (:func:`mmopt.multidim.kron.solve_kron`) gives each group a
product strategy A⁽ᵏ⁾ with Δ = 1 and exact unit error E_k = tr(G⁽ᵏ⁾ X⁽ᵏ⁾⁺). The union A = [θ₁A⁽¹⁾; …] has
X = Σ θ_k² X⁽ᵏ⁾ ⪰ θ_k² X⁽ᵏ⁾, so (Löwner order reverses under ⁺ on the range, as in
:mod:`mmopt.structured.analysis`) tr(G⁽ᵏ⁾X⁺) ≤ E_k/θ_k², and

    Δ(A)² tr(G X⁺) ≤ Δ(A)² Σ_k E_k/θ_k²,     Δ₁(A) ≤ Σ θ_k,   Δ₂(A)² ≤ Σ θ_k².

θ minimises that bound: l1, Σθ_k = 1: θ_k ∝ E_k^{1/3}, bound (Σ E_k^{1/3})³ (HDMM's choice); l2, Σθ_k² = 1:
θ_k² ∝ E_k^{1/2}, bound (Σ E_k^{1/2})². The reported bound uses the union's actual Δ
(:func:`mmopt.structured.sensitivity`, exact or a proven upper bound), which can only lower it. Source:
McKenna, Miklau, Hay, Machanavajjhala, PVLDB 2018, §4.3.
"""

from __future__ import annotations

import logging
import math
import time

import numpy as np

from mmopt._base import validation as v
from mmopt._base.parallel import check_n_jobs, ordered_map, plan
from mmopt._base.solution import ImplicitSolution, worst_status
from mmopt.error import NumericalError
from mmopt.multidim import _common as cm
from mmopt.multidim.kron import CONVERGED, DEFAULT_SWEEPS, DEFAULT_TOL, solve_kron
from mmopt.structured.analysis import evaluate
from mmopt.structured.strategies import kron_strategy, sensitivity, union_strategy
from mmopt.structured.workloads import ImplicitWorkload, Product

__all__ = ["solve_union", "budget_weights"]

_LOG = logging.getLogger("mmopt")
_CALLER = "solve_union"


def budget_weights(errors, norm: str) -> tuple[np.ndarray, float]:
    """θ minimising Σ_k E_k/θ_k² under Σθ_k = 1 (l1) or Σθ_k² = 1 (l2), and that minimum.

    Lagrange: l1, 2E_k/θ_k³ = μ gives θ_k ∝ E_k^{1/3} and the value (Σ E_k^{1/3})³; l2, with u_k = θ_k²,
    E_k/u_k² = μ gives u_k ∝ √E_k and (Σ √E_k)².

    Examples
    --------
    >>> theta, value = budget_weights([1.0, 8.0], "l1")
    >>> theta.round(6).tolist(), round(value, 9)
    ([0.333333, 0.666667], 27.0)
    """
    caller = "budget_weights"
    E = cm.check_shares(errors, "errors", caller)
    if v.check_choice(norm, name="norm", caller=caller, choices=("l1", "l2")) == "l1":
        root = np.cbrt(E)
        return root / root.sum(), float(root.sum() ** 3)
    root = np.sqrt(E)
    return np.sqrt(root / root.sum()), float(root.sum() ** 2)


def _groups(table: cm.GramTable) -> list[list[int]]:
    """Term indices grouped by identical factor Grams on every attribute, in order of first appearance."""
    index = table.index
    groups: dict[tuple, list[int]] = {}
    for j, row in enumerate(index):
        groups.setdefault(tuple(row.tolist()), []).append(j)
    return list(groups.values())


def _group_workload(workload: ImplicitWorkload, terms: list[int], k: int) -> ImplicitWorkload:
    first = workload.terms[terms[0]]
    weight = math.sqrt(sum(workload.terms[j].weight ** 2 for j in terms))  # (Σw²)⊗Gᵢ: the same Gram
    return ImplicitWorkload((Product(first.factors, weight),), name=f"{workload.name}[group {k}]")


def _solve_factor(factor, norm, restarts, ss, sweeps, tol) -> ImplicitSolution:
    """OPT_⊗ on one attribute's factor (one task; its restarts run in turn, n_jobs=1: the tasks are parallel)."""
    return solve_kron(ImplicitWorkload((Product((factor,)),), name=factor.name), norm=norm, restarts=restarts,
                      seed=ss, max_iterations=sweeps, tol=tol, n_jobs=1)


def solve_union(workload: ImplicitWorkload, *, norm: str = "l1", restarts: int = 3, seed=None,
                max_iterations: int | None = None, tol: float | None = None,
                verbose: bool = False, n_jobs: int | None = None) -> ImplicitSolution:
    r"""OPT_+: a union of per-group OPT_⊗ strategies with budget weights θ (see the module docstring).

    Parameters
    ----------
    workload : ImplicitWorkload
    norm : {"l1", "l2"}, default="l1"
    restarts : int, default=3
        Restarts of each factor's OPT_⊗; the distinct (attribute, factor Gram) pairs, sorted, are seeded by
        ``numpy.random.SeedSequence(seed).spawn(pairs)``.
    seed : int, numpy.random.SeedSequence or None
    max_iterations, tol : as :func:`mmopt.multidim.kron.solve_kron` (per group)
    verbose : bool, default=False
        Log each group on the "mmopt" logger at INFO (else DEBUG); a tqdm bar over the factor searches.
    n_jobs : int or None, default=None
        Factor searches (distinct (attribute, Gram) pairs) run at once, joblib's convention (see
        :func:`mmopt.optimize`); the result does not depend on it. ``extra`` records workers and backend.

    Returns
    -------
    ImplicitSolution
        ``strategy``: :func:`mmopt.structured.union_strategy` of the groups' products, weights θ.
        ``extra["objective"]``: :func:`mmopt.structured.evaluate`'s unit error when it can compute one
        (exact where ``extra["objective_exact"]``), else the θ bound; ``extra["upper_bound"]``: the θ bound
        Δ(A)²·Σ_k E_k/θ_k², always valid; ``extra["theta"]``, ``extra["group_errors"]`` (E_k),
        ``extra["groups"]`` (term indices). ``status``: the least converged group's.

    Notes
    -----
    .. math:: \min_\theta \sum_k E_k/\theta_k^2 \ \text{s.t.}\ \textstyle\sum_k \theta_k = 1 \ (\ell_1),
       \qquad \theta_k \propto E_k^{1/3}.

    Examples
    --------
    >>> from mmopt.structured.workloads import kron, union, identity, total, prefix
    >>> W = union([kron(prefix(8), total(3)), kron(total(8), identity(3))])
    >>> sol = solve_union(W, restarts=1, seed=0)
    >>> sol.strategy.is_product, len(sol.extra["theta"]), bool(sol.extra["objective"] <= sol.extra["upper_bound"])
    (False, 2, True)
    """
    began = time.perf_counter()
    norm, restarts, _, sweeps, tol = cm.check_common(
        _CALLER, workload, norm, restarts, seed, max_iterations, tol, verbose,
        default_iterations=DEFAULT_SWEEPS, default_tol=DEFAULT_TOL)
    n_jobs = check_n_jobs(n_jobs, caller=_CALLER)
    log = _LOG.info if verbose else _LOG.debug
    table = cm.gram_table(workload)
    groups = _groups(table)
    # Every group is one product, whose OPT_⊗ blocks decouple (Ĝᵢ ∝ Gᵢ): each distinct (attribute, Gram) is
    # solved once, by OPT_⊗ on that one attribute, and shared by every group that uses it.
    keys = sorted({(i, int(table.index[g[0], i])) for g in groups for i in range(table.d)})
    seeds = dict(zip(keys, cm.spawn(seed, len(keys), _CALLER), strict=True))
    tasks = []
    for i, g in keys:
        term = next(workload.terms[j] for j in range(len(workload.terms)) if table.index[j, i] == g)
        tasks.append((term.factors[i], norm, restarts, seeds[(i, g)], sweeps, tol))
    workers, backend = plan(n_jobs, len(tasks))
    solved = {}
    results = ordered_map(_solve_factor, tasks, n_jobs=n_jobs, desc="solve_union factors", progress=verbose)
    for (i, g), task, sol in zip(keys, tasks, results, strict=True):
        solved[(i, g)] = sol
        log("solve_union attribute %d, factor '%s': unit error %s (%s)", i, task[0].name,
            cm.fmt(sol.extra["objective"]), sol.status)
    parts, errors, statuses, iterations = [], [], [], 0
    for k, terms in enumerate(groups):
        used = [solved[(i, int(table.index[terms[0], i]))] for i in range(table.d)]
        part = kron_strategy(*[u.strategy.terms[0].factors[0] for u in used], name=f"OPT_kron(group {k})")
        parts.append(part)
        errors.append(evaluate(_group_workload(workload, terms, k), part, norm=norm).total_squared_error)
        statuses.append(worst_status(u.status for u in used))
        log("solve_union group %d/%d (terms %s): unit error %s (%s)", k + 1, len(groups), terms,
            cm.fmt(errors[-1]), statuses[-1])
    iterations = sum(u.iterations or 0 for u in solved.values())
    theta, _ = budget_weights(errors, norm)
    strategy = union_strategy(parts, weights=theta.tolist(), name=f"OPT_union({workload.name})")
    sens = sensitivity(strategy, norm)
    bound = sens.value**2 * float(np.sum(np.asarray(errors) / theta**2))
    report = None
    try:
        report = evaluate(workload, strategy, norm=norm)
        objective, exact, method = report.total_squared_error, report.total_exact, report.method
        if exact and objective > bound * (1 + 1e-9):
            raise NumericalError(f"{_CALLER}: the exact error {objective!r} of the union exceeds its proven upper "
                                 f"bound {bound!r}: numerical failure. Report this workload.")
        if not exact and objective > bound:
            objective, method = bound, "theta_bound"
    except NumericalError:
        raise
    except ValueError as exc:  # no exact path and no single block supports W: the θ bound is all there is
        log("solve_union: structured.evaluate has no value for the union (%s); using the θ bound", exc)
        objective, exact, method = bound, False, "theta_bound"
    status = worst_status(statuses)
    log("solve_union: %d group(s), unit error %s (%s), θ bound %s, %.2f s", len(groups), cm.fmt(objective),
        method, cm.fmt(bound), time.perf_counter() - began)
    counts = {s: statuses.count(s) for s in dict.fromkeys(statuses)}
    message = (f"OPT_+ ({norm}): union of {len(groups)} per-group OPT_⊗ product strategies with budget weights "
               f"θ ∝ E_k^{{{'1/3' if norm == 'l1' else '1/4'}}}; group statuses {counts}. The union's status is "
               f"its least converged group's; {CONVERGED}, tol={tol:g}."
               + ("" if exact else " Its error is a proven upper bound (extra['objective_exact'] is False)."))
    return ImplicitSolution(
        strategy=strategy, status=status, message=message, iterations=iterations,
        solver="mmopt-bcd-lbfgs" if norm == "l1" else "mmopt-bcd-l2-newton", lower_bound=None,
        history=tuple({"group": k, "terms": tuple(g), "objective": e, "status": s, "theta": float(t)}
                      for k, (g, e, s, t) in enumerate(zip(groups, errors, statuses, theta, strict=True))),
        extra={"objective": objective, "objective_exact": exact, "objective_method": method,
               "upper_bound": bound, "sensitivity": sens.value, "sensitivity_exact": sens.exact,
               "theta": tuple(float(t) for t in theta), "group_errors": tuple(errors),
               "groups": tuple(tuple(g) for g in groups), "norm": norm, "seconds": time.perf_counter() - began,
               "n_jobs": workers, "backend": backend,
               "report": report})  # structured.evaluate's report on this workload: auto scores with it, not again
