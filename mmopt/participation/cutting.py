"""The certified optimum under minimum separation, n ≤ 2,048: cutting planes over participation patterns.

Notation: see README and :mod:`mmopt.participation.optimum`. Under ``min_separation(b, k)`` the program is

    min tr(G X⁻¹)  s.t.  ⟨X_π, Y⟩ ≤ 1 for every pattern π of the schema and every Y ⪰ 0 with diag Y ≤ 1,

with far too many patterns to list (n = 1,024, b = 256, k = 4: ~1.8·10⁸). Keeping the constraints of a working set
P of patterns only relaxes the program (fewer constraints, a smaller minimum), so the Lagrange dual of the
restricted program is a valid lower bound for the whole schema: S(M)²/Σλ over weights B_π = λ_π R_π on the
patterns of P (:mod:`mmopt.participation.working_set`; the patterns overlap, so M is not block diagonal and each
step costs one n×n eigendecomposition), maximised by the L-BFGS of :mod:`mmopt.participation.optimum`.

Cutting planes (Kelley's method, the issue's suggestion):

1. start from the b fixed-epoch patterns {j, j + b, …} (each a min-separation pattern when b = n/k), at the
   fixed-epoch optimum (prefix sums: :mod:`mmopt.participation.tridiagonal`) — or, from 128 steps up, at the
   cutting planes' solution at n/2 (each coarse pattern π standing for 2π and 2π + 1, with its weight and
   correlation; the coarse levels spend at most 60 % of the budget);
2. solve the restricted dual (60 L-BFGS steps a round), take the primal X(M) and search the whole schema for high
   1ᵀ|X_π|1 (:func:`mmopt.participation.patterns.worst_patterns`, a local search); add those above the level
   S/Σλ at which the restricted optimum's active patterns sit (the stationarity of the dual in λ_π); repeat.

The certificate at each round:

* dual: S(M)²/Σλ, S from K's eigenvalues less Weyl's allowance for round-off (valid for the whole schema whatever
  the working set); the best over rounds is kept;
* primal: D X(M) D, D a diagonal scaling that lowers the heaviest patterns' steps (:func:`_equalize`; an inexact
  dual point leaves its constraint values uneven), its error Σ_ij G_ij (X⁻¹)_ij/(d_i d_j) and Δ² its sensitivity
  over ALL patterns of the schema: exact by enumeration when at most
  :data:`mmopt.participation.sensitivity.MAX_ENUMERATED` patterns, else the proven upper bound of
  :func:`mmopt.participation.patterns.pattern_upper_bound` (branch and bound on |X| to a relative ``tol``/4; the
  sensitivity exactly when X ≥ 0, an upper bound for any sign). The best primal's error is recomputed from its
  causal factor C (X = CᵀC) at the end.

``status="optimal"`` only when primal ≤ (1 + tol)·dual.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.linalg
from scipy import optimize as sopt

from mmopt._base.cumulative import cumulative_rows
from mmopt.participation.optimum import ScheduleOptimum, causal_factor
from mmopt.participation.working_set import _Factor, _PatternDual

__all__ = ["MAX_N", "solve_min_separation"]

MAX_N = 2048
_COARSEST = 64  # the coarse-to-fine warm start runs down to this many steps
_COARSE_ROUNDS = 12  # cutting-plane rounds at each coarse level, of at most
_COARSE_ITERATIONS = 60  # L-BFGS iterations: a warm start needs no certificate


def _sensitivity(X: np.ndarray, b: int, k: int, rtol: float):
    """Δ² of X over every pattern of min_separation(b, k): the schema's exact enumeration when few patterns, else
    the branch and bound on |X| (exact for X ≥ 0, an upper bound otherwise)."""
    from mmopt.participation.patterns import pattern_upper_bound, worst_patterns
    from mmopt.participation.schemas import MinSeparation
    from mmopt.participation.sensitivity import MAX_ENUMERATED, Sensitivity, gram_sensitivity_squared
    n = X.shape[0]
    if MinSeparation(b, k).count(n) <= MAX_ENUMERATED:
        return gram_sensitivity_squared(X, MinSeparation(b, k))
    _, found = worst_patterns(X, b, k, seeds=100)
    upper, attained, pattern, nodes = pattern_upper_bound(np.abs(X), b, k, incumbent=found[0], rtol=rtol)
    lower = float(X[np.ix_(pattern, pattern)].sum())
    nonnegative = bool(np.all(X >= 0))
    exact = nonnegative and upper <= lower * (1 + 1e-12)
    return Sensitivity(float(upper), min(lower, float(upper)), exact,
                       f"min separation: branch and bound on {'X' if nonnegative else '|X|'} ({nodes:,} nodes, "
                       f"relative tolerance {rtol:g})")


def _prefix_error(X: np.ndarray, gram) -> tuple[float, np.ndarray]:
    """(tr(G X⁻¹) from the causal factor C of X, C)."""
    C = causal_factor(X)
    n = X.shape[0]
    Ci = scipy.linalg.solve_triangular(C, np.eye(n), lower=True)
    if isinstance(gram, int):  # prefix sums: W C⁻¹ by a cumulative sum
        WCi = cumulative_rows(Ci, out=Ci)
        return float(np.einsum("ij,ij->", WCi, WCi)), C
    return float(np.einsum("ij,ij->", gram @ Ci, Ci)), C


def solve_min_separation(gram, separation: int, participations: int, *, tol: float = 1e-3,
                         max_rounds: int = 30, max_iterations: int = 60, cuts: int | None = None,
                         seconds: float | None = None) -> ScheduleOptimum:
    """The certified optimum of min Δ²·tr(G X⁻¹) under ``min_separation(separation, participations)``, by cutting
    planes over patterns (module docstring).

    Parameters
    ----------
    gram : int or array_like (n, n)
        n for prefix sums (G = WᵀW, W lower-triangular ones, handled in O(n²) per step), or G itself (n×n,
        positive definite). n ≤ 2,048 and a multiple of b (the fixed-epoch start).
    separation, participations : int
        b and k of the schema.
    tol : float, default 1e-3
        Stop when primal/dual − 1 ≤ ``tol``.
    max_rounds : int, default 30
        Cutting-plane rounds (restricted solves).
    max_iterations : int, default 60
        L-BFGS iterations per round.
    cuts : int, optional
        Patterns added per round at most (default b).
    seconds : float, optional
        A budget in CPU seconds (``time.process_time``): L-BFGS and the rounds stop once it is spent (the coarse
        levels of the warm start within 60% of it); the result is then certified as far as it got. A round runs
        its pattern search, certificate and sensitivity to the end, and the finest level always runs one: that
        much may come on top.

    Examples
    --------
    >>> sol = solve_min_separation(16, 4, 4, tol=1e-3)
    >>> sol.status, bool(sol.dual <= sol.primal <= sol.dual * (1 + 1e-3))
    ('optimal', True)
    """
    from mmopt._base import validation as v
    caller = "solve_min_separation"
    t0 = time.process_time()
    prefix = isinstance(gram, (int, np.integer)) and not isinstance(gram, bool)
    if prefix:
        n = v.check_int(gram, name="gram", caller=caller, low=2)
        G = None
    else:
        G = v.check_symmetric(gram, name="gram", caller=caller, remedy=" Pass the workload's Gram W.T @ W, not W, "
                              "or the number of steps n for prefix sums.")
        n = G.shape[0]
    b = v.check_int(separation, name="separation", caller=caller)
    k = v.check_int(participations, name="participations", caller=caller)
    tol = v.check_real(tol, name="tol", caller=caller, low=0.0, low_open=True)
    max_rounds = v.check_int(max_rounds, name="max_rounds", caller=caller)
    max_iterations = v.check_int(max_iterations, name="max_iterations", caller=caller)
    if seconds is not None:  # -5, nan and "3" were taken (a helper's probe)
        seconds = v.check_real(seconds, name="seconds", caller=caller, low=0.0, low_open=True)
    if n > MAX_N:
        raise ValueError(f"{caller}: n = {n:,} is above {MAX_N:,}; each step decomposes an n×n matrix. Past it "
                         "use a banded strategy with at most b bands (mmopt.optimize(..., method='banded')).")
    if b < 1 or k < 1 or (k - 1) * b >= n:
        raise ValueError(f"The 'separation' and 'participations' parameters of {caller} must leave room for a "
                         f"pattern of k steps b apart ((k − 1)·b < n). Got separation={b}, participations={k} with "
                         f"n={n} instead.")
    epochs = n % b == 0 and n // b == k  # b = n/k: the fixed-epoch patterns and start, and the coarse levels
    v.check_allocation(6 * n * n, what=f"six {n:,}×{n:,} arrays", caller=caller)
    cuts = 8 * b if cuts is None else v.check_int(cuts, name="cuts", caller=caller)
    factor = _Factor(n if prefix else G, prefix)
    deadline = None if seconds is None else t0 + seconds
    if epochs and prefix and n // 2 >= _COARSEST and b % 2 == 0:
        # the coarse levels get 60% of the budget: the finest needs at least one round of its own
        patterns, x = _coarse(n // 2, k, tol, max_iterations, None if seconds is None else t0 + 0.6 * seconds)
    elif epochs:
        patterns, x = [tuple(range(j, n, b)) for j in range(b)], _start(n, k, prefix)
    else:
        # k·b < n (reshuffled epochs are min_separation(1, k)): every run of k steps exactly b apart, each a
        # pattern of the schema, so the working set's dual is still a bound; λ = 1, R = I
        patterns = [tuple(range(j, j + (k - 1) * b + 1, b)) for j in range(n - (k - 1) * b)]
        x = np.concatenate([np.zeros(len(patterns)), np.tile(np.eye(k).ravel(), len(patterns))])
    dual = _PatternDual(factor, patterns)
    x = dual.pack(patterns, *x) if isinstance(x, tuple) else x
    x, best_dual, best, history = _rounds(dual, x, b, k, tol, max_rounds, max_iterations, cuts, deadline, t0)
    primal_est, X, sens = best
    error, C = _prefix_error(X, n if prefix else G)
    primal = error * sens.squared
    status = "optimal" if primal <= (1 + tol) * best_dual else "user_limit"
    C /= np.sqrt(sens.squared)
    sens = sens.of_scaled()  # of C as returned (the unscaled factor's Δ² was reported, 8–18× too large)
    history.append({"round": len(history), "dual": best_dual, "primal": primal,
                    "seconds": time.process_time() - t0})
    iterations = sum(h.get("iterations", 0) for h in history)
    return ScheduleOptimum(C, primal, min(best_dual, primal), sens, status, iterations,
                           time.process_time() - t0, tuple(history))


def _rounds(dual: _PatternDual, x, b: int, k: int, tol: float, max_rounds: int, max_iterations: int, cuts: int,
            deadline, t0: float, certify: bool = True):
    """Cutting-plane rounds on ``dual`` from x: (x, best certified dual, (primal, X, sensitivity), history).

    A round begun after the deadline is not run, except the first when ``certify`` (the finest level needs one
    certificate; a round's oracle, certificate and sensitivity take seconds at n = 2,048 and ran past the budget
    when every coarse level began one anyway)."""
    GX = dual.A.gram()
    history: list[dict] = []
    best_dual, best = 0.0, None  # best = (primal, X, sensitivity)
    steps = [0]

    def stop(_):
        steps[0] += 1
        if deadline is not None and time.process_time() > deadline:
            raise StopIteration

    for r in range(max_rounds):
        if deadline is not None and time.process_time() > deadline and (r or not certify):
            break
        dual.best = (0.0, None)
        steps[0] = 0

        try:
            sopt.minimize(dual.objective, x, jac=True, method="L-BFGS-B", callback=stop,
                          options={"maxiter": max_iterations, "maxcor": 20, "gtol": 1e-12, "ftol": 1e-15})
        except StopIteration:
            pass
        x = dual.best[1] if dual.best[1] is not None else x
        bound, X, Xinv = dual.certify(x)
        best_dual = max(best_dual, bound)
        values, found = _worst(X, b, k)
        d = _equalize(X, Xinv, GX, list(dual.patterns) + found[:4 * b])
        X = X * d[:, None] * d[None, :]
        sens = _sensitivity(X, b, k, rtol=tol / 4)
        primal = float(np.einsum("ij,ij->", GX, Xinv / np.outer(d, d))) * sens.squared
        if best is None or primal < best[0]:
            best = (primal, X, sens)
        history.append({"n": dual.n, "round": r, "patterns": dual.P, "iterations": steps[0], "dual": best_dual,
                        "primal": best[0], "seconds": time.process_time() - t0})
        if best[0] <= (1 + tol) * best_dual or (deadline is not None and time.process_time() > deadline):
            break
        have = set(dual.patterns)
        S, _, _, lam, _ = dual.evaluate(x)
        level = S / float(lam.sum())  # ⟨X_π, R_π⟩ at a restricted optimum's active patterns (module docstring)
        new = [p for val, p in zip(values, found, strict=True) if p not in have and val > level * (1 + tol / 4)][:cuts]
        if new:  # else the restricted problem is not solved yet: another round on the same set
            x = dual.extend(x, new)
    return x, best_dual, best, history


def _coarse(n: int, k: int, tol: float, max_iterations: int, deadline):
    """(patterns, (μ, L)) at 2n from the cutting planes at n steps (b = n/k): coarse pattern π stands for 2π and
    2π + 1, with its weight and correlation (the warm start of :mod:`mmopt.participation.tridiagonal`)."""
    b = n // k
    factor = _Factor(n, True)
    if n // 2 >= _COARSEST and b % 2 == 0:
        patterns, x = _coarse(n // 2, k, tol, max_iterations, deadline)
    else:
        patterns, x = [tuple(range(j, n, b)) for j in range(b)], _start(n, k, True)
    dual = _PatternDual(factor, patterns)
    x = dual.pack(patterns, *x) if isinstance(x, tuple) else x
    x = _rounds(dual, x, b, k, tol, _COARSE_ROUNDS, _COARSE_ITERATIONS, 8 * b, deadline, time.process_time(),
                certify=False)[0]
    mus, Ls = dual.per_pattern(x)
    fine = [tuple(2 * s + o for s in p) for p in dual.patterns for o in (0, 1)]
    return fine, ([m for m in mus for _ in (0, 1)], [L for L in Ls for _ in (0, 1)])


def _equalize(X: np.ndarray, Xinv: np.ndarray, G: np.ndarray, patterns) -> np.ndarray:
    """d for the primal D X D (D = diag d): steps of heavier patterns scaled down, d_t = r_t^{−α/2} with r_t the
    largest 1ᵀX_π1 of a listed pattern through t, the α of {0, ¼, ½, ¾, 1} with the smallest estimate
    tr(G (DXD)⁻¹)·max_π 1ᵀ(DXD)_π1 over the listed patterns (the schema's sensitivity is computed after)."""
    n = X.shape[0]
    r = np.zeros(n)
    lengths = sorted({len(p) for p in patterns})
    stacks = [np.array([p for p in patterns if len(p) == m]) for m in lengths]
    for P in stacks:
        v = np.einsum("pij->p", X[P[:, :, None], P[:, None, :]])
        np.maximum.at(r, P.ravel(), np.repeat(v, P.shape[1]))
    r[r <= 0] = r[r > 0].min() if np.any(r > 0) else 1.0
    GXi = G * Xinv
    best = (np.inf, np.ones(n))
    for alpha in (0.0, 0.25, 0.5, 0.75, 1.0):
        d = r ** (-alpha / 2)
        d /= d.max()
        Xd = X * d[:, None] * d[None, :]
        worst = max(float(np.einsum("pij->p", Xd[P[:, :, None], P[:, None, :]]).max()) for P in stacks)
        estimate = float(np.einsum("ij,ij->", GXi, 1.0 / np.outer(d, d))) * worst
        if estimate < best[0]:
            best = (estimate, d)
    return best[1]


def _worst(X, b, k):
    """High patterns of 1ᵀ|X_π|1 ≥ the pattern's sensitivity (equal when X_π ≥ 0): the cut candidates."""
    from mmopt.participation.patterns import worst_patterns
    return worst_patterns(np.abs(X), b, k)


def _start(n: int, k: int, prefix: bool) -> np.ndarray:
    """x at the fixed-epoch optimum for prefix sums (:mod:`mmopt.participation.tridiagonal`), else λ = 1, R = I."""
    b = n // k
    if prefix and n >= 4 * k and k > 1:
        from mmopt.participation.banded_inverse import of_kind
        from mmopt.participation.tridiagonal import _iterate
        return _iterate(of_kind("prefix"), n, k, 1e-4, 300)[0]
    return np.concatenate([np.zeros(b), np.tile(np.eye(k).ravel(), b)])
