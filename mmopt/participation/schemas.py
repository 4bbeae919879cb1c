"""Participation schemas: which steps of a training run one record may contribute a gradient to.

Notation: see README. A run has n steps; at step t the mechanism releases C applied to the stream of clipped
gradient sums. A record's participation pattern π ⊆ {0, …, n − 1} lists the steps where its gradient g_t
(‖g_t‖ ≤ 1) enters the sum; its participation vector is u = 1_π ∈ {0, 1}ⁿ. A schema is the set Π of patterns
the training loop allows (Choquette-Choo, McMahan, Rush & Thakurta, "Multi-epoch matrix factorization
mechanisms for private machine learning", ICML 2023, §2):

* :func:`single` — every step at most once per record: the patterns {t}; the classical setting.
* :func:`fixed_epochs` (k) — k epochs over a fixed batch order, n = k·b steps: record j (0 ≤ j < b) participates
  in steps j, j + b, …, j + (k − 1)b; the b patterns are disjoint.
* :func:`min_separation` (b, k) — any pattern of at most k steps, consecutive steps at least b apart (federated
  training with a minimum return time; the "(k, b)-participation" of the paper above). Not epochs reshuffled
  every epoch: a record may then take the last step of one epoch and the first of the next, 1 step apart, so
  only ``min_separation(1, k)`` covers them.

A record may send any gradient with ‖g_t‖ ≤ 1, including 0, so a pattern's subsets are covered by the
sensitivity (:mod:`mmopt.participation.sensitivity`); :meth:`Schema.patterns` lists fixed epochs' b
patterns and every pattern of a minimum-separation schema (for the brute-force reference).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from mmopt._base import validation as v

__all__ = ["FixedEpochs", "MinSeparation", "Schema", "Single", "as_schema", "fixed_epochs", "min_separation",
           "single"]

#: patterns listed by :meth:`Schema.patterns` at most (the brute-force reference enumerates them all)
MAX_PATTERNS = 1_000_000


@dataclass(frozen=True)
class Schema:
    """Base of the participation schemas; use :func:`single`, :func:`fixed_epochs` or :func:`min_separation`."""

    def check_n(self, n: int, caller: str, name: str = "n") -> int:
        """n, the run's steps, checked; ``name``: the caller's parameter it comes from (a strategy's size)."""
        return v.check_int(n, name=name, caller=caller, low=1)

    def separation(self, n: int) -> int:
        """b: two steps of one pattern are at least b apart."""
        raise NotImplementedError

    def participations(self, n: int) -> int:
        """k: the most steps one pattern holds at n steps."""
        raise NotImplementedError

    def patterns(self, n: int) -> list[tuple[int, ...]]:
        """The patterns at n steps (refused past :data:`MAX_PATTERNS`)."""
        raise NotImplementedError

    def vectors(self, n: int) -> np.ndarray:
        """The participation vectors u = 1_π of :meth:`patterns`, one a row (0/1 float array)."""
        P = self.patterns(n)
        v.check_allocation(len(P) * n, what=f"{len(P):,} participation vectors of length {n:,}",
                           caller=f"{type(self).__name__}.vectors")
        U = np.zeros((len(P), n))
        for r, p in enumerate(P):
            U[r, list(p)] = 1.0
        return U


@dataclass(frozen=True)
class Single(Schema):
    """Each record in at most one step (the patterns {t})."""

    def separation(self, n: int) -> int:
        return self.check_n(n, "Single.separation")

    def participations(self, n: int) -> int:
        self.check_n(n, "Single.participations")
        return 1

    def patterns(self, n: int) -> list[tuple[int, ...]]:
        n = self.check_n(n, "Single.patterns")
        return [(t,) for t in range(n)]


@dataclass(frozen=True)
class FixedEpochs(Schema):
    """k epochs in a fixed order: n = k·b steps, record j in steps j, j + b, …, j + (k − 1)b.

    Examples
    --------
    >>> fixed_epochs(2).patterns(6)
    [(0, 3), (1, 4), (2, 5)]
    """

    epochs: int

    def __post_init__(self):
        v.check_int(self.epochs, name="epochs", caller="fixed_epochs")

    def check_n(self, n: int, caller: str, name: str = "n") -> int:
        n = v.check_int(n, name=name, caller=caller, low=1)
        if n % self.epochs:
            what = "be" if name == "n" else "have a number of steps n that is"
            raise ValueError(f"The '{name}' parameter of {caller} must {what} a multiple of the {self.epochs} epochs "
                             f"of fixed_epochs({self.epochs}) (n = k·b steps, b per epoch). Got n={n} instead.")
        return n

    def separation(self, n: int) -> int:
        return self.check_n(n, "FixedEpochs.separation") // self.epochs

    def participations(self, n: int) -> int:
        self.check_n(n, "FixedEpochs.participations")
        return self.epochs

    def patterns(self, n: int) -> list[tuple[int, ...]]:
        b = self.separation(n)
        return [tuple(range(j, n, b)) for j in range(b)]


@dataclass(frozen=True)
class MinSeparation(Schema):
    """Any pattern of at most k steps, consecutive ones at least b apart.

    Examples
    --------
    >>> min_separation(2, 2).patterns(4)
    [(0,), (1,), (2,), (3,), (0, 2), (0, 3), (1, 3)]
    >>> min_separation(2, 2).count(4)
    7
    """

    separation_steps: int
    max_participations: int

    def __post_init__(self):
        v.check_int(self.separation_steps, name="b", caller="min_separation")
        v.check_int(self.max_participations, name="k", caller="min_separation")

    def separation(self, n: int) -> int:
        self.check_n(n, "MinSeparation.separation")
        return self.separation_steps

    def participations(self, n: int) -> int:
        """min(k, ⌈n/b⌉): the most steps b apart that fit in n."""
        n = self.check_n(n, "MinSeparation.participations")
        return min(self.max_participations, -(-n // self.separation_steps))

    def count(self, n: int) -> int:
        """The number of patterns: Σ_{m=1}^{k} C(n − (m − 1)(b − 1), m) (m steps among the slots left once each
        gap's b − 1 forced empty steps are removed)."""
        k, b = self.participations(self.check_n(n, "MinSeparation.count")), self.separation_steps
        return sum(math.comb(n - (m - 1) * (b - 1), m) for m in range(1, k + 1))

    def patterns(self, n: int) -> list[tuple[int, ...]]:
        """Every pattern of 1 to k steps. Not only the longest: a short one need not fit inside a longer one
        (n = 4, b = 3: {1} extends to none)."""
        k, b = self.participations(self.check_n(n, "MinSeparation.patterns")), self.separation_steps
        count = self.count(n)
        if count > MAX_PATTERNS:
            raise ValueError(f"MinSeparation.patterns: {count:,} patterns at n={n:,} (b={b}, k={k}) is above "
                             f"{MAX_PATTERNS:,}; the sensitivity uses a dynamic programme instead of this list.")
        # m steps b apart ↔ m of the n − (m − 1)(b − 1) slots: shift the i-th chosen slot by i(b − 1)
        return [tuple(s + i * (b - 1) for i, s in enumerate(c))
                for m in range(1, k + 1) for c in combinations(range(n - (m - 1) * (b - 1)), m)]


def single() -> Single:
    """The classical schema: one record, at most one step."""
    return Single()


def fixed_epochs(epochs: int) -> FixedEpochs:
    """k = ``epochs`` passes over the data in a fixed order (n must be a multiple of k)."""
    return FixedEpochs(epochs)


def min_separation(b: int, k: int) -> MinSeparation:
    """At most ``k`` participations, consecutive ones at least ``b`` steps apart."""
    return MinSeparation(b, k)


def as_schema(participation, caller: str, *, none: bool = True) -> Schema:
    """``participation`` checked: a Schema, or None for :func:`single` — unless ``none`` is False (the functions
    that report a sensitivity or a run's privacy, where a variable left None would count each record once: ρ 4.5×
    too small under fixed_epochs(3), without a word; an audit)."""
    if participation is None and none:
        return Single()
    if participation is None:
        raise TypeError(f"The 'participation' parameter of {caller} must be a participation schema: "
                        "mmopt.participation.single(), fixed_epochs(k) or min_separation(b, k). Got None, which "
                        "would count each record once; pass single() if that is meant.")
    if not isinstance(participation, Schema):
        raise TypeError(f"The 'participation' parameter of {caller} must be a participation schema: "
                        "mmopt.participation.single(), fixed_epochs(k) or min_separation(b, k). "
                        f"Got {type(participation).__name__} instead.")
    return participation
