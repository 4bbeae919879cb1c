"""The search over the weighted node family (:mod:`mmopt.hierarchy.nodes`) under Gaussian noise: a heuristic.

Notation: see README and :mod:`mmopt.hierarchy.nodes`. The objective tr(G X⁺) · max diag(X) is invariant to the
scale of z, so it is minimised over θ = log z without constraints. Its max is replaced by the power mean
M_p(D) = (mean D^p)^{1/p} ≤ max D for p = 16, 64, 256, 1024 in turn (each L-BFGS run warm-starting the next), and
the result is scored with the exact max. The error is convex in X and X is linear in z, but the log-parametrised,
smoothed problem is solved to a local optimum only: the result is a heuristic, scored exactly and compared with
the certified lower bound of :mod:`mmopt.hierarchy.bound` by the caller.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from mmopt._base import validation as v
from mmopt.hierarchy import nodes as hn
from mmopt.hierarchy.workload import HierarchyWorkload, check_workload

POWERS = (16.0, 64.0, 256.0, 1024.0)
_LOG_RANGE = 40.0


@dataclass(frozen=True)
class NodeSolution:
    """The best node strategy found: ``objective`` = tr(G X⁺) at Δ₂ = 1, exact; ``evaluations`` of the objective."""

    strategy: hn.NodeStrategy
    objective: float
    evaluations: int
    converged: bool


def run_powers(objective, theta: np.ndarray, max_iterations: int = 2_000) -> tuple[np.ndarray, bool]:
    """``objective(θ, p)`` → (value, gradient) minimised by L-BFGS-B for each power p of :data:`POWERS` in turn,
    each run warm-starting the next; (θ, whether every run converged)."""
    converged = True
    bounds = [(-_LOG_RANGE, _LOG_RANGE)] * theta.size  # weights within e^±40 of each other: no overflow in a step
    # the objective scales with the workload's weights squared, and L-BFGS-B's tests are absolute below 1 (ftol
    # divides by max(|f|, 1); gtol is absolute): with every weight 10⁻⁴ the search stopped at its start after 8
    # evaluations, "converged", 5 % above the optimum it reached at weight 1 (a helper's probe). Its value at the
    # start sets the scale.
    with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
        start = abs(float(objective(theta, POWERS[0])[0]))
    scale = start if 0.0 < start < np.inf else 1.0

    def scaled(t, p):
        value, gradient = objective(t, p)
        return value / scale, gradient / scale

    for p in POWERS:
        with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
            res = minimize(scaled, theta, args=(p,), jac=True, method="L-BFGS-B", bounds=bounds,
                           options={"maxiter": max_iterations, "ftol": 1e-13, "gtol": 1e-10})
        theta = res.x
        converged = converged and res.status == 0
    return theta, converged


def tree_attribute(W: HierarchyWorkload) -> int:
    """The attribute measured node by node: the deepest irregular hierarchy, else the deepest one."""
    attrs = W.attributes
    key = [(not h.regular, h.depth, h.n) for h in attrs]
    return int(max(range(len(attrs)), key=lambda i: key[i]))


def solve_nodes(workload: HierarchyWorkload, *, max_iterations: int = 2_000, tree: int | None = None) -> NodeSolution:
    """The weighted node family's best strategy found for ``workload`` (unit Gaussian noise).

    ``tree`` is the index (0 to the number of attributes − 1) of the attribute measured node by node, any of them;
    by default :func:`tree_attribute`. ``max_iterations`` (≥ 1) bounds each L-BFGS-B run.

    Examples
    --------
    >>> from mmopt.hierarchy import Hierarchy, grouping_sets, rollup
    >>> geo = Hierarchy.from_parents([[0, 1, 1, 1]], level_names=("nation", "state", "county"))
    >>> sol = solve_nodes(grouping_sets([geo], rollup("state", "county")))
    >>> bool(sol.objective > 0), sol.strategy.sensitivity() == 1.0
    (True, True)
    """
    caller = "hierarchy.solve_nodes"
    W = check_workload(workload, caller)
    # max_iterations=0 or 2.5 reached L-BFGS-B, which ran with them without a word
    max_iterations = v.check_int(max_iterations, name="max_iterations", caller=caller, low=1)
    k = tree_attribute(W) if tree is None else hn.check_tree(W, tree, caller)
    lay = hn.layout(W, k)
    h = W.attributes[k]
    lw = hn.LogWeights(h, lay)
    count = [0]

    def objective(theta, p):
        count[0] += 1
        zs = lw.split(theta)
        f, grads = 0.0, []
        for u, z in enumerate(zs):
            fu, gu, _ = hn.passes(h, z, lay.beta[:, u])
            f += fu
            grads.append(gu)
        D = lw.diagonal(zs)
        Dm = D.max()
        r = D / Dm
        mean = np.mean(r ** p)
        smax = Dm * mean ** (1.0 / p)
        Db = (r ** (p - 1.0)) * mean ** (1.0 / p - 1.0) / D.size  # ∂M_p/∂D
        return f * smax, lw.gradient(zs, grads, f, smax, Db)

    theta, converged = run_powers(objective, np.zeros(lw.size), max_iterations)
    A = lw.strategy(W.attributes, theta)
    return NodeSolution(A, hn.node_total(A, W), count[0], converged)
