"""Where each query of a workload sits: its term, its row of every factor, and chunks of consecutive rows.

Notation: see README. Every workload mmopt builds lists its queries as terms in order, each term
w·(W₁ ⊗ … ⊗ W_d) in C order of its query grid (m₁, …, m_d): query i of the term is ⊗ᵢ rᵢ with
(r₁, …, r_d) = unravel(i, grid). A one-attribute workload (``prefix(64)``, a matrix) is one term with one
factor; a dense workload built by :func:`mmopt.workload.kron`, ``stack`` or ``marginals`` has the rows of
its product structure (:func:`mmopt.workload.structure_of`). :meth:`Layout.chunks` cuts the m rows into
blocks of at most ``chunk_rows`` consecutive rows, each inside one term and one prefix (r₁, …, r_{k−1}) of
its grid, so that labels, answers and variances of a block are formed from the factors alone.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from mmopt._base import validation as v
from mmopt.dense._workload_type import not_a_workload
from mmopt.structured import census
from mmopt.structured import workloads as sw
from mmopt.workload import Workload, signed_weights, structure_of

DEFAULT_CHUNK_ROWS = 1_000_000


@dataclass(frozen=True, eq=False)
class TermLayout:
    """One term w·(W₁ ⊗ … ⊗ W_d): its factors (one-attribute workloads), weight, name and query grid."""

    factors: tuple[Workload, ...]
    weight: float
    name: str

    @property
    def grid(self) -> tuple[int, ...]:
        return tuple(f.n_queries for f in self.factors)

    @property
    def n_queries(self) -> int:
        return math.prod(self.grid)


@dataclass(frozen=True)
class Chunk:
    """Rows ``start`` … ``stop − 1`` of the workload (global), all in term ``term`` from its row ``local``.

    Within the term they share the grid prefix (r₁, …, r_{k}) = ``prefix`` and run over rows
    ``block`` = (b₀, b₁) of factor k + 1 = ``axis`` with every row of the factors after it.
    """

    term: int
    start: int
    stop: int
    local: int
    axis: int
    prefix: tuple[int, ...]
    block: tuple[int, int]


@dataclass(frozen=True, eq=False)
class Layout:
    """A workload as terms of products, with names for its attributes and terms (see the module docstring).

    ``structure`` is the implicit workload with exactly these rows (the workload itself, or its product twin,
    or the one-attribute workload as a one-factor product); None for a stream workload (:class:`StreamFactor`).
    """

    name: str
    shape: tuple[int, ...]
    attributes: tuple[str, ...]
    terms: tuple[TermLayout, ...]
    structure: sw.ImplicitWorkload | None

    @property
    def n_queries(self) -> int:
        return sum(t.n_queries for t in self.terms)

    @property
    def weighted(self) -> bool:
        """Whether some term's weight is not 1 (the weight then belongs in every label)."""
        return any(t.weight != 1.0 for t in self.terms)

    def chunks(self, chunk_rows: int = DEFAULT_CHUNK_ROWS, start: int = 0, stop: int | None = None
               ) -> Iterator[Chunk]:
        """Blocks of at most ``chunk_rows`` consecutive rows covering ``start`` … ``stop − 1``, in order."""
        stop = self.n_queries if stop is None else stop
        offset = 0
        for j, t in enumerate(self.terms):
            lo, hi = max(start - offset, 0), min(stop - offset, t.n_queries)
            if lo < hi:
                for c in term_chunks(t.grid, chunk_rows, lo, hi):
                    yield Chunk(j, offset + c[0], offset + c[1], c[0], *c[2:])
            offset += t.n_queries

    def locate(self, i: int) -> tuple[int, int]:
        """(term, row within the term) of query i."""
        offset = 0
        for j, t in enumerate(self.terms):
            if i < offset + t.n_queries:
                return j, i - offset
            offset += t.n_queries
        raise IndexError(i)


@dataclass(frozen=True, eq=False)
class StreamFactor:
    """``mmopt.toeplitz.prefix(n)`` as a layout's one factor, at any n: its rows known by family (labels, W x̂ by a
    cumulative sum), where a :class:`~mmopt.Workload` would hold an n×n Gram."""

    family: str
    domain_size: int
    name: str
    matrix = None  # a class attribute, as a closed-form Workload's: the rows come from the family

    @property
    def n_queries(self) -> int:
        return self.domain_size


def term_chunks(grid: tuple[int, ...], chunk_rows: int, lo: int, hi: int):
    """(start, stop, axis k, prefix, (b₀, b₁)) blocks of rows lo … hi − 1 of a term's C-order grid.

    k is the first axis whose trailing grid ∏_{i>k} mᵢ ("inner") fits ``chunk_rows``; a block is a run of
    rows b₀ … b₁ − 1 of factor k under one prefix of the axes before it, so it spans (b₁ − b₀)·inner rows.
    """
    d = len(grid)
    k = next(i for i in range(d) if math.prod(grid[i + 1:]) <= chunk_rows)
    inner = math.prod(grid[k + 1:])
    per = max(1, chunk_rows // inner) * inner
    pos = lo
    while pos < hi:
        outer = pos // inner  # index into the grid of axes 0 … k
        prefix_end = (outer // grid[k] + 1) * grid[k] * inner  # end of this prefix's run of axis k
        end = min(hi, pos + per, prefix_end)
        if pos % inner == 0 and end % inner == 0:
            idx = np.unravel_index(outer, grid[:k + 1])
            yield pos, end, k, tuple(int(r) for r in idx[:k]), (int(idx[k]), int(idx[k]) + (end - pos) // inner)
        else:  # a start or stop inside an inner run (only for a user's start/stop): one row of axis k at a time
            end = min(hi, (outer + 1) * inner)
            idx = np.unravel_index(outer, grid[:k + 1])
            yield pos, end, k, tuple(int(r) for r in idx[:k]), (int(idx[k]), int(idx[k]) + 1)
        pos = end


def layout_of(workload, *, attributes=None, terms=None, caller: str = "layout_of") -> Layout:
    """The :class:`Layout` of a workload built by mmopt (dense or implicit).

    ``attributes`` (one name per attribute) and ``terms`` (one name per term) override the defaults: a census
    workload's own names (:func:`mmopt.structured.census.metadata`), else "a0", "a1", …; a marginal term is
    named by its attributes ("a0×a2", "total"), a single term by the workload, others "term j".

    Examples
    --------
    >>> from mmopt import workload as wl
    >>> L = layout_of(wl.marginals((3, 4, 5), 2), attributes=("sex", "age", "race"))
    >>> [t.name for t in L.terms], L.n_queries
    (['sex×age', 'sex×race', 'age×race'], 47)
    """
    from mmopt.toeplitz.error import StreamWorkload  # lazy: the stream layer is needed for its workloads only
    if isinstance(workload, StreamWorkload):
        from mmopt.structured._checks import DENSE_LIMIT
        if workload.kind == "prefix" or workload.n > DENSE_LIMIT:
            return _stream_layout(workload, attributes, terms, caller)
        # all ranges of ≤ 4,096 cells: listed through the dense twin, as evaluate lists them (they were refused
        # at every size, 64 cells included, with a message about 4,096; a helper's probe)
        workload = workload.to_workload()
    structure = structure_of(workload)
    if structure is None:
        if not isinstance(workload, Workload):
            raise not_a_workload(workload, name="workload", caller=caller,
                                 expected="a Workload or an ImplicitWorkload")
        if not workload.knows_rows:
            raise ValueError(f"The 'workload' parameter of {caller} was built from its Gram matrix only "
                             f"('{workload.name}'), so its queries are unknown. Use Workload.from_matrix(W).")
        structure = sw.ImplicitWorkload((sw.Product((workload,), 1.0),), workload.name)
    for t in structure.terms:  # row indices are int64: 2ⁿ − 1 predicates past 63 cells overflowed them, and the
        # labels shifted by ≥ 64 bits (numpy's "Maximum allowed dimension exceeded"; a helper's audit)
        for f in t.factors:
            if getattr(f, "family", None) == "all_predicate" and f.matrix is None and f.domain_size > 63:
                raise ValueError(f"The 'workload' parameter of {caller} has all_predicate({f.domain_size}), "
                                 f"2^{f.domain_size} − 1 queries: its rows are listed up to 63 cells (int64 row "
                                 "indices). Ask the predicates you need as a Workload.from_matrix, or use "
                                 "mmopt.answers.answer on the released estimate.")
    meta = census.metadata(structure)
    d = len(structure.shape)
    attributes = _names(attributes, d, "attributes", caller, meta.attributes if meta else
                        tuple(f"a{i}" for i in range(d)))
    default = meta.terms if meta else tuple(_term_name(t, attributes, structure, j)
                                            for j, t in enumerate(structure.terms))
    names = _names(terms, len(structure.terms), "terms", caller, default)
    # a stack with a negative weight: its twin holds |w|, its rows (and answers) the signed weights
    weights = signed_weights(workload) or tuple(float(t.weight) for t in structure.terms)
    layout_terms = tuple(TermLayout(t.factors, w, nm) for t, w, nm in zip(structure.terms, weights, names,
                                                                          strict=True))
    return Layout(workload.name, structure.shape, attributes, layout_terms, structure)


def _stream_layout(W, attributes, terms, caller: str) -> Layout:
    """The one-term layout of a stream workload; prefixes only: all ranges past 4,096 cells are n(n+1)/2 rows."""
    if W.kind != "prefix":
        raise ValueError(f"The 'workload' parameter of {caller} is {W.name}, {W.n_queries:,} queries: its rows are "
                         "listed up to 4,096 cells. Past that, use mmopt.answers.answer(queries, output, strategy) "
                         "for the ranges you need.")
    attributes = _names(attributes, 1, "attributes", caller, ("a0",))
    names = _names(terms, 1, "terms", caller, (W.name,))
    factor = StreamFactor(W.kind, W.n, W.name)
    return Layout(W.name, (W.n,), attributes, (TermLayout((factor,), 1.0, names[0]),), None)


def _names(given, count: int, name: str, caller: str, default) -> tuple[str, ...]:
    if given is None:
        return tuple(default)
    if isinstance(given, str):
        given = [given]
    given = [v.check_str(g, name=name, caller=caller) for g in given]
    if len(given) != count:
        raise ValueError(f"The '{name}' parameter of {caller} must give {count} names (one per "
                         f"{name[:-1]}). Got {len(given)}.")
    return tuple(given)


def _term_name(term, attributes, structure, j: int) -> str:
    fams = [f.family for f in term.factors]
    if len(term.factors) > 1 and all(f in ("identity", "total") for f in fams):
        on = [a for a, f in zip(attributes, fams, strict=True) if f == "identity"]
        return "×".join(on) if on else "total"
    return structure.name if len(structure.terms) == 1 else f"term {j}"


def factor_rows(W: Workload, r0: int, r1: int) -> np.ndarray:
    """Rows r0 … r1 − 1 of a one-attribute workload (its row order), built without W for the families."""
    n = W.domain_size
    if W.matrix is not None:
        return W.matrix[r0:r1]
    rows = np.arange(r0, r1)
    cells = np.arange(n)
    fam = W.family
    if fam == "identity":
        return (cells[None, :] == rows[:, None]).astype(float)
    if fam == "total":
        return np.ones((r1 - r0, n))
    if fam == "prefix":
        return (cells[None, :] <= rows[:, None]).astype(float)
    if fam == "all_range":
        a, b = range_ends(n, rows)
        return ((cells >= a[:, None]) & (cells <= b[:, None])).astype(float)
    if fam == "all_predicate":
        return (((rows[:, None] + 1) >> cells[None, :]) & 1).astype(float)
    raise ValueError(f"factor_rows: workload '{W.name}' is Gram-only; its queries are unknown.")


def range_ends(n: int, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) of rows of all_range(n): row-major a ≤ b, row index = a·n − a(a−1)/2 + (b − a)."""
    a_all = np.arange(n + 1)
    starts = a_all * n - a_all * (a_all - 1) // 2
    a = np.searchsorted(starts, rows, side="right") - 1
    return a, rows - starts[a] + a


def row_intervals(W) -> tuple[np.ndarray, np.ndarray] | None:
    """(start a, length ℓ) of every row of a one-attribute workload when each row is a 0/1 interval
    [a, a + ℓ − 1] (0-based), in row order; else None. Families are decoded from their definition."""
    n = W.domain_size
    matrix, family = getattr(W, "matrix", None), getattr(W, "family", None)
    if matrix is None:
        if family == "all_range":
            a, b = np.triu_indices(n)
        elif family == "prefix":
            a, b = np.zeros(n, dtype=int), np.arange(n)
        elif family == "identity":
            a = b = np.arange(n)
        elif family == "total":
            a, b = np.array([0]), np.array([n - 1])
        else:
            return None
        return a, b - a + 1
    if not isinstance(matrix, np.ndarray) or not np.all((matrix == 0) | (matrix == 1)):
        return None
    M = matrix.astype(bool)
    length = M.sum(axis=1)
    a = np.argmax(M, axis=1)
    cells = np.arange(n)
    inside = (cells >= a[:, None]) & (cells < (a + length)[:, None])
    if np.any(length == 0) or not np.array_equal(inside, M):
        return None
    return a, length
