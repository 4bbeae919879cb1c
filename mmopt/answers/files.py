"""Released answers streamed to a file: CSV or Parquet, block by block, written atomically.

Notation: see README. The table is :func:`mmopt.answers.answers_table`'s (columns, and what
``standard_error`` is, in :mod:`mmopt.answers.table`); here it is written ``chunk_rows`` rows at a time, so a
workload of any size (2-D ranges on 128²: 68 million rows, about 6 GB of CSV or 2 GB of Parquet) is
released without holding more than one block. The file is written beside its final name and renamed when
complete: it is either the whole table or absent.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from mmopt._base.atomic import atomic_target
from mmopt.answers.labels import _check_rows
from mmopt.answers.layout import DEFAULT_CHUNK_ROWS
from mmopt.answers.table import TablePlan, iter_batches, plan_table, require, table_schema

FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}


@dataclass(frozen=True)
class WrittenTable:
    """What :func:`write_answers` wrote: ``path``, ``format`` ("csv"/"parquet"), ``rows`` and ``bytes``."""

    path: str
    format: str
    rows: int
    bytes: int


def write_answers(path, output, workload, strategy=None, privacy=None, *, attributes=None, terms=None,
                  chunk_rows: int = DEFAULT_CHUNK_ROWS, alpha: float | None = None,
                  overwrite: bool = False) -> WrittenTable:
    """Stream the table of :func:`~mmopt.answers.answers_table` to ``path`` (.csv or .parquet), block by block.

    The file is written beside ``path`` under a temporary name and renamed when complete, so ``path`` is either
    the whole table or untouched. An existing file is replaced only with ``overwrite=True`` (as
    :func:`mmopt.save`); ``~`` is expanded. CSV: one header line, strings quoted where needed, floats in their shortest
    exact form. Parquet: one row group per block, the metadata of ``DataFrame.attrs`` under the key "mmopt".
    ``alpha`` adds exact 1 − α intervals (``lower``, ``upper``), as :func:`~mmopt.answers.answers_table`.
    """
    caller = "write_answers"
    fmt = table_format(path, caller)
    path = os.path.expanduser(os.fspath(path))  # '~/d/x.csv' was read as a folder named '~'
    if os.path.isdir(path):
        raise ValueError(f"The 'path' parameter of {caller} names a folder ('{path}'). Give a file name ending in "
                         ".csv or .parquet.")
    if os.path.exists(path) and not overwrite:  # it was replaced without a word (a helper's audit)
        raise FileExistsError(f"The 'path' parameter of {caller} names a file that exists ('{path}'). Pass "
                              "overwrite=True to replace it, or another path.")
    plan = plan_table(output, workload, strategy, privacy, attributes=attributes, terms=terms, caller=caller,
                      alpha=alpha)
    return stream(plan, str(path), fmt, _check_rows(chunk_rows, caller))


def table_format(path, caller: str) -> str:
    ext = os.path.splitext(str(path))[1].lower()
    if ext not in FORMATS:
        raise ValueError(f"The 'path' parameter of {caller} must end in .csv or .parquet (the format follows the "
                         f"extension). Got '{path}'.")
    return FORMATS[ext]


def stream(plan: TablePlan, path: str, fmt: str, chunk_rows: int) -> WrittenTable:
    """Write the planned table to ``path`` atomically, ``chunk_rows`` rows at a time."""
    return stream_batches(path, fmt, table_schema(plan), iter_batches(plan, chunk_rows))


def stream_batches(path: str, fmt: str, schema, batches) -> WrittenTable:
    """Write pyarrow record ``batches`` to ``path`` as CSV or Parquet, atomically: a temporary file beside it,
    renamed over ``path`` once complete (removed if anything fails)."""
    pa = require("pyarrow", "write_answers")
    rows = 0
    with atomic_target(path, f".{fmt}") as tmp:
        if fmt == "csv":
            from pyarrow import csv

            writer = csv.CSVWriter(tmp, schema, write_options=csv.WriteOptions(quoting_style="needed"))
        else:
            from pyarrow import parquet

            writer = parquet.ParquetWriter(tmp, schema)
        with writer:
            for batch in batches:
                if fmt == "csv":
                    writer.write_batch(batch)
                else:
                    writer.write_table(pa.Table.from_batches([batch], schema=schema))
                rows += batch.num_rows
    return WrittenTable(path, fmt, rows, os.path.getsize(path))
