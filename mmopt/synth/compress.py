"""MST's domain compression: the values whose noisy one-way count is small are merged into one cell per attribute.

McKenna, Miklau & Sheldon (2021, arXiv:2108.04978), §4 "domain compression", and ``compress_domain`` of their
reference code (``mechanisms/mst.py`` of github.com/ryan112358/private-pgm). Notation: see README and
:mod:`mmopt.synth.residuals`.

From the released least-squares one-way marginal ŷᵢ of attribute i, with per-cell standard deviation sᵢ, value x is
*supported* when ŷᵢ(x) ≥ 3sᵢ. When at least two values of i are unsupported, they are merged into one extra cell
(the paper's rule; merging a single value changes nothing), so the later 2-way measurements spread their noise
over fewer cells: a merged cell holds the sum of k noisy-free counts but one cell's noise instead of k. If no value
is supported the one with the largest ŷᵢ is kept apart, so an attribute never shrinks to one cell.

**Privacy.** The maps cᵢ (original value → compressed cell) are post-processing of a released measurement, so
measuring the data through them is adaptive composition; merging cells keeps every record in exactly one cell of
every marginal, so the sensitivities of the counts (Δ₂ = 1 per marginal) and of the selection scores (Δ = 1)
are those of the uncompressed domain.

**Expansion** (post-processing). A compressed table T′ is spread back over the original values by the
within-cell shares qᵢ(x) = ŷᵢ⁺(x)/Σ_{x′: cᵢ(x′)=cᵢ(x)} ŷᵢ⁺(x′), ŷᵢ⁺ the projection of ŷᵢ onto the simplex (uniform
where that sum is 0): T(x_a, x_b) = T′(c_a(x_a), c_b(x_b))·q_a(x_a)·q_b(x_b). Expanded tables keep their margins
(each row of T′ splits into rows summing to it), so consistent, non-negative tables stay so and a tree of them is
still exactly sampled. The paper spreads the merged mass uniformly; ŷᵢ⁺ is as private and puts no mass on values
the projection rules out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mmopt.synth import projection as pj

__all__ = ["Compression", "compression", "THRESHOLD"]

#: The paper's threshold, in standard deviations of the noisy one-way count.
THRESHOLD = 3.0


@dataclass(frozen=True, eq=False)
class Compression:
    """Per attribute: ``maps[i]`` (original value → compressed cell, int64) and ``shares[i]`` (qᵢ, module
    docstring); ``shape`` is the compressed domain's, ``original`` the original's."""

    original: tuple[int, ...]
    shape: tuple[int, ...]
    maps: tuple = ()
    shares: tuple = ()

    @property
    def merged(self) -> tuple[int, ...]:
        """The attributes that lost cells."""
        return tuple(i for i, (n, m) in enumerate(zip(self.original, self.shape, strict=True)) if m < n)

    def coarsen(self, table: np.ndarray, attributes) -> np.ndarray:
        """Sum the cells of a table on the original domain of ``attributes`` into the compressed cells."""
        out = np.asarray(table, dtype=np.float64)
        for axis, i in enumerate(attributes):
            if self.shape[i] == self.original[i]:
                continue
            moved = np.moveaxis(out, axis, 0)
            acc = np.zeros((self.shape[i],) + moved.shape[1:])
            np.add.at(acc, self.maps[i], moved)
            out = np.moveaxis(acc, 0, axis)
        return out

    def expand(self, table: np.ndarray, attributes) -> np.ndarray:
        """Spread a table on the compressed domain of ``attributes`` over the original values (module docstring)."""
        out = np.asarray(table, dtype=np.float64)
        for axis, i in enumerate(attributes):
            if self.shape[i] == self.original[i]:
                continue
            moved = np.moveaxis(out, axis, 0)[self.maps[i]]
            moved = moved * self.shares[i].reshape((-1,) + (1,) * (moved.ndim - 1))
            out = np.moveaxis(moved, 0, axis)
        return out


def compression(oneway, deviations, total: float, threshold: float = THRESHOLD) -> Compression:
    """The compression read off noisy one-way marginals ``oneway[i]`` with per-cell standard deviations
    ``deviations[i]`` (module docstring); ``total`` is the noisy number of records (for the shares).

    Examples
    --------
    >>> c = compression([np.array([50.0, 2.0, -1.0, 40.0]), np.array([30.0, 60.0])], [3.0, 3.0], 90.0)
    >>> c.shape, c.maps[0].tolist()
    ((3, 2), [0, 2, 2, 1])
    >>> c.expand(c.coarsen(np.array([50.0, 2.0, 0.0, 40.0]), (0,)), (0,)).tolist()
    [50.0, 2.0, 0.0, 40.0]
    """
    original = tuple(int(np.size(y)) for y in oneway)
    shape, maps, shares = [], [], []
    for y, s in zip(oneway, deviations, strict=True):
        y = np.asarray(y, dtype=np.float64).ravel()
        keep = y >= threshold * float(s)
        if not keep.any():
            keep[int(np.argmax(y))] = True
        if (~keep).sum() < 2:  # nothing to merge
            shape.append(y.size)
            maps.append(np.arange(y.size, dtype=np.int64))
            shares.append(np.ones(y.size))
            continue
        cell = np.full(y.size, int(keep.sum()), dtype=np.int64)  # the merged cell is the last
        cell[keep] = np.arange(int(keep.sum()))
        p = pj.simplex(y, max(float(total), 1.0))
        mass = np.bincount(cell, weights=p, minlength=int(keep.sum()) + 1)
        size = np.bincount(cell, minlength=int(keep.sum()) + 1).astype(np.float64)
        q = np.where(mass[cell] > 0, p / np.where(mass[cell] > 0, mass[cell], 1.0), 1.0 / size[cell])
        shape.append(int(keep.sum()) + 1)
        maps.append(cell)
        shares.append(q)
    return Compression(original, tuple(shape), tuple(maps), tuple(shares))
