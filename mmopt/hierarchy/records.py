"""Grouping sets of records over a public hierarchy: count, plan, release, label — one call.

Notation: see README and :mod:`mmopt.hierarchy.release`. The leaf attribute (e.g. ``county``) is a column of the
records and an attribute of the :class:`~mmopt.records.Domain`; its coarser levels (``state``) are *public*
functions of it, given per leaf category (``levels={"state": state_of_each_county}``), never read from the records
(a column ``state`` in the data is ignored, so an inconsistent record cannot change the sensitivity). Counts come
from :func:`mmopt.records.counts.marginal_counts` (every source it reads), noise from OpenDP through
:func:`mmopt.hierarchy.release.release`.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np

from mmopt._base import validation as v
from mmopt._base.kept import keeping_draws
from mmopt.hierarchy import components as hc
from mmopt.hierarchy._columns import read_attributes
from mmopt.hierarchy._levels import level_codes
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

    def release(self, records, privacy, *, noise_scale: float | None = None, accountant=None,
                label: str | None = None) -> GroupedRelease:
        """Count ``records`` and release them with this plan's strategy (OpenDP's noise), labelled; ``privacy``,
        ``accountant`` and ``label`` as in :func:`release_grouping_sets`."""
        return self.release_for(records, privacy, noise_scale=noise_scale, accountant=accountant, label=label,
                                caller="GroupingPlan.release")

    def release_for(self, records, privacy, *, noise_scale: float | None = None, accountant=None,
                    label: str | None = None, caller: str, name: str = "records") -> GroupedRelease:
        """:meth:`release` for the public function ``caller`` whose parameter ``name`` holds the records (mmopt.sql's
        'source'), which refusals name. The budget is spent as a records release spends it
        (:func:`mmopt.records.release.release`): checked and pending before the records are read (a refusal reads
        and draws nothing; a failure before the draw removes the entry), settled to OpenDP's verified loss once
        the release is made; an error after the draw (in the least squares) leaves it pending, counted in full."""
        from mmopt._base.opendp import calibrate
        from mmopt.hierarchy.release import orbit_release, release
        from mmopt.records.release import budget_of, refuse_label
        refuse_label(label, accountant, caller)
        privacy = budget_of(privacy, accountant, caller, gaussian=True)  # "remaining": all the accountant has left
        # what needs no data is refused before the read: a δ = 0 budget and a noise_scale OpenDP cannot verify were
        # refused after the records had been counted (and, with an accountant, after a pending entry was written)
        refuse_non_gaussian(privacy, caller)
        if noise_scale is not None:
            noise_scale = v.check_real(noise_scale, name="noise_scale", caller=caller, low=0.0, low_open=True)
            if self.measurements is not None:  # OpenDP's map at that σ, from the strategy alone; nothing drawn
                calibrate(self.measurements.size, self.measurements.sensitivity, privacy, noise_scale=noise_scale,
                          caller=caller)
        what = (f"hierarchy release of {len(self.workload.sets)} grouping set(s), gaussian noise on a "
                f"{type(self.strategy).__name__}")
        with keeping_draws(caller):  # a Ctrl-C after the draw leaves the noisy values on the exception
            with (accountant.pending_release(privacy, label, what, caller=caller) if accountant is not None
                  else contextlib.nullcontext([])) as outcome:  # the ledger: checked, then pending before the read
                x = self.counts(records, caller=caller, name=name)
                if self.measurements is None:
                    out = orbit_release(self.workload, self.strategy, x, privacy, noise_scale)
                else:
                    out = release(self.workload, self.strategy, x, privacy, noise_scale=noise_scale, caller=caller)
                outcome.append(out)  # its verified_loss, noise, sensitivity and noise_scale settle the entry
            return self.grouped(out)


def refuse_non_gaussian(privacy, caller: str) -> None:
    """ValueError unless ``privacy`` is a Privacy with δ > 0: the family adds Gaussian noise (said before any read)."""
    from mmopt.privacy import Privacy
    if not isinstance(privacy, Privacy) or privacy.noise != "gaussian":
        raise ValueError(f"The 'privacy' parameter of {caller} must be a Privacy with delta > 0 (Gaussian noise at "
                         f"the strategy's exact L2 sensitivity: the hierarchy family's). Got {privacy!r}.")


def plan_grouping_sets(domain, sets, privacy, *, leaf: str, levels: dict, strategy=None,
                       caller: str = "plan_grouping_sets", levels_name: str = "levels") -> GroupingPlan:
    """The :class:`GroupingPlan` of ``GROUP BY GROUPING SETS (sets)`` (parameters: :func:`release_grouping_sets`;
    ``caller`` and ``levels_name`` name the function and parameter the user called, for the messages: mmopt.sql
    takes the levels as 'hierarchies').

    Refuses, before any data is read, a strategy that leaves a grouping set unmeasured.
    """
    from mmopt.hierarchy.release import is_orbit, measurements, refuse_unmeasured
    from mmopt.optimize import optimize
    from mmopt.records.domain import Domain, check_domain
    refuse_non_gaussian(privacy, caller)
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
    codes, labels = level_codes(levels, leaf_attr, caller, levels_name)
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
                          noise_scale: float | None = None, accountant=None,
                          label: str | None = None) -> GroupedRelease:
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
    privacy : Privacy or "remaining"
        (ε, δ) with δ > 0 (Gaussian noise). With an ``accountant``, ``"remaining"`` spends everything it has left,
        as :meth:`mmopt.Accountant.release` does (it must then leave a δ > 0).
    leaf : str
        The finest geography attribute (a domain attribute, one cell per category).
    levels : dict
        Coarse to fine, ``{level name: sequence with the label of each leaf category's group}``.
    strategy : HierarchyStrategy, NodeStrategy or OrbitStrategy, optional
        Default: ``mmopt.optimize(workload, privacy=privacy)``'s. An OrbitStrategy is what ``mmopt.plan`` returns
        for per-group accuracy targets on these sets (``plan_grouping_sets(...).workload``). One made for every
        attribute (for other sets) reads every attribute's column, with a warning.
    noise_scale : float, optional
        σ instead of the calibrated one; OpenDP must verify ``privacy`` at it.
    accountant : mmopt.Accountant or None
        The budget this release spends from, as for :func:`mmopt.records.release_marginals`: checked before the
        records are read (a refusal reads and draws nothing), written to its ledger as pending, then replaced by
        OpenDP's verified loss (and the ρ of the noise drawn). An error after the draw leaves it pending, counted
        in full.
    label : str or None
        The ledger's name for this release (default "release k"); only with ``accountant`` (refused without one).

    Returns
    -------
    GroupedRelease

    See Also
    --------
    mmopt.opendp.make_grouping_sets_mechanism : the same release as an OpenDP ``Measurement``.
    """
    from mmopt.records.release import budget_of, refuse_label
    caller = "release_grouping_sets"
    refuse_label(label, accountant, caller)  # before the plan's search, as every check on the budget
    privacy = budget_of(privacy, accountant, caller, gaussian=True)  # "remaining" as a Privacy: planned for it
    plan = plan_grouping_sets(domain, sets, privacy, leaf=leaf, levels=levels, strategy=strategy, caller=caller)
    return plan.release_for(records, privacy, noise_scale=noise_scale, accountant=accountant, label=label,
                            caller=caller)
