"""The dual of the matrix mechanism's program over a working set of participation patterns (which may overlap),
for :mod:`mmopt.participation.cutting`.

Notation: see :mod:`mmopt.participation.cutting`. For G = AᵀA and M = Σ_{π∈P} λ_π E_π R_π E_πᵀ (R_π a
correlation matrix, N L Lᵀ N as :mod:`mmopt.participation.optimum`), every X feasible for the schema has

    tr(G X⁻¹) ≥ S(M)² / Σ_π λ_π,   S(M) = tr K^{1/2},   K = A M Aᵀ,

with dS = ½ tr(X(M) dM), X(M) = Aᵀ K^{−1/2} A, tr(G X(M)⁻¹) = S. Prefix sums: A = W (lower-triangular ones), so
K is two cumulative sums and Aᵀ a reversed one; another Gram: A = Lᵀ, L the Cholesky factor of G − εI with ε
twice Cholesky's backward error (Higham, Thm 10.3: |ΔG| ≤ γ_{n+1}|L||L|ᵀ), so that LLᵀ ⪯ G and the bound holds
for G. :meth:`_PatternDual.certify` subtracts from each eigenvalue of K eigh's backward error (32·n·u·‖K‖) and
the round-off of forming M and K (γ_{2n}‖A|M|Aᵀ‖_F, Weyl), so its S is a lower bound of the exact one.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from mmopt._base.cumulative import cumulative_rows, prefix_sums_2d

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
        try:
            self.L = np.linalg.cholesky(G - shift * np.eye(n))
        except np.linalg.LinAlgError:  # λ_min(G) within the round-off margin: no certified bound from this G
            raise ValueError(f"The Gram WᵀW is too ill-conditioned for a certified bound under minimum separation: "
                             f"its smallest eigenvalue is below the round-off margin {shift:.1e} (largest diagonal "
                             f"{float(np.diag(G).max()):.1e}). Stack a small identity onto the workload: "
                             f"mmopt.workload.stack([W, mmopt.workload.identity({n})], weights=[1.0, 1e-3]).") from None
        self.Labs = np.abs(self.L)

    def K(self, M: np.ndarray) -> np.ndarray:
        if self.prefix:
            return prefix_sums_2d(M)
        return self.L.T @ M @ self.L

    def K_error(self, Mabs: np.ndarray) -> float:
        """‖ΔK‖_F ≥ the round-off of :meth:`K` (γ_{2n}·‖|A||M||A|ᵀ‖_F)."""
        gamma = 2 * self.n * _EPS / (1 - 2 * self.n * _EPS)
        big = self.K(Mabs) if self.prefix else self.Labs.T @ Mabs @ self.Labs
        return gamma * float(np.linalg.norm(big))

    def At(self, V: np.ndarray) -> np.ndarray:
        if self.prefix:
            return cumulative_rows(V, reverse=True)
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


def trace_sqrt(A: _Factor, M: np.ndarray):
    """(S, Z): S = tr (A M Aᵀ)^{1/2} and Z = Aᵀ V ω^{−1/4} with ω, V = eigh of K = A M Aᵀ, so that Z Zᵀ = X(M) =
    Aᵀ K^{−1/2} A = 2 ∂S/∂M; ω floored at 10⁻³⁰⁰ of the largest (S's value and gradient at a singular K: finite)."""
    K = A.K(M)
    omega, V = np.linalg.eigh((K + K.T) / 2)
    omega = _floored(omega)
    return float(np.sqrt(omega).sum()), A.At(V) * omega ** -0.25


def _floored(omega: np.ndarray) -> np.ndarray:
    return np.maximum(omega, 1e-300 * max(float(omega[-1]), 1e-300))


def certified_trace_sqrt(A: _Factor, M: np.ndarray, Mabs: np.ndarray, relative_error: float, *,
                         vectors: bool = True):
    """(S_low, ω, V): S_low ≤ tr (A M' Aᵀ)^{1/2} for the exact M' the computed ``M`` stands for, each entry within
    ``relative_error`` of ``Mabs``'s (|M'_st − M_st| ≤ relative_error·Mabs_st); ω, V = eigh of the computed K
    (V None when not ``vectors``: eigenvalues alone, a third of the time and no n×n eigenvectors).

    Weyl: each eigenvalue of the exact K moves by at most eigh's backward error (32·n·u·‖K‖) plus the round-off of
    forming K (γ_{2n}‖A|M|Aᵀ‖_F) plus M's own error pushed through A (relative_error·‖A Mabs Aᵀ‖_F).
    """
    dK = A.K_error(Mabs) * (1 + relative_error) + relative_error * float(np.linalg.norm(A.K(Mabs)))
    K = A.K(M)
    K = (K + K.T) / 2
    omega, V = np.linalg.eigh(K) if vectors else (np.linalg.eigvalsh(K), None)
    delta = 32 * A.n * _EPS * float(np.abs(omega).max()) + dK
    return float(np.sqrt(np.maximum(omega - delta, 0.0)).sum()), omega, V


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
        """(S, bound estimate, Z with X(M) = Z Zᵀ, λ, parts) at x."""
        lam, M, parts = self.assemble(x)
        S, Z = trace_sqrt(self.A, M)
        bound = S * S / float(lam.sum())
        if bound > self.best[0]:
            self.best = (bound, x.copy())
        return S, bound, Z, lam, parts

    def objective(self, x):
        """(−log(S²/Σλ), gradient) for L-BFGS (the gradient of :meth:`_Dual.objective`, group by group)."""
        S, bound, Z, lam, parts = self.evaluate(x)
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
        # forming M: each entry a sum of at most P terms, each λR with R's own rounding (4k ulps)
        S_low, omega, V = certified_trace_sqrt(self.A, M, Mabs, (self.P + 8 * max(g.m for g in self.groups)) * _EPS)
        bound = S_low ** 2 / (float(lam.sum()) * (1 + 4 * self.P * _EPS))
        w = _floored(omega)
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
