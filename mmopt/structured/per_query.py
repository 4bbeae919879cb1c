"""Every query's variance on a product domain, as sums of Kronecker products of per-factor terms.

Notation: see README. A workload term w·⊗ᵢWᵢ has the query grid (m₁, …, m_d) in C order; its query
q = ⊗ᵢ rᵢ (rᵢ a row of Wᵢ) has variance c·Δ²·w²·q X⁺ qᵀ under a strategy with X = AᵀA (Li et al.,
PODS 2010, Prop. 4.4). Two kinds of strategy make q X⁺ qᵀ a short sum of products of per-factor numbers:

* a product A = θ⊗ᵢAᵢ: X⁺ = θ⁻²⊗ᵢMᵢ with Mᵢ = (AᵢᵀAᵢ)⁺, so q X⁺ qᵀ = θ⁻² ∏ᵢ rᵢMᵢrᵢᵀ — one product;
* a union whose every factor Gram is αI + βJ (marginals, HDMM's M(θ)): X⁺ = Σ_T Q_T/λ_T
  (:mod:`~mmopt.structured.algebra`), so q X⁺ qᵀ = Σ_T λ_T⁻¹ ∏_{i∈T} aᵢ(rᵢ) ∏_{i∉T} bᵢ(rᵢ) with
  bᵢ = (1ᵀrᵢ)²/nᵢ and aᵢ = ‖rᵢ‖² − bᵢ — one product per subset T with λ_T > 0 (and no zero factor).

A term's variances are therefore Σ_k c_k ⊗ᵢ f_{k,i} (:class:`TermVariance`): any slice of them, sums over
groups of rows and maxima come from the per-factor vectors f_{k,i} (length mᵢ) without listing all m. The
strategy is taken at an exact power-of-two scale (A = 2^R·Ã, so X⁺ = 4⁻ᴿ·X̃⁺; ``exponent`` R) so that its
Grams neither over- nor underflow; multiply by a noise variance s² as (s·2⁻ᴿ)². Terms are in order, each in
C order of its query grid (the order of :func:`~mmopt.structured.mechanism.answer`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mmopt._base.guards import Unsupported
from mmopt.dense import _queries
from mmopt.structured import _bracket as br
from mmopt.structured import _checks as ck
from mmopt.structured import _rows as rw
from mmopt.structured import algebra as alg
from mmopt.structured import factors as fc
from mmopt.structured.strategies import ImplicitStrategy
from mmopt.structured.workloads import ImplicitWorkload

MAX_QUERIES = 10**7  # evaluate(per_query=True) lists up to this many (80 MB)
_MODERATE = 100      # factors with max |entry| within 2^±100 are used as they are


@dataclass(frozen=True, eq=False)
class TermVariance:
    """q X̃⁺ qᵀ over one workload term's query grid: Σ_k ``coefficients[k]`` · ⊗ᵢ ``vectors[k][i]``.

    Every vector is non-negative and has length mᵢ (the term's i-th factor's query count); the workload
    term's weight w² is inside the coefficients.
    """

    coefficients: tuple[float, ...]
    vectors: tuple[tuple[np.ndarray, ...], ...]
    grid: tuple[int, ...]

    @property
    def n_queries(self) -> int:
        return math.prod(self.grid)

    def values(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """The variances of queries ``start`` … ``stop − 1`` of the term (C order of ``grid``)."""
        stop = self.n_queries if stop is None else stop
        idx = np.unravel_index(np.arange(start, stop, dtype=np.int64), self.grid)
        out = np.zeros(stop - start)
        for c, fs in zip(self.coefficients, self.vectors, strict=True):
            part = np.full(stop - start, c)
            for f, i in zip(fs, idx, strict=True):
                part *= f[i]
            out += part
        return out

    def grouped_sums(self, groups: tuple[np.ndarray, ...], sizes: tuple[int, ...]) -> np.ndarray:
        """Σ of the variances over every cell of a product of per-factor groupings: ``groups[i]`` gives
        each row of factor i a group in range(``sizes[i]``); result shape ``sizes`` (outer products)."""
        out = np.zeros(sizes)
        for c, fs in zip(self.coefficients, self.vectors, strict=True):
            part = np.full((), c)
            for f, g, s in zip(fs, groups, sizes, strict=True):
                part = np.multiply.outer(part, np.bincount(g, weights=f, minlength=s))
            out += part
        return out

    def bounds(self) -> tuple[float, float, bool]:
        """(smallest, largest, exact): exact for one product (∏ min, ∏ max of non-negative factors); for a
        sum, by listing the term when it has at most :data:`MAX_QUERIES` queries, else the proven bounds
        Σ_k c_k ∏ min and Σ_k c_k ∏ max (``exact`` False)."""
        if len(self.coefficients) > 1 and self.n_queries <= MAX_QUERIES:
            v = self.values()
            return float(v.min()), float(v.max()), True
        lo = sum(c * math.prod(float(f.min()) for f in fs) for c, fs in zip(self.coefficients, self.vectors,
                                                                              strict=True))
        hi = sum(c * math.prod(float(f.max()) for f in fs) for c, fs in zip(self.coefficients, self.vectors,
                                                                             strict=True))
        return lo, hi, len(self.coefficients) <= 1


@dataclass(frozen=True, eq=False)
class KronVariance:
    """Per-query variances of a workload under a strategy: q X⁺ qᵀ = 4^(−``exponent``) · (term values)."""

    terms: tuple[TermVariance, ...]
    exponent: int
    method: str  # "product" or "algebra"

    @property
    def n_queries(self) -> int:
        return sum(t.n_queries for t in self.terms)


def kron_variance(workload: ImplicitWorkload, strategy: ImplicitStrategy, *, caller: str = "kron_variance"
                  ) -> KronVariance | None:
    """The Kronecker form of every query's q X⁺ qᵀ (module docstring), or None when the strategy is neither
    a product nor a union of αI + βJ factors (no such form: use the dense path on ≤ 4,096 cells).

    Raises ValueError when a workload factor is Gram-only (its queries are unknown) or not supported by
    the strategy (its variance would be infinite).

    Examples
    --------
    >>> from mmopt import workload as wl, strategy as st
    >>> kv = kron_variance(wl.kron(wl.prefix(80), wl.total(60)), st.kron(st.identity(80), st.identity(60)))
    >>> kv.method, kv.terms[0].values(0, 3).tolist()        # q = 1[0..k] ⊗ 1: (k + 1)·60 cells
    ('product', [60.0, 120.0, 180.0])
    """
    for t in workload.terms:
        for f in t.factors:
            if not _queries.has_per_query(f):
                raise ValueError(f"{caller}: workload factor '{f.name}' is Gram-only, so its queries are unknown. "
                                 "Build it with Workload.from_matrix(W).")
    scaled = [[scaled_factor(f) for f in t.factors] for t in strategy.terms]
    if strategy.is_product:
        return _product(workload, strategy.terms[0], scaled[0], caller)
    return _algebra(workload, strategy, scaled, caller)


def per_query_variance(workload: ImplicitWorkload, strategy: ImplicitStrategy, scale: float) -> np.ndarray:
    """Every query's variance ``scale``·q X⁺ qᵀ (``scale`` = c·Δ²), listed (``evaluate(per_query=True)``):
    product strategies, at most :data:`MAX_QUERIES` queries. Beyond, and for marginals strategies,
    :func:`mmopt.answers.per_query_variances` gives them in blocks; :func:`mmopt.answers.error_by_shape` and
    :func:`mmopt.answers.error_by_term` summarise them."""
    caller = "evaluate"
    if not strategy.is_product:
        # the size is the reason: a union on ≤ 4,096 cells takes the dense path, which lists them (it said "product
        # strategies only" just past 4,096 cells, where the same code had listed them)
        raise ValueError(f"{caller}: per-query variances past {ck.DENSE_LIMIT:,} cells are listed for product "
                         f"strategies only; '{strategy.name}' is a union on {ck.fmt_int(strategy.domain_size)} cells "
                         "(on at most 4,096 cells the dense path lists any pair's). The report's max_variance bounds "
                         "every query; for a marginals strategy, mmopt.answers.per_query_variances(W, A, privacy) "
                         "gives them block by block.")
    ck.check_allocation(workload.n_queries, what=f"{ck.fmt_int(workload.n_queries)} per-query variances",
                        caller=caller, limit=MAX_QUERIES,
                        remedy=" Read them in chunks with mmopt.answers.per_query_variances(W, A, privacy), or "
                               "summarised with mmopt.answers.error_by_shape / error_by_term (and "
                               "mmopt.plot.error_by_shape / error_by_term).")
    kv = kron_variance(workload, strategy, caller=caller)
    factor = math.ldexp(scale, -2 * kv.exponent) if scale > 0 else 0.0
    return np.concatenate([t.values() * factor for t in kv.terms])


# -- the two forms ------------------------------------------------------------------------------------------
def scaled_factor(A):
    """(Ã, e): A = 2ᵉ·Ã exactly, with e = 0 when max|A| is within 2^±100 (A itself)."""
    top = float(np.max(np.abs(A.matrix)))
    e = int(np.frexp(top)[1])
    if abs(e) <= _MODERATE:
        return A, 0
    return type(A)(np.ldexp(A.matrix, -e), A.name), e


def _product(workload, term, scaled, caller) -> KronVariance:
    wm, we = math.frexp(term.weight)  # θ = wm·2^we
    x = we + sum(e for _, e in scaled)
    exponent = x if abs(x) > _MODERATE else 0
    theta = math.ldexp(wm, x - exponent)  # θ·2^(Σe − exponent): θ itself for a moderate strategy
    cache = fc.Cache()
    terms = []
    for t in workload.terms:
        vecs = []
        for Wf, (Af, _) in zip(t.factors, scaled, strict=True):
            inv = cache.get(fc.strategy_inverse, Af)
            br.check_supports(Wf, Af, cache, caller)  # evaluate's rule: no variance for a query it refuses
            # an ill-conditioned factor: sums of squares of B's rows, where M's huge entries would cancel
            wq = _queries.per_query_terms(Wf, inv.profile) if inv.certified else _queries.factor_terms(Wf, inv.B)
            vecs.append(np.clip(wq, 0.0, None))
        grid = tuple(f.n_queries for f in t.factors)
        terms.append(TermVariance((t.weight**2 / theta**2,), (tuple(vecs),), grid))
    return KronVariance(tuple(terms), exponent, "product")


def _algebra(workload, strategy, scaled, caller) -> KronVariance | None:
    shape = workload.shape
    if len(shape) > alg.MAX_ATTRIBUTES:
        return None
    xs = [math.frexp(t.weight)[1] + sum(e for _, e in fs) for t, fs in zip(strategy.terms, scaled, strict=True)]
    top = max(xs) if abs(max(xs)) > _MODERATE else 0
    lam = np.zeros(2 ** len(shape))
    for t, fs, x in zip(strategy.terms, scaled, xs, strict=True):
        co = [alg.ij_coefficients(Af.gram) for Af, _ in fs]
        if any(c is None for c in co):
            return None
        w2 = math.ldexp(math.frexp(t.weight)[0] ** 2, 2 * (x - top))  # θ²·4^(Σe − top), exact scaling
        lam += alg.product_spectrum(co, shape, w2)
    pos = lam > 0
    inv = np.where(pos, 1.0 / np.where(pos, lam, 1.0), 0.0)
    bits = alg.subset_bits(len(shape))
    terms, cache = [], fc.Cache()
    for t in workload.terms:
        # evaluate's rule (G's share, then each query's by its own norm): an exact-zero test on a = ‖r‖² − (1ᵀr)²/n
        # took c·1ᵀ's round-off (2.2·10⁻¹⁶ for 0.7·1ᵀ₃) for weight where λ_T = 0 and refused 98 of 330 supported
        # pairs c·1ᵀₙ ⊗ I₄ that evaluate scores (a helper's audit); a share under it is round-off, dropped as there
        if rw.term_off_range(t, alg.projection_traces([f.mean_gram for f in t.factors], shape), pos, shape, cache):
            raise Unsupported(f"{caller}: the strategy does not support workload '{workload.name}': a term has "
                              "weight on an eigenspace where AᵀA is zero. Add marginals covering those attributes.")
        stats = [row_stats(f) for f in t.factors]
        b = [s * s / n for (_, s), n in zip(stats, shape, strict=True)]
        a = [np.clip(q - bb, 0.0, None) for (q, _), bb in zip(stats, b, strict=True)]
        zero_a = [not np.any(x) for x in a]
        zero_b = [not np.any(x) for x in b]
        coefficients, vectors = [], []
        for T, row in enumerate(bits):
            if not pos[T] or any(zero_a[i] if row[i] else zero_b[i] for i in range(len(shape))):
                continue  # this subset carries none of the term's queries (or round-off of them, where λ_T = 0)
            coefficients.append(t.weight**2 * float(inv[T]))
            vectors.append(tuple(a[i] if row[i] else b[i] for i in range(len(shape))))
        grid = tuple(f.n_queries for f in t.factors)
        terms.append(TermVariance(tuple(coefficients), tuple(vectors), grid))
    return KronVariance(tuple(terms), top, "algebra")


def row_stats(W) -> tuple[np.ndarray, np.ndarray]:
    """(‖r‖², 1ᵀr) for every row r of a one-attribute workload, in its row order, without W for the
    closed-form families (identity, total, prefix, all_range, all_predicate)."""
    n, fam = W.domain_size, W.family
    if W.matrix is None and fam in ("identity", "total", "prefix", "all_range", "all_predicate"):
        if fam == "identity":
            length = np.ones(n)
        elif fam == "total":
            length = np.array([float(n)])
        elif fam == "prefix":
            length = np.arange(1.0, n + 1)
        elif fam == "all_range":
            a, b = np.triu_indices(n)
            length = (b - a + 1).astype(float)
        else:
            codes = np.arange(1, 2**n, dtype=np.int64)
            length = np.zeros(codes.size)
            for j in range(n):
                length += (codes >> j) & 1
        return length, length
    M = W.explicit_matrix()
    return np.einsum("ij,ij->i", M, M), M.sum(axis=1)
