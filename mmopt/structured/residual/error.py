"""Exact error and SVD bound of strategies in the residual algebra on marginal workloads, at any d.

Notation: see README and :mod:`mmopt.structured.residual.workload`. With G = N·Σ_S ν_S Q_S and a strategy
Gram X = N·Σ_S ℓ_S Q_S (:mod:`.spectrum`), X⁺ = Σ_{ℓ_S>0} Q_S/(N ℓ_S) and (Li et al., PODS 2010, Prop. 4.4)

    total = c·Δ²·tr(G X⁺) = c·Δ²·Σ_S r_S ν_S / ℓ_S.

A query of the marginal on A is q = w_A·⊗_{i∈A} e_{xᵢ} ⊗_{i∉A} 1ᵀ. Per attribute e Rᵢ eᵀ = 1 − 1/nᵢ,
e Pᵢ eᵀ = 1/nᵢ, 1ᵀRᵢ1 = 0 and 1ᵀPᵢ1 = nᵢ, so q Q_T qᵀ = w_A² r_T N/N_A² for T ⊆ A and 0 otherwise: it does
not depend on the cell x. Every cell of a marginal has the same variance,

    var_A = c·Δ²·w_A² Σ_{T⊆A} r_T / (N_A² ℓ_T),

and Σ_A N_A var_A is the total. The singular values of W are √(N ν_S) with multiplicity r_S, so the SVD
bound c·(Σσ)²/N of :func:`mmopt.svd_bound` (Thm 5.26) is c·(Σ_S r_S √ν_S)²: N cancels. Everything costs
O(Σ_A 2^|A|), polynomial in the closure size; d = 100 is routine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from mmopt._base.guards import Unsupported
from mmopt.dense._error_common import check_privacy, resolve_norm
from mmopt.privacy import Privacy
from mmopt.structured.residual import spectrum as sp
from mmopt.structured.residual import strategy as rs
from mmopt.structured.residual.workload import MarginalWorkload, as_marginal_workload
from mmopt.structured.strategies import ImplicitStrategy


@dataclass(frozen=True)
class ResidualReport:
    """Exact expected squared errors of a strategy in the algebra on a marginal workload.

    ``per_marginal_variance[j]`` is the variance of every query (cell) of the j-th marginal of the workload
    (weights included), None for a non-literal workload; ``max_variance`` is their largest. Δ is exact unless
    ``sensitivity_exact`` is False (an implicit strategy with unequal factor columns: a proven upper bound, so
    the errors are upper bounds too).
    """

    workload: str
    strategy: str
    privacy: Privacy | None
    norm: str
    n_queries: int
    sensitivity: float
    sensitivity_exact: bool
    total_squared_error: float
    mean_squared_error: float
    rmse: float
    max_variance: float | None
    svd_bound: float
    closure_size: int
    per_marginal_variance: np.ndarray | None = field(default=None, repr=False, compare=False)


def unit_errors(W: MarginalWorkload, ell: np.ndarray, *, caller: str):
    """(Σ_S r_S ν_S/ℓ_S, per-marginal Σ_{T⊆A} w_A² r_T/(N_A² ℓ_T) or None): errors at c·Δ² = 1.

    Raises ValueError when ℓ_S = 0 on a member where ν_S > 0: the strategy does not support W.
    """
    C, nu = W.closure, W.eigenvalues
    missing = np.flatnonzero((ell <= 0) & (nu > 0))
    if missing.size:
        shown = [C.members[k] for k in missing[:5]]
        raise Unsupported(f"{caller}: the strategy does not support workload '{W.name}': it measures nothing on the "
                         f"residual subspaces of {shown}{' …' if missing.size > 5 else ''} ({missing.size} in all). "
                         "Add those subsets (or marginals covering them) to the strategy.")
    inv = np.where(ell > 0, C.multiplicity / np.where(ell > 0, ell, 1.0), 0.0)
    total = float(nu @ inv)
    per = None
    if W.literal:
        per = W.weights**2 / W.set_cells**2 * (W.incidence @ inv)
    return total, per


def spectrum_of(strategy, W: MarginalWorkload, *, caller: str):
    """(ℓ over W's closure, norm → (Δ, exact)) for a ResidualStrategy, weighted marginals, or an implicit strategy
    in the algebra."""
    if isinstance(strategy, rs.ResidualStrategy):
        return sp.residual_spectrum(strategy, W.closure), lambda norm: (rs.sensitivity(strategy, norm).value, True)
    from mmopt.structured.residual import marginals as wm  # lazy: that module builds on this layer's closure
    if isinstance(strategy, wm.WeightedMarginals):
        return wm.spectrum(strategy, W.closure), lambda norm: (strategy.sensitivity(norm), True)
    if isinstance(strategy, ImplicitStrategy):
        memo = sp._Memo()
        ell = sp.algebra_spectrum(strategy, W.closure, memo=memo)
        if ell is not None:
            def delta(norm):
                d = sp.algebra_sensitivity(strategy, norm, memo=memo)
                if d is not None:
                    return d, True
                from mmopt.structured.strategies import sensitivity
                found = sensitivity(strategy, norm)  # exact, or a proven upper bound for unequal columns
                return found.value, found.exact
            return ell, delta
        raise ValueError(f"{caller}: strategy '{strategy.name}' has a factor whose Gram is not αI + βJ, so it is "
                         "outside the residual algebra. Use mmopt.evaluate for it.")
    raise TypeError(f"The 'strategy' parameter of {caller} must be a ResidualStrategy, WeightedMarginals or an "
                    "ImplicitStrategy. "
                    f"Got {type(strategy).__name__} instead.")


def _marginal(workload, caller: str) -> MarginalWorkload:
    W = as_marginal_workload(workload, caller=caller)
    if W is None:
        raise ValueError(f"{caller}: workload '{getattr(workload, 'name', workload)}' is not a union of marginals "
                         "(a factor Gram is not αI, βJ or αI + βJ with α, β > 0).")
    return W


def evaluate(workload, strategy, privacy: Privacy | None = None, *, norm: str | None = None) -> ResidualReport:
    """Exact total, per-marginal and maximum variance of ``strategy`` on a marginal ``workload`` (docstring).

    Parameters
    ----------
    workload : MarginalWorkload, ImplicitWorkload or Workload
        A weighted union of marginals (:func:`~mmopt.structured.residual.workload.as_marginal_workload`).
    strategy : ResidualStrategy or ImplicitStrategy
        Any strategy whose factor Grams are αI + βJ: residual strategies, HDMM's marginals M(θ), identity.
    privacy : Privacy or None
        None: unit privacy (c = 1).
    norm : {"l1", "l2"} or None
        Sensitivity norm at unit privacy (default "l1", as :func:`mmopt.evaluate`).

    Examples
    --------
    >>> from mmopt.structured.residual import marginal_workload, plan
    >>> W = marginal_workload((8,) * 100, [(i, j) for i in range(100) for j in range(i + 1, 100)])
    >>> r = evaluate(W, plan(W).strategy, norm="l2")
    >>> r.closure_size, abs(r.total_squared_error / r.svd_bound - 1) < 1e-12
    (5051, True)
    """
    caller = "residual.evaluate"
    check_privacy(privacy, caller)
    norm = resolve_norm(privacy, norm, caller)
    W = _marginal(workload, caller)
    # WeightedMarginals by name: its module builds on this layer (spectrum_of imports it lazily)
    weighted = type(strategy).__name__ == "WeightedMarginals"
    if not (weighted or isinstance(strategy, rs.ResidualStrategy | ImplicitStrategy)):
        raise TypeError(f"The 'strategy' parameter of {caller} must be a ResidualStrategy, WeightedMarginals or an "
                    "ImplicitStrategy. "
                        f"Got {type(strategy).__name__} instead.")
    if strategy.shape != W.shape:
        raise ValueError(f"{caller}: the workload and the strategy have different domains: {W.shape} and "
                         f"{strategy.shape}. Build them over the same attribute sizes.")
    ell, delta = spectrum_of(strategy, W, caller=caller)
    unit, per = unit_errors(W, ell, caller=caller)
    c = 1.0 if privacy is None else privacy.variance_factor
    value, exact = delta(norm)
    scale = c * value**2
    total = scale * unit
    m = W.n_queries
    return ResidualReport(W.name, strategy.name, privacy, norm, m, value, exact, total, total / m,
                          math.sqrt(total / m), None if per is None else scale * float(per.max()),
                          c * unit_bound(W), len(W.closure), None if per is None else scale * per)


def unit_bound(W: MarginalWorkload) -> float:
    """(Σ_S r_S √ν_S)²: the SVD bound (Σσ)²/N at unit privacy; a ValueError past float64 (x ** 2 raised a bare
    OverflowError: weights near 1e154, whose squares the workload allows, times the marginals' cells)."""
    s = float(W.closure.multiplicity @ np.sqrt(W.eigenvalues))
    if not math.isfinite(s * s):
        raise ValueError(f"The SVD bound of '{W.name}' exceeds float64 (its weights' squares times its cells): no "
                         "error figure of it is representable. Rescale the queries: every error figure scales with "
                         "the square of the workload's weights.")
    return s * s


def svd_bound(workload, privacy: Privacy | None = None) -> float:
    """c·(Σσᵢ(W))²/N = c·(Σ_S r_S √ν_S)² for a marginal workload, exactly, at any d (module docstring).

    Examples
    --------
    >>> from mmopt.structured.residual import marginal_workload
    >>> round(svd_bound(marginal_workload((4,) * 5, [(i, j) for i in range(5) for j in range(i + 1, 5)])), 2)
    948.06
    """
    caller = "residual.svd_bound"
    check_privacy(privacy, caller)
    c = 1.0 if privacy is None else privacy.variance_factor
    return c * unit_bound(_marginal(workload, caller))
