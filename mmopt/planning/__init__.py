"""Plan a release by the accuracy it must reach: the smallest budget at which every query meets its target.

Notation: see README. ``plan(W, targets, delta=...)`` minimises the largest variance-over-target of any query
(:func:`mmopt.optimize` with ``targets``: a certified minimax search under Gaussian noise,
:mod:`mmopt.search.max_variance`; under Laplace noise a heuristic, the best in L1 of that strategy and closed forms —
identity, H_b with and without the root, wavelet, GreedyH up to 512 cells, the workload's rows (also weighted by
target^−p for per-query targets; weighted marginals for one target per marginal), and ``min_error`` on
the rows weighted by 1/√target up to 512 cells — so ``lower_bound`` is
an L2 bound there) at unit
privacy, V = max_i vᵢ/τᵢ, then solves c(ε, δ)·V ≤ 1 for the smallest ε (c = ``Privacy.variance_factor``: 2/ε²
under Laplace noise, σ² of the analytic Gaussian mechanism under Gaussian noise). The certified lower bound V₋ ≤
every strategy's V gives the smallest budget any strategy could use, in the same unit; under Gaussian noise the
zCDP ρ = V/2 is reported too (σ² = 1/V at Δ₂ = 1, ρ = Δ₂²/(2σ²)). Modules: :mod:`.budget` (plan),
:mod:`.calibration` (c(ε, δ) as the release draws it or as the analytic mechanism does, and its inverse).
"""

from mmopt.planning.budget import Plan, plan

__all__ = ["Plan", "plan"]
