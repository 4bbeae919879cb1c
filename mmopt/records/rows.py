"""Rows of cell codes as a DataFrame labelled by a domain: the synthetic records of MST, AIM and Private-PGM.

A categorical attribute's column holds its categories; a binned attribute's holds a number inside each bin (its
left edge where finite, ``bins="values"``), which :func:`mmopt.records.marginal_counts` reads back into the same
bin, or its labels "[a, b)" (``bins="labels"``, for reading only: counting drops labels as values outside the
domain, so rows written with labels and counted again saw zero rows — a helper's probe).
"""

from __future__ import annotations

import math

import numpy as np

from mmopt._base import validation as v

__all__ = ["MAX_ROWS", "bin_value", "check_seed", "labelled_rows"]

#: Rows drawn per call at most, of :meth:`mmopt.synth.result.Synthetic.records` and
#: :meth:`mmopt.records.pgm.PGMEstimate.synthetic` (8 bytes per attribute each while sampling).
MAX_ROWS = 10**8


def check_seed(seed, caller: str):
    """None or an int in [0, 2¹²⁸), the seed of a synthetic draw: numpy pads a seed's entropy to four 32-bit words
    before a spawn key, so SeedSequence(s, spawn_key=(i,)) was SeedSequence(s + i·2¹²⁸), and
    :meth:`mmopt.synth.result.Synthetic.batches` of seeds past 2¹²⁸ repeated another seed's batches (a helper's
    audit)."""
    return None if seed is None else v.check_int(seed, name="seed", caller=caller, low=0, high=2**128 - 1)


def bin_value(lo: float, hi: float) -> float:
    """A value of the bin [lo, hi): lo when finite, else the float just below hi (hi − 1 rounds to hi past 2⁵³:
    a bin (−inf, 1e20) was counted in the next one).

    >>> bin_value(18.0, 65.0), bin_value(-math.inf, 0.0) < 0.0
    (18.0, True)
    """
    if np.isfinite(lo):
        return float(lo)
    return math.nextafter(float(hi), -math.inf) if np.isfinite(hi) else 0.0


def labelled_rows(domain, codes: np.ndarray, bins: str = "values"):
    """The rows of cell ``codes`` (n × d, attribute i's cell index in column i) as a DataFrame: one pandas
    Categorical column per attribute, named by the domain (module docstring for ``bins``)."""
    import pandas as pd
    cols = {}
    for i, a in enumerate(domain.attributes):
        cats = a.categories if a.categories is not None else a.labels if bins == "labels" else \
            [bin_value(a.edges[j], a.edges[j + 1]) for j in range(a.size)]
        cols[a.name] = pd.Categorical.from_codes(codes[:, i], categories=list(cats))
    return pd.DataFrame(cols)
