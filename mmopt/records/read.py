"""Reading records: schema checks, batches of columns, and the cell code of every value.

Notation: see README and :mod:`mmopt.records.domain`. A source of records is a pandas DataFrame, the path of a
Parquet file, a folder of Parquet files (a partitioned data set) or a CSV file, or a Dask DataFrame. Only the
domain's columns are read, in batches of ``batch_size`` rows, so memory is bounded by a batch (a partition for
Dask), never by the number of records. Every check that can fail (missing column, a dtype that cannot hold the
attribute's values, an unreadable file) runs before any count is returned, hence before any noise is drawn.

The code of a value is its cell j in [0, nᵢ), or −1 when it is missing or outside the domain (such records
are dropped: :mod:`mmopt.records.domain`). Codes are computed with vectorised lookups (Arrow's ``index_in``,
``np.searchsorted``), never a Python loop over records.
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Iterator

import numpy as np

from mmopt.records.domain import Attribute, Domain

BATCH_ROWS = 1 << 20  # rows per batch: ~8 MB per int64 column, large enough to amortise per-batch overheads

_PARQUET = (".parquet", ".pq", ".parq")
_CSV = (".csv", ".csv.gz", ".csv.bz2", ".tsv")


def is_dask(records) -> bool:
    """A Dask DataFrame (checked without importing Dask)."""
    return type(records).__module__.startswith("dask") and hasattr(records, "to_delayed")


# -- column kinds ------------------------------------------------------------------------------------------
def pandas_kind(dtype) -> str:
    """"text", "number", "bool" or the dtype's name, for a pandas (or numpy) dtype."""
    import pandas as pd
    from pandas.api import types as pt
    if isinstance(dtype, pd.CategoricalDtype):
        return pandas_kind(dtype.categories.dtype)
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


_ACCEPTS = {"text": ("text",), "number": ("number", "bool"), "bins": ("number",)}
_WANTS = {"text": "strings (string categories)", "number": "numbers (numeric categories)",
          "bins": "numbers (numeric bin edges)"}


def check_schema(kinds: dict, domain: Domain, *, caller: str) -> None:
    """Every domain attribute has a column ({name: kind}) whose kind can hold its values; else ValueError."""
    missing = [n for n in domain.names if n not in kinds]
    if missing:
        shown = sorted(map(str, kinds))[:20]
        raise ValueError(f"The 'records' parameter of {caller} has no column {missing[0]!r} (domain attributes "
                         f"{missing} are missing). Its columns are {shown}{' …' if len(kinds) > 20 else ''}.")
    for a in domain.attributes:
        got = kinds[a.name]
        if got not in _ACCEPTS[a.kind]:
            raise ValueError(f"The 'records' parameter of {caller} has column {a.name!r} of dtype {got}, but the "
                             f"domain's attribute {a.name!r} needs {_WANTS[a.kind]}. Convert the column or fix the "
                             "domain.")


# -- sources as batches of columns ---------------------------------------------------------------------------
def check_source(records, domain: Domain, *, caller: str):
    """Validate ``records`` against the domain; returns ("pandas" | "arrow" | "dask", handle)."""
    if not isinstance(domain, Domain):
        raise TypeError(f"The 'domain' parameter of {caller} must be a Domain (mmopt.records.Domain). "
                        f"Got {type(domain).__name__} instead.")
    if isinstance(records, str | os.PathLike):
        dataset = open_dataset(records, domain, caller=caller)
        check_schema({f.name: arrow_kind(f.type) for f in dataset.schema}, domain, caller=caller)
        return "arrow", dataset
    if is_dask(records):
        check_schema({c: pandas_kind(t) for c, t in records.dtypes.items()}, domain, caller=caller)
        return "dask", records
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is in the 'tables' and 'test' extras
        pd = None
    if pd is not None and isinstance(records, pd.DataFrame):
        dup = sorted({str(c) for c in records.columns[records.columns.duplicated()] if c in domain.names})
        if dup:
            raise ValueError(f"The 'records' parameter of {caller} has more than one column named {dup[0]!r}. "
                             "Rename or drop the duplicates.")
        check_schema({c: pandas_kind(t) for c, t in records.dtypes.items()}, domain, caller=caller)
        return "pandas", records
    raise TypeError(f"The 'records' parameter of {caller} must be a pandas DataFrame, a path to a .parquet or .csv "
                    f"file (or a folder of Parquet files), or a dask DataFrame. Got {type(records).__name__} instead.")


def open_dataset(path, domain: Domain, *, caller: str):
    """A pyarrow Dataset over the Parquet file or folder, or the CSV file, at ``path`` (nothing read yet).

    CSV columns are parsed with the type the domain implies (string for string categories, float64 otherwise),
    so that "007" stays a category and not the number 7.
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
        raise ValueError(f"The 'records' parameter of {caller} names {p!r}, which does not exist.")
    if os.path.isdir(p) or lower.endswith(_PARQUET):
        fmt = "parquet"
    elif lower.endswith(_CSV):
        import pyarrow.csv as pcsv
        types = {a.name: (pa.string() if a.kind == "text" else pa.float64()) for a in domain.attributes}
        fmt = ds.CsvFileFormat(convert_options=pcsv.ConvertOptions(column_types=types, strings_can_be_null=True),
                               parse_options=pcsv.ParseOptions(delimiter="\t" if lower.endswith(".tsv") else ","))
    else:
        raise ValueError(f"The 'records' parameter of {caller} must be a .parquet or .csv file or a folder of "
                         f"Parquet files. Got {p!r} instead.")
    try:
        return ds.dataset(p, format=fmt)
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"{caller}: cannot read the records at {p!r}: {_csv_reason(p, exc)}") from None


def _csv_reason(path: str, exc: Exception) -> str:
    """pyarrow's error, or, for a text cell in a column the domain declares numeric, what that means."""
    found = re.search(r"CSV column #(\d+): Row #(\d+): CSV conversion error to double: invalid value '(.*?)'",
                      str(exc))
    if found is None:
        return str(exc)
    column, row, value = int(found.group(1)), int(found.group(2)), found.group(3)
    with open(path, encoding="utf-8", errors="replace") as f:
        header = next(csv.reader(f), [])
    name = header[column] if column < len(header) else f"#{column}"
    return (f"the domain declares column '{name}' numeric (bin edges), but row {row} of the file holds the text "
            f"{value!r}. Declare '{name}' with categories if it holds labels, or fix the file.")


def pandas_batches(df, domain: Domain, batch_size: int) -> Iterator[list]:
    """Lists of columns (pandas Series, domain order) of at most ``batch_size`` rows."""
    cols = [df[name] for name in domain.names]
    for start in range(0, len(df), batch_size):
        yield [c.iloc[start:start + batch_size] for c in cols]


def arrow_batches(dataset, domain: Domain, batch_size: int, *, caller: str) -> Iterator[list]:
    """Lists of Arrow arrays (domain order) per record batch; reading errors become ValueError."""
    import pyarrow as pa
    try:
        for batch in dataset.to_batches(columns=list(domain.names), batch_size=batch_size):
            yield [batch.column(name) for name in domain.names]
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"{caller}: reading the records failed (before any noise was drawn): {exc}") from None


# -- value -> cell codes -----------------------------------------------------------------------------------
def codes(column, attribute: Attribute) -> np.ndarray:
    """The cell of every value of ``column`` (a pandas Series or an Arrow array), −1 when out of domain."""
    import pandas as pd
    if isinstance(column, pd.Series):
        if isinstance(column.dtype, pd.CategoricalDtype):  # map the column's few categories, then look up
            lut = np.append(codes(pd.Series(column.cat.categories), attribute), -1)
            return lut[column.cat.codes.to_numpy()]  # code −1 (missing) reads lut[−1] = −1
        if attribute.kind == "text":
            return _text_codes(column, attribute)
        return _number_codes(column.to_numpy(dtype=_float_or_int(column), na_value=np.nan), attribute)
    if attribute.kind == "text":
        return _arrow_text_codes(column, attribute)
    import pyarrow as pa
    import pyarrow.compute as pc
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if pa.types.is_boolean(column.type):
        column = pc.cast(column, pa.int64())
    if column.null_count or not pa.types.is_integer(column.type):
        column = pc.cast(column, pa.float64())
    return _number_codes(column.to_numpy(zero_copy_only=False), attribute)


def _float_or_int(column):
    """int64 for an integer column without missing values (exact beyond 2⁵³), float64 otherwise."""
    from pandas.api import types as pt
    if pt.is_integer_dtype(column.dtype) and not column.hasnans:
        unsigned64 = pt.is_unsigned_integer_dtype(column.dtype) and np.dtype(column.dtype.numpy_dtype
                                                                             if hasattr(column.dtype, "numpy_dtype")
                                                                             else column.dtype).itemsize == 8
        return np.float64 if unsigned64 else np.int64  # uint64 past 2⁶³ would wrap in int64
    return np.float64


def _text_codes(column, attribute: Attribute) -> np.ndarray:
    import pyarrow as pa
    try:  # Arrow's hash lookup is fast for strings; a column of mixed objects falls back to pandas
        arr = pa.array(column, from_pandas=True)
    except (pa.ArrowException, TypeError, ValueError):
        import pandas as pd
        return pd.Index(list(attribute.categories), dtype=object).get_indexer(column.to_numpy(dtype=object))
    return _arrow_text_codes(arr, attribute)


def _arrow_text_codes(arr, attribute: Attribute) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.compute as pc
    if pa.types.is_null(arr.type):
        return np.full(len(arr), -1, dtype=np.int64)
    found = pc.index_in(arr, value_set=pa.array(attribute.categories, type=pa.string()))
    return found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def _number_codes(x: np.ndarray, attribute: Attribute) -> np.ndarray:
    """Numeric categories by equality (sorted lookup), or bins by np.searchsorted (domain module's rule)."""
    if attribute.kind == "bins":
        e = np.asarray(attribute.edges)
        k = len(e) - 1
        xf = x.astype(np.float64, copy=False)
        j = np.searchsorted(e, xf, side="right") - 1  # e_j ≤ x < e_{j+1}; NaN sorts last: j = k
        j[(j == k) & (xf == e[-1])] = k - 1  # the last bin is closed on the right
        j[(j < 0) | (j >= k)] = -1
        return j.astype(np.int64, copy=False)
    if x.dtype == np.uint64:  # int64 arithmetic would wrap values ≥ 2⁶³ onto small categories
        x = x.astype(np.float64)
    cats = attribute.categories
    integral = all(float(c).is_integer() and abs(c) < 2**62 for c in cats)
    lo, hi = (int(min(cats)), int(max(cats))) if integral else (0, -1)
    if integral and hi - lo < max(1 << 16, 64 * len(cats)):  # small integer categories: a lookup table
        lut = np.full(hi - lo + 2, -1, dtype=np.int64)  # the extra last entry catches everything outside
        lut[np.asarray(cats, dtype=np.int64) - lo] = np.arange(len(cats))
        if x.dtype.kind in "iub":
            k = x.astype(np.int64, copy=False) - lo
        else:  # a float is a category only when it is an integer in range (NaN is not)
            with np.errstate(invalid="ignore"):
                ok = (x >= lo) & (x <= hi) & (np.floor(x) == x)
            k = np.where(ok, x, hi + 1).astype(np.int64) - lo
        k[(k < 0) | (k > hi - lo)] = hi - lo + 1
        return lut[k]
    ref = np.array(cats, dtype=np.int64 if (x.dtype.kind in "iub" and integral) else np.float64)
    if x.dtype.kind in "iub" and not integral:
        x = x.astype(np.float64)
    elif x.dtype.kind == "f" and ref.dtype.kind == "i":
        ref = ref.astype(np.float64)
    order = np.argsort(ref, kind="stable")
    srt = ref[order]
    j = np.minimum(np.searchsorted(srt, x), len(srt) - 1)
    return np.where(srt[j] == x, order[j], -1).astype(np.int64, copy=False)  # NaN never equals
