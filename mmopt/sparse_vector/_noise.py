"""Laplace noise for the sparse vector technique: a seeded numpy back-end and OpenDP's vetted sampler.

Every noise source of the SVT is described by the shift d_in the privacy proof applies to it and the budget
share ε_k that shift may cost; its scale is b = d_in / ε_k (Lyu, Su & Li, PVLDB 2017, Alg. 1 and Alg. 7):

- threshold noise ρ: d_in = Δ, ε_k = ε₁;
- query noise ν_i: d_in = 2Δ (Δ for monotone queries), ε_k = ε₂ / c;
- numeric answers η_i: d_in = Δ, ε_k = ε₃ / c.

Back-ends (:func:`laplace_sampler`):

- ``"numpy"``: ``center + rng.laplace(0, b)``. Floating-point Laplace is attackable (Mironov, CCS 2012: the
  low-order bits of a noisy float reveal the input), so this path is for simulation, research and tests only.
- ``"opendp"``: ``opendp.measurements.make_laplace`` on ``atom_domain(T=float, nan=False)`` with
  ``absolute_distance``, which samples in exact arithmetic on a fine 2^k grid and rounds the noisy value
  once. Its scale starts at d_in / ε_k and is raised by a few ulps when OpenDP's conservatively rounded
  privacy map does not verify ``check(d_in, ε_k)`` at that scale, so every sample's scale is verified by
  OpenDP itself. OpenDP does not verify the SVT composition: that is Lyu et al.'s proof applied to these
  samples.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from mmopt.accounting._zcdp import round_up

Sampler = Callable[[float], float]


def laplace_sampler(shift: float, epsilon: float, *, rng: np.random.Generator | None, caller: str
                    ) -> tuple[Sampler, float]:
    """(x ↦ x + Lap(b), b) with b = shift/epsilon, so that a change of ``shift`` in x costs ``epsilon``.

    ``rng`` a numpy Generator: seeded numpy noise (simulation only). ``rng`` None: OpenDP's vetted sampler.
    """
    scale = round_up(Fraction(shift) / Fraction(epsilon)) if epsilon > 0 else math.inf  # (a cost shift/b ≤ ε)
    if not math.isfinite(scale) or scale < np.finfo(float).tiny:
        raise ValueError(f"{caller}: the Laplace noise scale {shift:.3g}/{epsilon:.3g} = {scale!r} is outside "
                         "float64's normal range, so the noise cannot be drawn. Use a moderate epsilon and "
                         "sensitivity.")
    if rng is not None:
        laplace = rng.laplace
        return (lambda x: float(x) + float(laplace(0.0, scale))), scale
    return _opendp_sampler(shift, epsilon, scale, caller)


def _opendp_sampler(shift: float, epsilon: float, scale: float, caller: str) -> tuple[Sampler, float]:
    try:
        import opendp.prelude as dp
    except ImportError:
        raise ImportError(f"{caller} with rng=None draws release-grade noise from OpenDP. Install it with: pip "
                          "install opendp (from a checkout: pip install -e '.[release]'), or pass a seed for "
                          "the simulation-only numpy noise.") from None
    dp.enable_features("contrib")
    domain, metric = dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float)
    b = scale
    for step in range(64):
        meas = dp.m.make_laplace(domain, metric, b)
        try:
            if meas.check(shift, epsilon):
                return (lambda x, meas=meas: float(meas(float(x)))), b
        except dp.OpenDPException:  # an overflowing map at an extreme scale is not a verification
            break
        # OpenDP rounds its privacy map upwards: a scale a few ulps larger verifies
        b = scale * (1.0 + 2.0 ** (step - 52))
    raise ValueError(f"{caller}: OpenDP's privacy map does not verify a Laplace scale near {scale:.6g} for a "
                     f"shift of {shift:.6g} at epsilon {epsilon:.6g}.")
