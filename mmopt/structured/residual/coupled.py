"""Coupled split strategies: unions of products with at most two non-total factors per term, scored exactly.

Notation: see README and :mod:`.split`. Per attribute i take the orthonormal basis Hᵢ = [1/√nᵢ, Uᵢ] and write an
n×n Gram in it as M = [[α, βᵀ], [β, Γ]]; a total factor v1ᵀ has Gram ‖v‖²J = ‖v‖²nᵢ·E₀₀. A term θ⊗ₗFₗ with
active set T (the attributes whose factor is not a total, |T| ≤ 2) then lives on the blocks ∅, {i} (Uᵢ on i,
1/√n elsewhere) and {i, j} of 𝒱 = ⊕_{|S|≤2} Q_S, with the scale s = θ²∏_{l∉T}‖vₗ‖²nₗ. The split strategy is the
case β = 0 (Bᵢ1 = 0), where X is block diagonal; here β ≠ 0 couples the blocks, so a 2-way measurement also
informs the 1-way marginals and the total (1+2-way prefix marginals (8,)³: split 1.12×, coupled 1.008× the
dual bound, ``benchmarks/results/bench_coupled_split.txt``).

**Exact error.** Order 𝒱 as low L = ∅ ∪ {i} (dimension 1 + Σ(nᵢ−1)) and the pair blocks P. If each pair p = {i, j}
is measured by one term, X_PP is block diagonal with blocks D_p = s_p Γᵢ⊗Γⱼ, and with Y_p = D_p⁻¹X_{pL} (from
(Γᵢ⁻¹⊗Γⱼ⁻¹) applied to the pair rows of Xᵢ⊗Xⱼ), S = X_LL − Σ_p X_{Lp}Y_p (the Schur complement) and K = [I; −Y]:

    X⁻¹ = K S⁻¹ Kᵀ + diag(0, D⁻¹),      tr(G X⁻¹) = tr(S⁻¹ KᵀGK) + Σ_p tr(G_pp D_p⁻¹),                   (1)

KᵀGK = G_LL − Σ_p (G_{Lp}Y_p + Y_pᵀG_{pL}) + Σ_p Y_pᵀG_ppY_p (G has no block between two pairs, as X). Every
piece is a restriction of a Kronecker product of two nᵢ×nⱼ Grams, so (1) costs O(Σ_p n⁴ + |L|³) and never forms
anything of size N. It is exact (a Cholesky solve with |L| unknowns), for any workload whose terms have at most
two non-total factors.

**Sensitivity.** Column y has squared norm Σ_t s_t ∏_{i∈T_t} (Xᵢ)_{yᵢyᵢ}/(nᵢ·…) — every summand grows with each
factor's column norm — so Σ_t (term maximum) bounds Δ₂² above, with equality when the factors' column norms are
equal; :func:`fit` pads each factor to equal column norms, and the report states Δ₂ exact only where mmopt's
sensitivity (uniform columns, or a scan of all cells) proves it.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

import numpy as np
from scipy import linalg

from mmopt.dense.profile import numerical_rank
from mmopt.dense.support import support_tolerance
from mmopt.structured import _rows as rw
from mmopt.structured import factors as fc
from mmopt.structured._dual_blocks import _householder

#: A factor is a total v1ᵀ when its part off span(1ᵀ) is below this share of its squared Frobenius norm.
_TOTAL = 1e-24
_EPS = np.finfo(float).eps
#: Largest attribute size (the pair pieces are (nᵢnⱼ)×(1+nᵢ+nⱼ) and (nᵢnⱼ)² is never formed).
MAX_SIZE = 128


@dataclass(frozen=True)
class _Term:
    """A term of W or A in the Hᵢ bases: its scale s and the Grams of its (≤ 2) active factors."""

    scale: float
    active: dict


def _basis(n: int) -> np.ndarray:
    return _householder(np.ones(n) / math.sqrt(n))


def _terms(union, memo: dict, classify, *, drop_zero: bool) -> list[_Term] | None:
    """The terms of ``union`` in the Hᵢ bases, or None when one has more than two active factors (or ``classify``
    refuses a factor). ``classify(f)`` is ("T", ‖v‖²n) for a total factor, ("A", Gram in Hᵢ) else, or None;
    ``memo`` caches it by factor identity across calls."""
    out = []
    for t in union.terms:
        s, active = t.weight**2, {}
        for i, f in enumerate(t.factors):
            key = id(f)
            if key not in memo:
                kind = classify(f)
                if kind is None:
                    return None
                memo[key] = (f, *kind)  # f is kept so that its id is not reused while memo lives
            _, kind, val = memo[key]
            if kind == "T":
                s *= val
            else:
                active[i] = val
        if len(active) > 2:
            return None
        if s > 0 or not drop_zero:
            out.append(_Term(s, active))
    return out


def _strategy_terms(strategy, memo: dict) -> list[_Term] | None:
    def classify(f):
        F = np.asarray(f.matrix, dtype=float)
        n = F.shape[1]
        r1 = F.sum(axis=1) / n
        off = F - r1[:, None]
        tot = float(np.sum(F * F))
        if tot == 0.0 or not np.isfinite(tot):
            return None
        if float(np.sum(off * off)) <= _TOTAL * tot:
            return "T", float(r1 @ r1) * n  # ‖v‖²·n
        H = _basis(n)
        return "A", H.T @ (F.T @ F) @ H

    return _terms(strategy, memo, classify, drop_zero=False)


def in_form(workload) -> bool:
    """Whether ``workload`` is of this module's form: every term with at most two non-total factors, every attribute
    of 2 to :data:`MAX_SIZE` values (what :func:`report` needs of the workload; of a strategy it also needs the
    same form and equal column norms)."""
    shape = tuple(getattr(workload, "shape", ()))
    return bool(shape) and all(2 <= n <= MAX_SIZE for n in shape) and _workload_terms(workload, {}) is not None


def _workload_terms(workload, memo: dict) -> list[_Term] | None:
    def classify(f):
        G = np.asarray(fc.workload_gram(f), dtype=float)
        n = G.shape[0]
        beta = float(G.mean())
        # a total only if each row is constant (to its own norm) where the rows are known: [10⁷·1ᵀ; e₀ − e₁] has a
        # Gram within 10⁻¹² of βJ, and the pair its light row needs, measured by no block, went unchecked (an
        # 'exact' 4.6·10¹⁶; a helper's audit)
        if beta > 0 and float(np.max(np.abs(G - beta))) <= 1e-12 * beta and not (
                fc.root_is_rows(f) and rw.row_shares(fc.row_stats(f), n)[0] > support_tolerance(n)):
            return "T", beta * n
        # equal Grams share one object, so that pairs with equal factors share their pieces
        same = ("gram", G.shape, G.tobytes())
        if same not in memo:
            H = _basis(n)
            memo[same] = H.T @ G @ H
        return "A", memo[same]

    return _terms(workload, memo, classify, drop_zero=True)


def _low_index(shape) -> list[np.ndarray]:
    """Positions in L of the H-basis indices 0..nᵢ−1 of attribute i (index 0 is ∅)."""
    out, off = [], 1
    for n in shape:
        out.append(np.concatenate([[0], np.arange(off, off + n - 1)]))
        off += n - 1
    return out


@functools.lru_cache(maxsize=64)
def _cells(ni: int, nj: int):
    """(k, l) of the pair grid's low cells (0,0), (k,0), (0,l) and pair cells (k ≥ 1, l ≥ 1)."""
    lk = np.concatenate([[0], np.arange(1, ni), np.zeros(nj - 1, int)])
    ll = np.concatenate([[0], np.zeros(ni - 1, int), np.arange(1, nj)])
    pk, pl = np.repeat(np.arange(1, ni), nj - 1), np.tile(np.arange(1, nj), ni - 1)
    return (lk, ll), (pk, pl)


def sandwich(P, B, Q) -> np.ndarray:
    """(P⊗Qᵀ)·vec per column: B of shape (a, b, r) → P·B[:, :, r]·Q for every r, shape (a', b', r)."""
    return np.moveaxis(P @ np.moveaxis(B, 2, 0) @ Q, 0, 2)


def _kron_part(Mi, Mj, rows, cols) -> np.ndarray:
    """(Mᵢ⊗Mⱼ)[rows, cols] for cell lists rows = (k, l), cols = (k', l')."""
    return Mi[np.ix_(rows[0], cols[0])] * Mj[np.ix_(rows[1], cols[1])]


@dataclass
class Pieces:
    """What (1) needs, kept for the gradient: S's Cholesky, KᵀGK, and per pair its Y_p and G blocks."""

    unit: float
    S: np.ndarray
    Q: np.ndarray
    pairs: dict


def unit_error_terms(shape, a_terms: list[_Term], w_terms: list[_Term]) -> Pieces | None:
    """tr(G X⁻¹) on 𝒱 by (1), or None when a pair is measured twice, a Γ or S is singular, or G has a pair
    block the strategy does not measure (then X does not support G)."""
    idx = _low_index(shape)
    L = 1 + sum(n - 1 for n in shape)
    S, Q = np.zeros((L, L)), np.zeros((L, L))
    spairs, wpairs, lows = {}, {}, {}
    for target, terms, store in ((S, a_terms, spairs), (Q, w_terms, wpairs)):
        for t in terms:
            keys = sorted(t.active)
            if not keys:
                target[0, 0] += t.scale
            elif len(keys) == 1:
                ix = idx[keys[0]]
                target[np.ix_(ix, ix)] += t.scale * t.active[keys[0]]
            else:
                i, j = keys
                low, _ = _cells(shape[i], shape[j])
                ix = np.concatenate([[0], idx[i][1:], idx[j][1:]])
                mk = (id(t.active[i]), id(t.active[j]))  # repeated factor pairs: their low block once
                if mk not in lows:
                    lows[mk] = _kron_part(t.active[i], t.active[j], low, low)
                target[ix[:, None], ix[None, :]] += t.scale * lows[mk]
                if store is spairs and (i, j) in spairs:
                    return None
                store.setdefault((i, j), []).append(t)
    pairs, extra = {}, 0.0
    if any(p not in spairs for p in wpairs):
        return None
    memo = {}  # symmetric unions repeat the same pair (same factor objects): its pieces once
    for (i, j), (a,) in spairs.items():
        ws = wpairs.get((i, j), [])
        key = (id(a.active[i]), id(a.active[j]), a.scale, tuple((id(w.active[i]), id(w.active[j]), w.scale)
                                                                  for w in ws))
        if key not in memo:
            memo[key] = _pair(shape[i], shape[j], a.active[i], a.active[j], a.scale, [(w.scale, w.active[i],
                                                                                      w.active[j]) for w in ws])
        local = memo[key]
        if local is None:
            return None
        Y, GpL, GY, inv, dS, dQ, tr = local
        ix = np.concatenate([[0], idx[i][1:], idx[j][1:]])
        S[ix[:, None], ix[None, :]] -= dS
        Q[ix[:, None], ix[None, :]] += dQ
        extra += tr
        pairs[(i, j)] = (ix, Y, GpL, GY, inv, a.scale)
    # S singular to round-off means X does not (provably) support 𝒱: a Cholesky factor of it exists all the same,
    # and scored strategies that cannot answer the workload at 10¹⁶–10⁶⁴. mmopt's one rank rule decides.
    spectrum = linalg.eigvalsh(S, driver="evd")[::-1]
    if numerical_rank(spectrum, S.shape) < L:
        return None
    # the Schur complement carries ~eps·cond(S) of round-off into the total: past 10⁻⁸ of it the figure is not exact
    # (κ(A) = 10⁷ gave 1.5·10⁻³ relative error, labelled exact; a helper's audit), and the other routes run
    if _EPS * spectrum[0] > 1e-8 * spectrum[-1]:
        return None
    unit = float(np.trace(linalg.cho_solve(linalg.cho_factor(S), Q))) + extra
    return Pieces(unit, S, Q, pairs)


def _pair(ni, nj, Xi, Xj, scale, ws):
    """One pair's pieces of (1) in its local order (∅, i, j): Y_p, G_{pL}, G_ppY_p, Γ⁻¹s, the Schur term,
    the KᵀGK term and tr(G_pp D_p⁻¹); None when a Γ is singular."""
    low, pc = _cells(ni, nj)
    inv = []
    for M in (Xi, Xj):
        lam, V = linalg.eigh(M[1:, 1:], driver="evd")
        if lam[0] <= 1e-12 * lam[-1]:
            return None
        inv.append((V / lam) @ V.T)
    mi, mj = ni - 1, nj - 1
    Y = sandwich(inv[0], _kron_part(Xi, Xj, pc, low).reshape(mi, mj, -1), inv[1]).reshape(mi * mj, -1)
    dS = scale * _kron_part(Xi, Xj, low, pc) @ Y
    GpL, GY, tr = np.zeros_like(Y), np.zeros_like(Y), 0.0
    for w, Gi, Gj in ws:
        GpL += w * _kron_part(Gi, Gj, pc, low)
        GY += w * sandwich(Gi[1:, 1:], Y.reshape(mi, mj, -1), Gj[1:, 1:]).reshape(mi * mj, -1)
        tr += w * float(np.sum(Gi[1:, 1:] * inv[0])) * float(np.sum(Gj[1:, 1:] * inv[1])) / scale
    return Y, GpL, GY, inv, dS, Y.T @ GY - GpL.T @ Y - Y.T @ GpL, tr


def unit_error(workload, strategy) -> float | None:
    """tr(G X⁺) by (1) for a strategy and workload of the module's form, else None (not this form, or X does
    not support G on 𝒱).

    Examples
    --------
    >>> from mmopt.structured import strategies as ss, workloads as sw
    >>> P, T = np.tril(np.ones((3, 3))), np.ones((1, 3))
    >>> W = sw.union([sw.kron(P, T), sw.kron(T, P), sw.kron(P, P)])
    >>> A = ss.union_strategy([ss.kron_strategy(P, T), ss.kron_strategy(T, P), ss.kron_strategy(P, P)])
    >>> G, X = W.gram, A.gram
    >>> bool(np.isclose(unit_error(W, A), np.trace(G @ np.linalg.pinv(X))))
    True
    """
    shape = tuple(workload.shape)
    if any(n > MAX_SIZE or n < 2 for n in shape) or tuple(strategy.shape) != shape:
        return None
    a = _strategy_terms(strategy, {})
    w = None if a is None else _workload_terms(workload, {})
    if w is None or not any(t.active for t in a):
        return None
    p = unit_error_terms(shape, a, w)
    return None if p is None else p.unit


def delta_upper(strategy) -> tuple[float, float]:
    """(Σ_t θ_t² ∏ max column norm², the same at the cell 0): bounds of Δ₂² above and below (module docstring)."""
    up = low = 0.0
    for t in strategy.terms:
        u = v = t.weight**2
        for f in t.factors:
            col = np.einsum("ij,ij->j", f.matrix, f.matrix)
            u, v = u * float(col.max()), v * float(col[0])
        up, low = up + u, low + v
    return up, low


def report(workload, strategy, privacy, norm: str, *, floor):
    """An exact :class:`~mmopt.structured._report.ImplicitErrorReport` (method "coupled") under L2 sensitivity,
    or None (another norm, not of the module's form, or column norms that are not equal to 10⁻¹² so that Δ₂ is
    not pinned down). ``floor()`` is the workload's unit SVD bound; an error below it raises ValueError (a
    numerical failure, never a result). The largest query variance is not computed (None); its upper bound is
    the total (every query's variance is one of its non-negative summands)."""
    from mmopt.structured._report import ImplicitErrorReport
    if norm != "l2":
        return None
    unit = unit_error(workload, strategy)
    if unit is None:
        return None
    up, low = delta_upper(strategy)
    if not (0 < up and up - low <= 1e-12 * up):
        return None
    if not math.isfinite(unit) or up * unit < floor() * (1 - 1e-9):
        raise ValueError(f"evaluate: the computed error {unit!r} of '{strategy.name}' is below the SVD lower bound "
                         "or not finite: numerical failure. Check the strategy's conditioning.")
    c = 1.0 if privacy is None else privacy.variance_factor
    total, m = c * up * unit, workload.n_queries
    return ImplicitErrorReport(
        workload=workload.name, strategy=strategy.name, privacy=privacy, shape=workload.shape,
        domain_size=workload.domain_size, n_queries=m, sensitivity=math.sqrt(up), sensitivity_exact=True,
        total_squared_error=total, total_exact=True, mean_squared_error=total / m, rmse=math.sqrt(total / m),
        max_variance=None, max_variance_upper=total, max_variance_exact=False, method="coupled",
        sensitivity_norm="l2")


def pair_list(d: int):
    return list(itertools.combinations(range(d), 2))


__all__ = ["MAX_SIZE", "Pieces", "delta_upper", "in_form", "report", "sandwich", "unit_error", "unit_error_terms"]
