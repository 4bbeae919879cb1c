"""Least squares in the residual basis: every Gaussian measurement of marginals, combined subspace by subspace.

Notation: see README and :mod:`mmopt.structured.residual`. On attribute i let Cᵢ = I − J/nᵢ (centring). The
marginal m_A of the records on the attribute set A splits into its *residual components*
r_S = (⊗_{i∈S} Cᵢ) m_S, one per S ⊆ A (each lives in the residual subspace Q_S, mutually orthogonal):

    m_A = Σ_{S⊆A} N_S/N_A · broadcast_A(r_S)                                                            (1)

(centre along S, average along A∖S; r_∅ = the number of records). A Gaussian measurement of marginals gives,
for every S it covers, an unbiased estimate r̂_S with covariance v_S·P_S (P_S the projector on Q_S, *isotropic*):

* mmopt's residual strategy (:mod:`mmopt.structured.residual.strategy`): y_S = c_S(⊗Bᵢ)m_S + N(0, σ²I) with
  BᵢᵀBᵢ = Cᵢ and Bᵢ⁺ = Bᵢᵀ, so r̂_S = (⊗Bᵢᵀ)y_S / c_S and v_S = σ²/c_S²;
* an identity measurement of m_C at noise σ, for every S ⊆ C: r̂_S = C_S(Σ_{C∖S} y_C), v_S = σ²·N_C/N_S.

Estimates of different subspaces are independent (orthogonal projections of isotropic noise), and all estimates of
one subspace are isotropic there, so the generalised least-squares estimate of x from *all* measurements is, on
each Q_S, the inverse-variance average of that subspace's estimates (:meth:`ResidualEstimates.combine`), and the
least-squares marginal on A is (1) with r̂ in place of r: consistent across marginals by construction, unbiased,
never forming the N-cell vector. It may be negative: :mod:`mmopt.synth.projection` makes it a distribution.
The per-cell variance of (1) is Σ_{S⊆A} v_S (N_S/N_A)² ∏_{i∈S}(1 − 1/nᵢ) (the diagonal of P_S).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from mmopt.structured.residual import closure as cl
from mmopt.structured.residual.reconstruct import _basis_along

__all__ = ["ResidualEstimates", "from_measurements"]


@dataclass(frozen=True, eq=False)
class ResidualEstimates:
    """Unbiased estimates r̂_S of the residual components of the records, with cov(r̂_S) = v_S·P_S.

    Attributes
    ----------
    shape : tuple of int
        The domain's attribute sizes.
    values : dict
        {S: r̂_S, an array of shape (nᵢ for i in S)}; S = () is the estimated number of records (0-d).
    variances : dict
        {S: v_S > 0}.
    """

    shape: tuple[int, ...]
    values: dict = field(repr=False)
    variances: dict = field(repr=False)

    @property
    def total(self) -> float:
        """r̂_∅: the estimated number of records."""
        return float(self.values[()])

    def covers(self, attributes) -> bool:
        """Whether every live subset of ``attributes`` has an estimate (the marginal is then estimable)."""
        live = tuple(i for i in attributes if self.shape[i] > 1)
        return all(S in self.values for k in range(len(live) + 1) for S in itertools.combinations(live, k))

    def combine(self, other: ResidualEstimates) -> ResidualEstimates:
        """The inverse-variance average per subspace: the least-squares estimate from both sets of measurements.

        Examples
        --------
        >>> a = ResidualEstimates((2,), {(): np.array(10.0)}, {(): 1.0})
        >>> b = ResidualEstimates((2,), {(): np.array(13.0)}, {(): 2.0})
        >>> c = a.combine(b)
        >>> float(c.values[()]), c.variances[()]             # (10/1 + 13/2)/(1/1 + 1/2), 1/(1 + 1/2)
        (11.0, 0.6666666666666666)
        """
        values, variances = dict(self.values), dict(self.variances)
        for S, r in other.values.items():
            if S not in values:
                values[S], variances[S] = r, other.variances[S]
                continue
            va, vb = variances[S], other.variances[S]
            values[S] = (values[S] * vb + r * va) / (va + vb)
            variances[S] = va * vb / (va + vb)
        return ResidualEstimates(self.shape, values, variances)

    def marginal(self, attributes) -> np.ndarray:
        """The least-squares marginal (1) on the sorted tuple ``attributes``; a ValueError if not estimable."""
        A = tuple(attributes)
        if not self.covers(A):
            raise ValueError(f"ResidualEstimates.marginal: a subset of {A} was never measured, so its marginal is "
                             "not estimable from these measurements.")
        NA = cl.cells(self.shape, A)
        out = np.zeros(tuple(self.shape[i] for i in A))
        live = tuple(i for i in A if self.shape[i] > 1)
        for k in range(len(live) + 1):
            for S in itertools.combinations(live, k):
                idx = tuple(slice(None) if i in S else None for i in A)
                out = out + np.asarray(self.values[S])[idx] * (cl.cells(self.shape, S) / NA)
        return out

    def cell_variance(self, attributes) -> float:
        """The variance of every cell of :meth:`marginal` (the same for all cells; module docstring)."""
        A = tuple(attributes)
        NA = cl.cells(self.shape, A)
        live = tuple(i for i in A if self.shape[i] > 1)
        return float(sum(self.variances[S] * (cl.cells(self.shape, S) / NA) ** 2
                         * math.prod(1.0 - 1.0 / self.shape[i] for i in S)
                         for k in range(len(live) + 1) for S in itertools.combinations(live, k)))


def from_measurements(strategy, values: dict, sigma: float) -> ResidualEstimates:
    """r̂_S = (⊗Bᵢᵀ)y_S / c_S and v_S = σ²/c_S² for every subset of a residual strategy (module docstring).

    Examples
    --------
    >>> from mmopt.structured.residual import measure, residual_strategy
    >>> A = residual_strategy((2, 3), {(): 1.0, (0,): 1.0, (1,): 2.0, (0, 1): 1.0})
    >>> x = np.arange(6.0).reshape(2, 3)
    >>> est = from_measurements(A, measure(A, x).values, sigma=1.0)
    >>> est.marginal((0, 1)).round(12).tolist(), est.variances[(1,)]     # noiseless: the table itself
    ([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], 0.25)
    """
    shape = strategy.shape
    out, var = {}, {}
    for S, c in zip(strategy.subsets, strategy.weights.tolist(), strict=True):
        y = np.asarray(values[S], dtype=np.float64)
        for ax, i in enumerate(S):
            y = _basis_along(y, shape[i], ax, transpose=True)
        out[S] = y / c
        var[S] = sigma * sigma / (c * c)
    return ResidualEstimates(tuple(shape), out, var)
