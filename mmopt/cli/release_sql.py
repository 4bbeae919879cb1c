"""``mmopt release --sql "SELECT …, COUNT(*) FROM t GROUP BY …" --records FILE --domain DOMAIN.json``.

The three phases of :mod:`mmopt.cli.release_records`, and only the second spends budget:

1. **Plan** (:func:`plan`): the query is parsed and checked against the domain (:mod:`mmopt.groupby.parse`:
   anything but grouping columns and COUNT(*) is refused), then the output, the budget, ``--alpha`` and the
   table's size — all before the records are opened.
2. **Measure**: :func:`mmopt.groupby.release.release_grouping_sets` releases every grouping set at once.
3. **Deliver**: :func:`mmopt.groupby.release.grouping_table` (one block per grouping set, rolled-up columns
   empty: SQL's NULL) is written atomically, with :func:`mmopt.cli.release_records.deliver`'s fallback.

``--records`` is a .parquet/.csv file or a folder of Parquet files (the FROM name is then only a label), or a
DuckDB database file (.duckdb), opened read-only, in which the FROM table is looked up.
"""

from __future__ import annotations

import os

import mmopt
from mmopt.cli import output as out
from mmopt.cli import release_records as rr
from mmopt.cli.ledger import ledger_scope, open_ledger
from mmopt.cli.release import MAX_TABLE_ROWS

__all__ = ["dispatch", "plan", "release_sql"]

_DUCKDB = (".duckdb", ".ddb")


def plan(args) -> tuple[rr.Plan, object]:
    """Phase 1: (the records plan, the parsed query); every check before the records are opened."""
    from mmopt.answers.table import require
    from mmopt.groupby.release import parse_checked
    from mmopt.records import Domain
    from mmopt.structured.residual import closure as cl

    if args.records is None or args.domain is None:
        raise ValueError("release --sql needs --records FILE (a .parquet/.csv file, a folder of Parquet files or a "
                         ".duckdb database) and --domain DOMAIN.json.")
    domain = Domain.from_json(args.domain)
    query = parse_checked(args.sql, domain)  # an unknown column named as such (the CLI's twin of mmopt.sql)
    path, ext = rr._check_output(args)
    if not os.path.exists(args.records):
        raise ValueError(f"The --records file '{args.records}' does not exist.")
    privacy = mmopt.Privacy(args.epsilon, args.delta)
    open_ledger(args, privacy, create=False)  # a ledger that cannot pay: said before any work
    if args.alpha is not None:
        from mmopt.answers.intervals import check_alpha
        check_alpha(args.alpha, "release --alpha", laplace=privacy.sensitivity_norm == "l1")
    for package in ("pandas", "pyarrow", "opendp"):  # ImportErrors (exit 1) before any noise
        require(package, "release --sql")
    keys = {tuple(sorted(domain.index(c) for c in S)) for S in query.grouping_sets}
    n_rows = sum(cl.cells(domain.shape, A) for A in keys)
    if n_rows > MAX_TABLE_ROWS and not args.allow_large_output:
        raise ValueError(f"The --out table would have {n_rows:,} rows, more than {MAX_TABLE_ROWS:,}. Pass "
                         "--allow-large-output to write it anyway, or ask for fewer or smaller grouping sets.")
    return rr.Plan(domain, list(query.grouping_sets), privacy, path, ext, n_rows), query


def _source(path: str, table: tuple):
    """The records: the file itself, or the FROM table of a DuckDB database opened read-only."""
    if not path.lower().endswith(_DUCKDB):
        return path
    from mmopt.answers.table import require
    from mmopt.groupby.release import resolve_source
    require("duckdb", "release --sql on a .duckdb file")
    import duckdb
    return resolve_source(duckdb.connect(path, read_only=True), table)


def release_sql(args) -> int:
    """``mmopt release --sql``: plan (all checks), measure once (OpenDP), deliver (table and report)."""
    from mmopt.groupby.release import grouping_table, release_grouping_sets

    p, query = plan(args)
    # from the draw on, Ctrl-C waits for the table to be written
    with ledger_scope(args, p.privacy) as acc, out.signals_held("the table") as got:
        records = _source(args.records, query.table_parts)
        res = release_grouping_sets(query.grouping_sets, records, p.domain, p.privacy, accountant=acc)
        code = rr.deliver(args, p, res, lambda: grouping_table(res, query.grouping_sets, query.columns,
                                                               alpha=args.alpha, count_name=query.count_name))
    return out.interrupted_after_draw(got, code, acc)


def dispatch(args) -> int:
    """``mmopt release``: a SQL release with --sql, else :func:`mmopt.cli.release_records.dispatch` (records or
    histogram)."""
    args.delta_given = args.delta is not None  # --delta omitted is 0 (Laplace noise), said against a plan's δ
    args.delta = 0.0 if args.delta is None else args.delta
    if getattr(args, "sql", None) is None:
        return rr.dispatch(args)
    stray = [("SPEC" if k == "spec" else f"--{k}") for k, default in {**rr.HISTOGRAM_ONLY, "workload": None}.items()
             if getattr(args, k) != default]
    if stray:
        verb, them = ("does", "it") if len(stray) == 1 else ("do", "them")
        raise ValueError(f"{', '.join(stray)} {verb} not go with --sql (the query says what is counted). Drop {them}.")
    return release_sql(args)
