"""Program 5.3 (MinSensitivity): a square strategy with a given profile and least L1 sensitivity.

Notation: see README. Every square A with AᵀA = X₀ is A = Q A₀ with Q orthogonal (Theorem 4.13), so the
problem is min_Q max_j ‖Q a_j‖₁ over rotations Q: the rank-constrained SDP of Theorem 5.28 handled by
convex iteration, followed by a local polish over rotations from the SDP's answer and random rotations.
"""

from __future__ import annotations

import logging
import time

import cvxpy as cp
import numpy as np
from scipy import sparse
from scipy.optimize import linprog

from mmopt import solvers
from mmopt._base.parallel import check_n_jobs, ordered_map
from mmopt._base.solution import RawSolution, worst_status
from mmopt._base.validation import check_int, check_real
from mmopt.search._convex_iteration import ConvexIteration as _ConvexIteration
from mmopt.search.sdp_l2 import _validate_gram
from mmopt.search.sdp_min_error import _HEURISTIC, _check_initial, _true_error

logger = logging.getLogger("mmopt")

_RACE_STEPS = 8  # LP steps per random rotation before the leaders are polished to convergence
_POLISH_STEPS = 400  # LP steps of a full polish; converged means the trust region shrank below 1e-9


def _delta(a: np.ndarray) -> float:
    """Δ_A: the largest column L1 norm."""
    return float(np.abs(a).sum(axis=0).max())


def _polar(m: np.ndarray) -> np.ndarray:
    """U Vᵀ for M = U S Vᵀ: the rotation nearest M, so that Q A₀ is exactly profile-equivalent."""
    u, _, vt = np.linalg.svd(m)
    return u @ vt


def _polish(a: np.ndarray, max_steps: int = _POLISH_STEPS) -> tuple[np.ndarray, float, int]:
    """Local descent of Δ over A → C A, C orthogonal, by a trust-region sequence of LPs.

    Step: min_S max_j ‖(I + S) a_j‖₁ over skew S with |S_ij| ≤ r (an LP, exact to first order), then
    A ← C A with the Cayley rotation C = (I − S/2)⁻¹(I + S/2). Δ is piecewise linear, so a smooth method
    would zig-zag; the LP sees the max over columns and the kinks of |·| exactly.
    """
    n = a.shape[0]
    ia, ib = np.triu_indices(n, 1)
    m, nn = ia.size, n * n
    eye = np.eye(n)
    # LP variables [s (m), v (n²), t]; rows: S A − v ≤ −A, −S A − v ≤ A, Σ_i v_ij − t ≤ 0. The sparsity
    # pattern is fixed, only the values of S A change, so the triplets are built once.
    j_n, k_nn, p_m = np.arange(n), np.arange(nn), np.repeat(np.arange(m), n)
    rows_m = np.concatenate([(ia[:, None] * n + j_n).ravel(), (ib[:, None] * n + j_n).ravel()])
    cols_m = np.concatenate([p_m, p_m])
    rows = np.concatenate([rows_m, k_nn, nn + rows_m, nn + k_nn, 2 * nn + np.tile(j_n, n), 2 * nn + j_n])
    cols = np.concatenate([cols_m, m + k_nn, cols_m, m + k_nn, m + k_nn, np.full(n, m + nn)])
    fixed = np.concatenate([-np.ones(nn), -np.ones(nn), np.ones(nn), -np.ones(n)])
    cost = np.zeros(m + nn + 1)
    cost[-1] = 1.0
    d, r, steps = _delta(a), 0.5, 0
    while steps < max_steps and r > 1e-9:
        steps += 1
        vals_m = np.concatenate([a[ib].ravel(), -a[ia].ravel()])  # row a of S A gains s_p · A[b, :]
        vals = np.concatenate([vals_m, fixed[:nn], -vals_m, fixed[nn:]])
        a_ub = sparse.csr_matrix((vals, (rows, cols)), shape=(2 * nn + n, m + nn + 1))
        c0 = a.ravel()
        b_ub = np.concatenate([-c0, c0, np.zeros(n)])
        bounds = np.array([(-r, r)] * m + [(0, np.inf)] * (nn + 1))
        res = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
        if res.x is None:  # HiGHS occasionally gives up on a step; a smaller region is easier
            r /= 4
            continue
        s = np.zeros((n, n))
        s[ia, ib] = res.x[:m]
        s -= s.T
        cand = np.linalg.solve(eye - s / 2, eye + s / 2) @ a
        dc = _delta(cand)
        if dc < d - 1e-13:
            a, d, r = cand, dc, min(2 * r, 1.0)
        else:
            r /= 4
    return a, d, steps


def _race(rotation: np.ndarray, start: np.ndarray, steps: int = _RACE_STEPS) -> tuple[np.ndarray, float]:
    """``rotation @ start`` after a few LP steps of :func:`_polish`: (A, Δ)."""
    return _polish(rotation @ start, max_steps=steps)[:2]


def _build_p1(x0: np.ndarray):
    """P1 of Program 5.3: min ⟨Z, [[I, A], [Aᵀ, X₀]]⟩ s.t. −B ≤ A ≤ B, 1ᵀB ≤ t·1ᵀ, the block ⪰ 0."""
    n = x0.shape[0]
    a = cp.Variable((n, n), name="A")
    b = cp.Variable((n, n), name="B")
    z = cp.Parameter((2 * n, 2 * n), symmetric=True, name="Z")
    t = cp.Parameter(nonneg=True, name="t")
    big = cp.bmat([[np.eye(n), a], [a.T, x0]])
    cons = [big >> 0, a <= b, -b <= a, cp.sum(b, axis=0) <= t]
    return cp.Problem(cp.Minimize(cp.sum(cp.multiply(z, big))), cons), a, z, t


def solve_min_sensitivity(
    profile_gram, *, initial=None, solver=None, tol=1e-6, max_iterations=50, seed=None, verbose=False, n_jobs=None
) -> RawSolution:
    """Find a square A with AᵀA = X₀ and the least L1 sensitivity Δ_A found (Program 5.3, a heuristic).

    Parameters
    ----------
    profile_gram : array_like of shape (n, n)
        X₀ = AᵀA of a full-rank strategy (symmetric positive definite); the error profile is X₀⁻¹.
    initial : array_like of shape (p, n), optional
        A strategy with AᵀA = X₀. Its square reduction (A = Q R → R) is a start, and if nothing square
        beats Δ of ``initial`` itself, ``initial`` is returned unchanged.
    solver : str, optional
        SDP solver for the convex iteration; None picks one with :func:`mmopt.solvers.choose`.
    tol : float
        Rank-gap tolerance of the convex iteration, relative to tr G.
    max_iterations : int
        Budget of P1 solves (one SDP each), and of the polishing search: each polish takes at most
        min(400, 8·max_iterations) LP steps, each race min(8, max_iterations), and at most 8·max_iterations
        rotations race (an LP step costs ~1 s at n = 32: max_iterations=1 ran the full search, minutes, an
        auditor's probe).
    seed : int or numpy.random.Generator, optional
        Seeds the random rotations of the polishing search (deterministic for a given seed, whatever
        ``n_jobs``: the rotations are drawn in this process, in turn, before they are raced).
    verbose : bool
        Log progress to ``logging.getLogger("mmopt")``, and show tqdm bars over the rotations (if installed).
    n_jobs : int or None
        Random rotations raced (then leaders polished) at once, joblib's convention (see
        :func:`mmopt.optimize`); the result does not depend on it.

    Returns
    -------
    RawSolution
        ``status``: the least converged of the convex iteration ("user_limit" when it used all
        ``max_iterations``) and the rotation polishes ("user_limit" when one used all its LP steps).
        ``matrix`` = A with AᵀA = X₀ up to rounding; ``history`` = the convex iteration's P1 solves
        ({"iteration", "objective" = Δ of the re-orthogonalised iterate, "rank_gap", "weight", "target",
        "seconds"}); ``extra`` = {"seconds", "sensitivity", "start_sensitivity", "sdp_sensitivity",
        "restarts"}. Δ never exceeds that of ``initial`` or of the canonical square factors.

    Raises
    ------
    ValueError
        If ``profile_gram`` is not symmetric positive definite, ``initial`` does not have the profile,
        or ``solver``/``max_iterations`` is invalid.
    mmopt.solvers.SolverError
        If the first SDP of the convex iteration fails.

    Notes
    -----
    Paper §5.4, Theorem 5.28: min Δ s.t. −B ≤ A ≤ B, 1ᵀB ≤ Δ·1ᵀ, G = [[I, A], [Aᵀ, X₀]] ⪰ 0 and
    rank G = n (⟺ AᵀA = X₀). Convex iteration as in :func:`mmopt.search.sdp_min_error.solve_min_error_sdp`,
    bisecting Δ between max_j √(X₀)_jj (every profile-equivalent A has these column L2 norms) and the
    best Δ. Iterates are made exact by A = polar(A_k A₀⁻¹) A₀ before Δ is measured. The SDP alone
    reaches Δ ≈ 3.51 (H₈) and 3.00 (Y₈); the rotation polish reaches 3.3571 and 2.8284, and at n = 4
    the known optima 1/√2 + √(7/2) ≈ 2.5779 (H₄) and 2 (Y₄), below Fig. 4's 2.896 and 2.414.

    Examples
    --------
    >>> import numpy as np
    >>> y4 = np.array([[1, 1, 1, 1], [1, 1, -1, -1], [1, -1, 0, 0], [0, 0, 1, -1]], dtype=float)
    >>> res = solve_min_sensitivity(y4.T @ y4, seed=0)
    >>> round(res.extra["sensitivity"], 6)
    2.0
    """
    clock = time.perf_counter()
    func = "solve_min_sensitivity"
    x0 = _validate_gram(profile_gram, func, "profile_gram", definite=True)
    n = x0.shape[0]
    max_iterations = check_int(max_iterations, name="max_iterations", caller=func)
    tol = check_real(tol, name="tol", caller=func, low=0.0, high=1.0, low_open=True)
    name = solvers.choose(solver, size_hint=2 * n)  # many SDPs, each with cones of side 2n
    rng = np.random.default_rng(seed)
    n_jobs = check_n_jobs(n_jobs, caller=func)
    c = np.diag(x0).max()  # work with X₀/c: every column L2 norm ≤ 1, so Δ is O(1)..O(√n)
    xs = x0 / c
    lam, vec = np.linalg.eigh(xs)
    # The paper's canonical factor D^{1/2}Q first (Theorem 4.13): the convex iteration starts there. The
    # symmetric root is often better but is a fixed point of the iteration (it never moves from it).
    cands = [np.sqrt(lam)[:, None] * vec.T, (vec * np.sqrt(lam)) @ vec.T, np.linalg.cholesky(xs).T]
    given = None
    if initial is not None:
        given = _check_initial(initial, func, n)
        mismatch = np.abs(given.T @ given - x0).max() / np.abs(x0).max()
        if mismatch > 1e-6:
            raise ValueError(
                f"The 'initial' parameter of {func} must satisfy AᵀA = profile_gram. Got a relative mismatch "
                f"of {mismatch:.3g}; pass profile_gram=A.T @ A for your strategy A."
            )
        cands.insert(0, np.linalg.qr(given / np.sqrt(c), mode="r"))
    a0 = cands[0]
    a0_inv = np.linalg.inv(a0)
    deltas = [_delta(a) for a in cands]
    k = int(np.argmin(deltas))
    start_delta = deltas[k] * np.sqrt(c)  # the best factor we already have: never return worse

    # Phase 1: the paper's rank-constrained SDP by convex iteration.
    prob, a_var, z_par, t_par = _build_p1(xs)
    runner = _ConvexIteration(
        prob,
        a_var,
        z_par,
        t_par,
        t_scale=np.sqrt(c),
        solver=name,
        weight=None,
        tol=tol,
        verbose=verbose,
        what=func,
        big=lambda a: np.block([[np.eye(n), a], [a.T, xs]]),
        exact=lambda a: (lambda q: (q, _delta(q) * np.sqrt(c)))(_polar(a @ a0_inv) @ a0),
    )
    # History and bisection in the caller's units: P1 sees X₀/c, hence t_scale = √c.
    sdp_d, sdp_a, status = runner.run(a0, deltas[0] * np.sqrt(c), float(np.sqrt(c)), max_iterations, clock)

    # Phase 2: polish the SDP's answer, and race random rotations (Haar, via QR of a Gaussian): a few LP
    # steps each, then a full polish of the leaders. At H₈ only ~8% of rotations lead to the best local
    # optimum, and the leaders after 8 steps include them.
    restarts = 16 if n <= 4 else 64 if n <= 8 else max(8, 512 // n)  # LP cost grows ~n⁴ per step
    polish_steps, race_steps = min(_POLISH_STEPS, 8 * max_iterations), min(_RACE_STEPS, max_iterations)
    restarts = min(restarts, 8 * max_iterations)
    if verbose:
        logger.info("%s: polishing the SDP's answer, then racing %d random rotations", func, restarts)
    best_a, best_d, steps = _polish(sdp_a, polish_steps)
    spent = [steps >= polish_steps]  # per full polish: did it stop at its step budget?
    if deltas[k] < best_d:
        best_a, best_d = cands[k], deltas[k]
    # The rotations are drawn here, in turn from one Generator, exactly as a sequential loop would (a seed
    # keeps its answer); races and polishes come back in task order (a stable sort, strict improvements), so
    # the answer is the same whatever n_jobs.
    rotations = [np.linalg.qr(rng.standard_normal((n, n))) for _ in range(restarts)]
    racers = list(ordered_map(_race, [(q * np.sign(np.diag(r)), cands[k], race_steps) for q, r in rotations],
                              n_jobs=n_jobs,
                              desc=f"{func} rotations", progress=verbose))
    racers.sort(key=lambda ad: ad[1])
    leaders = [(a, polish_steps) for a, _ in racers[: int(np.clip(restarts // 8, 2, 8))]]
    for a, d, steps in ordered_map(_polish, leaders, n_jobs=n_jobs, desc=f"{func} polishes", progress=verbose):
        spent.append(steps >= polish_steps)
        if d < best_d:
            best_a, best_d = a, d
    if verbose:
        logger.info("%s: Δ %.8g (start %.8g, SDP %.8g)", func, best_d * np.sqrt(c), start_delta, sdp_d)
    # Hundreds of Cayley steps drift from AᵀA = X₀ by ~1e-14: re-orthogonalise once more, then rescale.
    exact = _polar(best_a @ a0_inv) @ a0
    if _delta(exact) <= best_d * (1 + 1e-12) and np.isfinite(_true_error(exact, np.eye(n))):
        best_a = exact
    best_a = best_a * np.sqrt(c)
    best_d = _delta(best_a)
    if best_d > start_delta:  # cannot happen (the start is a candidate), but never return worse
        best_a, best_d = cands[k] * np.sqrt(c), start_delta
    if given is not None and _delta(given) <= best_d:
        best_a, best_d = given, _delta(given)  # never worse than the input, even if it is not square
    note = {
        "user_limit": f"The convex iteration used all max_iterations={max_iterations}; raise it to refine. ",
        "solver_error": f"A P1 solve failed ({runner.failure}); kept the best iterate. ",
        "optimal_inaccurate": "Some P1 solves were inaccurate (Δ is still exact); try another solver. ",
    }
    if status == "optimal" and runner.inaccurate:
        status = "optimal_inaccurate"
    note = note.get(status, "")
    # Both phases always run and refine each other's answers, so the result is only as converged as the
    # least converged of them: "optimal" needs the convex iteration's test and every polish's to pass.
    if any(spent):
        note += (f"{sum(spent)} of {len(spent)} rotation polishes stopped at their {polish_steps}-step budget "
                 "before the trust region closed. ")
        status = worst_status([status, "user_limit"])
    message = (
        f"{note}{_HEURISTIC}: Δ {best_d:.8g} (start {start_delta:.8g}, SDP {sdp_d:.8g}, best of {restarts} random "
        "rotations raced and polished); 'optimal' means a local optimum: the convex iteration's bisection closed "
        "and every polish's trust region shrank below 1e-9. Another seed may find a lower Δ."
    )
    return RawSolution(
        matrix=best_a,
        gram=None,
        status=status,
        message=message,
        iterations=len(runner.history),
        solver=name if runner.history else None,  # the start already met the L2 floor: no SDP was solved
        history=tuple(runner.history),
        extra={
            "seconds": time.perf_counter() - clock,
            "sensitivity": float(best_d),
            "start_sensitivity": float(start_delta),
            "sdp_sensitivity": float(sdp_d),
            "restarts": restarts,
        },
    )
