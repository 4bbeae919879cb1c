"""Deterministic privacy-loss bound over all neighbours: run an algorithm on x, replay its outputs on x ± e_i.

A :class:`Replay` noise records, on x, every Laplace input vector and every exponential-mechanism score vector and
answers with a fixed output (the input itself for Laplace, a fixed index for the choice). Replaying those same
outputs on a neighbour x' forces the same execution path, so the inputs of each step can be compared one to one.
For that path, the privacy loss ln p_x(path)/p_x'(path) is at most

    Σ_Laplace ‖v − v'‖₁ / b  +  Σ_choices ε_call · max_r |s_r − s'_r| / Δ_call

(Laplace: density ratio; exponential mechanism: numerator and normaliser each move by ε·d/(2Δ); the monotone one,
logits ε·s/Δ, is checked to move every score the same way, so numerator and normaliser move together). The check
asserts each choice's score change is within its stated Δ, the scales and ε per call match, and the bound is ≤ ε:
sensitivities and composition (parallel and sequential) for every neighbour, on tiny inputs.
"""

import dataclasses
import itertools

import numpy as np

from mmopt.adaptive._noise import Noise


@dataclasses.dataclass(frozen=True, eq=False)
class Replay(Noise):
    """Record (tape None at start) or replay (tape given) every private step."""

    tape: list = dataclasses.field(default_factory=list)
    replay: list | None = None
    pick: object = None  # index rule for the recording run: f(n_candidates) -> int

    def _next(self, kind):
        step = self.replay[len(self.tape)]
        assert step[0] == kind
        return step

    def add_laplace(self, values, scale):
        v = np.asarray(values, dtype=float)
        if self.replay is None:
            out = v.copy()
        else:
            step = self._next("laplace")
            assert step[1] == scale and step[2].shape == v.shape
            out = step[3]
        self.tape.append(("laplace", scale, v, out))
        return float(out) if out.ndim == 0 else out.copy()

    def exponential(self, scores, epsilon, sensitivity):
        s = np.asarray(scores, dtype=float)
        if self.replay is None:
            r = (self.pick or (lambda n: n // 2))(s.size)
        else:
            step = self._next("exponential")
            assert step[1:3] == (epsilon, sensitivity) and step[3].shape == s.shape
            r = step[4]
        self.tape.append(("exponential", epsilon, sensitivity, s, r))
        return r

    def exponential_monotone(self, scores, epsilon, sensitivity):
        # logits ε·s/Δ: the same replayed path, charged ε·d/Δ only when every score moved one way (checked below)
        return self.exponential(scores, epsilon, sensitivity) if self.replay is None else self._monotone(
            scores, epsilon, sensitivity)

    def _monotone(self, scores, epsilon, sensitivity):
        r = self.exponential(scores, epsilon, sensitivity)
        moved = self.tape[-1][3] - self.replay[len(self.tape) - 1][3]
        assert np.all(moved >= -1e-12) or np.all(moved <= 1e-12), "monotone scores moved both ways"
        return r


def neighbours(x):
    """Every x ± e_i with non-negative counts."""
    for i in itertools.product(*map(range, x.shape)):
        for d in (1.0, -1.0):
            if x[i] + d >= 0:
                xp = x.copy()
                xp[i] += d
                yield xp


def worst_loss(run, x, pick=None):
    """max over neighbours x' of the path's privacy-loss bound (module docstring); run(x, noise) -> result."""
    rec = Replay("numpy", np.random.default_rng(0), pick=pick)
    run(x, rec)
    worst = 0.0
    for xp in neighbours(x):
        rep = Replay("numpy", np.random.default_rng(0), replay=rec.tape)
        run(xp, rep)
        assert len(rep.tape) == len(rec.tape)
        loss = 0.0
        for a, b in zip(rec.tape, rep.tape, strict=True):
            if a[0] == "laplace":
                loss += np.abs(a[2] - b[2]).sum() / a[1]
            else:
                d = np.max(np.abs(a[3] - b[3]))
                assert d <= a[2] * (1 + 1e-9) + 1e-9, (d, a[2])
                loss += a[1] * d / a[2]
        worst = max(worst, loss)
    return worst
