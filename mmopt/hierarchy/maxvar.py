"""The largest variance (over per-set targets) of grouping sets over hierarchies: a search and a certified bound.

Notation: see README, :mod:`mmopt.hierarchy.strategy` and :mod:`mmopt.hierarchy.nodes`. Each grouping set s has a
target τ_s (a variance); the objective is max_q v_q/τ_{s(q)} at Δ₂ = 1.

**Bound.** For weights P on the simplex of sets, max_q v_q/τ_q ≥ Σ_s P_s · Σ_{q∈s} v_q/(m_s τ_s), a weighted total
whose minimum over all strategies is bounded below by :func:`mmopt.hierarchy.bound.lower_bound` on the workload
with weights w_s·√(P_s/(m_s τ_s)); the bound is maximised over P (it is concave in P: the trace of a matrix square
root is). **Search** (a heuristic): the residual and the node families' weights by L-BFGS on log-weights, the max
over queries and over cell types replaced by power means (p = 16 … 1024, as :mod:`mmopt.hierarchy.node_solve`),
scored exactly; the better family is kept.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from mmopt.family.targets import check_targets
from mmopt.hierarchy import bound as hb
from mmopt.hierarchy import components as hc
from mmopt.hierarchy import nodes as hn
from mmopt.hierarchy.node_solve import run_powers, tree_attribute
from mmopt.hierarchy.strategy import HierarchyStrategy, unit_variances
from mmopt.hierarchy.workload import HierarchyWorkload


def set_targets(W: HierarchyWorkload, targets, caller: str) -> np.ndarray:
    """τ per grouping set from one number, one per set, or a dict {set index: τ}."""
    K = len(W.sets)
    if isinstance(targets, dict):
        if sorted(targets) != list(range(K)):
            raise ValueError(f"The 'targets' parameter of {caller} is a dict; it must give one target per grouping set "
                             f"index 0 … {K - 1}. Got keys {sorted(targets)!r:.80}.")
        targets = [targets[k] for k in range(K)]
    # the shared check: True, "5" or None are not numbers given as one (np.asarray made them 1.0, 5.0 and a shape
    # error), and the message names the bad value
    return check_targets(targets, K, caller, per="grouping set; every group of a set has the same target")


def lower_bound(W: HierarchyWorkload, tau: np.ndarray) -> float | None:
    """max_P of the weighted-total bound (None when two hierarchies are irregular)."""
    m = np.asarray(W.set_sizes, dtype=float)

    def value(phi):
        P = np.exp(phi - phi.max())
        P /= P.sum()
        Wp = HierarchyWorkload(W.attributes, W.sets, W.weights * np.sqrt(P / (m * tau) + 1e-300), W.name)
        got = hb.lower_bound(Wp)
        return None if got is None else got[0]

    start = np.zeros(len(W.sets))
    if value(start) is None:
        return None
    res = minimize(lambda phi: -value(phi), start, method="Powell", options={"xtol": 1e-6, "ftol": 1e-10})
    return float(max(-res.fun, value(start)))


def _power_mean(R: np.ndarray, p: float) -> tuple[float, np.ndarray]:
    top = R.max()
    r = R / top
    mean = np.mean(r ** p)
    return top * mean ** (1 / p), (r ** (p - 1)) * mean ** (1 / p - 1) / R.size


def residual_search(W: HierarchyWorkload, tau: np.ndarray, max_iterations: int = 2_000
                    ) -> tuple[HierarchyStrategy, bool]:
    """(the residual family's strategy, whether every L-BFGS run converged within ``max_iterations``)."""
    tabs = [hc.tables(h) for h in W.attributes]
    B = [T.diag for T in tabs]
    Bt = [T.diag.T.tocsr() for T in tabs]
    need = W.component_traces() > 0
    masses = [[T.masses[a] for T, a in zip(tabs, s, strict=True)] for s in W.sets]
    massesT = [[M.T.tocsr() for M in ms] for ms in masses]
    coef = W.weights ** 2 / tau

    def objective(theta, p):
        x = np.zeros(need.shape)
        x[need] = np.exp(theta)
        inv = np.zeros_like(x)
        inv[need] = 1.0 / x[need]
        R = [c * hc.kron_apply(ms, inv) for c, ms in zip(coef, masses, strict=True)]
        flat = np.concatenate([r.ravel() for r in R])
        vmax, g = _power_mean(flat, p)
        D = hc.kron_apply(B, x)
        dmax, gD = _power_mean(D, p)
        ginv, at = np.zeros_like(x), 0
        for c, msT, r in zip(coef, massesT, R, strict=True):
            ginv += c * hc.kron_apply(msT, g[at:at + r.size].reshape(r.shape))
            at += r.size
        gx = -ginv * inv ** 2 * dmax + vmax * hc.kron_apply(Bt, gD)
        return vmax * dmax, (gx * x)[need]

    theta, converged = run_powers(objective, np.zeros(int(need.sum())), max_iterations)
    x = np.zeros(need.shape)
    x[need] = np.exp(theta)
    A = HierarchyStrategy(W.attributes, x)
    return HierarchyStrategy(W.attributes, x / A.diagonal().max()), converged


def node_search(W: HierarchyWorkload, tau: np.ndarray, max_iterations: int = 2_000
                ) -> tuple[hn.NodeStrategy, bool]:
    """(the node family's strategy, whether every L-BFGS run converged within ``max_iterations``)."""
    k = tree_attribute(W)
    lay = hn.layout(W, k)
    h = W.attributes[k]
    # per set and active U: the others' mass of each of the set's groups (flattened over the other attributes)
    mass = [hc.other_masses(W.attributes, k, s, lay.components) for s in W.sets]
    lw = hn.LogWeights(h, lay)
    coef = W.weights ** 2 / tau

    def objective(theta, p):
        zs = lw.split(theta)
        Vs = [hn.passes(h, z, np.zeros(len(z)), want_grad=False)[2] for z in zs]
        R = []
        for s, c, ms in zip(W.sets, coef, mass, strict=True):
            a = s[k]
            r = np.zeros((h.n_groups[a], ms[0].size))
            for u, mu in enumerate(ms):
                if a <= lay.depth[u] and mu.any():
                    r += np.outer(Vs[u][a], mu)
            R.append(c * r)
        vmax, g = _power_mean(np.concatenate([r.ravel() for r in R]), p)
        dmax, gD = _power_mean(lw.diagonal(zs), p)
        grads = []
        for u, z in enumerate(zs):
            beta = [np.zeros(h.n_groups[ell]) for ell in range(len(z))]
            at = 0
            for s, c, ms, r in zip(W.sets, coef, mass, R, strict=True):
                if s[k] < len(z) and ms[u].any():
                    beta[s[k]] += c * (g[at:at + r.size].reshape(r.shape) @ ms[u])
                at += r.size
            grads.append(hn.passes(h, z, beta)[1])
        return vmax * dmax, lw.gradient(zs, grads, vmax, dmax, gD)

    theta, converged = run_powers(objective, np.zeros(lw.size), max_iterations)
    return lw.strategy(W.attributes, theta), converged


def max_ratio(A, W: HierarchyWorkload, tau: np.ndarray) -> float:
    """max_q v_q/τ_q of A at Δ₂ = 1, exact."""
    v = hn.node_variances(A, W) if isinstance(A, hn.NodeStrategy) else unit_variances(A, W)
    return float(max(vs.max() / t for vs, t in zip(v, tau, strict=True)))


def solve_maxvar(W: HierarchyWorkload, tau: np.ndarray, max_iterations: int = 2_000):
    """(strategy, objective, family, families, converged) — the better family by its exact max ratio; converged:
    every L-BFGS run of its search met its tolerance within ``max_iterations`` (per run)."""
    # balanced trees: the residual family holds the optimum (symmetry); skewed ones need per-node weights
    irregular = any(not h.regular for h in W.attributes)
    search = {"nodes": node_search} if irregular else {"residual": residual_search}
    found = {name: run(W, tau, max_iterations) for name, run in search.items()}
    scores = {name: max_ratio(A, W, tau) for name, (A, _) in found.items()}
    best = min(scores, key=scores.get)
    return found[best][0], scores[best], best, scores, found[best][1]
