"""Structured (implicit) linear algebra for workloads and strategies on product domains (mmopt issue 7).

Notation: see README. Workloads and strategies on d attributes are kept as their small per-attribute
factors (unions of Kronecker products, marginals); error, the SVD bound, sensitivity and the mechanism are
computed factor-wise and never form an N×N matrix. Modules: :mod:`.workloads`, :mod:`.census`,
:mod:`.strategies`, :mod:`.analysis` (evaluate), :mod:`.bounds` (svd_bound), :mod:`.algebra` (marginals
algebra), :mod:`.mechanism`, :mod:`.factors`, :mod:`.residual` (residual strategies for marginals at any d:
Xiao et al., NeurIPS 2023). Source: McKenna et al., PVLDB 2018 (HDMM).
"""

from mmopt.structured import residual
from mmopt.structured.analysis import ImplicitErrorReport, evaluate
from mmopt.structured.bounds import Bound, svd_bound
from mmopt.structured.breakdown import term_errors
from mmopt.structured.census import adult_w1, adult_w2, cps_w1, cps_w2, prefix_3d, ranges_2d, sf1, sf1_persons, sf1_plus
from mmopt.structured.mechanism import answer, least_squares, matrix_mechanism
from mmopt.structured.strategies import (
    ImplicitStrategy,
    Sensitivity,
    StrategyProduct,
    kron_strategy,
    marginals_strategy,
    sensitivity,
    union_strategy,
)
from mmopt.structured.workloads import (
    ImplicitWorkload,
    Product,
    identity_total,
    kron,
    lower_marginals,
    marginals,
    predicates,
    union,
)

__all__ = [
    "Bound", "ImplicitErrorReport", "ImplicitStrategy", "ImplicitWorkload", "Product", "Sensitivity",
    "StrategyProduct", "adult_w1", "adult_w2", "answer", "cps_w1", "cps_w2", "evaluate", "identity_total", "kron",
    "kron_strategy", "least_squares", "lower_marginals", "marginals", "marginals_strategy", "matrix_mechanism",
    "predicates", "prefix_3d", "ranges_2d", "sensitivity", "sf1", "sf1_persons", "sf1_plus", "svd_bound",
    "residual", "term_errors", "union", "union_strategy",
]
