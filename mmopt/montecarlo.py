"""Monte-Carlo error of the matrix mechanism: many seeded runs of :func:`mmopt.matrix_mechanism`, summarised.

Notation: see README. Run r draws its noise from ``numpy.random.SeedSequence(seed).spawn(runs)[r]``
alone, so a seed gives the same noise whatever ``batch`` is (and the same results up to round-off: a
batched least-squares solve uses matrix-matrix BLAS, which may round differently): a batch of b runs is one call of
``mmopt.matrix_mechanism(..., size=b)`` whose Generator hands row j of every noise draw to the j-th
run's own stream (:class:`~mmopt._base.run_streams.PerRunStreams`).
The summaries are those of Li et al. (PODS 2010, Prop. 4.4:
the expected total squared error ‖W x̂ − W x‖², which :func:`mmopt.evaluate` gives exactly for least
squares) and DPBench's scaled per-query errors (Hay, Machanavajjhala, Miklau, Chen, Zhang, SIGMOD 2016,
§4; ``dpcomp_core.metric.calculate_error``).
"""

from __future__ import annotations

import math
import sys
import time
import warnings

import numpy as np

from mmopt import dispatch
from mmopt._base import guards as g
from mmopt._base import validation as v
from mmopt._base.montecarlo_result import Interval, MonteCarloResult, mean_std, t_interval
from mmopt._base.run_streams import PerRunStreams, seed_sequence
from mmopt.dense._error_common import check_privacy
from mmopt.dense.exact_answers import refuse_negative
from mmopt.privacy import Privacy
from mmopt.reconstruct._common import check_method, check_reconstruction
from mmopt.structured import _checks as ck
from mmopt.structured.mechanism import answer
from mmopt.structured.strategies import ImplicitStrategy
from mmopt.structured.workloads import ImplicitWorkload

__all__ = ["MonteCarloResult", "monte_carlo"]

_CALLER = "monte_carlo"
_BATCH_ENTRIES = 2 * 10**6  # default batch: about this many float64 values (p + n + m per run) per call
_PROGRESS_ENTRIES = 10**8   # progress=None shows a bar past runs × (p + n + m) values, on a terminal
# Loop limits (mmopt._base.guards.check_work). A run costs its Python overhead (~0.1–0.2 ms measured on
# prefix(8): seeding, one noise draw, bookkeeping; mmopt._base.guards.ITERATION_OPS) plus, on the dense path, the
# least-squares estimate and the answers, ~2·(p + m)·n operations; on an implicit pair an iterative solve
# over its p + N + m values, counted as _RUN_FACTOR_IMPLICIT operations per value (a lower estimate: NNLS and
# projection cost more). MAX_RUNS caps the count even where MAX_WORK is raised: five per-run float arrays
# (400 MB at 10⁷ runs), and 10⁷ runs of even the smallest problem take half an hour.
MAX_RUNS = 10**7
_RUN_FACTOR_IMPLICIT = 20.0


def _mechanism_options(reconstruct: str, total, zeros, reconstruct_options, n: int, shape) -> tuple[dict, float]:
    """(the reconstruction keywords passed only when set, the checked total), checked here under monte_carlo's
    name (the mechanism's own checks named matrix_mechanism, which the user did not call)."""
    total = check_reconstruction(reconstruct, total, zeros, reconstruct_options, n, _CALLER, shape)[1]
    return {k: val for k, val in (("reconstruct", reconstruct), ("total", total), ("zeros", zeros),
                                  ("reconstruct_options", reconstruct_options))
            if not (k == "reconstruct" and val == "least_squares") and val is not None}, total


def _truth(workload, strategy, x, caller: str) -> tuple[np.ndarray, float, int]:
    """(W x, ‖x‖₁, p) for the data as the mechanism will see it."""
    if _stream(workload):  # mmopt.toeplitz.prefix(n) / all_range(n): W x from its dense twin (AttributeError before)
        if workload.n > ck.DENSE_LIMIT:
            raise ValueError(f"{caller} lists every query's answer: {workload.name} past {ck.DENSE_LIMIT:,} cells is "
                             "too many for a simulation. Use mmopt.evaluate for its exact error.")
        workload = workload.to_workload()
    if isinstance(workload, ImplicitWorkload):
        x = ck.check_data(x, workload.shape, caller=caller)
        truth = answer(workload, x)
    else:
        x = v.check_vector(x, name="x", caller=caller, length=workload.domain_size)
        if not workload.knows_rows:
            raise ValueError(f"The 'workload' parameter of {caller} must list its queries (a query matrix W or "
                             f"a named family): '{workload.name}' holds only its Gram, so per-query errors cannot "
                             "be measured. Build it with mmopt.workload.Workload.from_matrix(W).")
        try:
            W = workload.explicit_matrix()
        except ValueError as exc:
            raise ValueError(f"{caller} needs the query matrix W to measure per-query errors: {exc}") from None
        truth = W @ x
    refuse_negative(x, caller)  # (the mechanism's own check named matrix_mechanism, which the user did not call)
    if isinstance(strategy, ImplicitStrategy):
        p = strategy.n_rows
    elif dispatch.stream_native(strategy):  # n × n, lower triangular
        p = strategy.domain_size
    else:
        p = np.shape(getattr(strategy, "matrix", strategy))[0]
    return truth, float(np.sum(np.abs(x))), int(p)


def _stream(workload) -> bool:
    from mmopt.toeplitz.error import StreamWorkload
    return isinstance(workload, StreamWorkload)


def monte_carlo(workload, strategy, x, privacy: Privacy, *, reconstruct: str = "least_squares", total=None,
                zeros=None, runs: int = 1000, seed=None, batch: int | None = None, progress: bool | None = None,
                reconstruct_options: dict | None = None) -> MonteCarloResult:
    r"""Estimate the error of the matrix mechanism M_A(W, x) from ``runs`` seeded runs (simulation path).

    Parameters
    ----------
    workload : Workload or mmopt.structured.ImplicitWorkload
        Its queries must be listable (a matrix, a named family, or an implicit product/union).
    strategy : Strategy, array_like or mmopt.structured.ImplicitStrategy
    x : array_like
        True counts (n,), or shaped like the domain for an implicit workload.
    privacy : Privacy
        A real budget (the mechanism needs one).
    reconstruct : {"least_squares", "nnls", "projection"}, default "least_squares"
        Passed to :func:`mmopt.matrix_mechanism` (with ``total``) when not the default.
    total : float or None
        Passed to :func:`mmopt.matrix_mechanism` when given (the public total Σx, for "nnls"/"projection").
    zeros : optional
        Passed to :func:`mmopt.matrix_mechanism` when given (cells publicly known to be 0).
    reconstruct_options : dict or None
        Passed to :func:`mmopt.matrix_mechanism` when given ("tol", "max_iterations" of the reconstruction).
    runs : int >= 2, default 1000
        At most :data:`MAX_RUNS` (10⁷), and at most mmopt._base.guards.MAX_WORK (3·10¹¹, about five minutes)
        divided by the estimated cost of one run (its ~10⁵-operation overhead plus ~2·(p + m)·n on a dense
        pair): prefix(8) with H₂ allows about 3·10⁶ runs. Larger values are refused before any work, with the
        time they would take.
    seed : int >= 0, numpy.random.SeedSequence or None
        Run r uses ``SeedSequence(seed).spawn(runs)[r]``: the same seed gives the same noise whatever
        ``batch`` (results equal up to floating-point round-off of the batched solve; bit-identical for the
        same ``batch``). None draws fresh entropy, reported in ``seed_entropy``.
    batch : int or None
        Runs per call of the mechanism (memory ∝ batch × (p + n + m)); None picks about 2·10⁶ values.
    progress : bool or None
        A tqdm bar on stderr; None shows one when runs × (p + n + m) > 10⁸ and stderr is a terminal.

    Returns
    -------
    MonteCarloResult
        Means, standard deviation and 95% Student-t CIs of the total squared error, RMSE, max
        absolute error, DPBench's scaled errors; ``expected`` = ``mmopt.evaluate(...)``'s total for least
        squares, to read beside the mean.

    Notes
    -----
    With e_r = W x̂_r − W x, T_r = ‖e_r‖², T̄ = (1/R)Σ T_r and s² = Σ(T_r − T̄)²/(R − 1), the interval is
    T̄ ± t_{0.975, R−1}·s/√R (Student's t; 1.96 at every R covered 64 % at R = 2); for least squares
    E[T_r] = c·Δ²·tr(G (AᵀA)⁺) (Prop. 4.4). Its half-width shrinks like 1/√R. The totals are skewed (sums of
    squares), so the level is approximate at small R: measured coverage of the exact expectation on prefix(8)
    with H₂, Laplace and Gaussian alike, 0.93 / 0.87 / 0.89 / 0.91 / 0.93 at R = 2 / 5 / 10 / 30 / 100 (600
    to 300 calls each; Johnson's skewness correction gained nothing measurable). **Simulation only**: numpy
    noise (see :mod:`mmopt.mechanism`).

    Examples
    --------
    >>> import mmopt
    >>> W, H = mmopt.workload.prefix(8), mmopt.strategy.hierarchical(8)
    >>> r = monte_carlo(W, H, [5.0] * 8, mmopt.Privacy(1.0), runs=2000, seed=1)
    >>> r.total_ci.low <= r.expected <= r.total_ci.high, round(r.expected, 6)
    (True, 175.542857)
    """
    t0 = time.perf_counter()
    runs = _check_runs(runs, 0.0)  # at once, on the overhead alone; refined below once p, n and m are known
    reconstruct = check_method(reconstruct, _CALLER)  # at once; the rest once n is known (below)
    if progress is not None and not isinstance(progress, bool | np.bool_):
        raise TypeError(f"The 'progress' parameter of {_CALLER} must be True, False or None. "
                        f"Got {type(progress).__name__}.")
    ss = seed_sequence(seed)
    check_privacy(privacy, _CALLER, optional=False)  # a mechanism needs a real budget
    # a records-layer marginal workload or residual strategy as the implicit object it stands for, as everywhere
    workload, strategy = dispatch.as_implicit(workload), dispatch.as_implicit(strategy)
    # evaluate first: it checks types, domains and support, and gives the exact expectation.
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            report = dispatch.evaluate(workload, strategy, privacy)
    except (TypeError, ValueError) as exc:  # its refusals name evaluate, which the user did not call
        raise type(exc)(f"{_CALLER} checks the pair as mmopt.evaluate does, which refused it: {exc}") from None
    for w in seen:  # its warnings too ("evaluate: strategy … was optimised under a participation schema"; an audit)
        text = str(w.message)
        warnings.warn(_CALLER + text[len("evaluate"):] if text.startswith("evaluate:") else text, w.category,
                      stacklevel=2)
    truth, x_l1, p = _truth(workload, strategy, x, _CALLER)
    m, n = truth.shape[0], report.domain_size
    shape = tuple(workload.shape) if isinstance(workload, ImplicitWorkload) else None
    options, total = _mechanism_options(reconstruct, total, zeros, reconstruct_options, n, shape)
    _check_resolvable(truth, float(report.total_squared_error), m)
    width = p + n + m
    implicit = isinstance(workload, ImplicitWorkload) or isinstance(strategy, ImplicitStrategy)
    _check_runs(runs, _RUN_FACTOR_IMPLICIT * width if implicit else 2.0 * (p + m) * n)
    if batch is None:
        batch = max(1, min(runs, _BATCH_ENTRIES // width))
    else:
        batch = v.check_int(batch, name="batch", caller=_CALLER)
        v.check_allocation(min(batch, runs) * width, what=f"a batch of {batch} runs of {width} values",
                           caller=_CALLER, remedy=" Pass a smaller 'batch'.")
    show = bool(progress) if progress is not None else runs * width > _PROGRESS_ENTRIES and sys.stderr.isatty()
    T, peak, l1, l2 = (np.empty(runs) for _ in range(4))
    bar = None
    if show:
        from tqdm import tqdm
        bar = tqdm(total=runs, desc=_CALLER, unit="run", file=sys.stderr)
    try:
        for start in range(0, runs, batch):
            # successive spawns continue the child numbering: the same children as ss.spawn(runs), without
            # holding all of them (a SeedSequence is ~1 KB: 10⁶ runs would hold a gigabyte)
            chunk = ss.spawn(min(batch, runs - start))
            gen = PerRunStreams(chunk)
            out = dispatch.matrix_mechanism(workload, strategy, x, privacy, rng=gen, size=len(chunk), **options)
            gen.check_consumed()
            E = _answers(workload, out, len(chunk)) - truth
            sl = slice(start, start + len(chunk))
            T[sl] = np.einsum("ij,ij->i", E, E)
            peak[sl] = np.max(np.abs(E), axis=1)
            l1[sl] = np.mean(np.abs(E), axis=1)
            l2[sl] = np.sqrt(T[sl]) / m
            if bar is not None:
                bar.update(len(chunk))
    finally:
        if bar is not None:
            bar.close()
    mean, std = mean_std(T)
    ci = t_interval(mean, std, runs)
    pk_mean, pk_std = mean_std(peak)
    # divided twice, not by x_l1²: counts of 1e300 overflowed the square (OverflowError after every run was drawn)
    scaled = None if x_l1 == 0 else (float(l1.mean()) / x_l1, mean / m / x_l1 / x_l1, float(l2.mean()) / x_l1)
    exact = getattr(report, "total_exact", True)
    return MonteCarloResult(
        mean, std, ci, float(report.total_squared_error) if reconstruct == "least_squares" else None,
        bool(exact), math.sqrt(mean / m),
        Interval(math.sqrt(max(ci.low, 0.0) / m), math.sqrt(ci.high / m), method=ci.method + ", mapped by √(·/m)"),
        pk_mean, t_interval(pk_mean, pk_std, runs),
        *(scaled or (None, None, None)), runs, m, reconstruct, total, privacy, int(ss.entropy), batch,
        time.perf_counter() - t0, T)


def _check_resolvable(truth: np.ndarray, expected: float, m: int) -> None:
    """Refuse counts so large that the answers' round-off (≈ eps·max |W x| each) is not small beside the noise:
    at x = 1e300 on prefix(4) the errors drawn were round-off of 6e284 and the result read inf, where the expected
    total is 46. Under least squares the error does not depend on x (x = 0 gives the same figures)."""
    if math.isinf(expected):  # the noise itself: each run's squared error past float64, every summary NaN
        raise ValueError(f"The 'privacy' parameter of {_CALLER} makes the expected total squared error exceed "
                         "float64 (mmopt.evaluate returns inf): no run's error can be represented. Simulate at a "
                         "larger epsilon (the error scales as 1/ε² under Laplace noise).")
    top = float(np.max(np.abs(truth))) if truth.size else 0.0
    roundoff = 4 * np.finfo(float).eps * top  # a few roundings of each answer
    if math.isfinite(expected) and expected > 0 and roundoff > 1e-2 * math.sqrt(expected / m):
        raise ValueError(f"The 'x' parameter of {_CALLER} has counts too large to simulate at this privacy: the "
                         f"answers' round-off (~{roundoff:.2g}) is not small beside the noise (rmse "
                         f"{math.sqrt(expected / m):.2g}). The error of least squares does not depend on x: pass "
                         "smaller counts (e.g. zeros), or read the exact expectation from mmopt.evaluate.")


def _check_runs(runs: int, per_run: float) -> int:
    """Refuse ``runs`` past MAX_RUNS or past mmopt._base.guards.MAX_WORK at ``per_run`` operations a run (plus a
    run's fixed Python overhead, mmopt._base.guards.ITERATION_OPS)."""
    return g.check_work(runs, name="runs", caller=_CALLER, per_item=g.ITERATION_OPS + per_run, item="runs",
                        low=2, high=MAX_RUNS,
                        remedy="Use fewer runs: the 95% interval's half-width shrinks like 1/√runs, so 10⁴ runs "
                               "already give the mean to about 2% of the spread; for more, split the study into "
                               "calls with different seeds, or raise mmopt._base.guards.MAX_WORK.")


def _answers(workload, out, k: int) -> np.ndarray:
    """W x̂ for the k runs of one call, shape (k, m)."""
    if out.answers is not None:
        return np.asarray(out.answers).reshape(k, -1)
    if isinstance(workload, ImplicitWorkload):  # past the mechanism's answer limit: one run at a time
        est = np.asarray(out.estimate).reshape((k, *workload.shape))
        return np.stack([answer(workload, e) for e in est])
    try:  # a closed-form family past the mechanism's answer limit (e.g. prefix(4096)): build W once
        W = workload.explicit_matrix()
    except ValueError as exc:
        raise ValueError(f"{_CALLER}: no answers for '{workload.name}': {exc}") from None
    return np.asarray(out.estimate).reshape(k, -1) @ W.T
