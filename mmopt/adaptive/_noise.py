"""Where the data-adaptive algorithms' randomness comes from: seeded numpy (studies) or OpenDP (release).

Every private step of an algorithm in :mod:`mmopt.adaptive` draws through one :class:`Noise` object:
``laplace(scale, size)``, ``gaussian(scale, size)`` and ``exponential(scores, epsilon, sensitivity)``
(the exponential mechanism's choice; ``exponential_monotone`` for scores that move one way only), plus
``add_laplace(values, scale)`` / ``add_gaussian`` (the mechanism itself: with OpenDP the data value goes into the
vetted measurement, which rounds the noisy value once), ``add_discrete_laplace`` (integers, exactly) and
``gumbel_max(logits)`` (an exact Gibbs draw, for samplers whose privacy is proven for the whole distribution,
e.g. DAWA's partition). :func:`resolve_noise` builds it from the public ``noise=`` and ``rng=``
parameters: ``noise="numpy"`` with a seed/Generator is reproducible and for simulation only (floating-point
samplers leak through their low-order bits, Mironov 2012); ``noise="opendp"`` draws every sample with OpenDP's
vetted samplers (the release path).

This module is the interface; the OpenDP back-end is in :mod:`mmopt.adaptive._opendp_noise`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from mmopt._base.validation import check_rng
from mmopt.adaptive._exponential import exponential_mechanism
from mmopt.adaptive._opendp_noise import RELEASE_MARGIN  # (imports OpenDP only when it draws)

BACKENDS = ("numpy", "opendp")


@dataclass(frozen=True, eq=False)
class Noise:
    """A noise source for the adaptive algorithms.

    Attributes
    ----------
    backend : str
        "numpy" (seeded, simulation only) or "opendp" (vetted samplers, for release).
    rng : numpy.random.Generator or None
        The numpy generator (backend "numpy" only).

    Examples
    --------
    >>> n = resolve_noise("numpy", 0, caller="example")
    >>> n.laplace(1.0, 3).shape, n.backend
    ((3,), 'numpy')
    """

    backend: str
    rng: np.random.Generator | None = None

    def __post_init__(self):
        # a Noise("numpy") without a generator failed at its first draw (AttributeError), Noise("bogus") ran on
        # OpenDP's samplers and was reported as a simulation
        if self.backend not in BACKENDS:
            raise ValueError(f"The 'backend' parameter of Noise must be one of {BACKENDS}. Got {self.backend!r} "
                             "instead.")
        rng = self.rng
        if (rng is not None and not isinstance(rng, np.random.Generator)) or (
                self.backend == "opendp" and rng is not None) or (
                self.backend == "numpy" and rng is None and type(self) is Noise):  # (a subclass drawing by itself,
            # a test double, may hold no generator)
            raise ValueError("The 'rng' parameter of Noise must be a numpy Generator with backend 'numpy' and None "
                             f"with 'opendp' (vetted samplers cannot be seeded). Got backend={self.backend!r}, "
                             f"rng={type(self.rng).__name__}.")

    @property
    def vetted(self) -> bool:
        """True when every sample comes from OpenDP's vetted samplers."""
        return self.backend == "opendp"

    def draw_epsilon(self, epsilon: float) -> float:
        """The ε this back-end draws at for a step budgeted ε: ε/(1 + 2⁻³⁰) on the release path (the margin of
        :data:`~mmopt.adaptive._opendp_noise.RELEASE_MARGIN`), ε itself in simulation. For a caller that builds its
        own Gibbs logits from ε (``gumbel_max``) or calibrates a release to ε.

        Examples
        --------
        >>> Noise("opendp").draw_epsilon(1.0) < 1.0, resolve_noise("numpy", 0, caller="example").draw_epsilon(1.0)
        (True, 1.0)
        """
        return float(epsilon) if self.backend == "numpy" else float(epsilon) / (1.0 + RELEASE_MARGIN)

    def laplace(self, scale: float, size=None) -> np.ndarray:
        """i.i.d. Laplace(0, ``scale``) of shape ``size`` (a float when size is None)."""
        if self.backend == "numpy":
            return self.rng.laplace(0.0, scale, size)
        from mmopt.adaptive._opendp_noise import laplace
        return laplace(scale, size)

    def gaussian(self, scale: float, size=None) -> np.ndarray:
        """i.i.d. N(0, ``scale``²) of shape ``size``."""
        if self.backend == "numpy":
            return self.rng.normal(0.0, scale, size)
        from mmopt.adaptive._opendp_noise import gaussian
        return gaussian(scale, size)

    def add_laplace(self, values, scale: float):
        """``values`` + i.i.d. Laplace(0, ``scale``) (a float for a scalar): the Laplace mechanism.

        With "opendp" the data value goes into OpenDP's measurement, which rounds the noisy value once; prefer
        this to ``values + laplace(...)`` for anything touching data. With "numpy" it is exactly
        ``values + rng.laplace(0, scale, shape)``.
        """
        if self.backend == "numpy":
            return _plus(values, lambda size: self.rng.laplace(0.0, scale, size))
        from mmopt.adaptive._opendp_noise import add_laplace
        return add_laplace(values, scale)

    def add_discrete_laplace(self, values, scale: float) -> np.ndarray:
        """Integers ``values`` + i.i.d. discrete Laplace noise, Pr[Z = z] ∝ exp(−|z|/``scale``): an int64 array.

        With "opendp", OpenDP's exact sampler (:func:`mmopt.adaptive._opendp_noise.add_discrete_laplace`); with
        "numpy", the difference of two geometric draws (the same law, from floating-point uniforms).
        """
        if self.backend == "numpy":
            from mmopt.adaptive._opendp_noise import check_discrete_scale
            arr = np.asarray(values, dtype=np.int64)
            # G₁ − G₂, Gᵢ ~ Geometric(p): Pr[z] ∝ (1 − p)^{|z|} = e^{−|z|/b}
            p = -np.expm1(-1.0 / check_discrete_scale(scale))
            return arr + (self.rng.geometric(p, arr.shape) - self.rng.geometric(p, arr.shape))
        from mmopt.adaptive._opendp_noise import add_discrete_laplace
        return add_discrete_laplace(values, scale)

    def add_gaussian(self, values, scale: float):
        """``values`` + i.i.d. N(0, ``scale``²) (the Gaussian mechanism; see :meth:`add_laplace`)."""
        if self.backend == "numpy":
            return _plus(values, lambda size: self.rng.normal(0.0, scale, size))
        from mmopt.adaptive._opendp_noise import add_gaussian
        return add_gaussian(values, scale)

    def gumbel_max(self, logits) -> int:
        """argmax_r (logit_r + G_r), G i.i.d. standard Gumbel: r with probability ∝ exp(logit_r) (an exact Gibbs
        draw; the privacy argument is the caller's, about the distribution it samples)."""
        if self.backend == "numpy":
            logits = np.asarray(logits, dtype=np.float64)
            return int(np.argmax(logits + self.rng.gumbel(size=logits.shape)))
        from mmopt.adaptive._opendp_noise import gumbel_max
        return gumbel_max(logits)

    def exponential(self, scores, epsilon: float, sensitivity: float) -> int:
        """The exponential mechanism's choice: index r with probability ∝ exp(ε·score_r/(2Δ))."""
        if self.backend == "numpy":
            return exponential_mechanism(scores, epsilon, sensitivity, rng=self.rng)
        from mmopt.adaptive._opendp_noise import exponential
        return exponential(scores, epsilon, sensitivity)

    def exponential_monotone(self, scores, epsilon: float, sensitivity: float) -> int:
        """The monotone exponential mechanism's choice: r with probability ∝ exp(ε·score_r/Δ).

        ε-DP only when every score moves the same way between neighbours (the caller's proof; see
        :func:`mmopt.adaptive._opendp_noise.exponential_monotone`): twice the sharpness of :meth:`exponential`.
        """
        if self.backend == "numpy":  # exp(2ε·s/(2Δ)) = exp(ε·s/Δ)
            return exponential_mechanism(scores, 2.0 * epsilon, sensitivity, rng=self.rng)
        from mmopt.adaptive._opendp_noise import exponential_monotone
        return exponential_monotone(scores, epsilon, sensitivity)


def _plus(values, draw):
    """``values`` + ``draw(shape)`` (a float for a scalar, drawn with size None: the same stream as before)."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 0:
        return float(values + draw(None))
    return arr + draw(arr.shape)


def resolve_noise(noise, rng, *, caller: str) -> Noise:
    """The :class:`Noise` for an algorithm's ``noise=`` and ``rng=`` parameters.

    ``noise`` is "numpy" (the default for studies: ``rng`` a seed, a Generator or None), "opendp" (``rng``
    must be None: vetted samplers cannot be seeded) or a :class:`Noise`.
    """
    if isinstance(noise, Noise):
        if rng is not None:  # it was ignored: the Noise's own generator drew
            raise ValueError(f"The 'rng' parameter of {caller} must be None when 'noise' is a Noise (which carries "
                             f"its own generator). Got rng={rng!r}; drop one of them.")
        return noise
    if noise not in BACKENDS:
        raise ValueError(f"The 'noise' parameter of {caller} must be one of {BACKENDS} or a Noise. Got {noise!r} "
                         "instead.")
    if noise == "opendp":
        if rng is not None:
            raise ValueError(f"The 'rng' parameter of {caller} must be None with noise='opendp' (OpenDP's vetted "
                             f"samplers cannot be seeded). Got {rng!r} instead; drop it, or use noise='numpy' for a "
                             "reproducible simulation.")
        return Noise("opendp")
    if rng is None:  # the default: it said nothing, and real data met unseeded floating-point noise (an auditor's
        # probe); sparse_vector draws OpenDP's unless seeded, these algorithms keep numpy for the studies they serve
        warnings.warn(f"{caller}: noise='numpy' (the default) draws numpy's floating-point noise, which leaks through "
                      "its low bits (Mironov 2012): a simulation, not a release. Pass noise='opendp' to release real "
                      "data, or rng=SEED for a reproducible study.", UserWarning, stacklevel=3)
    return Noise("numpy", check_rng(rng, name="rng", caller=caller))


__all__ = ["BACKENDS", "Noise", "resolve_noise"]
