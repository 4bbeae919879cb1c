"""What platforms do today for grouping sets: each set noised on its own (OpenDP, Tumult, SmartNoise), exactly.

Notation: see README and :mod:`mmopt.hierarchy.workload`. With K grouping sets of m_s queries each, every set
measured once with an even share of a zCDP budget is the strategy A = [L_s/√K]_s, whose L2 sensitivity is 1 (a
record falls in one group of each set). At unit noise each query of set s then has variance K, so

    independent total = K · Σ_s m_s,      least squares on those measurements = K · rank(G)

(the second for equal weights: tr(G (AᵀA)⁺) = K · tr(G G⁺); rank(G) = Σ of the dimensions of the components the
workload touches, :mod:`.components`). Both scale with the privacy budget as every strategy does
(``Privacy.variance_factor``), so their ratios to mmopt's total hold at every (ε, δ).
"""

from __future__ import annotations

import numpy as np

from mmopt.hierarchy import components as hc
from mmopt.hierarchy.workload import HierarchyWorkload, check_workload


def independent_total(workload: HierarchyWorkload) -> float:
    """K · Σ_s w_s² m_s: every grouping set measured once with 1/K of the budget and answered from that alone."""
    W = check_workload(workload, "independent_total")
    K = len(W.sets)
    return float(K * np.sum(W.weights ** 2 * np.asarray(W.set_sizes, dtype=float)))


def rank(workload: HierarchyWorkload) -> int:
    """rank(G): the dimension of the span of every query."""
    W = check_workload(workload, "rank")
    t = W.component_traces()
    dims = hc.outer([hc.tables(h).dim for h in W.attributes])
    return int(round(float(dims[t > 0].sum())))


def least_squares_total(workload: HierarchyWorkload) -> float:
    """K · rank(G): the independent measurements, then least squares across the sets (equal weights only)."""
    W = check_workload(workload, "least_squares_total")
    if not np.allclose(W.weights, W.weights[0], rtol=1e-12):
        raise ValueError("least_squares_total: the grouping sets have different weights; the closed form K·rank(G) "
                         "holds for equal weights. Evaluate W.to_implicit() with the stacked strategy instead.")
    return float(len(W.sets) * W.weights[0] ** 2 * rank(W))
