"""Marginal counts of a Polars LazyFrame (or DataFrame), computed by Polars' streaming engine.

Notation: see README and :mod:`mmopt.records.engines`. Every attribute's cell code is a Polars expression —
bins by comparisons of float64(x) with the edges, string categories by equality, numeric categories (and text
under a numeric attribute) through a map from the column's few candidate raw values to the codes mmopt gives
them — records with any code −1 are filtered out, and each group of maximal sets is one ``group_by`` of the
codes; the rows are streamed (``collect(engine="streaming")``), never collected. The integers equal those of the
pandas, Parquet and Dask paths exactly (tests/test_records_engines.py).
"""

from __future__ import annotations

import numpy as np

from mmopt.records import _csv
from mmopt.records import engines as eg
from mmopt.records import read as rd
from mmopt.records._text_values import warn_near_misses
from mmopt.records.domain import Attribute, Domain
from mmopt.structured.residual import closure as cl


def _polars():
    try:
        import polars as pl
    except ImportError:  # pragma: no cover - only reachable for engine="polars" on a path
        raise ImportError("Counting records with Polars needs polars. Install it with: pip install polars "
                          "(from a checkout: pip install -e '.[polars]')") from None
    return pl


def polars_kind(dtype) -> str:
    """"text", "number", "bool" or the dtype's name, for a Polars dtype."""
    pl = _polars()
    if isinstance(dtype, pl.String | pl.Categorical | pl.Enum | pl.Null):
        return "text"
    if dtype == pl.Boolean:
        return "bool"
    if dtype.is_numeric():
        return "number"
    return str(dtype)


def check(records, domain: Domain, *, caller: str, name: str = "records"):
    """The LazyFrame of ``records`` after the schema checks (missing column, a dtype that cannot hold values)."""
    pl = _polars()
    lf = records.lazy() if isinstance(records, pl.DataFrame) else records
    try:
        schema = lf.collect_schema()
    except pl.exceptions.PolarsError as exc:
        raise ValueError(f"{caller}: cannot read the schema of the records: {exc}") from None
    rd.check_schema({n: polars_kind(t) for n, t in schema.items()}, domain, caller=caller, name=name, frame=True)
    return lf


def open_path(dataset, path, domain: Domain, *, caller: str):
    """A LazyFrame over the files pyarrow found at ``path`` (the same files; CSV cells as text, as pyarrow reads)."""
    import os
    pl = _polars()
    p = os.fspath(path).lower()
    try:
        if p.endswith(rd._CSV):
            _refuse_blank_lines(path, domain, caller)
            _refuse_bare_cr(path, caller)
            if any(a.kind == "text" and any("\ufffd" in c for c in a.categories) for a in domain.attributes):
                raise ValueError(f"{caller}: engine='polars' reads the bytes of a CSV cell that is not UTF-8 as "
                                 "U+FFFD ('\ufffd'), which a category of the domain holds, so such a cell would count "
                                 "there (pyarrow's read drops it). Read the file with engine='pyarrow' (the default).")
            _csv.refuse_ragged_rows(dataset, path, "polars", caller)  # Polars pads a short row with missing values
            nulls = rd.csv_nulls(domain)
            # a cell that is not UTF-8 reads as text that is no category (pyarrow's read: missing; the record is
            # dropped alike), where Polars refused the file: one record decided whether it was counted (an audit)
            return pl.scan_csv(os.fspath(path), infer_schema=False, null_values=nulls, quote_char='"',
                               encoding="utf8-lossy",
                               separator="\t" if p.endswith(".tsv") else ",", **_empty_cells(pl, "" in nulls))
        return pl.scan_parquet(list(dataset.files))
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise ValueError(f"{caller}: cannot read the records at {os.fspath(path)!r}: "
                         f"{eg.said(exc, 'Polars', _PATH_REMEDY)}") from None


def _refuse_bare_cr(path, caller: str) -> None:
    """Refuse a CSV whose lines end in a bare CR (old Mac files): Polars read the file as one line, counting zero
    records, or refused naming its 'columns' — the records' values (a review); pyarrow and DuckDB read CR lines."""
    import os
    with _csv._opener(os.fspath(path))(os.fspath(path), "rb") as f:
        head = f.read(1 << 16)
    line = head.split(b"\n", 1)[0]
    if b"\r" in line[:-1] or (line.endswith(b"\r") and b"\n" not in head):
        raise ValueError(f"{caller}: the CSV {os.fspath(path)!r} ends its lines in a bare CR, which engine='polars' "
                         "does not read as line ends. Read it with engine='pyarrow' (the default).")


def _refuse_blank_lines(path, domain: Domain, caller: str) -> None:
    """Refuse a CSV with a blank line when every attribute declares the category "": Polars reads a blank line as a
    record of empty cells (whichever empty_string_is_null says, and it cannot tell one from a line ",,"), which would
    be counted in the cell ("", …, ""), where pyarrow, DuckDB and pandas skip the line (a helper's probe: a
    one-column file's two blank lines were two records). With any other attribute the record is dropped anyway. The
    scan is of bytes, in blocks; a blank line inside a quoted value is refused too, which errs on the safe side."""
    import os
    if not all(a.kind == "text" and "" in a.categories for a in domain.attributes):
        return
    if _csv.csv_search(path, rb"\n\r?\n", before=b"\n"):  # a blank first line counts as well
        raise ValueError(f"{caller}: the CSV {os.fspath(path)!r} has a blank line, which Polars reads as a "
                         "record of empty cells, and every attribute of the domain declares the category "
                         "\"\", so it would be counted. Read the file with engine='pyarrow' (the default), "
                         "which skips blank lines, or remove them.")


def _empty_cells(pl, missing: bool) -> dict:
    """Polars' option for empty CSV cells: missing unless the domain declares "" a category (pyarrow's reading,
    :func:`mmopt.records.read.csv_nulls`). Polars read them as null whatever null_values said, so a declared ""
    category's records were dropped without a word (a helper's probe). Named empty_string_is_null from Polars 2,
    missing_utf8_is_empty_string (inverted) before."""
    import inspect
    options = inspect.signature(pl.scan_csv).parameters
    if "empty_string_is_null" in options:
        return {"empty_string_is_null": missing}
    return {"missing_utf8_is_empty_string": not missing}


def _bins(x, attribute: Attribute):
    """e_j ≤ x < e_{j+1} (the last bin closed) on float64(x); NaN and null → −1. Polars orders NaN above +inf."""
    pl = _polars()
    e = attribute.edges
    xf = x.cast(pl.Float64)
    inside = sum(((xf >= v).cast(pl.Int32) for v in e[1:-1]), pl.lit(0, dtype=pl.Int32))
    return pl.when(xf.is_null() | xf.is_nan() | (xf < e[0]) | (xf > e[-1])).then(pl.lit(-1, dtype=pl.Int32)) \
        .otherwise(inside)


def _col(schema, name: str):
    """The column ``name`` by its position: pl.col reads '^a$' as a regex (it counted column 'a') and '*' as every
    column (a helper's probe)."""
    return _polars().nth(list(schema.names()).index(name))


def _key(schema, attribute: Attribute, kind: str):
    """(the raw-value expression a map is keyed on, the candidate filter), ``schema`` the frame's."""
    pl = _polars()
    col = _col(schema, attribute.name)
    if kind == "text":
        return col.cast(pl.String), col.is_not_null()
    dtype = schema[attribute.name]
    if dtype.is_float():  # −0.0 + 0.0 = 0.0: one key, one map entry, for the two zeros every mmopt rule codes alike
        col = (col + 0.0).cast(dtype)
    return col, col.cast(pl.Float64).is_in(eg.candidates(attribute))


def _to_arrow(values):
    """A Polars Series of distinct values as an Arrow array; 128-bit integers (which pyarrow cannot import: a raw
    ArrowInvalid "unsupported format string '_pli128'" escaped) as whole-number decimals, compared exactly."""
    pl = _polars()
    if values.dtype in (pl.Int128, pl.UInt128):
        import decimal

        import pyarrow as pa
        whole = [None if x is None else decimal.Decimal(x) for x in values.to_list()]
        return pa.array(whole, type=pa.decimal256(76, 0))
    return values.to_arrow()


#: Up to this many values a map is a chain of ``when(x == v)``: streamed at the speed of a comparison (10⁷
#: strings: 0.7 s, 130 MB), where ``replace_strict`` took 8.6 s and 770 MB in Polars 2.1.
_CHAIN = 256


def _map(key, raw: list, code: list[int], dtype, otherwise: int = -1):
    """The Int32 code of the raw value ``key``: code[j] where key = raw[j] (Polars' ==: -0.0 = 0.0), else
    ``otherwise``."""
    pl = _polars()
    if not raw:
        return pl.lit(otherwise, dtype=pl.Int32)
    if len(raw) > _CHAIN:
        return key.replace_strict(pl.Series(raw, dtype=dtype), pl.Series(code, dtype=pl.Int32), default=otherwise,
                                  return_dtype=pl.Int32)
    chain = pl
    for v, c in zip(raw, code, strict=True):
        chain = chain.when(key == pl.lit(v, dtype=dtype)).then(pl.lit(c, dtype=pl.Int32))
    return chain.otherwise(pl.lit(otherwise, dtype=pl.Int32))


def codes(lf, domain: Domain, *, caller: str) -> list:
    """One Int32 code expression per attribute; the candidate lists are read first, in one streaming pass. A
    candidate value that read did not list is coded ``eg.UNSEEN`` (the frame changed between reads: :func:`counts`
    refuses it)."""
    pl = _polars()
    schema = lf.collect_schema()
    exprs: list = [None] * len(domain.attributes)
    keyed = {}
    for i, a in enumerate(domain.attributes):
        dtype = schema[a.name]
        kind = polars_kind(dtype)
        if a.kind == "text":
            # a Categorical or String column is compared as it is; an Enum only with its own categories (Polars
            # refuses to compare it with any other string, and no such value can be in the column)
            cats = [(c, j) for j, c in enumerate(a.categories)
                    if not isinstance(dtype, pl.Enum) or c in dtype.categories.to_list()]
            key = _col(schema, a.name) if isinstance(dtype, pl.String | pl.Categorical | pl.Enum) \
                else _col(schema, a.name).cast(pl.String)
            exprs[i] = pl.when(key.is_null()).then(pl.lit(-1, dtype=pl.Int32)) \
                .otherwise(_map(key, [c for c, _ in cats], [j for _, j in cats], None, eg.DROPPED))
        elif a.kind == "bins" and kind != "text":
            exprs[i] = _bins(_col(schema, a.name), a)
        else:
            keyed[i] = _key(schema, a, kind)
    queries = [lf.filter(ok).select(key.alias("v")).unique() for key, ok in keyed.values()]
    found = _collect(queries, caller)
    for (i, (key, ok)), frame in zip(keyed.items(), found, strict=True):
        raw, code = eg.all_codes(_to_arrow(frame["v"]), domain.attributes[i])  # out of domain too: −1, listed
        exprs[i] = pl.when(ok.fill_null(False)).then(_map(key, raw, code, frame["v"].dtype, eg.UNSEEN)) \
            .otherwise(pl.lit(-1, dtype=pl.Int32))
    return exprs


def _collect(queries: list, caller: str) -> list:
    pl = _polars()
    if not queries:
        return []
    try:
        return pl.collect_all(queries, engine="streaming")
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise ValueError(f"{caller}: reading the records failed (before any noise was drawn): "
                         f"{eg.said(exc, 'Polars', _REMEDY)}") from None


_REMEDY = ("Collect the LazyFrame yourself (lf.collect()) to see it; a path is read by the default engine with "
           "engine='pyarrow'.")
_PATH_REMEDY = "Read it with engine='pyarrow' (the default), or scan it with Polars yourself to see where."


def counts(lf, domain: Domain, top, *, caller: str) -> dict:
    """{A: flat int64 counts} for the maximal sets ``top`` (sorted tuples), by streaming group-bys."""
    pl = _polars()
    shape = domain.shape
    names = [f"c{i}" for i in range(len(shape))]
    exprs = codes(lf, domain, caller=caller)
    coded = lf.select([e.alias(n) for e, n in zip(exprs, names, strict=True)])
    # a record whose value the candidates' read did not list keeps the key −1: each query (each reads the frame
    # anew) says whether its own read saw one (eg.refuse_unseen)
    unseen = pl.any_horizontal([pl.col(n) == eg.UNSEEN for n in names])
    keep = pl.all_horizontal([pl.col(n) >= 0 for n in names]) | unseen
    # a text outside its categories is kept under the key eg.DROPPED: the count says whether one was
    text = [pl.col(n) == eg.DROPPED for n, a in zip(names, domain.attributes, strict=True) if a.kind == "text"]
    dropped = pl.any_horizontal(text) if text else None
    coded = coded.filter(keep if dropped is None else keep | dropped)
    plan = eg.groups(top, shape)
    queries = []
    for U, _ in plan:  # one int64 key per group: hashing one column beats hashing |U|
        key = sum((pl.col(names[i]).cast(pl.Int64) * st for i, st in zip(U, eg.strides(U, shape), strict=True)),
                  pl.lit(0, dtype=pl.Int64))
        # (not grouped by a bare lit(0) when U is empty: Polars 1.30 grouped by lit(0) wrong)
        chain = pl.when(unseen).then(pl.lit(-1, dtype=pl.Int64))
        if dropped is not None:
            chain = chain.when(dropped).then(pl.lit(eg.DROPPED, dtype=pl.Int64))
        key = chain.otherwise(key)
        queries.append(coded.group_by(key.alias("k")).agg(pl.len().alias("n")))
    flat = {A: np.zeros(cl.cells(shape, A), dtype=np.int64) for A in top}
    frames = _collect(queries, caller)
    for frame in frames:
        eg.refuse_unseen(frame["k"].to_numpy(), caller, "Polars frame", "df = lf.collect(), then count df")
    for (U, members), frame in zip(plan, frames, strict=True):
        eg.add_groups(flat, U, members, frame["k"].to_numpy(), frame["n"].to_numpy(), shape)
    if dropped is not None and eg.dropped(frames[0]["k"].to_numpy(), frames[0]["n"].to_numpy()):
        _warn_near_misses(lf, domain, exprs, caller)
    return flat


def _warn_near_misses(lf, domain: Domain, exprs: list, caller: str) -> None:
    """The near-miss DataWarnings of the string-category attributes (:func:`mmopt.records._text_values.
    warn_near_misses`), from the distinct texts each drops: one more streaming pass, only when a text was dropped."""
    pl = _polars()
    schema = lf.collect_schema()
    text = [i for i, a in enumerate(domain.attributes) if a.kind == "text"]
    queries = []
    for i in text:
        key = _col(schema, domain.attributes[i].name).cast(pl.String)  # the text each code compared
        queries.append(lf.filter(exprs[i] == eg.DROPPED).select(key.alias("v")).unique())
    try:  # a frame that can be read once (an IO source of a generator) failed here, for one record outside the
        frames = _collect(queries, caller)  # domain (a helper's probe): the counts are done, only the warnings skipped
    except Exception:  # a diagnostic: whether the count finishes must not depend on it
        return
    for i, frame in zip(text, frames, strict=True):
        warn_near_misses(frame["v"].to_list(), domain.attributes[i])
