"""Marginal counts of a DuckDB relation (``con.table(name)``, ``duckdb.read_parquet(path)``, ``con.sql(...)``),
computed by one GROUP BY GROUPING SETS query inside DuckDB.

Notation: see README and :mod:`mmopt.records.engines`. Every attribute's cell code is a SQL ``CASE`` — bins by
comparisons of CAST(x AS DOUBLE) with the edges, string categories by a hashed IN and a cast to an ENUM of them (O(1)
per record), numeric categories by equality with the column's few candidate raw values (text under a numeric
attribute by an ENUM of its in-domain texts), coded by mmopt — records with
any code −1 are filtered out, and the groups of maximal sets are the grouping sets of one aggregate query, so
DuckDB reads the records once. Literals are typed casts of exact text (``CAST('0.1' AS DOUBLE)`` is the
float64 nearest 0.1, as Python's ``repr`` round-trips), so the integers equal those of the pandas, Parquet and
Dask paths exactly (tests/test_records_engines.py).
"""

from __future__ import annotations

import math

import numpy as np

from mmopt.records import engines as eg
from mmopt.records import read as rd
from mmopt.records._text_values import warn_near_misses
from mmopt.records.domain import Attribute, Domain
from mmopt.structured.residual import closure as cl

_TEXT = {"varchar", "enum", "char", "string", "text", "null", "sqlnull"}
_NUMBER = {"tinyint", "smallint", "integer", "bigint", "hugeint", "utinyint", "usmallint", "uinteger", "ubigint",
           "uhugeint", "float", "double", "decimal"}
_VIEW = "mmopt_records"

def _duckdb():
    try:
        import duckdb
    except ImportError:
        raise ImportError("Counting records with DuckDB needs duckdb. Install it with: pip install duckdb "
                          "(from a checkout: pip install -e '.[duckdb]')") from None
    return duckdb


def duckdb_kind(typ) -> str:
    """"text", "number", "bool" or the type's name, for a DuckDB column type."""
    name = str(getattr(typ, "id", typ)).lower()
    if name in _TEXT:
        return "text"
    if name == "boolean":
        return "bool"
    return "number" if name in _NUMBER else str(typ)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _text(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def check(records, domain: Domain, *, caller: str, name: str = "records"):
    """The relation, after the schema checks (missing or duplicate column, a type that cannot hold values)."""
    cols = list(records.columns)
    rd.check_unique_columns(cols, domain, caller, name)
    _refuse_case_twins(cols, domain, caller, name)
    rd.check_schema({c: duckdb_kind(t) for c, t in zip(cols, records.types, strict=True)}, domain, caller=caller,
                    name=name)
    return records


def _refuse_case_twins(cols, domain: Domain, caller: str, name: str = "records") -> None:
    """DuckDB matches "sex" to Sex too: of columns Sex and sex it counted Sex (a helper's audit); a file's second
    one it renames sex_1, and the refusal said 'no column sex' (a review). Refused, naming both."""
    for a in domain.names:
        if a in cols and (twins := [c for c in cols if c != a and str(c).lower() == a.lower()]):
            raise ValueError(f"The '{name}' parameter of {caller} has columns {a!r} and {twins[0]!r}, which DuckDB "
                             "cannot tell apart (it matches names ignoring case). Rename or drop one.")


def _literal(value, typ) -> str:
    """``value`` (a Python value read back from a column of type ``typ``) as an exact SQL literal of that type."""
    if isinstance(value, str):
        return f"CAST({_text(value)} AS VARCHAR)"
    if isinstance(value, float):
        text = repr(value) if math.isfinite(value) else ("inf" if value > 0 else "-inf")
    elif isinstance(value, bool):
        text = "true" if value else "false"
    else:  # int, Decimal
        text = str(value)
    return f"CAST({_text(text)} AS {typ})"


def _search(x: str, bounds: list[str], lo: int, hi: int, leaf) -> str:
    """A CASE that finds the j ∈ [lo, hi] with bounds[j] ≤ x < bounds[j+1] in ⌈log₂(hi − lo + 1)⌉ comparisons
    (DuckDB evaluates a CASE branch only on the rows that reach it), then ``leaf(j)``."""
    if lo == hi:
        return leaf(lo)
    mid = (lo + hi + 1) // 2
    return f"CASE WHEN {x} >= {bounds[mid]} THEN {_search(x, bounds, mid, hi, leaf)} " \
           f"ELSE {_search(x, bounds, lo, mid - 1, leaf)} END"


def _bins(x: str, attribute: Attribute) -> str:
    """e_j ≤ x < e_{j+1} (the last bin closed) on CAST(x AS DOUBLE); DuckDB orders NaN above +inf: test it first.

    NaN is tested twice: DuckDB 2.0 folds isnan(x) to false, and x > e_k too, when a Parquet file's min/max
    statistics (which leave NaN out, as the format says) exclude them; isfinite(x) it evaluates.
    """
    xf = f"CAST({x} AS DOUBLE)"
    e = [_literal(v, "DOUBLE") for v in attribute.edges]
    inside = _search(xf, e, 0, len(e) - 2, str)
    nan = f"isnan({xf}) OR NOT (isfinite({xf}) OR isinf({xf}))"
    return f"CASE WHEN {xf} IS NULL OR {nan} OR {xf} < {e[0]} OR {xf} > {e[-1]} THEN -1 ELSE {inside} END"


def _map(key: str, raw: list, code: list[int], typ, *, ordered: bool, otherwise: int = -1) -> str:
    """code[j] where key = raw[j], else ``otherwise``: a binary search over the sorted values when they are
    numbers."""
    if not raw:
        return str(otherwise)
    if not ordered:
        return _enum(key, raw, code, otherwise)
    pairs = sorted(zip(raw, code, strict=True), key=lambda p: p[0])
    lits = [_literal(v, typ) for v, _ in pairs]
    return _search(key, lits, 0, len(lits) - 1,
                   lambda j: f"CASE WHEN {key} = {lits[j]} THEN {pairs[j][1]} ELSE {otherwise} END")


def _enum(key: str, raw: list[str], code: list[int], otherwise) -> str:
    """code[j] where the text ``key`` equals raw[j] byte for byte (distinct texts), else ``otherwise``: a hashed
    ``IN`` over ``raw`` first, then a cast to an ENUM of ``raw`` (byte for byte under any collation; the IN only
    skips the cast). A CASE of one WHEN per text compares each record with every one (2,000 categories × 200,000
    records: 0.9 CPU s; this 0.04 s, 100,000 categories 1.4 s); the ENUM cast alone (cedd52a, reverted in 4c6681e)
    paid O(categories) on each record outside them under DuckDB 2.0 (15 s) — a timing signal the IN removes."""
    if not raw:
        return str(otherwise)
    texts = ", ".join(_text(v) for v in raw)
    j = f"CAST(enum_code(TRY_CAST({key} AS ENUM({texts}))) AS INTEGER)"
    hit = j if list(code) == list(range(len(raw))) else f"([{', '.join(str(int(c)) for c in code)}])[{j} + 1]"
    return f"CASE WHEN {key} IN ({texts}) THEN COALESCE({hit}, {otherwise}) ELSE {otherwise} END"


def _text_key(x: str) -> str:
    """A column as text compared byte for byte: a column (or the connection's default) collated NOCASE merged 'CA'
    and 'ca' in DuckDB's = and DISTINCT, 1,000 counted where pandas counts 500 (a helper's probe)."""
    return f'(CAST({x} AS VARCHAR) COLLATE "binary")'


def codes(rel, domain: Domain, *, caller: str) -> list[str]:
    """One INTEGER code expression (SQL) per attribute; the candidate values are read first. A candidate value
    the first read did not list is coded ``eg.UNSEEN`` (the relation changed between reads: :func:`counts`
    refuses it)."""
    out = []
    types = dict(zip(rel.columns, rel.types, strict=True))
    for a in domain.attributes:
        x, typ, kind = _quote(a.name), types[a.name], duckdb_kind(types[a.name])
        if a.kind == "text":  # a text outside the categories is eg.DROPPED, a missing value −1
            mapped = _map(_text_key(x), list(a.categories), list(range(a.size)), "VARCHAR", ordered=False,
                          otherwise=eg.DROPPED)
            out.append(f"CASE WHEN {x} IS NULL THEN -1 ELSE {mapped} END")
            continue
        if a.kind == "bins" and kind != "text":
            out.append(_bins(x, a))
            continue
        if a.kind == "bins":
            out.append(_text_bins(rel, x, a, caller))
            continue
        wide = str(getattr(typ, "id", typ)).lower() in ("hugeint", "uhugeint")
        if kind == "text" or wide:  # 128-bit integers as their exact text (parsed as integers, as CSV cells):
            # through DOUBLE, 2⁵³ + 1 was counted as the category 2⁵³
            key, typ, ok, kind = _text_key(x), "VARCHAR", f"{x} IS NOT NULL", "text"
        else:
            key = x  # DuckDB's DISTINCT and = both take -0.0 for 0.0, as every mmopt rule does
            ok = f"CAST({x} AS DOUBLE) IN ({', '.join(_literal(v, 'DOUBLE') for v in eg.candidates(a))})"
        found = _run(rel, f"SELECT DISTINCT CAST({key} AS {typ}) AS v FROM {_VIEW} WHERE {ok}", caller, arrow=True)
        if kind == "text":
            # every distinct text is a candidate: a CASE over all of them took 39 s for 50,000 texts out of the
            # domain (0.2 s over the in-domain ones), so text keeps its in-domain map and no UNSEEN check (the
            # records module docstring says so)
            raw, code = eg.lookup(found.column("v"), a)
            out.append(_map(f"CAST({key} AS {typ})", raw, code, typ, ordered=False))
            continue
        raw, code = eg.all_codes(found.column("v"), a)  # out of domain too: −1, listed (not UNSEEN)
        mapped = _map(f"CAST({key} AS {typ})", raw, code, typ, ordered=True, otherwise=eg.UNSEEN)
        out.append(f"CASE WHEN ({ok}) IS NOT TRUE THEN -1 ELSE {mapped} END")
    return out


def _text_bins(rel, x: str, attribute: Attribute, caller: str) -> str:
    """Bins of a text column (a CSV's numbers): DuckDB's TRY_CAST to DOUBLE binned in SQL, checked against mmopt's
    own parse of every distinct text (:func:`mmopt.records.values.codes`), the texts where the two differ mapped
    explicitly. A CASE over every distinct text took 181 s for 200,000 of them (0.3 s in pandas; a helper's probe)."""
    key = _text_key(x)
    guess = _bins(f"TRY_CAST({key} AS DOUBLE)", attribute)
    found = _run(rel, f"SELECT DISTINCT {key} AS v, {guess} AS c FROM {_VIEW} WHERE {x} IS NOT NULL", caller,
                 arrow=True)
    raw, code = eg.all_codes(found.column("v"), attribute)
    differ = np.flatnonzero(np.asarray(found.column("c").to_numpy(zero_copy_only=False)) != code)
    if not differ.size:
        return guess
    return _enum(key, [raw[j] for j in differ], [code[j] for j in differ], guess)


def _run(rel, sql: str, caller: str, *, arrow: bool = False):
    """The result of ``sql`` on the relation (named mmopt_records): an Arrow table, or a dict of numpy arrays."""
    duckdb = _duckdb()
    try:
        got = rel.query(_VIEW, sql)
        if not arrow:
            return got.fetchnumpy()
        return got.to_arrow_table() if hasattr(got, "to_arrow_table") else got.fetch_arrow_table()
    except duckdb.InterruptException:  # Ctrl-C inside the query (a duckdb.Error): an interrupt, not a failed read
        raise KeyboardInterrupt from None
    except duckdb.Error as exc:
        raise ValueError(f"{caller}: reading the records failed (before any noise was drawn): "
                         f"{eg.said(exc, 'DuckDB', _REMEDY)}") from None


_REMEDY = ("Fetch the relation yourself (rel.fetchall()) to see it; a path is read by the default engine with "
           "engine='pyarrow'.")
_PATH_REMEDY = "Read it with engine='pyarrow' (the default), or read it with DuckDB yourself to see where."


def counts(rel, domain: Domain, top, *, caller: str) -> dict:
    """{A: flat int64 counts} for the maximal sets ``top``, by one GROUP BY GROUPING SETS query.

    ``rel`` is a relation, or the (connection, relation) of :func:`mmopt.records.duckdb_files.open_path`.
    """
    con, rel = rel if isinstance(rel, tuple) else (None, rel)  # noqa: F841 - con keeps rel's connection open
    shape = domain.shape
    names = [f"c{i}" for i in range(len(shape))]
    exprs = codes(rel, domain, caller=caller)
    coded = ", ".join(f"CAST({e} AS INTEGER) AS {n}" for e, n in zip(exprs, names, strict=True))
    plan = eg.groups(top, shape)
    keys = [" + ".join(f"CAST({names[i]} AS BIGINT) * {st}" for i, st in zip(U, eg.strides(U, shape), strict=True))
            or "CAST(0 AS BIGINT)" for U, _ in plan]  # one BIGINT key per group: hashing one column beats |U|
    ks = [f"k{g}" for g in range(len(plan))]
    # each grouping set leaves every other key NULL (a key is never NULL: codes are filtered to ≥ 0), so the set of
    # a row is its first non-NULL key — not GROUPING(k0, …), which DuckDB refuses past 63 arguments (66 pairs of 12
    # attributes of 170 categories, each pair its own group, failed; a helper's probe)
    which = " ".join(f"WHEN {k} IS NOT NULL THEN {g}" for g, k in enumerate(ks))
    # a record whose value the candidates' read did not list keeps the key −1 in every set, so the one query that
    # counts is the one that says so (eg.refuse_unseen)
    unseen = " OR ".join(f"{n} = {eg.UNSEEN}" for n in names)
    # a text outside its categories is kept under the key eg.DROPPED: the query says whether one was
    dropped = " OR ".join(f"{n} = {eg.DROPPED}" for n, a in zip(names, domain.attributes, strict=True)
                          if a.kind == "text")
    # one test per column (a text column's IN both codes): "OR c0 = -2 … OR c0 = -3" made the query 20–40 % slower on
    # records with no dropped text (a helper's timing, 4·10⁶ rows)
    either = " OR ".join(f"{n} IN ({eg.UNSEEN}, {eg.DROPPED})" if a.kind == "text" else f"{n} = {eg.UNSEEN}"
                         for n, a in zip(names, domain.attributes, strict=True))
    keep = f"({' AND '.join(f'{n} >= 0' for n in names)}) OR {either}"
    also = f" WHEN {dropped} THEN CAST({eg.DROPPED} AS BIGINT)" if dropped else ""
    keys = [f"CASE WHEN {unseen} THEN CAST(-1 AS BIGINT){also} ELSE {e} END" for e in keys]
    sql = (f"SELECT CASE {which} END AS g, COALESCE({', '.join(ks)}) AS k, n FROM "
           f"(SELECT {', '.join(ks)}, count(*) AS n FROM "
           f"(SELECT {', '.join(f'{e} AS {k}' for e, k in zip(keys, ks, strict=True))} FROM "
           f"(SELECT {coded} FROM {_VIEW}) WHERE {keep}) "
           f"GROUP BY GROUPING SETS ({', '.join(f'({k})' for k in ks)}))")
    got = _run(rel, sql, caller)
    g, key, n = (np.asarray(got[c]) for c in ("g", "k", "n"))
    eg.refuse_unseen(key, caller, "DuckDB relation", "con.sql(...).create('t'), then count con.table('t')")
    flat = {A: np.zeros(cl.cells(shape, A), dtype=np.int64) for A in top}
    for j, (U, members) in enumerate(plan):
        rows = g == j
        eg.add_groups(flat, U, members, key[rows], n[rows], shape)
    if dropped and eg.dropped(key[g == 0], n[g == 0]):  # only now the dropped texts, for the near misses
        _warn_near_misses(rel, domain, exprs, caller)
    return flat


def _warn_near_misses(rel, domain: Domain, exprs: list[str], caller: str) -> None:
    """The near-miss DataWarnings (:func:`mmopt.records._text_values.warn_near_misses`) from one query per string
    attribute, of its distinct dropped texts. It reads the relation once more, and a relation that can be read once
    (``con.from_arrow(reader)``) failed there: one record outside the domain stopped a count that the same records
    without it finished (a helper's probe). Its failure, after the counts, skips the warnings and nothing else (a
    Ctrl-C still stops: :func:`_run` raises it as KeyboardInterrupt, not as a failed read)."""
    texts = []
    for a, e in zip(domain.attributes, exprs, strict=True):
        if a.kind == "text":
            try:
                found = _run(rel, f"SELECT DISTINCT {_text_key(_quote(a.name))} AS v FROM {_VIEW} WHERE ({e}) = "
                                  f"{eg.DROPPED}", caller, arrow=True)
            except ValueError:  # _run's failed read: a diagnostic, whether the count finishes must not depend on it
                return
            texts.append((found.column("v").to_pylist(), a))
    for found, a in texts:
        warn_near_misses(found, a)
