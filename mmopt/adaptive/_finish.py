"""Shared glue of the adaptive algorithms: their noise source (with the release domain's check) and result.

:func:`noise_source` checks ``rng`` (as every other adaptive function does) before handing ``noise``/``rng`` to
:func:`mmopt.adaptive._noise.resolve_noise`; given the histogram (``data=``), it also refuses, on the release
path only, what the privacy proofs do not cover (:func:`check_release_histogram`); :func:`finish` builds the
:class:`AdaptiveResult`, marking its ``path`` "release" when every sample came from OpenDP's vetted samplers and
"simulation" otherwise.

The release domain. Every proof of :mod:`mmopt.adaptive` counts records: one record moves one count by 1. And
where the float64 rounding of a value handed to OpenDP (a sum, a deviation, a score) is charged in its
sensitivity, the charge is evaluated at the public bound N = :data:`~mmopt.dense.exact_answers.MAX_RECORDS`
(2³²) on the number of records, as :mod:`mmopt.dense.exact_answers` does for A x. So on the release path
(``Noise.vetted``) the histogram must hold whole counts of at most N records in all, refused before anything is
drawn (the refusal depends on the data only through the domain's own definition, as mmopt.release's). Seeded
simulations (``noise="numpy"``) keep accepting fractional counts and totals up to
:data:`~mmopt.adaptive._common.MAX_TOTAL`.
"""

from __future__ import annotations

import numpy as np

from mmopt.adaptive._common import AdaptiveResult, make_result
from mmopt.adaptive._noise import Noise, resolve_noise
from mmopt.dense.exact_answers import MAX_RECORDS, histogram_problem

__all__ = ["block_edges", "check_release_histogram", "finish", "noise_source"]


def noise_source(noise, rng, caller: str, *, data=None, name: str = "x") -> Noise:
    """The :class:`Noise` of an algorithm call, as :func:`mmopt.adaptive.uniform`'s: ``rng`` None reaches
    :func:`resolve_noise` as None, which warns that numpy's noise is a simulation (validated into a fresh Generator
    here first, ten algorithms had said nothing; a helper's audit). With ``data`` (the checked histogram, passed
    as parameter ``name``), a vetted source also requires it in the release domain (:func:`check_release_histogram`).
    """
    src = resolve_noise(noise, rng, caller=caller)
    if data is not None:
        check_release_histogram(src, data, caller, name)
    return src


def check_release_histogram(src: Noise, data, caller: str, name: str = "x") -> None:
    """On the release path (``src.vetted``), refuse ``data`` (non-negative counts, or their total) unless it is a
    histogram of whole counts with at most MAX_RECORDS records (module docstring); nothing in simulation.

    Examples
    --------
    >>> check_release_histogram(Noise("opendp"), np.array([0.5, 2.0]), "example")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: The 'x' parameter of example must hold whole counts ...
    """
    if not src.vetted:
        return
    problem = histogram_problem(np.asarray(data, dtype=np.float64).ravel())
    if problem is not None:
        got = {"negative": "a negative count", "fractional": "fractional counts (weighted counts?)"}.get(
            problem, "more records (the total is not printed: a figure of the data)")
        raise ValueError(f"The '{name}' parameter of {caller} must hold whole counts of at most {MAX_RECORDS:,} "
                         "records in all on the release path (noise='opendp'): the privacy proofs count records, "
                         "and their float64 rounding is charged for at most that many "
                         f"(mmopt.dense.exact_answers.MAX_RECORDS). Got {got}. Release whole counts, in parts if "
                         "need be; noise='numpy' simulates with fractional counts.")


def finish(method: str, estimate, epsilon: float, budget: dict, details: dict, noise: Noise) -> AdaptiveResult:
    """The result, with ``details["noise"]`` the back-end and ``path`` "release" only for vetted samplers."""
    return make_result(method, estimate, epsilon, budget, details, noise=noise)


def block_edges(n: int, m: int) -> np.ndarray:
    """m + 1 integer edges splitting range(n) into m near-equal blocks (sizes differ by at most one), m <= n."""
    return (np.arange(m + 1, dtype=np.int64) * n) // m
