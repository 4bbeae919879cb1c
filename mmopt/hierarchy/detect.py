"""Recognising grouping sets in a union of Kronecker products of dense 0/1 level matrices.

Notation: see README and :mod:`mmopt.hierarchy.workload`. A factor is a *level matrix* when it is c·M with M a
0/1 matrix whose every column has exactly one 1 (each cell in exactly one group) and every row at least one: a
partition of the attribute's cells, and c > 0 moves into the term's weight. The partitions used for one attribute
across the terms must be nested (each refines the next coarser one); the chain, topped by the total and closed
by the cells, is the attribute's :class:`~mmopt.hierarchy.tree.Hierarchy`.

A level's groups are numbered by the factor's rows (group g is row g), so that the family's per-query answers and
variances come out in the workload's own row order. Numbered by first appearance over the cells instead, a factor
listing state B (cell 3) before state A (cells 0–2) had its two answers and variances swapped without a word (an
auditor's probe). Hence a partition used by two terms with its rows in two orders, or a finest level whose rows
are not the cells in order, is not detected: the workload then goes through its union of Kronecker products.
"""

from __future__ import annotations

import numpy as np

from mmopt.hierarchy.tree import Hierarchy
from mmopt.hierarchy.workload import HierarchyWorkload


def partition_of(M: np.ndarray) -> tuple[np.ndarray, float] | None:
    """(labels, c) when M = c·(partition matrix), labels[j] the row holding cell j; else None."""
    M = np.asarray(M, dtype=float)
    if M.ndim != 2 or M.size == 0:
        return None
    nz = M != 0
    if not np.all(nz.sum(axis=0) == 1) or not np.all(nz.any(axis=1)):
        return None
    rows = np.argmax(nz, axis=0)
    vals = M[rows, np.arange(M.shape[1])]
    c = float(vals[0])
    if c <= 0 or not np.all(vals == c):
        return None
    return rows.astype(np.int64), c


def _refines(fine: np.ndarray, coarse: np.ndarray) -> bool:
    pairs = np.unique(np.stack([fine, coarse]), axis=1).shape[1]
    return pairs == np.unique(fine).size


def from_implicit(workload) -> HierarchyWorkload | None:
    """The grouping sets ``workload`` stands for (an ImplicitWorkload, or a small dense Workload built by
    ``workload.stack``/``kron``, which remembers its structure), or None when it is not of that form."""
    if not hasattr(workload, "terms"):
        from mmopt.workload import structure_of
        workload = structure_of(workload)
    terms = getattr(workload, "terms", None)
    if not terms:
        return None
    d = len(terms[0].factors)
    labels, weights = [], []
    for t in terms:
        row, w = [], float(t.weight)
        for f in t.factors:
            M = f.matrix
            if M is None or M.shape[1] > 200_000:
                return None
            got = partition_of(M)
            if got is None:
                return None
            row.append(got[0])
            w *= got[1]
        labels.append(row)
        weights.append(w)
    attributes, sets = [], [[0] * d for _ in terms]
    for i in range(d):
        n = labels[0][i].size
        distinct = {}
        for lab in (r[i] for r in labels):
            distinct.setdefault(lab.tobytes(), lab)
        chain = sorted(distinct.values(), key=lambda lab: int(lab.max()))  # coarse to fine by number of groups
        if any(int(a.max()) == int(b.max()) for a, b in zip(chain, chain[1:], strict=False)):
            return None  # two different partitions with as many groups: not a chain
        if any(not _refines(fine, coarse) for coarse, fine in zip(chain, chain[1:], strict=False)):
            return None
        levels = list(chain)
        if int(levels[0].max()) != 0:
            levels.insert(0, np.zeros(n, dtype=np.int64))
        if int(levels[-1].max()) != n - 1 or len(levels) == 1:  # one cell: its total is its cells, one level each
            levels.append(np.arange(n))
        elif not np.array_equal(levels[-1], np.arange(n)):
            return None  # the cells in another order: leaf j must be cell j
        parents = []
        for coarse, fine in zip(levels, levels[1:], strict=False):
            par = np.zeros(int(fine.max()) + 1, dtype=np.int64)
            par[fine] = coarse
            parents.append(par)
        names = ("total", *(f"level{k}" for k in range(1, len(levels) - 1)), f"a{i}")
        attributes.append(Hierarchy(tuple(parents), names, name=f"a{i}"))
        keys = [lab.tobytes() for lab in levels]
        for s, r in zip(sets, labels, strict=True):
            s[i] = keys.index(r[i].tobytes())
    return HierarchyWorkload(tuple(attributes), tuple(tuple(s) for s in sets), np.asarray(weights),
                             getattr(workload, "name", "grouping sets"))
