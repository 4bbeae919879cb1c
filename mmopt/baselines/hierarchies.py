"""Hierarchical strategies: HB (Qardaji et al.), GreedyH (Li et al., DAWA's second stage), the quad-tree.

Notation: see README. HB and GreedyH are weighted interval trees: :class:`IntervalTree` holds the tree,
``.strategy()`` the dense :class:`~mmopt.strategy.Strategy` (for :func:`mmopt.evaluate`, the mechanisms and
:func:`mmopt.release`), and ``.error(gram)`` its exact error c·Δ²·tr(G X⁺) at any n in O(n) memory
(``mmopt.dense._interval_trees``; prefix and all-range Grams by :func:`prefix_gram`, :func:`all_range_gram`).
The quad-tree is an implicit union of per-level products (a node is a product of two dyadic intervals of
the same level, so the tree is not H₂ ⊗ H₂); :func:`mmopt.baselines.transforms.haar_evaluate` gives its error exactly
at any size.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from mmopt._base import validation as v
from mmopt.dense import _interval_trees as it
from mmopt.dense._error_common import check_privacy, resolve_norm
from mmopt.dense._interval_trees import GramOperator, all_range_gram, prefix_gram
from mmopt.dense._strategy_core import Strategy
from mmopt.dense._workload_core import Workload
from mmopt.dense._workload_type import not_a_workload
from mmopt.structured.strategies import ImplicitStrategy, StrategyProduct

__all__ = ["GramOperator", "IntervalTree", "all_range_gram", "gram_operator", "greedy_h", "greedy_h_tree",
           "hb", "hb_branching", "hb_tree", "hierarchical_tree", "prefix_gram", "quadtree"]


@dataclass(frozen=True, eq=False)
class IntervalTree:
    """A weighted tree of nested intervals on n cells (root: all cells); ``root`` a tree of nodes."""

    root: it.Node
    n: int
    name: str

    def strategy(self) -> Strategy:
        """The dense strategy: a row wᵥ·1ᵥ per measured node, breadth-first."""
        return Strategy(it.matrix(self.root, self.n, caller=f"{self.name}.strategy"), self.name)

    def sensitivity(self, norm: str = "l1") -> float:
        """Largest column norm, exactly: the largest root-to-leaf Σ wᵥ (L1) or (Σ wᵥ²)^{1/2} (L2)."""
        return it.sensitivity(self.root, self.n, v.check_choice(norm, name="norm", caller="IntervalTree.sensitivity",
                                                                choices=("l1", "l2")))

    def error(self, gram: GramOperator, privacy=None, *, norm: str | None = None) -> float:
        """Exact expected total squared error c·Δ²·tr(G X⁺) on the workload of ``gram`` (equal to
        ``mmopt.evaluate(W, self.strategy(), privacy).total_squared_error``), at any n."""
        if not isinstance(gram, GramOperator):
            raise TypeError("The 'gram' parameter of IntervalTree.error must be a GramOperator (gram_operator(W), "
                            f"prefix_gram(n), all_range_gram(n)). Got {type(gram).__name__}.")
        check_privacy(privacy, "IntervalTree.error")
        norm = resolve_norm(privacy, norm, "IntervalTree.error")
        if gram.n != self.n:
            raise ValueError(f"IntervalTree.error: the workload has {gram.n} cells, the tree {self.n}.")
        c = 1.0 if privacy is None else privacy.variance_factor
        return c * self.sensitivity(norm) ** 2 * it.unit_error(self.root, gram, caller="IntervalTree.error")


def gram_operator(workload: Workload) -> GramOperator:
    """G = WᵀW of a dense workload as a :class:`GramOperator`; ``workload.prefix(n)`` and ``all_range(n)`` (their
    family checked at construction) as :func:`prefix_gram`, :func:`all_range_gram`: O(n) products, where the
    stored G's cost O(n²). Either way a tree node's products read only its rows of G (:class:`GramOperator`).
    GreedyH on 2,048 cells, one core: all ranges 14.8 → 0.9 CPU s, 3,000 random ranges (a stored G) 14.5 → 0.7."""
    if not isinstance(workload, Workload):
        raise not_a_workload(workload, name="workload", caller="gram_operator")
    m, n = workload.n_queries, workload.domain_size
    if workload.family in _CLOSED:
        return dataclasses.replace(_CLOSED[workload.family](n), name=workload.name)
    return GramOperator.from_gram(workload.mean_gram * float(m), m, workload.name)


_CLOSED = {"prefix": prefix_gram, "all_range": all_range_gram}


def hb_branching(n: int) -> int:
    """The branching b of HB for n cells (Qardaji, Yang & Li, PVLDB 2013, Eq. 3).

    b minimises V(b) = (b − 1)h³ − 2(b + 1)h²/3 over 2 ≤ b ≤ n, h = ⌈log_b n⌉ (the tree's levels below the
    root): the average variance of a random range after constrained inference, up to a constant. h is the
    exact integer (smallest h with bʰ ≥ n, never a rounded logarithm); ties go to the smaller b.

    Examples
    --------
    >>> [hb_branching(n) for n in (128, 256, 1024, 4096, 8192)]
    [128, 16, 32, 16, 21]
    """
    n = v.check_int(n, name="n", caller="hb_branching", low=2)

    def variance(b: int) -> float:
        h, p = 0, 1
        while p < n:
            p, h = p * b, h + 1
        return (b - 1) * h**3 - 2 * (b + 1) * h**2 / 3
    return min(range(2, n + 1), key=variance)


def hierarchical_tree(n: int, branching: int = 2, *, root: bool = True, name: str | None = None) -> IntervalTree:
    """H_b as an :class:`IntervalTree` (unit weights; ``root=False`` leaves the total unmeasured). Children
    split as in ``mmopt.dense._interval_trees.split`` (larger parts first), which equals
    :func:`mmopt.strategy.hierarchical` whenever b divides every node's size."""
    n = v.check_int(n, name="n", caller="hierarchical_tree")
    b = v.check_int(branching, name="branching", caller="hierarchical_tree", low=2)
    tree = it.b_ary_tree(n, b, lambda depth: 0.0 if (depth == 0 and not root and n > 1) else 1.0)
    return IntervalTree(tree, n, name or f"H{b}")


def hb_tree(n: int) -> IntervalTree:
    """HB (Qardaji, Yang & Li, PVLDB 2013): the b-ary tree with b = :func:`hb_branching` (n), every level
    below the root measured with equal weight, the root not measured.

    Choices, both as in the paper's analysis (its h counts the levels below the root; equal budget per level)
    and as in the implementations the seed's table used (DPBench's and HDMM's ``HB``, ``hier(n, b)[1:]``):
    the root is left out and the weights are uniform. For b ≥ n the tree is the identity.
    """
    n = v.check_int(n, name="n", caller="hb_tree")
    b = hb_branching(n) if n > 1 else 2  # one cell: the identity, as hierarchical(1)
    return hierarchical_tree(n, b, root=False, name=f"HB(b={b})")


def hb(n: int) -> Strategy:
    """HB as a dense strategy (:func:`hb_tree`).

    Examples
    --------
    >>> A = hb(256)
    >>> A.name, A.matrix.shape, A.sensitivity()
    ('HB(b=16)', (272, 256), 2.0)
    """
    return hb_tree(v.check_int(n, name="n", caller="hb")).strategy()


def greedy_h_tree(gram, *, branching: int = 2, objective: str = "reference", grid: int = 100) -> IntervalTree:
    """GreedyH (Li, Hay, Miklau & Wang, PVLDB 2014, §4.2; the second stage of DAWA) for a workload's Gram.

    A b-ary tree (b = 2 in the paper) whose node weights are chosen bottom-up: at a node with children
    already weighted, the node gets 1 − p and its subtree is scaled by p (so every root-to-leaf path sums to
    1: Δ₁ = 1), p taken from the grid {1, 1 − 1/grid, …, 1/grid} to minimise the subtree's error after
    Sherman–Morrison. Data-independent given W. A node on which the workload is constant (G's columns
    equal) measures only its total.

    Choices. The paper leaves the details to its released code (DPComp's ``greedyH``), which this follows:
    100 grid points; the error contributed by pairs of different children, and the root's share, discounted
    by b^{−depth/2} when choosing p; the chosen (discounted) score passed up as the subtree's error. That code
    is called with G = WᵀW where its recursion expects W, so the error it minimises is tr(G² X⁺): the default
    ``objective="reference"`` does the same (it reproduces the HDMM paper's GreedyH column within 0.3% at
    n = 128 … 8,192). ``"workload"`` uses tr(G X⁺), the workload's own error; with the discount and the
    grid it is still a heuristic, and on prefix and all ranges (n = 128 … 8,192) it came out 0–8% *worse*
    than the reference (experiments.landscape), which is why it is not the default.

    ``gram``: a :class:`mmopt.Workload` (its Gram) or a :class:`GramOperator` (e.g. :func:`prefix_gram` (n),
    which needs no n×n matrix).
    """
    caller = "greedy_h_tree"
    op = gram_operator(gram) if isinstance(gram, Workload) else gram
    if not isinstance(op, GramOperator):
        raise TypeError(f"The 'gram' parameter of {caller} must be a Workload or a GramOperator. "
                        f"Got {type(gram).__name__}.")
    b = v.check_int(branching, name="branching", caller=caller, low=2)
    objective = v.check_choice(objective, name="objective", caller=caller, choices=("workload", "reference"))
    grid = v.check_int(grid, name="grid", caller=caller, low=2)
    phi = op if objective == "workload" else _squared(op)
    tree = _greedy(op, phi, b, grid)
    return IntervalTree(tree, op.n, "GreedyH" + ("" if objective == "reference" else "(tr GX⁺)"))


def greedy_h(workload, *, branching: int = 2, objective: str = "reference") -> Strategy:
    """GreedyH as a dense strategy (:func:`greedy_h_tree`; Δ₁ = 1).

    Examples
    --------
    >>> import mmopt
    >>> A = greedy_h(mmopt.workload.prefix(16))
    >>> A.sensitivity(), A.matrix.shape[1]
    (1.0, 16)
    """
    return greedy_h_tree(workload, branching=branching, objective=objective).strategy()


def _squared(op: GramOperator) -> GramOperator:
    """G² as an operator: G(G u), diagonal ‖G eᵢ‖²; stored as G·G when G is (one product, then O(s²) per node),
    else its diagonal from G's columns in blocks (the operators' products take matrices)."""
    if op.dense is not None:
        G2 = op.dense @ op.dense
        return GramOperator(op.n, op.n_queries, lambda u: G2 @ u, np.diagonal(G2).copy(), op.name, G2)
    diag = np.empty(op.n)
    step = max(1, min(op.n, (1 << 22) // op.n))  # ≤ 4M entries (32 MB) a block of columns
    for lo in range(0, op.n, step):
        hi = min(lo + step, op.n)
        E = np.zeros((op.n, hi - lo))
        E[np.arange(lo, hi), np.arange(hi - lo)] = 1.0
        diag[lo:hi] = np.sum(op.matvec(E) ** 2, axis=0)
    return GramOperator(op.n, op.n_queries, lambda u: op.matvec(op.matvec(u)), diag, op.name)


def _greedy(op: GramOperator, phi: GramOperator, b: int, grid: int) -> it.Node:
    """Bottom-up weights; nodes carry local shares (1 − p at the node, p scaling the subtree), made absolute
    at the end. State per subtree: score e, u = M1, k = 1ᵀM1, q = uᵀΦu (exact for the undiscounted M)."""
    p_grid = (grid - np.arange(grid)) / grid

    def quad(lo, u):
        return it._quad(phi, lo, u)

    def walk(lo, hi, depth):
        s = hi - lo
        if s == 1 or it.constant_block(op, lo, hi):  # only the total: M = J/s², u = 1/s, k = 1, q = Φ[lo, lo]
            return (lo, hi, 1.0, ()), float(phi.diagonal[lo]), np.full(s, 1.0 / s), 1.0, float(phi.diagonal[lo])
        # DPComp's split: the smaller parts first (prefix(33): [0, 16), [16, 33); larger-first gave another tree,
        # 0.4–1 % below the reference's error on prefix sums at n not a power of b)
        kids = [walk(a, c, depth + 1) for a, c in it.split(lo, hi, b, larger_first=False)]
        e, k = sum(t[1] for t in kids), sum(t[3] for t in kids)
        u = np.concatenate([t[2] for t in kids])
        m1, m = sum(t[4] for t in kids), quad(lo, u)
        decay = b ** (-depth / 2)
        p, r = p_grid, 1.0 - p_grid
        score = (e - ((m - m1) * decay + m1) * r**2 * decay / (p**2 + r**2 * decay * k)) / p**2
        j = int(np.argmin(score))
        p, r = float(p_grid[j]), 1.0 - float(p_grid[j])
        c = r**2 / (1.0 + r**2 * k / p**2)  # Sherman–Morrison on the scaled children: M/p², u/p², k/p²
        f = 1.0 - c * k / p**2
        return (lo, hi, r, tuple(t[0] for t in kids), p), float(score[j]), f * u / p**2, f * k / p**2, \
            f * f * m / p**4

    local = walk(0, op.n, 0)[0]

    def absolute(t, scale):
        lo, hi, share, kids = t[:4]
        sub = scale * (t[4] if len(t) > 4 else 1.0)
        return it.Node(lo, hi, scale * share, tuple(absolute(c, sub) for c in kids))
    return absolute(local, 1.0)


def quadtree(n: int, *, budget: str = "geometric", name: str | None = None) -> ImplicitStrategy:
    """The data-independent quad-tree on an n × n grid (Cormode, Procopiuc, Srivastava, Shen & Yu, ICDE 2012).

    Level ℓ = 0 … h (h = log₂n, root ℓ = 0) has the 4^ℓ nodes Iᵢ × Iⱼ with Iᵢ, Iⱼ dyadic intervals of n/2^ℓ
    cells, so the strategy is the union Σ_ℓ w_ℓ·(L_ℓ ⊗ L_ℓ), L_ℓ the 2^ℓ × n interval matrix of level ℓ —
    not H₂ ⊗ H₂, whose products pair intervals of different levels. Built implicitly (h + 1 product terms,
    never a dense N-column matrix); :func:`mmopt.baselines.transforms.haar_evaluate` evaluates it exactly at any n, and
    :func:`mmopt.evaluate` exactly up to 4,096 cells (beyond, it returns a flagged upper bound).

    ``budget``: ``"geometric"`` (the paper's optimal allocation for range queries, ε_i ∝ 2^{(h−i)/3} with i
    counted from the leaves, i.e. w_ℓ ∝ 2^{ℓ/3}: leaves largest) or ``"uniform"``. Choices: the tree goes
    down to single cells so that it supports every rectangle (the paper also studies shallower trees, which
    need a uniformity assumption inside leaves); the root is measured; n must be a power of two.
    Δ₁ = Σ w_ℓ, weights normalised to Δ₁ = 1.

    Examples
    --------
    >>> A = quadtree(4, budget="uniform")
    >>> len(A.terms), A.n_rows, round(A.sensitivity("l1"), 12)
    (3, 21, 1.0)
    """
    caller = "quadtree"
    n = v.check_int(n, name="n", caller=caller, low=2)
    if n & (n - 1):
        raise ValueError(f"The 'n' parameter of {caller} must be a power of two. Got {n}.")
    budget = v.check_choice(budget, name="budget", caller=caller, choices=("geometric", "uniform"))
    v.check_allocation(2 * n * n, what=f"the level factors of the quad-tree on {n} × {n} cells (about 2n² entries)",
                       caller=caller)
    h = n.bit_length() - 1
    w = np.array([2.0 ** (lv / 3) if budget == "geometric" else 1.0 for lv in range(h + 1)])
    w = w / w.sum()
    terms = []
    for lv in range(h + 1):
        size = n >> lv
        L = Strategy(np.kron(np.eye(1 << lv), np.ones((1, size))), f"L{lv}")
        terms.append(StrategyProduct((L, L), float(w[lv])))
    return ImplicitStrategy(tuple(terms), name or f"quadtree({budget})")
