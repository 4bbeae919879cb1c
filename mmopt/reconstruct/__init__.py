"""Reconstruction of the data vector from noisy measurements: least squares, NNLS, or the projection mechanism.

Notation: see README. After y = A x + z is drawn, the matrix mechanism estimates x by post-processing y:

* ``"least_squares"`` (default): x̂ = A⁺y (Def. 3.2): W x̂ is unbiased for every query W in A's row space;
  x̂ itself only when A has full column rank (else E[x̂] = A⁺Ax, x projected on A's row space).
* ``"nnls"``: argmin ‖A h − y‖₂ over h ≥ 0 — the projection of x̂ onto the non-negative data vectors in the
  metric of A. It never increases ‖A(h − x)‖ (x lies in that convex set), but it can increase the workload's
  error ‖W(h − x)‖, because A's metric is not W's.
* ``"projection"``: the projection mechanism (project the noisy answers onto the answers some non-negative
  data vector could produce; Nikolov, Talwar & Zhang, STOC 2013) in the workload's own metric:
  argmin (h − x̂)ᵀG(h − x̂) over h ≥ 0 with G = WᵀW. As the G-metric projection onto a closed convex set that
  contains the true x, it never increases ‖W(h − x)‖² below ‖W(x̂ − x)‖² — for any data and any noise draw,
  at the exact projection. The dense solvers are exact; the implicit ones (ADMM/FISTA) stop at a KKT residual
  relative to a scale that starts at min(‖x̂ − P_C(x̂)‖, ‖P_C(x̂)‖) and then shrinks to the metric correction
  ‖h − x̂‖_Q/√L reached, while a probe shows the last stage stopped short: when A is rank-deficient the first
  scale is count-sized (x̂ = A⁺y is the minimum-norm solution, off the data by a null-space part the size of
  the counts), and 2-way marginals of (3, 4, 5) under a rank-36 marginals strategy at 10⁷ counts with known
  zeros stopped NNLS at 3.1× the workload error of the exact optimum; the stages reach it (to 10⁻⁴).

Optional public facts, imposed on both constrained choices: ``total`` (Σh = total, a known population count)
and ``zeros`` (a boolean mask of cells known to be 0). **Privacy**: every reconstruction uses only the noisy
measurements y, the public A and W, and these public facts, so it is post-processing and keeps the (ε, δ)
guarantee of the measurement — provided ``total`` and ``zeros`` really are public (not computed from the
private data).

Not offered: the Euclidean projection of x̂ onto the scaled simplex (the data's own metric instead of the
workload's): it spreads the deficit of a negative cell evenly over all cells, which every prefix sum then
accumulates (measured many times least squares' prefix RMSE on real data in issue 9; that code is not kept, so
no figure is quoted here).

Dense pairs: :mod:`mmopt.reconstruct.dense` (exact active-set / interior-point solvers, isotonic regression
for prefix). Implicit pairs: :mod:`mmopt.reconstruct.implicit` (ADMM with the exact factor-wise (Q + ρI)⁻¹ on one
Kronecker product, FISTA with the factors' operators otherwise).
"""

from mmopt.reconstruct._common import (
    CHOICES,
    Reconstruction,
    check_constraints,
    check_method,
    check_options,
    check_reconstruction,
    check_tol,
    combine,
)

__all__ = ["CHOICES", "Reconstruction", "check_constraints", "check_method", "check_options", "check_reconstruction",
           "check_tol", "combine"]
