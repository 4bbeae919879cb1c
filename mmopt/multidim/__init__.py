"""Strategy search on product domains: HDMM's OPT_⊗ (``kron``), OPT_+ (``union``) and OPT_M (``marginals``).

Notation: see README. Each method module takes an implicit workload (:mod:`mmopt.structured`) and returns an
:class:`mmopt._base.solution.ImplicitSolution`; :func:`mmopt.optimize` re-evaluates the strategy exactly and
attaches the lower bound. Source: McKenna, Miklau, Hay, Machanavajjhala, "Optimizing error of
high-dimensional statistical queries under differential privacy", PVLDB 2018, §4–§5.
"""
