"""Online use of a BLT strategy: C x and B m = W C⁻¹ m one step at a time, from a state of d buffers.

Notation: see :mod:`mmopt.toeplitz.strategies`. For C = D·T(c) with c_0 = 1, c_k = Σ_i θ_i ω_i^{k−1} (D = I
unless row-scaled) the inverse series is again a BLT, 1/c = 1 − Σ_i θ̂_i x/(1 − ω̂_i x) (Dvijotham et al.
2024, §3; :func:`mmopt.toeplitz._series.blt_inverse`). So

* the encoder (C x)_t = d_t (x_t + Σ_i θ_i R_i), R_i ← ω_i R_i + x_t;
* the decoder ŷ_t = ŷ_{t−1} + u_t − Σ_i θ̂_i S_i with u_t = m_t/d_t, S_i ← ω̂_i S_i + u_t,

each O(d) per step: a stream of measurements m_t = (C x)_t + z_t becomes the prefix-sum estimates W x̂ without
storing the past. With m = z alone the decoder outputs the mechanism's correlated noise B z.

Privacy: these are linear maps (post-processing). The Gaussian draws z_t must come from a sampler calibrated
to Δ₂(C) for the whole horizon n: under single participation ``strategy.sensitivity("l2")``, the column-norm
maximum (each sum within 10⁻¹⁰ of its value); when a record takes part in several steps, the schema's Δ
(:func:`mmopt.participation.noise.run_privacy`, which streams through OpenDP); no private online release path
is provided here — mmopt's vetted release
(:mod:`mmopt._base.opendp`) is offline.
"""

from __future__ import annotations

import math

import numpy as np

from mmopt._base import validation as v
from mmopt.toeplitz import _series
from mmopt.toeplitz.error import check_decodable
from mmopt.toeplitz.strategies import ToeplitzStrategy

__all__ = ["BLTDecoder", "BLTEncoder", "offline_decode"]


def _check_blt(strategy, caller: str) -> ToeplitzStrategy:
    if not isinstance(strategy, ToeplitzStrategy) or strategy.kind != "blt":
        raise TypeError(f"The 'strategy' parameter of {caller} must be a BLT ToeplitzStrategy "
                        f"(mmopt.toeplitz.blt, possibly equalized). Got {getattr(strategy, 'name', strategy)!r}.")
    return strategy


class _Stream:
    def __init__(self, strategy, caller: str):
        self.strategy = _check_blt(strategy, caller)
        y = strategy.row_scale
        self._scale = np.ones(strategy.n) if y is None else np.sqrt(y)
        self.t = 0
        self._caller = caller

    def _next_scale(self) -> float:
        if self.t >= self.strategy.n:
            raise ValueError(f"{self._caller}: the strategy's horizon is n = {self.strategy.n:,} steps; step "
                             f"{self.t + 1:,} is beyond it (its sensitivity was computed for n steps).")
        return float(self._scale[self.t])


def _finite(value, name: str, caller: str, t: int) -> float:
    """A stream value as a finite float, or a ValueError naming it (the state would carry a NaN forever); booleans
    and strings are refused, not read as numbers (float("3") and float(True) were)."""
    try:
        if isinstance(value, bool | np.bool_ | str | bytes):
            raise TypeError
        out = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"The '{name}' parameter of {caller}.step must be a real number. "
                        f"Got {type(value).__name__} instead.") from None
    if not math.isfinite(out):
        raise ValueError(f"The '{name}' parameter of {caller}.step must be finite. Got {out!r} at step "
                         f"{t + 1:,}; the stream's state is unchanged, so a finite value can be passed instead.")
    return out


class BLTEncoder(_Stream):
    """(C x)_t online. ``step(x_t)`` returns the t-th strategy answer.

    Examples
    --------
    >>> from mmopt.toeplitz import blt
    >>> C = blt([0.5], [0.5], 4)
    >>> enc = BLTEncoder(C)
    >>> [enc.step(v) for v in (1.0, 0.0, 0.0, 0.0)] == C.coefficients.tolist()
    True
    """

    def __init__(self, strategy: ToeplitzStrategy):
        super().__init__(strategy, "BLTEncoder")
        self._theta, self._omega = strategy.params["theta"], strategy.params["omega"]
        self._R = np.zeros(len(self._theta))

    def step(self, value: float) -> float:
        value = _finite(value, "value", self._caller, self.t)  # a NaN would poison every later step through the state
        d = self._next_scale()
        out = d * (value + float(self._theta @ self._R))
        self._R = self._omega * self._R + value
        self.t += 1
        return out


class BLTDecoder(_Stream):
    """(W C⁻¹ m)_t online: ``step(m_t)`` returns the t-th prefix-sum estimate (or noise, for m = z).

    Examples
    --------
    >>> from mmopt.toeplitz import blt
    >>> C = blt([0.3, 0.1], [0.9, 0.5], 6)
    >>> enc, dec = BLTEncoder(C), BLTDecoder(C)
    >>> x = [1.0, 2.0, 0.0, 1.0, 1.0, 3.0]
    >>> [round(dec.step(enc.step(v)), 9) for v in x]        # no noise: exactly the running sums
    [1.0, 3.0, 3.0, 4.0, 5.0, 8.0]
    """

    def __init__(self, strategy: ToeplitzStrategy):
        super().__init__(strategy, "BLTDecoder")
        theta_hat, omega_hat = _series.blt_inverse(strategy.params["theta"], strategy.params["omega"])
        self._theta_hat, self._omega_hat = theta_hat, omega_hat
        self._S = np.zeros(len(theta_hat), dtype=np.result_type(theta_hat, omega_hat))
        self._total = 0.0

    def step(self, measurement: float) -> float:
        measurement = _finite(measurement, "measurement", self._caller, self.t)
        u = measurement / self._next_scale()
        self._total += u - float(np.real(self._theta_hat @ self._S))
        self._S = self._omega_hat * self._S + u
        self.t += 1
        return self._total


def offline_decode(strategy: ToeplitzStrategy, measurements) -> np.ndarray:
    """W C⁻¹ m for the whole stream at once, by FFT (O(n log n)); the online decoder's reference."""
    if not isinstance(strategy, ToeplitzStrategy):
        raise TypeError("The 'strategy' parameter of offline_decode must be a ToeplitzStrategy (mmopt.toeplitz."
                        f"sqrt_strategy, banded, blt or equalized). Got {type(strategy).__name__} instead.")
    m = v.check_vector(measurements, name="measurements", caller="offline_decode", length=strategy.n,
                       meaning="the strategy's n", bools=False)
    y = strategy.row_scale
    u = m if y is None else m / np.sqrt(y)
    return _series.convolve(check_decodable(strategy, "offline_decode"), u, strategy.n)
