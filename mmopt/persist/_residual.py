"""The saved-strategy format for residual strategies (:class:`~mmopt.structured.residual.ResidualStrategy`).

Notation: see README and :mod:`mmopt.structured.residual.strategy`. One kind beside those of
:mod:`mmopt.persist._format`:

- ``residual``: the stack of c_S·K_S over the measured subsets S; arrays ``masks`` (S as a bitmask, bit i =
  attribute i, in subset order) and ``weights`` (c_S); the description also lists the subsets. Rebuilt bit for bit,
  as the residual strategy: a records release takes it back as its ``strategy`` (stored as the product/union it
  stands for, it loaded as a union of Kronecker products that release_marginals could not measure).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np

KINDS = ("residual",)
F8, I8 = np.dtype("<f8"), np.dtype("<i8")


def kind_of(strategy) -> str | None:
    """"residual" for a ResidualStrategy, else None."""
    from mmopt.structured.residual.strategy import ResidualStrategy
    return "residual" if isinstance(strategy, ResidualStrategy) else None


def encode(strategy, desc: dict) -> tuple[dict, dict[str, np.ndarray]]:
    """(description, arrays): ``desc`` completed with the subsets."""
    if len(strategy.shape) > 62:  # int64's bits
        raise ValueError(f"save stores residual strategies of ≤ 62 attributes (a bitmask per subset); this one has "
                         f"{len(strategy.shape)}. Save its weights and subsets yourself (strategy.weights, "
                         "strategy.subsets).")
    masks = np.array([sum(1 << i for i in S) for S in strategy.subsets], dtype=I8)
    return desc | {"subsets": [list(S) for S in strategy.subsets]}, {"masks": masks,
                                                                     "weights": strategy.weights.astype(F8)}


def decode(desc: Mapping, arrays: Mapping[str, np.ndarray], shape: list[int], name: str, *, field: Callable,
           array: Callable, same_names: Callable, build: Callable, fail: Callable):
    """The residual strategy ``desc`` describes over attribute sizes ``shape``, after its checks.

    ``field``, ``array``, ``same_names``, ``build``: :mod:`mmopt.persist._format`'s checked readers; ``fail(what)``
    raises.
    """
    from mmopt.structured.residual.strategy import ResidualStrategy

    same_names(arrays, {"masks", "weights"}, fail)
    masks, w = array(arrays, "masks", I8, 1, fail).tolist(), array(arrays, "weights", F8, 1, fail)
    d = len(shape)
    if len(masks) != w.size or not all(0 <= m < 2**d for m in masks):
        fail(f"has {len(masks)} residual masks for {w.size} weights, or masks outside [0, 2^{d}) for its {d} "
             "attributes")
    subsets = [tuple(i for i in range(d) if m >> i & 1) for m in masks]
    if field(desc, "subsets", list, "strategy", fail) != [list(S) for S in subsets]:
        fail("lists residual subsets that disagree with its masks")
    A = build(lambda: ResidualStrategy(tuple(shape), tuple(subsets), w, name), fail)
    if [A.n_rows, A.domain_size] != list(desc["shape"]) or math.prod(shape) != A.domain_size:
        fail(f"says its strategy is {list(desc['shape'])}, but its subsets make a {A.n_rows}×{A.domain_size} one")
    return A
