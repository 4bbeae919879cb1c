"""Grouping sets of records over a public hierarchy: count, plan, release, label — one call.

Notation: see README and :mod:`mmopt.hierarchy.release`. The leaf attribute (e.g. ``county``) is a column of the
records and an attribute of the :class:`~mmopt.records.Domain`; its coarser levels (``state``) are *public*
functions of it, given per leaf category (``levels={"state": state_of_each_county}``), never read from the records
(a column ``state`` in the data is ignored, so an inconsistent record cannot change the sensitivity). Counts come
from :func:`mmopt.records.counts.marginal_counts` (every source it reads), noise from OpenDP through
:func:`mmopt.hierarchy.release.release`.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from mmopt._base.kept import keeping_draws
from mmopt.hierarchy import components as hc
from mmopt.hierarchy._columns import read_attributes
from mmopt.hierarchy.tree import Hierarchy, root_name
from mmopt.hierarchy.workload import HierarchyWorkload, grouping_sets

#: :meth:`GroupedRelease.table`'s own columns: no attribute or level may be named like one.
TABLE_COLUMNS = ("set", "estimate", "std_error", "lower", "upper")


@dataclass(frozen=True, eq=False)
class GroupedRelease:
    """A release of grouping sets: ``table(alpha)`` gives one labelled row per group of every set.

    Attributes
    ----------
    workload : HierarchyWorkload
    release : mmopt.hierarchy.release.HierarchyRelease
    result : OptimizeResult
        The strategy's search (objective at unit noise, lower bound, family).
    labels : tuple of tuple
        Per workload attribute, per level, the label of each group.
    names : tuple of tuple
        Per workload attribute, the name of each level (root first).
    """

    workload: HierarchyWorkload
    release: object = field(repr=False)
    result: object = field(repr=False)
    labels: tuple = field(repr=False)
    names: tuple = field(repr=False)

    def table(self, alpha: float | None = 0.05):
        """A pandas DataFrame: ``set`` (the grouping set's index), one column per grouped level (None where
        rolled up, SQL's NULL), ``estimate``, ``std_error`` and, with ``alpha``, the exact Gaussian 1 − α interval
        ``lower``/``upper`` (estimate ∓ z_{1−α/2}·std_error: the error is exactly normal with that variance; widened by
        the answers' float64 round-off and rounded outwards, :func:`mmopt.answers.widths.bounds`)."""
        import pandas as pd

        from mmopt.answers import intervals as iv
        from mmopt.answers.widths import allowance, bounds

        z = None if alpha is None else iv.half_width("gaussian", iv.check_alpha(alpha, "GroupedRelease.table"),
                                                     sd=1.0)   # z_{1−α/2}
        cols = [n for per in self.names for n in per[1:]]
        frames = []
        for k, (s, ans, var) in enumerate(zip(self.workload.sets, self.release.answers, self.release.variances,
                                              strict=True)):
            data = {"set": np.full(ans.size, k)}
            idx = np.indices(ans.shape).reshape(ans.ndim, -1)
            for i, a in enumerate(s):
                for lv, name in enumerate(self.names[i][1:], start=1):
                    if lv == a:
                        data[name] = np.asarray(self.labels[i][a], dtype=object)[idx[i]]
                    elif lv < a and name not in data:  # the coarser levels of a finer group, as SQL shows them
                        data[name] = np.asarray(self.labels[i][lv], dtype=object)[
                            hc.ancestor_at(self.workload.attributes[i], a, lv)[idx[i]]]
            sd = np.sqrt(var.ravel())
            data["estimate"], data["std_error"] = ans.ravel(), sd
            if z is not None:  # widened by round-off and rounded outwards, as answers_table's and RecordsRelease's
                h = z * sd
                est = ans.ravel()
                data["lower"], data["upper"] = bounds(est, np.where(h > 0, h + allowance(float(np.abs(est).sum())),
                                                                    0.0))
            frames.append(pd.DataFrame(data))
        out = pd.concat(frames, ignore_index=True)
        for c in cols:
            out[c] = out[c].astype(object).where(out[c].notna(), None) if c in out else None
        lead = ["set", *cols]
        return out[lead + [c for c in out.columns if c not in lead]]


@dataclass(frozen=True, eq=False)
class GroupingPlan:
    """The public side of a grouping-sets release, built from the domain and the sets alone (no data read).

    ``workload`` over ``domain`` (the records' attributes less the derived levels), ``strategy`` and its
    ``result``, the strategy's ``measurements`` (:func:`mmopt.hierarchy.release.measurements`), ``labels`` and
    ``names`` for :class:`GroupedRelease`.
    """

    workload: HierarchyWorkload
    domain: object
    strategy: object = field(repr=False)
    result: object = field(repr=False)
    measurements: object = field(repr=False)
    labels: tuple = field(repr=False)
    names: tuple = field(repr=False)

    def counts(self, records, *, caller: str = "GroupingPlan.counts", name: str = "records") -> np.ndarray:
        """The histogram of ``records`` over :attr:`domain` (float, shape ``workload.shape``); refusals name
        ``caller``'s parameter ``name``."""
        from mmopt.records.counts import marginal_counts
        full = tuple(range(len(self.domain.names)))
        return marginal_counts(records, self.domain, [full], caller=caller, name=name)[full].astype(float)

    def grouped(self, release) -> GroupedRelease:
        """The labelled :class:`GroupedRelease` of a release made with this plan's strategy."""
        return GroupedRelease(self.workload, release, self.result, self.labels, self.names)

    def release(self, records, privacy, *, noise_scale: float | None = None) -> GroupedRelease:
        """Count ``records`` and release them with this plan's strategy (OpenDP's noise), labelled."""
        return self.release_for(records, privacy, noise_scale=noise_scale, caller="GroupingPlan.release")

    def release_for(self, records, privacy, *, noise_scale: float | None = None, caller: str,
                    name: str = "records") -> GroupedRelease:
        """:meth:`release` for the public function ``caller`` whose parameter ``name`` holds the records (mmopt.sql's
        'source'), which refusals name."""
        from mmopt.hierarchy.release import orbit_release, release
        x = self.counts(records, caller=caller, name=name)
        with keeping_draws(caller):  # a Ctrl-C after the draw leaves the noisy values on the exception
            if self.measurements is None:
                return self.grouped(orbit_release(self.workload, self.strategy, x, privacy, noise_scale))
            return self.grouped(release(self.workload, self.strategy, x, privacy, noise_scale=noise_scale,
                                        caller=caller))


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


def plan_grouping_sets(domain, sets, privacy, *, leaf: str, levels: dict, strategy=None,
                       caller: str = "plan_grouping_sets", levels_name: str = "levels") -> GroupingPlan:
    """The :class:`GroupingPlan` of ``GROUP BY GROUPING SETS (sets)`` (parameters: :func:`release_grouping_sets`;
    ``caller`` and ``levels_name`` name the function and parameter the user called, for the messages: mmopt.sql
    takes the levels as 'hierarchies').

    Refuses, before any data is read, a strategy that leaves a grouping set unmeasured.
    """
    from mmopt.hierarchy.release import is_orbit, measurements, refuse_unmeasured
    from mmopt.optimize import optimize
    from mmopt.privacy import Privacy
    from mmopt.records.domain import Domain, check_domain
    if not isinstance(privacy, Privacy) or privacy.noise != "gaussian":
        raise ValueError(f"The 'privacy' parameter of {caller} must be a Privacy with delta > 0 (Gaussian noise at "
                         f"the strategy's exact L2 sensitivity: the hierarchy family's). Got {privacy!r}.")
    check_domain(domain, caller=caller)
    if leaf not in domain.names:
        raise ValueError(f"The 'leaf' parameter of {caller} must be an attribute of the domain. Got {leaf!r}; the "
                         f"domain has {list(domain.names)}.")
    leaf_attr = domain.attributes[domain.index(leaf)]
    if not isinstance(levels, dict) or not levels:
        raise TypeError(f"The '{levels_name}' parameter of {caller} must be a non-empty dict {{level name: labels per "
                        f"{leaf} category}}, coarse to fine. Got {levels!r:.80}.")
    if clash := [name for name in levels if name in domain.names]:  # the level replaced the attribute, silently:
        # 'sex' counted county groups (make_grouping_sets_mechanism, release_grouping_sets; mmopt.sql refused it)
        raise ValueError(f"The '{levels_name}' parameter of {caller}: the level(s) {clash} of {leaf!r} are named "
                         "like domain attributes, so a grouping set could not tell which one it groups by. Rename the "
                         "levels.")
    # every attribute and level is a column of GroupedRelease.table: one named like the table's own columns lost its
    # labels (std_error, lower) or its estimates (estimate), or made pandas raise (set, via mmopt.sql; a probe)
    if clash := [name for name in (*levels, *domain.names) if name in TABLE_COLUMNS]:
        where = levels_name if clash[0] in levels else "domain"
        raise ValueError(f"The '{where}' parameter of {caller} names {clash[0]!r}, a column the release's table has "
                         f"of its own ({', '.join(TABLE_COLUMNS)}), whose values would replace its labels. Rename it "
                         f"(e.g. '{clash[0]}_group'; for an attribute, the records' column too).")
    codes, labels = [], []
    for name, lab in levels.items():
        if isinstance(lab, Mapping) and leaf_attr.categories is not None:  # {county: state}, as a keyed Series is
            lab = _by_key(lab, leaf_attr, name, caller, levels_name)  # (it was refused as "not a sequence")
        if isinstance(lab, str | bytes | Mapping) or np.ndim(lab) != 1:  # "CA" was read as 0 labels (a 0-d array)
            raise ValueError(f"The '{levels_name}' parameter of {caller}: level {name!r} must be a sequence with one "
                             f"label per {leaf} category ({leaf_attr.size}). Got {type(lab).__name__} {lab!r:.60}.")
        lab = np.asarray(_by_category(lab, leaf_attr, name, caller, levels_name), dtype=object)
        if lab.shape != (leaf_attr.size,):
            raise ValueError(f"The '{levels_name}' parameter of {caller}: level {name!r} must give one label per "
                             f"{leaf} category ({leaf_attr.size}). Got {lab.shape[0]}.")
        code, labels_of = _level_codes(lab, name, caller, levels_name)
        codes.append(code)
        labels.append(labels_of)
    _check_nested(list(levels), codes, labels, caller, levels_name)
    names = (root_name(*levels, leaf), *levels, leaf)
    geo = Hierarchy.from_codes(np.stack(codes, axis=1), level_names=names, name=leaf)
    attrs, sets = read_attributes(domain, sets, leaf, levels, strategy, caller)  # sets listed: a generator once
    hier = [geo if a.name == leaf else Hierarchy.flat(a.size, name=a.name) for a in attrs]
    W = grouping_sets(hier, sets, name="grouping sets", caller=caller)
    result = None
    if strategy is None:
        result = optimize(W, privacy=privacy)
        strategy = result.strategy
    if is_orbit(strategy):  # mmopt.plan's max-variance plan for these sets: refused by measurements (with the
        # advice to pass None, whose strategy missed the plan's targets: an auditor's probe), released by its blocks
        from mmopt.structured.orbit_release import evaluate as orbit_evaluate
        orbit_evaluate(W, strategy, caller=caller)  # another workload's plan is refused before any data is read
        m = None
    else:
        m = measurements(W, strategy, caller=caller)
        refuse_unmeasured(m, caller)
    all_labels = []
    for a in attrs:
        if a.name == leaf:
            all_labels.append(((None,), *labels, tuple(a.labels)))
        else:
            all_labels.append(((None,), tuple(a.labels)))
    names = tuple(h.level_names for h in hier)
    return GroupingPlan(W, Domain(tuple(attrs)), strategy, result, m, tuple(all_labels), names)


def release_grouping_sets(records, domain, sets, privacy, *, leaf: str, levels: dict, strategy=None,
                          noise_scale: float | None = None) -> GroupedRelease:
    """Release ``GROUP BY GROUPING SETS (sets)`` of ``records`` with a hierarchy over the ``leaf`` attribute.

    The residual and node families' answers (a HierarchyStrategy or NodeStrategy, what ``mmopt.optimize``
    returns) are computed with their float64 rounding bounded and charged in d_in (:mod:`mmopt.hierarchy.charged`),
    as the dense release's are (:mod:`mmopt.dense.exact_answers`).

    Parameters
    ----------
    records : anything :func:`mmopt.records.counts.marginal_counts` reads
    domain : mmopt.records.Domain
        Must hold ``leaf`` and every attribute named in ``sets`` that is not a level of the hierarchy. Only those
        columns are read (a record missing another column is counted, as SQL counts it).
    sets : list of tuple of str
        Attribute and level names (``()`` the total), e.g. ``cross(rollup("state", "county"), cube("sex"))``.
    privacy : Privacy
        (ε, δ) with δ > 0 (Gaussian noise).
    leaf : str
        The finest geography attribute (a domain attribute, one cell per category).
    levels : dict
        Coarse to fine, ``{level name: sequence with the label of each leaf category's group}``.
    strategy : HierarchyStrategy, NodeStrategy or OrbitStrategy, optional
        Default: ``mmopt.optimize(workload, privacy=privacy)``'s. An OrbitStrategy is what ``mmopt.plan`` returns
        for per-group accuracy targets on these sets (``plan_grouping_sets(...).workload``). One made for every
        attribute (for other sets) reads every attribute's column, with a warning.

    See Also
    --------
    mmopt.opendp.make_grouping_sets_mechanism : the same release as an OpenDP ``Measurement``.
    """
    plan = plan_grouping_sets(domain, sets, privacy, leaf=leaf, levels=levels, strategy=strategy,
                              caller="release_grouping_sets")
    return plan.release_for(records, privacy, noise_scale=noise_scale, caller="release_grouping_sets")
