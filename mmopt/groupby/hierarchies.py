"""A query over a declared hierarchy, the ``hierarchies`` of :func:`mmopt.sql` (split from
:mod:`mmopt.groupby.release`): the declaration checked, whether the query groups by it, the domain the hierarchy
family then reads, and its release laid out as :func:`~mmopt.groupby.release.grouping_table` lays out marginals."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from mmopt.groupby.parse import GroupByQuery
from mmopt.records.domain import Domain

_CALLER = "mmopt.sql"


def _hierarchy(hierarchies, domain: Domain) -> tuple[str, dict] | None:
    """(leaf, levels) of the one declared hierarchy, checked; None without one."""
    if hierarchies is None:
        return None
    if not isinstance(hierarchies, Mapping) or len(hierarchies) != 1:
        raise ValueError(f"The 'hierarchies' parameter of {_CALLER} must be a dict with one entry {{leaf attribute: "
                         f"{{level: label of each leaf category, …}}}} (coarse to fine), e.g. {{'county': {{'state': "
                         f"state_of_county}}}}. Got {hierarchies!r:.80}.")
    (leaf, levels), = hierarchies.items()
    if leaf not in domain.names or not isinstance(levels, Mapping) or not levels:
        raise ValueError(f"The 'hierarchies' parameter of {_CALLER}: {leaf!r} must be a domain attribute mapped to a "
                         f"non-empty dict of its coarser levels. The domain has {list(domain.names)}.")
    clash = [name for name in levels if name in domain.names]
    if clash:  # a level took the attribute's place in the query, silently (checked before the query's columns)
        raise ValueError(f"The 'hierarchies' parameter of {_CALLER}: the level(s) {clash} of {leaf!r} are named like "
                         "domain attributes, so a query could not tell which one it groups by. Rename the levels.")
    return leaf, dict(levels)  # the labels: plan_grouping_sets, which names 'hierarchies' of mmopt.sql


def _hierarchy_table(grouped, query: GroupByQuery, alpha):
    """The hierarchy release laid out as :func:`grouping_table` lays out marginals."""
    t = grouped.table(alpha=alpha)
    names = [n for per in grouped.names for n in per[1:]]
    sets = query.grouping_sets
    # the unselected levels and attributes go first: one named grouping_set made the insert raise (a probe)
    t = t.drop(columns=[c for c in names if c not in query.columns])
    t.insert(0, "grouping_set", ["(" + ", ".join(sets[k]) + ")" for k in t["set"]])
    for c in query.columns:  # NULL where the SQL set does not name the column, as SQL shows it (the table filled
        if c in t:           # in a finer group's parent level: 'A' for state in the set (county))
            named = np.array([c in sets[k] for k in t["set"]], dtype=bool)
            t[c] = t[c].astype(object).where(named, None)
    keep = ["grouping_set", *query.columns, "estimate", "std_error", *(["lower", "upper"] if alpha else [])]
    return t[keep].rename(columns={"estimate": query.count_name})


def _read_domain(domain: Domain, grouping_sets, tree) -> Domain:
    """The domain's attributes a query groups by (a hierarchy's leaf for its levels): the hierarchy family counts
    the histogram of its domain, so a record missing a column the query never groups by was set aside, where
    SQL counts it (as :func:`mmopt.records.mechanism.read_counts` reads only the measured and workload
    attributes). Called only when the query groups by the leaf or a level (:func:`_groups_by_tree`)."""
    used = {tree[0] if c in tree[1] else c for S in grouping_sets for c in S}
    return Domain(tuple(a for a in domain.attributes if a.name in used))


def _groups_by_tree(grouping_sets, tree) -> bool:
    """Whether a grouping set names the hierarchy's leaf or one of its levels: else the query is a plain one (the
    hierarchy family read the leaf's column anyway, and set aside the records missing it; a review)."""
    return any(c == tree[0] or c in tree[1] for S in grouping_sets for c in S)
