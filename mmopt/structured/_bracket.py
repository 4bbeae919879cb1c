"""A certified two-sided bracket on tr(G X⁺) for a union of product strategies no exact path covers.

Notation: see README. W = Σ_k w_k ⊗ᵢ Wᵢ⁽ᵏ⁾ (Gram G = Σ_k w_k² G_k, G_k = ⊗ᵢ Fᵢ⁽ᵏ⁾Fᵢ⁽ᵏ⁾ᵀ) and
A = [θ₁A⁽¹⁾; …; θ_L A⁽ᴸ⁾] (X = Σ_l θ_l² X_l, X_l = ⊗ᵢ Xᵢ⁽ˡ⁾). Since tr(G X⁺) = Σ_k w_k² tr(G_k X⁺), each
workload term is bracketed on its own and the brackets add up.

Upper (Löwner). For X ⪰ Y ⪰ 0 and v ∈ range(Y), vᵀX⁺v = sup_z (2zᵀv − zᵀXz) ≤ sup_z (2zᵀv − zᵀYz) = vᵀY⁺v.
The least-squares estimate from all blocks has covariance X⁺, from block l alone (θ_l²X_l)⁺, and X ⪰ θ_l²X_l,
so for every block l that supports term k, tr(G_k X⁺) ≤ θ_l⁻² ∏ᵢ tr(Gᵢ⁽ᵏ⁾ Xᵢ⁽ˡ⁾⁺) (a product: exact factor by
factor); likewise with Y the sum of the blocks in the marginals algebra. More generally (Gauss–Markov) the
least-squares error is at most that of any unbiased linear estimate, e.g. one that splits each factor's
root along 1 and 1^⊥ and mixes the blocks that support each piece (:func:`mixed_upper`); it also scores
terms that no single block supports. Term k takes the smallest of these.

Lower (a dual point). For any Z, tr(G_k X⁺) ≥ 2⟨Z, F⟩ − ⟨Z, XZ⟩ (the same sup, F = ⊗ᵢFᵢ⁽ᵏ⁾, G_k = FFᵀ);
with Z = s⊗ᵢNᵢ and the best s this is a²/b, a = ∏ᵢ⟨Nᵢ, Fᵢ⟩, b = Σ_l θ_l² ∏ᵢ ‖Aᵢ⁽ˡ⁾Nᵢ‖², valid for *any*
Nᵢ. Fixing all but Nᵢ, a²/b is maximised by Nᵢ = Hᵢ⁺Fᵢ, Hᵢ = Σ_l c_l Xᵢ⁽ˡ⁾, c_l = θ_l²∏_{i'≠i}‖A_{i'}⁽ˡ⁾N_{i'}‖²
(Cauchy–Schwarz: max ⟨N, F⟩²/‖H^{1/2}N‖² = tr(FᵀH⁺F)); a few such sweeps from the upper bound's block
(Nᵢ = Xᵢ⁽ˡ⁾⁺Fᵢ) give the lower value, equal to the truth when X is itself a product. a and b are taken with
their floating-point error bounds (γ_n = nu/(1 − nu), u = 2⁻⁵³) so that a²/b stays below the exact value.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy import linalg

from mmopt._base.guards import Unsupported
from mmopt.dense.exact_answers import gamma
from mmopt.dense.support import support_tolerance, unmeasured_cells
from mmopt.structured import _rows as rw
from mmopt.structured import algebra as alg
from mmopt.structured import factors as fc

SWEEPS = 8           # sweeps of the lower bound's block ascent (it stops earlier when a sweep gains < 1e-9)
LOWER_WORK = 4 * 10**9  # flops of the lower-bound refinement beyond which only its starting point is used


def factor_trace(Wf, Af, cache, caller: str) -> float:
    """tr(Gᵢ Xᵢ⁺) = ‖BᵀF‖², after the support check ‖NᵀF‖² ≤ tol·‖F‖², and refusing a value below the
    factor's SVD bound (Thm 5.26: a numerically singular factor, never an answer)."""
    inv, F = cache.get(fc.strategy_inverse, Af), cache.get(fc.workload_root, Wf)
    check_supports(Wf, Af, cache, caller)
    t = float(np.sum((inv.B.T @ F) ** 2))
    s2 = float(np.sum(Af.matrix**2, axis=0).max())  # Δ₂(Aᵢ)²; Thm 5.26 holds for Δ₂, hence for Δ₁
    floor = float(np.sum(cache.get(fc.singular_values, Wf))) ** 2 / Wf.domain_size
    if not np.isfinite(t) or t < 0 or s2 * t < floor * (1 - 1e-9):
        raise ValueError(f"{caller}: the computed error of strategy factor '{Af.name}' on '{Wf.name}' is {t!r}, "
                         f"below its SVD bound {floor / s2:.6g} or not finite: the factor is numerically "
                         "singular. Use a better-conditioned factor.")
    return t


def check_supports(Wf, Af, cache, caller: str) -> None:
    """Refuse (:class:`mmopt.Unsupported`) a workload factor that factor Aᵢ does not support (:func:`supports`):
    the one refusal of the error and of the per-query variances."""
    if not supports(Wf, Af, cache):
        inv = cache.get(fc.strategy_inverse, Af)
        raise Unsupported(f"{caller}: strategy factor '{Af.name}' (rank {inv.rank} of {Af.domain_size}) does not "
                          f"support workload factor '{Wf.name}': part of its Gram lies outside the row space. "
                          "Add rows to that factor (e.g. a scaled identity).")


def supports(Wf, Af, cache) -> bool:
    """Whether factor Aᵢ supports Wᵢ: the Gram's share on Aᵢ's null space within round-off and, where the root is
    Wᵢ's own rows, each row's (the dense rule, :func:`mmopt.dense.support.unsupported`: a light row beside heavy
    ones was judged by the Gram's share alone)."""
    inv, F = cache.get(fc.strategy_inverse, Af), cache.get(fc.workload_root, Wf)
    if not inv.null.shape[1]:
        return True
    if Af.matrix is not None and np.any(unmeasured_cells(Af.matrix, np.diag(Wf.mean_gram))):  # G's own diagonal:
        # an eigen-root's F Fᵀ puts round-off on cells no query uses; a cell Aᵢ never measures that Wᵢ uses,
        return False  # however lightly, is off Aᵢ's row space (the dense rule's exact case)
    return _piece_supported(F, inv, Wf, cache)  # the whole root: its share, and each row's


def _piece_supported(F, inv, Wf, cache) -> bool:
    """Whether F (Wf's root, or a piece of it in :func:`mixed_upper`) lies in a strategy factor's row space
    (``inv``): its Gram's share and, where the root's columns are Wf's rows, each column's part off it over that
    row's own ‖r‖². mixed_upper took a piece on the share alone: (1, −2, 1) beside 10⁷·(1, 0, −1) passed, and a
    finite bracket stood for a workload with queries of infinite variance (a helper's audit)."""
    if not inv.null.shape[1]:
        return True
    off = np.sum((inv.null.T @ F) ** 2, axis=0)
    if float(off.sum()) > support_tolerance(F.shape[0]) * float(np.sum(F * F)):
        return False
    root = cache.get(fc.workload_root, Wf)
    return not (fc.root_is_rows(Wf) and rw.columns_off(off, np.sum(root * root, axis=0), F.shape[0]))


def block_term(t, block, cache, caller) -> tuple[float, float, float]:
    """(unit error, max variance found, its upper) of workload term t under block θ⊗Aᵢ alone (exact)."""
    theta2 = block.weight**2
    unit = t.weight**2 * math.prod(factor_trace(Wf, Af, cache, caller)
                                   for Wf, Af in zip(t.factors, block.factors, strict=True))
    found = [fc.query_terms_max(Wf, cache.get(fc.strategy_inverse, Af).profile)
             for Wf, Af in zip(t.factors, block.factors, strict=True)]
    mx = None if any(f[0] is None for f in found) else t.weight**2 * math.prod(f[0] for f in found)
    up = t.weight**2 * math.prod(f[1] for f in found)
    with np.errstate(over="ignore"):  # θ² ≥ 2⁻¹⁰⁰² after normalised(); a ratio past float64 is inf, never ranked
        return tuple(None if x is None else float(np.divide(x, theta2)) for x in (unit, mx, up))


def algebra_terms(workload, terms, co, cache):
    """Per workload term: (2^d projection traces tr(w²G_k Q_T), and the sub-union's 1/λ_T, 0 off its range)."""
    shape = workload.shape
    lam = sum(alg.product_spectrum(cs, shape, t.weight**2) for t, cs in zip(terms, co, strict=True))
    pos = lam > 0
    inv = np.where(pos, 1.0 / np.where(pos, lam, 1.0), 0.0)
    traces = [alg.projection_traces([cache.get(fc.workload_gram, f) for f in t.factors], shape, t.weight**2)
              for t in workload.terms]
    return traces, inv, pos


def term_lower(t, strategy, start, cache, *, sweeps: int = SWEEPS) -> float:
    """A certified lower bound on w²·tr(G_t X⁺) (module docstring), from Nᵢ = ``start[i]``·Fᵢ."""
    roots = [cache.get(fc.workload_root, f) for f in t.factors]
    blocks = strategy.terms
    d = len(roots)
    # distinct strategy factors per attribute (blocks share factor objects), and each block's index into them
    distinct, where = [], np.zeros((len(blocks), d), dtype=int)
    for i in range(d):
        seen: dict[int, int] = {}
        for j, b in enumerate(blocks):
            where[j, i] = seen.setdefault(id(b.factors[i]), len(seen))
        distinct.append([None] * len(seen))
        for j, b in enumerate(blocks):
            distinct[i][where[j, i]] = b.factors[i].matrix
    work = sum(sum(A.shape[0] * A.shape[1] * F.shape[1] for A in distinct[i]) + F.shape[0] ** 3
               for i, F in enumerate(roots))
    if work * sweeps > LOWER_WORK:  # per sweep ~ Σᵢ (Σ_distinct pᵢnᵢrᵢ + nᵢ³): keep only the starting point
        sweeps = 0
    N = [M @ F for M, F in zip(start, roots, strict=True)]
    theta2 = np.array([b.weight**2 for b in blocks])

    def parts(i):  # (a_i lower, per distinct factor: ‖A N_i‖² upper)
        n = N[i] / max(float(np.max(np.abs(N[i]))), np.finfo(float).tiny)  # the ratio is scale-free
        N[i] = n
        F = roots[i]
        a = float(np.sum(n * F)) - gamma(n.size) * float(np.sum(np.abs(n * F)))
        nn = math.sqrt(float(np.sum(n * n))) * (1 + gamma(n.size))
        s = []
        for A in distinct[i]:
            s2 = float(np.sum((A @ n) ** 2))
            err = gamma(A.shape[1]) * math.sqrt(float(np.sum(A * A))) * (1 + gamma(A.size)) * nn
            s.append((math.sqrt(s2 * (1 + gamma(A.shape[0] * n.shape[1]))) + err) ** 2)
        return a, np.array(s)

    table = [parts(i) for i in range(d)]

    def value():
        if any(x[0] <= 0 for x in table):  # ⟨Nᵢ, Fᵢ⟩ not certified positive: no information
            return 0.0
        a = math.prod(x[0] for x in table)
        b = float(theta2 @ np.prod([table[i][1][where[:, i]] for i in range(d)], axis=0))
        return t.weight**2 * a * a / b * (1 - gamma(4 * d + 2 * len(blocks) + 16)) if b > 0 else 0.0

    best = value()
    for _ in range(sweeps):
        before = best
        for i in range(d):
            others = np.prod([table[j][1][where[:, j]] for j in range(d) if j != i] or [np.ones(len(blocks))],
                             axis=0)
            c = np.bincount(where[:, i], weights=theta2 * others, minlength=len(distinct[i]))
            H = sum(ck * (A.T @ A) for ck, A in zip(c / max(c.max(), np.finfo(float).tiny), distinct[i],
                                                       strict=True) if ck > 0)
            lam, V = linalg.eigh(H, check_finite=False, driver="evd")
            keep = lam > H.shape[0] * np.finfo(float).eps * max(float(lam[-1]), 0.0)
            N[i] = (V[:, keep] / lam[keep]) @ (V[:, keep].T @ roots[i])
            table[i] = parts(i)
            best = max(best, value())  # any N gives a valid bound: keep the largest seen
        if best - before <= 1e-9 * best:
            break
    return best


def _split_roots(Wf, cache) -> list[np.ndarray]:
    """Fᵢ split by P₁ = 11ᵀ/n and P₀ = I − P₁ (the pieces that are not zero); [Fᵢ] when only one is."""
    F = cache.get(fc.workload_root, Wf)
    mean = F.sum(axis=0, keepdims=True) / F.shape[0]
    pieces = [F - mean, np.broadcast_to(mean, F.shape).copy()]
    norms = [float(np.sum(x * x)) for x in pieces]
    keep = [x for x, v in zip(pieces, norms, strict=True) if v > 1e-12 * float(np.sum(F * F))]
    return keep if len(keep) > 1 else [F]


def mixed_upper(t, strategy, cache, memo: dict | None = None, *, max_pieces: int = 64) -> float | None:
    """w²‖R‖² for an unbiased linear estimate R y of term t that mixes every block (Gauss–Markov: the
    least-squares estimate's error tr(G_t X⁺) is at most any unbiased one's), or None.

    Each factor's root is split Fᵢ = P₀Fᵢ + P₁Fᵢ, so F = Σ_p F_p over the pieces p (products). Piece p is
    estimated from block l by F_pᵀ(θ_lA⁽ˡ⁾)⁺ wherever block l supports it, with weights α_pl, Σ_l α_pl = 1
    (unbiased). Blocks have independent noise, so the error is Σ_l α_lᵀC_lα_l, C_l[p, q] =
    θ_l⁻²∏ᵢ tr(F_{pᵢ}ᵀXᵢ⁽ˡ⁾⁺F_{qᵢ}); the α minimising it is α_l = C_l⁺S⁻¹1, S = Σ_l C_l⁺ (KKT), and the
    bound is evaluated at the α actually used (any α with Σ_l α_l = 1 gives a valid bound).
    """
    splits = [_split_roots(Wf, cache) for Wf in t.factors]
    if math.prod(len(x) for x in splits) > max_pieces:
        splits = [[cache.get(fc.workload_root, Wf)] for Wf in t.factors]
    pieces = list(itertools.product(*[range(len(x)) for x in splits]))
    P, d = len(pieces), len(splits)
    Cs, masks = [], []
    memo = {} if memo is None else memo  # (strategy factor, workload factor, split?) → its table: shared
    for b in strategy.terms:
        per = []  # per attribute: the (kᵢ × kᵢ) table tr(F_aᵀ Xᵢ⁺ F_b) and which pieces it supports
        for i, Af in enumerate(b.factors):
            key = (id(Af), id(t.factors[i]), len(splits[i]))
            if key not in memo:
                inv = cache.get(fc.strategy_inverse, Af)
                Y = [inv.B.T @ F for F in splits[i]]
                memo[key] = (np.array([[float(np.sum(y * z)) for z in Y] for y in Y]),
                             [_piece_supported(F, inv, t.factors[i], cache) for F in splits[i]], Af, t.factors[i])
            per.append(memo[key][:2])
        mask = np.array([all(per[i][1][p[i]] for i in range(d)) for p in pieces])
        C = np.ones((P, P)) / b.weight**2
        for i in range(d):
            idx = np.array([p[i] for p in pieces])
            C = C * per[i][0][np.ix_(idx, idx)]
        C[~mask] = 0.0
        C[:, ~mask] = 0.0
        Cs.append(C)
        masks.append(mask)
    if not np.all(np.any(masks, axis=0)):
        return None
    pinvs = [linalg.pinvh(C) if m.any() else np.zeros((P, P)) for C, m in zip(Cs, masks, strict=True)]
    try:
        mu = linalg.solve(sum(pinvs), np.ones(P), assume_a="sym")
    except (linalg.LinAlgError, ValueError):
        return None
    alpha = np.array([np.where(m, Cp @ mu, 0.0) for Cp, m in zip(pinvs, masks, strict=True)])  # (L, P)
    for p in range(P):  # Σ_l α_pl = 1 exactly: the largest share takes the remainder
        j = int(np.argmax(np.where(np.array([m[p] for m in masks]), np.abs(alpha[:, p]), -1.0)))
        alpha[j, p] = 1.0 - (alpha[:, p].sum() - alpha[j, p])
    value = sum(float(a @ C @ a) for a, C in zip(alpha, Cs, strict=True))
    return t.weight**2 * value * (1 + gamma(8 * P * d + 16)) if math.isfinite(value) and value > 0 else None


def bracket(workload, strategy, cache, caller, *, algebra_co):
    """(unit upper, max variance found or None, its upper, unit lower) for a union no exact path covers.

    ``algebra_co`` (per strategy term, its αI + βJ coefficients or None) selects the algebra sub-union.
    Raises ValueError naming the first workload term that no block (nor the algebra sub-union) supports.
    """
    blocks = strategy.terms
    in_alg = [j for j, co in enumerate(algebra_co) if co is not None]
    alg_parts = None
    if len(in_alg) > 1 and len(workload.shape) <= 16:
        alg_parts = algebra_terms(workload, [blocks[j] for j in in_alg], [algebra_co[j] for j in in_alg], cache)
    unit_up = unit_low = mx = up = 0.0
    found_any, memo = False, {}  # memo keeps the factors it is keyed by (their ids) alive
    for k, t in enumerate(workload.terms):
        best = None  # (unit, mx found or None, up, block index or None)
        for j, b in enumerate(blocks):
            if all(supports(Wf, Af, cache) for Wf, Af in zip(t.factors, b.factors, strict=True)):
                u, m, p = block_term(t, b, cache, caller)
                if best is None or u < best[0]:
                    best = (u, m, p, j)
        if alg_parts is not None:
            traces, inv, pos = alg_parts
            tr = traces[k]
            # the algebra path's own rule, each query too: G's share alone let a light query through (as above)
            if not rw.term_off_range(t, tr, pos, workload.shape, cache):
                u = float(tr[pos] @ inv[pos])
                if best is None or u < best[0]:
                    best = (u, None, rw.algebra_row_upper(t, inv, workload.shape, cache, u)[1], None)
        mixed = mixed_upper(t, strategy, cache, memo) if len(blocks) > 1 else None
        if mixed is not None and (best is None or mixed < best[0]):
            best = (mixed, best[1] if best else None, best[2] if best else math.inf, best[3] if best else None)
        if best is None:
            raise ValueError(f"{caller}: no exact method applies to strategy '{strategy.name}' at N = "
                             f"{strategy.domain_size:,} cells, and no block of it (nor its marginals blocks "
                             f"together) supports term {k} of workload '{workload.name}' on its own, so no "
                             "certified upper bound is available. Add a block that supports every term (e.g. "
                             "the identity), or evaluate at N <= dense_limit.")
        unit_up += best[0]
        up = max(up, best[2])
        j = best[3]
        if j is not None:
            start = [cache.get(fc.strategy_inverse, Af).profile for Af in blocks[j].factors]
            att = attained(t, blocks[j], strategy, cache)
            if att is not None:
                mx, found_any = max(mx, att), True
        else:  # start from the identity: Nᵢ = Fᵢ
            start = [np.eye(f.domain_size) for f in t.factors]
        low = term_lower(t, strategy, start, cache)
        if low > best[0] * (1 + 1e-8):
            raise ValueError(f"{caller}: the certified lower value {low!r} of term {k} exceeds its upper value "
                             f"{best[0]!r} under strategy '{strategy.name}': numerical failure. Check the "
                             "strategy's conditioning.")
        unit_low += min(low, best[0])
    return unit_up, (mx if found_any else None), up, unit_low


def attained(t, block, strategy, cache) -> float | None:
    """(zᵀq)²/(zᵀXz) ≤ qᵀX⁺q for term t's worst query q under ``block``, z = ⊗ Xᵢ⁺qᵢ (a real query's
    variance is at least this)."""
    zs, qs = [], []
    for Wf, Af in zip(t.factors, block.factors, strict=True):
        M = cache.get(fc.strategy_inverse, Af).profile
        r = fc.query_terms_max(Wf, M)[2]
        q = None if r is None else fc.factor_row(Wf, r)
        if q is None:
            return None
        qs.append(q)
        zs.append(M @ q)
    zq = math.prod(float(z @ q) for z, q in zip(zs, qs, strict=True))
    zXz = sum(s.weight**2 * math.prod(float(z @ (f.gram @ z)) for z, f in zip(zs, s.factors, strict=True))
              for s in strategy.terms)
    return None if zXz <= 0 else t.weight**2 * zq**2 / zXz
