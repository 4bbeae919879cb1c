"""The columns a grouping-sets release reads (:func:`mmopt.hierarchy.records.plan_grouping_sets`)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping

__all__ = ["read_attributes"]


def read_attributes(domain, sets, leaf: str, levels: dict, strategy, caller: str) -> tuple[list, object]:
    """(the attributes read, ``sets`` as a list where it is one): levels are derived, never read; of the others the
    leaf and the attributes a set names — the histogram of every attribute set aside a record missing a column no
    set groups by, where SQL counts it (a helper's audit: 233 of 290 records; mmopt.sql read only those already,
    :func:`mmopt.groupby.hierarchies._read_domain`). Every attribute when a set is malformed or names an unknown
    column (grouping_sets then refuses it, listing them all), or when ``strategy`` covers every attribute and not
    these (one strategy reused across grouping sets: its domain is what is read, said in a warning — silently, a
    record with a gap in a column no set names dropped from the counts: 31 %, a review)."""
    every = [a for a in domain.attributes if a.name not in levels]
    if isinstance(sets, str | bytes | Mapping) or not hasattr(sets, "__iter__"):
        return every, sets
    sets = [tuple(s) if hasattr(s, "__iter__") and not isinstance(s, str | bytes | Mapping) else s for s in sets]
    named = set()
    for s in sets:
        items = (s,) if isinstance(s, str) else s if isinstance(s, tuple) else (None,)
        named.update(c if isinstance(c, str) else None for c in items)  # None: grouping_sets' own message
    if not named <= set(domain.names) | set(levels):  # malformed or unknown: grouping_sets' message, every attribute
        return every, sets
    read = [a for a in every if a.name == leaf or a.name in named]
    cells = getattr(strategy, "domain_size", None)
    if cells is not None and cells != math.prod(a.size for a in read) and cells == math.prod(a.size for a in every):
        extra = [a.name for a in every if a not in read]
        warnings.warn(f"{caller}: the strategy covers every attribute, and no grouping set names {extra}: their "
                      "columns are read too, so a record with a gap in one of them is not counted (SQL counts it). "
                      "Omit 'strategy' (or plan for these sets) to read only the columns the sets name.",
                      UserWarning, stacklevel=4)
        return every, sets
    return read, sets
