"""Program 5.2: the L2 (Gaussian-noise) strategy as one convex SDP solved through CVXPY.

Notation: see README. Minimise tr(G X⁻¹) subject to X ⪰ 0 and diag X ≤ 1, where G = WᵀW is the
workload's Gram matrix; any A with AᵀA = X* then minimises ‖A‖₂² tr(G (AᵀA)⁻¹) (paper §5.2.1).
"""

from __future__ import annotations

import logging
import time

import cvxpy as cp
import numpy as np

from mmopt import solvers
from mmopt._base.solution import RawSolution
from mmopt._base.validation import check_gram, check_gram_magnitude, check_int, check_matrix, check_real

logger = logging.getLogger("mmopt")


def _validate_gram(gram, func: str, param: str, *, definite: bool = False) -> np.ndarray:
    """Return ``gram`` as a symmetric PSD float array, or raise ValueError saying what is wrong."""
    remedy = " Pass WᵀW for a workload W." if not definite else " Pass AᵀA for a full-rank strategy A."
    check_gram_magnitude(check_matrix(gram, name=param, caller=func, square=True), name=param, caller=func)
    g = check_gram(gram, name=param, caller=func, remedy=remedy)
    eig = np.linalg.eigvalsh(g)
    if eig[-1] <= 0:
        raise ValueError(
            f"The '{param}' parameter of {func} must not be all zeros: there is nothing to optimise."
        )
    if definite and eig[0] <= 1e-10 * eig[-1]:
        raise ValueError(
            f"The '{param}' parameter of {func} must be positive definite (AᵀA of a full-rank strategy A). "
            f"Got a singular matrix (λ_min/λ_max = {eig[0] / eig[-1]:.3g}); make the strategy full rank "
            "first, e.g. by appending α·I rows (paper §3.3)."
        )
    return g


def gram_root(gram: np.ndarray, rtol: float = 1e-12) -> np.ndarray:
    """Return R (r×n) with RᵀR = G, dropping null directions of G (so r = rank G)."""
    lam, vec = np.linalg.eigh(gram)
    keep = lam > rtol * lam[-1]
    return np.sqrt(lam[keep])[:, None] * vec[:, keep].T


def build_problem(gram) -> tuple[cp.Problem, cp.Variable]:
    """Build Program 5.2 as a cvxpy Problem, for users who want to add their own constraints.

    Parameters
    ----------
    gram : array_like of shape (n, n)
        G = WᵀW, symmetric positive semidefinite.

    Returns
    -------
    problem : cvxpy.Problem
        Minimise tr U s.t. [[X, Rᵀ], [R, U]] ⪰ 0, diag X ≤ 1, with RᵀR = G/λ_max(G): the optimal X is
        that of G, the optimal value is tr(G X⁻¹)/λ_max(G). Pass it back to :func:`solve_l2_sdp`
        through ``problem=``.
    X : cvxpy.Variable
        The symmetric n×n variable (named "X").

    Raises
    ------
    ValueError
        If ``gram`` is not a square symmetric PSD matrix.

    Notes
    -----
    By the Schur complement the block constraint is U ⪰ R X⁻¹ Rᵀ, so tr U ≥ tr(R X⁻¹ Rᵀ) = tr(G X⁻¹).
    One PSD cone of side n + rank G replaces the n cones of side n+1 of the paper's (6): cvxpy's
    ``tr_inv`` builds those n cones and is ~9× slower.

    Examples
    --------
    >>> problem, X = build_problem([[2.0, 1.0], [1.0, 1.0]])
    >>> X.shape
    (2, 2)
    """
    g = _validate_gram(gram, "build_problem", "gram")
    n = g.shape[0]
    # Scaling G by 1/λ_max leaves X* unchanged and cuts SCS's iterations ~10× (all ranges, n = 32).
    r = gram_root(g / np.linalg.eigvalsh(g)[-1])
    x = cp.Variable((n, n), symmetric=True, name="X")
    u = cp.Variable((r.shape[0], r.shape[0]), symmetric=True, name="U")
    constraints = [cp.bmat([[x, r.T], [r, u]]) >> 0, cp.diag(x) <= 1]
    return cp.Problem(cp.Minimize(cp.trace(u)), constraints), x


def _dual_bound(g: np.ndarray, mu: np.ndarray) -> float:
    """Weak-duality lower bound on min tr(G X⁻¹) s.t. diag X ≤ 1, valid for every μ ≥ 0.

    inf_X tr(G X⁻¹) + Σ μᵢ(Xᵢᵢ − 1) = 2 T(μ) − Σμ with T(μ) = tr((D^{1/2} G D^{1/2})^{1/2}), D = Diag μ;
    the best rescaling μ → cμ gives T(μ)² / Σμ. Computed in numpy, so an inaccurate solver cannot
    make it invalid: a poor μ only gives a weaker bound. Each computed eigenvalue is lowered by its error bound
    (forming M and eigvalsh's backward error: 64·n·eps·‖M‖_F, as :mod:`mmopt.structured._dual_blocks`) before √:
    a rank-deficient G's round-off eigenvalues (~10⁻¹⁶·‖M‖) each added ~10⁻⁸·√‖M‖ to T, and the bound came out
    1.2·10⁻⁷ above the true optimum 1 of G = 11ᵀ.

    >>> bound = _dual_bound(np.ones((30, 30)), np.random.default_rng(0).uniform(0.5, 2, 30))
    >>> bool(0.999999 < bound <= 1.0)
    True
    """
    mu = np.clip(np.nan_to_num(mu), 0.0, None)
    total = mu.sum()
    if total <= 0:
        return 0.0
    s = np.sqrt(mu)
    M = s[:, None] * g * s[None, :]
    lam = np.linalg.eigvalsh(M) - 64 * np.finfo(float).eps * M.shape[0] * float(np.linalg.norm(M))
    t = np.sqrt(np.clip(lam, 0.0, None)).sum()
    return float(t * t / total * (1 - 1e-12))


_BLEND = 1e-6


def _project(x: np.ndarray) -> np.ndarray:
    """Make a solver's X exactly feasible and invertible, with diag X ≤ 1.

    Negative eigenvalues are clipped. A singular X (rank-deficient G leaves null(G) unconstrained) is
    blended, X ← (1 − α) X + α I with α = 1e-6, so that X^{1/2} is a full-rank strategy (paper §3.3);
    since the blend ⪰ (1 − α) X, tr(G X⁻¹) grows by a factor at most 1/(1 − α).
    """
    x = (x + x.T) / 2
    lam, vec = np.linalg.eigh(x)
    lam = np.clip(lam, 0.0, None)
    if lam[0] < _BLEND * lam[-1]:
        lam = (1 - _BLEND) * lam + _BLEND  # diag X ≤ 1 is kept: (1 − α) Xᵢᵢ + α ≤ 1
    x = (vec * lam) @ vec.T
    d = 1 / np.sqrt(np.maximum(np.diag(x), 1.0))  # SCS overshoots diag X by up to ~4e-6
    x = d[:, None] * x * d[None, :]
    # Interior-point solvers stop strictly inside (diag X ≈ 1 − 1e-8); a uniform rescale to max diag = 1
    # can only lower tr(G X⁻¹), and m/m is exactly 1 in IEEE arithmetic, so diag X ≤ 1 holds exactly.
    x = (x + x.T) / 2  # exactly symmetric: a + b == b + a in IEEE arithmetic
    return x / np.diag(x).max()


def solve_l2_sdp(gram, *, solver=None, tol=1e-8, max_iterations=None, problem=None, verbose=False) -> RawSolution:
    """Solve Program 5.2 and return the optimal Gram matrix X of the L2 strategy.

    Parameters
    ----------
    gram : array_like of shape (n, n)
        G = WᵀW, symmetric positive semidefinite.
    solver : str, optional
        CVXPY solver name; None picks one with :func:`mmopt.solvers.choose`.
    tol : float
        Solver tolerance (SCS is floored at 1e-6).
    max_iterations : int, optional
        The solver's iteration limit (None: its default). If it is hit, the last iterate is made feasible
        and returned with status "user_limit"; its dual bound is still valid (weak duality).
    problem : cvxpy.Problem or (cvxpy.Problem, cvxpy.Variable), optional
        A problem from :func:`build_problem` for the same ``gram``, possibly with extra constraints.
    verbose : bool
        Log progress to ``logging.getLogger("mmopt")`` and let the solver print.

    Returns
    -------
    RawSolution
        ``gram`` = X (feasible: diag X ≤ 1 exactly), ``matrix`` = None, ``dual_bound`` = a certified lower
        bound on tr(G X⁻¹), ``extra`` = {"seconds", "objective"} with objective = tr(G X⁻¹) of the
        returned X when X is invertible. ``status`` is the solver's: "optimal" when it met its
        tolerances, "optimal_inaccurate" when it stopped short of them, "user_limit" at max_iterations.

    Raises
    ------
    ValueError
        On an invalid ``gram``, an unusable ``solver``, or a ``problem`` without a variable named "X".
    mmopt.solvers.SolverError
        If the solver crashes or returns no iterate at all.

    Notes
    -----
    Paper §5.2.1, Program 5.2: min Σᵢ uᵢ s.t. [[X, wᵢᵀ], [wᵢ, uᵢ]] ⪰ 0, Xᵢᵢ ≤ 1. Here the workload is
    reduced to R = G^{1/2} (r×n) and the n blocks merged into one (see :func:`build_problem`). The dual
    bound is T(μ)²/Σμ (see ``_dual_bound``) with μ from the solver's multipliers of diag X ≤ 1 and from
    the KKT identity X⁻¹ G X⁻¹ = Diag μ, whichever is larger.

    Examples
    --------
    >>> res = solve_l2_sdp([[2.0, 1.0], [1.0, 1.0]])  # prefix queries, n = 2
    >>> round(res.extra["objective"], 3), res.status  # (3 + √5)/2
    (2.618, 'optimal')
    """
    start = time.perf_counter()
    g = _validate_gram(gram, "solve_l2_sdp", "gram")
    tol = check_real(tol, name="tol", caller="solve_l2_sdp", low=0.0, high=1.0, low_open=True)
    if max_iterations is not None:
        max_iterations = check_int(max_iterations, name="max_iterations", caller="solve_l2_sdp")
    n = g.shape[0]
    name = solvers.choose(solver, size_hint=n)
    if problem is None:
        problem, x = build_problem(g)
    else:
        if isinstance(problem, tuple):
            problem, x = problem
        else:
            found = [v for v in problem.variables() if v.name() == "X"]
            if len(found) != 1:
                raise ValueError(
                    "The 'problem' parameter of solve_l2_sdp must come from build_problem (one variable "
                    f"named 'X'). Got variables {[v.name() for v in problem.variables()]}."
                )
            x = found[0]
        if x.shape != (n, n):
            raise ValueError(
                f"The 'problem' parameter of solve_l2_sdp must be built for this gram: its X has shape "
                f"{x.shape}, but gram is {n}×{n}."
            )
    diag_con = next(
        (c for c in problem.constraints if isinstance(c, cp.constraints.Inequality) and c.shape == (n,)), None
    )
    out = solvers.solve(problem, name, tol=tol, max_iters=max_iterations, verbose=verbose,
                        what="Program 5.2 (L2 SDP)")
    # At an iteration limit cvxpy still hands back the last iterate; _project makes it feasible.
    usable = out.has_solution or out.status == "user_limit"
    if not usable or x.value is None or not np.all(np.isfinite(x.value)):
        raise solvers.SolverError(out.message)
    xv = _project(x.value)
    objective = np.inf
    bound = None
    lam, vec = np.linalg.eigh(xv)
    if lam[0] > 1e-12 * lam[-1]:
        xinv = (vec / lam) @ vec.T
        objective = float(np.trace(g @ xinv))
        candidates = [np.diag(xinv @ g @ xinv)]  # KKT: X⁻¹GX⁻¹ = Diag μ at the optimum
        if diag_con is not None and diag_con.dual_value is not None:
            candidates.append(np.ravel(diag_con.dual_value))
        # Extra user constraints only shrink the feasible set, so the bound stays valid for them.
        bound = max(_dual_bound(g, mu) for mu in candidates)
    if verbose:
        logger.info("solve_l2_sdp: %s, tr(G X⁻¹) = %.10g, dual bound %s", out.status, objective, bound)
    return RawSolution(
        matrix=None,
        gram=xv,
        status=out.status,
        message=out.message,
        iterations=out.iterations,
        solver=name,
        dual_bound=bound,
        extra={"seconds": time.perf_counter() - start, "objective": objective, "solver_seconds": out.seconds},
    )
