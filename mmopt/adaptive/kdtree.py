"""Private kd-trees over a 2-D histogram: private-median kd-tree and the hybrid kd-tree.

Xiao, Xiong & Yuan, *Differentially Private Data Release through Multidimensional Partitioning* (SDM workshop
2010) and Cormode, Procopiuc, Srivastava, Shen & Yu, *Differentially Private Spatial Decompositions* (ICDE 2012,
§III–IV: private medians, geometric budget over the levels, the hybrid tree, constrained inference).

The tree has height h. A node is a rectangle of cells; a node at depth d < h is split in two along axis d mod 2
(the other axis when that side is a single cell; a single cell is a leaf):

* median levels (every level for ``kind="kd"``, the first ``median_levels`` for ``kind="hybrid"``): the split
  s is chosen by the exponential mechanism with score u(s) = −|L(s) − R(s)| (L, R the counts either side), budget
  ε_med/ℓ per level (ℓ median levels);
* the remaining levels of the hybrid tree split at the midpoint (data-independent; two binary levels make one
  quadtree level).

The root count is measured first, N̂ = N + Lap(1/ε_0) with ε_0 = 5% of ε (``total_share``), and sizes the
tree: h = min(⌈log₂(max(N̂, 2)·ε/c)⌉, ⌈log₂(n1·n2)⌉) (at least 1, c = 10) gives about N̂ε/c leaves, UGrid's
guideline for the number of cells (Qardaji et al., ICDE 2013). Every other node at depth d ≥ 1 gets a noisy count
y = count + Lap(1/ε_d), Σ_{d≥1} ε_d = ε_cnt, and the counts are made consistent by weighted least squares over
the tree (each node's total = the sum of its children's), computed exactly in two passes
(:func:`tree_consistency`). Each leaf's estimate is spread evenly over its cells.

Privacy (neighbours x' = x ± e_i). |L(s) − R(s)| moves by at most 1 when one record is added or removed, so
Δu = 1 and each median choice is (ε_med/ℓ)-DP; the nodes of one level are disjoint, so a level is (ε_med/ℓ)-DP
(parallel composition) and the ℓ median levels cost ε_med. Midpoint splits cost nothing. Given the tree, the
record lies in exactly one node per depth, so depth d's counts have L1 sensitivity 1 and cost ε_d; the depths
compose to ε_0 + ε_cnt (the tree's shape depends on N̂ only through released values). Total ε_0 + ε_med +
ε_cnt = ε; the least squares and the spreading are post-processing.

Choices the papers leave open (stated): ε_med = 0.3·ε (``median_share``; the kd-tree spends nothing on medians
when it has no median level); the height rule above (the papers fix h by hand); hybrid switch after ⌈h/2⌉
median levels;
count budget geometric, ε_d ∝ 2^{d/6} — the minimiser of Σ_d n_d/ε_d² under Σ ε_d = ε_cnt when a 2-D range
query meets n_d ∝ 2^{d/2} nodes at depth d of a binary tree (Cormode et al.'s 2^{d/3} is the same rule for
fan-out 4) — or ``"uniform"``; splits on cell boundaries (the domain is a grid of cells); no clipping.
"""

from __future__ import annotations

import math

import numpy as np

from mmopt._base import validation as v
from mmopt.adaptive._common import AdaptiveResult, check_epsilon, check_fraction, check_histogram, laplace_scale
from mmopt.adaptive._finish import finish, noise_source

__all__ = ["kd_tree", "level_budgets", "tree_consistency"]

KINDS = ("kd", "hybrid")


def level_budgets(epsilon: float, height: int, allocation: str = "geometric") -> np.ndarray:
    """ε_0, …, ε_h summing to ε: geometric ∝ 2^{d/6} (module docstring) or uniform.

    Examples
    --------
    >>> b = level_budgets(1.0, 3)
    >>> bool(np.isclose(b.sum(), 1.0)), bool(np.isclose(b[1] / b[0], 2 ** (1 / 6)))
    (True, True)
    """
    caller = "level_budgets"
    epsilon = v.check_real(epsilon, name="epsilon", caller=caller, low=0.0, low_open=True)
    height = v.check_int(height, name="height", caller=caller, low=0)
    if allocation not in ("geometric", "uniform"):  # a typo ('geometrc') gave the uniform split
        raise ValueError(f"The 'allocation' parameter of {caller} must be 'geometric' or 'uniform'. Got "
                         f"{allocation!r} instead.")
    w = 2.0 ** (np.arange(height + 1) / 6.0) if allocation == "geometric" else np.ones(height + 1)
    return epsilon * w / w.sum()


def tree_consistency(y: np.ndarray, var: np.ndarray, children: list[list[int]]) -> np.ndarray:
    """The weighted least-squares node totals: minimise Σ (ŷ_v − y_v)²/var_v subject to ŷ_v = Σ_children ŷ_c.

    Node 0 is the root and children come after their parent. Bottom-up, z_v = the best estimate of v's total
    from its subtree (inverse-variance mix of y_v and Σ z_c), V_v its variance; top-down, each child gets
    z_c + (ŷ_v − Σ z_c)·V_c/Σ V_c. Exact for this tree-structured model (Hay et al., PVLDB 2010, weighted).

    Examples
    --------
    >>> tree_consistency(np.array([10.0, 3.0, 5.0]), np.ones(3), [[1, 2], [], []]).tolist()
    [9.333333333333334, 3.666666666666667, 5.666666666666667]
    """
    m = len(children)
    z, V = y.astype(float).copy(), var.astype(float).copy()
    for u in range(m - 1, -1, -1):
        kids = children[u]
        if kids:
            s, sv = z[kids].sum(), V[kids].sum()
            z[u] = (y[u] / var[u] + s / sv) / (1.0 / var[u] + 1.0 / sv)
            V[u] = 1.0 / (1.0 / var[u] + 1.0 / sv)
    out = z.copy()
    for u in range(m):
        kids = children[u]
        if kids:
            s, sv = z[kids].sum(), V[kids].sum()
            out[kids] = z[kids] + (out[u] - s) * V[kids] / sv
    return out


def kd_tree(x, epsilon: float, *, kind: str = "kd", height: int | None = None, median_levels: int | None = None,
            median_share: float = 0.3, allocation: str = "geometric", c: float = 10.0, total_share: float = 0.05,
            noise="numpy", rng=None) -> AdaptiveResult:
    """Run the private kd-tree or hybrid kd-tree on a 2-D histogram (module docstring).

    Parameters
    ----------
    x : array_like, 2-D (n1, n2)
    epsilon : float
    kind : {"kd", "hybrid"}, default "kd"
    height : int >= 1 or None
        h; None means the rule of the module docstring (from the noisy root count N̂). A larger h than
        n1 + n2 − 2 is cut to it: every split shortens a side by at least one cell, so no node lies deeper, and
        the budget of deeper levels would be charged and never drawn (``details["height"]`` is the h used).
    median_levels : int >= 0 or None
        Median levels of the hybrid tree (None: ⌈h/2⌉); ignored for ``kind="kd"`` (all h levels).
    median_share : float in (0, 1), default 0.3
    allocation : {"geometric", "uniform"}, default "geometric"
        How ε_1, …, ε_h are set.
    c : float > 0, default 10
        The constant of the height rule.
    total_share : float in (0, 1), default 0.05
        The share of ε spent on the root count ε_0.
    noise : {"numpy", "opendp"} or Noise, default "numpy"
    rng : numpy.random.Generator, int or None

    Returns
    -------
    AdaptiveResult
        ``budget = {"medians": ε_med, "count_level_0": ε_0, …}``; ``details``: "leaves" (list of
        (r0, r1, c0, c1)), "height", "median_levels", "level_budgets".

    Examples
    --------
    >>> x = np.kron([[1.0, 9.0], [4.0, 0.0]], np.ones((4, 4)))
    >>> r = kd_tree(x, 1e6, rng=0)
    >>> tot = [x[r0:r1, c0:c1].sum() - r.estimate[r0:r1, c0:c1].sum() for r0, r1, c0, c1 in r.details["leaves"]]
    >>> bool(np.allclose(tot, 0, atol=1e-3))  # huge ε: every leaf total is exact (leaves may mix values)
    True
    """
    caller = "kd_tree"
    X = check_histogram(x, caller)
    if X.ndim != 2:
        raise ValueError(f"The 'x' parameter of {caller} must be a 2-D histogram (n1, n2). Got shape {X.shape}.")
    eps = check_epsilon(epsilon, caller)
    kind = v.check_choice(kind, name="kind", caller=caller, choices=KINDS)
    allocation = v.check_choice(allocation, name="allocation", caller=caller, choices=("geometric", "uniform"))
    share = check_fraction(median_share, "median_share", caller)
    c = v.check_real(c, name="c", caller=caller, low=0.0, low_open=True)
    root_share = check_fraction(total_share, "total_share", caller)
    # checked before any draw; no median is charged where every side has at most two cells (below)
    if root_share + share >= 1.0 and (kind == "kd" or median_levels != 0) and max(X.shape) > 2:
        raise ValueError(f"The 'median_share' and 'total_share' parameters of {caller} must add up to less than 1 "
                         f"(the rest pays for the node counts). Got {share!r} + {root_share!r} instead.")
    src = noise_source(noise, rng, caller, data=X)
    if X.size == 1:  # one cell: no tree to build, so the root count takes all of ε (it took total_share of it, and
        # the medians' and deeper levels' shares went unused: 400× the variance at the default 5 %)
        y = float(src.add_laplace(float(X.sum()), laplace_scale(1.0, eps, "the root count", caller)))
        details = {"leaves": [(0, 1, 0, 1)], "height": 0, "median_levels": 0, "kind": kind, "level_budgets": (eps,),
                   "median_sensitivity": 1.0}
        return finish("kd_tree" if kind == "kd" else "hybrid_kd_tree", np.full((1, 1), y), eps,
                      {"medians": 0.0, "count_level_0": eps}, details, src)
    # the root count is measured first: it is the noisy N that sizes the tree (module docstring)
    eps_root = root_share * eps
    scales = [laplace_scale(1.0, eps_root, "the root count", caller)]
    y_root = float(src.add_laplace(float(X.sum()), scales[0]))
    max_h = max(1, math.ceil(math.log2(X.size)))
    if height is None:
        h = min(max(1, math.ceil(math.log2(max(y_root, 2.0) * eps / c))), max_h)
    else:
        # at most n1 + n2 − 2 splits on any path (each shortens a side): height=10 on 4×4 cells charged levels
        # 7–10 (0.47 of ε with the geometric split) that no data could reach
        h = min(v.check_int(height, name="height", caller=caller), X.shape[0] + X.shape[1] - 2)
    if kind == "kd":
        ell = h
    else:
        ell = math.ceil(h / 2) if median_levels is None else min(h, v.check_int(
            median_levels, name="median_levels", caller=caller, low=0))
    if max(X.shape) <= 2:  # every split halves a side of two cells: each "median" has one outcome and reads no data,
        # so no level pays for one (2×2 charged 0.3 of ε to medians never drawn: 2.1× the cell variance; an audit)
        ell = 0
    eps_med = share * eps if ell > 0 else 0.0
    eps_lv = np.concatenate([[eps_root], level_budgets(eps - eps_root - eps_med, h - 1, allocation)])
    scales += [laplace_scale(1.0, e, f"the depth-{d} counts", caller) for d, e in enumerate(eps_lv[1:], 1)]
    if ell:
        laplace_scale(1.0, eps_med / ell, "a median choice", caller)
    nodes, depth, children = [(0, X.shape[0], 0, X.shape[1])], [0], [[]]
    frontier = [0]
    for d in range(h):
        nxt = []
        for u in frontier:
            r0, r1, c0, c1 = nodes[u]
            axis = d % 2 if ((r1 - r0, c1 - c0)[d % 2] > 1) else 1 - d % 2
            lo, hi = (r0, r1) if axis == 0 else (c0, c1)
            if hi - lo < 2:
                continue  # a single cell: a leaf
            if d < ell:
                marg = X[r0:r1, c0:c1].sum(axis=1 - axis)
                left = np.cumsum(marg)[:-1]
                s = lo + 1 + (0 if hi - lo == 2 else src.exponential(-np.abs(2 * left - marg.sum()),
                                                                     eps_med / ell, 1.0))
            else:
                s = (lo + hi) // 2
            kids = [(r0, s, c0, c1), (s, r1, c0, c1)] if axis == 0 else [(r0, r1, c0, s), (r0, r1, s, c1)]
            for kid in kids:
                children[u].append(len(nodes))
                nxt.append(len(nodes))
                nodes.append(kid)
                depth.append(d + 1)
                children.append([])
        frontier = nxt
    depth = np.array(depth)
    true = np.array([X[r0:r1, c0:c1].sum() for r0, r1, c0, c1 in nodes])
    y = true.astype(float)
    y[0] = y_root
    for d in range(1, h + 1):
        at = np.flatnonzero(depth == d)
        if at.size:
            y[at] = src.add_laplace(true[at], scales[d])
    var = 2.0 * np.array(scales)[depth] ** 2
    fitted = tree_consistency(y, var, children)
    est = np.empty(X.shape)
    leaves = [u for u in range(len(nodes)) if not children[u]]
    for u in leaves:
        r0, r1, c0, c1 = nodes[u]
        est[r0:r1, c0:c1] = fitted[u] / ((r1 - r0) * (c1 - c0))
    budget = {"medians": eps_med, **{f"count_level_{d}": float(e) for d, e in enumerate(eps_lv)}}
    details = {"leaves": [nodes[u] for u in leaves], "height": h, "median_levels": ell, "kind": kind,
               "level_budgets": tuple(float(e) for e in eps_lv), "median_sensitivity": 1.0}
    return finish("kd_tree" if kind == "kd" else "hybrid_kd_tree", est, eps, budget, details, src)
