"""An implicit release's strategy answers A x, with a proven bound on their float64 rounding charged in d_in.

Notation: see README and :mod:`mmopt.dense.exact_answers`, whose argument this follows. OpenDP's measurement adds
noise calibrated to d_in ≥ ‖ŷ(x) − ŷ(x′)‖_p for the *computed* answers ŷ. A = [θ₁A⁽¹⁾; θ₂A⁽²⁾; …], each block a
Kronecker product ⊗ᵢ Aᵢ⁽ᵏ⁾ applied factor by factor (mode products). Plain BLAS mode products were outside the
proof (the 10⁻⁷ slack of Δ's upward rounding absorbed them "at moderate counts", not provably). Here every block's
error obeys, entrywise and for every histogram x of at most N records,

    |ŷ − θ·(⊗ᵢAᵢ) x| ≤ c·|θ|·(⊗ᵢ|Aᵢ|) x + η,

with c and η computed from the strategy alone (:func:`plan`), never from x:

* a factor with at most one non-zero per row, ±1 (a selection), and a factor with integer entries applied while
  every partial sum stays an integer below 2⁵³ (N·∏ max|Aᵢ| < 2⁵³ over the factors applied so far: each partial
  sum is at most ∏ max|Aᵢ|·‖x‖₁) are applied by BLAS *exactly*, first (mode products commute);
* every other factor by compensated mode products (Ogita, Rump & Oishi, "Accurate sum and dot product", SIAM J.
  Sci. Comput. 26, 2005, Dot2: error-free TwoProduct (Dekker's split) and TwoSum, the errors summed in float64),
  keeping the result as an unevaluated pair hi + lo: each mode adds at most 4γ²_{n+1}·(1 + ρ) to the pair's
  relative error ρ (γ_n = n·u/(1 − n·u), u = 2⁻⁵³; n the factor's columns), about 10⁻²⁸, where one BLAS mode
  product adds γ_n (n·10⁻¹⁶);
* the weight θ and the pair are multiplied and rounded once at the end (u): c = ρ + u + 8u², and c = 0 when every
  mode is exact and θ a power of two;
* products that underflow are not error-free: each is off by < 2⁻¹⁰⁷⁴, charged as η (propagated through the later
  factors by their largest absolute row sums).

Since x ≥ 0 and a stacked Kronecker column of |A| has the norm of A's (``mmopt.structured.strategies``),
‖(⊗|Aᵢ|)x‖_p ≤ ‖x‖₁·Δ_p, and for neighbours x, x′ (‖x‖₁, ‖x′‖₁ ≤ N + 1)

    ‖ŷ(x) − ŷ(x′)‖_p ≤ Δ_p·(1 + c·(2N + 1)) + 2·p_rows^{1/p}·η      (:func:`charged_sensitivity`),

c·(2N + 1) ≈ 9.5·10⁻⁷ at N = 2³² (:data:`mmopt.dense.exact_answers.MAX_RECORDS`), as the dense release's. The
intermediates stay below N·∏ max|Aᵢ| over the factors applied so far (θ last), refused from the strategy alone
past 2⁹⁹⁰, as θ is (no Dekker split may overflow; a refusal that depended on the counts would leak them). Cost: a
compensated mode product is n elementwise passes of ~16 operations over its output: about 100× a BLAS product
(``benchmarks/bench_charged_answers.py``: 1.9 CPU s at 128×128×64 cells and 15 s at 256×256×64 with two dense
factors, against 0.02 s and 0.12 s; integer factors cost what BLAS does). Error-free BLAS products (Ozaki's
splitting) would be faster; not done.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mmopt.dense.exact_answers import (
    MAX_RECORDS,
    _abs_max,
    cover_roundings,
    dekker_split,
    gamma,
    two_product,
    two_sum,
)
from mmopt.dense.exact_answers import UNIT_ROUNDOFF as _U

__all__ = ["AnswerPlan", "answers", "charged_sensitivity", "check_magnitudes", "compensated_gather",
           "compensated_mode", "final_charge", "mode_charge", "plan", "weighted_entries"]

_TINY = 2.0**-1074
_MAX_MAGNITUDE = 2.0**990  # below it no Dekker split overflows (2⁹⁹⁵) and no sum of the pair does
_CHUNK = 1 << 16  # output entries per pass of a compensated mode product (~20 temporaries of this size)


@dataclass(frozen=True)
class AnswerPlan:
    """How :func:`answers` computes each block, and the bound it proves (module docstring).

    Attributes
    ----------
    steps : tuple of tuple of (int, str)
        Per block, its modes in the order applied: (factor index, "exact" | "compensated").
    blocks : tuple of (float, float)
        Per block, its (c, η).
    relative : float
        c, the largest over blocks.
    absolute : float
        η, the largest over blocks.
    """

    steps: tuple
    blocks: tuple
    relative: float
    absolute: float


def _kind(M: np.ndarray, bound: float | None) -> tuple[str, float | None]:
    """("exact", the integer bound after it) for a factor BLAS applies exactly, else ("compensated", None)."""
    nonzero = M != 0
    if np.all(nonzero.sum(axis=1) <= 1) and np.all(np.abs(M[nonzero]) == 1.0):
        return "exact", bound  # a selection: each output is one input, or its negation, or 0
    if bound is not None and np.all(M == np.round(M)):
        grown = bound * _abs_max(M)
        if grown < 2.0**53:  # every partial sum an integer of at most that size
            return "exact", grown
    return "compensated", None


def check_magnitudes(mats, order, weight: float, records: int = MAX_RECORDS) -> None:
    """Refuse, from the strategy alone, factors or a weight whose products could overflow a Dekker split (2⁹⁹⁵) at
    some histogram of the domain: the intermediates are bounded by N·∏ max|Aᵢ| over the factors applied so far
    (θ comes last). A refusal that depended on the counts would tell neighbours apart."""
    running = float(records)
    for i in order:
        top = _abs_max(mats[i])
        running *= top
        if not (top < _MAX_MAGNITUDE and running < _MAX_MAGNITUDE):
            raise ValueError("release: the strategy's factors are too large for A x to be computed with a bounded "
                             "rounding at every histogram of up to MAX_RECORDS records (an intermediate product could "
                             "overflow). Rescale the factors (A and cA have the same error).")
    if not (abs(weight) < _MAX_MAGNITUDE and running * abs(weight) < _MAX_MAGNITUDE):
        raise ValueError(f"release: a term's weight ({weight:.3g}) is too large for A x to be computed with a bounded "
                         "rounding at every histogram of up to MAX_RECORDS records. Rescale the strategy (A and cA "
                         "have the same error).")


def plan(strategy, records: int = MAX_RECORDS) -> AnswerPlan:
    """The :class:`AnswerPlan` of an ImplicitStrategy, from the strategy alone (the charge must not see the data).

    >>> import numpy as np, mmopt
    >>> from mmopt import strategy as st
    >>> p = plan(st.kron(st.hierarchical(8), st.identity(4)))       # integer factors: exact, nothing charged
    >>> p.relative, p.absolute
    (0.0, 0.0)
    >>> p = plan(mmopt.structured.kron_strategy(np.array([[0.5, 0.3], [0.1, 0.7]]), np.eye(3)))
    >>> 1.1e-16 < p.relative < 1.2e-16
    True
    """
    steps, blocks = [], []
    for t in strategy.terms:
        mats = [f.matrix for f in t.factors]
        bound, exact, later = float(records), [], []
        for i, M in enumerate(mats):  # the exact modes first (mode products commute), in order
            kind, grown = _kind(M, bound)
            if kind == "exact":
                exact.append(i)
                bound = grown
            else:
                later.append(i)
        check_magnitudes(mats, exact + later, t.weight, records)
        rho, eta = 0.0, 0.0
        for i in later:  # compensated: a selection is exact anywhere, so never among them
            rho, eta = mode_charge(mats[i], rho, eta)
        if not later and math.frexp(t.weight)[0] == 0.5:
            c = 0.0  # x ↦ θ·(exact integers): exact unless the product underflows
            eta_t = 0.0 if abs(t.weight) >= 2.0**-960 else _TINY
        else:
            c, eta_t = final_charge(rho, abs(t.weight) * eta)
        steps.append(tuple([(i, "exact") for i in exact] + [(i, "compensated") for i in later]))
        blocks.append((c, eta_t))
    return AnswerPlan(tuple(steps), tuple(blocks), max(c for c, _ in blocks), max(e for _, e in blocks))


def mode_charge(M: np.ndarray, rho: float, eta: float) -> tuple[float, float]:
    """(ρ, η) after a compensated mode product by M (n columns; or, given as :func:`compensated_gather`'s values,
    its m terms a row): ρ + 4γ²_{n+1}(1 + ρ), and the earlier modes' underflow carried through M (its largest
    absolute row sum) plus its own, (2n + 2)·2⁻¹⁰⁷⁰ (module docstring)."""
    n = M.shape[1]
    rows = float(np.abs(M).sum(axis=1).max(initial=0.0))
    return rho + 4.0 * gamma(n + 1) ** 2 * (1.0 + rho), (1.0 + 2 * _U) * rows * eta + (2 * n + 2) * 2.0**-1070


def final_charge(rho: float, eta: float) -> tuple[float, float]:
    """(c, η) once the pair is rounded to one float (times a weight already in ``eta``): c = ρ + u + 8u², its own
    float sums and u·ρ covered by a factor 1 + 10⁻⁶; the final products' underflow 4·2⁻¹⁰⁷⁴."""
    return (rho + _U + 8 * _U * _U) * (1.0 + 1e-6), (1.0 + 2 * _U) * eta + 4 * _TINY


def charged_sensitivity(sensitivity: float, c: float, eta: float, norm: str, n_rows: int,
                        records: int = MAX_RECORDS) -> float:
    """d_in for the computed answers: Δ_p·(1 + c·(2N + 1)) + 2·n_rows^{1/p}·η rounded upwards (module docstring);
    ``sensitivity`` itself when nothing is charged. (c, η): a plan's ``relative`` and ``absolute``.

    >>> from mmopt import strategy as st
    >>> p = plan(st.kron(st.identity(3), st.hierarchical(2)))
    >>> charged_sensitivity(2.0, p.relative, p.absolute, "l1", 9)
    2.0
    """
    if c == 0.0 and eta == 0.0:
        return sensitivity
    spread = eta * (n_rows if norm == "l1" else math.sqrt(n_rows))
    charged = sensitivity * (1.0 + c * (2.0 * records + 1.0)) + 2.0 * spread
    return cover_roundings(charged, 4)  # this line's own roundings


def answers(strategy, x: np.ndarray, answer_plan: AnswerPlan) -> np.ndarray:
    """A x (flat, blocks in order) as ``answer_plan`` computes it, for x a histogram shaped like the domain (whole
    counts ≥ 0, at most the plan's records; the caller checks: :func:`mmopt.dense.exact_answers.check_histogram`)."""
    parts = []
    for t, order in zip(strategy.terms, answer_plan.steps, strict=True):
        hi, lo = np.asarray(x, dtype=float), None
        for i, kind in order:
            M = t.factors[i].matrix
            if kind == "exact":
                hi = _mode(M, hi, i)  # exact modes come first: there is no lo yet
            else:
                hi, lo = compensated_mode(M, hi, lo, i)
        parts.append(_weighted(t.weight, hi, lo).ravel())
    return np.concatenate(parts)


def _mode(M: np.ndarray, T: np.ndarray, axis: int) -> np.ndarray:
    return np.moveaxis(np.tensordot(M, T, axes=(1, axis)), 0, axis)


def compensated_mode(M: np.ndarray, hi: np.ndarray, lo: np.ndarray | None, axis: int):
    """The pair (hi′, lo′) with hi′ + lo′ = M ×_axis (hi + lo) up to 4γ²_{n+1}·|M|(|hi| + |lo|) (module docstring):
    Dot2 on hi (TwoProduct by Dekker's split, TwoSum), M·lo by BLAS into the error sum (its rounding is u² of
    the total), and the pair renormalised by TwoSum (|lo′| ≤ u|hi′|)."""
    r, n = M.shape
    H = np.moveaxis(hi, axis, 0)
    rest = H.shape[1:]
    H = H.reshape(n, -1)
    L = None if lo is None else np.moveaxis(lo, axis, 0).reshape(n, -1)
    K = H.shape[1]
    Mh, Ml = dekker_split(M)
    live = [j for j in range(n) if np.any(M[:, j])]
    out_hi, out_lo = np.empty((r, K)), np.empty((r, K))
    step = max(1, _CHUNK // max(1, r))
    for start in range(0, K, step):
        cols = slice(start, start + step)
        Z = H[:, cols]
        Zh, Zl = dekker_split(Z)
        halves = np.any(Zl, axis=1)  # a row of whole counts below 2²⁶ is its own 26-bit half: 2 products, not 4
        p, s = np.zeros((r, Z.shape[1])), np.zeros((r, Z.shape[1]))
        h, e, t, q, w = (np.empty_like(p) for _ in range(5))  # in place: no temporaries in the loop
        for j in live:
            a, ah, al = M[:, j:j + 1], Mh[:, j:j + 1], Ml[:, j:j + 1]
            np.multiply(a, Z[j], out=h)
            # e = ((ah·zh − h) + ah·zl + al·zh) + al·zl: h + e = a·z exactly (dense.exact_answers.two_product and,
            # below, two_sum, written out in place: 20 % faster on this loop, the hot one)
            np.multiply(ah, Zh[j], out=e)
            e -= h
            if halves[j]:
                e += np.multiply(ah, Zl[j], out=w)
            e += np.multiply(al, Zh[j], out=w)
            if halves[j]:
                e += np.multiply(al, Zl[j], out=w)
            # TwoSum: t = p + h, w = (p − (t − bb)) + (h − bb) with bb = t − p; then s += fl(w + e) (Dot2)
            np.add(p, h, out=t)
            np.subtract(t, p, out=q)
            np.subtract(t, q, out=w)
            np.subtract(p, w, out=w)
            h -= q
            w += h
            w += e
            s += w
            p, t = t, p
        if L is not None:
            s += M @ L[:, cols]
        out_hi[:, cols], out_lo[:, cols] = two_sum(p, s)
    back = (r, *rest)
    return np.moveaxis(out_hi.reshape(back), 0, axis), np.moveaxis(out_lo.reshape(back), 0, axis)


def compensated_gather(index: np.ndarray, values: np.ndarray, hi: np.ndarray, lo: np.ndarray | None, axis: int):
    """:func:`compensated_mode` for a sparse M given row by row, M[i, index[i, p]] = values[i, p] (m terms a row, 0
    values padding): the same Dot2 over the m terms, in O(rows·m) a column instead of O(rows·n)."""
    r, m = index.shape
    H = np.moveaxis(hi, axis, 0)
    rest = H.shape[1:]
    H = H.reshape(H.shape[0], -1)
    L = None if lo is None else np.moveaxis(lo, axis, 0).reshape(H.shape)
    p = np.zeros((r, H.shape[1]))
    s = np.zeros_like(p)
    for j in range(m):
        a = values[:, j:j + 1]
        h, e = two_product(a, H[index[:, j]])
        p, q = two_sum(p, h)
        s += q + e
        if L is not None:
            s += a * L[index[:, j]]
    out_hi, out_lo = two_sum(p, s)
    back = (r, *rest)
    return np.moveaxis(out_hi.reshape(back), 0, axis), np.moveaxis(out_lo.reshape(back), 0, axis)


def weighted_entries(weights: np.ndarray, hi: np.ndarray, lo: np.ndarray | None) -> np.ndarray:
    """w ⊙ (hi + lo) rounded once per entry but for u² terms (:func:`_weighted` with one weight per entry)."""
    P, err = two_product(weights, hi)
    if lo is not None:
        err = err + weights * lo
    return P + err


def _weighted(weight: float, hi: np.ndarray, lo: np.ndarray | None) -> np.ndarray:
    """θ·(hi + lo) rounded once, but for u² terms (:func:`weighted_entries`); exact for a power of two."""
    if lo is None and math.frexp(weight)[0] == 0.5:
        return weight * hi  # a power of two: exact (unless it underflows: η)
    return weighted_entries(np.asarray(weight), hi, lo)
