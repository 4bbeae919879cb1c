"""The exponential mechanism (McSherry & Talwar, FOCS 2007) over a finite set of candidates.

Candidate r is chosen with probability

    p(r) = exp(ε s(r) / (2Δ)) / Σ_r' exp(ε s(r') / (2Δ)),

where s is the score (utility) vector and Δ its sensitivity: |s_x(r) − s_x'(r)| ≤ Δ for every r and every
pair of neighbouring data sets. Then p_x(r) ≤ e^{ε/2} · e^{ε/2} · p_x'(r) (numerator and normaliser each move
by at most e^{ε/2}), so the choice is ε-DP.

Computed stably: the logits ε s/(2Δ) are normalised by their log-sum-exp, so scores of any magnitude (DPBench
scores reach 10⁷ at ε = 1) neither overflow nor underflow to a zero normaliser; the top score is subtracted
before scaling, so the probabilities keep full relative precision in the score differences. Sampling uses the Gumbel-max
identity: argmax_r (logit_r + G_r) with G_r i.i.d. standard Gumbel has exactly the distribution p (Gumbel 1954;
e.g. Durfee & Rogers, NeurIPS 2019, for its use in DP). :func:`exponential_mechanism` draws numpy's Gumbel
noise by default (**simulation only**) and OpenDP's vetted sampler with ``noise="opendp"``, as the algorithms do
through ``Noise.exponential`` (:mod:`mmopt.adaptive._opendp_noise`).
"""

from __future__ import annotations

import numpy as np

from mmopt._base import validation as v
from mmopt.adaptive._common import log_sum_exp

__all__ = ["exponential_mechanism", "exponential_probabilities"]


def _logits(scores, epsilon, sensitivity, caller: str) -> np.ndarray:
    s = v.check_vector(scores, name="scores", caller=caller)
    if s.size == 0:
        raise ValueError(f"The 'scores' parameter of {caller} must have at least one candidate. Got none.")
    eps = v.check_real(epsilon, name="epsilon", caller=caller, low=0.0, low_open=True)
    delta = v.check_real(sensitivity, name="sensitivity", caller=caller, low=0.0, low_open=True)
    # shift by the top score before scaling: s − max(s) is exact for nearby scores, so huge scores keep
    # their differences (scaling first would lose ~1e-16·|ε s/2Δ| absolutely)
    with np.errstate(over="ignore", invalid="ignore"):
        logits = (s - s.max()) * (eps / (2.0 * delta))
    if not np.all(np.isfinite(logits)):
        raise ValueError(f"{caller}: ε·score/(2Δ) overflows float64 (max |score| = {np.max(np.abs(s)):.3g}, "
                         f"ε = {eps:g}, Δ = {delta:g}).")
    return logits


def exponential_probabilities(scores, epsilon: float, sensitivity: float) -> np.ndarray:
    """The selection probabilities p ∝ exp(ε·score/(2Δ)), summing to 1 (module docstring).

    Examples
    --------
    >>> p = exponential_probabilities([0.0, 1.0], epsilon=2.0, sensitivity=1.0)
    >>> bool(np.isclose(p[1] / p[0], np.e))
    True
    """
    logits = _logits(scores, epsilon, sensitivity, "exponential_probabilities")
    return np.exp(logits - log_sum_exp(logits))


def exponential_mechanism(scores, epsilon: float, sensitivity: float, rng=None, *, noise: str = "numpy") -> int:
    """Draw one index with the probabilities of :func:`exponential_probabilities` (Gumbel-max).

    ``noise="numpy"`` (the default, for studies) draws numpy's Gumbel noise from ``rng`` (a seed, a Generator or
    None): **simulation only**. ``noise="opendp"`` is the release path: OpenDP's vetted sampler of the same
    distribution (:func:`mmopt.adaptive._opendp_noise.exponential`); ``rng`` must then be None.

    Examples
    --------
    >>> exponential_mechanism([0.0, 0.0, 1e6], epsilon=1.0, sensitivity=1.0, rng=0)
    2
    """
    caller = "exponential_mechanism"
    logits = _logits(scores, epsilon, sensitivity, caller)
    v.check_choice(noise, name="noise", caller=caller, choices=("numpy", "opendp"))
    if noise == "opendp":
        if rng is not None:
            raise ValueError(f"The 'rng' parameter of {caller} must be None with noise='opendp' (OpenDP's vetted "
                             f"samplers cannot be seeded). Got {rng!r} instead; drop it, or use noise='numpy' for "
                             "a reproducible simulation.")
        from mmopt.adaptive._opendp_noise import exponential  # lazy: OpenDP is an optional dependency
        return exponential(scores, epsilon, sensitivity)
    gen = v.check_rng(rng, name="rng", caller=caller)
    return int(np.argmax(logits + gen.gumbel(size=logits.shape)))
