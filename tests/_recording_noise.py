"""A numpy Noise that records every draw: proves no sample of an algorithm bypasses the Noise object."""

import dataclasses

import numpy as np

from mmopt.adaptive._noise import Noise


@dataclasses.dataclass(frozen=True, eq=False)
class Recording(Noise):
    """numpy noise that logs ("laplace", scale, shape) and ("exponential", ε, Δ) for every draw."""

    calls: list = dataclasses.field(default_factory=list)

    def add_laplace(self, values, scale):
        self.calls.append(("laplace", scale, np.shape(values)))
        return super().add_laplace(values, scale)

    def exponential(self, scores, epsilon, sensitivity):
        self.calls.append(("exponential", epsilon, sensitivity))
        return super().exponential(scores, epsilon, sensitivity)
