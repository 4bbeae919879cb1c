"""The exact reduction behind :mod:`mmopt.structured.dual_bound`: ν(u) = tr(D_u^{1/2} G D_u^{1/2})^{1/2} of a
symmetric 1- and 2-way union at product weights u = ⊗ ũ, from two small symmetric matrices and a closed-form
remainder (the derivation is in that module's docstring), and the 1-D dual weights the search starts from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import linalg, optimize

from mmopt.structured import factors as fc
from mmopt.structured.workloads import ImplicitWorkload

#: Each eigenvalue of a reduced block is lowered by this × the block's Frobenius norm (× its size) before √.
_MARGIN = 64 * np.finfo(float).eps
#: Relative tolerance for "this factor Gram is β·J" / "is s·G₀".
_SAME = 1e-10
#: Largest attribute size handled (the standard block has m + m² rows, m = n - 1).
MAX_SIZE = 64


@dataclass(frozen=True)
class _Form:
    """The symmetric structure: d attributes of size n, common G₀, level weights c₀, c₁, c₂."""

    d: int
    n: int
    gram: np.ndarray
    levels: tuple[float, float, float]


def _is_ones(G: np.ndarray) -> float | None:
    """β when G = β·J (J = 11ᵀ) up to round-off, else None."""
    beta = float(G[0, 0])
    if beta <= 0 or np.max(np.abs(G - beta)) > _SAME * beta:
        return None
    return beta


def _form(workload: ImplicitWorkload, cache: fc.Cache) -> _Form | None:
    shape = workload.shape
    d, n = len(shape), shape[0]
    if any(s != n for s in shape) or n > MAX_SIZE:
        return None
    if len(workload.terms) > 4 * (1 + d + math.comb(d, 2)):  # more terms than 1- and 2-way sets: not covered
        return None
    g0 = None
    weights: dict[frozenset, float] = {}
    seen: dict[int, tuple] = {}  # id(factor) → ("J", β) or ("G", s); terms share factor objects
    for t in workload.terms:
        c, S = t.weight**2, set()
        for i, f in enumerate(t.factors):
            if id(f) not in seen:
                G = np.asarray(cache.get(fc.workload_gram, f), dtype=float)
                if not np.all(np.isfinite(G)):
                    return None
                if (beta := _is_ones(G)) is not None:
                    seen[id(f)] = ("J", beta)
                elif (scale := float(np.trace(G))) <= 0:
                    seen[id(f)] = ("J", 0.0)
                else:
                    if g0 is None:
                        g0 = G / scale
                    elif np.max(np.abs(G / scale - g0)) > _SAME * np.max(np.abs(g0)):
                        return None
                    seen[id(f)] = ("G", scale)
            kind, scale = seen[id(f)]
            c *= scale
            if kind == "G":
                S.add(i)
        if c == 0.0:
            continue
        if len(S) > 2:
            return None
        weights[frozenset(S)] = weights.get(frozenset(S), 0.0) + c
    if g0 is None:  # every term sums every attribute out: G = βJ on N cells, ν = √(βN)·… handled with n = 1 blocks
        g0 = np.ones((n, n)) / n
    levels = []
    for p in range(3):
        count = math.comb(d, p)
        present = [w for S, w in weights.items() if len(S) == p]
        levels.append(min(present) if len(present) == count and count > 0 else 0.0)
    if not any(levels):
        return None
    return _Form(d, n, g0, tuple(levels))


def _householder(e: np.ndarray) -> np.ndarray:
    """Orthogonal H (symmetric) with first column e (unit)."""
    n = e.size
    w = e.copy()
    w[0] -= 1.0
    nw = float(np.linalg.norm(w))
    if nw < 1e-300:
        return np.eye(n)
    w /= nw
    return np.eye(n) - 2.0 * np.outer(w, w)


def _blocks(form: _Form, u: np.ndarray, *, certified: bool = False):
    """(invariant block T, standard block S, remainder eigenvalues with multiplicities, Σu scale) for weights u.

    Everything is divided by ‖v‖^{2d-4} (= (Σũ)^{d-2}); the caller restores it. ``certified``: the remainder's
    closed-form eigenvalues κ₂γ_kγ_l are formed from each γ lowered by its round-off bound (eigh's computed γ
    are exact for C + E, ‖E‖ ≤ p(m)·eps·‖C‖, so a small γ may be off by far more than its own relative eps).
    """
    d, n = form.d, form.n
    c0, c1, c2 = form.levels
    v = np.sqrt(u)
    nu = float(u.sum())
    H = _householder(v / math.sqrt(nu))
    B = H @ (v[:, None] * form.gram * v[None, :]) @ H
    a = float(B[0, 0])
    gam, U = linalg.eigh((B[1:, 1:] + B[1:, 1:].T) / 2, check_finite=False, driver="evd")
    gam = np.clip(gam, 0.0, None)
    bt = U.T @ B[1:, 0]
    k0 = c0 * nu**2 + d * c1 * a * nu + math.comb(d, 2) * c2 * a * a  # ÷ ν^{d-2}
    k1 = c1 * nu + (d - 1) * c2 * a
    k2 = c2
    m = n - 1
    iu, ju = np.triu_indices(m)  # pair classes k ≤ l
    off = iu < ju
    pairs = d >= 2 and k2 > 0
    C2 = math.comb(d, 2)
    # invariant block: ∅, s_k, q_{kl} (k ≤ l)
    nq = iu.size if pairs else 0
    T = np.zeros((1 + m + nq, 1 + m + nq))
    T[0, 0] = k0
    T[0, 1:1 + m] = math.sqrt(d) * k1 * bt
    T[1:1 + m, 1:1 + m] = k1 * np.diag(gam) + (d - 1) * k2 * np.outer(bt, bt)
    if pairs:
        q = slice(1 + m, 1 + m + nq)
        T[0, q] = np.where(off, math.sqrt(2 * C2), math.sqrt(C2)) * k2 * bt[iu] * bt[ju]
        cols = np.arange(nq)
        f = np.where(off, math.sqrt(d - 1), math.sqrt(2 * (d - 1))) * k2
        T[1 + iu, 1 + m + cols] += f * gam[iu] * bt[ju]
        T[1 + ju[off], 1 + m + cols[off]] += f[off] * gam[ju[off]] * bt[iu[off]]
        T[1 + m + cols, 1 + m + cols] = k2 * gam[iu] * gam[ju]
    T = np.triu(T) + np.triu(T, 1).T
    # standard block (d - 1 copies): σ_k, α_{kl} (k < l), ρ_{kl} (k ≤ l, d ≥ 3)
    rest_vals, rest_mult = [], []
    S = None
    if d >= 2:
        io, jo = iu[off], ju[off]
        na = io.size if pairs else 0
        nr = (iu.size if d >= 3 else 0) if pairs else 0
        S = np.zeros((m + na + nr, m + na + nr))
        S[:m, :m] = k1 * np.diag(gam) - k2 * np.outer(bt, bt)
        if pairs:
            ca = np.arange(na)
            g = math.sqrt(d / 2) * k2
            S[io, m + ca] += g * gam[io] * bt[jo]
            S[jo, m + ca] -= g * gam[jo] * bt[io]
            S[m + ca, m + ca] = k2 * gam[io] * gam[jo]
            if d >= 3:
                cr = np.arange(nr)
                h = np.where(off, math.sqrt((d - 2) / 2), math.sqrt(d - 2)) * k2
                S[iu, m + na + cr] += h * gam[iu] * bt[ju]
                S[ju[off], m + na + cr[off]] += h[off] * gam[ju[off]] * bt[iu[off]]
                S[m + na + cr, m + na + cr] = k2 * gam[iu] * gam[ju]
                mult = np.where(off, d * (d - 1) - 1 - 2 * (d - 1), C2 - 1 - (d - 1))
                gl = np.clip(gam - _MARGIN * m * float(np.linalg.norm(B[1:, 1:])), 0.0, None) if certified else gam
                rest_vals.append(k2 * gl[iu] * gl[ju])
                rest_mult.append(mult)
        S = np.triu(S) + np.triu(S, 1).T
    return T, S, rest_vals, rest_mult, nu


def _root_sum(A: np.ndarray, *, certified: bool) -> float:
    if A is None or A.size == 0:
        return 0.0
    lam = linalg.eigvalsh(A, check_finite=False, driver="evd")
    if certified:
        lam = lam - _MARGIN * A.shape[0] * float(np.linalg.norm(A))
    return float(np.sum(np.sqrt(np.clip(lam, 0.0, None))))


def _value(form: _Form, u: np.ndarray, *, certified: bool = False) -> float:
    """ν(u)²/Σu for u = ⊗ ũ (ũ = ``u``), divided by nothing: a lower bound on min tr(G X⁻¹)."""
    T, S, rv, rm, nu = _blocks(form, u, certified=certified)
    total = _root_sum(T, certified=certified) + (form.d - 1) * _root_sum(S, certified=certified)
    for vals, mult in zip(rv, rm, strict=True):
        vals = np.clip(vals * (1 - _MARGIN * form.n) if certified else vals, 0.0, None)
        total += float(np.sum(mult * np.sqrt(vals)))
    # ν² ‖v‖^{2d-4} / ‖v‖^{2d}
    return total**2 / nu**2


def _one_dim_weights(G: np.ndarray) -> np.ndarray:
    """Weights ũ (mean 1) maximising tr(D^{1/2} G D^{1/2})^{1/2})²/Σũ, the 1-D dual of min tr(G X⁻¹)."""
    n = G.shape[0]

    def neg(x):
        w = np.exp(x - x.max())
        s = np.sqrt(w)
        lam, V = linalg.eigh(s[:, None] * G * s[None, :], check_finite=False, driver="evd")
        r = np.sqrt(np.clip(lam, 0.0, None))
        nu, tot = float(r.sum()), float(w.sum())
        diag = (V * V) @ r  # (M^{1/2})ₓₓ
        grad = 2 * nu * 0.5 * diag / tot - nu**2 / tot**2 * w  # d(ν²/Σw)/dx
        return -nu**2 / tot, -grad

    res = optimize.minimize(neg, np.zeros(n), jac=True, method="L-BFGS-B", options={"maxiter": 200})
    w = np.exp(res.x - res.x.max())
    return w * (n / w.sum())
