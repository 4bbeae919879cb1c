"""Privacy(ε, δ): which noise, which sensitivity norm, and the one place the noise-variance constant lives.

Notation: see README. δ = 0 gives the Laplace mechanism (ε-DP, L1 sensitivity, variance 2/ε² per unit
of squared sensitivity, Prop. 2). δ > 0 gives the Gaussian mechanism ((ε,δ)-DP, L2 sensitivity,
Theorem 5.22) with σ calibrated *exactly* by the analytic Gaussian mechanism of Balle & Wang (2018):
the smallest σ with Φ(Δ/2σ − εσ/Δ) − e^ε Φ(−Δ/2σ − εσ/Δ) ≤ δ. The paper's σ = Δ√(2 ln(2/δ))/ε is
available as ``calibration="theorem_5_22"`` but only for ε ≤ 1: for large ε it is not private
(at ε = 10, δ = 1e-5 the true δ is 1.36× the claimed one; spec §10.3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from scipy import optimize, special

from mmopt import _validation as v

CALIBRATIONS = ("analytic", "theorem_5_22")


@dataclass(frozen=True)
class Privacy:
    """A privacy budget and the noise that spends it.

    Parameters
    ----------
    epsilon : float
        ε > 0.
    delta : float, default=0.0
        δ in [0, 1). Zero selects Laplace noise; positive selects Gaussian noise.
    calibration : {"analytic", "theorem_5_22"}, default="analytic"
        How the Gaussian σ is set (ignored when δ = 0).

    Examples
    --------
    >>> p = Privacy(epsilon=1.0)
    >>> p.noise, p.sensitivity_norm, p.variance_factor
    ('laplace', 'l1', 2.0)
    >>> g = Privacy(epsilon=1.0, delta=1e-5)
    >>> g.noise, g.sensitivity_norm, round(g.noise_scale(1.0), 4)
    ('gaussian', 'l2', 3.7306)
    >>> round(Privacy(1.0, 1e-5, calibration="theorem_5_22").noise_scale(1.0), 4)  # √(2 ln 2e5)
    4.9409
    """

    epsilon: float
    delta: float = 0.0
    calibration: str = "analytic"

    def __post_init__(self) -> None:
        eps = v.check_real(self.epsilon, name="epsilon", caller="Privacy", low=0.0, low_open=True)
        delta = v.check_real(self.delta, name="delta", caller="Privacy", low=0.0, high=1.0, high_open=True)
        v.check_choice(self.calibration, name="calibration", caller="Privacy", choices=CALIBRATIONS)
        if self.calibration == "theorem_5_22" and delta > 0 and eps > 1.0:
            raise ValueError(
                f"The 'epsilon' parameter of Privacy must be <= 1 with calibration='theorem_5_22': "
                f"Theorem 5.22's σ is not private for large ε (spec §10.3). Got {eps} instead. "
                "Use calibration='analytic' (the default), which is exact for every ε."
            )
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "delta", delta)

    @property
    def noise(self) -> str:
        """'laplace' when δ = 0, else 'gaussian'."""
        return "laplace" if self.delta == 0 else "gaussian"

    @property
    def sensitivity_norm(self) -> str:
        """'l1' for Laplace, 'l2' for Gaussian: the column norm that sets the noise."""
        return "l1" if self.delta == 0 else "l2"

    @cached_property
    def unit_noise_scale(self) -> float:
        """Noise scale at sensitivity 1: Laplace b = 1/ε, or Gaussian σ for Δ₂ = 1."""
        if self.delta == 0:
            return 1.0 / self.epsilon
        if self.calibration == "theorem_5_22":
            return math.sqrt(2.0 * math.log(2.0 / self.delta)) / self.epsilon
        return analytic_gaussian_sigma(self.epsilon, self.delta)

    def noise_scale(self, sensitivity: float) -> float:
        """Scale of the noise for a strategy of the given sensitivity (it is linear in Δ)."""
        s = v.check_real(sensitivity, name="sensitivity", caller="Privacy.noise_scale", low=0.0)
        return s * self.unit_noise_scale

    @property
    def variance_factor(self) -> float:
        """Noise variance per unit of squared sensitivity: 2/ε² (Laplace) or σ(Δ=1)² (Gaussian).

        Expected total squared error = variance_factor · Δ² · tr(G (AᵀA)⁻¹)   (Prop. 4.4).
        """
        b = self.unit_noise_scale
        return 2.0 * b * b if self.delta == 0 else b * b


def gaussian_delta(sigma: float, epsilon: float) -> float:
    """Exact δ(ε) of the Gaussian mechanism with noise σ at L2 sensitivity 1 (Balle & Wang 2018, Thm 8).

    δ = Φ(1/(2σ) − εσ) − e^ε Φ(−1/(2σ) − εσ), computed in log space so large ε does not overflow.
    """
    a = 0.5 / sigma - epsilon * sigma
    b = -0.5 / sigma - epsilon * sigma
    return float(math.exp(special.log_ndtr(a)) - math.exp(epsilon + special.log_ndtr(b)))


def analytic_gaussian_sigma(epsilon: float, delta: float) -> float:
    """The smallest σ (at L2 sensitivity 1) giving (ε, δ)-DP, by root finding on :func:`gaussian_delta`.

    The returned σ is verified to satisfy ``gaussian_delta(σ, ε) <= δ``: the root is nudged up
    when round-off lands it a hair on the wrong side.

    Examples
    --------
    >>> s = analytic_gaussian_sigma(1.0, 1e-5)
    >>> gaussian_delta(s, 1.0) <= 1e-5
    True
    """
    eps = v.check_real(epsilon, name="epsilon", caller="analytic_gaussian_sigma", low=0.0, low_open=True)
    dlt = v.check_real(delta, name="delta", caller="analytic_gaussian_sigma", low=0.0, high=1.0,
                       low_open=True, high_open=True)

    def excess(log_sigma: float) -> float:
        return gaussian_delta(math.exp(log_sigma), eps) - dlt

    lo, hi = -10.0, 10.0
    while excess(hi) > 0:  # δ(σ) decreases in σ; widen until private
        hi *= 2
    while excess(lo) < 0:
        lo *= 2
    root = optimize.brentq(excess, lo, hi, xtol=1e-14, rtol=1e-14)
    sigma = math.exp(root)
    while gaussian_delta(sigma, eps) > dlt:
        sigma *= 1 + 1e-12
    return sigma
