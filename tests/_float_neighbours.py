"""Exact float checks of the adaptive algorithms' release path: a recording Noise on the "opendp" back-end (so the
release domain's checks apply) that answers deterministically, so that two neighbouring inputs follow the same
branch and the values handed to OpenDP (Laplace inputs, exponential-mechanism scores) compare one to one, exactly
(Fractions of the float64 values: no rounding in the comparison itself)."""

import dataclasses
from fractions import Fraction

import numpy as np

from mmopt.adaptive._noise import Noise

N_TOP = 2**32 - 1  # records of the adversarial neighbours: x has N_TOP − 1 or N_TOP, x' one more or fewer


@dataclasses.dataclass(frozen=True, eq=False)
class Recorder(Noise):
    """Logs ("laplace" | "dlaplace", values, scale), ("exp" | "expmono", scores, ε, Δ); every noisy scalar is
    ``total`` when given, choices are the argmax (``cycle``: the k-th choice is k mod the number of candidates,
    data-independent)."""

    log: list = dataclasses.field(default_factory=list)
    total: float | None = None
    cycle: bool = False

    def add_laplace(self, values, scale):
        self.log.append(("laplace", np.array(values, dtype=float, copy=True), None, scale))
        if self.total is not None and np.ndim(values) == 0:
            return float(self.total)
        return values

    def add_discrete_laplace(self, values, scale):
        self.log.append(("dlaplace", np.array(values, copy=True), None, scale))
        return np.asarray(values, dtype=np.int64)

    def laplace(self, scale, size=None):
        return 0.0 if size is None else np.zeros(size)

    def gumbel_max(self, logits):
        return int(np.argmax(logits))

    def exponential(self, scores, epsilon, sensitivity):
        s = np.array(scores, dtype=float, copy=True).ravel()
        self.log.append(("exp", s, epsilon, sensitivity))
        return len(self.log) % s.size if self.cycle else int(np.argmax(s))

    def exponential_monotone(self, scores, epsilon, sensitivity):
        s = np.array(scores, dtype=float, copy=True).ravel()
        self.log.append(("expmono", s, epsilon, sensitivity))
        return int(np.argmax(s))


def recorder(total=None, cycle=False) -> Recorder:
    return Recorder("opendp", None, [], total, cycle)


def ratios(log_a, log_b, kinds=("exp", "expmono")):
    """max_r |s_r − s'_r| / Δ per logged choice of the given kinds, as exact Fractions (and, for "expmono",
    whether every score moved the same way)."""
    out = []
    assert len(log_a) == len(log_b)
    for a, b in zip(log_a, log_b, strict=True):
        assert a[0] == b[0] and a[3] == b[3]
        if a[0] not in kinds:
            continue
        d = [Fraction(float(q)) - Fraction(float(p)) for p, q in zip(a[1], b[1], strict=True)]
        if a[0] == "expmono":
            assert all(v >= 0 for v in d) or all(v <= 0 for v in d)
        out.append(max(abs(v) for v in d) / Fraction(a[3]) if d else Fraction(0))
    return out
