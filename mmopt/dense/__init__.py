"""The dense family: workloads and strategies held as n×n matrices (their Gram G = WᵀW, X = AᵀA), exact error.

The public faces are :mod:`mmopt.workload`, :mod:`mmopt.strategy` and :mod:`mmopt.error`; here are their cores —
the Workload type and Gram forms, the Strategy type and classic strategies, profiles M = (AᵀA)⁺ and the rank rule
(:mod:`.profile`), per-query terms, interval trees, least squares (:mod:`.least_squares`), and the Gram operator
of prefix sums / all ranges at large n (:mod:`.gram_operator`).
"""
