"""Released answers as a tidy table — one row per query: its labels, the answer and its standard error.

Notation: see README. Columns, in order: ``query`` (row of W, from 0), ``term`` (index), ``table`` (the term's
name: an SF1 table, a marginal's attributes, the workload), one column per attribute (its description,
:mod:`mmopt.answers.labels`), ``weight`` (only when some term is weighted), ``answer`` (W x̂ as released) and
``standard_error`` (when the strategy is given).

``standard_error`` is √(s²·q (AᵀA)⁺ qᵀ), s² the variance of each noise entry actually drawn (2b² for Laplace
scale b, σ² for Gaussian; OpenDP's discrete samplers have these variances to within their grid): the exact
standard deviation of the *least-squares* answer q x̂, x̂ = A⁺y, which is unbiased. For
``reconstruct="nnls"`` or ``"projection"`` the ``answer`` column holds the constrained answer, which is biased
and has no per-query error formula; the column beside it is named ``least_squares_standard_error`` for what it
is (:func:`se_column`), and intervals are refused. Projection never
increases the workload's total squared error, on any draw, so Σ standard_error² bounds its expected total
squared error — in total, not query by query; NNLS has no such bound.

Tables are built in blocks of at most ``chunk_rows`` rows (:func:`iter_tables`);
:func:`mmopt.answers.files.write_answers` streams them to CSV or Parquet, so no more than one block is held
at a time, and :func:`answers_table` collects them into one pandas DataFrame (up to :data:`MAX_TABLE_ROWS`
rows). Needs pandas and pyarrow (``pip install 'mmopt[tables]'``), imported only when called.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from mmopt.answers.grouping import grouping_plan, hierarchy_union, is_grouping_release
from mmopt.answers.labels import Labeller, _check_rows
from mmopt.answers.layout import DEFAULT_CHUNK_ROWS, Layout, layout_of
from mmopt.answers.values import check_answers, iter_values
from mmopt.answers.variance import VarianceModel, check_output_privacy, check_released_with, noise_sd, variance_model
from mmopt.answers.widths import Widths, bounds, widths
from mmopt.privacy import Privacy

MAX_TABLE_ROWS = 10**7  # answers_table's in-memory limit; write_answers streams any number of rows
EXTRA_HINT = "pip install 'mmopt[tables]' (or: pip install pandas pyarrow)"


def require(module: str, caller: str):
    """Import pandas or pyarrow, or raise an ImportError naming the extra."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{caller} needs {module.split('.')[0]}, which is not installed. Install the tables "
                          f"extra: {EXTRA_HINT}.") from exc


@dataclass(frozen=True, eq=False)
class TablePlan:
    """Everything a table needs, checked: layout, x̂ (domain-shaped), W x̂ when already formed, the variance
    model and the noise's standard deviation (None: no standard errors)."""

    layout: Layout
    estimate: np.ndarray
    answers: np.ndarray | None
    model: VarianceModel | None
    sd: float | None
    metadata: dict
    widths: Widths | None = None


@dataclass(frozen=True, eq=False)
class TableSpec:
    """What a table needs before any noise is drawn: its layout and (with a strategy) the variance model."""

    layout: Layout
    model: VarianceModel | None
    strategy: str | None


def table_pair(workload, strategy, caller: str):
    """The (workload, strategy) a table is built from: a records release's marginal workload and strategy as their
    implicit twins, a stream workload (mmopt.toeplitz) up to 4,096 cells as its dense twin; past that prefix(n) as
    itself (its layout and variances by :mod:`mmopt.answers._stream_errors`) and all ranges refused by its layout.
    The dense prefix(n) and all_range(n) (mmopt.workload's, up to 10,000 cells) with a stream strategy past 4,096
    cells are the stream workloads (the CLI's prefix:5000 with tree:8 was refused by evaluate's per-query route)."""
    from mmopt.dispatch import as_implicit
    from mmopt.structured._checks import DENSE_LIMIT
    from mmopt.toeplitz.error import StreamWorkload, stream_twin
    workload, strategy = as_implicit(workload), as_implicit(strategy)
    stream = isinstance(workload, StreamWorkload)
    if not stream and callable(getattr(strategy, "to_dense", None)) and strategy.domain_size > DENSE_LIMIT:
        twin = stream_twin(workload)
        workload, stream = (twin, True) if twin is not None else (workload, False)
    if stream and workload.n > DENSE_LIMIT:
        return workload, strategy
    # a Toeplitz / weighted square root strategy as its dense matrix, with a dense workload too (the CLI's
    # prefix:64 with a saved Toeplitz strategy wrote no table after the noise: it has no rows to count)
    if strategy is not None and callable(getattr(strategy, "to_dense", None)) and strategy.domain_size <= DENSE_LIMIT:
        strategy = strategy.to_strategy()
    return (workload.to_workload() if stream else workload), strategy


def prepare_table(workload, strategy=None, *, noise: str, attributes=None, terms=None,
                  caller: str = "answers_table") -> TableSpec:
    """Labels and variances of a table, checked without the data: refuses a workload whose queries are unknown
    and a pair without per-query variances (``noise``: "laplace" or "gaussian", for the sensitivity's norm)."""
    workload, attributes, terms = hierarchy_union(workload, attributes, terms, caller)
    workload, strategy = table_pair(workload, strategy, caller)
    layout = layout_of(workload, attributes=attributes, terms=terms, caller=caller)
    model = None
    if strategy is not None:
        model = variance_model(workload, strategy, norm="l1" if noise == "laplace" else "l2", caller=caller,
                               layout=layout, remedy=" Pass strategy=None for the answers without standard errors.")
    table_schema_fields(layout, model is not None, caller)  # refuses clashing column names
    return TableSpec(layout, model, None if strategy is None else getattr(strategy, "name", "strategy"))


def plan_table(output, workload, strategy=None, privacy=None, *, attributes=None, terms=None,
               caller: str = "answers_table", spec: TableSpec | None = None, alpha: float | None = None) -> TablePlan:
    """Check a released (or simulated) output against its workload and strategy (:func:`answers_table`);
    ``spec`` is :func:`prepare_table`'s, when it was prepared before the noise was drawn; ``alpha`` asks for
    exact 1 − α intervals (:mod:`mmopt.answers.widths`)."""
    workload, strategy = table_pair(workload, strategy, caller)
    if is_grouping_release(output):  # mmopt.release's HierarchyRelease: per-set counts and variances, no x̂
        spec = spec or prepare_table(workload, None, noise="gaussian", attributes=attributes, terms=terms,
                                     caller=caller)
        return grouping_plan(output, spec, strategy, privacy, caller, alpha, TablePlan)
    for attr in ("estimate", "noise_scale", "noise"):
        if not hasattr(output, attr):
            raise TypeError(f"The 'output' parameter of {caller} must be what mmopt.release or mmopt.matrix_mechanism "
                            f"returned. Got {type(output).__name__}.")
    if privacy is not None and not isinstance(privacy, Privacy):
        raise TypeError(f"The 'privacy' parameter of {caller} must be a Privacy or None. Got {type(privacy).__name__}.")
    if privacy is not None and privacy.noise != output.noise:
        raise ValueError(f"The 'privacy' parameter of {caller} ({privacy!r}) does not match the output's "
                         f"{output.noise} noise. Pass the privacy of the release (or None).")
    check_output_privacy(privacy, output, caller)
    spec = spec or prepare_table(workload, strategy, noise=output.noise, attributes=attributes, terms=terms,
                                 caller=caller)
    layout = spec.layout
    N, m = int(np.prod(layout.shape)), layout.n_queries
    if output.estimate is None:
        raise ValueError(f"{caller}: the output holds no estimate x̂ (its post-processing failed and only the "
                         "measurements were kept), so its answers cannot be listed.")
    est = np.asarray(output.estimate, dtype=float)
    if est.size != N:
        what = "several draws (size=...)" if est.size % N == 0 else f"{est.size} cells"
        raise ValueError(f"The 'output' parameter of {caller} holds {what}; workload '{layout.name}' has {N:,} cells. "
                         "Pass one draw of a mechanism run on this workload.")
    if not np.all(np.isfinite(est)):  # 0·NaN is NaN: one bad cell would spoil every answer of its block
        raise ValueError(f"The 'output' parameter of {caller} must hold a finite estimate. Got "
                         f"{est.size - int(np.count_nonzero(np.isfinite(est)))} NaN or infinite entries: a failed "
                         "reconstruction, or an estimate that was never computed.")
    answers = getattr(output, "answers", None)
    if answers is not None and np.size(answers) != m:
        raise ValueError(f"The 'output' parameter of {caller} holds {np.size(answers):,} answers; workload "
                         f"'{layout.name}' has {m:,} queries. Pass the workload the output was released for.")
    _check_provenance(output, layout, strategy, est, answers, caller)
    model = spec.model
    sd = None if model is None else noise_sd(output.noise, float(output.noise_scale))
    rec = getattr(output, "reconstruction", None)
    meta = {"workload": layout.name, "strategy": spec.strategy, "n_queries": m,
            "reconstruction": rec.method if rec is not None else "least_squares", "noise": output.noise,
            "noise_scale": float(output.noise_scale), "path": getattr(output, "path", None),
            "standard_error": None if model is None else "least squares (unbiased); see mmopt.answers.table"}
    if model is not None and meta["reconstruction"] != "least_squares":
        meta["standard_error"] = (f"column least_squares_standard_error: that of the least-squares answer, not of "
                                  f"this {meta['reconstruction']} answer (biased, no per-query formula); see "
                                  "mmopt.answers.table")
    bands = None
    if alpha is not None:
        bands = widths(alpha, model, workload, strategy, output, meta, caller)
        meta["interval"] = (f"exact {1 - bands.alpha:.6g} interval of the least-squares answer at the noise drawn "
                            f"({output.noise}); see mmopt.answers.widths")
    return TablePlan(layout, est.reshape(layout.shape), None if answers is None else np.ravel(answers), model, sd,
                     meta, bands)


def _check_provenance(output, layout, strategy, estimate, answers, caller: str) -> None:
    """The output came from this workload and strategy, as far as it shows: its answers are W x̂ (checked on the
    first rows of every term: :func:`~mmopt.answers.values.probe_chunks`), and its Δ, measurement count and
    fingerprint are the strategy's. Another workload with as many queries had its answers labelled as this one's;
    another strategy had its standard errors and intervals computed from the wrong A (identity for H₂: 5.66 where
    the truth is 4.42)."""
    if answers is not None:
        check_answers(layout, estimate, answers, caller)
    if strategy is not None:
        check_released_with(output, strategy, caller)


def iter_batches(plan: TablePlan, chunk_rows: int = DEFAULT_CHUNK_ROWS):
    """pyarrow RecordBatches of the table, at most ``chunk_rows`` rows each, in row order."""
    pa = require("pyarrow", "mmopt.answers")
    layout, labeller, arrays = plan.layout, Labeller(), {}
    schema = table_schema(plan)
    chunks = layout.chunks(chunk_rows)
    source = ((c, plan.answers[c.start:c.stop]) for c in chunks) if plan.answers is not None else \
        iter_values(layout, plan.estimate, chunks)
    factor = None if plan.model is None else plan.model.sd_factor(plan.sd)
    for c, values in source:
        t = layout.terms[c.term]
        n = c.stop - c.start
        cols = [pa.array(np.arange(c.start, c.stop, dtype=np.int64)), pa.array(np.full(n, c.term, np.int32)),
                pa.repeat(t.name, n).cast(pa.string())]
        idx = np.unravel_index(np.arange(c.local, c.local + n, dtype=np.int64), t.grid)
        for f, r in zip(t.factors, idx, strict=True):
            full = labeller.listed(f)
            if full is not None:
                key = id(f)
                if key not in arrays:
                    arrays[key] = (f, pa.array(full, pa.string()))
                cols.append(arrays[key][1].take(pa.array(r)))
            else:
                cols.append(pa.array(labeller.factor(f, r), pa.string()))
        if layout.weighted:
            cols.append(pa.array(np.full(n, t.weight)))
        cols.append(pa.array(np.asarray(values, dtype=float)))
        if factor is not None:
            se = np.sqrt(plan.model.unit(c)) * factor
            cols.append(pa.array(se))
            if plan.widths is not None:
                h = plan.widths.of(c, se)
                answers = np.asarray(values, dtype=float)
                cols.extend(map(pa.array, bounds(answers, h)))
        yield pa.RecordBatch.from_arrays(cols, schema=schema)


def se_column(reconstruction: str) -> str:
    """The standard errors' column: ``standard_error`` beside least-squares answers, else
    ``least_squares_standard_error`` (the column held least squares' figure under the name of the nnls answer's
    own: its RMSE was measured at 0.20–1.29× it, and ±1.96·it missed up to 12 % of the time)."""
    return "standard_error" if reconstruction == "least_squares" else "least_squares_standard_error"


def table_schema_fields(layout: Layout, standard_error: bool, caller: str, interval: bool = False,
                        reconstruction: str = "least_squares") -> list[str]:
    """The table's column names, in order; refuses an attribute named like another column."""
    names = ["query", "term", "table", *layout.attributes, *(["weight"] if layout.weighted else []), "answer",
             *([se_column(reconstruction)] if standard_error else []), *(["lower", "upper"] if interval else [])]
    if len(set(names)) != len(names):
        raise ValueError(f"{caller}: an attribute is named like another column ({names}). Pass attributes=(...) "
                         "with other names.")
    return names


def table_schema(plan: TablePlan):
    pa = require("pyarrow", "mmopt.answers")
    types = {"query": pa.int64(), "term": pa.int32(), "weight": pa.float64(), "answer": pa.float64(),
             "standard_error": pa.float64(), "least_squares_standard_error": pa.float64(), "lower": pa.float64(),
             "upper": pa.float64()}
    names = table_schema_fields(plan.layout, plan.model is not None, "answers_table", plan.widths is not None,
                                plan.metadata["reconstruction"])
    # an attribute column is text wherever it stands: typed by name, an attribute called "weight" or "lower" took
    # float64 when the table had no column of that name of its own (labels parsed as numbers, or pyarrow failed
    # on '*'; a helper's audit)
    labels = range(3, 3 + len(plan.layout.attributes))  # after query, term, table (table_schema_fields)
    return pa.schema([(nm, pa.string() if i in labels else types.get(nm, pa.string())) for i, nm in enumerate(names)],
                     metadata={"mmopt": json.dumps(plan.metadata)})


def iter_tables(output, workload, strategy=None, privacy=None, *, chunk_rows: int = DEFAULT_CHUNK_ROWS,
                attributes=None, terms=None, alpha: float | None = None) -> Iterator:
    """The table of :func:`answers_table` as pandas DataFrames of at most ``chunk_rows`` rows, in row order."""
    plan = plan_table(output, workload, strategy, privacy, attributes=attributes, terms=terms, caller="iter_tables",
                      alpha=alpha)
    require("pandas", "iter_tables")
    for batch in iter_batches(plan, _check_rows(chunk_rows, "iter_tables")):
        frame = batch.to_pandas()
        frame.attrs.update(plan.metadata)
        yield frame


def answers_table(output, workload, strategy=None, privacy=None, *, attributes=None, terms=None,
                  chunk_rows: int = DEFAULT_CHUNK_ROWS, alpha: float | None = None):
    """The released answers W x̂ as a pandas DataFrame, one row per query, labelled, with standard errors.

    Parameters
    ----------
    output : MechanismOutput, StructuredOutput or HierarchyRelease
        One draw of :func:`mmopt.release` (or :func:`mmopt.matrix_mechanism`) on ``workload`` (a grouping-set
        release: :mod:`mmopt.answers.grouping`).
    workload : Workload or ImplicitWorkload
        The workload released; its rows give the table's rows (terms in order, each in C order).
    strategy : Strategy, ImplicitStrategy or None, default=None
        The strategy measured. Given, the table has ``standard_error`` (module docstring: exact for the
        least-squares answer at the noise actually drawn); None leaves the column out.
    privacy : Privacy or None
        The release's budget, checked against the output's kind of noise; the noise scale actually drawn is
        read from ``output``.
    attributes, terms : sequence of str or None
        Column names for the attributes and names for the terms (default: see
        :func:`mmopt.answers.layout.layout_of`).
    chunk_rows : int, default=1,000,000
        Rows formed at a time.
    alpha : float or None
        Given (e.g. 0.05), the columns ``lower`` and ``upper`` hold each answer's exact 1 − α interval
        (:mod:`mmopt.answers.widths`): a normal quantile at the σ drawn (Gaussian noise), or the exact quantile
        of the answer's weighted sum of Laplace draws (Laplace noise; pairs on at most 4,096 cells), where
        answer ± z·standard_error would cover too rarely. Needs the strategy and least-squares answers.

    Returns
    -------
    pandas.DataFrame
        Columns query, term, table, one per attribute, [weight], answer, [standard_error], [lower, upper];
        ``.attrs`` holds the workload, strategy, reconstruction and noise. Refused past :data:`MAX_TABLE_ROWS` rows: use
        :func:`mmopt.answers.write_answers` (streamed to CSV or Parquet) or :func:`iter_tables`.

    Examples
    --------
    >>> import mmopt
    >>> W, A = mmopt.workload.prefix(4), mmopt.strategy.hierarchical(4)
    >>> out = mmopt.matrix_mechanism(W, A, [3, 0, 2, 5], mmopt.Privacy(1.0), rng=0)
    >>> t = answers_table(out, W, A)
    >>> t[["query", "a0", "standard_error"]].round(4).values.tolist()     # b = Δ/ε = 3, s² = 2b² = 18
    [[0, '≤ 0', 3.3381], [1, '≤ 1', 2.9277], [2, '≤ 2', 4.0356], [3, '≤ 3', 3.2071]]
    >>> t = answers_table(out, W, A, alpha=0.05)   # exact 95% intervals: wider than ±1.96 s.e. (Laplace tails)
    >>> ((t.upper - t.answer) / t.standard_error).round(3).tolist()
    [2.035, 2.01, 2.005, 2.019]
    """
    caller = "answers_table"
    plan = plan_table(output, workload, strategy, privacy, attributes=attributes, terms=terms, caller=caller,
                      alpha=alpha)
    m = plan.layout.n_queries
    if m > MAX_TABLE_ROWS:
        raise ValueError(f"{caller}: workload '{plan.layout.name}' has {m:,} queries, more rows than the in-memory "
                         f"limit of {MAX_TABLE_ROWS:,}. Stream them to a file with mmopt.answers.write_answers(path, "
                         "...) (CSV or Parquet), or read them block by block with mmopt.answers.iter_tables.")
    pa = require("pyarrow", caller)
    require("pandas", caller)
    table = pa.Table.from_batches(list(iter_batches(plan, _check_rows(chunk_rows, caller))), schema=table_schema(plan))
    frame = table.to_pandas()
    frame.attrs.update(plan.metadata)
    return frame
