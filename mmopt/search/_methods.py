"""The registry behind :func:`mmopt.optimize`: each method's function, the options it reads, their checks.

Notation: see README. Every method hands back a :class:`~mmopt._base.solution.RawSolution` for the normalised
Gram G (mean diagonal 1); :func:`mmopt.optimize` re-evaluates it exactly. An option or keyword parameter
a method does not read is refused, naming the method and what it does read: silently ignoring
``options={"engine": "warp"}`` or ``max_iterations`` on a closed form would let a user believe it acted.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from mmopt import strategy as st
from mmopt._base.solution import RawSolution
from mmopt.dense.profile import power_of_two_scale
from mmopt.search import min_error
from mmopt.workload import Workload

__all__ = ["DEFAULT_NORM", "METHODS", "OPTIONS", "check_options", "check_seed"]

MethodFn = Callable[[Workload, np.ndarray, dict], RawSolution]
_CLOSED_MESSAGE = ("Closed-form strategy: built, not searched (no iterations, no solver); compare objective with "
                   "lower_bound for how far from optimal it is.")


def _closed(matrix_fn) -> MethodFn:
    def method(W: Workload, G: np.ndarray, opts: dict) -> RawSolution:
        return RawSolution(matrix_fn(W), None, "optimal", _CLOSED_MESSAGE, None, None)
    return method


def _l2_approx(W: Workload, G: np.ndarray, opts: dict) -> RawSolution:
    engine = opts.get("engine", "auto")
    if engine == "auto":  # the paper's SDP where it is cheap, the certified fast solvers beyond (same problem)
        tridiagonal = W.family in ("prefix", "all_range") and W.domain_size >= TRIDIAGONAL_MIN_N
        engine = "sdp" if (_sdp_is_cheap(W.domain_size) or opts.get("solver")) else \
            "tridiagonal" if tridiagonal else "fast"
    if engine == "sdp":
        from mmopt.search.sdp_l2 import solve_l2_sdp
        return solve_l2_sdp(G, solver=opts.get("solver"), tol=opts.get("tol") or 1e-8,
                            max_iterations=opts.get("max_iterations"), verbose=opts["verbose"])
    if opts.get("solver"):
        raise ValueError(f"The 'solver' parameter of optimize does not apply to method='l2_approx' with engine='fast' "
                         f"(no SDP is solved). Got solver={opts['solver']!r}; drop it, or use engine='sdp'.")
    if engine == "tridiagonal":
        return _l2_tridiagonal(W, G, opts)
    from mmopt.search.l2_fast import solve_l2
    return solve_l2(G, tol=opts.get("tol") or 1e-8, max_iterations=opts.get("max_iterations") or 500,
                    verbose=opts["verbose"])


def _sdp_is_cheap(n: int) -> bool:
    """An interior-point SDP (Clarabel, or MOSEK) for n ≤ 32 cells. Not SCS, which cvxpy's choice takes past
    solvers.CLARABEL_MAX_N: on momentum(31) and (32) it ran 75,000–84,000 iterations, 22–27 CPU s, where the
    certified Newton solver takes 0.01 s and a tighter gap (a probe of the training workloads)."""
    from mmopt import solvers
    return n <= 32 and solvers.choose(None, size_hint=n) != "SCS"


# From this n on, l2_approx on prefix / all ranges uses their tridiagonal G⁻¹ (O(n²) per iteration instead of
# O(n³); benchmarks/bench_l2_fast.py: 8,192 cells in about a minute instead of 8 minutes for prefix).
TRIDIAGONAL_MIN_N = 512


def _l2_tridiagonal(W: Workload, G: np.ndarray, opts: dict) -> RawSolution:
    """l2_approx on prefix(n) / all_range(n) by :func:`mmopt.toeplitz.dual.solve_dual`, in G's normalised scale."""
    from mmopt.toeplitz.dual import SOLVER_NAME, solve_dual
    from mmopt.toeplitz.error import as_stream_workload

    try:
        stream = as_stream_workload(W, "optimize(method='l2_approx', engine='tridiagonal')")
    except TypeError as exc:
        raise ValueError(f"optimize(method='l2_approx'): options={{'engine': 'tridiagonal'}} needs the prefix or "
                         f"all-range workload, whose G⁻¹ is tridiagonal. Got '{W.name}'; use engine 'fast'.") from exc
    sol = solve_dual(stream, tol=opts.get("tol") or 1e-8, max_iterations=opts.get("max_iterations") or 200)
    # solve_dual works with G = WᵀW itself; the methods see G scaled to mean diagonal 1
    unscale = float(G[0, 0] / (W.mean_gram[0, 0] * W.n_queries))
    message = (f"Certified: relative duality gap {sol.gap:.1e}." if sol.status == "optimal" else
               f"Iteration budget spent with relative duality gap {sol.gap:.1e}; raise max_iterations.")
    return RawSolution(sol.matrix, None, sol.status, message, sol.iterations, SOLVER_NAME, sol.dual * unscale,
                       sol.history, {"primal_bound": sol.primal * unscale, "seconds": sol.seconds,
                                     "weights": sol.weights})


def _min_error(W: Workload, G: np.ndarray, opts: dict) -> RawSolution:
    SDP_MAX_N = min_error.SDP_MAX_N
    engine = opts.get("engine", "auto")
    if opts.get("start") is not None:
        raise ValueError("optimize(method='min_error'): options={'start': ...} chooses how the p-Identity search on "
                         "the O(n) Gram operator starts, which runs only for the prefix and all-range workloads from "
                         f"512 cells without a warm start, the SDP engine or the polish; here (n = {W.domain_size}, "
                         f"family {W.family!r}) the dense pipeline runs. Drop 'start'.")
    if engine == "local" or (engine == "auto" and W.domain_size > SDP_MAX_N):
        unread = [k for k in ("solver", "weight") if opts.get(k) is not None]
        if unread:
            raise ValueError(f"optimize(method='min_error') runs its SDP stage only for n ≤ {SDP_MAX_N} or "
                             f"options={{'engine': 'sdp'}}; here (n = {W.domain_size}, engine={engine!r}) nothing "
                             f"reads {unread}. Drop them, or pass options={{'engine': 'sdp'}}.")
    return min_error.solve(W, G, opts)


def _min_sensitivity(W: Workload, G: np.ndarray, opts: dict) -> RawSolution:
    A0 = opts.get("initial")
    if A0 is None:
        raise ValueError("optimize(method='min_sensitivity') needs initial=<Strategy or matrix>: the strategy "
                         "whose error profile is kept while its sensitivity is minimised.")
    A0 = min_error._initial_matrix(A0, W)
    # at an exact power-of-two scale with max |A0| in [0.5, 1): neither error nor the rotation depends on it, and
    # 1e-60·H was refused as "profile_gram ... 3e-120, call mmopt.optimize, which rescales for you" — from optimize
    # (the strategy comes back at the initial's scale: its profile AᵀA is the one asked for)
    e = power_of_two_scale(A0)
    A0 = np.ldexp(A0, -e)
    if np.linalg.matrix_rank(A0) < A0.shape[1]:  # refused as solve_min_sensitivity's 'profile_gram' (a probe)
        raise ValueError(f"The 'initial' parameter of optimize must have full column rank ({A0.shape[1]}) with "
                         f"method='min_sensitivity' (its profile AᵀA is kept, and must be positive definite). Got "
                         f"rank {np.linalg.matrix_rank(A0)}; stack an identity under it, e.g. np.vstack([A, "
                         "1e-3 * np.eye(n)]).")
    from mmopt.search.min_sensitivity import solve_min_sensitivity
    raw = solve_min_sensitivity(A0.T @ A0, initial=A0, solver=opts.get("solver"), tol=opts.get("tol") or 1e-6,
                                max_iterations=opts.get("max_iterations") or 50, seed=opts.get("seed"),
                                verbose=opts["verbose"], n_jobs=opts.get("n_jobs"))
    return dataclasses.replace(raw, matrix=None if raw.matrix is None else np.ldexp(raw.matrix, e),
                               gram=None if raw.gram is None else np.ldexp(raw.gram, 2 * e))


def _lrm(W: Workload, G: np.ndarray, opts: dict) -> RawSolution:
    from mmopt.search.lrm import solve_lrm
    return solve_lrm(G, rank=opts.get("rank"), init=opts.get("init", "auto"), tol=opts.get("tol"),
                     max_iterations=opts.get("max_iterations"), verbose=opts["verbose"], rows=_rows(W))


def _eigen_design(W: Workload, G: np.ndarray, opts: dict) -> RawSolution:
    from mmopt.search.eigen_design import solve_eigen_design
    return solve_eigen_design(G, tol=opts.get("tol"), max_iterations=opts.get("max_iterations"),
                              verbose=opts["verbose"], rows=_rows(W))


def _rows(W: Workload):
    """W's stored rows when they are few enough for an SVD (eigen_weights), else None (G's eigh)."""
    rows = W.matrix
    return rows if rows is not None and rows.shape[0] * rows.shape[1] <= 4 * W.domain_size ** 2 else None


def _choice(*choices):
    def check(value, name, caller):
        if not isinstance(value, str) or value not in choices:
            raise ValueError(f"The '{name}' option of {caller} must be one of {', '.join(map(repr, choices))}. "
                             f"Got {value!r} instead.")
        return value
    return check


def _positive_int(value, name, caller):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"The '{name}' option of {caller} must be a positive integer. Got {value!r} instead.")
    return int(value)


def _positive_real(value, name, caller):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < np.inf:
        raise ValueError(f"The '{name}' option of {caller} must be a positive finite number. Got {value!r} instead.")
    return float(value)


def _flag(value, name, caller):
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"The '{name}' option of {caller} must be True or False. Got {value!r} "
                        f"({type(value).__name__}) instead.")
    return bool(value)


@dataclass(frozen=True)
class _Method:
    """A registered method: its function, the ``options`` it reads (with their checks), which of the
    keyword parameters solver, tol, max_iterations and initial it reads (``seed`` is accepted by all), and
    its BLAS thread cap under ``blas_threads="auto"``: 1 for the small-matrix loops of the heuristics."""

    fn: MethodFn
    options: Mapping[str, Callable] = field(default_factory=dict)
    reads: frozenset[str] = frozenset()
    blas_threads: int | None = None  # what blas_threads="auto" means for it (see mmopt._base.runtime)


_ITERATIVE = frozenset({"solver", "tol", "max_iterations"})
METHODS: dict[str, _Method] = {
    "identity": _Method(_closed(lambda W: st.identity(W.domain_size).matrix)),
    "hierarchical": _Method(_closed(lambda W: st.hierarchical(W.domain_size).matrix)),
    "wavelet": _Method(_closed(lambda W: st.wavelet(W.domain_size).matrix)),
    "svd_strategy": _Method(_closed(lambda W: st.svd_strategy(W).matrix)),
    "l2_approx": _Method(_l2_approx, {"engine": _choice("auto", "sdp", "fast", "tridiagonal")}, _ITERATIVE),
    "min_error": _Method(_min_error, {"engine": _choice("auto", "sdp", "local"), "restarts": _positive_int,
                                      "p": _positive_int, "start": _choice("auto", "random", "ladder"),
                                      "weight": _positive_real, "polish": _flag},
                         _ITERATIVE | {"initial"}, blas_threads=1),
    "min_sensitivity": _Method(_min_sensitivity, {}, _ITERATIVE | {"initial"}, blas_threads=1),
    # Yuan et al. 2012 (mmopt.search.lrm) and Li & Miklau 2012 (mmopt.search.eigen_design); not candidates of "auto"
    "lrm": _Method(_lrm, {"rank": _positive_int, "init": _choice("auto", "hierarchical", "svd", "identity")},
                   frozenset({"tol", "max_iterations"})),
    "eigen_design": _Method(_eigen_design, {}, frozenset({"tol", "max_iterations"})),
}
DEFAULT_NORM = {"l2_approx": "l2", "eigen_design": "l2"}
OPTIONS = {name: tuple(spec.options) for name, spec in METHODS.items()}  # what each method's options= accepts


def check_options(options, spec: _Method | None, name: str) -> dict:
    """Check ``options`` against what the method reads; a custom callable gets them unchecked."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise TypeError(f"The 'options' parameter of optimize must be a dict or None. Got {type(options).__name__}.")
    opts = dict(options)
    if spec is None:
        return opts
    caller = f"optimize(method={name!r})"
    unknown = sorted(set(opts) - set(spec.options), key=str)
    if unknown:
        accepted = f"accepts only {sorted(spec.options)}" if spec.options else "takes no options"
        raise ValueError(f"Unknown options {unknown} for {caller}, which {accepted}.")
    return {key: spec.options[key](value, key, caller) for key, value in opts.items()}


def check_seed(seed, caller: str) -> None:
    if seed is None or isinstance(seed, np.random.Generator | np.random.SeedSequence):
        return
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"The 'seed' parameter of {caller} must be None, a non-negative integer or a "
                         f"numpy.random.Generator. Got {seed!r} instead.")
