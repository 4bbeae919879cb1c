"""Shared pieces of the product-domain strategy searches: argument checks, seeds, per-attribute Gram tables.

Notation: see README. A workload W = Σ_j w_j ⊗ᵢ Wᵢ⁽ʲ⁾ has Gram G = Σ_j w_j² ⊗ᵢ Gᵢ⁽ʲ⁾. Many terms share a factor
(every census term has T on most attributes), so each attribute keeps its *distinct* factor Grams once and
every term points at them: a :class:`GramTable`. A product strategy ⊗ᵢ Aᵢ with Δ(Aᵢ) = 1 then has unit error
Σ_j w_j² ∏ᵢ tr(Gᵢ⁽ʲ⁾ Xᵢ⁺) (Li et al., PODS 2010, Prop. 4.4; McKenna et al., PVLDB 2018, §4.2), and the traces
are taken as sums of squares ‖BᵀF‖² (X⁺ = BBᵀ, G = FFᵀ) as in :mod:`mmopt.structured.factors`.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

import numpy as np

from mmopt._base import guards as g
from mmopt._base import validation as v
from mmopt._base.parallel import seed_children
from mmopt.dense._strategy_core import NORMS, Strategy, column_norm_parts, max_column_norm
from mmopt.dense.support import support_tolerance
from mmopt.structured import factors as fc
from mmopt.structured.workloads import ImplicitWorkload


def check_common(caller: str, workload, norm, restarts, seed, max_iterations, tol, verbose, *,
                 default_iterations: int, default_tol: float):
    """Validate the arguments shared by solve_kron and solve_union; returns (norm, restarts, seeds, iters, tol)."""
    if not isinstance(workload, ImplicitWorkload):
        raise TypeError(f"The 'workload' parameter of {caller} must be an ImplicitWorkload (build it with "
                        f"mmopt.structured.kron / union, or mmopt.workload.sf1() etc.). Got {type(workload).__name__}.")
    norm = v.check_choice(norm, name="norm", caller=caller, choices=NORMS)
    restarts = check_restarts(restarts, workload, caller)
    iters = default_iterations if max_iterations is None else v.check_int(
        max_iterations, name="max_iterations", caller=caller, low=1)
    tol = default_tol if tol is None else v.check_real(tol, name="tol", caller=caller, low=0.0, high=1.0,
                                                       low_open=True, high_open=True)
    v.check_bool(verbose, name="verbose", caller=caller)
    return norm, restarts, spawn(seed, restarts, caller), iters, tol


# A restart is at least one sweep over the attributes, each solving one factor: an L-BFGS search whose every
# step factorises an nᵢ×nᵢ matrix (~nᵢ³ operations). The work of a restart is counted as one sweep of one
# factorisation per attribute plus the Python overhead of a factor solve (RESTART_OVERHEAD): a lower estimate
# (a search may take up to max_iterations sweeps of many steps each), so only requests that cannot finish in
# minutes even at that cost are refused, never the defaults on a real workload (5 attributes of 1,000
# cells allow ~60 restarts).
RESTART_OVERHEAD = 10**6  # ~1 ms: the floor of one factor solve on a tiny attribute


def check_restarts(restarts, workload, caller: str) -> int:
    """``restarts`` as an int ≥ 1 whose work, restarts × Σᵢ (nᵢ³ + RESTART_OVERHEAD), fits
    :data:`mmopt._base.guards.MAX_WORK` (:func:`mmopt._base.guards.check_work`); refused up front otherwise."""
    per = sum(n**3 + RESTART_OVERHEAD for n in workload.shape)
    return g.check_work(restarts, name="restarts", caller=caller, per_item=per, item="restarts",
                        remedy="Use fewer restarts (3 is the default; the best of a few is usually as good), or "
                             "raise mmopt._base.guards.MAX_WORK for a deliberate long search.")


def spawn(seed, k: int, caller: str) -> list[np.random.SeedSequence]:
    """``numpy.random.SeedSequence(seed).spawn(k)`` by :func:`mmopt._base.parallel.seed_children`: ``seed`` None, an
    int ≥ 0, a SeedSequence (a parent's child, copied so that spawning leaves it as it was) or a Generator (the
    documented seeds of mmopt.optimize; a Generator was refused here)."""
    return seed_children(seed, k, caller=caller)


def _gram_key(G: np.ndarray) -> bytes:
    return hashlib.sha1(np.ascontiguousarray(G).tobytes()).digest() + repr(G.shape).encode()


@dataclass(frozen=True, eq=False)
class GramTable:
    """Distinct factor Grams per attribute and, per term, which one it uses.

    Attributes
    ----------
    shape : tuple of int
    weights2 : ndarray (terms,)
        w_j².
    grams : tuple (per attribute) of tuple of ndarray
        The distinct full Grams Gᵢ = WᵢᵀWᵢ (not G/m).
    roots : same layout
        F with F Fᵀ = Gᵢ (:func:`mmopt.structured.factors.workload_root`).
    floors : same layout, floats
        The factor SVD bounds (Σσ(Wᵢ))²/nᵢ: Δ₂(A)²·tr(Gᵢ X⁺) below one is a numerical failure (Thm 5.26).
    index : ndarray (terms, d) of int
        ``grams[i][index[j, i]]`` is term j's Gram on attribute i.
    """

    shape: tuple[int, ...]
    weights2: np.ndarray = field(repr=False)
    grams: tuple = field(repr=False)
    roots: tuple = field(repr=False)
    floors: tuple = field(repr=False)
    index: np.ndarray = field(repr=False)

    @property
    def d(self) -> int:
        return len(self.shape)

    def combined(self, i: int, coef: np.ndarray) -> np.ndarray:
        """Σ_j coef_j Gᵢ⁽ʲ⁾, summing the coefficients of terms that share a Gram first."""
        per = np.bincount(self.index[:, i], weights=coef, minlength=len(self.grams[i]))
        return sum(c * G for c, G in zip(per, self.grams[i], strict=True) if c != 0.0)

    def objective(self, traces: np.ndarray) -> float:
        """Σ_j w_j² ∏ᵢ traces[j, i] (unit error of the product of Δ-normalised factors)."""
        return float(self.weights2 @ np.prod(traces, axis=1))

    def others(self, traces: np.ndarray, i: int) -> np.ndarray:
        """c_j = w_j² ∏_{i'≠i} traces[j, i']: the weight of term j in factor i's subproblem."""
        return self.weights2 * np.prod(np.delete(traces, i, axis=1), axis=1)


def gram_table(workload: ImplicitWorkload) -> GramTable:
    d = len(workload.shape)
    grams, roots, keys = [[] for _ in range(d)], [[] for _ in range(d)], [{} for _ in range(d)]
    index = np.zeros((len(workload.terms), d), dtype=int)
    cache = fc.Cache()  # terms share factor objects: one root per object
    for j, t in enumerate(workload.terms):
        for i, f in enumerate(t.factors):
            F = cache.get(fc.workload_root, f)
            G = F @ F.T
            k = keys[i].setdefault(_gram_key(G), len(grams[i]))
            if k == len(grams[i]):
                grams[i].append(G)
                roots[i].append(F)
            index[j, i] = k
    w2 = np.array([t.weight**2 for t in workload.terms])
    # The floors are computed exactly as mmopt.structured.evaluate computes them, so that every factor accepted
    # here is accepted there (its final re-evaluation).
    floors = [[0.0] * len(gs) for gs in grams]
    for j, t in enumerate(workload.terms):
        for i, f in enumerate(t.factors):
            floors[i][index[j, i]] = float(np.sum(cache.get(fc.singular_values, f))) ** 2 / f.domain_size
    return GramTable(tuple(workload.shape), w2, tuple(map(tuple, grams)), tuple(map(tuple, roots)),
                     tuple(map(tuple, floors)), index)


def factor_traces(A: np.ndarray, roots, floors) -> np.ndarray:
    """tr(G X⁺) = ‖BᵀF‖² for each root F (SVD rank rule of mmopt.error), as mmopt.structured.evaluate takes it.

    +∞ where A does not support G, and NaN where the value cannot be right (not finite, or Δ₂²·tr below the
    factor's SVD bound: a numerically singular A; or, at an extreme scale of A, a trace beyond float64's normal
    range), so that callers can skip such a factor.
    """
    # Δ₂(A)²·tr(G X⁺) is scale-invariant, so at an extreme scale of A (|e| > 100) both are taken of A·2⁻ᵉ
    # (exact), where neither Δ₂² nor tr over- or underflows, and the traces scaled back by 4⁻ᵉ; otherwise
    # A is used as given.
    c, k = column_norm_parts(A, "l2")
    e = k // 2 if abs(k // 2) > 100 else 0
    As = A if e == 0 else np.ldexp(A, -e)
    inv = fc.strategy_inverse(Strategy(As, "factor"))
    s2 = math.ldexp(float(np.max(c)), k - 2 * e)
    out = np.empty(len(roots))
    for j, (F, floor) in enumerate(zip(roots, floors, strict=True)):
        total = float(np.sum(F * F))
        leak = float(np.sum((inv.null.T @ F) ** 2)) if inv.null.shape[1] else 0.0
        t = float(np.sum((inv.B.T @ F) ** 2))
        if leak > support_tolerance(F.shape[0]) * total:
            out[j] = np.inf
        else:
            out[j] = t if np.isfinite(t) and s2 * t >= floor * (1 - 1e-9) else np.nan
    if e:
        with np.errstate(over="ignore", under="ignore"):
            back = np.ldexp(out, -2 * e)
        # a trace that is not a normal float at A's own scale cannot be returned right: NaN, as above (never a
        # 0 that would look like a perfect factor, or an inf that would read as "unsupported")
        ok = ~np.isfinite(out) | (np.isfinite(back) & (back >= np.finfo(float).tiny))
        out = np.where(ok, back, np.nan)
    return out


def column_sensitivity(A: np.ndarray, norm: str) -> float:
    """Δ of one factor: the largest column L1 norm, or L2 norm — the one scale-safe computation
    (:func:`mmopt.dense._strategy_core.max_column_norm`): exact to rounding at any scale, ValueError if not normal."""
    return max_column_norm(A, norm, what="a factor", caller="column_sensitivity")


def normalised(A: np.ndarray, norm: str) -> np.ndarray:
    """A / Δ(A): error is scale-invariant, and with every Δ(Aᵢ) = 1 the product has Δ = 1."""
    return A / column_sensitivity(A, norm)


def fmt(x: float) -> str:
    return f"{x:,.6g}" if math.isfinite(x) else str(x)


def check_shares(values, name: str, caller: str) -> np.ndarray:
    """Per-term errors or costs for a budget split: finite, ≥ 0, not all 0 (negative ones gave negative shares)."""
    E = np.asarray(values, dtype=float)
    if E.ndim != 1 or E.size == 0 or not np.all(np.isfinite(E)) or np.any(E < 0) or not E.sum() > 0:
        raise ValueError(f"The '{name}' parameter of {caller} must be a non-empty 1-D array of finite numbers ≥ 0, "
                         f"not all 0. Got {np.asarray(values)!r:.80} instead.")
    return E
