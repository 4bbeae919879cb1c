"""A synthetic census-like geography: nation ⊃ states ⊃ counties (⊃ tracts), with US-like skewed sizes.

How it is generated (documented so that every experiment using it can be reproduced): the number of children of
every node is 1 + a negative-binomial draw rescaled so the level has exactly the requested total, which gives the
long right tail of real geographies (US: 1 county in DC, 254 in Texas; 1 to ~3,000 tracts per county). The
numbers are not the Census Bureau's; only the shape of the size distribution is imitated.
"""

from __future__ import annotations

import numpy as np

from mmopt._base import validation as v
from mmopt.hierarchy.tree import Hierarchy


def _split(total: int, parts: int, rng: np.random.Generator, shape: float) -> np.ndarray:
    """``parts`` positive integers summing to ``total``, skewed (gamma weights of the given shape)."""
    w = rng.gamma(shape, size=parts)
    extra = total - parts
    k = np.floor(w / w.sum() * extra).astype(np.int64)
    short = extra - int(k.sum())
    k[np.argsort(-(w / w.sum() * extra - k))[:short]] += 1  # largest remainders first: exact total
    return 1 + k


def census_like(states: int = 51, counties: int = 3_143, tracts: int | None = None, *, seed: int = 0,
                skew: float = 0.7) -> Hierarchy:
    """nation ⊃ ``states`` ⊃ ``counties`` (⊃ ``tracts`` when given) with skewed numbers of children.

    Examples
    --------
    >>> g = census_like(states=5, counties=40, tracts=200, seed=1)
    >>> g.level_names, g.n_groups
    (('nation', 'state', 'county', 'tract'), (1, 5, 40, 200))
    """
    caller = "census_like"
    states = v.check_int(states, name="states", caller=caller)
    counties = v.check_int(counties, name="counties", caller=caller, low=states)
    rng = np.random.default_rng(seed)
    per_state = _split(counties, states, rng, skew)
    parents = [np.zeros(states, dtype=np.int64), np.repeat(np.arange(states), per_state)]
    names = ["nation", "state", "county"]
    if tracts is not None:
        tracts = v.check_int(tracts, name="tracts", caller=caller, low=counties)
        parents.append(np.repeat(np.arange(counties), _split(tracts, counties, rng, skew)))
        names.append("tract")
    return Hierarchy(tuple(parents), tuple(names), name="geography")


def random_tree(seed: int, depth: int = 3, max_children: int = 4) -> Hierarchy:
    """A random tree: every node has 1 to ``max_children`` children (uniform), ``depth`` levels below the root —
    small irregular trees for tests and oracles (single-child nodes included on purpose).

    >>> random_tree(0).depth
    3
    """
    rng = np.random.default_rng(seed)
    parents, width = [], 1
    for _ in range(v.check_int(depth, name="depth", caller="random_tree")):
        kids = rng.integers(1, max_children + 1, size=width)
        parents.append(np.repeat(np.arange(width), kids))
        width = int(kids.sum())
    return Hierarchy(tuple(parents), tuple(f"l{i}" for i in range(depth + 1)), name="geo")
