"""One dispatch point per public operation: dense workloads and strategies, or implicit (product) ones.

Notation: see README. ``mmopt.evaluate``, ``mmopt.svd_bound`` and ``mmopt.matrix_mechanism`` accept both
kinds. A dense pair goes to :mod:`mmopt.error` / :mod:`mmopt.mechanism` unchanged; a pair with an
implicit side goes to :mod:`mmopt.structured`, which never forms an N×N matrix. Mixed pairs are densified
only when N ≤ 4,096 cells (the structured layer's dense limit); past it they are refused with a remedy.
Keeping the dispatch here, above both layers, means neither imports the other's public entry points
(the structured layer uses the dense one as its reference, never the reverse).
"""

from __future__ import annotations

import dataclasses

from mmopt import _guards as guards
from mmopt import _runtime, error, mechanism
from mmopt._error_common import check_per_query_flag, resolve_norm
from mmopt.structured import _checks as ck
from mmopt.structured import analysis, bounds
from mmopt.structured import mechanism as smech
from mmopt.structured import release as srelease
from mmopt.structured.per_query import per_query_variance
from mmopt.structured.strategies import ImplicitStrategy, normalised, sensitivity_parts
from mmopt.structured.workloads import ImplicitWorkload


def as_implicit(obj):
    """A residual-layer object (:class:`~mmopt.structured.residual.MarginalWorkload`, e.g.
    ``RecordsRelease.workload``, or a :class:`~mmopt.structured.residual.ResidualStrategy`) as the implicit
    workload or strategy it stands for, so that every public entry point takes it as it is; anything else
    unchanged."""
    from mmopt.structured.residual.marginals import WeightedMarginals  # lazy: that subpackage imports this layer
    from mmopt.structured.residual.strategy import ResidualStrategy
    from mmopt.structured.residual.workload import MarginalWorkload
    return obj.to_implicit() if isinstance(obj, MarginalWorkload | ResidualStrategy | WeightedMarginals) else obj


def _kinds(workload, strategy, caller: str):
    """(workload, strategy, implicit?) with a mixed pair densified where that is allowed."""
    workload, strategy = as_implicit(workload), as_implicit(strategy)
    iw, ia = isinstance(workload, ImplicitWorkload), isinstance(strategy, ImplicitStrategy)
    if iw and ia:
        return workload, strategy, True
    if iw:
        if workload.domain_size > ck.DENSE_LIMIT:
            raise ValueError(
                f"{caller}: workload '{workload.name}' is implicit over {workload.domain_size:,} cells but the "
                "strategy is a dense matrix. Build the strategy implicitly too: mmopt.strategy.kron(A1, ..., Ad) "
                "(one factor per attribute) or mmopt.strategy.marginals(shape, theta).")
        return workload.to_workload(), strategy, False
    if ia:
        if strategy.domain_size > ck.DENSE_LIMIT:
            raise ValueError(
                f"{caller}: strategy '{strategy.name}' is implicit over {strategy.domain_size:,} cells but the "
                "workload is dense. Build the workload with mmopt.workload.kron/stack/marginals instead.")
        return workload, strategy.to_strategy(), False
    return workload, strategy, False


def evaluate(workload, strategy, privacy=None, *, norm: str | None = None, per_query: bool | None = None):
    """Exact expected error of the matrix mechanism (Prop. 4.4), for dense or implicit W and A.

    Dense pairs return :class:`mmopt.error.ErrorReport` (see :func:`mmopt.error.evaluate`); implicit pairs
    return :class:`mmopt.structured.ImplicitErrorReport`, whose ``total_exact`` and ``sensitivity_exact``
    say whether a figure is exact or a proven upper bound (never an underestimate).

    Examples
    --------
    >>> import mmopt
    >>> W = mmopt.workload.sf1()                                   # 29,440 cells, 4,151 queries
    >>> A = mmopt.strategy.kron(*[mmopt.strategy.identity(d) for d in W.shape])
    >>> r = mmopt.evaluate(W, A, mmopt.Privacy(1.0))
    >>> round(r.total_squared_error), r.n_queries, r.total_exact   # 2 · (query, cell) incidences
    (2235124, 4151, True)
    """
    from mmopt.toeplitz.error import StreamWorkload  # lazy: the toeplitz layer imports this module's layer
    if isinstance(workload, StreamWorkload):
        return _evaluate_stream(workload, strategy, privacy, norm, per_query)
    W, A, implicit = _kinds(workload, strategy, "evaluate")
    with _runtime.blas_threads(_runtime.default_blas_threads()):
        return _evaluate(W, A, implicit, privacy, norm, per_query)


def _evaluate_stream(W, strategy, privacy, norm, per_query):
    """``mmopt.toeplitz.prefix(n)`` / ``all_range(n)`` (issue 31: refused with a TypeError): Toeplitz and weighted
    square-root strategies by :func:`mmopt.toeplitz.evaluate` (exact, O(n log n), any n); any other strategy
    (dense, or the p-Identity strategy ``optimize(..., method="min_error")`` returns) on the dense twin of the
    workload up to the dense limit."""
    from mmopt.search.pidentity import PIdentityStrategy
    from mmopt.toeplitz import evaluate as toeplitz_evaluate
    from mmopt.toeplitz.strategies import ToeplitzStrategy
    from mmopt.toeplitz.weighted import WeightedSqrtStrategy
    from mmopt.workload import all_range, prefix
    if isinstance(strategy, ToeplitzStrategy | WeightedSqrtStrategy):
        if per_query:
            raise ValueError("evaluate: per_query=True is not available for a Toeplitz strategy on "
                             f"{W.kind}({W.n:,}); its report has the total and the exact maximum.")
        return toeplitz_evaluate(W, strategy, privacy, norm=norm)
    if W.n > ck.DENSE_LIMIT:
        raise ValueError(f"evaluate: strategy '{getattr(strategy, 'name', type(strategy).__name__)}' on {W.kind}"
                         f"({W.n:,}) needs the dense path, which stops at {ck.DENSE_LIMIT:,} cells. Its exact total "
                         "is the objective optimize reported (a p-Identity strategy: "
                         "mmopt.search.pidentity.true_error); "
                         "Toeplitz strategies (mmopt.toeplitz) are evaluated at any n.")
    A = strategy.to_strategy() if isinstance(strategy, PIdentityStrategy) else strategy
    return evaluate((prefix if W.kind == "prefix" else all_range)(W.n), A, privacy, norm=norm, per_query=per_query)


def _evaluate(W, A, implicit: bool, privacy, norm, per_query):
    if not implicit:
        return error.evaluate(W, A, privacy, norm=norm, per_query=per_query)
    check_per_query_flag(per_query, "evaluate", optional=True)
    report = analysis.evaluate(W, A, privacy, norm=norm)
    if per_query:  # opt-in: an implicit workload may have millions of queries
        # c·Δ² of the strategy at a moderate scale (its variances are the same): Δ² itself may overflow
        scaled = normalised(A)
        d = sensitivity_parts(A, resolve_norm(privacy, norm, "evaluate")).rescaled(scaled.shift)
        scale = guards.scaled(d * d, privacy, W.name)
        report = dataclasses.replace(report, per_query_variance=per_query_variance(W, scaled.strategy, scale))
    return report


def expected_error(workload, strategy, privacy=None, *, norm: str | None = None) -> float:
    """Total expected squared error; shorthand for ``evaluate(...).total_squared_error``."""
    W, A, implicit = _kinds(workload, strategy, "expected_error")
    if implicit:
        return analysis.evaluate(W, A, privacy, norm=norm).total_squared_error
    return error.expected_error(W, A, privacy, norm=norm)


def svd_bound(workload, privacy=None, *, per_query: bool = False) -> float:
    """The SVD lower bound c·(Σσᵢ(W))²/n on every strategy's total error (Thm 5.26).

    For an implicit workload it is exact for a single product and for marginals; for other unions it is a
    proven lower bound below the SVD bound (``mmopt.structured.svd_bound(W).exact`` says which, and
    ``.method`` how it was obtained).
    """
    workload = as_implicit(workload)
    from mmopt.toeplitz.error import StreamWorkload  # lazy, as in evaluate
    if isinstance(workload, StreamWorkload):  # closed-form singular values at any n
        from mmopt.toeplitz.bound import svd_bound as stream_svd_bound
        check_per_query_flag(per_query, "svd_bound")
        value = guards.scaled(stream_svd_bound(workload.n, workload.kind), privacy, workload.name)
        return value / workload.n_queries if per_query else value
    if not isinstance(workload, ImplicitWorkload):
        return error.svd_bound(workload, privacy, per_query=per_query)
    check_per_query_flag(per_query, "svd_bound")
    value = bounds.svd_bound(workload, privacy).value
    return value / workload.n_queries if per_query else value


def matrix_mechanism(workload, strategy, x, privacy, *, rng=None, size: int | None = None,
                     reconstruct: str = "least_squares", total: float | None = None, zeros=None,
                     reconstruct_options: dict | None = None):
    """Simulate M_A(W, x) = W A⁺(A x + z), dense or implicit (see :func:`mmopt.mechanism.matrix_mechanism`).

    Implicit pairs reconstruct x̂ factor-wise (product strategies) or by LSMR with a checked residual
    (unions), with memory O(N + Σ factor sizes); ``x`` is flat (N,) or shaped like the domain.
    ``reconstruct`` is "least_squares" (x̂ = A⁺y), "nnls" or "projection" (:mod:`mmopt.reconstruct`), with the
    optional public facts ``total`` (Σh) and ``zeros`` (cells known to be 0); all are post-processing.
    ``reconstruct_options`` = {"tol": …, "max_iterations": …} tunes their solvers (the KKT residual to meet,
    default 1e-7 dense / 1e-8 implicit; the iterative solvers' budget, implicit only).
    **Simulation only**: numpy noise.
    """
    W, A, implicit = _kinds(workload, strategy, "matrix_mechanism")
    kw = dict(rng=rng, size=size, reconstruct=reconstruct, total=total, zeros=zeros,
              reconstruct_options=reconstruct_options)
    with _runtime.heavy_call():  # one BLAS thread; the iterative reconstructions report once they pass 10 s
        if implicit:
            return smech.matrix_mechanism(W, A, x, privacy, **kw)
        return mechanism.matrix_mechanism(W, A, x, privacy, **kw)


def release(workload, strategy, x, privacy, *, noise_scale: float | None = None, reconstruct: str = "least_squares",
            total: float | None = None, zeros=None, reconstruct_options: dict | None = None):
    """Release W x̂ for real data with OpenDP noise and a verified (ε, δ) guarantee, dense or implicit.

    Dense pairs: :func:`mmopt.mechanism.release`. Implicit pairs: :func:`mmopt.structured.release.release`
    (noise on A x at Δ exact or a proven upper bound, rounded upwards; x̂ by factor-wise or LSMR least
    squares, then ``reconstruct`` as in :func:`matrix_mechanism`). Needs OpenDP (``pip install opendp``;
    from a checkout ``pip install -e '.[release]'``).
    """
    from mmopt.toeplitz.error import StreamWorkload  # lazy, as in evaluate
    if isinstance(workload, StreamWorkload):  # prefix sums / all ranges at any n: O(n log n), a Toeplitz strategy
        from mmopt.toeplitz.release import release as stream_release
        from mmopt.toeplitz.strategies import ToeplitzStrategy
        from mmopt.toeplitz.weighted import WeightedSqrtStrategy
        if not isinstance(strategy, ToeplitzStrategy | WeightedSqrtStrategy) and workload.n <= ck.DENSE_LIMIT:
            from mmopt import _workload_core as core  # a dense strategy: the dense twin of a small stream workload
            workload = getattr(core, workload.kind)(workload.n)
        else:
            return stream_release(workload, strategy, x, privacy, noise_scale=noise_scale, reconstruct=reconstruct,
                                  total=total, zeros=zeros, reconstruct_options=reconstruct_options)
    W, A, implicit = _kinds(workload, strategy, "release")
    kw = dict(noise_scale=noise_scale, reconstruct=reconstruct, total=total, zeros=zeros,
              reconstruct_options=reconstruct_options)
    with _runtime.heavy_call():
        if implicit:
            return srelease.release(W, A, x, privacy, **kw)
        return mechanism.release(W, A, x, privacy, **kw)
