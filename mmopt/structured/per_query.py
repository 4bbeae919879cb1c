"""Every query's variance under a product strategy, as Kronecker products of per-factor terms.

Notation: see README. For A = θ⊗ᵢAᵢ and a workload term w·⊗ᵢWᵢ, the query ⊗ᵢ rᵢ has variance
c·Δ²·θ⁻²·w²·∏ᵢ rᵢ Mᵢ rᵢᵀ with Mᵢ = (AᵢᵀAᵢ)⁺ (Li et al., Prop. 4.4 on a Kronecker product), so the
vector of a term is c·Δ²·θ⁻²·w²·(q₁ ⊗ … ⊗ q_d), qᵢ the factor's per-query terms; terms are listed in
order, each in C order of its query grid (the order of :func:`~mmopt.structured.mechanism.answer`).
"""

from __future__ import annotations

import numpy as np

from mmopt import _queries
from mmopt.structured import _checks as ck
from mmopt.structured import factors as fc
from mmopt.structured.strategies import ImplicitStrategy
from mmopt.structured.workloads import ImplicitWorkload

MAX_QUERIES = 10**7  # listed up to this many (80 MB)


def per_query_variance(workload: ImplicitWorkload, strategy: ImplicitStrategy, scale: float) -> np.ndarray:
    """Every query's variance (module docstring); ``scale`` = c·Δ². Product strategies only."""
    caller = "evaluate"
    if not strategy.is_product:
        raise ValueError(f"{caller}: per-query variances are listed for product strategies only; "
                         f"'{strategy.name}' is a union. The report's max_variance bounds every query.")
    ck.check_allocation(workload.n_queries, what=f"{ck.fmt_int(workload.n_queries)} per-query variances",
                        caller=caller, limit=MAX_QUERIES)
    term = strategy.terms[0]
    cache = fc.Cache()
    parts = []
    for t in workload.terms:
        vec = np.array([scale * t.weight**2 / term.weight**2])
        for Wf, Af in zip(t.factors, term.factors, strict=True):
            if not _queries.has_per_query(Wf):
                raise ValueError(f"{caller}: workload factor '{Wf.name}' is Gram-only, so its queries are unknown. "
                                 "Build it with Workload.from_matrix(W).")
            q = _queries.per_query_terms(Wf, cache.get(fc.strategy_inverse, Af).profile)
            vec = np.kron(vec, np.clip(q, 0.0, None))
        parts.append(vec)
    return np.concatenate(parts)
