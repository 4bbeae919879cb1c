"""A Hilbert-curve order of the cells of a 2-D grid (as DAWA and DPBench use for 2-D data).

The curve of side d = 2^k (the smallest power of two ≥ max(n1, n2)) is traced with the classical
index-to-coordinates map (Hilbert 1891; the iterative form of Warren, *Hacker's Delight*, §16). Cells outside
the n1 × n2 grid are skipped, so every grid cell appears exactly once: the order is a bijection of the
n1·n2 cells, and on a 2^k × 2^k grid consecutive cells are edge-neighbours. DPBench instead pads the grid with
zero cells to d × d and crops afterwards; skipping keeps the domain unchanged and spends nothing on padding.
"""

from __future__ import annotations

import numpy as np

from mmopt._base import validation as v

__all__ = ["hilbert_order"]


def hilbert_order(shape) -> np.ndarray:
    """Row-major indices of the cells of an (n1, n2) grid in Hilbert-curve order.

    ``x.ravel()[order]`` lists the cells of x along the curve; ``out.ravel()[order] = seq`` puts a sequence
    back. Row index = the curve's first coordinate.

    Examples
    --------
    >>> hilbert_order((2, 2)).tolist()
    [0, 1, 3, 2]
    >>> sorted(hilbert_order((3, 5)).tolist()) == list(range(15))
    True
    """
    caller = "hilbert_order"
    shape = v.check_shape(shape, caller=caller)
    if len(shape) != 2:
        raise ValueError(f"The 'shape' parameter of {caller} must have two sizes (n1, n2). Got {shape}.")
    n1, n2 = shape
    d = 1 << max(0, (max(n1, n2) - 1).bit_length())
    v.check_allocation(3 * d * d, what=f"the Hilbert curve of side {d}", caller=caller)
    r, c = _d2xy(d, np.arange(d * d, dtype=np.int64))
    keep = (r < n1) & (c < n2)
    return (r[keep] * n2 + c[keep]).astype(np.intp)


def _d2xy(d: int, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Coordinates of positions t on the Hilbert curve of side d (a power of two), vectorised."""
    x = np.zeros_like(t)
    y = np.zeros_like(t)
    s = 1
    while s < d:
        rx = 1 & (t // 2)
        ry = 1 & (t ^ rx)
        # rotate the quadrant: reflect when rx = 1, ry = 0, then swap when ry = 0
        flip = (ry == 0) & (rx == 1)
        x = np.where(flip, s - 1 - x, x)
        y = np.where(flip, s - 1 - y, y)
        swap = ry == 0
        x, y = np.where(swap, y, x), np.where(swap, x, y)
        x = x + s * rx
        y = y + s * ry
        t = t // 4
        s *= 2
    return x, y
