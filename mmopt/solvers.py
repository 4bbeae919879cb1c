"""Discover the SDP solvers usable here, choose one, and run a CVXPY problem with it.

Notation: see README. Every SDP in mmopt goes through :func:`solve`, so solver options, timing and the
mapping of outcomes to cvxpy's status vocabulary live in one place. cvxpy itself (~0.7-1 s to import) and
MOSEK (slow, an optional extra) are imported lazily, inside the functions that need them, so that
``import mmopt`` stays fast for everything that builds no SDP.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import time
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mmopt._base.runtime import bar_delay

if TYPE_CHECKING:  # only for the annotation of solve(); cvxpy is imported where a problem is solved
    import cvxpy as cp

logger = logging.getLogger("mmopt")

#: Preference order among the SDP-capable solvers mmopt knows how to drive.
SDP_SOLVERS = ("MOSEK", "CLARABEL", "SCS", "CVXOPT")

#: Past this size hint, :func:`choose` prefers SCS to CLARABEL. Clarabel's interior-point method factorises a
#: KKT system with a dense block per PSD cone, ~svec(2n)² entries. Program 5.2 on all ranges
#: (benchmarks/bench_sdp.py, 2 shared cores): Clarabel n=32 7.4 s / 0.35 GB, n=64 246 s / 3.6 GB, n=128
#: out of memory (~n⁴); SCS, with G scaled to λ_max = 1, 0.27 s and 8.2 s, under 0.15 GB, agreeing to 1e-6.
#: Iterative methods pass size_hint = 2n: they solve 50-150 SDPs with two cones of side 2n (P1 at n=16:
#: Clarabel ~1 s, SCS ~0.2 s; at n=32: Clarabel ~30 s, SCS ~3 s).
CLARABEL_MAX_N = 24


class SolverError(RuntimeError):
    """A solver crashed or returned no usable solution; the message says what to try instead."""


@dataclass(frozen=True)
class SolveOutcome:
    """What :func:`solve` reports about one solve.

    Attributes
    ----------
    status : str
        cvxpy vocabulary: "optimal", "optimal_inaccurate", "infeasible", "unbounded", "user_limit"
        or "solver_error".
    message : str
        One sentence; says what to try when ``status`` is not "optimal".
    solver : str
        The solver actually used.
    seconds : float
        Wall time of the solve, canonicalisation included.
    iterations : int or None
        The solver's own iteration count, when it reports one.
    """

    status: str
    message: str
    solver: str
    seconds: float
    iterations: int | None

    @property
    def has_solution(self) -> bool:
        """True when the variables hold a (possibly inaccurate) solution."""
        return self.status in ("optimal", "optimal_inaccurate")


@functools.cache
def _mosek_problem() -> str | None:
    """Why MOSEK is unusable here, or None when a tiny SDP solves. Cached: the probe costs ~0.1-1 s."""
    if importlib.util.find_spec("mosek") is None:
        return "the 'mosek' package is not installed"
    import cvxpy as cp  # noqa: PLC0415 -- lazy on purpose: slow to import, needed only for SDPs

    if "MOSEK" not in cp.installed_solvers():
        return "cvxpy does not see MOSEK although the 'mosek' package is installed"
    import mosek  # noqa: PLC0415 -- lazy on purpose: optional and slow to import

    errors: tuple[type[BaseException], ...] = (cp.error.SolverError, mosek.Error)
    x = cp.Variable((2, 2), PSD=True)
    probe = cp.Problem(cp.Minimize(cp.trace(x)), [x[0, 0] >= 1])
    try:
        probe.solve(solver=cp.MOSEK)
    except errors as exc:  # without a licence every solve raises mosek.Error
        return f"MOSEK is installed but a probe solve failed ({exc}); most often the licence is missing"
    if probe.status != cp.OPTIMAL:
        return f"MOSEK is installed but a probe solve ended with status {probe.status!r}"
    return None


def mosek_available() -> bool:
    """Return True when MOSEK is installed *and* licensed (probed once with a tiny SDP, then cached).

    Returns
    -------
    bool

    Examples
    --------
    >>> isinstance(mosek_available(), bool)
    True
    """
    return _mosek_problem() is None


def _installed_solvers() -> frozenset[str]:
    """cvxpy's installed solvers (importing cvxpy here, not at module import)."""
    import cvxpy as cp  # noqa: PLC0415 -- lazy on purpose: slow to import, needed only for SDPs

    return frozenset(cp.installed_solvers())


def available() -> list[str]:
    """List the SDP-capable solvers usable here, most preferred first.

    Returns
    -------
    list of str
        A sub-list of ``["MOSEK", "CLARABEL", "SCS", "CVXOPT"]``; MOSEK only when licensed.

    Examples
    --------
    >>> set(available()) <= {"MOSEK", "CLARABEL", "SCS", "CVXOPT"}
    True
    """
    installed = _installed_solvers()
    out = []
    for name in SDP_SOLVERS:
        if name == "MOSEK":
            if mosek_available():
                out.append(name)
        elif name in installed:
            out.append(name)
    return out


def choose(solver: str | None, *, size_hint: int | None = None) -> str:
    """Pick the solver to use, validating an explicit choice.

    Parameters
    ----------
    solver : str or None
        A solver name (case-insensitive), or None to choose automatically.
    size_hint : int, optional
        The domain size n of the SDP to come (2n for iterative methods that solve many SDPs). With
        ``solver=None`` and size_hint > ``CLARABEL_MAX_N``, SCS is preferred to CLARABEL, whose dense KKT
        system grows like n⁴ in memory and n⁶ in time.

    Returns
    -------
    str
        The upper-case solver name.

    Raises
    ------
    ValueError
        If the name is unknown or the solver is not usable here, or no SDP solver is installed.

    Examples
    --------
    >>> choose("clarabel")
    'CLARABEL'
    >>> choose(None, size_hint=1000)
    'SCS'
    """
    usable = available()
    if solver is None:
        if not usable:
            raise ValueError(
                "choose: no SDP-capable solver is installed. `pip install clarabel scs` (cvxpy's defaults)."
            )
        if "MOSEK" in usable:
            return "MOSEK"
        if size_hint is not None and size_hint > CLARABEL_MAX_N and "SCS" in usable:
            return "SCS"
        return usable[0]
    if not isinstance(solver, str):
        raise ValueError(f"choose: solver must be a str or None. Got {type(solver).__name__} instead.")
    name = solver.strip().upper()
    if name in usable:
        return name
    if name == "MOSEK":
        why = _mosek_problem()
        remedy = "`pip install mosek` (from a checkout: `pip install -e '.[mosek]'`) and install a licence"
    elif name in SDP_SOLVERS:
        why = f"cvxpy does not find {name} installed"
        remedy = f"install {name.lower()}"
    else:
        why = f"mmopt does not know an SDP solver called {solver!r} (known: {list(SDP_SOLVERS)})"
        remedy = "use one of the usable solvers"
    first = usable[0] if usable else "CLARABEL"
    raise ValueError(
        f"solver={solver!r} is not usable here: {why}. Usable SDP solvers: {usable}. "
        f"Pass solver={first!r}, or {remedy}."
    )


def _options(solver: str, tol: float, max_iters: int | None) -> dict:
    """Translate one tolerance into each solver's option names."""
    if solver == "CLARABEL":
        opts = {"tol_gap_abs": tol, "tol_gap_rel": tol, "tol_feas": tol}
        if max_iters is not None:
            opts["max_iter"] = max_iters
    elif solver == "SCS":
        # First-order: 1e-8 would take ~10⁵ iterations; 1e-6 already agrees with CLARABEL to ~1e-5.
        eps = max(tol, 1e-6)
        opts = {"eps_abs": eps, "eps_rel": eps, "max_iters": max_iters or 200_000}
    elif solver == "MOSEK":
        opts = {"mosek_params": {"MSK_DPAR_INTPNT_CO_TOL_REL_GAP": max(tol, 1e-14)}}
    elif solver == "CVXOPT":
        opts = {"abstol": tol, "reltol": tol, "feastol": max(tol, 1e-10)}
        if max_iters is not None:
            opts["max_iters"] = max_iters
    else:
        opts = {}
    return opts


def _crash_types() -> tuple[type[BaseException], ...]:
    """Exception classes that mean "the solver failed" (never a bare except)."""
    import cvxpy as cp  # noqa: PLC0415 -- lazy on purpose: slow to import, needed only for SDPs

    types: tuple[type[BaseException], ...] = (cp.error.SolverError,)
    if importlib.util.find_spec("mosek") is not None:
        import mosek  # noqa: PLC0415 -- only when installed

        types += (mosek.Error,)
    return types


@functools.cache
def _status_map() -> dict[str, str]:
    """cvxpy's raw statuses → the vocabulary of :class:`SolveOutcome` (built on first solve)."""
    import cvxpy.settings as cps  # noqa: PLC0415 -- lazy on purpose: slow to import, needed only for SDPs

    return {
        cps.OPTIMAL: "optimal",
        cps.OPTIMAL_INACCURATE: "optimal_inaccurate",
        cps.INFEASIBLE: "infeasible",
        cps.INFEASIBLE_INACCURATE: "infeasible",
        cps.UNBOUNDED: "unbounded",
        cps.UNBOUNDED_INACCURATE: "unbounded",
        cps.INFEASIBLE_OR_UNBOUNDED: "infeasible",
        cps.USER_LIMIT: "user_limit",
        cps.SOLVER_ERROR: "solver_error",
    }


def solve(
    problem: cp.Problem,
    solver: str,
    *,
    tol: float = 1e-8,
    max_iters: int | None = None,
    verbose: bool = False,
    what: str = "the SDP",
) -> SolveOutcome:
    """Solve a cvxpy problem with ``solver`` and report the outcome in cvxpy's status vocabulary.

    Parameters
    ----------
    problem : cvxpy.Problem
    solver : str
        A name returned by :func:`choose`.
    tol : float
        Target accuracy, translated to the solver's options (SCS is floored at 1e-6).
    max_iters : int, optional
        Iteration cap for the solver.
    verbose : bool
        Pass cvxpy's verbose flag through.
    what : str
        Names the problem in the message.

    Returns
    -------
    SolveOutcome
        Never raises on solver failure: a crash is reported as ``status="solver_error"``.
    """
    others = [s for s in available() if s != solver]
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            # cvxpy warns "Solution may be inaccurate"; the status "optimal_inaccurate" already says so.
            warnings.filterwarnings("ignore", message="Solution may be inaccurate", category=UserWarning)
            # the solver's own printout (to stdout) only on an explicit verbose=True, never under "auto" progress
            problem.solve(solver=solver, verbose=verbose and bar_delay() == 0.0, **_options(solver, tol, max_iters))
    except _crash_types() as exc:
        seconds = time.perf_counter() - start
        msg = f"{solver} failed on {what}: {exc}. Try another solver ({others}); SCS needs the least memory."
        return SolveOutcome("solver_error", msg, solver, seconds, None)
    seconds = time.perf_counter() - start
    status = _status_map().get(problem.status, "solver_error")
    stats = problem.solver_stats
    iterations = getattr(stats, "num_iters", None) if stats is not None else None
    if status == "optimal_inaccurate" and max_iters is not None and iterations is not None and iterations >= max_iters:
        status = "user_limit"  # SCS says "inaccurate" where its iteration cap stopped it (Clarabel says the limit)
    if status == "optimal":
        msg = f"{solver} solved {what} to optimality."
    elif status == "optimal_inaccurate":
        msg = (
            f"{solver} returned an inaccurate solution of {what} (status optimal_inaccurate): it stopped "
            f"before meeting its tolerances. Check the result, or retry with another solver ({others})."
        )
    elif status == "user_limit":
        msg = f"{solver} hit its iteration or time limit on {what}. Raise the limit or try {others}."
    elif status in ("infeasible", "unbounded"):
        msg = (
            f"{solver} reports {what} {status} (raw status {problem.status!r}). Check the input and any "
            f"constraints you added; a numerically hard input may also need another solver ({others})."
        )
    else:
        msg = f"{solver} returned no solution for {what} (raw status {problem.status!r}). Try {others}."
    logger.debug("%s on %s: %s in %.3f s (%s iterations)", solver, what, status, seconds, iterations)
    return SolveOutcome(status, msg, solver, seconds, iterations)
