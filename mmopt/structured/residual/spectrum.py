"""A strategy's eigenvalue on each residual subspace of a closure: residual strategies and the {I, J} algebra.

Notation: see README and :mod:`mmopt.structured.algebra`. A factor Gram αI + βJ (size n) is α on the residual
space and α + nβ on the constants; divided by n these are aᵢ = α/n and bᵢ = (α + nβ)/n. A product term
θ²·⊗ᵢ(αᵢI + βᵢJ) then has eigenvalue N·ℓ_T on Q_T with

    ℓ_T = θ² ∏_{i∈T} aᵢ ∏_{i∉T} bᵢ,

and a union of terms has the sum. With Z = {i : bᵢ = 0} (residual factors Rᵢ), Y = {i : aᵢ = 0} (totals 1ᵀ)
and F the rest (identities, I + J, …), a term is non-zero only on T = Z ∪ U with U ⊆ F, where
ℓ_T = θ² ∏_{i∈Z} aᵢ ∏_{i∉Z} bᵢ · ∏_{i∈U} aᵢ/bᵢ. A residual measurement c_S·K_S (Z = S, F = ∅) gives
ℓ_S = c_S²/N_S on its own subset only; a marginal θ_S·⊗(I on S, 1ᵀ elsewhere) gives θ_S²/N_S on every T ⊆ S
(HDMM's M(θ), McKenna et al., PVLDB 2018, §5). Only the closure's members are ever visited.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from mmopt.structured import algebra as alg
from mmopt.structured.residual.closure import Closure
from mmopt.structured.residual.strategy import ResidualStrategy
from mmopt.structured.strategies import ImplicitStrategy

_EPS = np.finfo(float).eps


def residual_spectrum(strategy: ResidualStrategy, closure: Closure) -> np.ndarray:
    """ℓ_T = c_T²/N_T for the closure members the strategy measures, 0 for the others."""
    ell = np.zeros(len(closure))
    for S, c in zip(strategy.subsets, strategy.weights.tolist(), strict=True):
        k = closure.index.get(S)
        if k is not None:
            ell[k] = c * c / closure.cells[k]
    return ell


def factor_ratios(A) -> tuple[float, float] | None:
    """(a, b) = (α/n, (α + nβ)/n) of a strategy factor with Gram αI + βJ, round-off snapped to 0; else None."""
    X = A.gram
    n = X.shape[0]
    co = alg.ij_coefficients(X)
    if co is None:
        return None
    alpha, beta = co
    out = alg.constants_eigenvalue(alpha, beta, n)  # the residual projector I − J/n's is exactly 0
    if alpha < 0 or out < 0:
        return None
    return alpha / n, out / n


def factor_columns(A) -> tuple[float, float] | None:
    """(L1, squared L2) column norm of a factor whose columns all have equal norms, else None."""
    M = A.matrix
    l1, l2 = np.abs(M).sum(axis=0), (M * M).sum(axis=0)
    tol = 8 * _EPS
    if np.ptp(l1) > tol * l1.max() or np.ptp(l2) > tol * l2.max():
        return None
    return float(l1.max()), float(l2.max())


class _Memo:
    """Per-call cache of factor quantities by object identity (terms share factor objects)."""

    def __init__(self) -> None:
        self.store: dict = {}

    def get(self, fn, A):
        key = (fn.__name__, id(A))
        if key not in self.store:
            self.store[key] = (A, fn(A))
        return self.store[key][1]


def factor_table(strategy: ImplicitStrategy, fn, memo: _Memo) -> tuple[np.ndarray, list]:
    """(codes, values): ``fn`` of each distinct factor object (terms share them), and every term as a row of codes
    into ``values`` (terms × d, the smallest integer type). Only C-level passes touch all terms·d factors: 3-way
    residual strategies on 100 attributes have 166,751 terms of 100 factors but two factor objects per size."""
    key = ("codes", id(strategy))
    if key not in memo.store:  # the same codes serve every fn: built once per strategy and call
        def flat():  # iterated twice rather than held: a list of 16.7 million ids would take 0.6 GB
            return itertools.chain.from_iterable(t.factors for t in strategy.terms)
        distinct = dict(zip(map(id, flat()), flat(), strict=True))
        code = {k: j for j, k in enumerate(distinct)}
        dtype = np.uint8 if len(distinct) < 256 else np.int32
        codes = np.fromiter(map(code.__getitem__, map(id, flat())), dtype=dtype)
        memo.store[key] = (strategy, (codes.reshape(len(strategy.terms), -1), list(distinct.values())))
    codes, distinct = memo.store[key][1]
    return codes, [memo.get(fn, A) for A in distinct]


def _row_products(table: np.ndarray, codes: np.ndarray, block: int = 8192) -> np.ndarray:
    """∏ over each row of ``table[codes]``, in blocks of rows (no terms × d float array)."""
    return np.concatenate([np.prod(table[codes[k:k + block]], axis=1) for k in range(0, len(codes), block)]) \
        if len(codes) else np.zeros(0)


def algebra_spectrum(strategy: ImplicitStrategy, closure: Closure, *, memo: _Memo | None = None):
    """ℓ_T over the closure for an implicit strategy whose every factor Gram is αI + βJ; None otherwise.

    Cost O(terms·d) in C to classify (:func:`factor_table`), then per term O(|Z|) to place a term without free
    attributes, else its 2^|F| candidate subsets (when few) or one pass over the closure.
    """
    memo = memo or _Memo()
    codes, ratios = factor_table(strategy, factor_ratios, memo)
    if any(r is None for r in ratios):
        return None
    a, b = (np.array([r[k] for r in ratios]) for k in (0, 1))
    is_z, is_f = b == 0.0, (a > 0) & (b > 0)
    Z_rows, F_rows = is_z[codes], is_f[codes]
    dead = (is_z & (a == 0.0))[codes].any(axis=1)  # a zero factor: the term is zero
    top = max((len(S) for S in closure.members), default=0)
    weights = np.array([t.weight for t in strategy.terms])
    # θ² ∏_{i∈Z} aᵢ ∏_{i∉Z, bᵢ>0} bᵢ: per code aᵢ where bᵢ = 0, else bᵢ (a total has aᵢ = 0 < bᵢ)
    base = weights**2 * _row_products(np.where(is_z, a, b), codes)
    nz, has_f = Z_rows.sum(axis=1), F_rows.any(axis=1)
    ell = np.zeros(len(closure))
    rows, cols = np.nonzero(Z_rows)
    starts = np.searchsorted(rows, np.arange(len(codes) + 1))
    cols = cols.tolist()
    members = None
    for k in np.flatnonzero(~dead & (nz <= top)).tolist():
        Z = cols[starts[k]:starts[k + 1]]
        if not has_f[k]:
            j = closure.index.get(tuple(Z))
            if j is not None:
                ell[j] += base[k]
            continue
        F = np.flatnonzero(F_rows[k]).tolist()
        ratio = {i: a[codes[k, i]] / b[codes[k, i]] for i in F}
        room = top - len(Z)
        count = sum(math.comb(len(F), q) for q in range(min(room, len(F)) + 1))
        if count <= 4 * len(closure) + 64:
            for q in range(min(room, len(F)) + 1):
                for U in itertools.combinations(F, q):
                    j = closure.index.get(tuple(sorted(Z + list(U))))
                    if j is not None:
                        ell[j] += base[k] * math.prod(ratio[i] for i in U)
        else:  # many free attributes (e.g. an identity factor on most of them): one pass over the closure
            members = members or [set(S) for S in closure.members]
            zs, fs = set(Z), set(F)
            for j, T in enumerate(members):
                if zs <= T and T - zs <= fs:
                    ell[j] += base[k] * math.prod(ratio[i] for i in T - zs)
    return ell


def algebra_sensitivity(strategy: ImplicitStrategy, norm: str, *, memo: _Memo | None = None) -> float | None:
    """Exact Δ of a union of products whose every factor has equal column norms (all N columns are then
    equal: Δ₁ = Σₖ θₖ ∏ᵢ ‖Aᵢ‖₁, Δ₂² = Σₖ θₖ² ∏ᵢ ‖Aᵢ‖₂²); None when some factor's columns differ."""
    memo = memo or _Memo()
    codes, cols = factor_table(strategy, factor_columns, memo)
    if any(c is None for c in cols):
        return None
    weights = np.array([t.weight for t in strategy.terms])
    if norm == "l1":
        return float(np.sum(weights * _row_products(np.array([c[0] for c in cols]), codes)))
    return math.sqrt(float(np.sum(weights**2 * _row_products(np.array([c[1] for c in cols]), codes))))
