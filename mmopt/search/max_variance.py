"""The largest query variance as the objective: min over X = AᵀA of max_i w_i X⁺ w_iᵀ / τ_i, certified.

Notation: see README; W (m×n) the workload, τ > 0 per-query targets (1: the plain maximum variance),
W̃ = diag(τ)^{-1/2} W, vᵢ(X) = w̃ᵢ X⁺ w̃ᵢᵀ the i-th query's variance over its target at unit privacy (Δ₂ = 1:
diag X ≤ 1).

**Minimax.** The problem min_X max_i vᵢ(X) over {X ≻ 0, diag X ≤ 1} equals

    max_{p ∈ Δ_m} f(p),    f(p) = min_X Σᵢ pᵢ vᵢ(X) = min_X tr(W̃ᵀ diag(p) W̃ X⁺)               (1)

(Sion: the objective is convex in X and linear in p, the simplex is compact). Each f(p) is the L2 program of the
weighted workload diag(√p) W̃ (Program 5.2), solved by :func:`mmopt.search.l2_fast.solve_l2`, whose dual value
g(λ) ≤ f(p) is a certified lower bound on (1) for every p. f is concave, 1-homogeneous, with gradient v(X_p)
(Danskin; X_p is unique while every pᵢ > 0 and W has full column rank), so L-BFGS-B maximises
F(p) = f(p) − (Σp)²/2 over the box p ≥ 0 (its maximiser is f(q*)·q* for the maximiser q* of (1); ∇F = v − Σp);
every X_p is feasible and its exact max_i vᵢ(X_p) an upper bound. The run stops when the best of each meet within
``tol`` (``status`` "optimal"), else at ``max_iterations`` ("user_limit"), or when L-BFGS-B stops short
("optimal_inaccurate"); then, where m + n ≤ :data:`SDP_MAX_SIDE`, (1) is solved once as an SDP (cvxpy, the
probed solver recorded in ``solver``), its X scored exactly as an upper bound and its weights on the rows certified
by one L2 dual, and the ascent continues from them. Measured (tests, benchmarks): all ranges on 64 cells to a 10⁻⁴
gap in 47 solves; softmax weights took 500 solves to 1.4 %, mirror ascent with averaged iterates left 0.2–0.3 % on
16 cells. This is the approach of the Lagrangian duals
for max-variance planning (cf. ResidualPlanner+'s ResPlanMax for marginals, Xiao et al. VLDB 2021's
fitness-for-use); here on any dense workload.

The bound holds under Laplace noise too (a column's L1 norm is at least its L2 norm), where the returned strategy
is the Gaussian minimax one scored in L1: a heuristic there.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize

from mmopt._base import validation as v
from mmopt.dense.profile import numerical_rank, power_of_two_scale
from mmopt.search.l2_fast import solve_l2

__all__ = ["MaxVarianceSolution", "solve_max_variance"]

_LOG = logging.getLogger("mmopt")

#: fresh L-BFGS-B starts at most (each from the best weights so far)
RESTARTS = 20

#: (1) as one SDP where the ascent stops uncertified and m + n ≤ this: min t s.t. [[Y, W̃], [W̃ᵀ, X]] ⪰ 0,
#: diag Y ≤ t, diag X ≤ 1 (Y ⪰ W̃X⁻¹W̃ᵀ). The ascent stalls where the optimal weights sit on a face of the simplex
#: (prefix sums with τᵢ = i + 1: X = I is optimal, certified by weight on the first query alone; its bound stayed 2 %
#: below at 32 cells, 22 % at 64) or where rows are weighted (random 60×40 rows scaled by e^U(−3,3): 5,307 against
#: 4,191.5). Measured with the SDP (Clarabel to side 48, SCS past it, ≤ SDP_ITERATIONS): certified to 10⁻⁶–10⁻⁴ in
#: 0.1–6 s at side ≤ 128, 12 s on weighted all ranges of 16 cells (side 152), 18 s on random weighted 64×64; past
#: side ~160 SCS takes minutes.
SDP_MAX_SIDE = 160
SDP_ITERATIONS = 10_000  # SCS at 2,000 left 10⁻³ on the random 64×64; 200,000 (its default) took 122 s there


@dataclass(frozen=True)
class MaxVarianceSolution:
    """X (feasible: diag X ≤ 1), its exact max_i vᵢ, a certified lower bound on (1), and how it ended."""

    gram: np.ndarray = field(repr=False)
    objective: float
    lower_bound: float
    status: str
    iterations: int
    weights: np.ndarray = field(repr=False)  # the query weights p of the best lower bound
    variances: np.ndarray = field(repr=False)  # vᵢ(X) of the returned X
    history: tuple = field(default=(), repr=False)
    solver: str = "mmopt-l2-newton"  # with "+SCS" etc. where the SDP of SDP_MAX_SIDE ran


def _variances(W: np.ndarray, X: np.ndarray) -> np.ndarray:
    """diag(W X⁺ Wᵀ), +inf for a query outside X's range (Cholesky where X is safely definite, else eigh)."""
    from scipy import linalg
    try:
        L = linalg.cholesky((X + X.T) / 2, lower=True, check_finite=False)
        d = np.abs(np.diag(L))
        if d.min() > d.max() * 1e-6:  # well inside the cone: wᵢX⁻¹wᵢᵀ = ‖L⁻¹wᵢ‖², accurate to κ(L)·eps
            B = linalg.solve_triangular(L, W.T, lower=True, check_finite=False)
            return np.einsum("ij,ij->j", B, B)
    except linalg.LinAlgError:
        pass
    lam, V = np.linalg.eigh((X + X.T) / 2)
    keep = lam > lam.max() * X.shape[0] * np.finfo(float).eps
    B = W @ V
    out = np.einsum("ij,j,ij->i", B[:, keep], 1.0 / lam[keep], B[:, keep])
    outside = np.einsum("ij,ij->i", B[:, ~keep], B[:, ~keep])
    scale = np.einsum("ij,ij->i", W, W)
    out[outside > 1e-12 * np.maximum(scale, np.finfo(float).tiny)] = np.inf
    return out


def solve_max_variance(W: np.ndarray, targets: np.ndarray | None = None, *, tol: float = 1e-4,
                       max_iterations: int = 500) -> MaxVarianceSolution:
    """min_X max_i w_i X⁺ w_iᵀ / τ_i s.t. diag X ≤ 1, to a certified relative gap ``tol`` (module docstring).

    Parameters
    ----------
    W : ndarray of shape (m, n)
        The workload's queries.
    targets : ndarray of shape (m,) or None
        τ > 0 per query (None: all 1, the plain maximum variance).
    tol : float
        Relative gap (upper − lower) / upper at which the run stops as certified.
    max_iterations : int
        L2 solves (one n×n Gram each) at most.

    Examples
    --------
    >>> import numpy as np
    >>> s = solve_max_variance(np.eye(3))        # the identity: every variance 1 at X = I
    >>> round(s.objective, 6), round(s.lower_bound, 6), s.status
    (1.0, 1.0, 'optimal')
    """
    caller = "solve_max_variance"
    W = v.check_matrix(W, name="W", caller=caller)
    m, n = W.shape
    tau = np.ones(m) if targets is None else v.check_vector(targets, name="targets", caller=caller, length=m,
                                                              meaning="the workload's queries")
    if not np.all(tau > 0):
        raise ValueError(f"The 'targets' parameter of {caller} must be > 0 for every query. Got a smallest of "
                         f"{tau.min():.3g}.")
    if not np.any(W):  # solve_l2 refused it in its own name ("The 'gram' parameter of solve_l2 …")
        raise ValueError(f"The 'W' parameter of {caller} must have a non-zero entry: every variance is 0 whatever the "
                         "strategy, so there is nothing to optimise. Got all zeros.")
    tol = v.check_real(tol, name="tol", caller=caller, low=0.0, low_open=True)
    max_iterations = v.check_int(max_iterations, name="max_iterations", caller=caller)
    # Solved at a power-of-two scale (exact) where the identity's largest variance is ~1: the weights' floor below
    # is absolute, so W·10⁻²⁰ stopped 14 % off the optimum it certifies at W, and W·10¹⁰⁰ overflowed its Gram
    Wt = W / np.sqrt(tau)[:, None]
    k = power_of_two_scale(Wt)
    Wt, e = np.ldexp(Wt, -k), 2 * k  # variances scale by 4⁻ᵏ: they are scaled back by 2ᵉ
    ident = np.eye(n)  # the identity is feasible: the first upper bound (optimal where every τᵢ = ‖wᵢ‖²)
    vi = _variances(Wt, ident)
    sdp = m + n <= SDP_MAX_SIDE
    # one L2 solve kept back for the SDP's weights: a spent budget skipped the SDP, "user_limit" with a bound 10×
    # low where it certifies in a second (a helper's probe: targets 10^U(−6,6), W·1.7)
    cap = max_iterations - 1 if sdp and max_iterations > 1 else max_iterations
    st = {"dual": None, "lower": 0.0, "solver": MaxVarianceSolution.solver, "p": np.full(m, 1.0 / m), "cap": cap,
          "best": (float(np.max(vi)), ident, vi), "k": 0,
          "mean": np.zeros((n, n)), "mean_best": False, "e": e}
    history: list[dict] = []

    def negative_F(p):
        if st["k"] >= st["cap"]:
            raise Done("user_limit")
        st["k"] += 1
        total = float(p.sum())
        q = p / total
        raw = solve_l2(Wt.T @ (q[:, None] * Wt), tol=1e-10, initial_dual=st["dual"])  # 1e-8 stalled L-BFGS-B
        st["dual"] = raw.extra.get("dual_variable")
        if raw.dual_bound is not None and raw.dual_bound > st["lower"]:  # q ∈ Δ: g ≤ f(q) ≤ (1)
            st["lower"], st["p"] = float(raw.dual_bound), q
        st["mean"] += (raw.gram - st["mean"]) / st["k"]  # averaged X̄: feasible, often better where X_p is not unique
        v = _variances(Wt, raw.gram)  # the gradient below, and an upper bound
        # X̄ costs one more n×n factorisation: scored every 4th step, and every step while it is the best
        # (on a full-rank W, where X_p is unique, it rarely is the best)
        scored = [(raw.gram, v)]
        if st["k"] % 4 == 1 or st["mean_best"]:
            scored.insert(0, (st["mean"], _variances(Wt, st["mean"])))
        st["mean_best"] = False
        for X, vx in scored:
            if (top := float(np.max(vx))) < st["best"][0]:
                st["best"] = (top, X.copy(), vx)
                st["mean_best"] = X is not raw.gram
        history.append({"iteration": st["k"], "objective": st["best"][0], "lower_bound": st["lower"]})
        _LOG.info("max_variance: L2 solve %d, largest variance/target %.6g, certified bound %.6g", st["k"],
                  np.ldexp(st["best"][0], e), np.ldexp(st["lower"], e))
        if st["best"][0] - st["lower"] <= tol * st["best"][0]:
            raise Done("optimal")
        finite = np.isfinite(v)
        v = np.where(finite, v, 10.0 * float(np.max(v[finite])) if finite.any() else 1.0)  # a query off X_p's range
        return -(total * float(q @ v) - total * total / 2), -(v - total)

    floor = 1e-6 / m  # every pᵢ > 0: G_p keeps W's rank, so X_p and v(X_p) stay finite
    status = ascend(negative_F, np.ones(m), st, floor=floor, max_iterations=max_iterations)
    st["cap"] = max_iterations
    if status in ("optimal_inaccurate", "user_limit") and sdp and (q := _sdp_weights(Wt, st)) is not None:
        try:  # the SDP's weights, certified by one L2 solve (its dual bound); its X was scored exactly
            negative_F(q)
            status = ascend(negative_F, np.maximum(st["p"] * st["lower"], floor), st, floor=floor,
                            max_iterations=max_iterations)
        except Done as done:
            status = done.status
    top, X, var = st["best"]
    if (support := _row_space(Wt, X)) is not None:  # round-off outside W's row space (see _row_space)
        X = support @ (support.T @ X @ support) @ support.T
        X = (X + X.T) / 2
        X /= max(float(np.max(np.diag(X))), 1.0)  # the projection's round-off may lift a diagonal past 1
        var = _variances(Wt, X)
        top = float(np.max(var))
    if top < st["lower"] <= top * (1 + 1e-6):  # the dual value's round-off (~10⁻⁷ where G_p is nearly singular:
        st["lower"] = top                      # prefix sums with τᵢ = i + 1, whose optimum X = I has value 1 exactly)
    history = [h | {k: float(np.ldexp(h[k], e)) for k in ("objective", "lower_bound")} for h in history]
    return MaxVarianceSolution(X, float(np.ldexp(top, e)), float(np.ldexp(st["lower"], e)), status, st["k"], st["p"],
                               np.ldexp(var, e), tuple(history), st["solver"])


def _row_space(W: np.ndarray, X: np.ndarray) -> np.ndarray | None:
    """An orthonormal basis V (n×r) of W's row space when W has rank r < n and X lies in it up to round-off
    (≤ 10⁻⁹ of its trace outside), else None.

    X_p has W's row space as its range in exact arithmetic; in floating point 4.7·10⁻¹³ of its trace leaked out
    (a 4×6 W), above the support test of evaluate and release (100·n·eps), which then refused the "optimal"
    strategy (a helper's probe). Such an X is returned as V (VᵀXV) Vᵀ. An X with real weight outside (the SDP's,
    full rank) is kept: there the off-range part lowers the variances (w X⁻¹ wᵀ ≤ w (VᵀXV)⁻¹ wᵀ)."""
    _, s, Vt = np.linalg.svd(W, full_matrices=False)
    r = numerical_rank(s, W.shape)
    if r == W.shape[1]:
        return None
    V = Vt[:r].T
    outside = float(np.trace(X)) - float(np.einsum("ij,ik,kj->", V, X, V))  # tr((I − VVᵀ) X)
    return V if outside <= 1e-9 * float(np.trace(X)) else None


def _sdp_weights(Wt: np.ndarray, st: dict) -> np.ndarray | None:
    """Solve (1) as the SDP of :data:`SDP_MAX_SIDE`; its X, scaled to diag X ≤ 1 (feasible), becomes ``st``'s best
    upper bound where it is; returns its dual weights on diag Y ≤ t (on the simplex), or None when no SDP solver
    gives an answer (the ascent then runs alone)."""
    import cvxpy as cp

    from mmopt import solvers
    m, n = Wt.shape
    X, Y, t = cp.Variable((n, n), PSD=True), cp.Variable((m, m), symmetric=True), cp.Variable()
    rows = cp.diag(Y) <= t
    problem = cp.Problem(cp.Minimize(t), [cp.bmat([[Y, Wt], [Wt.T, X]]) >> 0, rows, cp.diag(X) <= 1])
    solver = solvers.choose(None, size_hint=(m + n) // 2)  # its KKT block grows like side⁴ in Clarabel
    outcome = solvers.solve(problem, solver, tol=1e-9, max_iters=SDP_ITERATIONS, what="the max-variance SDP")
    if outcome.status == "solver_error" or X.value is None or rows.dual_value is None:  # an approximate answer
        # serves (user_limit): X is scored exactly and the weights certified by the L2 dual
        return None
    Xv = (X.value + X.value.T) / 2
    top = float(np.max(np.diag(Xv)))
    q = np.clip(np.asarray(rows.dual_value, dtype=float).ravel(), 0.0, None)
    if not (top > 0 and np.all(np.isfinite(Xv)) and np.isfinite(q).all() and q.sum() > 0):
        return None
    Xv = Xv / top  # diag ≤ 1 exactly (the largest becomes top/top = 1)
    vx = _variances(Wt, Xv)
    if (worst := float(np.max(vx))) < st["best"][0]:
        st["best"] = (worst, Xv, vx)
    st["solver"] += f"+{solver}"
    _LOG.info("max_variance: the SDP (%s, %.2f s): largest variance/target %.6g", solver, outcome.seconds,
              np.ldexp(worst, st["e"]))  # at the caller's scale, as the other progress lines (it printed 0.91 for 3.7)
    return q / q.sum()


class Done(Exception):
    """Raised by an ascent's objective to stop it with ``status`` ("optimal", "user_limit", …)."""

    def __init__(self, status: str) -> None:
        super().__init__(status)
        self.status = status


def ascend(negative_F, start: np.ndarray, state: dict, *, floor: float, max_iterations: int) -> str:
    """Maximise F(p) = f(p) − (Σp)²/2 over p ≥ ``floor`` (module docstring) by L-BFGS-B on ``negative_F``, which
    records its bounds in ``state`` ("best": a tuple led by the best upper bound, or None; "lower"; "p": the q of
    the best lower bound) and raises :class:`Done` to stop. L-BFGS-B's line search stops ("ABNORMAL") where the
    small weights' variances are solved less accurately than the value; a fresh start from the best weights so far,
    scaled to F's maximiser f(q*)·q*, continues, until a start gains less than 10⁻⁶ of the upper bound. Returns the
    status Done carried, or "optimal_inaccurate"."""
    def bounds():
        return (state["best"][0] if state["best"] is not None else np.inf), state["lower"]

    for _ in range(RESTARTS):
        gap = bounds()
        try:
            optimize.minimize(negative_F, start, jac=True, method="L-BFGS-B", bounds=[(floor, None)] * start.size,
                              options={"maxiter": max_iterations, "maxfun": max_iterations, "gtol": 0.0,
                                       "ftol": 0.0})
        except Done as done:
            return done.status
        upper, lower = bounds()
        gain = (0.0 if upper == gap[0] else gap[0] - upper) + (lower - gap[1])  # inf − inf never formed
        if not gain > 1e-6 * (upper if math.isfinite(upper) else abs(lower)):  # stalled: gains of 10⁻⁹ (round-off)
            break                                                 # restarted up to RESTARTS times, spent the budget
        start = np.maximum(state["p"] * state["lower"], floor)  # F's maximiser is f(q*)·q*
    return "optimal_inaccurate"
