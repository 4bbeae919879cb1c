"""The stream workloads: prefix sums and all ranges over n cells, stored as (kind, n), at any n up to 2²⁴.

Notation: see README and :mod:`mmopt.toeplitz.error`, whose closed forms evaluate a Toeplitz strategy on them;
:func:`as_stream_workload` recognises mmopt's dense ``workload.prefix(n)`` / ``all_range(n)`` by their Gram and
rows, so every function of the Toeplitz layer takes either.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mmopt._base import validation as v
from mmopt.toeplitz.strategies import check_n

__all__ = ["KINDS", "StreamWorkload", "all_range", "as_stream_workload", "prefix", "stream_twin"]

KINDS = ("prefix", "all_range")


@dataclass(frozen=True)
class StreamWorkload:
    """The prefix workload (n queries) or all ranges (n(n+1)/2 queries) over n cells, stored as (kind, n)."""

    kind: str
    n: int

    def __post_init__(self):  # StreamWorkload("bogus", 4) was evaluated as all ranges (a helper's probe)
        v.check_choice(self.kind, name="kind", caller="StreamWorkload", choices=KINDS)
        check_n(self.n, "StreamWorkload")

    @property
    def name(self) -> str:
        return f"{self.kind}({self.n})"  # as the dense workloads' names (it was the kind alone)

    @property
    def domain_size(self) -> int:
        return self.n

    @property
    def n_queries(self) -> int:
        return self.n if self.kind == "prefix" else self.n * (self.n + 1) // 2

    # the dense workloads' attributes, through the dense twin: prefix(10,001).gram raised AttributeError on this type
    # (prefix(10,000) is dense); past the allocation limit the twin refuses with the size and a remedy
    @property
    def gram(self):
        return self.to_workload().gram

    @property
    def mean_gram(self):
        return self.to_workload().mean_gram

    def explicit_matrix(self, **kwargs):
        return self.to_workload().explicit_matrix(**kwargs)

    def to_workload(self):
        """The dense twin (:func:`mmopt.workload.prefix` / ``all_range`` as an n×n Gram); refused past the
        allocation limit before allocating."""
        from mmopt._base import validation as v
        from mmopt.dense import _workload_core as core  # lazy: the dense layer is the reference, never the reverse
        # in this method's words (the dense constructor's named 'prefix: the … Gram matrix', and no way on)
        v.check_allocation(2 * self.n * self.n, what=f"the dense twin of {self.kind}({self.n:,}) (its n×n Gram and "
                           "one temporary)", caller=f"{type(self).__name__}.to_workload",
                           remedy=" mmopt.evaluate, optimize and release take the stream workload as it is, in "
                                  "O(n).")
        return getattr(core, self.kind)(self.n)


def prefix(n: int) -> StreamWorkload:
    """The n prefix sums x₀ + … + x_t (any n up to 2²⁴; no matrix is built)."""
    return StreamWorkload("prefix", check_n(n, "prefix"))


def all_range(n: int) -> StreamWorkload:
    """All n(n+1)/2 range queries x_i + … + x_j (any n up to 2²⁴; no matrix is built)."""
    return StreamWorkload("all_range", check_n(n, "all_range"))


def as_stream_workload(workload, caller: str) -> StreamWorkload:
    """A StreamWorkload from itself, or from mmopt's dense ``workload.prefix(n)`` / ``workload.all_range(n)``
    (recognised by their Gram, checked entry by entry, not by name)."""
    if isinstance(workload, StreamWorkload):
        return workload
    from mmopt.dense._workload_type import Workload  # lazy: the dense layer is only needed for this conversion
    if isinstance(workload, Workload):
        n = workload.domain_size
        if workload.family in KINDS:  # a closed-form family: its Gram was checked against the formula on creation
            return StreamWorkload(workload.family, n)
        i = np.arange(1, n + 1)
        lo, hi = np.minimum.outer(i, i), np.maximum.outer(i, i)
        for kind, G, m in (("prefix", n - hi + 1.0, n), ("all_range", lo * (n - hi + 1.0), n * (n + 1) // 2)):
            if workload.n_queries == m and np.allclose(workload.mean_gram * m, G, rtol=1e-12, atol=1e-12):
                # the Gram fixes the total error, not the rows: W = R·P (R orthogonal) has prefix(n)'s Gram, and its
                # per-query and largest errors were reported for P's rows, as exact
                if _family_rows(workload, kind):
                    return StreamWorkload(kind, n)
                raise TypeError(f"The 'workload' parameter of {caller} has the Gram of {kind}({n}) but not its rows "
                                "(or only its Gram is known), so its per-query errors are not those of "
                                f"{kind}({n}). Use mmopt.evaluate for it, or pass mmopt.toeplitz.{kind}({n}).")
    raise TypeError(f"The 'workload' parameter of {caller} must be mmopt.toeplitz.prefix(n) or all_range(n) "
                    f"(or the dense mmopt.workload.prefix(n) / all_range(n)). Got {type(workload).__name__} "
                    f"{getattr(workload, 'name', '')!r} instead.")


def stream_twin(workload, above: int = 0) -> StreamWorkload | None:
    """StreamWorkload(kind, n) for mmopt's closed-form dense ``prefix(n)`` / ``all_range(n)`` (rows known by family,
    no matrix) of more than ``above`` cells; None for any other workload."""
    if (getattr(workload, "matrix", 0) is None and getattr(workload, "family", None) in KINDS
            and workload.domain_size > above):
        return StreamWorkload(workload.family, workload.domain_size)
    return None


def _family_rows(workload, kind: str) -> bool:
    """Whether the stored rows of ``workload`` are the 0/1 intervals of ``kind`` (prefixes [0, j], or every [i, j]),
    in any order; False when only its Gram is known."""
    if workload.matrix is None:
        return False
    W = np.asarray(workload.matrix)
    n = W.shape[1]
    if not np.all((W == 0) | (W == 1)):
        return False
    ones = W.sum(axis=1)
    first = np.argmax(W == 1, axis=1)
    last = n - 1 - np.argmax(W[:, ::-1] == 1, axis=1)
    if np.any(ones == 0) or np.any(ones != last - first + 1):  # each row one contiguous interval
        return False
    if kind == "prefix":
        return bool(np.all(first == 0)) and np.array_equal(np.sort(last), np.arange(n))
    pairs = np.unique(first * n + last)
    return pairs.size == W.shape[0]  # n(n+1)/2 distinct intervals: every one
