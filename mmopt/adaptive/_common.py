"""Shared pieces of the data-adaptive baselines: the result type and the input checks.

Neighbouring histograms differ by one record: x' = x ± e_i for one cell i (add/remove, the matrix
mechanism's relation). Every noise draw goes through a :class:`mmopt.adaptive._noise.Noise`: seeded numpy
(``noise="numpy"``, simulation and benchmarking only — floating-point Laplace and Gumbel samplers leak through
their low-order bits, Mironov 2012) or OpenDP's vetted samplers (``noise="opendp"``, release-grade).
"""

from __future__ import annotations

import math
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import sparse

from mmopt._base import validation as v
from mmopt.dense._workload_type import Workload
from mmopt.structured.workloads import ImplicitWorkload

_TINY = np.finfo(float).tiny


@dataclass(frozen=True, eq=False)
class AdaptiveResult:
    """The estimate of x returned by a data-adaptive algorithm, with its privacy accounting.

    Attributes
    ----------
    method : str
        "uniform", "mwem", "dawa" or "ahp".
    estimate : ndarray, shaped like x (read-only)
        x̂. Any workload is answered as ``W @ estimate.ravel()`` (row-major for 2-D x), see :meth:`answer`.
    epsilon : float
        The total ε spent: the output is ε-DP (add/remove one record) as a whole.
    budget : Mapping[str, float]
        How ε was split between the algorithm's private steps; the values add up to ``epsilon``.
    details : Mapping[str, Any]
        Algorithm-specific record (noisy totals, selected queries, buckets, noise scales, sensitivities).
    path : str
        "release" when every sample came from OpenDP's vetted samplers (``noise="opendp"``), "simulation" for
        seeded numpy noise (not for releasing real data); ``details["noise"]`` names the back-end.
    """

    method: str
    estimate: np.ndarray = field(repr=False)
    epsilon: float
    budget: Mapping[str, float]
    details: Mapping[str, Any] = field(repr=False)
    path: str = "simulation"

    def answer(self, workload) -> np.ndarray:
        """W x̂ for a :class:`~mmopt.Workload` (W stored or buildable) or a matrix W (m × x.size)."""
        W = query_matrix(workload, self.estimate.size, "AdaptiveResult.answer")
        return W @ self.estimate.ravel()


def make_result(method: str, estimate: np.ndarray, epsilon: float, budget: dict, details: dict,
                noise=None) -> AdaptiveResult:
    """The read-only result; with a ``noise`` (a Noise), ``details["noise"]`` and ``path`` record its back-end."""
    estimate = np.asarray(estimate, dtype=np.float64)
    estimate.setflags(write=False)
    path = "simulation"
    if noise is not None:
        details = {**details, "noise": noise.backend}
        path = "release" if noise.vetted else "simulation"
    return AdaptiveResult(method, estimate, float(epsilon), types.MappingProxyType(dict(budget)),
                          types.MappingProxyType(dict(details)), path)


def log_sum_exp(a: np.ndarray) -> float:
    """log Σ exp(a) for a finite, non-empty a, shifted by its maximum (scipy's version costs ~0.2 ms a call)."""
    top = float(a.max())
    return top + math.log(float(np.exp(a - top).sum()))


def _check_histogram(x, caller: str) -> np.ndarray:
    """x as a finite, non-negative float64 array of ndim 1 or 2 with at least one cell."""
    if sparse.issparse(x):
        raise TypeError(f"The 'x' parameter of {caller} must be a dense array of counts. Got a scipy.sparse "
                        "matrix; pass x.toarray().")
    try:
        nd = np.ndim(x)
    except ValueError:  # ragged nested lists: check_vector words the message
        nd = 1
    if nd == 2:
        arr = v.check_matrix(x, name="x", caller=caller)
    elif nd in (0, 1):
        arr = v.check_vector(x, name="x", caller=caller)
    else:
        raise ValueError(f"The 'x' parameter of {caller} must be a 1-D or 2-D array of counts. Got an array of "
                         f"shape {np.shape(x)} instead.")
    if arr.size == 0:
        raise ValueError(f"The 'x' parameter of {caller} must have at least one cell. Got shape {arr.shape}.")
    if np.any(arr < 0):
        raise ValueError(f"The 'x' parameter of {caller} must hold counts >= 0. "
                         "Got negative counts (how many is not printed: a figure of the data).")
    return arr


#: ε range of the data-adaptive algorithms: their noise variances 2(Δ/ε)², products of two of them in the
#: inverse-variance fusions and the estimates built from them must stay finite and normal (at ε = 1e-300 the
#: variances overflowed and kd_tree / agrid returned NaN; at ε = 1e300 they underflowed to 0 and the weights divided
#: by zero; at 1e-150 kd_tree's fused estimates still overflowed).
EPSILON_RANGE = (1e-50, 1e50)
#: The largest count accepted: sums of squared counts (AHP's cluster costs, the estimates' variances) stay finite
#: over 10⁸ cells (ahp and uniform returned inf on counts of 1e308).
MAX_COUNT = 1e140
#: The largest total accepted: past 2⁵³ float64 sums of whole counts stop being exact, and one record moved a
#: released sum by 2 where Δ = 1 (uniform, mwem: a loss of 2ε at x = [2⁵³, 1, …]; a helper's audit). 2⁵² leaves
#: every partial sum of whole counts exact, and no table of records comes near it (4.5·10¹⁵).
MAX_TOTAL = 2.0**52


def check_total(total: float, name: str, caller: str) -> None:
    """Refuse a histogram whose counts sum past :data:`MAX_TOTAL` (whose sums the proofs' Δ no longer bounds)."""
    if total > MAX_TOTAL:
        raise ValueError(f"The '{name}' parameter of {caller} must hold counts totalling at most 2^52 "
                         f"(≈4.5e15), where float64 sums of whole counts are exact (past 2^53 one record can move a "
                         f"sum by 2, twice the sensitivity the privacy proof charges). Got a larger total (not "
                         "printed: a figure of the data).")


def check_histogram(x, caller: str) -> np.ndarray:
    """x as a finite, non-negative float64 array of ndim 1 or 2 with at least one cell, counts ≤ MAX_COUNT,
    total ≤ MAX_TOTAL."""
    arr = _check_histogram(x, caller)
    if arr.max() > MAX_COUNT:
        raise ValueError(f"The 'x' parameter of {caller} must hold counts <= {MAX_COUNT:g} (their squares must "
                         f"stay finite). Got a larger count (not printed: a figure of the data); rescale the data.")
    check_total(float(arr.sum()), "x", caller)
    return arr


def check_epsilon(epsilon, caller: str) -> float:
    """ε within :data:`EPSILON_RANGE` (so that 1/ε, 2/ε² and 1/(2/ε²) are normal floats); a float, or a pure-ε
    :class:`~mmopt.Privacy` as the rest of mmopt takes budgets (these algorithms are ε-DP: δ must be 0)."""
    from mmopt.privacy import pure_epsilon
    eps = v.check_real(pure_epsilon(epsilon, caller), name="epsilon", caller=caller, low=0.0, low_open=True)
    lo, hi = EPSILON_RANGE
    if eps < _TINY:
        raise ValueError(f"The 'epsilon' parameter of {caller} must be a normal float (>= {_TINY:.3g}). "
                         f"Got {eps!r} instead.")
    if not lo <= eps <= hi:
        raise ValueError(f"The 'epsilon' parameter of {caller} must be between {lo:g} and {hi:g}, so that the noise "
                         f"variances 2/ε² are normal floats. Got {eps!r} instead.")
    return eps


def check_fraction(value, name: str, caller: str) -> float:
    """A budget fraction in the open interval (0, 1)."""
    return v.check_real(value, name=name, caller=caller, low=0.0, high=1.0, low_open=True, high_open=True)


def laplace_scale(sensitivity: float, epsilon: float, what: str, caller: str) -> float:
    """b = Δ/ε, refused if it overflows (ε far below Δ·1e-308)."""
    with np.errstate(over="ignore"):
        b = float(np.float64(sensitivity) / np.float64(epsilon))
    if not math.isfinite(b):
        raise ValueError(f"{caller}: the Laplace scale of {what} (Δ/ε = {sensitivity:g}/{epsilon:g}) overflows "
                         "float64. Use a larger 'epsilon'.")
    return b


def query_matrix(workload, n: int, caller: str) -> np.ndarray:
    """The dense query matrix W (m × n) of a Workload or an array-like, with a clear error when it has none."""
    if isinstance(workload, Workload):
        try:
            W = workload.explicit_matrix()
        except ValueError as exc:
            raise ValueError(f"The 'workload' parameter of {caller} needs an explicit query matrix: {exc} "
                             "Pass workload.prefix(n) or a sample such as workload.random_range(n, m).") from None
    elif isinstance(workload, ImplicitWorkload):
        raise TypeError(f"The 'workload' parameter of {caller} must be a dense Workload or a matrix. Got an "
                        "ImplicitWorkload (a product or union never formed); pass a matrix of the queries you need.")
    else:
        W = v.check_matrix(workload, name="workload", caller=caller)
    if W.shape[1] != n:
        raise ValueError(f"The 'workload' parameter of {caller} must have {n} columns (one per cell of x, "
                         f"row-major for 2-D x). Got shape {W.shape}.")
    return W
