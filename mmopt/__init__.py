"""mmopt: the matrix mechanism of Li et al. (PODS 2010) — workloads, strategies, exact error, optimisation.

Notation: see README. The public API is re-exported here; modules are named after the paper's nouns.
"""

from mmopt import _moved, adaptive, participation, plot, solvers, sparse_vector, strategy, structured, workload
from mmopt._base.guards import DataWarning
from mmopt.accounting import Accountant
from mmopt.answers import answers_table
from mmopt.augment import augment, strictly_improved
from mmopt.dispatch import evaluate, expected_error, laplace_mechanism, matrix_mechanism, release, supports, svd_bound
from mmopt.error import (
    ErrorReport,
    NumericalError,
    Unsupported,
    eigen_structure,
    error_profile,
    profile_equivalent,
    query_error,
)
from mmopt.mechanism import MechanismOutput, factorize
from mmopt.montecarlo import MonteCarloResult, monte_carlo
from mmopt.optimize import OptimizeResult, optimize
from mmopt.persist import SavedStrategy, load, save
from mmopt.planning import Plan, plan
from mmopt.privacy import Privacy
from mmopt.search.factorization import FactorizationNorm, factorization_norm
from mmopt.solvers import SolverError
from mmopt.strategy import Strategy
from mmopt.workload import Workload

__version__ = "0.1.0"

__all__ = [
    "Accountant", "answers_table",
    "DataWarning", "ErrorReport", "FactorizationNorm", "MechanismOutput", "MonteCarloResult", "NumericalError",
    "OptimizeResult",
    "Plan", "Privacy", "SavedStrategy", "SolverError", "Strategy", "Unsupported", "Workload",
    "adaptive", "augment", "eigen_structure", "error_profile", "evaluate", "expected_error", "factorization_norm",
    "factorize",
    "laplace_mechanism", "load", "matrix_mechanism", "monte_carlo", "optimize", "participation", "plan", "plot",
    "profile_equivalent", "query_error", "release", "save", "solvers", "sparse_vector", "strategy",
    "sql", "strictly_improved", "structured", "supports", "svd_bound", "workload",
]

_moved.install()  # old paths of moved modules (mmopt.min_error → mmopt.search.min_error) keep working


#: Subpackages reachable as attributes of a bare ``import mmopt`` (imported on first use: they pull in pandas,
#: pyarrow, OpenDP or sqlglot only then).
_SUBPACKAGES = frozenset({"accounting", "adaptive", "answers", "baselines", "groupby", "hierarchy", "multidim",
                          "opendp", "participation", "records", "sparse_vector", "structured", "synth", "toeplitz"})


def __getattr__(name: str):
    if name == "sql":  # lazy: the SQL front-end (mmopt.groupby) imports sqlglot and pandas only when used
        from mmopt.groupby.release import sql

        return sql
    if name in _SUBPACKAGES:  # mmopt.synth.mst(...) after a bare ``import mmopt``, as the docs write it
        import importlib

        return importlib.import_module(f"mmopt.{name}")
    # ``mmopt.hierarchies`` without an import statement found the module while it sat at the root (something
    # had imported it); it still does, through the same deprecated alias as ``import mmopt.hierarchies``
    if f"mmopt.{name}" in _moved.MOVED:
        import importlib

        return importlib.import_module(f"mmopt.{name}")
    raise AttributeError(f"module 'mmopt' has no attribute {name!r}")
