"""Monte Carlo of least-squares marginals under Gaussian noise, for residual and weighted-marginals strategies.

Notation: see README and :mod:`mmopt.structured.residual`. Under i.i.d. Gaussian noise of standard deviation σ
the least-squares estimate of any full-rank strategy A has error x̂ − x = X⁺Aᵀz ~ N(0, σ²X⁺), X = AᵀA: its
distribution depends on A only through its Gram. HDMM's weighted marginals M(θ) (identity is θ on the full set)
has X = Σ_T λ_T Q_T with λ_T = Σ_{S⊇T} θ_S² ∏_{i∉S} nᵢ (:mod:`mmopt.multidim.marginals`), and the residual
strategy with weights c_T has X = N Σ_T (c_T²/N_T) Q_T (:mod:`mmopt.structured.residual.strategy`). So with
c_T² = λ_T N_T / N the two have the same Gram, and the residual machinery — measure, reconstruct, its
per-marginal variance — simulates M(θ)'s least-squares marginals *exactly in distribution*, at M(θ)'s own
noise σ = OpenDP's scale for M(θ)'s Δ₂ = ‖θ‖₂. (Only the subsets T of the workload's downward closure enter a
workload marginal's error, so only those are built.) This is a simulation of the estimator's error, not a
release: nothing here is private.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from mmopt._base import opendp as _opendp
from mmopt.privacy import Privacy
from mmopt.records.plans import unit_variances
from mmopt.structured.release import upper_sensitivity
from mmopt.structured.residual import closure as cl
from mmopt.structured.residual import strategy as rs
from mmopt.structured.residual.reconstruct import Measurements, measure, reconstruct_all
from mmopt.structured.residual.workload import marginal_workload


def opendp_scale(sensitivity: float, privacy: Privacy) -> tuple[float, float]:
    """(Δ rounded upwards, the noise scale OpenDP calibrates for it): as release_marginals does."""
    d_in = upper_sensitivity(sensitivity, caller="experiments.records")
    _, scale, _ = _opendp.measure(np.zeros(1), d_in, privacy, noise_scale=None, caller="experiments.records")
    return d_in, float(scale)


def gram_equivalent(shape, theta: np.ndarray, sets, name: str) -> rs.ResidualStrategy:
    """The residual strategy with M(θ)'s Gram on the downward closure of ``sets`` (module docstring).

    ``theta`` is indexed by the bitmask of S (bit i set iff attribute i ∈ S), as
    :func:`mmopt.structured.marginals_strategy`. Raises ValueError when M(θ) does not support a member
    (λ_T = 0: that marginal is not estimable from M(θ)).
    """
    d, N = len(shape), math.prod(shape)
    members = cl.downward_closure(shape, sets).members
    weights = {}
    for T in members:
        t = sum(1 << i for i in T)
        lam = sum(theta[m] ** 2 * math.prod(shape[i] for i in range(d) if not m >> i & 1)
                  for m in range(2**d) if m & t == t and theta[m] > 0)
        if lam <= 0:
            raise ValueError(f"gram_equivalent: the strategy {name} does not support the residual of {T}.")
        weights[T] = math.sqrt(lam * cl.cells(shape, T) / N)
    return rs.residual_strategy(shape, weights, name=name)


def predicted_total(strategy: rs.ResidualStrategy, sets, sigma: float) -> float:
    """Σ_A N_A·var_A: the expected total squared error of the least-squares marginals on ``sets``."""
    unit = unit_variances(strategy, marginal_workload(strategy.shape, sets))
    return float(sigma**2 * sum(cl.cells(strategy.shape, A) * unit[A] for A in sets))


def simulate(strategy: rs.ResidualStrategy, truth: dict, sets, sigma: float, draws: int, rng) -> np.ndarray:
    """Total squared error Σ_A ‖M_A x̂ − m_A‖² of each of ``draws`` Gaussian draws (noise σ), as an array."""
    exact = measure(strategy, truth).values
    values = {S: y + rng.normal(0.0, sigma, (draws,) + y.shape) for S, y in exact.items()}
    est = reconstruct_all(Measurements(strategy, values, "gaussian", sigma, (draws,)), sets)
    return sum(((est[A] - truth[A]) ** 2).reshape(draws, -1).sum(axis=1) for A in sets)


def all_k_way(d: int, k: int) -> list:
    return list(itertools.combinations(range(d), k))
