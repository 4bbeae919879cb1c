"""Per-query errors summarised: by range shape (mean error by height × width) and by term (per marginal).

Notation: see README; every figure is an expected squared error c·Δ²·q (AᵀA)⁺ qᵀ at ``privacy`` (unit privacy
for None), as ``mmopt.evaluate(..., per_query=True)`` lists them. Under a product strategy a query's error
is c·Δ²·θ⁻²·w²·∏ᵢ fᵢ(rᵢ) (:mod:`mmopt.structured.per_query`; a marginals strategy gives a short sum of such
products), so a sum over all queries whose rows fall in given groups factorises: Σ ∏ᵢ fᵢ(rᵢ) = ∏ᵢ Σ_{gᵢ} fᵢ.
The mean over the 2-D ranges of height h and width w is thus (Σ_{ℓ₁=h} f₁)(Σ_{ℓ₂=w} f₂)/(count₁·count₂)
— for 128² ranges, two bincounts of 8,256 numbers instead of 68 million terms. A term's smallest and
largest error are ∏ min fᵢ and ∏ max fᵢ. Pairs without that form (≤ 4,096 cells) are summed block by block.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mmopt.answers.layout import DEFAULT_CHUNK_ROWS, row_intervals
from mmopt.answers.variance import expected_error_model
from mmopt.structured import _checks as ck


@dataclass(frozen=True, eq=False)
class ShapeErrors:
    """Mean expected squared error of the range queries of each shape: ``mean[ℓ₁ − 1, …, ℓ_d − 1]`` over the
    ``count[…]`` queries whose range on attribute i has length ℓᵢ (NaN where there is none)."""

    mean: np.ndarray
    count: np.ndarray
    attributes: tuple[str, ...]
    workload: str
    strategy: str


@dataclass(frozen=True)
class TermError:
    """Expected squared errors of one term (or group of terms): mean, rmse = √mean, and the smallest and largest
    query's (``exact`` False: proven bounds instead)."""

    name: str
    terms: tuple[int, ...]
    n_queries: int
    mean: float
    rmse: float
    min: float
    max: float
    exact: bool


def error_by_shape(workload, strategy, privacy=None, *, norm: str | None = None,
                   chunk_rows: int = DEFAULT_CHUNK_ROWS) -> ShapeErrors:
    """Mean expected squared error by range shape (lengths ℓ₁ × … × ℓ_d) over a workload of ranges.

    Every factor of every term must be a workload of 0/1 intervals (``all_range``, ``prefix``, ``identity``,
    ``total`` or an explicit W of intervals): 2-D ranges ``ranges_2d(n)``, ``kron(all_range, prefix)``, … .

    Examples
    --------
    >>> import mmopt
    >>> W = mmopt.workload.ranges_2d(128)                                   # 68,161,536 queries
    >>> A = mmopt.strategy.kron(mmopt.strategy.identity(128), mmopt.strategy.identity(128))
    >>> s = error_by_shape(W, A, mmopt.Privacy(1.0))
    >>> s.mean.shape, round(float(s.mean[2, 4]), 9), int(s.count[2, 4])     # 3 × 5 cells: 2·15 at ε = 1
    ((128, 128), 30.0, 15624)
    """
    caller = "error_by_shape"
    model, sd = expected_error_model(workload, strategy, privacy, norm=norm, caller=caller)
    layout = model.layout
    ck.check_allocation(2 * math.prod(layout.shape), what="the table of range shapes", caller=caller)
    groups = []
    for t in layout.terms:
        ivs = [row_intervals(f) for f in t.factors]
        if any(iv is None for iv in ivs):
            bad = next(f.name for f, iv in zip(t.factors, ivs, strict=True) if iv is None)
            raise ValueError(f"The 'workload' parameter of {caller} must be made of ranges on every attribute; factor "
                             f"'{bad}' of term '{t.name}' has rows that are not 0/1 intervals. Use error_by_term.")
        groups.append(tuple(length - 1 for _, length in ivs))
    sums, count = np.zeros(layout.shape), np.zeros(layout.shape)
    for g in groups:
        part = np.ones(())
        for gi, n in zip(g, layout.shape, strict=True):
            part = np.multiply.outer(part, np.bincount(gi, minlength=n).astype(float))
        count += part
    if model.kron is not None:
        for tv, g in zip(model.kron.terms, groups, strict=True):
            sums += tv.grouped_sums(g, layout.shape)
    else:
        for c in layout.chunks(chunk_rows):
            idx = np.unravel_index(np.arange(c.local, c.local + c.stop - c.start), layout.terms[c.term].grid)
            flat = np.ravel_multi_index(tuple(gi[i] for gi, i in zip(groups[c.term], idx, strict=True)), layout.shape)
            sums += np.bincount(flat, weights=model.unit(c), minlength=sums.size).reshape(layout.shape)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, sums / np.where(count > 0, count, 1.0), np.nan) * model.sd_factor(sd) ** 2
    return ShapeErrors(mean, count.astype(np.int64), layout.attributes, layout.name, _name(strategy))


def error_by_term(workload, strategy, privacy=None, *, groups=None, norm: str | None = None,
                  chunk_rows: int = DEFAULT_CHUNK_ROWS) -> list[TermError]:
    """Per-term (per-marginal, per-table) expected squared errors: mean, rmse, smallest and largest query.

    ``groups``: one label per term; terms with the same label are pooled. Default: the terms' names
    (:func:`mmopt.answers.layout_of`) — a marginal's attributes, an SF1 table (its terms pooled).

    Examples
    --------
    >>> import mmopt
    >>> W = mmopt.workload.marginals((10, 20, 30), 2)
    >>> A = mmopt.strategy.kron(*[mmopt.strategy.identity(n) for n in (10, 20, 30)])
    >>> [(r.name, r.n_queries, round(r.mean, 9)) for r in error_by_term(W, A, mmopt.Privacy(1.0))]
    [('a0×a1', 200, 60.0), ('a0×a2', 300, 40.0), ('a1×a2', 600, 20.0)]
    """
    caller = "error_by_term"
    model, sd = expected_error_model(workload, strategy, privacy, norm=norm, caller=caller)
    layout = model.layout
    if groups is not None and (isinstance(groups, str) or not isinstance(groups, list | tuple | np.ndarray)):
        raise TypeError(f"The 'groups' parameter of {caller} must be a list with one label per term "
                        f"({len(layout.terms)}). Got {type(groups).__name__} {groups!r:.60}.")
    labels = [t.name for t in layout.terms] if groups is None else [str(g) for g in groups]
    if len(labels) != len(layout.terms):
        raise ValueError(f"The 'groups' parameter of {caller} must give one label per term ({len(layout.terms)}). "
                         f"Got {len(labels)}.")
    f2 = model.sd_factor(sd) ** 2
    stats = []  # per term: (sum, min, max, exact)
    if model.kron is not None:
        for tv in model.kron.terms:
            total = sum(c * math.prod(float(f.sum()) for f in fs) for c, fs in zip(tv.coefficients, tv.vectors,
                                                                                    strict=True))
            stats.append((total, *tv.bounds()))
    else:
        stats = [[0.0, math.inf, -math.inf, True] for _ in layout.terms]
        for c in layout.chunks(chunk_rows):
            u, s = model.unit(c), stats[c.term]
            s[0] += float(u.sum())
            s[1], s[2] = min(s[1], float(u.min())), max(s[2], float(u.max()))
    rows: dict[str, dict] = {}
    for j, (label, t, (total, lo, hi, exact)) in enumerate(zip(labels, layout.terms, stats, strict=True)):
        r = rows.setdefault(label, {"terms": [], "n": 0, "sum": 0.0, "min": math.inf, "max": -math.inf, "exact": True})
        r["terms"].append(j)
        r["n"] += t.n_queries
        r["sum"] += total
        r["min"], r["max"] = min(r["min"], lo), max(r["max"], hi)
        r["exact"] &= exact
    out = []
    for label, r in rows.items():
        mean = r["sum"] / r["n"] * f2
        out.append(TermError(label, tuple(r["terms"]), r["n"], mean, math.sqrt(mean), r["min"] * f2, r["max"] * f2,
                             r["exact"]))
    return out


def _name(strategy) -> str:
    return getattr(strategy, "name", "strategy")
