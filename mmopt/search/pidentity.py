"""HDMM's p-Identity search for ε-DP MinError on a Gram *operator*: O(np²) per step, nothing n×n.

Notation: see README. A p-Identity strategy (McKenna et al., VLDB 2018, §4, OPT_0) is A = [I; Θ] D⁻¹ with
Θ ≥ 0 (p×n) and D = diag(1 + 1ᵀΘ), so every column of A has L1 norm 1 (Δ₁ = 1) and
X = AᵀA = D⁻¹(I + ΘᵀΘ)D⁻¹. Woodbury turns the unit-privacy MinError objective (Problem 5.15 of the paper)
into p×p algebra plus p products with G:

    tr(G X⁻¹) = tr(C) − tr(R Θ C Θᵀ),   C = D G D,  R = (I_p + ΘΘᵀ)⁻¹,

evaluated with the Cholesky factor L L ᵀ = I + ΘΘᵀ, Y = L⁻¹Θ and Z = L⁻¹ΘC = ((Y D) G) D: f = tr C − Σ Z∘Y.
The gradient is ∂f/∂Θ = 1 g_dᵀ − 2E with E = RΘCM = L⁻ᵀ(Z − (ZYᵀ)Y), M = (I + ΘᵀΘ)⁻¹, and
g_d = 2 diag(CM)/d. G enters only through G V (:mod:`mmopt.dense.gram_operator`): O(np) for prefix sums and all
ranges, so one evaluation costs about 7p²n flops instead of the dense objective's 2pn² + 9p²n
(:func:`mmopt.search._local_objectives.pidentity_objective`, which also searches signed Θ).
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass, field

import numpy as np
from scipy.linalg.blas import dtrsm

from mmopt._base import validation as v
from mmopt._base.parallel import check_n_jobs, ordered_map, plan, seed_children
from mmopt._base.solution import CONVERGED_MEANS, worst_status
from mmopt.dense.gram_operator import GramOperator
from mmopt.error import NumericalError
from mmopt.search import pidentity_stream as ps
from mmopt.search._local_objectives import _CANCELLATION_MAX, lbfgs

__all__ = ["PIdentityStrategy", "SearchResult", "default_p", "objective", "search", "true_error"]

_LOG = logging.getLogger("mmopt")


def default_p(n: int) -> int:
    """HDMM's p = n/16 for range workloads (at least 4), as :func:`mmopt.search.local_search.minimize_l1`."""
    return max(4, n // 16)


def _parts(theta: np.ndarray, G: GramOperator):
    """(d, L, Y, Z, tr C) of the module docstring for A = [I; Θ]D⁻¹ with d = 1 + 1ᵀ|Θ|.

    Every p×n array stays row-major: the triangular solves run as Yᵀ = ΘᵀL⁻ᵀ on Θᵀ's (column-major) view, and
    G is applied along rows (``rmatmat``). Strided layouts made one evaluation 2× slower at n = 8,192.
    """
    theta = np.ascontiguousarray(theta, dtype=float)
    d, L = ps.factor(theta, check_finite=False)
    Y = dtrsm(1.0, L, theta.T, side=1, lower=1, trans_a=1).T  # L⁻¹Θ
    Z = G.rmatmat(Y * d)
    Z *= d
    return d, L, Y, Z, float(np.sum(d * d * G.diagonal()))


def objective(z: np.ndarray, G: GramOperator, p: int, n: int) -> tuple[float, np.ndarray]:
    """tr(G X⁻¹) and its gradient in z = vec(Θ) ≥ 0 (C order), A = [I; Θ]D⁻¹ (see the module docstring).

    A value that float64 cannot resolve (tr C > 10⁸·f: the subtraction has lost its digits) is +∞ with a
    zero gradient, as in :func:`mmopt.search._local_objectives.pidentity_objective`.
    """
    theta = z.reshape(p, n)
    try:
        d, L, Y, Z, trace_c = _parts(theta, G)
    except (np.linalg.LinAlgError, ValueError):  # overflow to inf/nan in I + ΘΘᵀ
        return np.inf, np.zeros_like(z)
    column = np.sum(Z * Y, axis=0)
    f = trace_c - float(column.sum())
    if not np.isfinite(f) or f <= 0.0 or trace_c > _CANCELLATION_MAX * f:
        return np.inf, np.zeros_like(z)
    B = Z - (Z @ Y.T) @ Y
    g = dtrsm(1.0, L, B.T, side=1, lower=1, overwrite_b=1).T  # E = L⁻ᵀB, as Eᵀ = BᵀL⁻¹
    g *= -2.0
    g += 2.0 * (d * G.diagonal() - column / d)  # 2 diag(C M) / d
    return f, g.ravel()


def true_error(theta, G: GramOperator) -> float:
    """The exact unit-privacy error Δ₁² tr(G X⁻¹) of A = [I; Θ]D⁻¹, d = 1 + 1ᵀ|Θ| (so Δ₁ = 1), by Woodbury.

    Raises :class:`mmopt.error.NumericalError` when the subtraction tr C − tr(RΘCΘᵀ) keeps fewer than 8 digits.

    Examples
    --------
    >>> from mmopt.dense.gram_operator import prefix_gram
    >>> theta = np.ones((1, 4))                      # [I; 1ᵀ] / 2
    >>> A = np.vstack([np.eye(4), theta]) / 2
    >>> G = prefix_gram(4)
    >>> bool(np.isclose(true_error(theta, G), np.trace(np.linalg.solve(A.T @ A, G.dense()))))
    True
    """
    theta = np.asarray(theta, dtype=float)
    d, _, Y, Z, trace_c = _parts(theta, G)
    f = trace_c - float(np.sum(Z * Y))
    if not (np.isfinite(f) and f > 0.0 and trace_c <= _CANCELLATION_MAX * f):
        raise NumericalError(f"true_error: tr(G X⁻¹) = {trace_c:.6g} − {trace_c - f:.6g} keeps fewer than 8 "
                             "digits in float64.")
    return f


@dataclass(frozen=True, eq=False)
class PIdentityStrategy:
    """A = [I; Θ] D⁻¹, D = diag(1 + 1ᵀ|Θ|): n + p rows over n cells, stored by Θ (p×n), Δ₁ = 1.

    ``matrix`` builds the dense (n+p)×n array on request (refused past mmopt's allocation limit);
    ``to_strategy()`` wraps it as a :class:`mmopt.strategy.Strategy`.
    """

    theta: np.ndarray = field(repr=False)
    name: str = "p-identity"

    @property
    def domain_size(self) -> int:
        return self.theta.shape[1]

    @property
    def p(self) -> int:
        return self.theta.shape[0]

    @property
    def column_scale(self) -> np.ndarray:
        """d = 1 + 1ᵀ|Θ|, the column L1 norms of [I; Θ]."""
        return ps.column_scale(self.theta)

    @property
    def matrix(self) -> np.ndarray:
        n, p = self.domain_size, self.p
        v.check_allocation((n + p) * n, what=f"the dense ({n + p}×{n}) p-Identity strategy", caller="PIdentityStrategy")
        return np.vstack([np.eye(n), self.theta]) / self.column_scale

    def to_strategy(self):
        from mmopt.strategy import Strategy
        return Strategy(self.matrix, self.name)

    # The stream protocol of mmopt.toeplitz's tree strategy (mmopt.search.pidentity_stream, O(p²n), nothing n×n):
    # release, evaluate and the answers tables take the strategy so past the dense size (mmopt.dispatch).
    n = domain_size

    def to_dense(self) -> np.ndarray:
        return self.matrix

    @property
    def n_rows(self) -> int:
        return self.domain_size + self.p

    def sensitivity(self, norm: str = "l1") -> float:
        return ps.sensitivity(self.theta, norm)

    def apply(self, x) -> np.ndarray:
        return ps.apply(self.theta, x)

    def exact_apply(self, x, *, caller: str = "release") -> np.ndarray:
        """:meth:`apply` for a release, its rounding bounded (:func:`mmopt.search.pidentity_stream.exact_apply`;
        Θ checked from itself first, so no refusal depends on the counts)."""
        from mmopt.dense.exact_answers import check_strategy
        check_strategy(self.theta, caller)
        return ps.exact_apply(self.theta, x, caller=caller)

    def estimate(self, y) -> np.ndarray:
        return ps.estimate(self.theta, y)

    def unit_total(self, kind: str) -> float:
        """tr(G X⁻¹) on prefix sums or all ranges of n cells (Δ₁ = 1), :func:`true_error`."""
        from mmopt.dense.gram_operator import all_range_gram, prefix_gram
        return true_error(self.theta, (prefix_gram if kind == "prefix" else all_range_gram)(self.domain_size))

    def prefix_variances(self) -> np.ndarray:
        return ps.prefix_variances(self.theta, "PIdentityStrategy.prefix_variances")

    def query_norms(self, Q) -> np.ndarray:
        """‖A⁺ᵀq‖ = (q X⁻¹ qᵀ)^{1/2} per row q of ``Q`` (queries × n)."""
        Q = v.check_matrix(Q, name="Q", caller="PIdentityStrategy.query_norms")
        v.check_same_domain(Q.shape[1], self.domain_size, caller="PIdentityStrategy.query_norms",
                            what=("the queries Q", "the strategy"))
        return np.sqrt(ps.query_variances(self.theta, Q, "PIdentityStrategy.query_norms"))

    def stream_report(self, W, privacy, norm, caller: str):
        from mmopt.toeplitz.trees import prefix_report
        return prefix_report(self, W, privacy, norm, caller)

    def json_summary(self) -> dict:
        """What :meth:`mmopt.OptimizeResult.to_dict` records of it (kind, name, shape [n + p, n], domain)."""
        n, rows = self.domain_size, self.domain_size + self.p
        return {"kind": "p_identity", "name": self.name, "shape": [rows, n], "domain_shape": [n], "domain_size": n,
                "n_rows": rows}

    def __repr__(self) -> str:
        return f"PIdentityStrategy(name={self.name!r}, n={self.domain_size}, p={self.p})"


@dataclass(frozen=True, eq=False)
class SearchResult:
    """The best run of :func:`search`: Θ, its exact error (unit privacy, Δ₁ = 1), status and the runs."""

    strategy: PIdentityStrategy
    objective: float
    status: str
    message: str
    iterations: int
    history: tuple
    seconds: float
    p: int
    n_jobs: int
    backend: str


def _run(k: int, child, G: GramOperator, p: int, n: int, scale: float, max_iterations: int, tol: float,
         theta0: np.ndarray | None = None):
    """One L-BFGS-B run from ``theta0`` (default HDMM's start Θ ~ U[0, 1] drawn from ``child``): (Θ, exact error,
    iterations, status, seconds)."""
    t0 = time.perf_counter()
    if theta0 is None:
        z0 = np.random.default_rng(child).random(p * n)  # the draw of minimize_l1's even restarts, so starts agree
    else:
        z0 = np.array(theta0, dtype=float).ravel()
    fun = functools.partial(objective, G=G, p=p, n=n)
    # evaluations capped near the iteration budget: line searches that need many tries (seen at n = 8,192) would
    # otherwise let one run cost several times what the budget promises
    z, _, nit, status = lbfgs(fun, z0, scale, max_iterations, tol, max_evaluations=max_iterations * 11 // 10 + 10)
    theta = z.reshape(p, n)
    try:
        f = true_error(theta, G)
    except NumericalError:
        f = np.inf
    return theta, f, nit, status, time.perf_counter() - t0


def check_search(caller: str, n: int, p, restarts, max_iterations, tol, n_jobs) -> tuple:
    """(p, restarts, max_iterations, tol, n_jobs) checked as :func:`search` takes them (p None: default_p(n))."""
    p = default_p(n) if p is None else v.check_int(p, name="p", caller=caller)
    restarts = v.check_int(restarts, name="restarts", caller=caller)
    max_iterations = v.check_int(max_iterations, name="max_iterations", caller=caller)
    tol = v.check_real(tol, name="tol", caller=caller, low=0.0, high=1.0, low_open=True, high_open=True)
    return p, restarts, max_iterations, tol, check_n_jobs(n_jobs, caller=caller)


def best_of(runs, *, how: str, restarts: int, p: int, n: int, trace_g: float, tol: float, max_iterations: int,
            began: float, workers: int, backend: str, verbose: bool) -> SearchResult:
    """The :class:`SearchResult` of ``runs`` (k, Θ, f, iterations, status, seconds, record): the lowest f wins,
    ties to the lowest restart whatever the order of arrival; ``how`` opens the message."""
    log = _LOG.info if verbose else _LOG.debug
    history, best, iterations = [], (np.inf, None), 0
    for k, (theta, f, nit, status, seconds, record) in enumerate(runs):
        iterations += nit
        history.append({"restart": k, "objective": f, "iterations": nit, "status": status, "seconds": seconds,
                        **record})
        log("p-Identity run %d of %d: objective %.8g after %d iterations (%s), %.1f s", k + 1, restarts, f, nit,
            status, seconds)
        if f < best[0]:  # strict: ties go to the lowest restart, whatever n_jobs
            best = (f, theta)
    f, theta = best
    if theta is None:  # every run unresolvable in float64 (never seen): the identity, Θ = 0
        theta, f = np.zeros((p, n)), trace_g
    status = worst_status(h["status"] for h in history)
    hit = sum(h["status"] == "user_limit" for h in history)
    message = (f"{how} with p = {p} (HDMM's OPT_0), on a Gram operator; a heuristic with no optimality certificate. "
               f"{CONVERGED_MEANS}, tol={tol:g}."
               + (f" {hit} of {restarts} run(s) hit max_iterations={max_iterations}; raise it." if hit
                  else f" All {restarts} run(s) converged."))
    return SearchResult(PIdentityStrategy(theta), float(f), status, message, iterations, tuple(history),
                        time.perf_counter() - began, p, workers, backend)


def search(G: GramOperator, *, p: int | None = None, restarts: int = 1, max_iterations: int = 1000,
           tol: float = 1e-9, seed=None, n_jobs=None, verbose: bool = False) -> SearchResult:
    """Best of ``restarts`` L-BFGS-B runs over p-Identity strategies on the Gram operator ``G``; a heuristic.

    Parameters
    ----------
    G : GramOperator
        From :mod:`mmopt.dense.gram_operator` (``prefix_gram(n)``, ``all_range_gram(n)``, ``DenseGram(G)``, ...).
    p : int or None
        Extra rows; None is :func:`default_p`.
    restarts, max_iterations, tol, seed, n_jobs, verbose
        As :func:`mmopt.search.local_search.minimize_l1`: run k draws only from
        ``SeedSequence(seed).spawn(restarts)[k]``;
        ``tol`` bounds L-BFGS-B's relative decrease and projected gradient (divided by tr G). A run also stops
        (as "user_limit") after 1.1·``max_iterations`` + 10 objective evaluations, so the budget bounds its time.

    Returns
    -------
    SearchResult
        ``objective`` is the exact Δ₁² tr(G X⁻¹) of the returned strategy (:func:`true_error`); ``status`` is
        "optimal" only if every run passed L-BFGS-B's test (a local optimum: MinError is not convex),
        "user_limit" if any run hit ``max_iterations``, else "optimal_inaccurate" (a stalled line search).

    References
    ----------
    R. McKenna, G. Miklau, M. Hay and A. Machanavajjhala, "Optimizing error of high-dimensional statistical
    queries under differential privacy", VLDB 2018, §4 (OPT_0). C. Li et al., PODS 2010, §5 (Problem 5.15).

    Examples
    --------
    >>> from mmopt.dense.gram_operator import prefix_gram
    >>> res = search(prefix_gram(64), seed=0)
    >>> bool(res.objective < np.trace(prefix_gram(64).dense()))   # beats the identity
    True
    """
    caller = "search"
    if not isinstance(G, GramOperator):
        raise TypeError(f"The 'G' parameter of {caller} must be a GramOperator (mmopt.dense.gram_operator). "
                        f"Got {type(G).__name__} instead.")
    n = G.n
    p, restarts, max_iterations, tol, n_jobs = check_search(caller, n, p, restarts, max_iterations, tol, n_jobs)
    children = seed_children(seed, restarts, caller=caller)
    began = time.perf_counter()
    trace_g = float(np.sum(G.diagonal()))
    scale = trace_g if trace_g > 0 else 1.0  # tol means the same for every workload scale
    workers, backend = plan(n_jobs, restarts)
    runs = ordered_map(_run, ((k, c, G, p, n, scale, max_iterations, tol) for k, c in enumerate(children)),
                       n_jobs=n_jobs, desc="p-Identity restarts", progress=verbose)
    return best_of((run + ({},) for run in runs), how=f"Best of {restarts} L-BFGS-B run(s) over p-Identity "
                   "strategies [I; Θ]D⁻¹", restarts=restarts, p=p, n=n, trace_g=trace_g, tol=tol,
                   max_iterations=max_iterations, began=began, workers=workers, backend=backend, verbose=verbose)
