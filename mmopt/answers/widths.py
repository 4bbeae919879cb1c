"""The half-widths of exact 1 − α intervals for the rows of an answers table (``lower``/``upper`` columns).

Notation: see README and :mod:`mmopt.answers.intervals`. The least-squares answer q x̂ = q x + aᵀz with
a = q A⁺ and z the noise drawn (i.i.d. with scale b or σ). Gaussian noise: h = z_{1−α/2}·standard_error, for
every route. Laplace noise: h is the exact (1 − α/2)-quantile of Σⱼ aⱼ·b·Lⱼ, so a needs listing: on the dense
route (at most 4,096 cells) A⁺ is formed once and a = q A⁺ row by row; for a product strategy θ·⊗Aᵢ on a
workload of products a = (w/θ)·⊗(qᵢAᵢ⁺), per distinct value of each factor (:func:`_product_laws`); for
weighted-marginals strategies on
workloads of products (the "algebra" route: HDMM's M(θ), what optimize returns for census tables) a is in
closed form, per distinct value of each factor row (:func:`_algebra_laws`), at any N. Rows whose sorted |a|
agree to 12 significant digits share one quantile; at most :data:`MAX_LAPLACE_ROWS` rows per table, because
each distinct law costs milliseconds. Other implicit strategies are refused for Laplace intervals; records
releases give exact intervals through the marginal algebra (:mod:`mmopt.records.plans`).

The interval is exact for the noise; the answer itself is computed in float64. Each h is widened by
:func:`roundoff_allowance` (a heuristic: a few ulps of the largest |q|·|x̂| the answers can reach, not a proven
bound) and ``lower``/``upper`` are rounded outwards: on counts of 10¹⁵ at noise scale 0.04 every h rounded away
(lower = upper = the answer) and half the intervals missed, the reconstruction's round-off (0.51) being larger
than the noise's h (0.09) (a helper's probe). Where the allowance is 10⁻³ of the noise scale or more, a warning
says the answers are at the edge of float64.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from mmopt.answers import intervals as iv
from mmopt.answers.layout import Chunk

#: Laplace intervals list a = q A⁺ per row; past this many rows a table is refused (each distinct law costs ms).
MAX_LAPLACE_ROWS = 50_000


class Widths:
    """h for each row of a chunk, given its standard errors (``of``); ``laws(c)`` lists, for Laplace noise, each
    row's error law as (values, counts) of its weights on the measurements."""

    def __init__(self, alpha: float, noise: str, scale: float, laws=None, allowance: float = 0.0):
        self.alpha, self.noise, self.scale, self.laws, self.allowance = alpha, noise, scale, laws, allowance
        self.z = iv.half_width("gaussian", alpha, sd=1.0)   # z_{1−α/2}
        if noise == "laplace":
            iv.check_laplace_alpha(alpha, "answers_table")
        self.cache: dict = {}

    def of(self, c: Chunk, se: np.ndarray) -> np.ndarray:
        h = self._noise(c, se)
        return np.where(h > 0, h + self.allowance, h)  # a zero query (h = 0) is answered exactly: 0

    def _noise(self, c: Chunk, se: np.ndarray) -> np.ndarray:
        if self.noise == "gaussian":
            return self.z * se
        out = []
        for values, counts in self.laws(c):  # a list, or a generator (the dense route's, block by block)
            keep = (values != 0.0) & (counts > 0)
            mag, cnt = np.abs(values[keep]), counts[keep]
            if mag.size == 0:
                out.append(0.0)
                continue
            top = float(mag.max())
            order = np.lexsort((cnt, np.round(mag / top, 12)))
            key = np.round(mag[order] / top, 12).tobytes() + cnt[order].tobytes()
            if key not in self.cache:
                self.cache[key] = iv.half_width("laplace", self.alpha, weights=(mag / top, cnt), scale=1.0)
            out.append(self.cache[key] * top * self.scale)
        return np.asarray(out, dtype=float)


#: Rows of q A⁺ the dense route forms at once: the whole chunk (up to MAX_LAPLACE_ROWS rows × p measurements) took
#: 1.93 GB where 1,000 rows took 0.87 GB for kron(prefix(32), all_range(32)) (a helper's audit; ~13 GB at p ≈ 16k)
DENSE_LAW_BLOCK = 256


def _dense_laws(rows, pinv: np.ndarray):
    """Each row's weights q A⁺ on the measurements, one entry each (one array of counts shared by every row),
    formed :data:`DENSE_LAW_BLOCK` rows at a time whatever the chunk's size."""
    ones = np.ones(pinv.shape[1])

    def laws(c: Chunk):
        for lo in range(c.start, c.stop, DENSE_LAW_BLOCK):
            yield from ((row, ones) for row in rows(lo, min(lo + DENSE_LAW_BLOCK, c.stop)) @ pinv)
    return laws


def _per_row(layout, prepare, law):
    """laws(chunk) = [law([prepare(i, qᵢ) for each factor i], w) for each row w·⊗qᵢ of the chunk]: each distinct
    factor row is read (:func:`~mmopt.answers.layout.factor_rows`) and prepared once per chunk, not once per row."""
    from mmopt.answers.layout import factor_rows

    def laws(c: Chunk):
        t = layout.terms[c.term]
        n = c.stop - c.start
        idx = np.unravel_index(np.arange(c.local, c.local + n, dtype=np.int64), t.grid)
        cache: list = [{} for _ in t.factors]
        out = []
        for k in range(n):
            items = []
            for i, f in enumerate(t.factors):
                r = int(idx[i][k])
                if r not in cache[i]:
                    cache[i][r] = prepare(i, factor_rows(f, r, r + 1)[0].astype(np.float64))
                items.append(cache[i][r])
            out.append(law(items, float(t.weight)))
        return out
    return laws


def _algebra_laws(layout, terms):
    """Weighted marginals (θ_S·⊗(I or 1ᵀ)) on a workload of products: row q = w·⊗qᵢ puts on the measurements of
    term S the weights a_S = θ_S Σ_{T⊆S} λ_T⁻¹ ⊗_{i∈S} (qᵢRᵢ if i ∈ T else mean(qᵢ)·1) · ∏_{i∉S} Σqᵢ, with
    λ_T = Σ_{S⊇T} θ_S² ∏_{i∉S} nᵢ (X⁺ = Σ_T Q_T/λ_T; Rᵢ = I − J/nᵢ). Cells where qᵢ takes the same value share
    every factor, so each attribute is reduced to its distinct values and their counts: a row's law costs
    Σ_S 2^|S| ∏_{i∈S} (distinct values of qᵢ), never N. ``terms``: (S, θ_S) per term of the strategy, a marginal
    measured twice listed twice — each copy has its own noise, so its weights are a block of the law of their own
    (merged into one θ = √(θ₁² + θ₂²) the variance held but the law did not: 50 % intervals covered 44 %)."""
    import itertools

    shape = layout.shape
    lam: dict = {}
    for S, th in terms:
        rest = float(np.prod([shape[i] for i in range(len(shape)) if i not in S]))
        for k in range(len(S) + 1):
            for T in itertools.combinations(S, k):
                lam[T] = lam.get(T, 0.0) + th * th * rest

    def prepare(i, q):  # (distinct values, their counts as floats, mean, sum) of one factor row
        values, counts = np.unique(q, return_counts=True)
        return values, counts.astype(np.float64), float(q.mean()), float(q.sum())

    def law(rows, weight):
        values, counts = [], []
        for S, th in terms:
            outside = weight * th * float(np.prod([rows[i][3] for i in range(len(rows)) if i not in S]))
            if outside == 0.0:
                continue
            acc = np.zeros(tuple(rows[i][0].size for i in S))
            for k in range(len(S) + 1):
                for T in itertools.combinations(S, k):
                    part = np.ones(())
                    for i in S:
                        u, _, mean, _ = rows[i]
                        part = np.multiply.outer(part, u - mean if i in T else np.full(u.size, mean))
                    acc = acc + part / lam[T]
            cnt = np.ones(())
            for i in S:
                cnt = np.multiply.outer(cnt, rows[i][1])
            values.append(outside * acc.ravel())
            counts.append(cnt.ravel())
        if not values:  # a zero query (every block's outside factor sums to 0): an empty law, width 0
            return np.zeros(0), np.zeros(0)
        return np.concatenate(values), np.concatenate(counts)

    return _per_row(layout, prepare, law)


def _product_laws(layout, strategy):
    """A product strategy θ·⊗Aᵢ on a workload of products: row q = w·⊗qᵢ puts the weights
    (w/θ)·⊗(qᵢAᵢ⁺) on the measurements; each factor's vector is reduced to its distinct values with counts."""
    from mmopt.structured.factors import strategy_inverse
    (term,) = strategy.terms
    # each Aᵢ⁺ by the mechanism's own rank rule, not numpy's pinv at its cutoff 10⁻¹⁵·σ₁: a factor stacking two
    # partitions of 1,000 cells (834×1,000, rank 667) kept 672 there on the Haswell BLAS kernel and 698 on
    # another, and the "exact" Laplace intervals came out 1.02–2.07× too wide (a helper's probe)
    pinvs = [strategy_inverse(f).pinv for f in term.factors]
    theta = float(term.weight)

    def prepare(i, q):
        values, counts = np.unique(q @ pinvs[i], return_counts=True)
        return values, counts.astype(np.float64)

    def law(rows, weight):
        values, counts = np.full((), weight / theta), np.ones(())
        for u, m in rows:
            values, counts = np.multiply.outer(values, u), np.multiply.outer(counts, m)
        return values.ravel(), counts.ravel()

    return _per_row(layout, prepare, law)


def _marginals_of(strategy):
    """``strategy``'s (S, θ) per term when every factor is an identity or a constant row, else None."""
    from mmopt.structured.residual.marginals import marginal_terms
    from mmopt.structured.strategies import ImplicitStrategy
    if not isinstance(strategy, ImplicitStrategy):
        return None
    try:
        return marginal_terms(strategy)
    except ValueError:
        return None


def _small(model) -> bool:
    """Whether the pair's cells fit the dense laws (a residual basis on 6 cells was refused, its message citing the
    4,096-cell limit it was far under; a helper's audit)."""
    from mmopt.structured._checks import DENSE_LIMIT
    return math.prod(model.layout.shape) <= DENSE_LIMIT


def preflight(alpha, model, noise: str, reconstruction: str, name: str, caller: str, strategy=None) -> float:
    """α checked, or a ValueError saying why exact intervals are not available — all before any noise is drawn."""
    alpha = iv.check_alpha(alpha, caller, laplace=noise == "laplace")  # (the widths checked Laplace's after the draw)
    if model is None:
        raise ValueError(f"The 'alpha' parameter of {caller} needs the strategy (intervals come from its exact error "
                         "law). Pass strategy=... as well.")
    if reconstruction != "least_squares":
        raise ValueError(f"The 'alpha' parameter of {caller}: the answers were reconstructed by '{reconstruction}', "
                         "which is biased, so no interval is exact. Release with reconstruct='least_squares' for "
                         "exact intervals.")
    if noise == "gaussian":
        return alpha
    product = model.method == "product" and len(getattr(strategy, "terms", ())) == 1
    if not product and (model.method not in ("dense", "algebra")
                        or (model.method == "algebra" and _marginals_of(strategy) is None and not _small(model))):
        raise ValueError(f"The 'alpha' parameter of {caller}: exact Laplace intervals need each answer's weights "
                         f"q A⁺: listed for pairs on at most 4,096 cells, in closed form for product strategies and "
                         f"weighted marginals (HDMM's M(θ), what optimize returns for marginal and census workloads); "
                         f"'{name}' under '{getattr(strategy, 'name', strategy)}' is neither. Use Gaussian noise "
                         "(closed-form intervals), or records releases (mmopt.records.release_marginals).")
    if model.layout.n_queries > MAX_LAPLACE_ROWS:
        raise ValueError(f"The 'alpha' parameter of {caller}: exact Laplace intervals cost milliseconds per distinct "
                         f"answer law; '{name}' has {model.layout.n_queries:,} queries (limit {MAX_LAPLACE_ROWS:,}). "
                         "Answer a workload of fewer queries, use Gaussian noise (closed-form intervals), or leave "
                         "alpha=None for the standard errors alone.")  # (terms=... renames terms: no fewer rows)
    return alpha


def bounds(answers: np.ndarray, h) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) = answers ∓ h rounded outwards (a half-width below the answer's ulp rounded to nothing:
    lower = upper); where h = 0 (a zero query, answered exactly) the answer itself."""
    h = np.broadcast_to(h, np.shape(answers))
    lo, hi = np.nextafter(answers - h, -np.inf), np.nextafter(answers + h, np.inf)
    return np.where(h > 0, lo, answers), np.where(h > 0, hi, answers)


def roundoff_allowance(layout, estimate: np.ndarray) -> float:
    """16·u·max|W|·‖x̂‖₁ (u = 2⁻⁵³): a few ulps of the largest |q|·|x̂|, added to every half-width (module
    docstring). A heuristic allowance for the float64 arithmetic of x̂ and q x̂ (a well-conditioned A), not a bound."""
    top = max(abs(t.weight) * float(np.prod([1.0 if f.matrix is None else float(np.abs(f.matrix).max(initial=0.0))
                                             for f in t.factors])) for t in layout.terms)  # the families: 0/1
    return allowance(top * float(np.abs(estimate).sum()))


def allowance(scale: float) -> float:
    """16·u·``scale``: the round-off allowance of answers whose |q|·|x̂| reaches ``scale`` (u = 2⁻⁵³)."""
    return 16 * np.finfo(float).eps / 2 * scale


def warn_roundoff(extra: float, scale: float, caller: str) -> None:
    """A RuntimeWarning when the round-off allowance ``extra`` reaches 10⁻³ of the noise scale."""
    if extra >= 1e-3 * scale:
        warnings.warn(f"{caller}: the answers reach {extra / (8 * np.finfo(float).eps):.3g}, where float64's round-off "
                      f"(~{extra:.3g}) is {extra / scale:.3g} of the noise scale {scale:.3g}: each interval is widened "
                      "by it, and is no longer exact. Release counts in larger units, or at a smaller ε.",
                      RuntimeWarning, stacklevel=4)


def widths(alpha, model, workload, strategy, output, meta: dict, caller: str) -> Widths:
    """The :class:`Widths` of a planned table (refusals: :func:`preflight`)."""
    alpha = preflight(alpha, model, output.noise, meta["reconstruction"], meta["workload"], caller, strategy)
    scale = float(output.noise_scale)
    extra = roundoff_allowance(model.layout, output.estimate)
    meta["roundoff_allowance"] = extra
    warn_roundoff(extra, scale, caller)
    if output.noise == "gaussian":
        return Widths(alpha, "gaussian", scale, allowance=extra)
    if model.method == "algebra" and (terms := _marginals_of(strategy)) is not None:
        return Widths(alpha, "laplace", scale, _algebra_laws(model.layout, terms), extra)
    if model.method == "product":
        return Widths(alpha, "laplace", scale, _product_laws(model.layout, strategy), extra)
    from mmopt.answers.variance import _dense_workload
    from mmopt.dense._error_common import as_strategy
    from mmopt.dense.least_squares import factorize
    from mmopt.structured.strategies import ImplicitStrategy
    W = _dense_workload(workload, model.layout, caller).explicit_matrix()
    # A⁺ as the mechanism applies it (factorize: its rank decision, and its cached factorisation of the very
    # Strategy the mechanism used), not numpy's pinv at its own cutoff: on a rank-deficient A of a few thousand
    # cells that inverted round-off singular values, W·A⁺·A was off by 0.016 and the "exact" Laplace intervals were
    # up to 2.2× too wide
    A = strategy.to_strategy() if isinstance(strategy, ImplicitStrategy) else as_strategy(strategy, caller)
    pinv = factorize(A).solve(np.eye(A.matrix.shape[0])).T
    return Widths(alpha, "laplace", scale, _dense_laws(lambda lo, hi: W[lo:hi], pinv), extra)
