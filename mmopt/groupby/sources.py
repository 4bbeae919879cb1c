"""The records behind a query's ``FROM t`` (split from :mod:`mmopt.groupby.release`): a mapping's entry, a DuckDB
connection's table or view (checked against its catalog first), or the source itself."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["resolve_source"]

_CALLER = "mmopt.sql"


def resolve_source(source, table):
    """The records behind ``FROM table``: ``source[table]`` for a mapping, ``con.table(table)`` for a DuckDB
    connection, else ``source`` itself (a DataFrame, a Parquet/CSV path, a Polars LazyFrame, …).

    ``table`` is the name ("schema.name"), or its identifier parts (:attr:`GroupByQuery.table_parts`), which DuckDB
    is given quoted: the name alone read table ``tab`` of schema ``my`` for ``FROM "my.tab"``."""
    parts = None
    if isinstance(table, str):  # as written: DuckDB parses it (my.tab is table tab of schema my)
        name = table
    else:  # each part quoted, quotes doubled, so that DuckDB reads the parts the query named
        parts = tuple(table)
        name, table = ".".join(table), ".".join('"' + p.replace('"', '""') + '"' for p in table)
    if isinstance(source, Mapping):
        if name not in source:
            raise ValueError(f"The 'source' parameter of {_CALLER} has no table {name!r} (the query's FROM). "
                             f"It has {sorted(map(str, source))[:20]}.")
        return source[name]
    if type(source).__module__.split(".", 1)[0] in ("duckdb", "_duckdb") and hasattr(source, "table") \
            and "Connection" in type(source).__name__:
        import duckdb  # lazy: only a DuckDB connection brings it here
        if parts is not None:
            _check_catalog(source, parts, name)
        try:
            return source.table(table)
        except duckdb.Error as exc:
            raise ValueError(f"The 'source' parameter of {_CALLER} is a DuckDB connection without the table "
                             f"{name!r} (the query's FROM): {str(exc).splitlines()[0]}") from None
    return source


def _check_catalog(con, parts: tuple, name: str) -> None:
    """``FROM name`` must be a table or view of the connection's catalog: con.table() also read a file of that name
    from disk (``FROM "people.csv"`` with DuckDB's CSV sniffer, not mmopt's reading of the same file: CA counted 3
    where mmopt counts 0) and DuckDB's system views (a helper's audit). Names match as DuckDB's do, up to case."""
    rows = con.execute("SELECT database_name, schema_name, table_name FROM duckdb_tables() WHERE NOT internal "
                       "UNION ALL SELECT database_name, schema_name, view_name FROM duckdb_views() "
                       "WHERE NOT internal").fetchall()
    want = [p.casefold() for p in parts]
    if len(want) > 3 or not any([str(x).casefold() for x in row[3 - len(want):]] == want for row in rows):
        raise ValueError(f"The 'source' parameter of {_CALLER} is a DuckDB connection with no table or view {name!r} "
                         "(the query's FROM) in its catalog; DuckDB would read a file or a system view of that name "
                         "instead, which mmopt.sql does not count. Create the table in the database (or "
                         "con.register(name, frame)), or pass the file itself as the source.")
