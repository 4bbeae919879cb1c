"""``optimize(method="auto")``: every method that applies, within a CPU budget, the lowest error kept.

:mod:`mmopt.auto.budget` (what the budget is), :mod:`mmopt.auto.costs` (what each candidate is expected to cost),
:mod:`mmopt.auto.plan` (which candidates, in which order), :mod:`mmopt.auto.run` (the search). The scoring the
single methods share with the search lives below both, in :mod:`mmopt.multidim.scoring`
(``tests/test_import_graph.py`` keeps the package free of import cycles, lazy imports included).
"""
