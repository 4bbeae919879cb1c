"""Shared glue of the newer adaptive algorithms (PHP, EFPA, UGrid/AGrid): their noise source and result.

:func:`noise_source` checks ``rng`` (as every other adaptive function does) before handing ``noise``/``rng`` to
:func:`mmopt.adaptive._noise.resolve_noise`; :func:`finish` builds the :class:`AdaptiveResult`, marking its
``path`` "release" when every sample came from OpenDP's vetted samplers and "simulation" otherwise.
"""

from __future__ import annotations

import numpy as np

from mmopt.adaptive._common import AdaptiveResult, make_result
from mmopt.adaptive._noise import Noise, resolve_noise

__all__ = ["block_edges", "finish", "noise_source"]


def noise_source(noise, rng, caller: str) -> Noise:
    """The :class:`Noise` of an algorithm call, as :func:`mmopt.adaptive.uniform`'s: ``rng`` None reaches
    :func:`resolve_noise` as None, which warns that numpy's noise is a simulation (validated into a fresh Generator
    here first, ten algorithms had said nothing; a helper's audit)."""
    return resolve_noise(noise, rng, caller=caller)


def finish(method: str, estimate, epsilon: float, budget: dict, details: dict, noise: Noise) -> AdaptiveResult:
    """The result, with ``details["noise"]`` the back-end and ``path`` "release" only for vetted samplers."""
    return make_result(method, estimate, epsilon, budget, details, noise=noise)


def block_edges(n: int, m: int) -> np.ndarray:
    """m + 1 integer edges splitting range(n) into m near-equal blocks (sizes differ by at most one), m <= n."""
    return (np.arange(m + 1, dtype=np.int64) * n) // m
