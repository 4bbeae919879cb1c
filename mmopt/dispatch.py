"""One dispatch point per public operation, the pair's family looked up in one place (:func:`route`).

Notation: see README. ``mmopt.evaluate``, ``expected_error``, ``svd_bound``, ``matrix_mechanism`` and ``release``
accept a workload of any family (:mod:`mmopt.family`: dense, stream, product, residual) with any strategy
:func:`mmopt.optimize` returns for it. :func:`route` turns a pair into (family, W, A): a residual-layer object
becomes the product it stands for; a stream workload keeps its Toeplitz or weighted square-root strategy (O(n log n)
at any n) and otherwise becomes its dense twin up to 4,096 cells; a mixed dense/product pair is densified up to
the same limit. Past it the refusal names the combination that works. :data:`OPS` then says which layer's function
runs each operation for each family. Keeping the dispatch here, above the layers, means none imports another's
public entry points (the structured layer uses the dense one as its reference, never the reverse).
"""

from __future__ import annotations

import dataclasses
import math

from mmopt import error, mechanism
from mmopt._base import guards
from mmopt._base import runtime as _runtime
from mmopt.dense._error_common import check_per_query_flag, resolve_norm
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
        from mmopt.workload import structure_of
        # a dense product workload remembers its attributes: cell i must mean the same values in both
        twin = structure_of(workload)
        if twin is not None and len(strategy.shape) > 1 and tuple(twin.shape) != tuple(strategy.shape):
            raise ValueError(
                f"{caller}: workload '{workload.name}' is over the domain {tuple(twin.shape)} and strategy "
                f"'{strategy.name}' over {tuple(strategy.shape)}: the same {strategy.domain_size:,} cells in another "
                "attribute order. Build the strategy's factors in the workload's attribute order.")
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
    family, W, A = route(workload, strategy, "evaluate")
    with _runtime.blas_threads(_runtime.default_blas_threads()):
        return OPS[family]["evaluate"](W, A, privacy, norm, per_query)


class StrategyMismatch(TypeError, ValueError):
    """A strategy of a type this workload's family cannot take at its size (a TypeError by kind, a ValueError by
    size: ``except`` either catches it)."""


def _stream_native(strategy) -> bool:
    from mmopt.toeplitz.strategies import ToeplitzStrategy
    from mmopt.toeplitz.weighted import WeightedSqrtStrategy
    return isinstance(strategy, ToeplitzStrategy | WeightedSqrtStrategy)


def route(workload, strategy, caller: str):
    """(family, W, A) for a (workload, strategy) pair, with W and A as that family's layer takes them.

    ``mmopt.toeplitz.prefix(n)`` / ``all_range(n)`` (and ``workload.prefix(n)`` past 10,000 cells) keep Toeplitz and
    weighted square-root strategies (exact, O(n log n), any n); any other strategy (dense, or the p-Identity
    strategy ``optimize(..., method="min_error")`` returns) goes with the dense twin of the workload up to the dense
    limit. ``strategy`` None: the workload alone (:func:`svd_bound`).
    """
    from mmopt.family import family_of
    from mmopt.search.pidentity import PIdentityStrategy

    if _orbit(strategy):  # a max-variance plan past the dense limit: held by its symmetry blocks
        return "orbit", workload, strategy
    workload, strategy = as_implicit(workload), as_implicit(strategy)
    family = family_of(workload, caller).name
    if family == "hierarchy" or _hierarchical(strategy):
        return _route_hierarchy(workload, strategy, caller)
    if family == "stream":
        if strategy is None or _stream_native(strategy):
            return "stream", workload, strategy
        if workload.n > ck.DENSE_LIMIT:
            # "the dense path stops at 4,096 cells" was not true of workload.prefix(n), dense up to 10,000 cells
            from mmopt.workload import STREAM_FROM  # lazy: the public workload module imports this layer's peers
            dense = (f"up to {ck.DENSE_LIMIT:,} cells from a stream workload; mmopt.workload.{workload.kind}"
                     f"({workload.n:,}) is the dense workload itself (O(n³) to evaluate)" if workload.n < STREAM_FROM
                     else f"which no workload of more than {STREAM_FROM - 1:,} cells takes")
            raise StrategyMismatch(
                f"The 'strategy' parameter of {caller} must be a ToeplitzStrategy for a workload of "
                f"{workload.kind}({workload.n:,}) cells, or a weighted square root (mmopt.toeplitz; "
                f"optimize(W, privacy=Privacy(ε, δ)) returns one): a {type(strategy).__name__} needs the dense "
                f"path, {dense}. A p-Identity strategy's exact total is the objective optimize reported "
                "(mmopt.search.pidentity.true_error).")
        workload = workload.to_workload()
        if isinstance(strategy, PIdentityStrategy):
            strategy = strategy.to_strategy()
    if strategy is None:
        return ("product" if isinstance(workload, ImplicitWorkload) else "dense"), workload, None
    if family == "dense" and _stream_native(strategy):
        # what optimize(workload.prefix(n), method="toeplitz" | "weighted_sqrt") returns: with its dense workload it
        # was refused as "must be a 2-D array". Prefix sums or all ranges (rows checked) take the stream path, any
        # other workload of n cells the strategy's matrix.
        from mmopt.toeplitz.error import as_stream_workload
        try:
            return "stream", as_stream_workload(workload, caller), strategy
        except TypeError:
            strategy = strategy.to_strategy()
    W, A, implicit = _kinds(workload, strategy, caller)
    return ("product" if implicit else "dense"), W, A


def _orbit(strategy) -> bool:
    from mmopt.structured.orbit_strategy import OrbitStrategy
    return isinstance(strategy, OrbitStrategy)


def _hierarchical(strategy) -> bool:
    from mmopt.hierarchy.nodes import NodeStrategy
    from mmopt.hierarchy.strategy import HierarchyStrategy
    return isinstance(strategy, HierarchyStrategy | NodeStrategy)


def _route_hierarchy(workload, strategy, caller: str):
    """A grouping-sets workload with its own strategy (or none) stays in its family; any other pairing goes
    through the union of Kronecker products the workload stands for."""
    from mmopt.hierarchy.detect import from_implicit
    from mmopt.hierarchy.workload import HierarchyWorkload
    if isinstance(workload, HierarchyWorkload) and (strategy is None or _hierarchical(strategy)):
        return "hierarchy", workload, strategy
    if _hierarchical(strategy):
        W = from_implicit(workload)
        if W is not None:
            return "hierarchy", W, strategy
    if _hierarchical(strategy):
        raise StrategyMismatch(f"The 'strategy' parameter of {caller}: a HierarchyStrategy pairs with the grouping "
                               f"sets it was optimised for (a HierarchyWorkload, or the union of Kronecker products "
                               f"of level matrices it stands for). Got {type(workload).__name__}.")
    return route(workload.to_implicit(), strategy, caller)


def _evaluate_dense(W, A, privacy, norm, per_query):
    return error.evaluate(W, A, privacy, norm=norm, per_query=per_query)


def _evaluate_product(W, A, privacy, norm, per_query):
    check_per_query_flag(per_query, "evaluate", optional=True)
    report = analysis.evaluate(W, A, privacy, norm=norm)
    if per_query and not A.is_product and A.domain_size <= ck.DENSE_LIMIT and \
            W.n_queries * A.domain_size <= ck.MAX_DENSE_ENTRIES:
        # a union on few cells: the dense twins list any pair's (per_query_variance refused it, though its message
        # promised the dense path at this size; a helper's probe)
        dense = error.evaluate(W.to_workload(), A.to_strategy(), privacy, norm=norm, per_query=True)
        return dataclasses.replace(report, per_query_variance=dense.per_query_variance)
    if per_query:  # opt-in: an implicit workload may have millions of queries
        # c·Δ² of the strategy at a moderate scale (its variances are the same): Δ² itself may overflow
        scaled = normalised(A)
        d = sensitivity_parts(A, resolve_norm(privacy, norm, "evaluate")).rescaled(scaled.shift)
        scale = guards.scaled(d * d, privacy, W.name)
        report = dataclasses.replace(report, per_query_variance=per_query_variance(W, scaled.strategy, scale))
    return report


def _evaluate_stream(W, A, privacy, norm, per_query):
    from mmopt.toeplitz import evaluate as toeplitz_evaluate
    if per_query and W.n <= ck.DENSE_LIMIT:  # each query's error: on the dense twin, the same strategy as a matrix
        return error.evaluate(W.to_workload(), A.to_strategy(), privacy, norm=norm, per_query=True)
    if per_query:
        raise ValueError("evaluate: per_query=True is not available for a Toeplitz strategy on "
                         f"{W.kind}({W.n:,}) (past {ck.DENSE_LIMIT:,} cells); its report has the total and the exact "
                         "maximum.")
    return toeplitz_evaluate(W, A, privacy, norm=norm)


def expected_error(workload, strategy, privacy=None, *, norm: str | None = None) -> float:
    """Total expected squared error; shorthand for ``evaluate(...).total_squared_error``."""
    family, W, A = route(workload, strategy, "expected_error")
    if family == "dense":  # the dense path's own shorthand skips the per-query report
        return error.expected_error(W, A, privacy, norm=norm)
    return evaluate(W, A, privacy, norm=norm).total_squared_error


def svd_bound(workload, privacy=None, *, per_query: bool = False) -> float:
    """The SVD lower bound c·(Σσᵢ(W))²/n on every strategy's total error (Thm 5.26).

    For an implicit workload it is exact for a single product and for marginals; for other unions it is a
    proven lower bound below the SVD bound (``mmopt.structured.svd_bound(W).exact`` says which, and
    ``.method`` how it was obtained).
    """
    family, W, _ = route(workload, None, "svd_bound")
    return OPS[family]["svd_bound"](W, privacy, per_query)


def _svd_bound_dense(W, privacy, per_query):
    # a dense workload kron/stack/marginals built remembers its product: from the factors' spectra when that is
    # exact and not itself dense (kron(prefix(64), prefix(64)): one N×N eigh, ~60 s, against milliseconds)
    from mmopt.workload import structure_of  # lazy: the public workload module imports this layer's peers
    twin = structure_of(W)
    if twin is not None:
        check_per_query_flag(per_query, "svd_bound")
        # never its own N×N eigh (dense_limit 0: the fallback below does that, with its warnings), and the root Gram
        # only where it is smaller than G
        b = bounds.svd_bound(twin, privacy, dense_limit=0, root_limit=W.domain_size - 1)
        if b.exact and math.isfinite(b.value):
            return b.value / W.n_queries if per_query else b.value
    return error.svd_bound(W, privacy, per_query=per_query)


def _svd_bound_product(W, privacy, per_query):
    check_per_query_flag(per_query, "svd_bound")
    value = bounds.svd_bound(W, privacy).value
    return value / W.n_queries if per_query else value


def _svd_bound_stream(W, privacy, per_query):  # closed-form singular values at any n
    from mmopt.toeplitz.bound import svd_bound as stream_svd_bound
    check_per_query_flag(per_query, "svd_bound")
    value = guards.scaled(stream_svd_bound(W.n, W.kind), privacy, W.name)
    return value / W.n_queries if per_query else value


def matrix_mechanism(workload, strategy, x, privacy, *, rng=None, size: int | None = None,
                     reconstruct: str = "least_squares", total: float | None = None, zeros=None,
                     reconstruct_options: dict | None = None):
    """Simulate M_A(W, x) = W A⁺(A x + z), dense or implicit (see :func:`mmopt.mechanism.matrix_mechanism`).

    Implicit pairs reconstruct x̂ factor-wise (product strategies) or by LSMR with a checked residual
    (unions), with memory O(N + Σ factor sizes); ``x`` is flat (N,) or shaped like the domain, and the
    output's ``estimate`` is shaped like the domain (a dense pair's is flat: :func:`release`'s docstring).
    ``reconstruct`` is "least_squares" (x̂ = A⁺y), "nnls" or "projection" (:mod:`mmopt.reconstruct`), with the
    optional public facts ``total`` (Σh) and ``zeros`` (cells known to be 0); all are post-processing.
    ``reconstruct_options`` = {"tol": …, "max_iterations": …} tunes their solvers (the KKT residual to meet,
    default 1e-7 dense / 1e-8 implicit; the iterative solvers' budget, implicit only).
    **Simulation only**: numpy noise.
    """
    family, W, A = route(workload, strategy, "matrix_mechanism")
    kw = dict(rng=rng, size=size, reconstruct=reconstruct, total=total, zeros=zeros,
              reconstruct_options=reconstruct_options)
    with _runtime.heavy_call():  # one BLAS thread; the iterative reconstructions report once they pass 10 s
        return OPS[family]["matrix_mechanism"](W, A, x, privacy, **kw)


def _simulate_stream(W, A, x, privacy, **kw):
    if W.n <= ck.DENSE_LIMIT:  # on the dense twin, the same strategy as a matrix
        return mechanism.matrix_mechanism(W.to_workload(), A.to_strategy(), x, privacy, **kw)
    raise ValueError(f"matrix_mechanism: a Toeplitz strategy on {W.kind}({W.n:,}) is released, not simulated, past "
                     f"{ck.DENSE_LIMIT:,} cells: use mmopt.release (OpenDP noise, O(n log n)).")


def release(workload, strategy, x, privacy, *, noise_scale: float | None = None, reconstruct: str = "least_squares",
            total: float | None = None, zeros=None, reconstruct_options: dict | None = None):
    """Release W x̂ for real data with OpenDP noise and a verified (ε, δ) guarantee, dense or implicit.

    Dense pairs: :func:`mmopt.mechanism.release`. Implicit pairs: :func:`mmopt.structured.release.release`
    (noise on A x at Δ exact or a proven upper bound, rounded upwards; x̂ by factor-wise or LSMR least
    squares, then ``reconstruct`` as in :func:`matrix_mechanism`). Needs OpenDP (``pip install opendp``;
    from a checkout ``pip install -e '.[release]'``).

    The output's ``estimate`` x̂ is flat (n,) for a dense workload and shaped like the domain (n₁, …, n_d) for
    an implicit one — ``kron``, ``stack`` and ``marginals`` return implicit workloads past 4,096 cells, so
    ``out.estimate.ravel()`` (C order, as ``x`` flat) is the form that reads the same at every size.
    """
    family, W, A = route(workload, strategy, "release")
    kw = dict(noise_scale=noise_scale, reconstruct=reconstruct, total=total, zeros=zeros,
              reconstruct_options=reconstruct_options)
    with _runtime.heavy_call():
        return OPS[family]["release"](W, A, x, privacy, **kw)


def _release_stream(W, A, x, privacy, **kw):  # prefix sums / all ranges at any n: O(n log n), a Toeplitz strategy
    from mmopt.toeplitz.release import release as stream_release
    return stream_release(W, A, x, privacy, **kw)


#: Which layer's function runs each operation for each family (a residual pair arrives as its product).
def _simulate_hierarchy(W, A, x, privacy, **kw):
    raise ValueError("matrix_mechanism: a hierarchy or orbit strategy is released, not simulated: use mmopt.release "
                     "(OpenDP noise; its answers carry their exact variances).")


def _least_squares_only(what: str, reconstruct, total, zeros, reconstruct_options) -> None:
    """A family that releases the least-squares answers refuses the reconstruction arguments (options too: they
    were dropped silently, where the dense path refuses least squares' options)."""
    if reconstruct != "least_squares" or total is not None or zeros is not None or reconstruct_options:
        raise ValueError(f"release: {what} releases the least-squares answers (exact variances); reconstruct, "
                         "total, zeros and reconstruct_options are not available for it. Drop them.")


def _release_hierarchy(W, A, x, privacy, *, noise_scale=None, reconstruct="least_squares", total=None, zeros=None,
                       reconstruct_options=None):
    from mmopt.hierarchy.release import release as hierarchy_release
    _least_squares_only("a hierarchy strategy", reconstruct, total, zeros, reconstruct_options)
    return hierarchy_release(W, A, x, privacy, noise_scale=noise_scale)


def _release_orbit(W, A, x, privacy, *, noise_scale=None, reconstruct="least_squares", total=None, zeros=None,
                   reconstruct_options=None):
    from mmopt.structured.orbit_release import release as orbit_release
    _least_squares_only("an OrbitStrategy", reconstruct, total, zeros, reconstruct_options)
    return orbit_release(W, A, x, privacy, noise_scale=noise_scale)


def _evaluate_orbit(W, A, privacy, norm, per_query):
    from mmopt.structured.orbit_release import evaluate as orbit_evaluate
    if norm not in (None, "l2"):
        raise ValueError(f"evaluate: an OrbitStrategy is a Gaussian-noise strategy; norm must be 'l2'. Got {norm!r}.")
    return orbit_evaluate(W, A, privacy)


def _evaluate_hierarchy(W, A, privacy, norm, per_query):
    from mmopt.hierarchy.report import evaluate as hierarchy_evaluate
    return hierarchy_evaluate(W, A, privacy, norm, per_query)


def _svd_bound_hierarchy(W, privacy, per_query):
    from mmopt.hierarchy.report import svd_bound as hierarchy_svd_bound
    return hierarchy_svd_bound(W, privacy, per_query)


OPS = {
    "dense": {"evaluate": _evaluate_dense, "svd_bound": _svd_bound_dense,
              "matrix_mechanism": mechanism.matrix_mechanism, "release": mechanism.release},
    "product": {"evaluate": _evaluate_product, "svd_bound": _svd_bound_product,
                "matrix_mechanism": smech.matrix_mechanism, "release": srelease.release},
    "hierarchy": {"evaluate": _evaluate_hierarchy, "svd_bound": _svd_bound_hierarchy,
                  "matrix_mechanism": _simulate_hierarchy, "release": _release_hierarchy},
    "orbit": {"evaluate": _evaluate_orbit, "svd_bound": _svd_bound_product,
              "matrix_mechanism": _simulate_hierarchy, "release": _release_orbit},
    "stream": {"evaluate": _evaluate_stream, "svd_bound": _svd_bound_stream,
               "matrix_mechanism": _simulate_stream, "release": _release_stream},
}
