"""The certified optimum under minimum separation, n ≤ 2,048: cutting planes over participation patterns.

Notation: see README and :mod:`mmopt.participation.optimum`. Under ``min_separation(b, k)`` the program is

    min tr(G X⁻¹)  s.t.  ⟨X_π, Y⟩ ≤ 1 for every pattern π of the schema and every Y ⪰ 0 with diag Y ≤ 1,

with far too many patterns to list (n = 1,024, b = 256, k = 4: ~1.8·10⁸). Keeping the constraints of a working set
P of patterns only relaxes the program, so its Lagrange dual is a valid lower bound for the whole schema:
weights B_π = λ_π R_π ⪰ 0 (R_π a correlation matrix on π's steps, as :mod:`mmopt.participation.optimum`) summed to
M = Σ_{π∈P} E_π B_π E_πᵀ (the patterns now overlap, so M is no longer block diagonal) give

    tr(G X⁻¹) ≥ S(M)² / Σ_π λ_π,   S(M) = tr (A M Aᵀ)^{1/2}   for every feasible X, G = AᵀA,

(S(M) = ‖G^{1/2} M^{1/2}‖_*: AMAᵀ and M^{1/2} G M^{1/2} share their spectrum). For prefix sums A = W, the
lower-triangular ones, so K = A M Aᵀ is two cumulative sums (O(n²)) and one dense eigendecomposition per step is
the cost; for another Gram A = Lᵀ from the Cholesky factor of G − εI (ε covering the factorisation's round-off, so
that LLᵀ ⪯ G and the bound stays valid). The gradient is dS = ½ tr(X(M) dM), X(M) = Aᵀ K^{−1/2} A, maximised over
(λ, R) by the L-BFGS of :mod:`mmopt.participation.optimum`, whose gradient formula is reused group by group
(patterns of equal length).

Cutting planes (Kelley; the issue's suggestion). Start from the b fixed-epoch patterns {j, j + b, …} (every one is
a min-separation pattern when b = n/k); after each restricted solve take the primal X(M), search the whole schema
for the patterns with the largest 1ᵀX_π1 (:func:`mmopt.participation.patterns.worst_patterns`, a local search), add
those above the working set's largest, and solve again from the same point. The certificate at each round:

* dual: S(M)²/Σλ with S from K's eigenvalues less a Weyl allowance for eigh's and K's round-off (valid for the
  whole schema whatever the working set);
* primal: Δ²(X(M))·tr(G X(M)⁻¹) = Δ²·S with Δ² the schema's sensitivity of X(M) over ALL patterns: exact by
  enumeration when few, else the proven upper bound of :func:`mmopt.participation.patterns.pattern_upper_bound`
  (branch and bound on |X|; exact for X ≥ 0), the error recomputed from the causal factor at the end.

``status="optimal"`` only when primal ≤ (1 + tol)·dual.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.linalg
from scipy import optimize as sopt

from mmopt.participation.optimum import ScheduleOptimum, causal_factor

__all__ = ["MAX_N", "solve_min_separation"]

MAX_N = 2048
_COARSEST = 64  # the coarse-to-fine warm start runs down to this many steps
_COARSE_ROUNDS = 12  # cutting-plane rounds at each coarse level, of at most
_COARSE_ITERATIONS = 60  # L-BFGS iterations: a warm start needs no certificate
_EPS = np.finfo(float).eps


class _Factor:
    """A with G = AᵀA (or AᵀA ⪯ G): K = A M Aᵀ and Aᵀ V, by cumulative sums for prefix sums."""

    def __init__(self, gram, prefix: bool):
        self.prefix = prefix
        if prefix:
            self.n = gram
            return
        G = np.asarray(gram, dtype=float)
        n = G.shape[0]
        # Cholesky's backward error |LLᵀ − G'| ≤ γ_{n+1}|L||L|ᵀ, ‖·‖₂ ≤ γ_{n+1}·n·max G_ii: shift by twice that
        shift = 2 * (n + 1) * n * _EPS * float(np.diag(G).max()) / (1 - (n + 1) * _EPS)
        self.n = n
        self.L = np.linalg.cholesky(G - shift * np.eye(n))
        self.Labs = np.abs(self.L)

    def K(self, M: np.ndarray) -> np.ndarray:
        if self.prefix:
            return np.cumsum(np.cumsum(M, axis=0), axis=1)
        return self.L.T @ M @ self.L

    def K_error(self, Mabs: np.ndarray) -> float:
        """‖ΔK‖_F ≥ the round-off of :meth:`K` (γ_{2n}·‖|A||M||A|ᵀ‖_F)."""
        gamma = 2 * self.n * _EPS / (1 - 2 * self.n * _EPS)
        big = self.K(Mabs) if self.prefix else self.Labs.T @ Mabs @ self.Labs
        return gamma * float(np.linalg.norm(big))

    def At(self, V: np.ndarray) -> np.ndarray:
        if self.prefix:
            return np.cumsum(V[::-1], axis=0)[::-1]
        return self.L @ V

    def Ainv(self, V: np.ndarray) -> np.ndarray:
        """A⁻¹ V (prefix sums: first differences)."""
        if self.prefix:
            return np.diff(V, axis=0, prepend=0.0)
        return scipy.linalg.solve_triangular(self.L.T, V, lower=False)

    def gram(self) -> np.ndarray:
        """G (or LLᵀ ⪯ G) dense."""
        if self.prefix:
            i = np.arange(self.n)
            return (self.n - np.maximum.outer(i, i)).astype(float)
        return self.L @ self.L.T


class _Group:
    """The patterns of one length m: steps (p, m) and where their variables sit in x."""

    def __init__(self, steps: np.ndarray):
        self.steps = np.asarray(steps, dtype=int)
        self.p, self.m = self.steps.shape


class _PatternDual:
    """S(M), bound, gradient for M = Σ_π λ_π E_π R_π E_πᵀ over a working set of patterns grouped by length."""

    def __init__(self, factor: _Factor, patterns: list[tuple[int, ...]]):
        self.A, self.n = factor, factor.n
        self.set_patterns(patterns)
        self.best = (0.0, None)

    def set_patterns(self, patterns):
        self.patterns = list(patterns)
        lengths = sorted({len(p) for p in self.patterns})
        self.order = []  # pattern indices per group, in x order
        self.groups = []
        for m in lengths:
            idx = [i for i, p in enumerate(self.patterns) if len(p) == m]
            self.order.extend(idx)
            self.groups.append(_Group(np.array([self.patterns[i] for i in idx])))
        self.P = len(self.patterns)

    def split(self, x):
        """(μ in group order, [L of each group])."""
        mu = x[:self.P]
        Ls, at = [], self.P
        for g in self.groups:
            Ls.append(x[at:at + g.p * g.m * g.m].reshape(g.p, g.m, g.m))
            at += g.p * g.m * g.m
        return mu, Ls

    def assemble(self, x, absolute: bool = False):
        mu, Ls = self.split(x)
        lam = np.exp(mu - mu.max())
        M = np.zeros((self.n, self.n))
        parts, at = [], 0
        for g, L in zip(self.groups, Ls, strict=True):
            K = L @ L.transpose(0, 2, 1)
            N = 1.0 / np.sqrt(np.einsum("jii->ji", K))
            R = K * N[:, :, None] * N[:, None, :]
            lg = lam[at:at + g.p]
            B = lg[:, None, None] * R
            rows = np.broadcast_to(g.steps[:, :, None], B.shape)
            cols = np.broadcast_to(g.steps[:, None, :], B.shape)
            np.add.at(M, (rows, cols), np.abs(B) if absolute else B)
            parts.append((lg, L, K, N, R))
            at += g.p
        return lam, M, parts

    def evaluate(self, x):
        """(S, bound estimate, V, ω, parts) at x."""
        lam, M, parts = self.assemble(x)
        K = self.A.K(M)
        omega, V = np.linalg.eigh((K + K.T) / 2)
        omega = np.maximum(omega, 1e-300 * max(float(omega[-1]), 1e-300))
        S = float(np.sqrt(omega).sum())
        bound = S * S / float(lam.sum())
        if bound > self.best[0]:
            self.best = (bound, x.copy())
        return S, bound, V, omega, lam, parts

    def objective(self, x):
        """(−log(S²/Σλ), gradient) for L-BFGS (the gradient of :meth:`_Dual.objective`, group by group)."""
        S, bound, V, omega, lam, parts = self.evaluate(x)
        Z = self.A.At(V) * omega ** -0.25  # X(M) = Z Zᵀ
        # X's blocks on the patterns: from X in full (one n×n product) when the patterns hold more than n/4 steps
        X = Z @ Z.T if sum(g.p * g.m for g in self.groups) > self.n // 4 else None
        total = lam.sum()
        g_mu, g_L = [], []
        for g, (lg, L, K, N, R) in zip(self.groups, parts, strict=True):
            if X is None:
                Zp = Z[g.steps]  # (p, m, n)
                Xb = Zp @ Zp.transpose(0, 2, 1)
            else:
                Xb = X[g.steps[:, :, None], g.steps[:, None, :]]
            g_mu.append(lg * (np.einsum("jab,jab->j", Xb, R) / S - 1.0 / total))
            Gam = lg[:, None, None] * Xb / S
            Psi = N[:, :, None] * Gam * N[:, None, :]
            corr = N ** 3 * np.einsum("jab,jab,jb->ja", Gam, K, N)
            Psi[:, np.arange(g.m), np.arange(g.m)] -= corr
            g_L.append((2.0 * Psi @ L).ravel())
        value = -(2 * np.log(S) - np.log(total))
        return value, -np.concatenate(g_mu + g_L)

    def certify(self, x):
        """(certified bound, X(M)) at x: Weyl's allowance for eigh and for forming M and K."""
        lam, M, _ = self.assemble(x)
        Mabs = self.assemble(x, absolute=True)[1]
        K = self.A.K(M)
        K = (K + K.T) / 2
        omega, V = np.linalg.eigh(K)
        # forming M: each entry a sum of at most P terms, each λR with R's own rounding (4k ulps)
        mgamma = (self.P + 8 * max(g.m for g in self.groups)) * _EPS
        dK = self.A.K_error(Mabs) * (1 + mgamma) + mgamma * float(np.linalg.norm(self.A.K(Mabs)))
        delta = 32 * self.n * _EPS * float(np.abs(omega).max()) + dK
        S_low = float(np.sqrt(np.maximum(omega - delta, 0.0)).sum())
        bound = S_low ** 2 / (float(lam.sum()) * (1 + 4 * self.P * _EPS))
        w = np.maximum(omega, 1e-300 * max(float(omega[-1]), 1e-300))
        Z = self.A.At(V) * w ** -0.25
        X = Z @ Z.T
        T = self.A.Ainv(V) * w ** 0.25  # X⁻¹ = A⁻¹ K^{1/2} A⁻ᵀ = T Tᵀ
        return bound, (X + X.T) / 2, T @ T.T

    def per_pattern(self, x):
        """(μ, L) of each pattern of the working set, in its order."""
        mu, Ls = self.split(x)
        mus = np.empty(self.P)
        mus[self.order] = mu
        L_by = [None] * self.P
        for L, idx in zip(Ls, self._group_indices(), strict=True):
            for r, i in enumerate(idx):
                L_by[i] = L[r]
        return mus, L_by

    def pack(self, patterns, mus, Ls):
        """x for ``patterns`` (made the working set) with these μ and L."""
        self.set_patterns(patterns)
        x_mu = np.array([mus[i] for i in self.order])
        x_L = [np.stack([Ls[i] for i in idx]).ravel() for idx in self._group_indices()]
        return np.concatenate([x_mu] + x_L)

    def extend(self, x, new):
        """x for the working set plus ``new`` patterns (λ a tenth of the mean, R = I), and the new set."""
        mus, Ls = self.per_pattern(x)
        start = float(np.log(np.exp(mus - mus.max()).mean() * 0.1) + mus.max())
        return self.pack(self.patterns + list(new), list(mus) + [start] * len(new),
                         Ls + [np.eye(len(p)) for p in new])

    def _group_indices(self):
        out, at = [], 0
        for g in self.groups:
            out.append(self.order[at:at + g.p])
            at += g.p
        return out


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
        WCi = np.cumsum(Ci, axis=0)
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
        levels of the warm start within 60% of it); the result is then certified as far as it got.

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
        G = v.check_matrix(gram, name="gram", caller=caller, square=True)
        n = G.shape[0]
    b = v.check_int(separation, name="separation", caller=caller)
    k = v.check_int(participations, name="participations", caller=caller)
    tol = v.check_real(tol, name="tol", caller=caller, low=0.0, low_open=True)
    max_rounds = v.check_int(max_rounds, name="max_rounds", caller=caller)
    max_iterations = v.check_int(max_iterations, name="max_iterations", caller=caller)
    if n > MAX_N:
        raise ValueError(f"{caller}: n = {n:,} is above {MAX_N:,}; each step decomposes an n×n matrix. Past it "
                         "use a banded strategy with at most b bands (mmopt.optimize(..., method='banded')).")
    if n % b or n // b != k:
        raise ValueError(f"The 'separation' parameter of {caller} must be n/k (the fixed-epoch patterns start the "
                         f"working set). Got separation={b} with n={n}, participations={k} instead.")
    v.check_allocation(6 * n * n, what=f"six {n:,}×{n:,} arrays", caller=caller)
    cuts = 8 * b if cuts is None else v.check_int(cuts, name="cuts", caller=caller)
    factor = _Factor(n if prefix else G, prefix)
    deadline = None if seconds is None else t0 + seconds
    if prefix and n // 2 >= _COARSEST and b % 2 == 0:
        # the coarse levels get 60% of the budget: the finest needs at least one round of its own
        patterns, x = _coarse(n // 2, k, tol, max_iterations, None if seconds is None else t0 + 0.6 * seconds)
    else:
        patterns, x = [tuple(range(j, n, b)) for j in range(b)], _start(n, k, prefix)
    dual = _PatternDual(factor, patterns)
    x = dual.pack(patterns, *x) if isinstance(x, tuple) else x
    x, best_dual, best, history = _rounds(dual, x, b, k, tol, max_rounds, max_iterations, cuts, deadline, t0)
    primal_est, X, sens = best
    error, C = _prefix_error(X, n if prefix else G)
    primal = error * sens.squared
    status = "optimal" if primal <= (1 + tol) * best_dual else "user_limit"
    C /= np.sqrt(sens.squared)
    history.append({"round": len(history), "dual": best_dual, "primal": primal,
                    "seconds": time.process_time() - t0})
    iterations = sum(h.get("iterations", 0) for h in history)
    return ScheduleOptimum(C, primal, min(best_dual, primal), sens, status, iterations,
                           time.process_time() - t0, tuple(history))


def _rounds(dual: _PatternDual, x, b: int, k: int, tol: float, max_rounds: int, max_iterations: int, cuts: int,
            deadline, t0: float):
    """Cutting-plane rounds on ``dual`` from x: (x, best certified dual, (primal, X, sensitivity), history)."""
    GX = dual.A.gram()
    history: list[dict] = []
    best_dual, best = 0.0, None  # best = (primal, X, sensitivity)
    steps = [0]

    def stop(_):
        steps[0] += 1
        if deadline is not None and time.process_time() > deadline:
            raise StopIteration

    for r in range(max_rounds):
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
        S, _, _, _, lam, _ = dual.evaluate(x)
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
    x = _rounds(dual, x, b, k, tol, _COARSE_ROUNDS, _COARSE_ITERATIONS, 8 * b, deadline, time.process_time())[0]
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
        from mmopt.participation.tridiagonal import _iterate
        return _iterate("prefix", n, k, 1e-4, 300)[0]
    return np.concatenate([np.zeros(b), np.tile(np.eye(k).ravel(), b)])
