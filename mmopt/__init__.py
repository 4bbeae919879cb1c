"""mmopt: the matrix mechanism of Li et al. (PODS 2010) — workloads, strategies, exact error, optimisation.

Notation: see README. The public API is re-exported here; modules are named after the paper's nouns.
"""

from mmopt import solvers, strategy, workload
from mmopt.augment import augment, strictly_improved
from mmopt.error import (
    ErrorReport,
    eigen_structure,
    error_profile,
    evaluate,
    expected_error,
    profile_equivalent,
    query_error,
    supports,
    svd_bound,
)
from mmopt.mechanism import MechanismOutput, factorize, laplace_mechanism, matrix_mechanism, release
from mmopt.optimize import OptimizeResult, optimize
from mmopt.privacy import Privacy
from mmopt.solvers import SolverError
from mmopt.strategy import Strategy
from mmopt.workload import Workload

__version__ = "0.1.0"

__all__ = [
    "MechanismOutput", "OptimizeResult", "augment", "factorize", "laplace_mechanism", "matrix_mechanism",
    "optimize", "release", "solvers", "SolverError", "strictly_improved",
    "ErrorReport", "Privacy", "Strategy", "Workload", "eigen_structure", "error_profile", "evaluate",
    "expected_error", "profile_equivalent", "query_error", "strategy", "supports", "svd_bound", "workload",
]
