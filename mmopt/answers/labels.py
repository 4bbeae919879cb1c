"""Query labels a person can read: which table (term) a query belongs to and what it asks of each attribute.

Notation: see README; cells are numbered from 0 on every attribute. A query ⊗ᵢ rᵢ of a term is described
attribute by attribute from the row rᵢ of that attribute's factor:

* ``identity(n)``, row r (cell r): ``"r"``;
* ``total(n)`` (every cell): ``"*"``;
* ``prefix(n)``, row r (cells 0 … r): ``"≤ r"``;
* ``all_range(n)``, cells a … b (row-major, a ≤ b): ``"[a, b]"``;
* ``all_predicate(n)``, row r (the cells of the bits of r + 1): ``"{i, j, …}"``;
* an explicit matrix: a census label (:func:`mmopt.structured.census.row_labels`); else, for a row that is
  constant c on its cells, ``"r"`` (one cell), ``"*"`` (all), ``"[a, b]"`` (an interval), ``"{i, j, …}"``
  (at most eight cells) or ``"{k cells}"``, prefixed ``"c×"`` when c ≠ 1; any other row is ``"row r"``.

Labels are made for blocks of rows (:meth:`~mmopt.answers.layout.Layout.chunks`), never for all m queries
at once: a factor's own descriptions (mᵢ strings) are listed once when mᵢ ≤ 10⁶ and indexed, larger
factors (all ranges past n = 1,413, all predicates past n = 19) are described row by row per block.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from mmopt.answers.grouping import hierarchy_union
from mmopt.answers.layout import DEFAULT_CHUNK_ROWS, Chunk, Layout, layout_of, range_ends
from mmopt.structured import census

_LIST_LIMIT = 10**6  # a factor's descriptions are listed once up to this many rows
_SET_LIMIT = 8       # a 0/1 row with more cells than this (and not an interval) is "{k cells}"


@dataclass(frozen=True)
class LabelChunk:
    """Labels of rows ``start`` … ``stop − 1``: ``term`` (index), ``table`` (term name), ``columns`` (one
    object array of descriptions per attribute, by attribute name) and ``weight`` (the term's)."""

    start: int
    stop: int
    term: int
    table: str
    weight: float
    columns: dict


class Labeller:
    """Descriptions of factor rows, each factor's listed once (when small) and reused across blocks."""

    def __init__(self) -> None:
        self._lists: dict[int, tuple[object, np.ndarray]] = {}

    def listed(self, W) -> np.ndarray | None:
        """All of W's descriptions (object array, row order) when it has at most 10⁶ rows, else None."""
        if W.n_queries > _LIST_LIMIT:
            return None
        key = id(W)
        if key not in self._lists:
            self._lists[key] = (W, describe(W, np.arange(W.n_queries)))  # keep W alive: ids stay unique
        return self._lists[key][1]

    def factor(self, W, rows: np.ndarray) -> np.ndarray:
        """Object array of the descriptions of ``rows`` of the one-attribute workload W."""
        full = self.listed(W)
        return full[rows] if full is not None else describe(W, rows)

    def chunk(self, layout: Layout, c: Chunk) -> LabelChunk:
        t = layout.terms[c.term]
        idx = np.unravel_index(np.arange(c.local, c.local + c.stop - c.start, dtype=np.int64), t.grid)
        cols = {a: self.factor(f, r) for a, f, r in zip(layout.attributes, t.factors, idx, strict=True)}
        return LabelChunk(c.start, c.stop, c.term, t.name, t.weight, cols)


def iter_labels(workload, *, chunk_rows: int = DEFAULT_CHUNK_ROWS, attributes=None, terms=None
                ) -> Iterator[LabelChunk]:
    """The labels of every query, in the workload's row order, as blocks of at most ``chunk_rows`` rows.

    Examples
    --------
    >>> from mmopt import workload as wl
    >>> [c.columns["a0"].tolist() for c in iter_labels(wl.all_range(3), chunk_rows=4)]
    [['[0, 0]', '[0, 1]', '[0, 2]', '[1, 1]'], ['[1, 2]', '[2, 2]']]
    """
    layout = workload
    if not isinstance(workload, Layout):  # grouping sets (answers_table's rows) as their union, as answers_table does
        workload, attributes, terms = hierarchy_union(workload, attributes, terms, "iter_labels")
        layout = layout_of(workload, attributes=attributes, terms=terms, caller="iter_labels")
    labeller = Labeller()
    for c in layout.chunks(_check_rows(chunk_rows, "iter_labels")):
        yield labeller.chunk(layout, c)


def query_label(workload, i: int, *, attributes=None, terms=None) -> dict:
    """The label record of query ``i``: {"query", "term", "table", one entry per attribute, "weight"}.

    Examples
    --------
    >>> from mmopt import workload as wl
    >>> query_label(wl.sf1(), 4150)
    {'query': 4150, 'term': 32, 'table': 'PCT12A-O', 'sex': '*', 'hispanic': 'not hispanic (1)', \
'race': 'two or more race flags, or none', 'age': '*', 'weight': 1.0}
    """
    workload, attributes, terms = hierarchy_union(workload, attributes, terms, "query_label")
    layout = layout_of(workload, attributes=attributes, terms=terms, caller="query_label")
    m = layout.n_queries
    if isinstance(i, bool) or not isinstance(i, int | np.integer) or not 0 <= i < m:
        raise ValueError(f"The 'i' parameter of query_label must be a query index in [0, {m}). Got {i!r}.")
    j, r = layout.locate(int(i))
    t = layout.terms[j]
    idx = np.unravel_index(r, t.grid)
    record = {"query": int(i), "term": j, "table": t.name}
    record.update({a: str(describe(f, np.array([k]))[0]) for a, f, k in zip(layout.attributes, t.factors, idx,
                                                                           strict=True)})
    record["weight"] = t.weight
    return record


def describe(W, rows: np.ndarray) -> np.ndarray:
    """Object array of the descriptions of ``rows`` of a one-attribute workload (module docstring)."""
    rows = np.asarray(rows, dtype=np.int64)
    custom = census.row_labels(W)
    if custom is not None:
        return np.asarray(custom, dtype=object)[rows]
    n = W.domain_size
    if W.matrix is None:
        fam = W.family
        if fam == "identity":
            return rows.astype(str).astype(object)
        if fam == "total":
            return np.full(rows.shape, "*", dtype=object)
        if fam == "prefix":
            return np.char.add("≤ ", rows.astype(str)).astype(object)
        if fam == "all_range":
            a, b = range_ends(n, rows)
            return _interval(a, b)
        if fam == "all_predicate":
            return np.array([_set(np.flatnonzero((code >> np.arange(n)) & 1), n) for code in (rows + 1).tolist()],
                            dtype=object)
        raise ValueError(f"describe: workload '{W.name}' is Gram-only; its queries are unknown.")
    return np.array([_row(W.matrix[r], r) for r in rows.tolist()], dtype=object)


def _interval(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    s = np.char
    return s.add(s.add(s.add(s.add("[", a.astype(str)), ", "), b.astype(str)), "]").astype(object)


def _set(cells: np.ndarray, n: int) -> str:
    k = cells.size
    if k == n:
        return "*"
    if k == 1:
        return str(int(cells[0]))
    if k and cells[-1] - cells[0] == k - 1:
        return f"[{int(cells[0])}, {int(cells[-1])}]"
    if k <= _SET_LIMIT:
        return "{" + ", ".join(str(int(c)) for c in cells) + "}"
    return f"{{{k} cells}}"


def _row(row: np.ndarray, r: int) -> str:
    cells = np.flatnonzero(row)
    if cells.size == 0:
        return "{}"  # no cell: "0" would read as cell 0
    values = row[cells]
    c = float(values[0])
    if not np.all(values == c):
        return f"row {r}"
    base = _set(cells, row.size)
    # repr: the shortest exact form (":g" gave 0.1234567 and 0.1234568 one label), without a trailing ".0"
    return base if c == 1.0 else f"{repr(c).removesuffix('.0')}×{base}"


def _check_rows(chunk_rows, caller: str) -> int:
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int | np.integer) or chunk_rows < 1:
        raise ValueError(f"The 'chunk_rows' parameter of {caller} must be an int >= 1. Got {chunk_rows!r}.")
    return int(chunk_rows)


__all__ = ["LabelChunk", "Labeller", "describe", "iter_labels", "query_label"]
