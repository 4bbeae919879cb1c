"""Uniform: a noisy total spread evenly over the cells (the "Uniform" baseline of DPBench).

Hay, Machanavajjhala, Miklau, Chen & Zhang, *Principled Evaluation of Differentially Private Algorithms using
DPBench* (SIGMOD 2016), §5: ``dpcomp_core.algorithm.uniform.uniform_noisy_engine``. With ``noise="opendp"``
the noisy total is drawn by OpenDP's vetted Laplace sampler (release-grade); ``noise="numpy"`` (default) is a
seeded simulation.
"""

from __future__ import annotations

import numpy as np

from mmopt.adaptive._common import AdaptiveResult, check_epsilon, check_histogram, laplace_scale, make_result
from mmopt.adaptive._finish import noise_source

__all__ = ["uniform"]


def uniform(x, epsilon: float, rng=None, *, noise="numpy") -> AdaptiveResult:
    """x̂_j = (Σx + Lap(1/ε)) / n for every cell j.

    Privacy: the total Σx has sensitivity exactly 1 under add/remove of one record, so the Laplace
    mechanism with scale 1/ε is ε-DP; spreading it is post-processing. The noisy total is not clipped, so
    Σx̂ equals it exactly (up to rounding) and x̂ is unbiased for the total.

    Parameters
    ----------
    x : array_like, 1-D (n,) or 2-D (n1, n2)
        Non-negative cell counts.
    epsilon : float
        ε > 0, all of it spent on the total.
    rng : numpy.random.Generator, int or None
        Seed or Generator (same seed, same output); must be None with ``noise="opendp"``.
    noise : {"numpy", "opendp"} or Noise, default "numpy"
        "numpy": seeded numpy noise, for simulation only; "opendp": OpenDP's vetted sampler, release-grade
        (``path == "release"``).

    Returns
    -------
    AdaptiveResult
        ``budget = {"total": ε}``; ``details["noisy_total"]``, ``details["noise_scale"]``.

    Examples
    --------
    >>> r = uniform([3, 0, 2, 5], epsilon=1.0, rng=0)
    >>> r.estimate.shape, bool(np.isclose(r.estimate.sum(), r.details["noisy_total"]))
    ((4,), True)
    """
    caller = "uniform"
    X = check_histogram(x, caller)
    eps = check_epsilon(epsilon, caller)
    src = noise_source(noise, rng, caller, data=X)
    b = laplace_scale(1.0, eps, "the total", caller)
    noisy_total = float(src.add_laplace(X.sum(), b))
    estimate = np.full(X.shape, noisy_total / X.size)
    return make_result("uniform", estimate, eps, {"total": eps},
                       {"noisy_total": noisy_total, "noise_scale": b, "sensitivity": 1.0}, src)
