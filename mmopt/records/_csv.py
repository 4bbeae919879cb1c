"""Checks of a CSV file before and after pyarrow reads it: rows of the wrong number of fields (skipped, said),
quoted cells never closed (refused), byte searches, and pyarrow messages withheld where they quote a record.

Notation: see :mod:`mmopt.records.read`, which opens the files and uses these. Nothing here quotes a record.
"""

from __future__ import annotations

import os
import weakref

from mmopt._base.said_once import warn_data

__all__ = ["SKIPPED_ROWS", "csv_search", "refuse_ragged_rows", "refuse_unclosed_quote", "warn_skipped_rows"]


class _SkippedRows:
    """pyarrow's invalid-row handler: skips a row whose number of fields differs from the header's, remembering
    only that one was (the row it is given holds the record's text)."""

    def __init__(self):
        self.any = False

    def __call__(self, row) -> str:
        self.any = True
        return "skip"


_SKIPPED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # CSV dataset → its _SkippedRows

#: The :class:`mmopt.DataWarning` after the default engine's CSV read skipped rows (the others refuse such a file).
SKIPPED_ROWS = ("The CSV {path!r} has rows whose number of fields differs from its header's: they are skipped, not "
                "counted. If every row ends in a separator, the header lacks a column (or the rows have a trailing "
                "one).")


def warn_skipped_rows(path) -> None:
    """Say that a CSV read skipped rows of the wrong number of fields (to the data holder: one record can raise it)."""
    warn_data(SKIPPED_ROWS.format(path=os.fspath(path)), stacklevel=3)


def refuse_ragged_rows(dataset, path, engine: str, caller: str) -> None:
    """Refuse a CSV with a row of the wrong number of fields under ``engine`` 'polars' or 'duckdb' (one pass of
    pyarrow's parser): Polars padded a short row with missing values, so a record missing a column outside the
    domain was counted, and refused a long one; DuckDB reads a trailing separator as no field. pyarrow's read (the
    default) skips such rows, with a :class:`mmopt.DataWarning`."""
    import pyarrow as pa
    skipped = _SKIPPED.get(dataset)
    if skipped is None:
        return
    try:
        for _ in dataset.to_batches(columns=dataset.schema.names[:1]):
            pass
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"{caller}: reading the records failed (before any noise was drawn): {_said(exc)}") from None
    if skipped.any:
        raise ValueError(f"{caller}: the CSV {os.fspath(path)!r} has rows whose number of fields differs from its "
                         f"header's, which engine={engine!r} would count otherwise than the default engine "
                         f"({_RAGGED_READ[engine]}). Read it with engine='pyarrow' (the default), which skips them "
                         "with a DataWarning, or fix the rows.")


_RAGGED_READ = {"polars": "Polars pads a short row with missing values", "duckdb": "DuckDB reads a row with one "
                "field too many, the last empty, as a row of the header's fields"}


def _opener(name: str):
    import bz2
    import gzip
    return gzip.open if name.lower().endswith(".gz") else bz2.open if name.lower().endswith(".bz2") else open


class _Unclosed(Exception):
    """The csv module reached the end of the file inside a quoted cell."""


def refuse_unclosed_quote(path, delimiter: str, caller: str) -> None:
    """Refuse a CSV in which a quoted cell is never closed: with ``newlines_in_values`` pyarrow read the rest of the
    file as that one cell, silently (one record's free text removed every record after it; a review). A file with
    a double quote (one pass over the bytes) is read by Python's csv module (strict; 0.9 s per 100 MB), which also
    accepts a quote inside an unquoted cell (5'10"); a file it ends inside a quoted cell is refused, saying no
    record (a quote out of place elsewhere, '"F" ,', is read as pyarrow reads it). An
    even count is no proof: an inch mark and an unclosed quote, or two unclosed quotes, made [51, 50] of 20,000
    (a review). Undetected still: an unclosed quote closed by a later inch mark at the end of a cell."""
    import csv
    import sys
    name = os.fspath(path)
    with _opener(name)(name, "rb") as f:
        while block := f.read(1 << 20):
            if b'"' in block:
                break
        else:
            return
    # 128 KiB by default: a longer quoted cell is no error (a review); the limit is a C long
    limit = csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    try:
        with _opener(name)(name, "rt", encoding="utf-8", errors="replace", newline="") as f:
            rows = csv.reader(f, delimiter=delimiter, strict=True)
            while True:
                start = rows.line_num
                try:
                    next(rows)
                except StopIteration:
                    break
                except csv.Error as exc:  # a quote out of place on its line ('"F" ,'): pyarrow reads it, and the
                    # reader goes on; one whose cell spans line breaks closed a quote opened lines before (two
                    # unclosed quotes made [2550, 2550] of 20,000; a review)
                    if "unexpected end of data" in str(exc) or rows.line_num - start > 1:
                        raise _Unclosed from None
    except _Unclosed:
        raise ValueError(f"{caller}: the CSV {name!r} has a quoted cell that is never closed, so the rest of the "
                         "file would be read as one cell. Close the quote (a quote inside a quoted cell is "
                         "doubled: \"\"). Nothing was counted or drawn.") from None
    finally:
        csv.field_size_limit(limit)


def csv_search(path, pattern: bytes, *, before: bytes = b"") -> bool:
    """Whether the regex ``pattern`` matches the bytes of the CSV at ``path`` (decompressed; ``before`` put in
    front), read in 1 MiB blocks, each searched with the last 256 bytes of the one before."""
    import re
    name = os.fspath(path)
    regex, tail = re.compile(pattern), before
    with _opener(name)(name, "rb") as f:
        while block := f.read(1 << 20):
            text = tail + block
            if regex.search(text):
                return True
            tail = text[-256:]
    return False


def _said(exc) -> str:
    """pyarrow's message, unless it is a parse error, whose message quotes a record ("Row #102: Expected 3 columns,
    got 4: F,30,1,Jane Doe 555-1234"): an error someone pastes into a bug report must not carry the data."""
    import pyarrow as pa
    text = str(exc)
    if isinstance(exc, pa.ArrowInvalid) and not any(said in text for said in _RECORD_FREE):
        return (f"{type(exc).__name__}: the file's content could not be parsed (pyarrow's message is withheld: it "
                "quotes the records). Read it with pyarrow.csv.read_csv or pyarrow.parquet.read_table to see where.")
    return text


#: pyarrow messages that quote no record, passed on as they are (an empty CSV said "Empty CSV file" before)
_RECORD_FREE = ("Empty CSV file", "Parquet magic bytes not found", "Could not open Parquet input source")
