"""The budget of ``optimize(method="auto")``: how much CPU time its candidates may be expected to take.

Notation: see README. A budget is a number of CPU seconds (one BLAS thread, the machine mmopt is measured on:
2 cores, ``benchmarks/results/bench_auto.txt``) or one of three names. ``auto`` estimates each candidate's cost
*before* running it (:mod:`mmopt.auto.costs`) and runs it only when the estimate fits what is left; it charges the
estimate, not the clock, so the same call gives the same strategy on a loaded machine and an idle one (a seed
reproduces), and the seconds actually spent are reported beside each estimate in ``extra["candidates"]``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

__all__ = ["LEVELS", "Budget", "check_budget"]

#: The named budgets, in CPU seconds. "default" keeps every row of ``benchmarks/bench_auto.py`` within its target
#: (the slowest, ε-DP prefix sums on 1,024 cells, about 15 s); "fast" is the closed forms, the structured
#: searches and short iterative runs; "thorough" lets the ε-DP search run on prefix sums to 4,096 cells and the
#: dense searches to their memory limits.
LEVELS = {"fast": 5.0, "default": 60.0, "thorough": 600.0}


@dataclass(frozen=True)
class Budget:
    """CPU seconds ``auto`` may plan to spend, and how the user named them ("default", "120 s", ...)."""

    seconds: float
    label: str

    def describe(self) -> str:
        return self.label if self.label.endswith(" s") else f"{self.label!r} ({self.seconds:g} s)"


def check_budget(budget, *, caller: str = "optimize") -> Budget:
    """``budget`` as a :class:`Budget`: None is "default"; a name of :data:`LEVELS`; or seconds > 0.

    Examples
    --------
    >>> check_budget("fast")
    Budget(seconds=5.0, label='fast')
    >>> check_budget(120).describe()
    '120 s'
    """
    if budget is None:
        budget = "default"
    if isinstance(budget, Budget):
        return budget
    if isinstance(budget, str):
        if budget not in LEVELS:
            raise ValueError(f"The 'budget' parameter of {caller} must be one of {sorted(LEVELS)} or a number of "
                             f"CPU seconds > 0. Got {budget!r} instead.")
        return Budget(LEVELS[budget], budget)
    if isinstance(budget, bool) or not isinstance(budget, numbers.Real):
        raise TypeError(f"The 'budget' parameter of {caller} must be one of {sorted(LEVELS)} or a number of CPU "
                        f"seconds > 0. Got {type(budget).__name__} instead.")
    seconds = float(budget)
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ValueError(f"The 'budget' parameter of {caller} must be a finite number of CPU seconds > 0. "
                         f"Got {budget!r} instead.")
    return Budget(seconds, f"{seconds:g} s")
