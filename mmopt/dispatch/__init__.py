"""One dispatch point per public operation, the pair's family looked up in one place (:func:`route`).

Notation: see README. ``mmopt.evaluate``, ``expected_error``, ``svd_bound``, ``matrix_mechanism``, ``release`` and
``laplace_mechanism`` accept a workload of any family (:mod:`mmopt.family`: dense, stream, product, residual) with
any strategy :func:`mmopt.optimize` returns for it. :func:`route` turns a pair into (family, W, A): a residual-layer
object becomes the product it stands for; a stream workload keeps its Toeplitz or weighted square-root strategy
(O(n log n) at any n) and otherwise becomes its dense twin up to 4,096 cells; a mixed dense/product pair is densified
up to the same limit. Past it the refusal names the combination that works. :data:`OPS` then says which layer's function
runs each operation for each family. Keeping the dispatch here, above the layers, means none imports another's
public entry points (the structured layer uses the dense one as its reference, never the reverse).
"""

from mmopt.dispatch.handlers import OPS
from mmopt.dispatch.operations import (
    evaluate,
    expected_error,
    laplace_mechanism,
    matrix_mechanism,
    release,
    supports,
    svd_bound,
)
from mmopt.dispatch.routing import StrategyMismatch, as_implicit, gaussian_only, route, stream_native

__all__ = ["OPS", "StrategyMismatch", "as_implicit", "evaluate", "expected_error", "gaussian_only",
           "laplace_mechanism", "matrix_mechanism", "release", "route", "stream_native", "supports", "svd_bound"]
