"""Privacy(ε, δ): which noise, which sensitivity norm, and the one place the noise-variance constant lives.

Notation: see README. δ = 0 gives the Laplace mechanism (ε-DP, L1 sensitivity, variance 2/ε² per unit
of squared sensitivity, Prop. 2). δ > 0 gives the Gaussian mechanism ((ε,δ)-DP, L2 sensitivity,
Theorem 5.22) with σ calibrated *exactly* by the analytic Gaussian mechanism of Balle & Wang (2018,
Thm 8): the smallest σ with δ(σ, ε) = Φ(Δ/2σ − εσ/Δ) − e^ε Φ(−Δ/2σ − εσ/Δ) ≤ δ. The paper's
σ = Δ√(2 ln(2/δ))/ε is available as ``calibration="theorem_5_22"`` but only for ε ≤ 1: for large ε it
is not private (at ε = 10, δ = 1e-5 the true δ is 1.36× the claimed one; spec §10.3).

Supported range. ε is any *normal* positive float (2.2e-308 ≤ ε ≤ 1.8e308; subnormal ε is refused);
δ is 0 or any float in (0, 1), subnormals included. The Gaussian σ must itself be a finite float:
that fails only when ε < 4.3e-308 and δ < 1e-310 (ε = 2.3e-308, δ = 5e-324 would need σ ≈ 3.4e308),
and those inputs are refused with a ValueError; every δ works for ε ≥ 1e-307.

How correctness is guaranteed: δ(σ, ε) is evaluated without cancellation by
:func:`mmopt._base.gaussian_delta.log_delta`, whose error bound (below 5e-16·|log δ| + 2e-15 in log δ, measured
against mpmath) is derived in that module's docstring. :func:`analytic_gaussian_sigma` accepts σ only when the
computed log δ(σ) ≤ log δ − 1e-10·|log δ|, a margin over 10⁴ times that error (its branches 3 and 4 have
|log δ| ≥ −log Φ(1) = 0.17; branch 2's error is relative, below 7e-16·|log δ|). So the true δ(σ) ≤ δ, and
σ exceeds the exact optimum by 1e-10·|log δ| / |d log δ / d log σ| relatively: 5e-8 at worst
(at ε = δ = 1e-300 on the test grid), 7e-11 at ε = 1, δ = 1e-5.
"""

from __future__ import annotations

import math
import sys
import warnings
from dataclasses import dataclass
from functools import cached_property

from mmopt._base import validation as v
from mmopt._base.gaussian_calibration import (
    _analytic_sigma,
    _check_epsilon,
    _private_log_bound,
    analytic_gaussian_sigma,
    gaussian_delta,
    gaussian_epsilon,
    gaussian_is_private,
)
from mmopt._base.gaussian_delta import log_delta

__all__ = ["CALIBRATIONS", "LARGE_DELTA", "Privacy", "analytic_gaussian_sigma", "gaussian_delta", "gaussian_epsilon",
           "gaussian_is_private", "pure_epsilon"]

CALIBRATIONS = ("analytic", "theorem_5_22")

#: δ from which Privacy warns: a guarantee that may fail with probability 1 % protects no one in a table of 100.
LARGE_DELTA = 0.01


def _built_by_user() -> bool:
    """Whether the Privacy being built was written by the user (its constructor's caller is outside mmopt and
    dataclasses.replace, or is the command line, which builds the user's flags): frame 0 is this function, 1
    ``__post_init__``, 2 the generated ``__init__``, 3 its caller. (``--delta 0.5`` was taken without a word.)"""
    caller = sys._getframe(3).f_globals.get("__name__", "")
    if caller.startswith("mmopt.cli."):
        return True
    return not (caller == "mmopt" or caller.startswith("mmopt.") or caller == "dataclasses")


@dataclass(frozen=True)
class Privacy:
    """A privacy budget and the noise that spends it.

    Parameters
    ----------
    epsilon : float
        ε > 0, a normal float (ε ≥ 2.2e-308).
    delta : float, default=0.0
        δ in [0, 1). Zero selects Laplace noise; positive selects Gaussian noise.
    calibration : {"analytic", "theorem_5_22"}, default="analytic"
        How the Gaussian σ is set (ignored when δ = 0). Either way σ is verified against the exact δ(σ, ε)
        when the object is built, so an unsupported (ε, δ) fails here and not later.

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
    >>> round(Privacy(1e-300).log_variance_factor, 2)  # variance_factor itself overflows to inf
    1382.24
    """

    epsilon: float
    delta: float = 0.0
    calibration: str = "analytic"

    def __post_init__(self) -> None:
        eps = _check_epsilon(self.epsilon, caller="Privacy")
        delta = v.check_real(self.delta, name="delta", caller="Privacy", low=0.0, high=1.0, high_open=True)
        v.check_choice(self.calibration, name="calibration", caller="Privacy", choices=CALIBRATIONS)
        if self.calibration == "theorem_5_22" and delta > 0 and eps > 1.0:
            raise ValueError(
                f"The 'epsilon' parameter of Privacy must be <= 1 with calibration='theorem_5_22': "
                f"Theorem 5.22's σ is not private for large ε (spec §10.3). Got {eps} instead. "
                "Use calibration='analytic' (the default), which is exact for every ε."
            )
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "delta", delta + 0.0)  # + 0.0 turns -0.0 into 0.0
        if delta >= LARGE_DELTA and _built_by_user():  # Privacy(1, 0.5) was taken silently: a slip (a second
            # positional argument meant as something else); mmopt's own budgets (plan's unit budget) are not slips
            warnings.warn(f"Privacy: delta={delta:g} lets the guarantee fail outright with probability up to {delta:g} "
                          "(a mechanism that publishes one record in full meets (0, 1/n)-DP); delta is usually far "
                          "below 1/n for n records, e.g. 1e-6. Pass Privacy(epsilon) (on the command line, omit "
                          "--delta) for pure ε-DP (Laplace).", UserWarning, stacklevel=3)
        if delta > 0:
            _ = self.unit_noise_scale  # calibrate now: unsupported (ε, δ) must fail at construction

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
        """Noise scale at sensitivity 1: Laplace b = 1/ε, or Gaussian σ for Δ₂ = 1 (always a finite float)."""
        if self.delta == 0:
            return 1.0 / self.epsilon
        if self.calibration == "analytic":
            return _analytic_sigma(self.epsilon, self.delta)
        # √(2 ln(2/δ))/ε, with ln(2/δ) split so that subnormal δ does not overflow 2/δ
        sigma = math.sqrt(2.0 * (math.log(2.0) - math.log(self.delta))) / self.epsilon
        if not math.isfinite(sigma) or log_delta(sigma, self.epsilon) > _private_log_bound(self.delta):
            raise ValueError(
                f"The 'delta' parameter of Privacy gives no private finite σ with calibration='theorem_5_22' "
                f"at epsilon={self.epsilon!r}: √(2 ln(2/δ))/ε = {sigma:.4g}. Got {self.delta!r} instead. "
                "Use calibration='analytic' (the default)."
            )
        return sigma

    def noise_scale(self, sensitivity: float) -> float:
        """Scale of the noise for a strategy of the given sensitivity (it is linear in Δ); never inf."""
        s = v.check_real(sensitivity, name="sensitivity", caller="Privacy.noise_scale", low=0.0)
        scale = s * self.unit_noise_scale
        if scale == math.inf:  # inf noise would silently turn every answer into inf or nan
            raise ValueError(
                f"The 'sensitivity' parameter of Privacy.noise_scale times the unit noise scale "
                f"{self.unit_noise_scale:.4g} overflows a float. Got {s!r} instead. Use a larger epsilon or delta."
            )
        return scale

    @property
    def variance_factor(self) -> float:
        """Noise variance per unit of squared sensitivity: 2/ε² (Laplace) or σ(Δ=1)² (Gaussian).

        Expected total squared error = variance_factor · Δ² · tr(G (AᵀA)⁻¹)   (Prop. 4.4).
        At extreme budgets (ε = 1e-300; or ε = 1e300, δ = 0) this float overflows to inf or underflows to 0;
        :attr:`log_variance_factor` is finite for every valid budget.
        """
        b = self.unit_noise_scale
        return 2.0 * b * b if self.delta == 0 else b * b

    @property
    def log_variance_factor(self) -> float:
        """Natural log of :attr:`variance_factor`, finite for every valid (ε, δ).

        log 2 − 2 log ε (Laplace) or 2 log σ (Gaussian), computed without forming c itself.

        Examples
        --------
        >>> round(Privacy(1e300, 0.5).log_variance_factor, 2)  # σ = 7.07e-151
        -691.47
        """
        if self.delta == 0:
            return math.log(2.0) - 2.0 * math.log(self.epsilon)
        return 2.0 * math.log(self.unit_noise_scale)


def pure_epsilon(budget, caller: str):
    """ε of a pure-ε :class:`Privacy` (δ = 0) for an ε-DP algorithm that takes a float; anything else as given (the
    caller checks it). A Privacy with δ > 0 is refused: the algorithm's noise is Laplace."""
    if not isinstance(budget, Privacy):
        return budget
    if budget.delta != 0:
        raise ValueError(f"The 'epsilon' parameter of {caller} is an ε-DP budget (Laplace noise), so a Privacy "
                         f"must have delta=0. Got {budget!r}; pass Privacy({budget.epsilon!r}) or the float "
                         f"{budget.epsilon!r}.")
    return budget.epsilon
