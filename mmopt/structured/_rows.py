"""Each query judged by its own norm: the dense support rule (:func:`mmopt.dense.support.unsupported`) in the
per-attribute forms of the structured routes, and the algebra path's largest query variance.

Notation: see README. A test on a factor's Gram (or on a classification made from it) cannot see a light query
whose part A never measures beside a heavy one 10⁶–10⁹ times larger: its share of G is under round-off. These
read the factor's rows instead (``row_stats``: ‖r‖² and 1ᵀr of each distinct row, or its root's columns when
they are W's rows) and compare each row's share with :func:`mmopt.dense.support.support_tolerance`.
"""

from __future__ import annotations

import math

import numpy as np

from mmopt.dense.support import support_tolerance
from mmopt.structured import algebra as alg
from mmopt.structured import factors as fc


def row_parts(stats: tuple[np.ndarray, np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """(a, b): each distinct row's residual part ‖r‖² − (1ᵀr)²/n (clipped at 0) and total part (1ᵀr)²/n, from its
    ``row_stats`` (‖r‖², 1ᵀr) on n cells."""
    q, s = stats
    return np.clip(q - s**2 / n, 0.0, None), s**2 / n


def row_shares(stats: tuple[np.ndarray, np.ndarray], n: int) -> tuple[float, float]:
    """(largest residual share, largest total share) of a row's own ‖r‖² over a factor's rows (all-zero rows
    skipped): a part round-off leaves is ~eps of it, a real one of a light row is not hidden by a heavy row."""
    q = np.where(stats[0] > 0, stats[0], 1.0)
    a, b = row_parts(stats, n)
    return float(np.max(a / q, initial=0.0)), float(np.max(b / q, initial=0.0))


def columns_off(off: np.ndarray, norms: np.ndarray, n: int) -> bool:
    """Whether some column of a root that is W's rows has its part ``off`` a factor's row space (squared, per
    column) over ``support_tolerance(n)`` of its own squared norm ``norms`` (all-zero columns skipped)."""
    keep = norms > 0
    return float(np.max(off[keep] / norms[keep], initial=0.0)) > support_tolerance(n)


def row_off_range(t, pos, shape, cache) -> bool:
    """Whether some query of term t surely has weight where λ_T = 0: per attribute, a row's residual and total
    shares of its own ‖r‖² (``row_stats``), their largest over the factor's rows, multiplied over T's attributes —
    attained by one product query. G's share let a light row beside a 10⁷-weighted one through (a helper's audit)."""
    if all(pos) or not all(f.knows_rows for f in t.factors):
        return False
    res, tot = zip(*(row_shares(cache.get(fc.row_stats, f), n) for f, n in zip(t.factors, shape, strict=True)),
                   strict=True)
    share = np.where(alg.subset_bits(len(shape)), np.array(res), np.array(tot)).prod(axis=1)
    return bool(np.max(share[~pos], initial=0.0) > support_tolerance(math.prod(shape)))  # the dense row rule


def term_off_range(t, traces, pos, shape, cache) -> bool:
    """Whether workload term t (its projection traces tr(G_t Q_T)) has weight where λ_T = 0: its Gram's share over
    round-off, or some query's (:func:`row_off_range`). The algebra path's rule, shared by the bracket's algebra
    sub-union and the per-query variances, which judged a term by its Gram share alone or by exact zeros."""
    return float(np.sum(traces[~pos])) > support_tolerance(traces.size) * float(np.sum(traces)) or \
        row_off_range(t, pos, shape, cache)


def algebra_row_upper(t, inv, shape, cache, total: float) -> tuple[float | None, float]:
    """(max variance found, proven upper) of term t's queries under spectrum⁻¹ ``inv`` (algebra path); with a
    Gram-only factor (no rows to rank) (None, ``total``): no query's variance exceeds its term's total."""
    if not all(f.knows_rows for f in t.factors):
        return None, total
    stats = [cache.get(fc.row_stats, f) for f in t.factors]
    a, b = zip(*(row_parts(st, n) for st, n in zip(stats, shape, strict=True)), strict=True)
    amax, bmax = np.array([x.max() for x in a]), np.array([x.max() for x in b])
    up = t.weight**2 * float(np.where(alg.subset_bits(len(shape)), amax, bmax).prod(axis=1) @ inv)
    if math.prod(len(q) for q, _ in stats) <= 4096:  # every distinct row kind: exact
        grids = np.meshgrid(*[np.arange(len(q)) for q, _ in stats], indexing="ij")
        idx = [g.ravel() for g in grids]
    else:  # the rows maximising each per-factor quantity: attained, maybe not the max
        idx = [np.array([np.argmax(x), np.argmax(y), np.argmax(x + y)]) for x, y in zip(a, b, strict=True)]
    sq = [stats[i][0][ix] for i, ix in enumerate(idx)]
    sm = [stats[i][1][ix] for i, ix in enumerate(idx)]
    mx = t.weight**2 * float(np.max(alg.row_variances(inv, sq, sm, shape)))
    return mx, max(up, mx)


__all__ = ["algebra_row_upper", "columns_off", "row_off_range", "row_parts", "row_shares", "term_off_range"]
