"""The certified optimum under fixed epochs for prefix sums and all ranges, n ≤ 4,096: the dual of
:mod:`mmopt.participation.optimum` in O(n·k²) per step, through the workload's tridiagonal inverse Gram.

Notation: see :mod:`mmopt.participation.optimum`. The dual point is M = blockdiag_j(B_j), B_j = F_j F_jᵀ
(F_j = √λ_j N_j L_j, k×k, on pattern j's steps), and the bound needs S(M) = tr (M^{1/2} G M^{1/2})^{1/2}
= tr (Fᵀ G F)^{1/2} = tr K^{−1/2} with

    K = F⁻¹ G⁻¹ F⁻ᵀ,   G⁻¹ tridiagonal (prefix: tridiag(−1, [1, 2, …, 2], −1); all ranges: tridiag(−1, 2, −1)/(n+1)),

as in :mod:`mmopt.toeplitz.dual` for one participation. In time order G⁻¹ couples t and t + 1; F⁻¹ couples the
steps j, j + b, … of pattern j. Ordering the patterns 0, b − 1, 1, b − 2, … ("folded", so that j and j + 1 — and
the wrap from pattern b − 1 to pattern 0 one epoch later — are at most two places apart) and grouping g ≥ 2 of
them per block makes K block tridiagonal with blocks of s = g·k. So

* the gradient ½ X(M) needs only X(M)'s pattern blocks, X_jj = F_j⁻ᵀ (K^{−1/2})_jj F_j⁻¹, and those come from
  :func:`mmopt.participation.quadrature.inverse_sqrt_blocks`: O(n·s²) per rational node instead of O(n³);
* the certified bound at the end is S computed from K's eigenvalues (dense, one per solve), less a backward-error
  allowance δ = 64·n·u·‖K‖ on each eigenvalue (Weyl): S ≥ Σ_i (ω̂_i + δ)^{−1/2};
* the primal is X(M) = F⁻ᵀ K^{−1/2} F⁻¹ from the same eigendecomposition, its exact (or upper-bounded)
  sensitivity under the schema and its error tr(G X⁻¹) recomputed from its causal factor, as in
  :mod:`mmopt.participation.optimum`.

The optimiser is the same L-BFGS on log S² − log Σλ in the same variables (their gradient formula is shared),
started from the solution at n/2 repeated onto the b patterns (each pattern of the coarse run stands for two), the
coarse run started the same way down to n ≤ 256. Where it stops short of ``tol`` (in the quadrature's noise, near
10⁻⁵), up to :data:`POLISH_MAX_N` steps, a few steps of the dense dual from its point polish the primal.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.linalg
from scipy import optimize as sopt

from mmopt.participation.banded_inverse import InverseBands, of_kind
from mmopt.participation.optimum import MAX_N, ScheduleOptimum, _Dual, _solve, best_primal, refine
from mmopt.participation.quadrature import inverse_sqrt_blocks
from mmopt.participation.schemas import FixedEpochs
from mmopt.participation.sensitivity import block_bounds

__all__ = ["solve_tridiagonal"]

_EPS = np.finfo(float).eps
_NODES = 48  # rational nodes: relative error ≤ 1e-11 up to a spread M/m = 10¹² (quadrature module); fewer
# leave L-BFGS's line search in the quadrature's noise before the primal has converged
_COARSEST = 256
#: the dense dual's polish (:func:`solve_tridiagonal`) runs up to this n, for this many L-BFGS steps
POLISH_MAX_N, POLISH_STEPS = 1024, 2


class _SpreadTooWide(ArithmeticError):
    """K's spectrum is too wide for the rational nodes in float64 (:meth:`_TridiagonalDual.objective`)."""


class _Layout:
    """Where pattern j sits: folded place q_j, block r_j = q_j // g, offset o_j = (q_j mod g)·k."""

    def __init__(self, b: int, k: int, width: int = 1):
        # even, s = g·k ≥ 24 (fewer Python steps for small k), and g ≥ 2w: folded, patterns j and j + d ≤ j + w
        # are at most 2d places apart, so every coupling stays within a block or its neighbour
        g = max(2 * width, 2 * (-(-24 // (2 * k))))
        seq = np.empty(b, dtype=int)
        seq[0::2] = np.arange((b + 1) // 2)
        seq[1::2] = b - 1 - np.arange(b // 2)
        q = np.empty(b, dtype=int)
        q[seq] = np.arange(b)
        self.b, self.k, self.g, self.s = b, k, g, g * k
        self.R = -(-b // g)
        self.r, self.o = q // g, (q % g) * k


class _TridiagonalDual(_Dual):
    """:class:`~mmopt.participation.optimum._Dual` with S and X(M)'s blocks from the block-tridiagonal K."""

    def __init__(self, spec: InverseBands, b: int, k: int):
        self.b, self.k, self.n = b, k, b * k
        self.best = (0.0, None)
        self.last = None
        n = self.n
        bands = spec.bands(n)
        self.a = bands[0].reshape(k, b).T  # a[j, i] at step j + i·b
        # offsets d = 1 … w: e_d[j, i] = G⁻¹ at (t, t + d), t = j + i·b (0 past the end)
        self.e = [np.append(e, np.zeros(d)).reshape(k, b).T for d, e in enumerate(bands[1:], start=1)]
        self.lay = _Layout(b, k, spec.width)
        self.gmin = spec.smallest_eigenvalue(n)

    def objective(self, x):
        """As the dense dual's, but +inf where K's spectral spread M/m leaves the rational nodes' float64 (their
        parameter 1 − m/M rounds to 1, K'(1) = ∞): the nodes, K^{−1/2} and the objective were NaN — a pattern's
        weight λ_j near 0 does it — which L-BFGS's line search met as NaN and LAPACK reported on stdout, ~930
        lines on momentum(1,024, β = 0.9) under fixed_epochs(8) (a helper's probe); +inf makes the search step
        back as it did, silently."""
        try:
            return super().objective(x)
        except _SpreadTooWide:
            return np.inf, np.zeros_like(x)

    def factors(self, x):
        lam, L, K, N, R = self.unpack(x)
        if not np.all(lam > 0):  # exp(μ_j − max μ) underflowed: F_j⁻¹ would be infinite
            raise _SpreadTooWide
        Fi = np.linalg.inv(L) / (N[:, None, :] * np.sqrt(lam)[:, None, None])  # F_j⁻¹ = L⁻¹ N⁻¹ / √λ
        return lam, L, K, N, R, Fi

    def assemble(self, Fi):
        """K's blocks (D, E) in the folded order; padding places are identity, decoupled."""
        lay, b, k = self.lay, self.b, self.k
        s, R = lay.s, lay.R
        D = np.zeros((R, s, s))
        E = np.zeros((max(R - 1, 1), s, s))
        idx = np.arange(k)
        pad = np.ones(R * s, dtype=bool)
        pad[(lay.r * s + lay.o)[:, None] + idx] = False
        D.reshape(R * s, s)[np.flatnonzero(pad), np.flatnonzero(pad) % s] = 1.0
        self._put(D, E, np.arange(b), np.arange(b), np.einsum("jab,jb,jcb->jac", Fi, self.a, Fi), diagonal=True)
        for d, e in enumerate(self.e, start=1):
            if b > d:
                j = np.arange(b - d)
                self._put(D, E, j, j + d, np.einsum("jab,jb,jcb->jac", Fi[j], e[j], Fi[j + d]))
            if k > 1:  # epoch i of pattern j ≥ b − d → epoch i + 1 of pattern j + d − b
                for j in range(max(b - d, 0), b):
                    Z = np.diag(e[j, :k - 1], 1)
                    self._put(D, E, np.array([j]), np.array([j + d - b]), (Fi[j] @ Z @ Fi[j + d - b].T)[None])
        return D, E

    def _put(self, D, E, j1, j2, blocks, diagonal=False):
        lay, k = self.lay, self.k
        r1, r2, o1, o2 = lay.r[j1], lay.r[j2], lay.o[j1], lay.o[j2]
        i = np.arange(k)
        rows = (o1[:, None] + i)[:, :, None]
        cols = (o2[:, None] + i)[:, None, :]
        rr1, rr2 = r1[:, None, None], r2[:, None, None]
        if diagonal:
            np.add.at(D, (rr1 + 0 * rows + 0 * cols, rows + 0 * cols, cols + 0 * rows), blocks)
            return
        same, up, down = r1 == r2, r2 == r1 + 1, r2 == r1 - 1
        # (cols, rows) indices with the same values place the transpose
        for sel, target, a1, a2, rr in ((same, D, rows, cols, rr1), (same, D, cols, rows, rr1),
                                        (up, E, rows, cols, rr1), (down, E, cols, rows, rr2)):
            if sel.any():
                A1 = np.broadcast_to(a1, blocks.shape)[sel]
                A2 = np.broadcast_to(a2, blocks.shape)[sel]
                np.add.at(target, (np.broadcast_to(rr, blocks.shape)[sel], A1, A2), blocks[sel])

    def spectrum(self, D, E, Fi):
        """[m, M] ∋ K's spectrum: Gershgorin above; λ_min(G⁻¹)/max_j ‖F_j‖² below."""
        R = D.shape[0]
        rows = np.abs(D).sum(axis=2)
        if R > 1:
            rows[:-1] += np.abs(E[:R - 1]).sum(axis=2)
            rows[1:] += np.abs(E[:R - 1]).sum(axis=1)
        Fnorm = 1.0 / np.linalg.svd(Fi, compute_uv=False)[:, -1]
        return self.gmin / float(Fnorm.max()) ** 2 * 0.5, float(rows.max()) * 1.01

    def evaluate(self, x, full: bool = False):
        if self.last is not None and np.array_equal(self.last[0], x):
            return self.last[1]
        lam, L, K, N, R, Fi = self.factors(x)
        D, E = self.assemble(Fi)
        low, high = self.spectrum(D, E, Fi)
        low, high = min(low, 1.0), max(high, 1.0)
        if not 1.0 - low / high < 1.0:  # the nodes' parameter p = 1 − m/M rounds to 1 (or low is 0): NaN nodes
            raise _SpreadTooWide
        P = inverse_sqrt_blocks(D, E, low, high, _NODES)
        lay = self.lay
        i = np.arange(self.k)
        Pj = P[lay.r[:, None, None], (lay.o[:, None] + i)[:, :, None], (lay.o[:, None] + i)[:, None, :]]
        S = float(np.einsum("jaa->", Pj))
        Xb = np.swapaxes(Fi, 1, 2) @ Pj @ Fi
        weight = float(lam.sum())  # R_j has unit diagonal: max diag B_j = λ_j
        bound = S * S / weight
        if bound > self.best[0]:
            self.best = (bound, x.copy())
        self.last = (x.copy(), (S, bound, Xb, lam, N, K, R, L))
        return self.last[1]

    def certify(self, x, spec: InverseBands):
        """(bound, X in time order): the certified S = tr (FᵀGF)^{1/2} and the primal X(M)."""
        b, k, n = self.b, self.k, self.n
        Fi = self.factors(x)[-1]
        F = np.linalg.inv(Fi)  # M = F Fᵀ for this F exactly: the dual point certified
        perm = np.arange(n).reshape(k, b).T.ravel()  # pattern-major j·k + i → step j + i·b
        S_low, P = (self._root_gram if spec.inverse is None else self._root_rows)(spec, F, perm)
        weight = float(np.einsum("jab,jab->ja", F, F).max(axis=1).sum()) * (1 + 4 * k * _EPS)
        bound = S_low ** 2 / weight
        X = np.matmul(np.swapaxes(Fi, 1, 2), P.reshape(b, k, n)).reshape(n, n)  # F⁻ᵀ H^{1/2} F⁻¹
        del P
        X = np.matmul(X.reshape(n, b, k).transpose(1, 0, 2), Fi).transpose(1, 0, 2).reshape(n, n)
        Xt = np.empty_like(X)
        Xt[np.ix_(perm, perm)] = (X + X.T) / 2
        return bound, Xt


    def _root_gram(self, spec: InverseBands, F, perm):
        """(S less round-off, H^{1/2}) from the eigenvalues of H = FᵀGF (prefix sums, all ranges: G closed form)."""
        b, k, n = self.b, self.k, self.n
        H = spec.dense(n)[np.ix_(perm, perm)]
        H = np.matmul(np.swapaxes(F, 1, 2), H.reshape(b, k, n)).reshape(n, n)  # Fᵀ G, pattern rows
        H = np.matmul(H.reshape(n, b, k).transpose(1, 0, 2), F).transpose(1, 0, 2).reshape(n, n)
        H = (H + H.T) / 2
        w, V = np.linalg.eigh(H)
        del H
        # Weyl on each eigenvalue: eigh's backward error 32·n·u·‖H‖ (as mmopt.participation.optimum) and forming
        # H from G ≥ 0, |ΔH| ≤ γ_{2k}·|F|ᵀG|F| entrywise, so ‖ΔH‖ ≤ γ_{2k}·‖G‖·max_j ‖F_j‖²_F (Perron)
        gamma = 2 * k * _EPS / (1 - 2 * k * _EPS)
        delta = 32 * n * _EPS * float(np.abs(w).max()) + gamma / self.gmin * float((F ** 2).sum(axis=(1, 2)).max())
        return float(np.sqrt(np.maximum(w - delta, 0.0)).sum()), (V * np.sqrt(np.maximum(w, 0.0))) @ V.T

    def _root_rows(self, spec: InverseBands, F, perm):
        """(S less round-off, H^{1/2}) from the singular values of Y = W F (H = YᵀY): a Toeplitz W is known, and
        its singular values keep their absolute accuracy eps·‖Y‖ where H's eigenvalues lose √(eps·‖H‖) — on
        momentum (‖G‖ ≈ 10⁸ at 2,048 steps) the eigenvalue allowance cost the bound 6·10⁻⁴."""
        b, k, n = self.b, self.k, self.n
        W = scipy.linalg.toeplitz(spec.coefficients[:n], np.zeros(n))[:, perm]
        Y = np.matmul(W.reshape(n, b, k).transpose(1, 0, 2), F).transpose(1, 0, 2).reshape(n, n)
        _, sv, Vt = np.linalg.svd(Y, full_matrices=False)
        del Y
        # Weyl on each singular value: the SVD's backward error 32·n·u·‖Y‖, and forming Y (k-term sums),
        # |ΔY| ≤ γ_k·|W||F| entrywise, so ‖ΔY‖ ≤ γ_k·‖W‖_F·max_j ‖F_j‖_F
        gamma = k * _EPS / (1 - k * _EPS)
        delta = 32 * n * _EPS * float(sv[0]) + gamma * float(np.linalg.norm(W)) * float(
            np.sqrt((F ** 2).sum(axis=(1, 2)).max()))
        return float(np.maximum(sv - delta, 0.0).sum()), (Vt.T * sv) @ Vt


def _warm_start(spec: InverseBands, n: int, k: int, tol: float, budget: int):
    """x for b patterns from the solve at n/2 (each coarse pattern's variables repeated on two patterns)."""
    b = n // k
    if n <= _COARSEST or b % 2 or k > b or b // 2 < spec.width:
        return np.concatenate([np.zeros(b), np.tile(np.eye(k).ravel(), b)])
    return refine(_iterate(spec, n // 2, k, tol, budget)[0], b, k)


def _iterate(spec: InverseBands, n: int, k: int, tol: float, budget: int):
    """(best x, dual, state) of L-BFGS on the fast dual, stopped when the estimated gap is ≤ tol."""
    dual = _TridiagonalDual(spec, n // k, k)
    x0 = _warm_start(spec, n, k, tol, budget)
    state = {"iterations": 0, "estimate": np.inf, "x": x0}

    def check(xk):
        # the estimated gap at one point (its own bound and primal): the point certified at the end
        state["iterations"] += 1
        S, bound, Xb = dual.evaluate(xk)[:3]  # cached: L-BFGS's own last evaluation
        ratio = S * float(block_bounds(Xb, refine=False)[1].max()) / bound  # every step: the cheap bounds
        if ratio < state["estimate"]:
            state["estimate"], state["x"] = ratio, xk.copy()
        if ratio <= 1 + tol or state["iterations"] >= budget:
            raise StopIteration

    try:
        sopt.minimize(dual.objective, x0, jac=True, method="L-BFGS-B", callback=check,
                      options={"maxiter": budget, "maxcor": 20, "gtol": 1e-12, "ftol": 1e-15})
    except StopIteration:
        pass
    return state["x"], dual, state


def solve_tridiagonal(kind, n: int, epochs: int, *, tol: float = 1e-3,
                      max_iterations: int = 300) -> ScheduleOptimum:
    """The certified optimum of min Δ²·tr(G X⁻¹) under ``fixed_epochs(epochs)`` for ``kind`` ∈ {"prefix",
    "all_range"} (or the :class:`~mmopt.participation.banded_inverse.InverseBands` of a Toeplitz workload with a
    banded inverse: momentum) on n ≤ 4,096 steps (module docstring): the same result as
    :func:`mmopt.participation.optimum.solve_fixed_epochs`, each step O(n·k²·w) instead of O(n³).

    Examples
    --------
    >>> sol = solve_tridiagonal("prefix", 64, 4, tol=1e-4)
    >>> sol.status, bool(sol.dual <= sol.primal <= sol.dual * (1 + 1e-4))
    ('optimal', True)
    """
    from mmopt._base import validation as v
    caller = "solve_tridiagonal"
    t0 = time.perf_counter()
    if not isinstance(kind, InverseBands) and kind not in ("prefix", "all_range"):
        raise ValueError(f"The 'kind' parameter of {caller} must be 'prefix', 'all_range' or an InverseBands. Got "
                         f"{kind!r} instead.")
    spec = kind if isinstance(kind, InverseBands) else of_kind(kind)
    n = v.check_int(n, name="n", caller=caller)
    schema = FixedEpochs(v.check_int(epochs, name="epochs", caller=caller))
    schema.check_n(n, caller)
    if spec.coefficients is not None and len(spec.coefficients) < n:
        raise ValueError(f"The 'n' parameter of {caller} must be at most the workload's {len(spec.coefficients):,} "
                         f"steps. Got {n:,} instead.")
    if n // schema.epochs < spec.width:
        raise ValueError(f"{caller}: the epoch length n/k = {n // schema.epochs} must be at least the inverse Gram's "
                         f"bandwidth {spec.width} (a coupling may wrap one epoch, not two); use solve_fixed_epochs.")
    tol = v.check_real(tol, name="tol", caller=caller, low=0.0, low_open=True)
    max_iterations = v.check_int(max_iterations, name="max_iterations", caller=caller)
    if n > MAX_N:
        raise ValueError(f"solve_tridiagonal: n = {n:,} is above {MAX_N:,}, where the primal's n×n matrices stop "
                         "fitting. Past it use a banded strategy (mmopt.optimize(..., method='banded')).")
    v.check_allocation(5 * n * n, what=f"five {n:,}×{n:,} arrays (the certificate and the primal)", caller=caller)
    x, dual, state = _iterate(spec, n, epochs, tol * 0.5, max_iterations)
    bound, X = dual.certify(x, spec)
    primal, C, sens = best_primal(spec.matmat(n), X, schema)  # prefix sums / all ranges: G applied in O(n²)
    iterations = state["iterations"]
    if primal > (1 + tol) * bound and n <= POLISH_MAX_N:
        # L-BFGS stops in the quadrature's gradient noise (1e-11, relative) with the primal X(M) short of tol; a few
        # steps of the dense dual (exact gradient, O(n³) each) from the same point take it further. Measured: prefix
        # sums, 1,024 steps, tol 1e-5, k = 8: 1.0000102 → 1.0000064 (the polish itself 1.1 CPU s, the route ~2 s
        # end to end); at 2,048 steps, forced: 4.48e-5 → 4.27e-5 for +6 s, the stall elsewhere: not past POLISH_MAX_N.
        polished = _solve(spec.dense(n), schema, tol, POLISH_STEPS, None, initial=x)[0]
        iterations += polished.iterations
        bound = max(bound, polished.dual)  # both certified
        if polished.primal < primal:
            primal, C, sens = polished.primal, polished.matrix, polished.sensitivity
    status = "optimal" if primal <= (1 + tol) * bound else "user_limit"
    seconds = time.perf_counter() - t0
    history = ({"iteration": iterations, "dual": bound, "primal": primal, "seconds": seconds},)
    return ScheduleOptimum(C, primal, min(bound, primal), sens, status, iterations, seconds, history)
