"""Private training with correlated noise: participation schemas, sensitivity under them, and the certified
optimum of the matrix mechanism for prefix sums of gradients when a record takes part in several steps (issue 34).

Notation: see README and :mod:`.schemas`. Modules: :mod:`.schemas` (single, fixed epochs, minimum separation),
:mod:`.sensitivity` (exact Δ² or a proven, named upper bound, from the Gram), :mod:`.strategies` (the same for
any strategy), :mod:`.toeplitz` (Toeplitz, banded and BLT strategies in O(n·k)), :mod:`.optimum` (the
certified optimum under fixed epochs, n ≤ 4,096, any Gram), :mod:`.tridiagonal` (the same for prefix sums and all
ranges in O(n·k²) per step, with :mod:`.quadrature`), :mod:`.cutting` (the certified optimum under minimum
separation b = n/k, n ≤ 2,048, by cutting planes over patterns, with :mod:`.patterns` for the worst pattern),
:mod:`.weighted` (row-weighted banded strategies under
fixed epochs, any n), :mod:`.free_banded` (banded strategies with every entry of the band free, under minimum
separation, n ≤ 4,096), :mod:`.chain_banded` (2b bands, Δ² by a chain over patterns), :mod:`.chain_dual` (a
certified bound weighting every pattern by a Markov chain, with :mod:`.working_set`, and the 2b-band strategy's start
from its Lagrangian), :mod:`.chain_levels` (that strategy coarse to fine), :mod:`.bound` (a certified
bound at any n), :mod:`.workloads` (momentum and learning-rate
schedules), :mod:`.banded` (banded strategies for Toeplitz workloads), :mod:`.objectives` (largest variance, last
iterate), :mod:`.noise` (the correlated noise streamed step by step through OpenDP, and the run's privacy).
"""

from mmopt.participation.schemas import (
    FixedEpochs,
    MinSeparation,
    Schema,
    Single,
    fixed_epochs,
    min_separation,
    single,
)
from mmopt.participation.sensitivity import Sensitivity, gram_sensitivity_squared
from mmopt.participation.strategies import sensitivity_squared
from mmopt.participation.workloads import (
    cosine_decay,
    learning_rate_workload,
    linear_decay,
    momentum,
    toeplitz_workload,
)

__all__ = ["FixedEpochs", "MinSeparation", "Schema", "Sensitivity", "Single", "cosine_decay", "fixed_epochs",
           "gram_sensitivity_squared", "learning_rate_workload", "linear_decay", "min_separation", "momentum",
           "sensitivity_squared", "single", "toeplitz_workload"]
