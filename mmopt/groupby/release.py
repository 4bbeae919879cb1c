"""A parsed GROUP BY query released by the matrix mechanism: the grouping sets as one marginal workload.

Notation: see README and :mod:`mmopt.records.release`. For plain attributes a grouping set *is* a marginal
(``()`` the grand total), so the grouping sets of a query form one marginal workload W, released at once by
:func:`mmopt.records.release_marginals` — one strategy for all the overlapping group-bys, not independent
noise per group-by. :func:`release_grouping_sets` is the one function that turns the list of grouping sets into
a release (the place where hierarchical attributes will be routed to their own workload family), and
:func:`grouping_table` lays the release out as SQL would: one block of rows per grouping set, the columns not
in that set NULL (None), then the estimate, its standard error and, with ``alpha``, its exact 1 − α interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mmopt.groupby.hierarchies import _groups_by_tree, _hierarchy, _hierarchy_table, _read_domain
from mmopt.groupby.parse import RESULT_COLUMNS, GroupByQuery, parse_query
from mmopt.groupby.sources import resolve_source
from mmopt.privacy import Privacy
from mmopt.records.domain import Domain, check_domain
from mmopt.records.read import BATCH_ROWS, is_records
from mmopt.records.release import RecordsRelease, budget_of, refuse_label
from mmopt.records.release import release as release_records

__all__ = ["SqlRelease", "grouping_table", "parse_checked", "release_grouping_sets", "resolve_source", "sql"]

_CALLER = "mmopt.sql"


@dataclass(frozen=True, eq=False)
class SqlRelease:
    """What :func:`sql` returns.

    Attributes
    ----------
    table : pandas.DataFrame
        :func:`grouping_table`: ``grouping_set``, the selected columns, the count (named as in the query),
        ``std_error`` and, with ``alpha``, ``lower`` and ``upper``.
    release : RecordsRelease
        The release itself: strategy, measurements, exact variances and covariances, privacy spent.
    query : GroupByQuery
        The parsed query (table, columns, grouping sets).
    """

    table: object
    release: RecordsRelease
    query: GroupByQuery


def parse_checked(query: str, domain: Domain, levels=()) -> GroupByQuery:
    """:func:`~mmopt.groupby.parse.parse_query` against the public domain (and a hierarchy's ``levels``): a column
    that is neither an attribute nor a level is refused by name, before anything is read."""
    check_domain(domain, caller=_CALLER)
    return parse_query(query, domain.names, levels)


def release_grouping_sets(grouping_sets, records, domain: Domain, privacy: Privacy, *, strategy=None, seed=None,
                          accountant=None, label: str | None = None) -> RecordsRelease:
    """Release the counts of every grouping set (a list of tuples of attribute names, ``()`` the total) at once.

    For plain attributes the grouping sets are the marginals of one workload, released by
    :func:`mmopt.records.release_marginals` (same arguments, same numbers). Repeated sets are measured once.
    """
    caller = "release_grouping_sets"
    if not isinstance(grouping_sets, str) and is_records(grouping_sets):  # a Path too; a str may be a set
        # the hierarchy release takes (records, domain, sets, …): in that order a DataFrame's column names were
        # read as sets ("Got 'a' as a set") or a data value as an attribute (a helper's probe)
        raise TypeError(f"The 'grouping_sets' parameter of {caller} is a {type(grouping_sets).__name__}: records? "
                        "mmopt.groupby.release_grouping_sets takes (grouping_sets, records, domain, privacy), the sets "
                        "first; mmopt.hierarchy.release_grouping_sets takes (records, domain, grouping_sets, privacy).")
    check_domain(domain, caller=caller)
    grouping_sets = _check_sets(grouping_sets, domain, caller)
    return _grouping_sets(grouping_sets, records, domain, privacy, strategy=strategy, seed=seed, accountant=accountant,
                          label=label, caller=caller, name="records")


def _check_sets(grouping_sets, domain: Domain, caller: str) -> list[tuple]:
    """The grouping sets as a list of tuples of attribute names, or refusals naming 'grouping_sets' (they named a
    'workload' parameter the caller does not have, a string set was split into its letters: "names attribute 's'",
    a generator was used up by the checks and then read as no sets, and (0,) was released as attribute 0 which
    grouping_table could not label; helpers' probes)."""
    example = "e.g. [('state', 'sex'), ('state',), ()]"
    if isinstance(grouping_sets, str) or not hasattr(grouping_sets, "__iter__"):
        raise TypeError(f"The 'grouping_sets' parameter of {caller} must be a list of grouping sets, each a tuple of "
                        f"attribute names ({example}). Got {type(grouping_sets).__name__} instead.")
    sets = []
    for S in grouping_sets:
        if isinstance(S, str) or not hasattr(S, "__iter__"):
            raise TypeError(f"The 'grouping_sets' parameter of {caller} must hold tuples of attribute names "
                            f"({example}). Got {S!r} as a set; write ({S!r},) for a one-attribute set.")
        S = tuple(S)
        if other := [c for c in S if not isinstance(c, str)]:
            raise TypeError(f"The 'grouping_sets' parameter of {caller} must hold tuples of attribute names "
                            f"({example}). Got {other[0]!r} ({type(other[0]).__name__}) in {S!r}.")
        if unknown := [c for c in S if c not in domain.names]:
            raise ValueError(f"The 'grouping_sets' parameter of {caller} names {unknown[0]!r}, which is not an "
                             f"attribute of the domain {list(domain.names)}.")
        if len(set(S)) < len(S):
            raise ValueError(f"The 'grouping_sets' parameter of {caller} must name each attribute of a set once. "
                             f"Got {S!r}.")
        sets.append(S)
    if not sets:
        raise ValueError(f"The 'grouping_sets' parameter of {caller} must hold at least one grouping set "
                         f"({example}). Got none.")
    return sets


def _grouping_sets(grouping_sets, records, domain: Domain, privacy: Privacy, *, strategy, seed, accountant, label,
                   caller: str, name: str) -> RecordsRelease:
    """:func:`release_grouping_sets` for the public function ``caller`` (whose parameter ``name`` holds the
    records), which refusals name."""
    sets = _distinct(grouping_sets)
    return release_records(records, domain, sets, privacy, strategy=strategy, seed=seed, batch_size=BATCH_ROWS,
                           accountant=accountant, label=label, caller=caller, name=name, stacklevel=4)


def _distinct(grouping_sets) -> list[tuple]:
    """Each grouping set once, as a set: (a, b) and (b, a) group alike (SQL's grouping sets are sets; mmopt.sql
    keeps one), and deduplicating the tuples measured (a, b) twice. The first order given labels it."""
    first: dict[frozenset, tuple] = {}
    for S in grouping_sets:
        first.setdefault(frozenset(S), tuple(S))
    return list(first.values())


def grouping_table(release: RecordsRelease, grouping_sets, columns, *, alpha: float | None = None,
                   count_name: str = "count"):
    """The release as SQL lays out a GROUP BY GROUPING SETS result (module docstring), one block per set.

    Columns: ``grouping_set`` (e.g. "(state, sex)", "()" for the total), one column per entry of ``columns``
    (the cell's label — category or bin — or None where the set rolls that column up: SQL's NULL), then
    ``count_name`` (the estimate), ``std_error`` and, with ``alpha``, ``lower`` and ``upper``.
    """
    import pandas as pd
    columns = list(columns)
    if clash := [c for c in columns if c in (*RESULT_COLUMNS, count_name)]:  # its labels were replaced (a probe)
        raise ValueError(f"The 'columns' parameter of grouping_table names {clash[0]!r}, a column the table has of "
                         f"its own ({', '.join((*RESULT_COLUMNS, count_name))}), whose values would replace its "
                         f"labels. Rename the attribute (e.g. '{clash[0]}_group'), or pass another 'count_name'.")
    domain = release.domain
    if unknown := [c for c in columns if c not in domain.names]:  # a column of None before (a helper's probe)
        raise ValueError(f"The 'columns' parameter of grouping_table names {unknown[0]!r}, which is not an attribute "
                         f"of the release's domain {list(domain.names)}.")
    labels = {a.name: np.asarray(a.labels, dtype=object) for a in domain.attributes}
    parts = []
    for S in _distinct(_check_sets(grouping_sets, domain, "grouping_table")):
        key = tuple(sorted(domain.index(c) for c in S))
        if key not in release.marginals:  # a bare KeyError before
            held = [tuple(domain.names[i] for i in k) for k in release.marginals]
            raise ValueError(f"The 'grouping_sets' parameter of grouping_table names {S!r}, which the release did "
                             f"not measure (it holds {held!r:.120}).")
        if hidden := [c for c in S if c not in columns]:  # its rows repeated labels, told apart by nothing (a probe)
            raise ValueError(f"The 'columns' parameter of grouping_table leaves out {hidden[0]!r}, which the grouping "
                             f"set {S!r} groups by: its rows could not be told apart. Add {hidden[0]!r} to 'columns'.")
        est = release.marginals[key]  # axes in domain order
        cells = np.indices(est.shape).reshape(len(key), -1) if key else np.zeros((0, 1), dtype=np.int64)
        frame = {"grouping_set": "(" + ", ".join(S) + ")"}
        for c in columns:
            frame[c] = labels[c][cells[key.index(domain.index(c))]] if c in S else None
        frame[count_name] = est.ravel()
        frame["std_error"] = math.sqrt(release.cell_variance[key])
        if alpha is not None:
            frame["lower"], frame["upper"] = release.interval(key, alpha)  # widened for round-off, as table's
        parts.append(pd.DataFrame(frame, index=range(cells.shape[1])))
    return pd.concat(parts, ignore_index=True)


def sql(query: str, source, domain: Domain, privacy: Privacy, *, seed=None, alpha: float | None = 0.05,
        strategy=None, accountant=None, label: str | None = None, hierarchies=None) -> SqlRelease:
    """Answer a read-only ``SELECT cols, COUNT(*) FROM t GROUP BY …`` query privately, by the matrix mechanism.

    Parameters
    ----------
    query : str
        One SELECT of grouping columns and COUNT(*), grouped by columns, GROUPING SETS, ROLLUP and CUBE in any
        mix (:mod:`mmopt.groupby.parse`: anything else is refused before any data is read).
    source : pandas.DataFrame, path, mapping, DuckDB connection, or any records source
        A DataFrame or a .parquet/.csv path is the table itself (the FROM name is only a label); a mapping
        {name: records} and a DuckDB connection are looked up by the FROM name (``con.table(name)``); any other
        source is passed to :func:`mmopt.records.release_marginals` as it is (e.g. a Polars LazyFrame).
    domain : Domain
        The public domain; every selected column must be one of its attributes. Only the columns the query groups
        by are read: as in SQL, a record with a gap in another column is counted. Unlike SQL, a record whose value
        of a grouped attribute is missing or outside the domain is set aside from every count, in every grouping
        set (:mod:`mmopt.records.domain`'s out-of-domain rule; DuckDB would count a record with a NULL ``sex`` in
        ``GROUP BY GROUPING SETS ((state), (sex))``'s state groups, and as a NULL group of sex): to count missing
        values as a group of their own fill them with a declared category first (``df.fillna({"sex":
        "missing"})``, SQL's ``COALESCE``). A query grouping by nothing reads every domain attribute.
    privacy : Privacy or "remaining"
        δ > 0: Gaussian noise (the certified optimal strategy for the total squared error); δ = 0: Laplace noise.
        ``"remaining"`` with an ``accountant``: all it has left.
    seed : int or None
        As in :func:`~mmopt.records.release_marginals`: studies only (numpy's seeded noise, with a warning).
    alpha : float or None
        The table's exact 1 − α intervals (None: none).
    strategy, accountant, label
        As in :func:`~mmopt.records.release_marginals`.
    hierarchies : dict, optional
        ``{leaf: {level: label of each leaf category, …}}`` (coarse to fine), e.g. ``{"county": {"state":
        state_of_county}}``: the levels are public functions of the leaf, never read from the records, and the
        query may group by them (``ROLLUP(state, county)``). A query that groups by the leaf or a level runs in
        the hierarchy family (any other is a plain one)
        (:func:`mmopt.hierarchy.release_grouping_sets`: Gaussian noise, OpenDP's sampler, no ``seed``; a
        ``strategy`` is that function's, e.g. the OrbitStrategy :func:`mmopt.plan` returns for per-set targets on
        ``mmopt.hierarchy.records.plan_grouping_sets(...).workload``; an ``accountant`` is spent from as by the
        plain route) and ``.release`` is its :class:`~mmopt.hierarchy.GroupedRelease`.

    Returns
    -------
    SqlRelease
        ``.table`` (pandas, one block per grouping set, NULL for rolled-up columns), ``.release``, ``.query``.

    Examples
    --------
    >>> import pandas as pd, mmopt
    >>> from mmopt.records import Attribute, Domain
    >>> D = Domain((Attribute("state", categories=("CA", "NY")), Attribute("sex", categories=("F", "M"))))
    >>> people = pd.DataFrame({"state": ["CA", "NY", "NY"] * 40, "sex": ["F", "F", "M"] * 40})
    >>> out = sql("SELECT state, sex, COUNT(*) AS n FROM people GROUP BY ROLLUP(state, sex)", people, D,
    ...           mmopt.Privacy(1.0, 1e-6))
    >>> out.query.grouping_sets, out.table.columns.tolist()
    ((('state', 'sex'), ('state',), ()), ['grouping_set', 'state', 'sex', 'n', 'std_error', 'lower', 'upper'])
    >>> out.table.grouping_set.tolist()[-3:], out.table.state.tolist()[-1]
    (['(state)', '(state)', '()'], None)
    """
    tree = _hierarchy(hierarchies, domain) if isinstance(domain, Domain) else None
    q = parse_checked(query, domain, () if tree is None else tuple(tree[1]))
    refuse_label(label, accountant, _CALLER)  # before the plan's search (the hierarchy route) or the read
    # "remaining" with an accountant: all it has left (with δ, for the hierarchy route's Gaussian noise)
    privacy = budget_of(privacy, accountant, _CALLER, gaussian=tree is not None)
    if not isinstance(privacy, Privacy):
        raise TypeError(f"The 'privacy' parameter of {_CALLER} must be a Privacy, e.g. Privacy(epsilon=1.0). "
                        f"Got {type(privacy).__name__} instead.")
    if alpha is not None:
        from mmopt.answers.intervals import check_alpha
        alpha = check_alpha(alpha, _CALLER, laplace=privacy.sensitivity_norm == "l1")
    if tree is not None:
        # a strategy is the hierarchy family's own (a plan by accuracy was refused here, and the family's default
        # strategy missed the plan's targets at its budget: total s.e.² 3.86 for 1; a helper's audit)
        if seed is not None:
            raise ValueError(f"The 'seed' parameter of {_CALLER} does not apply with 'hierarchies' (the hierarchy "
                             "family draws OpenDP's noise). Drop it.")
        if privacy.noise != "gaussian":
            raise ValueError(f"The 'privacy' parameter of {_CALLER} must have delta > 0 with 'hierarchies' (the "
                             f"hierarchy family adds Gaussian noise). Got {privacy!r}. Give a delta, e.g. "
                             f"Privacy({privacy.epsilon}, 1e-6).")
    if tree is not None and not _groups_by_tree(q.grouping_sets, tree):
        tree = None  # the hierarchy is not grouped by: a plain query (its parameters' checks above still hold)
    if tree is not None:
        from mmopt.hierarchy.records import plan_grouping_sets
        plan = plan_grouping_sets(_read_domain(domain, q.grouping_sets, tree), list(q.grouping_sets), privacy,
                                  leaf=tree[0], levels=tree[1], strategy=strategy, caller=_CALLER,
                                  levels_name="hierarchies")  # before any data is read
        grouped = plan.release_for(resolve_source(source, q.table_parts), privacy, accountant=accountant,
                                   label=label, caller=_CALLER, name="source")
        return SqlRelease(_hierarchy_table(grouped, q, alpha), grouped, q)
    records = resolve_source(source, q.table_parts)
    release = _grouping_sets(q.grouping_sets, records, domain, privacy, strategy=strategy, seed=seed,
                             accountant=accountant, label=label, caller=_CALLER, name="source")
    if not release.marginals:  # post-processing failed after the draw (warned): keep the release
        return SqlRelease(None, release, q)
    return SqlRelease(grouping_table(release, q.grouping_sets, q.columns, alpha=alpha, count_name=q.count_name),
                      release, q)
