"""A CSV or Parquet path counted by DuckDB (split from :mod:`mmopt.records.duckdb_counts`): the files pyarrow
found, opened on a connection the caller keeps, and the refusals of what DuckDB would read differently from the
other engines (spaced quotes, decimals past 38 digits, rows it skipped), each before any noise is drawn."""

from __future__ import annotations

import os

from mmopt.records import _csv
from mmopt.records import engines as eg
from mmopt.records import read as rd
from mmopt.records.domain import Domain
from mmopt.records.duckdb_counts import _PATH_REMEDY, _duckdb, _refuse_case_twins

__all__ = ["check_rejects", "open_path"]


def open_path(dataset, path, domain: Domain, *, caller: str):
    """(connection, relation) over the files pyarrow found at ``path`` (the same files; for CSV the same text).

    The caller keeps the connection: DuckDB 1.x closes it, under the relation, when it is garbage-collected.
    """
    duckdb = _duckdb()
    p = os.fspath(path).lower()
    _refuse_case_twins(dataset.schema.names, domain, caller)  # the file's own names (DuckDB renames a twin)
    if not p.endswith(rd._CSV) and len(dataset.files) > 1:  # a later file of a folder may hold the twin (a review)
        import pyarrow.parquet as pq
        for f in dataset.files[1:]:
            _refuse_case_twins(pq.read_schema(f).names, domain, caller)
    con = duckdb.connect()
    try:
        if p.endswith(rd._CSV):
            _refuse_spaced_quotes(path, p.endswith(".tsv"), caller)
            # a row of the wrong number of fields is refused by pyarrow's pass (DuckDB reads "2,y," under a header
            # a,b as the row 2,y, where pyarrow skips it); a row with a cell that is not UTF-8 is skipped (only the
            # domain's columns are read), where pyarrow reads the cell as missing, which drops the record: the same
            # counts (the file was refused before). check_rejects refuses any other row DuckDB skipped.
            _csv.refuse_ragged_rows(dataset, path, "duckdb", caller)
            return con, con.read_csv(os.fspath(path), header=True, all_varchar=True, na_values=rd.csv_nulls(domain),
                                     sep="\t" if p.endswith(".tsv") else ",", quotechar='"', escapechar='"',
                                     ignore_errors=True, store_rejects=True)
        _refuse_wide_decimals(dataset, path, domain, caller)
        return con, con.read_parquet(list(dataset.files))
    except duckdb.Error as exc:
        raise ValueError(f"{caller}: cannot read the records at {os.fspath(path)!r}: "
                         f"{eg.said(exc, 'DuckDB', _PATH_REMEDY)}") from None


#: DuckDB's error type of a row it skipped for a cell that is not UTF-8 (INVALID UNICODE before DuckDB 1.2)
_ENCODING = {"INVALID ENCODING", "INVALID UNICODE"}


def check_rejects(handle, path, *, caller: str) -> None:
    """After counting a CSV path (:func:`open_path`'s store_rejects): ValueError for any row DuckDB skipped but for a
    cell that is not UTF-8 (which pyarrow's read drops too), its message (which quotes the row) withheld — before
    any noise is drawn."""
    con = handle[0] if isinstance(handle, tuple) else None
    if con is None or not con.sql("SELECT 1 FROM duckdb_tables() WHERE table_name = 'reject_errors'").fetchall():
        return
    kinds = {str(k) for (k,) in con.sql("SELECT DISTINCT CAST(error_type AS VARCHAR) FROM reject_errors").fetchall()}
    if kinds - _ENCODING:
        raise ValueError(f"{caller}: DuckDB could not parse some rows of the CSV {os.fspath(path)!r} "
                         f"({', '.join(sorted(kinds - _ENCODING)).lower()}; its message is withheld: it quotes the "
                         "records), before any noise was drawn. Read it with engine='pyarrow' (the default).")


def _refuse_spaced_quotes(path, tsv: bool, caller: str) -> None:
    """A quoted cell with spaces outside its quotes (``30, "F"``): DuckDB strips them and reads F, where pyarrow,
    Polars and pandas keep the cell ' "F"' (RFC 4180: the quotes are then text), so the engines counted the same
    file differently, without a word (a helper's probe). Refused; a quoted cell holding ``, ""`` is refused too,
    which errs on the safe side."""
    sep = rb"\t" if tsv else rb","
    spaces = rb" +" if tsv else rb"[ \t]+"
    if _csv.csv_search(path, rb"(?:" + sep + rb"|\n)" + spaces + rb'"|"' + spaces + rb"(?:" + sep + rb"|\r?\n)",
                     before=b"\n"):
        raise ValueError(f"{caller}: the CSV {os.fspath(path)!r} has a quoted cell with spaces outside its quotes "
                         "(e.g. 30, \"F\"), which DuckDB reads as F and the other engines as ' \"F\"' (the quotes "
                         "are then part of the text). Remove the spaces next to the quotes, or read the file with "
                         "engine='pyarrow' (the default), which reads the spaces and quotes as text.")


def _refuse_wide_decimals(dataset, path, domain: Domain, caller: str) -> None:
    """A Parquet decimal of more than 38 digits (decimal256, BigQuery's BIGNUMERIC) DuckDB reads as a DOUBLE that
    is not the nearest: decimal(76, 38) 0.1 became 0.09999999999999999, and the category 0.1 counted 0 where
    pyarrow counts 1 (a helper's probe). Refused for the domain's columns, with the engine that reads them."""
    import pyarrow as pa
    wide = [f.name for f in dataset.schema if f.name in domain.names and pa.types.is_decimal(f.type)
            and f.type.precision > 38]
    if wide:
        raise ValueError(f"{caller}: column {wide[0]!r} of {os.fspath(path)!r} is a decimal of more than 38 digits "
                         f"({dataset.schema.field(wide[0]).type}), which DuckDB reads as an inexact float (0.1 as "
                         "0.09999999999999999), so its counts would differ from pandas'. Use engine='pyarrow' (the "
                         "default), which reads it exactly.")
