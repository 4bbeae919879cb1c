"""Internal hand-off type between an optimisation algorithm and :func:`mmopt.optimize`.

Notation: see README. Every algorithm module (``l2_fast``, ``sdp_l2``, ``sdp_min_error``,
``min_sensitivity``, ``local_search``) returns a :class:`RawSolution`; ``optimize`` re-evaluates the
strategy exactly with :mod:`mmopt.error` and wraps it in the public ``OptimizeResult``. Keeping the
solver's own numbers out of the public objective is deliberate: SCS, for one, returns slightly
infeasible points whose reported objective falls below the true optimum.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# cvxpy's status vocabulary, plus "user_limit" for an iteration/time budget that ran out, and mmopt's
# "local_optimum" / "closed_form" for what converged without a certificate (see mmopt._base.result.reconcile).
STATUSES = ("optimal", "closed_form", "local_optimum", "optimal_inaccurate", "user_limit", "infeasible",
            "unbounded", "solver_error")
# What convergence means for the local heuristics (their status is "local_optimum" unless the bound certifies
# more); every message that reports it says so. A definition, not a verdict: the sentence after it says how
# many runs converged and how many hit their budget (it used to read "Converged …: the test passed" beside
# "1 of 1 run(s) hit max_iterations", status "user_limit").
CONVERGED_MEANS = ("A run converges to a local optimum when L-BFGS-B's convergence test passes (projected gradient "
                   "or relative decrease below tol)")


def worst_status(statuses) -> str:
    """The least successful of several stage statuses, in the order of :data:`STATUSES`.

    A result built from several runs is only as converged as its least converged run: "user_limit"
    outranks "optimal_inaccurate" because a run cut short might have ended lower.

    Examples
    --------
    >>> worst_status(["optimal", "user_limit", "optimal_inaccurate"])
    'user_limit'
    """
    return max(statuses, key=STATUSES.index, default="optimal")


@dataclass(frozen=True, eq=False)
class RawSolution:
    """An algorithm's answer before exact re-evaluation.

    Attributes
    ----------
    matrix : ndarray of shape (p, n) or None
        The strategy A, when the method produces one.
    gram : ndarray of shape (n, n) or None
        X = AᵀA, when the method produces a Gram matrix instead (L2 methods). At least one of
        ``matrix`` and ``gram`` is set.
    status : str
        One of :data:`STATUSES`.
    message : str
        A human sentence; says what to try when ``status`` is not ``"optimal"``.
    iterations : int or None
        Solver iterations, or outer iterations for iterative heuristics.
    solver : str or None
        The solver actually used ("CLARABEL", "SCS", "MOSEK", "mmopt-l2-newton", ...), None for closed forms.
    dual_bound : float or None
        A certified lower bound on the method's own objective at unit privacy, when one is known.
    history : tuple of dict
        One record per outer iteration (e.g. ``{"iteration": 3, "objective": 20.1, "rank_gap": 1e-7}``).
    extra : dict
        Anything else worth keeping (raw solver statistics).
    """

    matrix: np.ndarray | None
    gram: np.ndarray | None
    status: str
    message: str
    iterations: int | None
    solver: str | None
    dual_bound: float | None = None
    history: tuple[Mapping[str, Any], ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.matrix is None and self.gram is None:
            raise ValueError("RawSolution needs a strategy matrix or a Gram matrix; got neither.")
        if self.status not in STATUSES:
            raise ValueError(f"RawSolution.status must be one of {STATUSES}. Got {self.status!r} instead.")


@dataclass(frozen=True, eq=False)
class ImplicitSolution:
    """A multi-dimensional optimiser's answer (OPT_⊗, OPT_+, OPT_M) before exact re-evaluation.

    Attributes
    ----------
    strategy : mmopt.structured.ImplicitStrategy
        The strategy found (a product, a union of products, or weighted marginals).
    status, message, iterations, solver, history, extra
        As in :class:`RawSolution`; ``status`` is one of :data:`STATUSES`, "optimal" only when every
        convergence test the method runs passed.
    lower_bound : float or None
        A certified lower bound on the *total* error (unit privacy, the method's norm) of every strategy,
        when the method proves one beyond the SVD bound; None otherwise.
    """

    strategy: Any
    status: str
    message: str
    iterations: int | None
    solver: str | None
    lower_bound: float | None = None
    history: tuple[Mapping[str, Any], ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"ImplicitSolution.status must be one of {STATUSES}. Got {self.status!r} instead.")


def check_raw_solution(raw, method_name: str, caller: str = "optimize") -> RawSolution:
    """``raw`` if it is what a method must return (a :class:`RawSolution`), else a TypeError saying so.

    A custom ``method=f`` passed to :func:`mmopt.optimize` is called as ``f(workload, G, options)`` and must
    return ``RawSolution(matrix, gram, status, message, iterations, solver)``; anything else (None, a
    matrix, a number) used to fail deep inside with an AttributeError.
    """
    if isinstance(raw, RawSolution):
        return raw
    hint = (" To return a strategy matrix A, wrap it: RawSolution(A, None, 'optimal', 'my method', None, None)."
            if isinstance(raw, np.ndarray) else "")
    raise TypeError(
        f"The 'method' parameter of {caller} is a callable ({method_name!r}) that must return a "
        "mmopt._base.solution.RawSolution (fields matrix or gram, status, message, iterations, solver). "
        f"Got {type(raw).__name__} instead.{hint}")
