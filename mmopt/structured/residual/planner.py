"""Noise allocation for residual strategies: the closed forms for total error, a convex program for max variance.

Notation: see README, :mod:`.workload` and :mod:`.strategy`. Write u_S = c_S² for the weight of residual
measurement S, p_S = ∏_{i∈S}(1 − 1/nᵢ) and L_S = ∏_{i∈S} ‖Bᵢ‖₁ for its column norms, and
v_S = r_S ν_S N_S, so that at unit privacy (:mod:`.error`, ℓ_S = u_S/N_S)

    total = Δ² · Σ_S v_S / u_S,    Δ₂² = Σ_S p_S u_S,    Δ₁ = Σ_S L_S √u_S.

**Gaussian noise (L2).** By Cauchy–Schwarz (Σ p u)(Σ v/u) ≥ (Σ √(p_S v_S))², with equality iff
u_S ∝ √(v_S/p_S) = N_S √ν_S. Since p_S v_S = r_S² ν_S the minimum is (Σ_S r_S √ν_S)², which *is* the SVD bound
(:func:`.error.svd_bound`): no strategy of any form does better (Li et al., PODS 2010, Thm 5.26), so this
residual strategy is optimal among all matrix mechanisms for total squared error — the optimality
ResidualPlanner states for weighted marginals (Xiao, He, Zhang, Kifer, NeurIPS 2023, arXiv 2305.08175; there
the allocation is the same Cauchy–Schwarz closed form, ``find_var_sum_cauchy`` in its code). Here it is
certified numerically by objective = bound.

**Laplace noise (L1).** By Hölder the best residual strategy has c_S ∝ (v_S/L_S)^{1/3}, with value
(Σ_S L_S^{2/3} v_S^{1/3})³. It is optimal among residual strategies with these bases only, not among all
strategies: under ε-DP it is a heuristic candidate.

**Max variance / per-marginal targets.** With s_S = 1/u_S, var_A = Σ_{T⊆A} a_{A,T} s_T is linear
(a_{A,T} = w_A² r_T N_T / N_A²), so min_Δ=1 max_A var_A/τ_A = min {Δ(s)² : var_A(s) ≤ τ_A ∀A} with
Δ₂² = Σ p_S/s_S (convex) or Δ₁ = Σ L_S s_S^{−1/2} (convex); solved with cvxpy, then re-evaluated exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mmopt._base import validation as v
from mmopt.structured.residual import closure as cl
from mmopt.structured.residual import error as er
from mmopt.structured.residual import strategy as rs
from mmopt.structured.residual.workload import MarginalWorkload

OBJECTIVES = ("total", "max_variance")


@dataclass(frozen=True, eq=False)
class Plan:
    """A residual strategy with the objective it was chosen for, at unit privacy and Δ = 1.

    ``objective`` is the total squared error (``kind="total"``) or max_A var_A/τ_A (``"max_variance"``),
    recomputed exactly from the strategy. ``lower_bound`` is the SVD bound for the total (valid under both
    norms since Δ₁ ≥ Δ₂), None for max variance. ``status`` is "optimal" only when the strategy is proven
    optimal among all strategies (Gaussian noise, total error, objective meeting the bound) or, for max
    variance, when the convex solver converged (optimal among residual strategies).
    """

    strategy: rs.ResidualStrategy
    kind: str
    norm: str
    objective: float
    lower_bound: float | None
    status: str
    message: str
    solver: str | None = None


def plan(workload, *, objective: str = "total", norm: str = "l2", targets=None, solver: str | None = None) -> Plan:
    """The residual strategy minimising ``objective`` on a marginal ``workload`` (module docstring).

    Parameters
    ----------
    workload : MarginalWorkload, ImplicitWorkload or Workload of marginals
    objective : {"total", "max_variance"}
        Total squared error (closed form), or the largest per-cell variance over the workload's marginals,
        each divided by its target (convex program; literal marginal workloads only).
    norm : {"l2", "l1"}
        Gaussian (Δ₂; the optimal case) or Laplace (Δ₁; heuristic) noise.
    targets : dict {attribute tuple: τ_A > 0} or None
        Relative variance targets per marginal for ``"max_variance"`` (default 1 for every marginal).
    solver : str or None
        cvxpy solver for ``"max_variance"`` (:func:`mmopt.solvers.choose`).

    Examples
    --------
    >>> from mmopt.structured.residual import marginal_workload
    >>> W = marginal_workload((4,) * 5, [(i, j) for i in range(5) for j in range(i + 1, 5)])
    >>> p = plan(W)
    >>> round(p.objective, 2), p.status, abs(p.objective / p.lower_bound - 1) < 1e-12
    (948.06, 'optimal', True)
    """
    caller = "residual.plan"
    v.check_choice(objective, name="objective", caller=caller, choices=OBJECTIVES)
    v.check_choice(norm, name="norm", caller=caller, choices=("l1", "l2"))
    W = er._marginal(workload, caller)
    if objective == "total":
        if targets is not None:
            raise ValueError(f"The 'targets' parameter of {caller} applies to objective='max_variance' only. "
                             f"Got targets with objective={objective!r}.")
        return _total(W, norm)
    return _max_variance(W, norm, targets, solver, caller)


def _strategy(W: MarginalWorkload, u: np.ndarray, norm: str, name: str) -> rs.ResidualStrategy:
    """The residual strategy with weights √u over W's closure, scaled to Δ = 1 (error is scale-free)."""
    A = rs.ResidualStrategy(W.shape, W.closure.members, np.sqrt(u), name)
    return rs.ResidualStrategy(W.shape, A.subsets, A.weights / rs.sensitivity(A, norm).value, name)


def _total(W: MarginalWorkload, norm: str) -> Plan:
    C, nu = W.closure, W.eigenvalues
    if norm == "l2":
        u = C.cells * np.sqrt(nu)  # u_S ∝ N_S √ν_S
    else:
        L = rs.subset_norms(W.shape, C.members, "l1")
        u = (C.multiplicity * nu * C.cells / L) ** (2.0 / 3.0)  # c_S ∝ (v_S/L_S)^{1/3}
    A = _strategy(W, u, norm, "residual")
    ell = A.weights**2 / C.cells
    unit, _ = er.unit_errors(W, ell, caller="residual.plan")
    value = rs.sensitivity(A, norm).value ** 2 * unit
    bound = er.unit_bound(W)
    if norm == "l2":
        gap = value / bound - 1
        status = "optimal" if gap <= 1e-9 else "optimal_inaccurate"
        msg = (f"Closed-form residual allocation for Gaussian noise (Cauchy–Schwarz): its total error equals the "
               f"SVD lower bound (relative gap {gap:.1e}), so no strategy does better.")
    else:
        status = "closed_form"  # exact as built, optimal only among residual strategies (reconcile certifies more)
        msg = ("Heuristic candidate under ε-DP (Laplace, L1): the Hölder-optimal residual allocation, optimal "
               "among residual strategies with these bases but not proven optimal among all strategies; "
               f"its objective is {value / bound:.4g} × the SVD lower bound.")
    return Plan(A, "total", norm, value, bound, status, msg)


def per_marginal_targets(W: MarginalWorkload, targets, caller: str) -> np.ndarray:
    """τ_A for each marginal of W, in W's order, from None (all 1) or a dict {attribute tuple: τ_A > 0}."""
    if targets is None:
        return np.ones(len(W.sets))
    if not isinstance(targets, dict):
        raise TypeError(f"The 'targets' parameter of {caller} must be a dict {{attribute tuple: target > 0}} or "
                        f"None. Got {type(targets).__name__} instead.")
    # distinct: (0, 1) and (1, 0) as two keys, the later silently replaced the earlier (a 0.01 target dropped for 1.0)
    keys = cl.check_sets(list(targets), W.shape, name="targets", caller=caller, distinct=True)
    unknown = [a for a, A in zip(targets, keys, strict=True) if A not in set(W.sets)]
    if unknown:  # a target for a marginal the workload does not ask was ignored without a word
        raise ValueError(f"The 'targets' parameter of {caller} names {unknown[:3]!r}, which the workload does not "
                         f"ask. Its marginals: {list(W.sets)[:6]!r}{' …' if len(W.sets) > 6 else ''}.")
    given = {A: v.check_real(t, name="targets", caller=caller, low=0.0, low_open=True)
             for A, t in zip(keys, targets.values(), strict=True)}
    missing = [A for A in W.sets if A not in given]
    if missing:
        raise ValueError(f"The 'targets' parameter of {caller} must give a target for every marginal of the "
                         f"workload. Got none for {missing[:3]}{' …' if len(missing) > 3 else ''}.")
    return np.array([given[A] for A in W.sets])


def _max_variance(W: MarginalWorkload, norm: str, targets, solver, caller: str) -> Plan:
    import cvxpy as cp
    from scipy import sparse

    from mmopt import solvers
    if not W.literal:
        raise ValueError(f"{caller}: objective='max_variance' needs the workload's queries to be marginal cells; "
                         f"'{W.name}' is a Gram-equivalent expansion (e.g. of identity-plus-total factors).")
    tau = per_marginal_targets(W, targets, caller)
    C = W.closure
    s0 = 1.0 / _total(W, norm).strategy.weights**2  # the total-optimal point: scales the variables to ~1
    coef = (W.weights**2 / W.set_cells**2 / tau)[:, None]
    B = sparse.csr_matrix(W.incidence.multiply(coef).multiply((C.multiplicity * C.cells * s0)[None, :]))
    B = B / float((B @ np.ones(len(C))).max())  # s = s0·x/K₀: x = 1 is feasible and tight, the optimum near it
    x = cp.Variable(len(C))
    if norm == "l2":
        cost = cp.sum(cp.multiply(C.share / s0, cp.inv_pos(x)))
    else:
        L = rs.subset_norms(W.shape, C.members, "l1")
        cost = cp.sum(cp.multiply(L / np.sqrt(s0), cp.power(x, -0.5)))
    problem = cp.Problem(cp.Minimize(cost), [B @ x <= 1.0])
    name = solvers.choose(solver)
    out = solvers.solve(problem, name, tol=1e-9, what="the max-variance allocation")
    if not out.has_solution or x.value is None or not np.all(np.isfinite(x.value)):
        raise solvers.SolverError(out.message)
    s = s0 * np.clip(np.asarray(x.value, dtype=float), 1e-300, None)  # K₀ dropped: the scale is free
    A = _strategy(W, 1.0 / s, norm, "residual_maxvar")
    _, per = er.unit_errors(W, A.weights**2 / C.cells, caller=caller)
    value = rs.sensitivity(A, norm).value ** 2 * float(np.max(per / tau))
    msg = (f"{out.message} Optimal among residual strategies for max_A var_A/τ_A "
           f"({'Gaussian' if norm == 'l2' else 'Laplace'} noise); re-evaluated exactly.")
    return Plan(A, "max_variance", norm, value, None, out.status, msg, name)


def predicted_total(W: MarginalWorkload, norm: str) -> float:
    """The closed-form optimum (Σ r_S √ν_S)² (L2) or (Σ L_S^{2/3} v_S^{1/3})³ (L1), for checks."""
    C, nu = W.closure, W.eigenvalues
    if norm == "l2":
        return er.unit_bound(W)
    L = rs.subset_norms(W.shape, C.members, "l1")
    return float(np.sum(L ** (2 / 3) * (C.multiplicity * nu * C.cells) ** (1 / 3))) ** 3


__all__ = ["OBJECTIVES", "Plan", "plan", "predicted_total"]
