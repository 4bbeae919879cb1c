"""Measuring residuals from marginal counts, and the least-squares marginals from noisy residuals.

Notation: see README and :mod:`.strategy`. Measurement S is y_S = c_S·(⊗_{i∈S} Bᵢ) m_S + z_S, where m_S are
the counts of the marginal on S (so only marginal counts are ever needed, never the N-cell data vector) and
z_S is i.i.d. noise. For the stacked strategy A = [c_S K_S], X⁺ = Σ_S N_S/(N c_S²)·Q_S and Q_S K_{S'}ᵀ =
δ_{SS'} K_Sᵀ, so the least-squares estimate is x̂ = A⁺y = Σ_S N_S/(N c_S)·K_Sᵀ y_S. The marginal on A kills
every term with S ⊄ A (1ᵀBᵢᵀ = 0) and maps the others by M_A K_Sᵀ = (N/N_A)·⊗_{i∈S} Bᵢᵀ ⊗_{i∈A∖S} 1, so

    M_A x̂ = Σ_{S⊆A} N_S/(N_A c_S) · (⊗_{i∈S} Bᵢᵀ y_S, repeated along the attributes of A∖S),

which costs O(2^|A|·N_A·|A|·max nᵢ): the size of the marginal, not of the domain. Its variance is
:func:`.error.evaluate`'s per-marginal variance divided by w_A².

**Simulation only**: the noise comes from numpy's samplers (see README, "Running the mechanism").
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from mmopt._base import validation as v
from mmopt.dense._error_common import check_privacy
from mmopt.privacy import Privacy
from mmopt.structured import _checks as ck
from mmopt.structured.residual import closure as cl
from mmopt.structured.residual import strategy as rs


@dataclass(frozen=True, eq=False)
class Measurements:
    """Noisy residual measurements y_S of a :class:`~.strategy.ResidualStrategy`.

    ``values[S]`` has shape ``batch + (rows of Bᵢ for i in S)``; ``noise`` is "gaussian", "laplace" or
    "none" and ``noise_scale`` the per-entry σ (Gaussian) or b (Laplace).
    """

    strategy: rs.ResidualStrategy
    values: dict = field(repr=False)
    noise: str
    noise_scale: float
    batch: tuple = ()


def marginal_counts(x, shape, sets) -> dict:
    """{A: counts of the marginal on A} from a data vector ``x`` (flat or shaped), for the given sets."""
    caller = "marginal_counts"
    shape = v.check_shape(shape, caller=caller)
    X = ck.check_data(x, shape, caller=caller)
    out = {}
    for A in cl.check_sets(sets, shape, name="sets", caller=caller):
        out[A] = X.sum(axis=tuple(i for i in range(len(shape)) if i not in A))
    return out


_HALF_SQRT2 = 1.0 / math.sqrt(2.0)


def _basis_along(y: np.ndarray, n: int, axis: int, *, transpose: bool = False) -> np.ndarray:
    """:func:`~mmopt.structured.residual.strategy.residual_basis` (n) (or its transpose) applied to ``axis`` of y
    without forming it: I − J/n is the mean removed along the axis, O(size) (an attribute with 10⁶ values
    allocated its 10⁶×10⁶ basis, 7.3 TiB, and died of MemoryError); n = 2 is the 1×2 basis itself."""
    if n == 2:  # B = [1, −1]/√2: a difference, or (transposed) the value and its negative, without tensordot
        if transpose:
            return np.concatenate([y, -y], axis=axis) * _HALF_SQRT2
        return (np.take(y, [0], axis=axis) - np.take(y, [1], axis=axis)) * _HALF_SQRT2
    return y - y.mean(axis=axis, keepdims=True)


def _check_counts(counts: dict, shape, caller: str) -> dict:
    keys = cl.check_sets(list(counts), shape, name="counts", caller=caller, distinct=True)  # as targets, weights
    out = {}
    for given, A, val in zip(counts, keys, counts.values(), strict=True):
        want = tuple(shape[i] for i in A)
        try:
            a = np.asarray(val, dtype=float)
        except (TypeError, ValueError):
            raise TypeError(f"The 'counts' parameter of {caller} must map attribute tuples to arrays of numbers. "
                            f"Got {type(val).__name__} for {A}.") from None
        order = [int(i) for i in np.atleast_1d(given)] if np.ndim(given) else [int(given)]
        if a.ndim == len(order) and order != sorted(order):  # axes in the key's order: (1, 0) is indexed
            # [a₁, a₀]; the key was sorted and the array not, which transposed it silently when the sizes agree
            a = np.transpose(a, [order.index(i) for i in A])
        if a.shape != want or not np.all(np.isfinite(a)):
            raise ValueError(f"The 'counts' parameter of {caller} must hold, for {A}, a finite array of shape {want} "
                             f"(the marginal's cells, attributes in increasing order). Got shape {a.shape} instead.")
        out[A] = a
    return out


def _check_consistent(counts: dict, caller: str) -> None:
    """Every two given marginals agree on the attributes they share (each subset is summed from one of them, so
    counts of two different tables were measured side by side without a word: {(0,): [1, 2], (1,): [100, 200,
    300]} has totals 3 and 600). Each subset's sums are compared with the first marginal's containing it: 2^|A|
    sums per marginal, not one per pair (455 three-way marginals: 3,640). Whole counts agree exactly; the
    allowance is round-off of their sums, relative to them (a floor of 1 let tables of totals 3·10⁻²⁰ and
    6·10⁻¹⁸ pass as one)."""
    first: dict = {}
    for A, a in counts.items():
        scale = float(np.abs(a).sum())
        for k in range(len(A) + 1):
            for S in itertools.combinations(A, k):
                sums = a.sum(axis=tuple(q for q, i in enumerate(A) if i not in S))
                if S not in first:
                    first[S] = (A, sums)
                    continue
                B, ref = first[S]
                if not np.allclose(sums, ref, rtol=0.0, atol=1e-12 * max(scale, float(np.abs(ref).sum()))):
                    raise ValueError(f"The 'counts' parameter of {caller} holds marginals that disagree: {B} and {A} "
                                     f"sum to different counts on {S or 'the total'} (e.g. {float(np.ravel(ref)[0]):g} "
                                     f"against {float(np.ravel(sums)[0]):g}). Pass the marginals of one table.")


def _sources(subsets, counts: dict, caller: str) -> dict:
    """For every subset S, the counts on S, summed from the smallest given marginal that contains S."""
    best: dict = {}
    for A, a in counts.items():
        for k in range(len(A) + 1):
            for S in itertools.combinations(A, k):
                if S not in best or best[S][1].size > a.size:
                    best[S] = (A, a)
    out = {}
    for S in subsets:
        if S not in best:
            raise ValueError(f"The 'counts' parameter of measure has no marginal containing {S}, which the strategy "
                             "measures. Pass the counts of every workload marginal (or of larger ones).")
        A, a = best[S]
        out[S] = a.sum(axis=tuple(p for p, i in enumerate(A) if i not in S))
    return out


def measure(strategy: rs.ResidualStrategy, data, privacy: Privacy | None = None, *, rng=None,
            size: int | None = None) -> Measurements:
    """y_S = c_S·(⊗_{i∈S} Bᵢ) m_S + noise for every subset S of ``strategy`` (module docstring).

    Parameters
    ----------
    strategy : ResidualStrategy
    data : dict or array_like
        Marginal counts {attribute tuple: array} covering every measured subset (each S is summed from the
        smallest given marginal containing it), or a data vector over the whole domain (flat or shaped).
    privacy : Privacy or None
        Laplace noise of scale Δ₁/ε (δ = 0) or Gaussian noise with σ calibrated to Δ₂ (δ > 0) on every entry;
        None measures without noise.
    rng : int, Generator or None
    size : int or None
        Draw ``size`` independent noisy copies (a leading batch axis), for Monte Carlo studies.
    """
    caller = "measure"
    if not isinstance(strategy, rs.ResidualStrategy):
        raise TypeError(f"The 'strategy' parameter of {caller} must be a ResidualStrategy. "
                        f"Got {type(strategy).__name__} instead.")
    check_privacy(privacy, caller)
    shape = strategy.shape
    if isinstance(data, dict):
        counts = _check_counts(data, shape, caller)
        _check_consistent(counts, caller)
        m = _sources(strategy.subsets, counts, caller)
    else:
        m = marginal_counts(data, shape, strategy.subsets)
    batch = () if size is None else (v.check_int(size, name="size", caller=caller),)
    if batch and privacy is None:
        raise ValueError(f"The 'size' parameter of {caller} needs a privacy budget (noise to draw). Got size={size} "
                         "with privacy=None.")
    n_entries = math.prod(batch) * sum(math.prod(strategy.rows(i) for i in S) for S in strategy.subsets)
    ck.check_allocation(n_entries, what="the measurements", caller=caller, limit=ck.MAX_VECTOR_ENTRIES)
    gen = v.check_rng(rng, name="rng", caller=caller)
    noise, scale = "none", 0.0
    if privacy is not None:
        noise = privacy.noise
        scale = privacy.noise_scale(rs.sensitivity(strategy, privacy.sensitivity_norm).value)
    values = {}
    for S, c in zip(strategy.subsets, strategy.weights.tolist(), strict=True):
        y = c * m[S]
        for ax, i in enumerate(S):
            y = _basis_along(y, shape[i], ax)
        if noise == "gaussian":
            y = y + gen.normal(0.0, scale, batch + y.shape)
        elif noise == "laplace":
            y = y + gen.laplace(0.0, scale, batch + y.shape)
        values[S] = y
    return Measurements(strategy, values, noise, scale, batch)


def reconstruct(measurements: Measurements, attributes) -> np.ndarray:
    """The least-squares estimate of the (unweighted) marginal on ``attributes`` (module docstring).

    Returns an array of shape ``batch + (nᵢ for i in attributes)``, attributes in increasing order. Raises
    ValueError when a subset of ``attributes`` was not measured (the marginal is then not estimable).

    Examples
    --------
    >>> A = rs.residual_strategy((2, 3), {(): 1.0, (0,): 1.0, (1,): 1.0, (0, 1): 1.0})
    >>> x = np.arange(6.0)
    >>> reconstruct(measure(A, x), (1,)).round(12).tolist()   # without noise: the column sums of x as 2×3
    [3.0, 5.0, 7.0]
    """
    caller = "reconstruct"
    if not isinstance(measurements, Measurements):
        raise TypeError(f"The 'measurements' parameter of {caller} must be Measurements (from measure). "
                        f"Got {type(measurements).__name__} instead.")
    strategy = measurements.strategy
    shape, batch = strategy.shape, measurements.batch
    (A,) = cl.check_sets([attributes], shape, name="attributes", caller=caller)
    NA = cl.cells(shape, A)
    ck.check_allocation(NA * max(1, math.prod(batch)), what=f"the marginal on {A}", caller=caller,
                        limit=ck.MAX_VECTOR_ENTRIES)
    live = tuple(i for i in A if shape[i] > 1)
    out = np.zeros(batch + tuple(shape[i] for i in A))
    offset = len(batch)
    for k in range(len(live) + 1):
        for S in itertools.combinations(live, k):
            j = strategy.index.get(S)
            if j is None:
                raise ValueError(f"{caller}: the strategy did not measure the residual of {S}, a subset of {A}, so "
                                 "the marginal is not estimable. Measure every subset of the marginals you need.")
            y = measurements.values[S]
            for ax, i in enumerate(S):
                y = _basis_along(y, shape[i], offset + ax, transpose=True)
            full = batch + tuple(shape[i] if i in S else 1 for i in A)
            coef = cl.cells(shape, S) / (NA * float(strategy.weights[j]))
            out += coef * y.reshape(full)
    return out


def reconstruct_all(measurements: Measurements, sets) -> dict:
    """{A: :func:`reconstruct` (measurements, A)} for every set A."""
    shape = getattr(getattr(measurements, "strategy", None), "shape", None)
    if shape is None:
        raise TypeError("The 'measurements' parameter of reconstruct_all must be Measurements (from measure). "
                        f"Got {type(measurements).__name__} instead.")
    return {A: reconstruct(measurements, A) for A in cl.check_sets(sets, shape, name="sets", caller="reconstruct_all")}
