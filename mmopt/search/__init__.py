"""The strategy searches of the matrix mechanism, one module per method (``optimize(method=...)`` runs them).

Notation: see README. Under Laplace noise (Program 5.1, min error): :mod:`.min_error` (the pipeline),
:mod:`.sdp_min_error` (convex iteration), :mod:`.local_search`, and at large n on prefix sums and all ranges
:mod:`.min_error_fast` with the p-Identity search :mod:`.pidentity`, its coarse-to-fine :mod:`.pidentity_ladder`
and working set :mod:`.pidentity_sparse`. Under Gaussian noise (Program 5.2): :mod:`.l2_fast` (Newton on the dual,
certified gap) and :mod:`.sdp_l2` (the CVXPY SDP). Program 5.3: :mod:`.min_sensitivity`. Baselines: :mod:`.lrm`
(low-rank mechanism), :mod:`.eigen_design`.

Until 0.1 these modules sat at the package root; ``import mmopt.min_error`` (and the other old paths) still works,
with a DeprecationWarning (:mod:`mmopt._moved`).
"""
