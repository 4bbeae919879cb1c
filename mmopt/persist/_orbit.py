"""The saved-strategy format for symmetric (orbit) strategies (:class:`~mmopt.structured.orbit_strategy.OrbitStrategy`).

Notation: see README and :mod:`mmopt.structured.orbit_strategy`. One kind beside those of
:mod:`mmopt.persist._format`, stored as its blocks, never the N×N Gram (``plan`` and max-variance ``optimize``
return it for grouping sets and sf1, whose domains have 62,860 cells and more; it had no kind, so a planned
census strategy could not be kept — ``mmopt plan sf1 --save`` ran 97 s, then refused):

- ``orbit``: arrays ``labels_{j}`` (attribute j's cell → orbit, orbits numbered by their first cell) and
  ``block_{c}`` (X_c of combination c, absent when nothing is measured there); the description's ``combinations``
  (per block, per attribute: −1 for the trivial part, else the orbit of a standard part).

The strategy is rebuilt through its constructor (its blocks must be symmetric PSD of the sizes the combinations
give) and Δ₂ = √max_x X_xx is recomputed from the blocks when it is used. Δ₂ holds for any partition of the cells
into orbits (every cell of an orbit has the same diagonal in both the trivial and the zero-sum part), so an edited
file can change the errors the strategy has, never make a release charge less than its noise needs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np

KINDS = ("orbit",)
F8, I8 = np.dtype("<f8"), np.dtype("<i8")


def kind_of(strategy) -> str | None:
    """"orbit" for an OrbitStrategy, else None."""
    from mmopt.structured.orbit_strategy import OrbitStrategy
    return "orbit" if isinstance(strategy, OrbitStrategy) else None


def summary(strategy) -> dict:
    """The strategy summary (:func:`mmopt.persist._format.strategy_summary`)."""
    shape = [int(s) for s in strategy.shape]
    N = math.prod(shape)
    return {"kind": "orbit", "name": strategy.name, "shape": [int(strategy.n_rows), N], "domain_shape": shape,
            "domain_size": N, "n_rows": int(strategy.n_rows)}


def encode(strategy, desc: dict) -> tuple[dict, dict[str, np.ndarray]]:
    """(description, arrays): ``desc`` completed with the combinations."""
    arrays = {f"labels_{j}": np.asarray(o.labels, dtype=I8) for j, o in enumerate(strategy.orbits)}
    arrays |= {f"block_{c}": np.asarray(X, dtype=F8) for c, X in enumerate(strategy.blocks) if X is not None}
    measured = [X is not None for X in strategy.blocks]
    return desc | {"combinations": [list(c) for c in strategy.combinations], "measured": measured}, arrays


def decode(desc: Mapping, arrays: Mapping[str, np.ndarray], shape: list[int], name: str, *, field: Callable,
           array: Callable, same_names: Callable, build: Callable, fail: Callable):
    """The orbit strategy ``desc`` describes over attribute sizes ``shape``, after its checks.

    ``field``, ``array``, ``same_names``, ``build``: :mod:`mmopt.persist._format`'s checked readers; ``fail(what)``
    raises.
    """
    from mmopt.structured.orbit_strategy import OrbitStrategy
    from mmopt.structured.orbits import Orbits

    combos = field(desc, "combinations", list, "strategy", fail)
    measured = field(desc, "measured", list, "strategy", fail)
    d = len(shape)
    if len(measured) != len(combos) or not all(isinstance(m, bool) for m in measured):
        fail(f"lists {len(measured)} measured flags (true/false) for {len(combos)} combinations")
    same_names(arrays, {f"labels_{j}" for j in range(d)} | {f"block_{c}" for c, m in enumerate(measured) if m},
               fail)
    orbits = []
    for j in range(d):
        labels = array(arrays, f"labels_{j}", I8, 1, fail)
        # orbits numbered 0, 1, … by their first cell: read at each label's first cell, in cell order, 0, 1, …
        first = np.sort(np.unique(labels, return_index=True)[1])
        if labels.size != shape[j] or not np.array_equal(labels[first], np.arange(first.size)):
            fail(f"has orbit labels for attribute {j} that are not orbits 0, 1, … of its {shape[j]} cells numbered "
                 "by their first cell")
        orbits.append(Orbits(labels, np.bincount(labels).astype(np.int64)))
    for c in combos:
        if not (isinstance(c, list) and len(c) == d and all(isinstance(k, int) and not isinstance(k, bool)
                                                             for k in c)
                and all(k == -1 or (0 <= k < o.r and o.sizes[k] >= 2) for k, o in zip(c, orbits, strict=True))):
            fail(f"has a combination {c!r:.60} that is not, per attribute, −1 or an orbit of two or more cells")
    blocks = tuple(array(arrays, f"block_{c}", F8, 2, fail) if m else None for c, m in enumerate(measured))
    A = build(lambda: OrbitStrategy(tuple(orbits), tuple(tuple(c) for c in combos), blocks, name), fail)
    if [A.n_rows, A.domain_size] != list(desc["shape"]):
        fail(f"says its strategy is {list(desc['shape'])}, but its blocks make a {A.n_rows}×{A.domain_size} one")
    return A
