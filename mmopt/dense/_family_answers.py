"""Answers W x of the closed-form workload families without forming W.

Notation: see README. The families of :mod:`mmopt.dense._workload_core` have fast products, in the row order of
their definitions (:data:`mmopt.dense._gram_forms.BUILDERS`):

* ``identity``: x; ``total``: Σx;
* ``prefix``: the cumulative sum s = cumsum(x), O(n);
* ``all_range``: Σ_{a ≤ i ≤ b} x_i for every a ≤ b (row-major, a ascending then b), one cumulative sum per
  start a, O(m) (differences s_b − s_{a−1} of one prefix sum cancel: x = [10¹⁷, 1, 1, 1] gave [1, 1] = 0);
* ``all_predicate``: the 2ⁿ − 1 subset sums, row k − 1 the cells of k's binary code, by doubling
  (sums of codes < 2ʲ⁺¹ are those < 2ʲ plus x_j), O(2ⁿ).

Only a Gram-only workload (``family="gram"``, W unknown) has no answers. :func:`apply` works along any axis
(the last by default), so a stack of estimates (``size`` draws) is answered at once.
"""

from __future__ import annotations

import numpy as np

FAMILIES = ("identity", "total", "prefix", "all_range", "all_predicate")


def apply(family: str, x: np.ndarray, axis: int = -1) -> np.ndarray:
    """W x along ``axis`` of ``x`` for a closed-form ``family`` (see the module docstring for the row order).

    Examples
    --------
    >>> apply("all_range", np.array([1.0, 2.0, 4.0])).tolist()
    [1.0, 3.0, 7.0, 2.0, 6.0, 4.0]
    >>> apply("all_predicate", np.array([1.0, 2.0, 4.0])).tolist()
    [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    """
    if family == "identity":
        return x
    if family == "total":
        return x.sum(axis=axis, keepdims=True)
    if family == "prefix":
        return np.cumsum(x, axis=axis)
    if family == "all_range":
        x = np.moveaxis(x, axis, -1)
        out = np.concatenate([np.cumsum(x[..., a:], axis=-1) for a in range(x.shape[-1])], axis=-1)
        return np.moveaxis(out, -1, axis)
    if family == "all_predicate":
        x = np.moveaxis(x, axis, -1)
        sums = np.zeros((*x.shape[:-1], 2 ** x.shape[-1]))
        for j in range(x.shape[-1]):
            half = 2**j
            sums[..., half:2 * half] = sums[..., :half] + x[..., j:j + 1]
        return np.moveaxis(sums[..., 1:], -1, axis)
    raise ValueError(f"apply: no fast product for workload family {family!r}; expected one of {list(FAMILIES)}.")
