"""Grouping sets over hierarchical attributes: GROUP BY GROUPING SETS / ROLLUP / CUBE as a workload.

Notation: see README and :mod:`mmopt.hierarchy.tree`. A grouping set s chooses one level a_{s,i} of every
attribute i (the root — the total — for an attribute not grouped by); its queries are the rows of
w_s·⊗ᵢ L_{i,a_{s,i}}, one per combination of groups, so its Gram is w_s²·⊗ᵢ L_{i,a}ᵀL_{i,a}. A union of grouping sets
is a :class:`HierarchyWorkload`. With every attribute flat this is a union of marginals; the hierarchy family
generalises ResidualPlanner's residual basis to nested levels (:mod:`mmopt.hierarchy.components`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from mmopt._base.readonly import read_only
from mmopt.hierarchy import components as hc
from mmopt.hierarchy.tree import Hierarchy


@dataclass(frozen=True, eq=False)
class HierarchyWorkload:
    """A weighted union of grouping sets over a product of hierarchies (cells in C order over attributes).

    Attributes
    ----------
    attributes : tuple of Hierarchy
    sets : tuple of tuple of int
        One level per attribute for each grouping set.
    weights : ndarray
        w_s > 0 per grouping set.
    name : str

    Examples
    --------
    >>> geo = Hierarchy.balanced((2, 3), level_names=("nation", "state", "county"), name="geo")
    >>> W = grouping_sets([geo, Hierarchy.flat(2, name="sex")], [("county", "sex"), ("state",), ()])
    >>> W.shape, W.n_queries, W.set_sizes
    ((6, 2), 15, (12, 2, 1))
    """

    attributes: tuple
    sets: tuple
    weights: np.ndarray = field(repr=False)
    name: str = "grouping sets"

    def __post_init__(self) -> None:
        caller = "HierarchyWorkload"
        if not self.attributes or not all(isinstance(h, Hierarchy) for h in self.attributes):
            raise TypeError(f"The 'attributes' parameter of {caller} must be a non-empty tuple of Hierarchy. "
                            f"Got {self.attributes!r:.80} instead.")
        object.__setattr__(self, "attributes", tuple(self.attributes))
        sets = tuple(tuple(int(a) for a in s) for s in self.sets)
        d = len(self.attributes)
        for s in sets:
            if len(s) != d or any(not 0 <= a <= h.depth for a, h in zip(s, self.attributes, strict=True)):
                raise ValueError(f"The 'sets' parameter of {caller} must give one level in [0, depth] per "
                                 f"attribute ({d} attributes). Got {s}.")
        if not sets:
            raise ValueError(f"The 'sets' parameter of {caller} must hold at least one grouping set. Got none.")
        object.__setattr__(self, "sets", sets)
        w = np.asarray(self.weights, dtype=object).ravel()
        if any(isinstance(e, bool | np.bool_) for e in w):  # [True] was weight 1 (a helper's probe)
            raise TypeError(f"The 'weights' parameter of {caller} must hold real numbers, not booleans. Got "
                            f"{w.tolist()!r:.80} instead.")
        w = np.asarray(self.weights, dtype=float).ravel()
        if w.size != len(sets) or not np.all(np.isfinite(w)) or np.any(w <= 0):
            raise ValueError(f"The 'weights' parameter of {caller} must hold {len(sets)} finite values > 0. "
                             f"Got {w.tolist()!r:.80} instead.")
        object.__setattr__(self, "weights", read_only(w))  # the caller's array stays the caller's

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(h.n for h in self.attributes)

    @property
    def domain_size(self) -> int:
        return math.prod(self.shape)

    @property
    def set_sizes(self) -> tuple[int, ...]:
        """The number of queries (groups) of each grouping set."""
        return tuple(math.prod(h.n_groups[a] for h, a in zip(self.attributes, s, strict=True)) for s in self.sets)

    @property
    def n_queries(self) -> int:
        return sum(self.set_sizes)

    def component_traces(self) -> np.ndarray:
        """t_c = tr(G P_c) = Σ_s w_s² ∏ᵢ τᵢ[a_{s,i}, cᵢ], a tensor with one axis per attribute."""
        from mmopt._base.validation import check_allocation
        tabs = [hc.tables(h) for h in self.attributes]
        shape = tuple(T.n_components for T in tabs)
        check_allocation(2 * math.prod(shape), what=f"the component tensor {shape} of '{self.name}'",
                         caller="HierarchyWorkload", remedy=" Plain attributes beyond ~20 make it 2^d: for unions of "
                         "marginals over many attributes use mmopt.workload.marginals (the residual family), whose "
                         "cost follows the downward closure.")
        t = np.zeros(shape)
        for s, w in zip(self.sets, self.weights, strict=True):
            t += w * w * hc.outer([T.tau[a] for T, a in zip(tabs, s, strict=True)])
        return t

    def to_implicit(self):
        """The same workload as a union of Kronecker products of dense level matrices (small trees: an oracle)."""
        from mmopt.structured import workloads as sw
        from mmopt.workload import Workload
        terms, level = [], {}
        for s in self.sets:
            # one factor object per (attribute, level), shared by the sets that use it
            fs = [level.setdefault((i, a), Workload.from_matrix(h.level_matrix(a), name=h.level_names[a]))
                  for i, (h, a) in enumerate(zip(self.attributes, s, strict=True))]
            terms.append(sw.kron(*fs))
        # the weights in the union: a set weight of 1e-160 beside unit ones is a negligible share, not an error
        return sw.union(terms, [float(w) for w in self.weights], name=self.name)

    def level_entries(self) -> int:
        """Entries of the distinct dense level matrices :meth:`to_implicit` builds (a guard before building)."""
        used = {(i, a) for s in self.sets for i, a in enumerate(s)}
        return sum(self.attributes[i].n_groups[a] * self.attributes[i].n for i, a in used)

    def dense(self) -> np.ndarray:
        """W itself (m × N): for small trees and tests only."""
        return self.to_implicit().dense()


def grouping_sets(attributes, sets, *, weights=None, name: str | None = None,
                  caller: str = "grouping_sets") -> HierarchyWorkload:
    """``GROUP BY GROUPING SETS (…)``: each set lists levels by name (``"county"``) or attributes by name (their
    leaf level: ``"sex"``); an attribute not named is summed over (its total). ``()`` is the grand total.

    ``attributes`` is a list of :class:`Hierarchy` (an ``int`` n is a flat attribute of n cells); ``caller`` names
    the function in refusals (a release that builds the workload).
    """
    if isinstance(sets, str | bytes | Mapping) or not hasattr(sets, "__iter__"):  # "st" was read as ("s",), ("t",)
        # and a dict as its keys
        raise TypeError(f"The 'sets' parameter of {caller} must be a list of grouping sets, e.g. [('state',), ()]. "
                        f"Got {sets!r:.60} ({type(sets).__name__}) instead.")
    sets = list(sets)
    bad = [s for s in sets if not (isinstance(s, str) or (hasattr(s, "__iter__") and not isinstance(s, Mapping)))]
    if bad:  # None and 1 raised "'NoneType' object is not iterable"
        raise TypeError(f"The 'sets' parameter of {caller} must list grouping sets, each a tuple of names (or one "
                        f"name), e.g. [('state',), ()]. Got {bad[0]!r:.60} ({type(bad[0]).__name__}) in it.")
    if isinstance(attributes, str | bytes | Mapping) or not hasattr(attributes, "__iter__"):
        raise TypeError(f"The 'attributes' parameter of {caller} must be a list of Hierarchy (or int sizes). "
                        f"Got {attributes!r:.80} ({type(attributes).__name__}) instead.")
    if not sets:
        raise ValueError(f"The 'sets' parameter of {caller} must list at least one grouping set. Got none.")
    attrs = tuple(Hierarchy.flat(h, name=f"a{i}") if isinstance(h, int) else h for i, h in enumerate(attributes))
    if not attrs or not all(isinstance(h, Hierarchy) for h in attrs):
        raise TypeError(f"The 'attributes' parameter of {caller} must be a list of Hierarchy (or int sizes). "
                        f"Got {attributes!r:.80} instead.")
    lookup, clash = {}, {}  # a name two attributes share (their default names too) is refused where a set uses it
    for i, h in enumerate(attrs):
        for lv, target in ((h.name, (i, h.depth)), *((lv, (i, a)) for a, lv in enumerate(h.level_names[1:], 1))):
            if lookup.setdefault(lv, target) != target:
                clash.setdefault(lv, {lookup[lv]}).add(target)
    out = []
    for s in sets:
        s = (s,) if isinstance(s, str) else tuple(s)
        levels = [0] * len(attrs)
        for item in s:
            if not isinstance(item, str):  # a list in a set raised "unhashable type: 'list'"
                raise TypeError(f"The 'sets' parameter of {caller} must list grouping sets, each a tuple of names "
                                f"(strings). Got {item!r:.40} ({type(item).__name__}) in {s!r:.60}.")
            if item not in lookup:
                raise ValueError(f"The 'sets' parameter of {caller} names {item!r}, which is neither an attribute "
                                 f"nor a level. Known: {sorted(lookup)}.")
            if item in clash:
                where = sorted(f"attribute {i} ({attrs[i].name!r}) level {a}" for i, a in clash[item])
                raise ValueError(f"The 'sets' parameter of {caller} names {item!r}, which is ambiguous: it names "
                                 f"{'; '.join(where)}. Give the hierarchies distinct names and level names "
                                 "(name=, level_names=).")
            i, a = lookup[item]
            levels[i] = max(levels[i], a)  # GROUP BY state, county is the county level (county ⊂ state)
        out.append(tuple(levels))
    w = np.ones(len(out)) if weights is None else weights
    return HierarchyWorkload(attrs, tuple(out), w, name or "grouping sets")


def rollup(*columns) -> list[tuple]:
    """``ROLLUP(c₁, …, c_k)``: the k + 1 prefixes (c₁ … c_k), …, (c₁), ()."""
    return [tuple(columns[:k]) for k in range(len(columns), -1, -1)]


def cube(*columns) -> list[tuple]:
    """``CUBE(c₁, …, c_k)``: all 2ᵏ subsets."""
    return [S for k in range(len(columns), -1, -1) for S in itertools.combinations(columns, k)]


def cross(*groups) -> list[tuple]:
    """``GROUP BY g₁, g₂, …`` of grouping-set lists: every concatenation (SQL's cross product of grouping sets)."""
    return [tuple(itertools.chain.from_iterable(p)) for p in itertools.product(*groups)]


def check_workload(workload, caller: str) -> HierarchyWorkload:
    if not isinstance(workload, HierarchyWorkload):
        raise TypeError(f"The 'workload' parameter of {caller} must be a HierarchyWorkload (mmopt.hierarchy."
                        f"grouping_sets). Got {type(workload).__name__} instead.")
    return workload


__all__ = ["HierarchyWorkload", "check_workload", "cross", "cube", "grouping_sets", "rollup"]
