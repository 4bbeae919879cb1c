"""Program 5.1: the MinError strategy (ε-DP, L1 sensitivity) by Dattorro's convex iteration.

Notation: see README. The rank-constrained SDP of Theorem 5.17 is handled by alternating (P1) a convex
SDP steered by a direction matrix Z and (P2) Z = U Uᵀ from the eigenvectors of the n smallest
eigenvalues of G_big = [[I, A], [Aᵀ, X]] (paper §5.1, spec §4). It is a heuristic: local, no guarantee.
"""

from __future__ import annotations

import logging
import time

import cvxpy as cp
import numpy as np

from mmopt import solvers
from mmopt._base.solution import RawSolution
from mmopt._base.validation import check_int, check_matrix, check_real
from mmopt.dense.objective import trusted_gram_svd_bound
from mmopt.search._convex_iteration import ConvexIteration as _ConvexIteration
from mmopt.search.sdp_l2 import _validate_gram, gram_root, solve_l2_sdp

logger = logging.getLogger("mmopt")

_HEURISTIC = "Convex iteration is a heuristic with no optimality guarantee"
#: The default starts. From I the iterates barely move, and that start ends at tr G, the identity strategy's error:
#: on prefix sums, all ranges and random ranges at n = 4 … 16, 2×2×3 marginals and identity+total its best was
#: tr G + 5·10⁻⁹ … 3·10⁻⁵, never below (a development run, not kept). A caller that weighs the identity strategy
#: itself (min_error does) passes the other two and saves its 24–30 P1 solves (prefix(12): 11.6 → 8.7 CPU s).
STARTS = ("svd", "identity", "l2")


def _true_error(a: np.ndarray, g: np.ndarray, root: np.ndarray | None = None) -> float:
    """Δ_A² tr(G (AᵀA)⁻¹) = Δ_A² Σᵢ ‖R vᵢ‖² / sᵢ² from an SVD of A, with G = RᵀR (:func:`gram_root`: G's range, the
    directions the SDP sees; ``root``: R when the caller has it, as every step of a search on one G does); inf if A
    is numerically singular.

    Computed from A itself, never from the SDP's X, which only satisfies X ⪰ AᵀA. Not vᵢᵀ G vᵢ: on a G with null
    directions (a workload with duplicated columns) the SDP's A is nearly singular there (sᵢ/s₁ ≈ 3·10⁻⁹), where
    vᵢᵀ G vᵢ is G's round-off, of either sign — divided by sᵢ² it made the error −6.0 and the search's next target
    negative, which cvxpy refused (a helper's probe); ‖R vᵢ‖² is ≥ 0 and of order eps² there.
    """
    _, s, vt = np.linalg.svd(a, full_matrices=False)
    if s.size < a.shape[1] or s[-1] <= 1e-9 * s[0]:
        return np.inf
    delta = np.abs(a).sum(axis=0).max()
    root = gram_root(g) if root is None else root
    return float(delta**2 * np.sum(np.sum((vt @ root.T) ** 2, axis=1) / s**2))


_svd_bound = trusted_gram_svd_bound  # (Σᵢ √λᵢ(G))² / n, a lower bound for every A (Thm 5.26); G checked first


def _check_initial(a0, func: str, n: int) -> np.ndarray:
    """Validate a warm start: a finite p×n matrix, p ≥ n, of full column rank."""
    a = check_matrix(a0, name="initial", caller=func)
    if a.shape[1] != n or a.shape[0] < n:
        raise ValueError(
            f"The 'initial' parameter of {func} must have shape (p, {n}) with p ≥ {n} (a strategy over the "
            f"same domain as the gram). Got shape {a.shape} instead."
        )
    s = np.linalg.svd(a, compute_uv=False)
    if s[-1] <= 1e-9 * s[0]:
        raise ValueError(
            f"The 'initial' parameter of {func} must have full column rank {n}. Got a numerically singular "
            f"strategy (σ_min/σ_max = {s[-1] / s[0]:.2g}); append α·I rows (paper §3.3)."
        )
    return a


def _square(a0, func: str, n: int) -> np.ndarray:
    """Validate a p×n full-rank strategy and reduce it to a square profile-equivalent one (A0 = Q R → R)."""
    a = _check_initial(a0, func, n)
    return np.linalg.qr(a, mode="r") if a.shape[0] > n else a


def _check_starts(starts, func: str) -> tuple[str, ...]:
    """A non-empty selection of :data:`STARTS`, as a tuple (a bare string is refused: it is not a selection)."""
    if not isinstance(starts, (list, tuple)) or not starts or any(s not in STARTS for s in starts):
        raise ValueError(f"The 'starts' parameter of {func} must be a non-empty tuple of names from {STARTS}. "
                         f"Got {starts!r} instead.")
    return tuple(starts)


def _starts(g: np.ndarray, solver: str, names=STARTS) -> list[tuple[str, np.ndarray]]:
    """Cheap full-rank starts, those of ``names`` in this order: the Theorem 5.25 strategy G^{1/4} ("svd"), I
    ("identity"), and (L2 optimum X*)^{1/2} ("l2")."""
    n = g.shape[0]
    out = []
    if "svd" in names:
        lam, vec = np.linalg.eigh(g)
        out.append(("svd", np.clip(lam, 0.0, None)[:, None] ** 0.25 * vec.T))
    if "identity" in names:
        out.append(("identity", np.eye(n)))
    if "l2" in names:
        try:
            x = solve_l2_sdp(g, solver=solver).gram
            lx, vx = np.linalg.eigh(x)
            out.append(("l2", (vx * np.sqrt(np.clip(lx, 0.0, None))) @ vx.T))
        except solvers.SolverError as exc:  # the L2 start is optional; the others suffice
            logger.info("solve_min_error_sdp: L2 start unavailable (%s)", exc)
    return out


def _build_p1(r: np.ndarray, n: int, penalty: bool):
    """Step P1 with Z, t and w as cvxpy Parameters, so cvxpy canonicalises it once for all iterations."""
    a = cp.Variable((n, n), name="A")
    b = cp.Variable((n, n), name="B")
    x = cp.Variable((n, n), symmetric=True, name="X")
    u = cp.Variable((r.shape[0], r.shape[0]), symmetric=True, name="U")
    z = cp.Parameter((2 * n, 2 * n), symmetric=True, name="Z")
    big = cp.bmat([[np.eye(n), a], [a.T, x]])
    cons = [big >> 0, cp.bmat([[x, r.T], [r, u]]) >> 0, a <= b, -b <= a, cp.sum(b, axis=0) <= 1]
    rank_term = cp.sum(cp.multiply(z, big))
    t = cp.Parameter(nonneg=True, name="t")
    if penalty:  # z holds w·Z here
        prob = cp.Problem(cp.Minimize(cp.trace(u) + rank_term), cons)
    else:
        prob = cp.Problem(cp.Minimize(rank_term), [*cons, cp.trace(u) <= t])
    return prob, a, x, z, t


def solve_min_error_sdp(
    gram, *, initial=None, starts=STARTS, solver=None, weight=None, tol=1e-6, max_iterations=50, verbose=False
) -> RawSolution:
    """Search for a strategy A minimising Δ_A² tr(G (AᵀA)⁻¹) (Program 5.1, convex iteration).

    Parameters
    ----------
    gram : array_like of shape (n, n)
        G = WᵀW, symmetric positive semidefinite.
    initial : array_like of shape (p, n), optional
        A full-rank warm start, reduced to a square profile-equivalent R (A0 = Q R). Default: run from
        each of ``starts``; keep the best.
    starts : sequence of {"svd", "identity", "l2"}
        The starts when no ``initial`` is given (:data:`STARTS`): the Theorem 5.25 strategy G^{1/4}, I, and the
        square root of the L2 optimum.
    solver : str, optional
        SDP solver; None picks one with :func:`mmopt.solvers.choose`.
    weight : float, optional
        None (default): feasibility form with bisection on the target t. A float w: the penalty form
        with that weight (G is scaled internally to λ_max(G) = 1; w ≈ 3-10 works at n = 4).
    tol : float
        Rank-gap tolerance, relative to tr G_big.
    max_iterations : int
        Budget of P1 solves (one SDP each) per start.
    verbose : bool
        Log each iteration to ``logging.getLogger("mmopt")``.

    Returns
    -------
    RawSolution
        ``matrix`` = the best A found (n×n, max column L1 = 1, full rank); ``history`` = one dict per P1
        solve {"iteration", "objective" (true error of that A), "rank_gap", "weight", "target",
        "seconds", "start"}; ``extra`` = {"seconds", "objective", "start", "svd_bound"}.

    Raises
    ------
    ValueError
        On an invalid ``gram``, ``initial``, ``solver``, ``weight`` or ``max_iterations``.
    mmopt.solvers.SolverError
        If the very first SDP fails (a later failure returns the best iterate, status "solver_error").

    Notes
    -----
    Paper §5.1, Theorem 5.17: min Σuᵢ s.t. uᵢ ≥ wᵢ X⁻¹ wᵢᵀ (here one Schur block [[X, Rᵀ], [R, U]] ⪰ 0
    with RᵀR = G), −B ≤ A ≤ B, 1ᵀB ≤ 1ᵀ, G_big ⪰ 0 and rank G_big = n (⟺ X = AᵀA). P1 (feasibility
    form): min ⟨Z, G_big⟩ s.t. tr U ≤ t; P2: Z = U Uᵀ from the n eigenvectors of G_big's smallest
    eigenvalues. A rank gap Σ_{i≤n} λᵢ↑(G_big) → 0 makes t achievable; t is bisected between the SVD
    bound (Σ√λᵢ(G))²/n and the best true error Δ_A² tr(G (AᵀA)⁻¹) found, computed from A itself. Z₀ is
    the null-space projector of G_big(A₀): Z₀ = I lets A shrink to 0 and never recover.

    Examples
    --------
    >>> import numpy as np
    >>> res = solve_min_error_sdp(np.eye(3))
    >>> round(res.extra["objective"], 6), res.status
    (3.0, 'optimal')
    """
    clock = time.perf_counter()
    func = "solve_min_error_sdp"
    g = _validate_gram(gram, func, "gram")
    n = g.shape[0]
    max_iterations = check_int(max_iterations, name="max_iterations", caller=func)
    if weight is not None:
        weight = check_real(weight, name="weight", caller=func, low=0.0, low_open=True)
    tol = check_real(tol, name="tol", caller=func, low=0.0, high=1.0, low_open=True)
    name = solvers.choose(solver, size_hint=2 * n)  # many SDPs, each with cones of side 2n
    starts = _check_starts(starts, func)
    starts = [("initial", _square(initial, func, n))] if initial is not None else _starts(g, name, starts)
    bound = _svd_bound(g)
    scale = np.linalg.eigvalsh(g)[-1]  # P1 sees G/λ_max: conditioning, as in sdp_l2
    prob, a_var, x_var, z_par, t_par = _build_p1(gram_root(g / scale), n, weight is not None)
    root = gram_root(g)  # the exact error's (_true_error), once: every step and start scores on the same G
    runner = _ConvexIteration(
        prob, a_var, z_par, t_par, t_scale=scale, solver=name, weight=weight, tol=tol, verbose=verbose,
        what=func, big=lambda a: np.block([[np.eye(n), a], [a.T, x_var.value]]),
        exact=lambda a: (a / np.abs(a).sum(axis=0).max(), _true_error(a, g, root)),
    )  # fmt: skip
    best, failed = None, False
    for k, (label, a0) in enumerate(starts):
        if verbose:
            logger.info("%s: start %d of %d ('%s'), at most %d P1 solves", func, k + 1, len(starts), label,
                        max_iterations)
        e0 = _true_error(a0, g, root)
        if not np.isfinite(e0):
            continue  # e.g. G^{1/4} for a singular G
        first = len(runner.history)
        e, a, status = runner.run(a0 / np.abs(a0).sum(axis=0).max(), e0, bound, max_iterations, clock)
        for rec in runner.history[first:]:
            rec["start"] = label
        if best is None or e < best[0]:
            best = (e, a, label, status)
        if status == "solver_error":
            failed = True
            break
    e_best, a_best, label, status = best  # the status of the run that produced the answer
    if status == "optimal" and runner.inaccurate:
        status = "optimal_inaccurate"
    note = {
        "user_limit": f"Used all max_iterations={max_iterations} P1 solves; raise it to refine further. ",
        "optimal_inaccurate": "Some P1 solves were inaccurate (the error is exact); try another solver. ",
    }.get(status, "")
    if failed:
        note += f"A P1 solve failed, so the best iterate so far is returned ({runner.failure}). "
    message = (
        f"{note}{_HEURISTIC}: best true error {e_best:.8g} from start '{label}' (SVD lower bound "
        f"{bound:.8g}); 'optimal' means its test passed (the bisection on the target error closed to 0.1%, or "
        "the penalty form's rank gap met tol), a local optimum. Other warm starts (initial=) may find better ones."
    )
    extra = {"seconds": time.perf_counter() - clock, "objective": e_best, "start": label, "svd_bound": bound}
    return RawSolution(
        matrix=a_best, gram=None, status=status, message=message, iterations=len(runner.history),
        solver=name, history=tuple(runner.history), extra=extra,
    )  # fmt: skip
