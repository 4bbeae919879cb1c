"""The sensitivity of a strategy under a participation schema, whatever holds it: an array, a dense
:class:`~mmopt.Strategy`, or a :class:`~mmopt.toeplitz.ToeplitzStrategy` (O(n·k), never n×n).

Notation and methods: see :mod:`mmopt.participation.sensitivity` (dense Gram) and
:mod:`mmopt.participation.toeplitz` (Toeplitz, banded, BLT).
"""

from __future__ import annotations

from mmopt._base import validation as v
from mmopt.participation.schemas import Single, as_schema
from mmopt.participation.sensitivity import Sensitivity, gram_sensitivity_squared

__all__ = ["sensitivity_squared"]


def sensitivity_squared(strategy, participation) -> Sensitivity:
    """Δ² under ``participation`` of ``strategy``: an array C, a :class:`~mmopt.Strategy`, or a
    :class:`~mmopt.toeplitz.ToeplitzStrategy` (held in O(n): :mod:`mmopt.participation.toeplitz`).

    Examples
    --------
    >>> import mmopt
    >>> import numpy as np
    >>> C = np.tril(np.ones((4, 4)))   # the prefix matrix as a strategy
    >>> sensitivity_squared(C, mmopt.participation.min_separation(2, 2)).squared   # steps 0 and 2
    10.0
    """
    from mmopt.participation.toeplitz import toeplitz_sensitivity_squared
    from mmopt.toeplitz.strategies import ToeplitzStrategy  # lazy: the stream layer only for its strategies

    caller = "sensitivity_squared"
    schema = as_schema(participation, caller)
    if isinstance(strategy, ToeplitzStrategy):
        return toeplitz_sensitivity_squared(strategy, schema)
    C = getattr(strategy, "matrix", strategy)
    C = v.check_matrix(C, name="strategy", caller=caller)
    if not isinstance(schema, Single):
        schema.check_n(C.shape[1], caller)
    v.check_allocation(C.shape[1] ** 2, what=f"the {C.shape[1]:,}×{C.shape[1]:,} Gram CᵀC", caller=caller)
    return gram_sensitivity_squared(C.T @ C, schema)
