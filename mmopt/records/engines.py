"""What the Polars and DuckDB engines share: which sets to group together, which raw values can be a category,
and how grouped code tuples become marginal counts.

Notation: see README and :mod:`mmopt.records.counts`. An engine computes each attribute's cell code c_{r,i}
inside the engine (never collecting the rows), drops every record with a code −1 in *any* domain attribute (the
domain's drop rule), and groups the kept records by the codes of a set U of attributes; the marginal on A ⊆ U is
then m_A[ι] = Σ_{groups g with index ι on A} n_g, the same integers as one bincount over the records.

**The codes are mmopt's own.** A bin edge test is an IEEE comparison of float64(x) (the cast mmopt's
:func:`numpy.searchsorted` makes), so an engine computes it exactly. A numeric category is not one comparison
(integers compare exactly, a fraction in float32 by the float32 rounding of the category, …:
:mod:`mmopt.records.values`), so the engine first lists the distinct raw values that *could* be a category —
float64(x) ∈ {float64(c), float64(float32(c)), float64(float16(c))}, a superset of every value mmopt keeps, of
at most a few values per category — and mmopt codes those with :func:`mmopt.records.values.codes`, as on an
Arrow column of a Parquet file; the engine then maps raw values to codes by equality. A text column under a
numeric attribute is coded per distinct value the same way (parsed as the Parquet/CSV path parses text).

**The records are read twice** there (the candidates, then the counts), so they must be the same records both
times. A relation that draws anew on each read (DuckDB's ``USING SAMPLE``, ``random()``; Polars' ``sample``,
``shuffle``) lists some values in the first read that the second does not see and misses values the second has:
those records were dropped as out of domain — 100 sampled records counted as 8 — and whether one record's value
was listed decided how many others counted. A candidate value the first read did not list is coded ``UNSEEN``,
and the count refuses the records (:func:`refuse_unseen`) with the remedy: materialise them once, then count.
Not checked: a text column under numeric categories in DuckDB (every distinct text is a candidate there, and a
CASE over all of them was 200× slower; its map keeps the in-domain texts), so such a relation must be deterministic.
"""

from __future__ import annotations

import numpy as np

from mmopt.records import values as _values
from mmopt.records.domain import Attribute
from mmopt.structured.residual import closure as cl

#: The union U of a group of sets is grouped in one query when it has at most this many cells: the result has
#: at most min(∏_{i∈U} nᵢ, records) rows, 16 bytes each in the engine's hash table.
GROUP_CELLS = 1 << 22


#: The code of a candidate value (one that could be a category) that the candidates' read did not list.
UNSEEN = -2
#: The code (Polars, DuckDB) of a text that is neither missing nor a category of its string attribute: its record is
#: dropped as for any code < 0, but grouped under this key rather than filtered out, so the count says whether a text
#: was, and only then are the dropped texts listed (one more pass) for
#: :func:`mmopt.records._text_values.warn_near_misses` ("f" under the category "F").
DROPPED = -3


def refuse_unseen(keys, caller: str, what: str, remedy: str) -> None:
    """ValueError when a group's key is −1: records whose value the candidates' read did not list (module
    docstring), so the records changed between the two reads."""
    if np.any(np.asarray(keys) == -1):
        raise ValueError(f"{caller}: the {what} gave different records on two reads (a value the first read did not "
                         "list was counted by the second): it draws anew on each read (a sample, random(), "
                         "shuffle), and mmopt reads numeric categories twice. Materialise the records once and count "
                         f"those: {remedy}. Nothing was counted or released.")


#: Engine exceptions whose messages quote no record (names of columns and tables, memory, an interrupt): passed on.
#: Any other is withheld: DuckDB's "Could not convert string 'Jane Doe' to INT32", a CSV error's "Original Line",
#: Polars' "failed … for 1 out of 23299 values: ["Jane Doe"]" reached the user, and one record decided it (a
#: helper's audit; the pyarrow path withholds its parse errors alike, mmopt.records._csv._said).
RECORD_FREE = ("OutOfMemoryException", "InterruptException", "CatalogException", "BinderException",
               "ColumnNotFoundError", "OutOfMemoryError")


def said(exc, engine: str, remedy: str) -> str:
    """The engine's message if its class is :data:`RECORD_FREE`, else its class and ``remedy``."""
    if type(exc).__name__ in RECORD_FREE:
        return str(exc)
    return f"{type(exc).__name__} ({engine}'s message is withheld: it can quote a record). {remedy}"


def is_polars(records) -> bool:
    """A polars LazyFrame or DataFrame (checked without importing Polars)."""
    return type(records).__module__.startswith("polars") and type(records).__name__ in ("LazyFrame", "DataFrame")


def is_duckdb(records) -> bool:
    """A DuckDB relation, e.g. ``con.table("people")`` (checked without importing DuckDB)."""
    return (type(records).__module__.split(".")[0] in ("duckdb", "_duckdb")
            and type(records).__name__ == "DuckDBPyRelation")


def groups(top, shape: tuple[int, ...], limit: int = GROUP_CELLS) -> list[tuple[tuple[int, ...], list]]:
    """[(U, sets)]: the maximal sets ``top`` packed greedily into unions U of at most ``limit`` cells.

    One query per U (a set larger than ``limit`` alone in its own) instead of one per set: the 28 pairs of 8
    attributes of sizes ≤ 12 are one group-by over all 8 codes.
    """
    out: list[tuple[set, list]] = []
    for A in sorted(top, key=lambda S: -cl.cells(shape, S)):
        for U, members in out:
            if cl.cells(shape, tuple(U | set(A))) <= limit:
                U.update(A)
                members.append(A)
                break
        else:
            out.append((set(A), [A]))
    return [(tuple(sorted(U)), members) for U, members in out]


def candidates(attribute: Attribute) -> list[float]:
    """The float64 values that a raw value of a numeric-category attribute can have when mmopt keeps it (a
    superset: :func:`lookup` and :func:`all_codes` code what the engine returns).

    mmopt keeps x for category c when x = c exactly, or (x not a whole number) x = float32(c) or float16(c)
    (:func:`mmopt.records._number_values._float_codes`): in every case float64(x) is c or one of its roundings.
    """
    out = set()
    for c in attribute.categories:
        out.add(float(c) + 0.0)
        with np.errstate(over="ignore"):  # past a type's range: ±inf (matched by nothing but inf itself)
            out.update(float(narrow(c)) + 0.0 for narrow in (np.float32, np.float16))
    return sorted(out)


def lookup(distinct, attribute: Attribute) -> tuple[list, list[int]]:
    """(raw values, their codes ≥ 0) of ``distinct`` (an Arrow array of a column's distinct raw values).

    The codes are :func:`mmopt.records.values.codes` of the Arrow array, as for a Parquet or CSV column.
    """
    import pyarrow as pa
    distinct = _plain(distinct)
    if len(distinct) == 0:
        return [], []
    codes = _values.codes(distinct, attribute)
    keep = np.flatnonzero(codes >= 0)
    return distinct.take(pa.array(keep)).to_pylist(), codes[keep].tolist()


def all_codes(distinct, attribute: Attribute) -> tuple[list, np.ndarray]:
    """(raw values, their codes, −1 for a value outside the domain) of ``distinct``, every value kept."""
    distinct = _plain(distinct)
    if len(distinct) == 0:
        return [], np.zeros(0, dtype=np.int64)
    return distinct.to_pylist(), _values.codes(distinct, attribute)


def _plain(distinct):
    """One Arrow array, string views as large strings (what :func:`mmopt.records.values.codes` reads)."""
    import pyarrow as pa
    if pa.types.is_string_view(distinct.type):
        distinct = distinct.cast(pa.large_string())
    if isinstance(distinct, pa.ChunkedArray):
        distinct = distinct.combine_chunks()
    return distinct


def dropped(keys, n) -> int:
    """How many records the group-by keys ``keys`` put under :data:`DROPPED` (their counts ``n``)."""
    return int(np.asarray(n, dtype=np.int64)[np.asarray(keys) == DROPPED].sum())


def strides(U: tuple[int, ...], shape) -> list[int]:
    """C-order strides of the union U: the engine groups by one int64 key κ = Σ_{i∈U} c_i·stride_i."""
    out, step = [], 1
    for i in reversed(U):
        out.append(step)
        step *= shape[i]
    return out[::-1]


def add_groups(flat: dict, U: tuple[int, ...], members, keys, n, shape) -> None:
    """flat[A] += the counts n of the groups with keys κ (:func:`strides` of U), for every A of ``members``.

    The codes are c_i = ⌊κ / stride_i⌋ mod n_i. Sums run through bincount's float64 weights, exact while the
    total is below 2⁵³ records; past that np.add.at adds in int64.
    """
    n = np.asarray(n, dtype=np.int64)
    keys = np.asarray(keys, dtype=np.int64)
    if (keys < 0).any():  # the dropped records' group (:data:`DROPPED`), counted in no cell
        n, keys = n[keys >= 0], keys[keys >= 0]
    code = {i: (keys // st) % shape[i] for i, st in zip(U, strides(U, shape), strict=True)}
    exact = int(n.sum()) < 2**53
    for A in members:
        if not A:
            flat[A] += n.sum(dtype=np.int64)
            continue
        idx = np.zeros(len(n), dtype=np.int64)
        for i in A:
            idx = idx * shape[i] + code[i]
        if exact:
            flat[A] += np.rint(np.bincount(idx, weights=n, minlength=flat[A].size)).astype(np.int64)
        else:  # pragma: no cover - 2⁵³ records
            np.add.at(flat[A], idx, n)
