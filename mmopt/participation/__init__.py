"""Private training with correlated noise: participation schemas, sensitivity under them, and the certified
optimum of the matrix mechanism for prefix sums of gradients when a record takes part in several steps (issue 34).

Notation: see README and :mod:`.schemas`. Modules: :mod:`.schemas` (single, fixed epochs, minimum separation),
:mod:`.sensitivity` (exact Δ² or a proven, named upper bound, from the Gram), :mod:`.strategies` (the same for
any strategy), :mod:`.toeplitz` (Toeplitz, banded and BLT strategies in O(n·k)), :mod:`.optimum` (the
certified optimum under fixed epochs, n ≤ 4,096, any Gram), :mod:`.tridiagonal` (the same for prefix sums and all
ranges in O(n·k²) per step, with :mod:`.quadrature`), :mod:`.weighted` (row-weighted banded strategies under
fixed epochs, any n), :mod:`.bound` (a certified bound at any n).
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

__all__ = ["FixedEpochs", "MinSeparation", "Schema", "Sensitivity", "Single", "fixed_epochs",
           "gram_sensitivity_squared", "min_separation", "sensitivity_squared", "single"]
