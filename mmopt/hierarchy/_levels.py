"""A hierarchy's levels as the user gives them — one label per leaf category — read into group codes and labels.

Notation: see :mod:`mmopt.hierarchy.records`. A level is a sequence (or a mapping {leaf category: label}, or a
pandas Series keyed by the categories) with the label of each leaf category's group, coarse to fine; labels are
compared as the values they are, and every group of a level must lie under one group of the level before.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping

import numpy as np


def level_codes(levels: dict, leaf_attr, caller: str, levels_name: str) -> tuple[list, list]:
    """(codes, labels) of ``levels`` ({level name: labels per ``leaf_attr`` category}, coarse to fine): per level,
    each leaf category's group (numbered by first appearance) and the groups' labels; refusals name ``caller``'s
    parameter ``levels_name``."""
    codes, labels = [], []
    for name, lab in levels.items():
        if isinstance(lab, Mapping) and leaf_attr.categories is not None:  # {county: state}, as a keyed Series is
            lab = _by_key(lab, leaf_attr, name, caller, levels_name)  # (it was refused as "not a sequence")
        if isinstance(lab, str | bytes | Mapping) or np.ndim(lab) != 1:  # "CA" was read as 0 labels (a 0-d array)
            raise ValueError(f"The '{levels_name}' parameter of {caller}: level {name!r} must be a sequence with one "
                             f"label per {leaf_attr.name} category ({leaf_attr.size}). Got {type(lab).__name__} "
                             f"{lab!r:.60}.")
        lab = np.asarray(_by_category(lab, leaf_attr, name, caller, levels_name), dtype=object)
        if lab.shape != (leaf_attr.size,):
            raise ValueError(f"The '{levels_name}' parameter of {caller}: level {name!r} must give one label per "
                             f"{leaf_attr.name} category ({leaf_attr.size}). Got {lab.shape[0]}.")
        code, labels_of = _level_codes(lab, name, caller, levels_name)
        codes.append(code)
        labels.append(labels_of)
    _check_nested(list(levels), codes, labels, caller, levels_name)
    return codes, labels


def _check_nested(names: list, codes: list, labels: list, caller: str, levels_name: str) -> None:
    """Every label of a level lies under one label of the level before: a hierarchy's group is its label (a
    'd1' under two states would be two groups with one label, and the table could not say which is which)."""
    for k in range(1, len(codes)):
        parent = {}
        for child, up in zip(codes[k].tolist(), codes[k - 1].tolist(), strict=True):
            if parent.setdefault(child, up) != up:
                a, b = labels[k - 1][parent[child]], labels[k - 1][up]
                remedy = (f"Give the levels coarse to fine ({names[k]!r} has fewer labels than {names[k - 1]!r})."
                          if len(labels[k]) < len(labels[k - 1]) else "Each label names one group: make the labels "
                          f"unique within a level (e.g. '{b}/{labels[k][child]}').")
                raise ValueError(f"The '{levels_name}' parameter of {caller}: the {names[k]!r} label "
                                 f"{labels[k][child]!r} lies under two {names[k - 1]!r} labels, {a!r} and {b!r}. "
                                 f"{remedy}")


def _by_key(mapping, leaf_attr, name: str, caller: str, levels_name: str) -> list:
    """A level given as {leaf category: label}: its labels in the leaf's category order, every category once."""
    cats = list(leaf_attr.categories)
    missing, extra = [c for c in cats if c not in mapping], [k for k in mapping if k not in set(cats)]
    if missing or extra:
        raise ValueError(f"The '{levels_name}' parameter of {caller}: level {name!r} is a mapping whose keys must be "
                         f"the {leaf_attr.name} categories. Missing {missing[:3]}, unknown {extra[:3]}.")
    return [mapping[c] for c in cats]


def _by_category(lab, leaf_attr, name: str, caller: str, levels_name: str):
    """A level's labels in the leaf's cell order: a pandas Series keyed by the leaf's categories (a lookup table) is
    aligned by its keys, one with a default index read by position as a list (refused where the categories are
    0 … k−1 in another order, so both readings apply and disagree); any other index is refused. Its
    index was ignored: a Series {"d": "S", "c": "S", "b": "T", "a": "T"} put county a in state S (a helper's
    probe)."""
    index = getattr(lab, "index", None)
    if index is None or not hasattr(lab, "reindex"):
        return lab
    keys = list(index)
    cats = list(leaf_attr.categories) if leaf_attr.categories is not None else None
    if cats is not None and len(keys) == len(cats) and set(keys) == set(cats):
        if keys == list(range(len(keys))) and cats != keys:  # categories (2, 0, 1), index 0, 1, 2: by key or by
            # position, the two readings disagree (it was read by key, its docstring said by position: a probe)
            raise ValueError(f"The '{levels_name}' parameter of {caller}: level {name!r} is a Series whose index "
                             f"0 … {len(keys) - 1} is both the positions and the categories of {leaf_attr.name!r} "
                             f"({cats!r:.80}), in another order. Pass a list in the categories' order: "
                             f"list(s.reindex({cats!r:.40})) if the index holds categories, list(s) if positions.")
        return lab.reindex(cats).to_numpy()
    if keys == list(range(len(keys))):
        return lab.to_numpy()
    raise ValueError(f"The '{levels_name}' parameter of {caller}: level {name!r} is a Series whose index is neither "
                     f"the categories of {leaf_attr.name!r} ({cats!r:.80}) nor positions 0 … {len(keys) - 1}. Got "
                     f"index {keys!r:.80}; reindex it to the categories, or pass a list in their order.")


def _level_codes(lab: np.ndarray, name, caller: str, levels_name: str) -> tuple[np.ndarray, tuple]:
    """Each leaf category's group in one level, groups numbered by first appearance, and the groups' labels. Labels
    are compared as the values they are (1 and 1.0 are one group), never as their str(): 1 and "1" were merged, and
    a None label looked like SQL's NULL for a rolled-up column; so a level is all strings or all numbers."""
    texts = [isinstance(x, str) for x in lab]
    numeric = [isinstance(x, numbers.Real) and not isinstance(x, bool | np.bool_) and x == x for x in lab]
    if not (all(texts) or all(numeric)):
        raise ValueError(f"The '{levels_name}' parameter of {caller}: level {name!r} must label every category with a "
                         f"string, or every one with a number (not None, NaN or a boolean). Got "
                         f"{sorted({type(x).__name__ for x in lab})}.")
    first: dict = {}
    code = np.array([first.setdefault(x, len(first)) for x in lab.tolist()], dtype=np.int64)
    return code, tuple(first)
