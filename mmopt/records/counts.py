"""Marginal counts of records, as a map-reduce over batches, never forming the N-cell data vector.

Notation: see README and :mod:`mmopt.records.domain`. The marginal on A of the data vector x is
m_A = (⊗_{i∈A} I ⊗_{i∉A} 1ᵀ) x: the number of (kept) records per cell of the attributes in A. For a batch of
records with cell codes c_{r,i}, the flat index of record r in the marginal on A = (a₁ < … < a_k) is

    ι_r = (…(c_{r,a₁}·n_{a₂} + c_{r,a₂})·n_{a₃} + …) + c_{r,a_k}        (C order, exact in int64),

and m_A = bincount(ι, minlength=N_A). Only the *maximal* requested sets (those inside no other one) are
counted from the records; every other set is summed from its smallest maximal superset, which gives the same
integers. Counts are integers, so summing them over batches or Dask partitions in any order gives exactly
the same result as one pass over all records: the pandas, file and Dask paths agree bit for bit.
"""

from __future__ import annotations

import itertools
import math
import os

import numpy as np

from mmopt._base import validation as v
from mmopt._base.said_once import data_warnings_kept, data_warnings_once, warn_data
from mmopt.records import duckdb_counts as dc
from mmopt.records import duckdb_files as dfiles
from mmopt.records import engines as eg
from mmopt.records import polars_counts as pc
from mmopt.records import read as rd
from mmopt.records.domain import Domain
from mmopt.structured.residual import closure as cl


def check_sets(sets, domain: Domain, *, caller: str, name: str = "sets",
               distinct: bool = False) -> tuple[tuple[int, ...], ...]:
    """Attribute sets given by index or by name, as sorted index tuples (a bare name or int in a list is one set; a
    bare tuple of names, ("sex", "age"), is refused as ambiguous). ``distinct``: one set named twice, in any
    order, is refused (where each set is one marginal of a workload, its weight would double unseen)."""
    if isinstance(sets, str | bytes) or not hasattr(sets, "__iter__"):
        raise TypeError(f"The '{name}' parameter of {caller} must be a list of attribute tuples, e.g. "
                        f"[('age', 'sex'), (2,)]. Got {type(sets).__name__} instead.")
    if isinstance(sets, tuple) and len(sets) > 1 and all(isinstance(S, str) or not hasattr(S, "__iter__")
                                                         for S in sets):
        # ("sex", "age") released the two 1-way marginals where the 2-way one was meant as often (a stumble)
        raise ValueError(f"The '{name}' parameter of {caller} is a list of attribute sets; {sets!r:.80} reads as "
                         f"{len(sets)} sets of one attribute and is refused as ambiguous. Pass [{sets!r:.70}] for the "
                         f"one {len(sets)}-way marginal, or {list(sets)!r:.70} for the {len(sets)} one-way ones.")
    out, given = [], []
    for S in sets:
        S = (S,) if isinstance(S, str) or not hasattr(S, "__iter__") else tuple(S)
        given.append(S)
        idx = []
        for a in S:
            if isinstance(a, str):
                if a not in domain.names:
                    hint = (f" For every {a}-way marginal write 'marginals:k={a}' (the command line) or list "
                            f"the sets of {a} names." if a.strip().isdigit() else "")
                    raise ValueError(f"The '{name}' parameter of {caller} names attribute {a!r}, which is not in "
                                     f"the domain. The domain has {list(domain.names)}.{hint}")
                a = domain.index(a)
            idx.append(a)
        out.append(tuple(idx))
    if not out:  # nothing to count (marginal_counts failed on max() of no sets)
        raise ValueError(f"The '{name}' parameter of {caller} must list at least one marginal. Got none.")
    out = cl.check_sets(out, domain.shape, name=name, caller=caller)
    if distinct and (twice := cl.first_repeat(given, out)):
        raise ValueError(f"The '{name}' parameter of {caller} names the marginal {twice[0]!r} twice (also as "
                         f"{twice[1]!r}): it would count twice, its weight doubled. Give each marginal once.")
    return out


#: Up to this many attributes per set, set containment is decided by listing each set's subsets (Σ 2^|B|) rather
#: than by comparing every pair (M² : 4·10⁸ comparisons for the 20,876 sets of 1- to 3-way marginals on 50
#: attributes, most of a 209-second release).
_SUBSET_LISTING_MAX = 16


def _strict_subsets(B: tuple[int, ...]):
    return (S for k in range(len(B)) for S in itertools.combinations(B, k))


maximal = cl.maximal  # the sets contained in no other (lives with the closure, which the strategies use)


def smallest_supersets(sets, top, shape) -> dict:
    """{A: the set of ``top`` with fewest cells that contains A} for every A of ``sets`` (sorted tuples)."""
    cells = {B: math.prod(shape[i] for i in B) for B in top}
    if max((len(B) for B in top), default=0) > _SUBSET_LISTING_MAX:
        return {A: min((B for B in top if set(A) <= set(B)), key=cells.__getitem__) for A in sets}
    best: dict = {}
    for B in top:  # first-seen order breaks ties, as min() over top did
        for S in (*_strict_subsets(B), B):
            if S not in best or cells[B] < cells[best[S]]:
                best[S] = B
    return {A: best[A] for A in sets}


def count_codes(code_cols: list, shape: tuple[int, ...], sets) -> dict:
    """{A: flat int64 counts} of one batch, for the maximal ``sets``, from its per-attribute codes.

    A record is kept only when every code is ≥ 0 (the domain's drop rule).
    """
    n = len(code_cols[0]) if code_cols else 0
    keep = np.ones(n, dtype=bool)
    for c in code_cols:
        keep &= c >= 0
    all_kept = bool(keep.all())
    cols = [np.asarray(c if all_kept else c[keep], dtype=np.intp) for c in code_cols]
    n_kept = len(cols[0]) if cols else 0
    idx = np.empty(n_kept, dtype=np.intp)  # one buffer for every set: no allocation per set
    out = {}
    for A in sets:
        if not A:
            out[A] = np.array([n_kept], dtype=np.int64)
            continue
        if len(A) == 1:
            np.copyto(idx, cols[A[0]])
        else:
            np.multiply(cols[A[0]], shape[A[1]], out=idx)
            np.add(idx, cols[A[1]], out=idx)
        for i in A[2:]:
            np.multiply(idx, shape[i], out=idx)
            np.add(idx, cols[i], out=idx)
        out[A] = np.bincount(idx, minlength=cl.cells(shape, A)).astype(np.int64, copy=False)
    return out


def _batch_counts(columns: list, domain: Domain, sets) -> dict:
    return count_codes([rd.codes(c, a) for c, a in zip(columns, domain.attributes, strict=True)],
                       domain.shape, sets)


def _add(a: tuple, b: tuple) -> tuple:
    """Two partitions' (counts, DataWarning messages) joined."""
    return {A: a[0][A] + b[0][A] for A in a[0]}, a[1] + tuple(m for m in b[1] if m not in a[1])


def _partition_counts(df, domain: Domain, sets, batch_size: int) -> dict:
    """Counts of one pandas DataFrame (a whole source, or one Dask partition), batch by batch."""
    total = {A: np.zeros(cl.cells(domain.shape, A), dtype=np.int64) for A in sets}
    for cols in rd.pandas_batches(df, domain, batch_size):
        for A, c in _batch_counts(cols, domain, sets).items():
            total[A] += c
    return total


def _kept_partition_counts(df, domain: Domain, sets, batch_size: int) -> tuple:
    """(counts, DataWarning messages) of one Dask partition: on a process or cluster scheduler a warning given
    where the partition runs reaches the worker's stderr, not the caller (a text value in a numeric column was
    dropped without a word to a ``dask.distributed`` user)."""
    with data_warnings_kept() as kept:
        return _partition_counts(df, domain, sets, batch_size), tuple(kept)


def _dask_counts(ddf, domain: Domain, sets, batch_size: int) -> dict:
    """Per-partition counts, summed by a binary tree of delayed additions, computed on the current scheduler; the
    partitions' DataWarnings said here."""
    import dask
    part = dask.delayed(_kept_partition_counts, pure=True)
    add = dask.delayed(_add, pure=True)
    level = [part(p, domain, sets, batch_size) for p in ddf[list(domain.names)].to_delayed()]
    if not level:
        return {A: np.zeros(cl.cells(domain.shape, A), dtype=np.int64) for A in sets}
    while len(level) > 1:
        level = [add(level[k], level[k + 1]) if k + 1 < len(level) else level[k] for k in range(0, len(level), 2)]
    ((out, messages),) = dask.compute(level[0])
    for message in messages:
        warn_data(message, stacklevel=4)  # the caller of marginal_counts
    return out


ENGINES = ("auto", "pyarrow", "polars", "duckdb")


def _source(records, domain: Domain, *, caller: str, engine: str, name: str):
    """("pandas" | "arrow" | "dask" | "polars" | "duckdb", handle) after every schema check.

    ``engine`` chooses who reads a path ("auto" = "pyarrow"); any other source is read by its own engine.
    """
    rd.check_domain(domain, caller=caller)
    if engine not in ENGINES:
        raise ValueError(f"The 'engine' parameter of {caller} must be one of {list(ENGINES)}. Got {engine!r:.60} "
                         "instead.")
    path = isinstance(records, str | os.PathLike)
    if not path and engine != "auto":
        raise ValueError(f"The 'engine' parameter of {caller} chooses who reads a file; a "
                         f"{type(records).__name__} is read by its own engine. Leave engine='auto'. Got {engine!r}.")
    if eg.is_polars(records):
        return "polars", pc.check(records, domain, caller=caller, name=name)
    if eg.is_duckdb(records):
        return "duckdb", dc.check(records, domain, caller=caller, name=name)
    kind, handle = rd.check_source(records, domain, caller=caller, name=name)
    if engine == "duckdb":
        con, rel = dfiles.open_path(handle, records, domain, caller=caller)
        return "duckdb", (con, dc.check(rel, domain, caller=caller, name=name))
    if engine == "polars":
        return "polars", pc.check(pc.open_path(handle, records, domain, caller=caller), domain, caller=caller,
                                  name=name)
    return kind, handle


def _warn_none_kept(domain: Domain) -> None:
    """A :class:`mmopt.DataWarning` when no record was kept: a column whose every value misses the domain ("SOUTH"
    for "south", a value on another scale) made the release pure noise without a word (a newcomer's audit)."""
    warn_data(f"No record was counted: the records are empty, or each has a missing or out-of-domain value in one "
              f"of the attributes read {list(domain.names)}. Check the categories' spelling, case and spaces, and "
              "the bins' scale, against the data.", stacklevel=4)  # the caller of marginal_counts


def marginal_counts(records, domain: Domain, sets, *, batch_size: int = rd.BATCH_ROWS, engine: str = "auto",
                    caller: str = "marginal_counts", name: str = "records") -> dict:
    """Exact counts of the records in the marginal on every attribute set of ``sets``.

    Parameters
    ----------
    records : pandas.DataFrame, str or path, dask DataFrame, polars LazyFrame or DataFrame, or DuckDB relation
        One row per record; a path is a .parquet or .csv file or a folder of Parquet files (read with
        pyarrow, only the domain's columns, ``batch_size`` rows at a time). A Dask DataFrame is counted per
        partition on the current Dask scheduler (a ``distributed.Client`` if one is active) and the integer
        counts are summed, so the result equals the pandas one exactly on the values Dask holds (with its default
        ``dataframe.convert-string`` an object column becomes text: Python bools in it read as "True"/"False", which
        a numeric attribute drops with a warning, where pandas counts them as 1/0). A Polars LazyFrame is counted by
        Polars' streaming engine (:mod:`mmopt.records.polars_counts`) and a DuckDB relation
        (``con.table("people")``, ``duckdb.read_parquet(path)``) by one query inside DuckDB
        (:mod:`mmopt.records.duckdb_counts`), never collecting the rows; the counts are the same integers.
        A text column under a numeric attribute is parsed, as in a CSV file, from every source (pandas too: Dask
        turns object columns into text).
    domain : Domain
        The public schema. Every domain column is read: a record with a missing or out-of-domain value in
        any of them is dropped (:mod:`mmopt.records.domain`).
    sets : list of tuple
        Attribute sets, by index or name; ``()`` is the total of kept records.
    batch_size : int
        Rows per batch (memory is O(batch_size · d) plus the counts); Polars and DuckDB choose their own.
    engine : {"auto", "pyarrow", "duckdb", "polars"}
        Who reads a path: "auto" is pyarrow, in batches; "duckdb" or "polars" counts the same files inside that
        engine (``pip install 'mmopt[duckdb]'`` or ``'mmopt[polars]'``). Other sources are read by their own
        engine (leave "auto").
    caller : str
        The public function refusals name (mmopt.synth's mst and aim count through here).
    name : str
        Its parameter that holds the records (mmopt.sql's is 'source', privbayes' 'data').

    Returns
    -------
    dict
        {A: int64 array of shape (nᵢ for i in A)} with A a sorted tuple of attribute indices (``()`` → 0-d).

    Raises
    ------
    ValueError
        A missing column, a column whose dtype cannot hold the attribute's values, an unreadable file, or
        counts too large to allocate — always before returning anything, so before any noise is drawn.

    Examples
    --------
    >>> import pandas as pd
    >>> from mmopt.records import Attribute, Domain
    >>> D = Domain((Attribute("sex", categories=("F", "M")), Attribute("age", edges=(0, 18, 65, 120))))
    >>> df = pd.DataFrame({"sex": ["F", "M", "M", "F", "X"], "age": [30, 70, 12, 30, 40]})
    >>> c = marginal_counts(df, D, [("sex", "age"), ("age",), ()])
    >>> c[(0, 1)].tolist(), c[(1,)].tolist(), int(c[()])          # the "X" record is dropped
    ([[0, 2, 0], [1, 0, 1]], [1, 2, 1], 4)
    """
    caller = v.check_str(caller, name="caller", caller="marginal_counts")  # the public function a refusal names
    name = v.check_str(name, name="name", caller="marginal_counts")
    with data_warnings_once():  # one warning per column or file, not per batch
        return _marginal_counts(records, domain, sets, batch_size, engine, caller, name)


def _marginal_counts(records, domain: Domain, sets, batch_size, engine: str, caller: str, name: str) -> dict:
    kind, handle = _source(records, domain, caller=caller, engine=engine, name=name)
    sets = check_sets(sets, domain, caller=caller)
    batch_size = v.check_int(batch_size, name="batch_size", caller=caller)
    shape = domain.shape
    top = maximal(sets)
    v.check_allocation(sum(cl.cells(shape, A) for A in top) + max(cl.cells(shape, A) for A in sets),
                       what="the marginal counts", caller=caller, remedy=" Request fewer or smaller marginals.")
    if kind == "pandas":
        flat = _partition_counts(handle, domain, top, batch_size)
    elif kind == "dask":
        flat = _dask_counts(handle, domain, top, batch_size)
    elif kind in ("polars", "duckdb"):
        flat = (pc if kind == "polars" else dc).counts(handle, domain, top, caller=caller)
        if kind == "duckdb":
            dfiles.check_rejects(handle, records, caller=caller)
    else:
        flat = {A: np.zeros(cl.cells(shape, A), dtype=np.int64) for A in top}
        for cols in rd.arrow_batches(handle, domain, batch_size, caller=caller):
            for A, c in _batch_counts(cols, domain, top).items():
                flat[A] += c
    if not any(int(c.sum()) for c in flat.values()):
        _warn_none_kept(domain)
    full = {A: flat[A].reshape(tuple(shape[i] for i in A)) for A in top}
    out = {}
    sources = smallest_supersets(sets, top, shape)
    for A in sets:
        src = sources[A]
        out[A] = full[src].sum(axis=tuple(p for p, i in enumerate(src) if i not in A), dtype=np.int64)
        out[A] = np.asarray(out[A], dtype=np.int64)
    return out
