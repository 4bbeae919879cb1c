"""Reading records: schema checks, batches of columns, and the cell code of every value.

Notation: see README and :mod:`mmopt.records.domain`. A source of records is a pandas DataFrame, the path of a
Parquet file, a folder of Parquet files (the files' own columns: a Hive partition key that lives only in folder
names is refused, with the remedy) or a CSV file, a Dask DataFrame, a Polars
LazyFrame or DataFrame, or a DuckDB relation (the last two counted inside their engine:
:mod:`mmopt.records.polars_counts`, :mod:`mmopt.records.duckdb_counts`). Only the
domain's columns are read, in batches of ``batch_size`` rows, so memory is bounded by a batch (a partition for
Dask), never by the number of records. Every check that can fail (missing column, a dtype that cannot hold the
attribute's values, an unreadable file) runs before any count is returned, hence before any noise is drawn.

The code of a value is its cell j in [0, nᵢ), or −1 when it is missing, unparseable or outside the domain (such
records are dropped: :mod:`mmopt.records.domain`; exact integers, float32 and text in
:mod:`mmopt.records.values`). Codes are computed with vectorised lookups (Arrow's ``index_in``,
``np.searchsorted``); only object columns of mixed Python values are read value by value.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np

from mmopt._base.hints import did_you_mean
from mmopt.records import values as _values
from mmopt.records._csv import _SKIPPED, _said, _SkippedRows, refuse_unclosed_quote, warn_skipped_rows
from mmopt.records._text_values import _utf8_decoded
from mmopt.records.domain import Domain, check_domain

BATCH_ROWS = 1 << 20  # rows per batch: ~8 MB per int64 column, large enough to amortise per-batch overheads

_PARQUET = (".parquet", ".pq", ".parq")
_CSV = (".csv", ".csv.gz", ".csv.bz2", ".tsv")


def is_dask(records) -> bool:
    """A Dask DataFrame (checked without importing Dask)."""
    return type(records).__module__.startswith("dask") and hasattr(records, "to_delayed")


def is_records(x) -> bool:
    """A source of records by its type alone (no data read): a path, a pandas or Dask DataFrame, or a Polars or
    DuckDB object (a type test; the engines' own checks read the columns)."""
    if isinstance(x, str | os.PathLike) or is_dask(x):
        return True
    root = type(x).__module__.split(".", 1)[0]
    if root in ("polars", "duckdb", "_duckdb"):
        return True
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is in the 'tables' and 'test' extras
        return False
    return isinstance(x, pd.DataFrame)


# -- column kinds ------------------------------------------------------------------------------------------
def pandas_kind(dtype) -> str:
    """"text", "number", "bool" or the dtype's name, for a pandas (or numpy) dtype."""
    import pandas as pd
    from pandas.api import types as pt
    if isinstance(dtype, pd.CategoricalDtype):
        return pandas_kind(dtype.categories.dtype)
    if isinstance(dtype, pd.ArrowDtype):  # dictionary<int32, string> is text (it was refused as "not strings")
        return arrow_kind(dtype.pyarrow_dtype)
    if pt.is_bool_dtype(dtype):
        return "bool"
    if pt.is_numeric_dtype(dtype) and not pt.is_complex_dtype(dtype):
        return "number"
    if pt.is_string_dtype(dtype) or pt.is_object_dtype(dtype):
        return "text"
    return str(dtype)


def arrow_kind(typ) -> str:
    """"text", "number", "bool" or the type's name, for a pyarrow DataType."""
    import pyarrow as pa
    if pa.types.is_dictionary(typ):
        return arrow_kind(typ.value_type)
    if pa.types.is_boolean(typ):
        return "bool"
    if pa.types.is_integer(typ) or pa.types.is_floating(typ) or pa.types.is_decimal(typ):
        return "number"
    if pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_null(typ):
        return "text"
    return str(typ)


# a numeric attribute takes text columns too: each text value is parsed as a CSV cell (from every source, DataFrames
# too), and what is not a number is dropped (mmopt.records.values), so one bad cell never refuses a table
_ACCEPTS = {"text": ("text",), "number": ("number", "bool", "text"), "bins": ("number", "text")}
_WANTS = {"text": "strings (string categories)", "number": "numbers (numeric categories)",
          "bins": "numbers (numeric bin edges)"}


def _near(missing: str, columns) -> str:
    """" Did you mean …?" for a column equal up to case and surrounding spaces (SQL engines fold case; a CSV
    header keeps its spaces), else the closest by difflib; names are matched exactly, so say so."""
    hint = did_you_mean(str(missing), [c for c in columns if isinstance(c, str)], fold=True)
    return f"{hint} Names are matched exactly (case and spaces count): rename the column or the attribute." \
        if hint else ""


def check_schema(kinds: dict, domain: Domain, *, caller: str, name: str = "records", csv: bool = False,
                 frame: bool = False) -> None:
    """Every domain attribute has a column ({name: kind}) whose kind can hold its values; else ValueError naming
    ``caller``'s parameter ``name`` (mmopt.sql's is 'source', privbayes' 'data'). With ``csv`` the names are a CSV
    file's first line, a record when the file has no header: not listed (a headerless file's refusal quoted its first
    record; a helper's audit), only a name equal to the missing attribute's up to case and spaces said. With
    ``frame`` (pandas, Polars, Dask: they read such a file under its first record's values) likewise when none of
    the domain's attributes is a column; a Parquet file or a DuckDB table lists its columns (a review)."""
    missing = [n for n in domain.names if n not in kinds]
    numbered = any(not isinstance(c, str) and str(c) in missing for c in kinds)
    if missing and (csv or (frame and len(missing) == len(domain.names))) and not numbered:
        # a CSV's names, or a frame with none of the domain's (pandas, Polars or Dask read a CSV without a header
        # line under its first record's values, which the refusal listed; a review): counted, not listed
        key = missing[0].strip().casefold()
        near = [c for c in kinds if isinstance(c, str) and c.strip().casefold() == key]
        hint = (f" Did you mean {near[0]!r}? Names are matched exactly (case and spaces count): rename the column "
                "or the attribute." if near else " A CSV needs a header line naming its columns as the domain does."
                if csv else " Select or rename the columns the domain names (a CSV read with its header line).")
        where = ("The CSV's first line, its header, has" if csv else "None is a column of it, which has")
        raise ValueError(f"The '{name}' parameter of {caller} has no column {missing[0]!r} (domain attributes "
                         f"{missing} are missing). {where} {len(kinds)} field(s) (not listed: read from a CSV "
                         f"without a header line they are a record).{hint}")
    if missing:
        shown = sorted(kinds, key=str)[:20]  # as they are: a column 0 (an int) is not the attribute '0'
        hint = (" Column names are matched as given: make them strings (df.columns = df.columns.astype(str))."
                if numbered else _near(missing[0], kinds))
        raise ValueError(f"The '{name}' parameter of {caller} has no column {missing[0]!r} (domain attributes "
                         f"{missing} are missing). Its columns are {shown}{' …' if len(kinds) > 20 else ''}.{hint}")
    for a in domain.attributes:
        got = kinds[a.name]
        if got not in _ACCEPTS[a.kind]:
            # string_view holds strings, but pandas cannot read it out (pyarrow has no filter for it): say how
            remedy = (" pandas cannot read string_view values out (pyarrow has no filter for it; astype fails too): "
                      f"cast it to plain strings in Arrow first: df[{a.name!r}] = pd.Series(pa.array(df[{a.name!r}])"
                      ".cast(pa.string()), dtype=pd.ArrowDtype(pa.string()), index=df.index)."
                      if "string_view" in str(got) else " Convert the column or fix the domain.")
            raise ValueError(f"The '{name}' parameter of {caller} has column {a.name!r} of dtype {got}, but the "
                             f"domain's attribute {a.name!r} needs {_WANTS[a.kind]}.{remedy}")


# -- sources as batches of columns ---------------------------------------------------------------------------
def check_source(records, domain: Domain, *, caller: str, name: str = "records"):
    """Validate ``records`` against the domain; returns ("pandas" | "arrow" | "dask", handle).

    Polars and DuckDB sources are checked by :mod:`mmopt.records.polars_counts` and ``duckdb_counts``.
    """
    check_domain(domain, caller=caller)
    if isinstance(records, str | os.PathLike):
        dataset = open_dataset(records, domain, caller=caller, name=name)
        import pyarrow.dataset as ds
        csv = isinstance(dataset.format, ds.CsvFileFormat)  # its domain columns are read as bytes: text
        check_schema({f.name: "text" if csv and f.name in domain.names else arrow_kind(f.type)
                      for f in dataset.schema}, domain, caller=caller, name=name, csv=csv)
        return "arrow", dataset
    if is_dask(records):  # its columns are a pandas Index too: the same duplicate check (an AttributeError before)
        check_unique_columns(records.columns, domain, caller, name)
        check_schema({c: pandas_kind(t) for c, t in records.dtypes.items()}, domain, caller=caller, name=name,
                     frame=True)
        return "dask", records
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is in the 'tables' and 'test' extras
        pd = None
    if pd is not None and isinstance(records, pd.DataFrame):
        check_unique_columns(records.columns, domain, caller, name)
        check_schema({c: pandas_kind(t) for c, t in records.dtypes.items()}, domain, caller=caller, name=name,
                     frame=True)
        return "pandas", records
    raise TypeError(f"The '{name}' parameter of {caller} must be a pandas DataFrame, a path to a .parquet or .csv "
                    f"file (or a folder of Parquet files), a dask DataFrame, a polars LazyFrame or DataFrame, or a "
                    f"DuckDB relation. Got {type(records).__name__} instead.")


def check_unique_columns(columns, domain: Domain, caller: str, name: str = "records") -> None:
    """No domain attribute names two of ``columns`` (any sequence of column names: pandas, Dask, DuckDB)."""
    seen, repeated = set(), set()
    for c in columns:
        (repeated if c in seen else seen).add(c)
    dup = sorted(str(c) for c in repeated if c in domain.names)
    if dup:
        raise ValueError(f"The '{name}' parameter of {caller} has more than one column named {dup[0]!r}. "
                         "Rename or drop the duplicates.")


def open_dataset(path, domain: Domain, *, caller: str, name: str = "records"):
    """A pyarrow Dataset over the Parquet file or folder, or the CSV file, at ``path`` (nothing read yet).

    CSV columns are read as strings and coded by :mod:`mmopt.records.values`: "007" stays a string category, and
    a numeric attribute's text is parsed there (integers exactly; an unparseable cell is dropped, not an error). A
    cell that is not UTF-8 is missing. A row of the wrong number of fields is skipped, not counted, and said in one
    :class:`mmopt.DataWarning` when the read ends (:func:`arrow_batches`; never its text or how many).
    """
    try:
        import pyarrow as pa
        import pyarrow.dataset as ds
    except ImportError:  # pragma: no cover - pyarrow is in the 'tables' and 'test' extras
        raise ImportError(f"{caller} needs pyarrow to read files. Install it with: pip install pyarrow "
                          "(from a checkout: pip install -e '.[tables]')") from None
    p = os.fspath(path)
    lower = p.lower()
    if not os.path.exists(p):
        raise ValueError(f"The '{name}' parameter of {caller} names {p!r}, which does not exist.")
    if os.path.isdir(p) or lower.endswith(_PARQUET):
        fmt = "parquet"
    elif lower.endswith(_CSV):
        import pyarrow.csv as pcsv
        # bytes, decoded per batch (arrow_batches): a cell that is not UTF-8 (a Latin-1 "é") made the read raise,
        # one record refused the table, and pyarrow's message quoted it (a helper's audit); such a cell is missing.
        # A row of the wrong number of fields refused the file, so one record decided whether a release happened:
        # skipped now, and said (a whole file of rows with a trailing comma would otherwise count zero unsaid)
        refuse_unclosed_quote(p, "\t" if lower.endswith(".tsv") else ",", caller)
        types = {a.name: pa.binary() for a in domain.attributes}
        skipped = _SkippedRows()
        fmt = ds.CsvFileFormat(convert_options=pcsv.ConvertOptions(column_types=types, strings_can_be_null=True,
                                                                   null_values=csv_nulls(domain)),
                               # newlines_in_values: a quoted line break on a block boundary started the next
                               # block mid-record; the misread rows raised, and skipped they were miscounted (a
                               # review: 10,017 phantom records of 300,000)
                               parse_options=pcsv.ParseOptions(delimiter="\t" if lower.endswith(".tsv") else ",",
                                                               newlines_in_values=True, invalid_row_handler=skipped))
    else:
        hint = (f" A DuckDB database is read through a connection: {caller}(..., duckdb.connect({p!r}, "
                "read_only=True), ...) (the command line takes the .duckdb file itself)."
                if lower.endswith((".duckdb", ".db")) else "")
        raise ValueError(f"The '{name}' parameter of {caller} must be a .parquet or .csv file or a folder of "
                         f"Parquet files. Got {p!r} instead.{hint}")
    try:
        dataset = ds.dataset(p, format=fmt)
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"{caller}: cannot read the records at {p!r}: {_said(exc)}") from None
    if fmt != "parquet":
        _SKIPPED[dataset] = skipped  # pyarrow does not give the handler back (parse_options' is None)
    if fmt == "parquet" and os.path.isdir(p):
        _refuse_partition_keys(dataset, domain, p, caller, name)
    if fmt == "parquet" and len(dataset.files) > 1:
        _check_one_schema(dataset.files, domain, p, caller, name)
    return dataset


def _refuse_partition_keys(dataset, domain: Domain, path: str, caller: str, name: str) -> None:
    """Refuse a folder whose files lack a domain attribute that its sub-folders name (``state=CA/…``, a Hive-style
    partitioned data set): the engines read the files' own columns only, and the attribute was reported missing
    from the data (a helper's probe). Reading the key from folder names would type it by the engine's guess
    ("007" read as the integer 7 by pyarrow), so the remedy is to read the folder with pandas or to keep the column
    in the files."""
    keys = set()
    for f in dataset.files:
        for part in os.path.relpath(f, path).split(os.sep)[:-1]:
            key, eq, _ = part.partition("=")
            if eq:
                keys.add(key)
    columns = set(dataset.schema.names)
    missing = [a for a in domain.names if a in keys and a not in columns]
    if missing:
        raise ValueError(f"The '{name}' parameter of {caller} is a partitioned Parquet folder whose key column(s) "
                         f"{missing} live only in its folder names ({missing[0]}=…/), which mmopt does not read. "
                         f"Pass pandas.read_parquet({path!r}) instead (pandas reads the keys, as categories), or "
                         "write the column into the files.")


def _check_one_schema(files, domain: Domain, path: str, caller: str, name: str) -> None:
    """The domain's columns have one type (and exist) in every file of a Parquet folder, from the files' footers
    alone. With differing types the engines disagreed, and by the data: DuckDB cast a later file's 2.5 to the
    first file's int (counted as 2), 2⁵³+1 to float64 (counted as 2⁵³), pyarrow refused 2⁴⁰ in a later int64 file
    but counted 2, and dropped a file without the column; numbers became text categories."""
    import pyarrow.parquet as pq
    names = list(domain.names)
    first = None
    for f in files:
        try:
            schema = pq.read_schema(f)
        except (OSError, ValueError) as exc:
            raise ValueError(f"{caller}: cannot read the schema of {f!r} in {path!r}: {exc}") from None
        types = tuple(str(schema.field(n).type) if n in schema.names else "missing" for n in names)
        if first is None:
            first = (f, types)
        elif types != first[1]:
            diff = [f"{n}: {a} in {os.path.basename(first[0])}, {b} in {os.path.basename(f)}"
                    for n, a, b in zip(names, first[1], types, strict=True) if a != b]
            raise ValueError(f"The '{name}' parameter of {caller} is a folder of Parquet files whose columns differ "
                             f"in type ({'; '.join(diff[:3])}). The engines would read them differently, and by the "
                             "values in them; rewrite the files with one schema (e.g. cast the column in each).")


def csv_nulls(domain: Domain | None = None) -> list[str]:
    """The CSV cells read as missing (pyarrow's default null strings, quoted or not), but for the string categories
    ``domain`` declares: a category "NA" (North America) or "N/A" (an answer) is a value, not a missing one. Every
    engine uses them."""
    declared = {c for a in (domain.attributes if domain is not None else ()) if a.kind == "text" for c in a.categories}
    return [s for s in _values.default_csv_nulls() if s not in declared]


def pandas_batches(df, domain: Domain, batch_size: int) -> Iterator[list]:
    """Lists of columns (pandas Series, domain order) of at most ``batch_size`` rows."""
    cols = [df[name] for name in domain.names]
    for start in range(0, len(df), batch_size):
        yield [c.iloc[start:start + batch_size] for c in cols]


def arrow_batches(dataset, domain: Domain, batch_size: int, *, caller: str) -> Iterator[list]:
    """Lists of Arrow arrays (domain order) per record batch, a CSV's bytes as UTF-8 text; reading errors become
    ValueError."""
    import pyarrow as pa
    try:
        for batch in dataset.to_batches(columns=list(domain.names), batch_size=batch_size):
            yield [_utf8(batch.column(name)) for name in domain.names]
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"{caller}: reading the records failed (before any noise was drawn): {_said(exc)}") from None
    skipped = _SKIPPED.get(dataset)
    if skipped is not None and skipped.any:
        warn_skipped_rows(dataset.files[0])


def _utf8(column):
    """A CSV column read as bytes as UTF-8 text: one cast, or value by value (a cell that is not UTF-8 missing)
    where the cast refuses the batch; any other column as it is."""
    import pyarrow as pa
    if not (pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type)):
        return column
    try:
        return column.cast(pa.string())
    except pa.ArrowInvalid:  # the rule of a pandas object column's bytes (mmopt.records._text_values)
        return pa.array(_utf8_decoded(np.array(column.to_pylist(), dtype=object)), type=pa.string())


# -- value -> cell codes: mmopt.records.values ----------------------------------------------------------------
codes = _values.codes
