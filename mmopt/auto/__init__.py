"""``optimize(method="auto")``: every method that applies, within a CPU budget, the lowest error kept.

:mod:`mmopt.auto.budget` (what the budget is), :mod:`mmopt.auto.costs` (what each candidate is expected to cost),
:mod:`mmopt.auto.plan` (which candidates, in which order), :mod:`mmopt.auto.run` (the search). Nothing is imported
here, so that the method modules can use :func:`mmopt.auto.run.score` without a cycle.
"""
