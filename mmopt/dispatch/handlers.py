"""Which layer's function runs each public operation for each family (:data:`OPS`), and the small adapters between
the public signatures and the layers' own (:mod:`mmopt.dispatch.operations` looks them up)."""

from __future__ import annotations

import dataclasses
import math

from mmopt import error, mechanism
from mmopt._base import guards
from mmopt.dense._error_common import check_per_query_flag, resolve_norm
from mmopt.structured import _checks as ck
from mmopt.structured import analysis, bounds
from mmopt.structured import mechanism as smech
from mmopt.structured import release as srelease
from mmopt.structured._normalised import normalised
from mmopt.structured.per_query import per_query_variance
from mmopt.structured.strategies import sensitivity_parts


def _evaluate_dense(W, A, privacy, norm, per_query):
    return error.evaluate(W, A, privacy, norm=norm, per_query=per_query)


def product_twin_report(workload, strategy, privacy, norm, caller: str):
    """The dense :class:`~mmopt.error.ErrorReport` of a dense product workload built from its Gram alone (no rows:
    ``kron(all_range(64), all_range(64))``, 4.3 million queries on 4,096 cells) with an implicit strategy on the
    same attributes, from its product twin when that is exact; else None (the dense path then runs).

    Why: without W's rows the dense path cannot list a query's variance, so it reported no largest variance, and
    it formed the N×N strategy (53 s at 4,096 cells); one cell more and the implicit pair gave both exactly in
    0.35 s. The twin's figures are the same quantities (same G, same A) computed factor by factor.
    """
    from mmopt.dense._workload_type import Workload  # lazy: the public workload module imports this layer's peers
    from mmopt.structured.strategies import ImplicitStrategy
    from mmopt.workload import structure_of
    if not (isinstance(workload, Workload) and workload.matrix is None and isinstance(strategy, ImplicitStrategy)):
        return None
    twin = structure_of(workload)
    if twin is None or tuple(twin.shape) != tuple(strategy.shape):
        return None  # another attribute order: route() says so
    r = analysis.evaluate(twin, strategy, privacy, norm=norm, caller=caller)
    if not (r.total_exact and r.sensitivity_exact and 0.0 < r.total_squared_error < math.inf):
        return None
    return error.ErrorReport(workload.name, r.strategy, privacy, r.domain_size, r.n_queries, r.sensitivity,
                             r.total_squared_error, math.log10(r.total_squared_error), r.mean_squared_error, r.rmse,
                             r.max_variance, r.max_variance_upper, bool(r.max_variance_exact),
                             sensitivity_norm=r.sensitivity_norm)


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

    # mmopt.evaluate's unit privacy is Δ₁'s, as for the same strategy as a matrix (and per_query=True below);
    # mmopt.toeplitz.evaluate's own default, Δ₂, gave tree(8, 2) on prefix(8) 21.9 here and 87.8 as a matrix
    from mmopt.toeplitz.weighted import WeightedSqrtStrategy
    if privacy is None and norm is None:  # a Gaussian-only strategy (the weighted square root) at Δ₂, as the
        # hierarchy's and the orbit's: its Δ₁ is not computed, and evaluate(W, A) refused it under l1
        norm = "l2" if isinstance(A, WeightedSqrtStrategy) else "l1"
    if per_query and W.n <= ck.DENSE_LIMIT:  # each query's error: on the dense twin, the same strategy as a matrix
        return error.evaluate(W.to_workload(), A.to_strategy(), privacy, norm=norm, per_query=True)
    if per_query:
        raise ValueError("evaluate: per_query=True is not available for a Toeplitz strategy on "
                         f"{W.kind}({W.n:,}) (past {ck.DENSE_LIMIT:,} cells); its report has the total and the exact "
                         "maximum.")
    return toeplitz_evaluate(W, A, privacy, norm=norm)


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


def _simulate_stream(W, A, x, privacy, **kw):
    if W.n <= ck.DENSE_LIMIT:  # on the dense twin, the same strategy as a matrix
        return mechanism.matrix_mechanism(W.to_workload(), A.to_strategy(), x, privacy, **kw)
    raise ValueError(f"matrix_mechanism: a Toeplitz strategy on {W.kind}({W.n:,}) is released, not simulated, past "
                     f"{ck.DENSE_LIMIT:,} cells: use mmopt.release (OpenDP noise, O(n log n)).")


def _release_stream(W, A, x, privacy, **kw):  # prefix sums / all ranges at any n: O(n log n), a Toeplitz strategy
    from mmopt.toeplitz.release import release as stream_release
    return stream_release(W, A, x, privacy, **kw)


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
    from mmopt.hierarchy.workload import HierarchyWorkload
    from mmopt.structured.orbit_release import release as orbit_release
    _least_squares_only("an OrbitStrategy", reconstruct, total, zeros, reconstruct_options)
    if isinstance(W, HierarchyWorkload):
        # grouping sets answer per set, unweighted, whatever the strategy (a HierarchyRelease): an orbit plan gave
        # the union's flat answers with each set scaled by its weight (3× the counts at weight 3; a helper's audit)
        from mmopt.hierarchy.release import orbit_release as grouping_orbit_release
        return grouping_orbit_release(W, A, x, privacy, noise_scale)
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


#: Which layer's function runs each operation for each family (a residual pair arrives as its product).
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
