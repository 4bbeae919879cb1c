"""A hierarchical attribute (nation ⊃ state ⊃ county ⊃ tract): its levels, its residual components, their tables.

Notation: see README. The cells of the attribute are the leaves of a rooted tree with levels ℓ = 0 (the root,
one group: the total) … L (the leaves: one group per cell). The level-ℓ query matrix L_ℓ has one 0/1 row per
level-ℓ group h (its indicator 1_h), so L_ℓᵀL_ℓ = Σ_h 1_h1_hᵀ. A flat attribute is the tree with L = 1 (its
levels are the total and the cells).

The *residual components* split ℝⁿ into orthogonal subspaces: the root component span(1) and, for every internal
node g with K ≥ 2 children, V_g = {vectors constant on the children of g, zero outside g, summing to 0}, of
dimension K − 1. The row space of L_ℓ is span(1) ⊕ the V_g of the nodes above level ℓ. With n_h the number of
leaves under h and k(j) the child of g holding leaf j, the projector P_g has

    (P_g)_jj = 1/n_{k(j)} − 1/n_g   (j under g; 0 otherwise),                           (diagonal)
    ‖P_g 1_h‖² = n_h² (1/n_{k(h)} − 1/n_g)   (h at a level below g's children, under g),  (a query's mass)

and the root component has 1/n and n_h²/n. These two tables are everything the hierarchy family needs
(:mod:`mmopt.hierarchy.error`); they are computed with one bincount per pair of levels, never an n×n matrix.
The derivation of the second: P_g 1_h = (n_h/n_k) 1_k − (n_h/n_g) 1_g, whose squared norm is n_h²(1/n_k − 1/n_g).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from mmopt._base import validation as v
from mmopt._base.readonly import read_only


@dataclass(frozen=True, eq=False)
class Hierarchy:
    """A tree over the n cells of one attribute, given by the parent of every group at every level.

    Attributes
    ----------
    parents : tuple of ndarray
        ``parents[ℓ-1][h]`` is the level-(ℓ−1) group of level-ℓ group h, for ℓ = 1 … L; level L's groups are
        the cells (leaves), level 0 has the single group 0.
    level_names : tuple of str
        L + 1 names, the root's first (e.g. ``("total", "state", "county")``).
    name : str

    Examples
    --------
    >>> h = Hierarchy.from_parents([[0, 0, 1]], level_names=("total", "state", "county"), name="geo")
    >>> h.n, h.depth, h.n_groups, h.sizes[1].tolist()
    (3, 2, (1, 2, 3), [2.0, 1.0])
    """

    parents: tuple
    level_names: tuple
    name: str = "hierarchy"

    # -- constructors ------------------------------------------------------------------------------------
    @classmethod
    def from_parents(cls, parents, *, level_names=None, name: str = "hierarchy") -> Hierarchy:
        """From the parent codes of levels 1 … L−1 (each ``parents[k]`` maps level k+1's groups to level k's,
        with level 1's parents all 0 implied when ``parents[0]`` is level 2's) — the leaves are the last level.

        ``parents`` lists, for each level below the root's children, the parent of each group: ``[[0, 0, 1]]``
        is a root with 2 children (states) over 3 leaves (counties: 2 in state 0, 1 in state 1).
        """
        caller = "Hierarchy.from_parents"
        if isinstance(parents, np.ndarray | str | bytes) or not hasattr(parents, "__iter__"):
            raise TypeError(f"The 'parents' parameter of {caller} must be a list of integer arrays, one per level "
                            f"below the root's children. Got {type(parents).__name__} instead.")
        levels = [np.asarray(p) for p in parents]
        top = int(levels[0].max()) + 1 if levels and levels[0].size else 1
        return cls((np.zeros(top, dtype=np.int64), *levels), _names(level_names, len(levels) + 2, caller), name)

    @classmethod
    def from_codes(cls, codes, *, level_names=None, name: str = "hierarchy") -> Hierarchy:
        """From a (n × L−1) table: row j holds the group codes of cell j at levels 1 … L−1 (e.g. state, county).

        Codes are any integers; groups are renumbered in order of first appearance. A group is its whole path of
        codes, so a code is local to its parent (as FIPS county codes are to their state): county 1 under two
        states is two counties.
        """
        caller = "Hierarchy.from_codes"
        C = np.asarray(codes)
        if C.ndim == 1:
            C = C[:, None]
        if C.ndim != 2 or C.shape[0] < 1 or not np.issubdtype(C.dtype, np.integer):
            raise TypeError(f"The 'codes' parameter of {caller} must be an integer table with one row per cell. "
                            f"Got an array of shape {C.shape} and dtype {C.dtype} instead.")
        n = C.shape[0]
        ids = []  # the group of every cell at levels 1 … L−1, renumbered (a group is its whole path of codes)
        for k in range(C.shape[1]):
            _, first, inv = np.unique(C[:, :k + 1], axis=0, return_index=True, return_inverse=True)
            order = np.argsort(np.argsort(first))  # number groups by first appearance
            ids.append(order[inv.ravel()])
        ids.append(np.arange(n))
        parents = [np.zeros(int(ids[0].max()) + 1, dtype=np.int64)]
        for k in range(1, len(ids)):
            par = np.zeros(int(ids[k].max()) + 1, dtype=np.int64)
            par[ids[k]] = ids[k - 1]
            parents.append(par)
        return cls(tuple(parents), _names(level_names, len(ids) + 1, caller), name)

    @classmethod
    def flat(cls, n: int, *, name: str = "attribute") -> Hierarchy:
        """A plain attribute of n cells: levels total and cells (a marginal's two factors, 1ᵀ and I)."""
        n = v.check_int(n, name="n", caller="Hierarchy.flat")
        return cls((np.zeros(n, dtype=np.int64),), (root_name(name), name), name)

    @classmethod
    def balanced(cls, branching, *, level_names=None, name: str = "hierarchy") -> Hierarchy:
        """Every node at depth k has ``branching[k]`` children (e.g. (4, 4) gives 4 states of 4 counties)."""
        if isinstance(branching, str | bytes) or not hasattr(branching, "__iter__"):  # 3 raised "'int' object
            # is not iterable"
            raise TypeError("The 'branching' parameter of Hierarchy.balanced must be a sequence of integers, one per "
                            f"level (e.g. (4, 4): 4 states of 4 counties). Got {branching!r:.40} instead; write "
                            f"({branching!r:.20},) for one level.")
        b = [v.check_int(x, name="branching", caller="Hierarchy.balanced") for x in branching]
        parents, width = [], 1
        for k in b:
            parents.append(np.repeat(np.arange(width), k))
            width *= k
        return cls(tuple(parents), _names(level_names, len(b) + 1, "Hierarchy.balanced"), name)

    def __post_init__(self) -> None:
        caller = "Hierarchy"
        ps = tuple(np.asarray(p) for p in self.parents)
        if not ps:
            raise ValueError(f"The 'parents' parameter of {caller} must hold at least one level. Got none.")
        width = 1
        for k, p in enumerate(ps):
            if p.ndim != 1 or p.size == 0 or not np.issubdtype(p.dtype, np.integer):
                raise ValueError(f"The 'parents' parameter of {caller} must hold non-empty 1-D integer arrays. "
                                 f"Level {k + 1} has shape {p.shape} and dtype {p.dtype}.")
            if p.min() < 0 or p.max() >= width or np.unique(p).size != width:
                raise ValueError(f"The 'parents' parameter of {caller}: level {k + 1}'s parent codes must cover "
                                 f"every one of level {k}'s {width} groups, each code in [0, {width}). Got codes "
                                 f"in [{p.min()}, {p.max()}] covering {np.unique(p).size} groups.")
            width = p.size
        # read-only (as groups and sizes): an edit in place changed the errors, and sizes, cached, matched no tree
        object.__setattr__(self, "parents", tuple(read_only(p, np.int64) for p in ps))
        if len(self.level_names) != len(ps) + 1:
            raise ValueError(f"The 'level_names' parameter of {caller} must have {len(ps) + 1} names (one per "
                             f"level, the root's first). Got {len(self.level_names)}.")
        names = tuple(str(s) for s in self.level_names)
        twice = sorted({s for s in names if names.count(s) > 1})
        if twice:  # level("x") would silently mean the first of them
            raise ValueError(f"The 'level_names' parameter of {caller} must name each level once. Got {twice} "
                             f"more than once in {list(names)}.")
        object.__setattr__(self, "level_names", names)

    # -- shape --------------------------------------------------------------------------------------------
    @property
    def depth(self) -> int:
        """L: the leaves' level."""
        return len(self.parents)

    @property
    def n(self) -> int:
        return int(self.parents[-1].size)

    @property
    def n_groups(self) -> tuple[int, ...]:
        return (1, *(int(p.size) for p in self.parents))

    def level(self, name_or_index) -> int:
        """The index of a level given by name or index; ValueError listing the names."""
        if isinstance(name_or_index, bool | np.bool_):  # True was level 1
            raise TypeError(f"Hierarchy '{self.name}': a level is a name or an integer index, not a boolean. Got "
                            f"{name_or_index!r}; its levels are {list(self.level_names)}.")
        if isinstance(name_or_index, int | np.integer) and 0 <= name_or_index <= self.depth:
            return int(name_or_index)
        if name_or_index in self.level_names:
            return self.level_names.index(name_or_index)
        raise ValueError(f"Hierarchy '{self.name}' has no level {name_or_index!r}. Its levels are "
                         f"{list(self.level_names)}.")

    @cached_property
    def groups(self) -> tuple[np.ndarray, ...]:
        """``groups[ℓ][j]``: the level-ℓ group of leaf j (ℓ = 0 … L)."""
        out = [np.arange(self.n)]
        for p in reversed(self.parents):
            out.append(p[out[-1]])
        return tuple(read_only(g, None) for g in reversed(out))

    @cached_property
    def sizes(self) -> tuple[np.ndarray, ...]:
        """``sizes[ℓ][h]``: n_h, the number of leaves under level-ℓ group h."""
        return tuple(read_only(np.bincount(g, minlength=k)) for g, k in zip(self.groups, self.n_groups, strict=True))

    @cached_property
    def regular(self) -> bool:
        """True when every node of a level has the same number of children (then the level Grams commute)."""
        return all(np.unique(np.bincount(p)).size == 1 for p in self.parents)

    def level_matrix(self, level) -> np.ndarray:
        """L_ℓ (groups × n) as a dense 0/1 matrix: for small trees and tests only."""
        lv = self.level(level)
        M = np.zeros((self.n_groups[lv], self.n))
        M[self.groups[lv], np.arange(self.n)] = 1.0
        return M


def root_name(*levels: str) -> str:
    """The root level's name, "total", or "(total)" when a level below is called that: the root is never looked up
    by name (a grouping set's () is the grand total), and an attribute named "total" was refused as a repeated level
    name the caller never gave (a helper's audit)."""
    return "(total)" if "total" in levels else "total"


def _names(level_names, k: int, caller: str) -> tuple:
    if level_names is None:
        return ("total", *(f"level{i}" for i in range(1, k)))
    names = tuple(level_names)
    if len(names) != k:
        raise ValueError(f"The 'level_names' parameter of {caller} must have {k} names (one per level, the root's "
                         f"first). Got {len(names)}: {names!r:.80}.")
    return names
