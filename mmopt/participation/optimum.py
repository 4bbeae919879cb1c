"""The certified optimum of the matrix mechanism under fixed-epoch participation, n ≤ 4,096.

Notation: see README and :mod:`mmopt.participation.sensitivity`. With k epochs of b steps (n = k·b) the program is

    min tr(G X⁻¹)  s.t.  ⟨X_π, Y⟩ ≤ 1 for every pattern π and every Y ⪰ 0 with diag Y ≤ 1,

the exact sensitivity constraint (gradients of any sign and dimension). Its Lagrange dual: weights on (π, Y) sum to
M = blockdiag_π(B_π) (B_π ⪰ 0 on the pattern's k steps) of total weight Σ_π max diag B_π, and for any X ≻ 0

    ‖G^{1/2} M^{1/2}‖_* ≤ ‖G^{1/2} X^{−1/2}‖_F ‖X^{1/2} M^{1/2}‖_F ≤ (tr(G X⁻¹) + tr(M X))/2,

so, scaling M by the best constant, every feasible X has tr(G X⁻¹) ≥ S(M)² / Σ_π max diag B_π with
S(M) = tr (M^{1/2} G M^{1/2})^{1/2} (as :mod:`mmopt.toeplitz.dual` for one participation; Choquette-Choo et al.,
ICML 2023, Thm 3.1 for the orthogonality below). The bound is what this module maximises, over B_π = λ_π R_π
with R_π a correlation matrix (R = N L Lᵀ N, N = diag(L Lᵀ)^{−1/2}; the diagonal is unit by construction) and
λ > 0, by L-BFGS on log S² − log Σλ with the exact gradient dS = ½ tr(X(M) dM),
X(M) = M^{−1/2} (M^{1/2} G M^{1/2})^{1/2} M^{−1/2}: one dense eigendecomposition per step (O(n³), 1.3 s at
n = 2,048 on one core). At the dual optimum X(M) has diagonal blocks on every pattern (the gradient in R_π's
off-diagonal vanishes), so its sensitivity is exactly max_π Σ_{t∈π} X_tt: the primal is X(M) at the best
iterate, its sensitivity computed exactly or bounded above (:func:`mmopt.participation.sensitivity.block_bounds`),
its error tr(G X⁻¹) recomputed from the causal factor C (X = CᵀC, C lower-triangular). The gap between that
error and the best bound of any iterate is the certificate, whatever the steps did.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.linalg
from scipy import optimize as sopt

from mmopt._base import validation as v
from mmopt.participation.schemas import FixedEpochs
from mmopt.participation.sensitivity import Sensitivity, block_bounds, gram_sensitivity_squared

__all__ = ["MAX_N", "ScheduleOptimum", "best_primal", "causal_factor", "solve_fixed_epochs"]

MAX_N = 4096
_EPS = np.finfo(float).eps
_COARSEST = 256  # warm starts recurse down to this n


@dataclass(frozen=True)
class ScheduleOptimum:
    """The certified optimum under a participation schema at unit σ.

    Attributes
    ----------
    matrix : ndarray (n, n)
        C, lower-triangular (causal), scaled to sensitivity 1 under the schema.
    primal : float
        Δ²·tr(G (CᵀC)⁻¹) of ``matrix`` before scaling (its exact total error at unit σ; Δ² a proven upper bound,
        exact when ``sensitivity.exact``).
    dual : float
        A lower bound on every strategy's error under the schema (module docstring), round-off allowed for.
    sensitivity : Sensitivity
    status : {"optimal", "user_limit"}
    iterations : int
    seconds : float
    history : tuple of dict
    """

    matrix: np.ndarray
    primal: float
    dual: float
    sensitivity: Sensitivity
    status: str
    iterations: int
    seconds: float
    history: tuple

    @property
    def ratio(self) -> float:
        """primal / dual ≥ 1."""
        return self.primal / self.dual


def causal_factor(X: np.ndarray) -> np.ndarray:
    """C lower-triangular with CᵀC = X (Cholesky of X with rows and columns reversed).

    >>> X = np.array([[2.0, 1.0], [1.0, 2.0]])
    >>> C = causal_factor(X)
    >>> bool(np.allclose(C.T @ C, X)), float(C[0, 1])
    (True, 0.0)
    """
    return np.linalg.cholesky(X[::-1, ::-1]).T[::-1, ::-1].copy()


def best_primal(apply_gram, X: np.ndarray, schema: FixedEpochs):
    """(Δ²·tr(G X̃⁻¹), C, Δ²) for the better of X̃ = X and X̃ = D^{−1/2} X D^{−1/2}, D = Δ²_π(X) on each
    pattern π's steps (every pattern then has sensitivity exactly 1: the imbalance an inexact dual point leaves is
    removed; neither is always better; on momentum β = 0.9, n = 1,024, k = 4 after 200 steps it took the gap from
    1.0151 to 1.0007); C the causal factor scaled to Δ = 1, ``apply_gram(M)`` = G M."""
    n = X.shape[0]
    k = schema.epochs
    idx = np.arange(n).reshape(k, n // k).T
    best = None
    for equalize in (False, True):
        if equalize:
            d = np.empty(n)
            d[idx] = block_bounds(X[idx[:, :, None], idx[:, None, :]])[1][:, None]
            X = X / np.sqrt(d)[:, None] / np.sqrt(d)[None, :]
        sens = gram_sensitivity_squared(X, schema)
        C = causal_factor(X)
        Ci = scipy.linalg.solve_triangular(C, np.eye(n), lower=True)
        primal = float(np.einsum("ij,ij->", apply_gram(Ci), Ci)) * sens.squared  # tr(G C⁻¹C⁻ᵀ) = tr(G X̃⁻¹)
        del Ci
        if best is None or primal < best[0]:
            best = (primal, C / np.sqrt(sens.squared), sens.of_scaled())  # Δ² of C as returned
    return best


class _Dual:
    """S(M), its gradient, and X(M)'s blocks for M = blockdiag(λ_j R_j), in the pattern-major order."""

    def __init__(self, Gp: np.ndarray, b: int, k: int):
        self.Gp, self.b, self.k, self.n = Gp, b, k, b * k
        self.best = (0.0, None)  # (bound, x)
        self.last = None  # (x, V, √ω, M^{−1/2}, S, bound) of the last evaluation

    def unpack(self, x):
        b, k = self.b, self.k
        mu, L = x[:b], x[b:].reshape(b, k, k)
        K = L @ L.transpose(0, 2, 1)
        N = 1.0 / np.sqrt(np.einsum("jii->ji", K))
        R = K * N[:, :, None] * N[:, None, :]
        lam = np.exp(mu - mu.max())
        return lam, L, K, N, R

    def evaluate(self, x, full: bool = False):
        b, k, n = self.b, self.k, self.n
        if full and self.last is not None and np.array_equal(self.last[0], x):
            return self._full(*self.last[1:])  # the eigendecomposition of the last step, not another one
        lam, L, K, N, R = self.unpack(x)
        B = lam[:, None, None] * R
        w, Q = np.linalg.eigh(B)
        w = np.maximum(w, 0.0)
        Mh = (Q * np.sqrt(w)[:, None, :]) @ Q.transpose(0, 2, 1)  # M^{1/2}, block by block
        Mih = (Q / np.sqrt(np.maximum(w, 1e-300))[:, None, :]) @ Q.transpose(0, 2, 1)
        T = np.matmul(Mh, self.Gp.reshape(b, k, n)).reshape(n, n)  # M^{1/2} G, rows
        H = np.matmul(T.reshape(n, b, k).transpose(1, 0, 2), Mh).transpose(1, 0, 2).reshape(n, n)
        H = (H + H.T) / 2
        omega, V = np.linalg.eigh(H)
        top = max(float(omega[-1]), 0.0)
        delta = 32 * n * _EPS * np.linalg.norm(H)  # eigh and forming H, backward errors (Weyl)
        root = np.sqrt(np.maximum(omega, 0.0))
        S = float(root.sum())
        S_low = float(np.sqrt(np.maximum(omega - delta, 0.0)).sum())
        # the weight of this M: Σ_j max diag of (computed M^{1/2})², round-off included
        weight = float((np.einsum("jab,jab->ja", Mh, Mh).max(axis=1)).sum()) * (1 + 8 * k * _EPS)
        bound = S_low ** 2 / weight if top > 0 else 0.0
        if bound > self.best[0]:
            self.best = (bound, x.copy())
        self.last = (x.copy(), V, root, Mih, S, bound)
        if full:
            return self._full(V, root, Mih, S, bound)
        Vb = V.reshape(b, k, n)
        P = np.matmul(Vb * root, Vb.transpose(0, 2, 1))  # blocks of H^{1/2}
        Xb = Mih @ P @ Mih  # blocks of X(M)
        return S, bound, Xb, lam, N, K, R, L

    def _full(self, V, root, Mih, S, bound):
        """(S, bound, X(M)) with X(M) = M^{−1/2} H^{1/2} M^{−1/2} in full (one n×n product)."""
        b, k, n = self.b, self.k, self.n
        Pfull = (V * root) @ V.T
        X = np.matmul(Mih, Pfull.reshape(b, k, n)).reshape(n, n)
        X = np.matmul(X.reshape(n, b, k).transpose(1, 0, 2), Mih).transpose(1, 0, 2).reshape(n, n)
        return S, bound, (X + X.T) / 2

    def objective(self, x):
        """(−log(S²/Σλ), gradient) for L-BFGS."""
        S, bound, Xb, lam, N, K, R, L = self.evaluate(x)
        total = lam.sum()
        g_mu = lam * (np.einsum("jab,jab->j", Xb, R) / S - 1.0 / total)
        Gam = lam[:, None, None] * Xb / S  # ∂ log S / ∂R_j
        Psi = N[:, :, None] * Gam * N[:, None, :]
        corr = N ** 3 * np.einsum("jab,jab,jb->ja", Gam, K, N)
        Psi[:, np.arange(self.k), np.arange(self.k)] -= corr
        g_L = 2.0 * Psi @ L
        value = -(2 * np.log(S) - np.log(total))
        return value, -np.concatenate([g_mu, g_L.ravel()])


def solve_fixed_epochs(gram, epochs: int, *, tol: float = 1e-3, max_iterations: int = 200,
                       coarse=None) -> ScheduleOptimum:
    """The certified optimum of min Δ²·tr(G X⁻¹) under ``fixed_epochs(epochs)``, G = ``gram`` (n×n, n ≤ 4,096).

    Parameters
    ----------
    gram : array_like (n, n)
        G = WᵀW, positive definite (prefix sums: G_ij = n − max(i, j), 0-indexed).
    epochs : int
        k, dividing n.
    tol : float, default 1e-3
        Stop when primal/dual − 1 ≤ ``tol``.
    max_iterations : int, default 200
        L-BFGS iterations (each one or a few eigendecompositions), at n and at each coarser n it starts from.
    coarse : callable or None
        ``coarse(m)`` → the same workload's Gram at m steps: the search then starts from its own solution at n/2
        (each coarse pattern's variables repeated on the two patterns it stands for; recursively down to
        256 steps), as :mod:`mmopt.participation.tridiagonal` does. Any start gives the same certificate; this
        one saves steps (momentum β = 0.9, n = 1,024, k = 4: see ``benchmarks/bench_participation.py``).

    Examples
    --------
    >>> import mmopt
    >>> G = mmopt.workload.prefix(16).gram
    >>> sol = solve_fixed_epochs(G, 2)
    >>> sol.status, bool(sol.ratio <= 1.001), bool(np.allclose(sol.matrix, np.tril(sol.matrix)))
    ('optimal', True, True)
    """
    caller = "solve_fixed_epochs"
    G = v.check_symmetric(gram, name="gram", caller=caller,
                          remedy=" Pass the workload's Gram W.T @ W (mmopt.workload.prefix(n).gram), not W.")
    n = G.shape[0]
    schema = FixedEpochs(v.check_int(epochs, name="epochs", caller=caller))
    schema.check_n(n, caller)
    tol = v.check_real(tol, name="tol", caller=caller, low=0.0, low_open=True)
    max_iterations = v.check_int(max_iterations, name="max_iterations", caller=caller)
    if n > MAX_N:
        raise ValueError(f"{caller}: n = {n:,} is above {MAX_N:,}; this solver decomposes n×n matrices. Past it "
                         "use a banded strategy with at most n/k bands (mmopt.optimize(..., method='banded')).")
    v.check_allocation(6 * n * n, what=f"six {n:,}×{n:,} arrays", caller=caller)
    try:  # positive definite, as documented (−I gave LAPACK's 'Eigenvalues did not converge', with warnings)
        np.linalg.cholesky((G + G.T) / 2)
    except np.linalg.LinAlgError:
        raise ValueError(f"The 'gram' parameter of {caller} must be positive definite (G = WᵀW of a W with full "
                         "column rank). Stack a small identity onto the workload: mmopt.workload.stack([W, "
                         f"mmopt.workload.identity({n})], weights=[1.0, 1e-3]).") from None
    if coarse is not None and not callable(coarse):
        raise TypeError(f"The 'coarse' parameter of {caller} must be None or a callable m → the workload's Gram at "
                        f"m steps. Got {type(coarse).__name__} instead.")
    return _solve(G, schema, tol, max_iterations, coarse)[0]


def _warm_start(schema: FixedEpochs, n: int, tol: float, max_iterations: int, coarse):
    """x for the b = n/k patterns: the identity start, or the solution at n/2 repeated pattern by pattern."""
    k = schema.epochs
    b = n // k
    if coarse is None or n <= _COARSEST or b % 2:
        return np.concatenate([np.zeros(b), np.tile(np.eye(k).ravel(), b)])
    return refine(_solve(np.asarray(coarse(n // 2), dtype=float), schema, tol, max_iterations, coarse)[1], b, k)


def refine(x: np.ndarray, b: int, k: int) -> np.ndarray:
    """The dual point x of b/2 patterns (at n/2 steps) repeated onto b patterns: coarse pattern j stands for the
    fine patterns 2j and 2j + 1 (the warm start of both solvers)."""
    mu, L = x[:b // 2], x[b // 2:].reshape(b // 2, k, k)
    j = np.arange(b) // 2
    return np.concatenate([mu[j], L[j].ravel()])


def _solve(G: np.ndarray, schema: FixedEpochs, tol: float, max_iterations: int, coarse, initial=None):
    """(ScheduleOptimum, the best dual point x) of :func:`solve_fixed_epochs` on a checked G, from ``initial`` (a
    dual point in the same variables, e.g. :mod:`mmopt.participation.tridiagonal`'s) when given."""
    t0 = time.perf_counter()
    n = G.shape[0]
    k = schema.epochs
    b = n // k
    x = _warm_start(schema, n, tol, max_iterations, coarse) if initial is None else np.asarray(initial, float)
    perm = np.arange(n).reshape(k, b).T.ravel()  # pattern-major: position j·k + i holds step j + i·b
    dual = _Dual(G[np.ix_(perm, perm)], b, k)
    history: list[dict] = []
    state = {"primal": np.inf, "stop": False, "X": None}

    def check(xk):
        # after every step, the primal X(M) at the best bound so far: its bounded sensitivity × S (the final
        # primal is recomputed from its causal factor below)
        it = len(history) + 1
        record = {"iteration": it, "dual": dual.best[0], "seconds": time.perf_counter() - t0}
        if dual.best[1] is not None:
            S, _, X = dual.evaluate(dual.best[1], full=True)
            # X is in pattern-major order: the patterns are its diagonal k×k blocks
            blocks = X.reshape(b, k, b, k)[np.arange(b), :, np.arange(b), :]
            bounds = block_bounds(blocks, refine=False)[1]  # a monitor, every step: the cheap bounds
            record["primal"] = S * float(bounds.max())  # tr(G X⁻¹) = S at X = X(M)
            if it % 10 == 0:  # and X with every pattern's Δ² equalised to 1 (best_primal), one n³ inverse
                d = np.sqrt(np.repeat(bounds, k))
                try:
                    Xi = scipy.linalg.cho_solve(scipy.linalg.cho_factor(X), np.eye(n))
                except np.linalg.LinAlgError:  # X(M) of an ill-conditioned G, past float64: not this candidate
                    pass
                else:
                    record["primal"] = min(record["primal"],
                                           float(np.einsum("ij,ij->", dual.Gp, Xi * np.outer(d, d))))
            if record["primal"] <= (1 + tol) * dual.best[0]:
                state["stop"] = True
                raise StopIteration
        history.append(record)

    try:
        res = sopt.minimize(dual.objective, x, jac=True, method="L-BFGS-B", callback=check,
                            options={"maxiter": max_iterations, "maxcor": 20, "gtol": 1e-12, "ftol": 1e-15})
        iterations = int(res.nit)
    except StopIteration:
        iterations = len(history) + 1
    bound, xbest = dual.best
    _, _, X = dual.evaluate(xbest, full=True)
    Xn = np.empty_like(X)
    Xn[np.ix_(perm, perm)] = X  # back to time order
    primal, C, sens = best_primal(G.__matmul__, Xn, schema)
    status = "optimal" if primal <= (1 + tol) * bound else "user_limit"
    history.append({"iteration": iterations, "dual": bound, "primal": primal, "seconds": time.perf_counter() - t0})
    return ScheduleOptimum(C, primal, min(bound, primal), sens, status, iterations, time.perf_counter() - t0,
                           tuple(history)), xbest
