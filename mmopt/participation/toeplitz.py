"""Sensitivity and exact error under a participation schema of Toeplitz, banded and BLT strategies, never n×n.

Notation: see :mod:`mmopt.participation.sensitivity` and :mod:`mmopt.toeplitz.strategies`. For C = D·T(c)
(D = diag(√y), y = 1 when not row-scaled), X = CᵀC has, for s ≤ t and d = t − s,

    X_st = Σ_{i ≥ t} y_i c_{i−s} c_{i−t} = Σ_{m ≥ 0} y_{t+m} c_{m+d} c_m,

so the diagonal offsets d = 0, b, …, (k − 1)b that fixed epochs need are k correlations of y with c∘c shifted:
O(k·n) for small bands, O(k·n log n) by FFT otherwise; with y = 1 a reverse cumulative sum. With at most b bands
(len(c) ≤ b) every pattern's cross terms vanish and Δ² = the best sum of column norms² along a pattern, exact
for both schemas; for minimum separation and c ≥ 0 non-increasing (unscaled) the worst pattern is
{0, b, …, (k − 1)b} (proof in :mod:`mmopt.participation.sensitivity`). Other minimum-separation cases use the
dense Gram up to mmopt's allocation limit.

The error is exact: Δ²·‖W C⁻¹‖²_F with ‖W C⁻¹‖²_F from :func:`mmopt.toeplitz.evaluate` (its Δ divided out).
"""

from __future__ import annotations

import numpy as np

from mmopt.participation.schemas import FixedEpochs, MinSeparation, Schema, Single
from mmopt.participation.sensitivity import (
    Sensitivity,
    _result,
    best_pattern_sum,
    block_bounds,
    gram_sensitivity_squared,
)

__all__ = ["schema_error", "toeplitz_sensitivity_squared"]


def _offset_diagonal(c: np.ndarray, y: np.ndarray | None, n: int, d: int,
                     scale: float | None = None) -> tuple[np.ndarray, float]:
    """(X_{s,s+d} for s = 0 … n − 1 − d, a bound on each entry's round-off): with row scales, at most 10⁻⁹ of
    ``scale`` (default the largest entry; :func:`mmopt.toeplitz._series.correlate_tail_accurate`), else 0 (the
    cumulative sums' own round-off, as everywhere)."""
    from mmopt.toeplitz import _series

    q = c[d:] * c[:len(c) - d] if d < len(c) else np.zeros(1)  # q_m = c_{m+d} c_m
    q = np.pad(q, (0, max(n - len(q), 0)))[:n]
    if y is None:  # Σ_{m ≤ n−1−t} q_m, t = s + d
        P = np.cumsum(q)
        return P[n - 1 - (np.arange(n - d) + d)], 0.0
    # Σ_m y_{t+m} q_m = correlate_tail(q, y, n)[t], every entry accurate (a sensitivity reads it)
    out, err = _series.correlate_tail_accurate(q, y, n, caller="sensitivity_squared", scale=scale)
    return out[d:], err


def _column_norms(C) -> np.ndarray:
    """Each column's norm², rounded up by its round-off bound (non-negative sums: an upper bound)."""
    cols, err = _offset_diagonal(C.column, C.row_scale, C.n, 0)
    return cols + err


def toeplitz_sensitivity_squared(C, schema: Schema, *, caller: str = "sensitivity_squared") -> Sensitivity:
    """Δ² of a :class:`~mmopt.toeplitz.ToeplitzStrategy` under ``schema`` (module docstring); a run length the
    schema does not divide is refused as ``caller``'s parameter 'strategy'.

    Examples
    --------
    >>> import mmopt
    >>> C = mmopt.toeplitz.sqrt_strategy(8)
    >>> s = toeplitz_sensitivity_squared(C, mmopt.participation.fixed_epochs(2))
    >>> X = C.to_dense().T @ C.to_dense()
    >>> bool(np.isclose(s.squared, max(X[[j, j + 4]][:, [j, j + 4]].sum() for j in range(4)))), s.exact
    (True, True)
    """
    _check_inputs(C, schema, caller)
    n, c, y = C.n, C.column, C.row_scale
    bands = int(np.flatnonzero(c)[-1]) + 1
    if isinstance(schema, Single):
        d = float(_column_norms(C).max())
        return _result(d, d, "single: largest column norm²", always_exact=True)
    schema.check_n(n, caller, "strategy")
    b, k = schema.separation(n), schema.participations(n)
    if bands <= b:
        cols = _column_norms(C)
        if isinstance(schema, FixedEpochs):
            value = float(cols.reshape(k, b).sum(axis=0).max())
        else:
            value = best_pattern_sum(cols, b, k)[0]
        return _result(value, value, f"at most b = {b} bands: the best pattern's column norms²", always_exact=True)
    if isinstance(schema, FixedEpochs):
        diagonal, err = _offset_diagonal(c, y, n, 0)
        top = float(diagonal.max()) + err  # every |X_st| ≤ max X_tt: the off-diagonals' round-off scale
        pairs = [_offset_diagonal(c, y, n, i * b, scale=top) for i in range(1, k)]
        diagonals = [diagonal] + [values for values, _ in pairs]
        err = max([err] + [e for _, e in pairs])
        j = np.arange(b)
        blocks = np.empty((b, k, k))
        for i in range(k):
            for i2 in range(i, k):
                blocks[:, i, i2] = blocks[:, i2, i] = diagonals[i2 - i][j + i * b]
        lo, hi = block_bounds(blocks, top=True)
        lo, hi = lo - k * k * err, hi + k * k * err  # each of a block's k² entries within err
        return _result(lo.max(), hi.max(), "fixed epochs: the k×k blocks from k offset diagonals"
                       + ("" if np.all(blocks >= 0) else
                          ", sign vectors, low-rank Y ≤ Δ² ≤ min(Σ|X|, Weyl, dual points)"))
    if isinstance(schema, MinSeparation) and y is None and np.all(c >= 0) and np.all(np.diff(c) <= 0):
        steps = np.arange(k) * b
        diagonals = [_offset_diagonal(c, None, n, i * b)[0] for i in range(k)]  # one per offset, not per pair
        value = 0.0
        for i in range(k):
            for i2 in range(k):
                value += diagonals[abs(i - i2)][min(steps[i], steps[i2])]
        return _result(value, value, "min separation, c ≥ 0 non-increasing: the pattern {0, b, …}",
                       always_exact=True)
    return gram_sensitivity_squared(_dense_gram(C), schema)


def _check_inputs(C, schema, caller: str) -> None:
    """A ToeplitzStrategy and a schema, or a TypeError naming them (both failed as AttributeError: a helper's
    probe)."""
    from mmopt.toeplitz.strategies import ToeplitzStrategy
    if not isinstance(C, ToeplitzStrategy):
        raise TypeError(f"The 'strategy' parameter of {caller} must be a ToeplitzStrategy (mmopt.toeplitz). Got "
                        f"{type(C).__name__} instead. For a matrix C use "
                        "mmopt.participation.sensitivity_squared(C, schema).")
    if not isinstance(schema, Schema):
        raise TypeError(f"The 'schema' parameter of {caller} must be a participation schema: "
                        "mmopt.participation.single(), fixed_epochs(k) or min_separation(b, k). Got "
                        f"{type(schema).__name__} instead.")


def _dense_gram(C) -> np.ndarray:
    from mmopt._base import validation as v
    v.check_allocation(C.n * C.n, what=f"the {C.n:,}×{C.n:,} Gram CᵀC", caller="sensitivity_squared",
                       remedy=" Under minimum separation at this size use a strategy with at most b bands, or "
                              "c ≥ 0 non-increasing without row scaling.")
    A = C.to_dense()
    return A.T @ A


def schema_error(workload, C, schema: Schema) -> tuple[float, Sensitivity]:
    """(Δ²·‖W C⁻¹‖²_F, Δ²) at unit σ: the exact total error of the Toeplitz strategy C under ``schema``."""
    from mmopt.toeplitz.error import evaluate

    _check_inputs(C, schema, "schema_error")
    report = evaluate(workload, C)
    sens = toeplitz_sensitivity_squared(C, schema, caller="schema_error")
    return report.total_squared_error / report.sensitivity ** 2 * sens.squared, sens
