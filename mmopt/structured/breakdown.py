"""Per-term (per-table) error breakdown of a strategy on a union-of-products workload.

Notation: see README. The total error is additive over terms, c·Δ²·tr(G X⁺) = Σ_j c·Δ²·w_j²·tr(G_j X⁺), so
each term's share is the error of the same strategy on that term alone: exact wherever the whole
evaluation is exact (product and marginals-algebra paths, or ≤ 4,096 cells), an upper bound where it is.
A user tuning a workload (weights on tables, the HDMM tutorial's "Tuning workload error") reads here what
each table gets.
"""

from __future__ import annotations

import math

from mmopt.structured import analysis
from mmopt.structured.workloads import ImplicitWorkload


def term_errors(workload: ImplicitWorkload, strategy, privacy=None, *, norm: str | None = None,
                groups=None) -> list[dict]:
    """Rows {group, terms, n_queries, total_squared_error, rmse, share, exact}, one per group of terms.

    ``groups``: one label per term (e.g. :func:`mmopt.structured.census.sf1_term_tables`); default one
    group per term ("term 0", "term 1", ...). Totals include the terms' weights, as the optimiser sees them.

    Examples
    --------
    >>> from mmopt import workload as wl, strategy as st
    >>> W = wl.stack([wl.kron(wl.prefix(80), wl.total(60)), wl.kron(wl.total(80), wl.prefix(60))])
    >>> A = st.kron(st.identity(80), st.identity(60))
    >>> [(r["group"], r["n_queries"], r["total_squared_error"]) for r in term_errors(W, A)]
    [('term 0', 80, 194400.0), ('term 1', 60, 146400.0)]
    """
    caller = "term_errors"
    if not isinstance(workload, ImplicitWorkload):
        raise TypeError(f"The 'workload' parameter of {caller} must be an ImplicitWorkload. "
                        f"Got {type(workload).__name__}.")
    labels = [f"term {j}" for j in range(len(workload.terms))] if groups is None else list(groups)
    if len(labels) != len(workload.terms):
        raise ValueError(f"The 'groups' parameter of {caller} must give one label per term ({len(workload.terms)}). "
                         f"Got {len(labels)}.")
    rows: dict[str, dict] = {}
    for j, (label, term) in enumerate(zip(labels, workload.terms, strict=True)):
        r = analysis.evaluate(ImplicitWorkload((term,), f"{workload.name}[{j}]"), strategy, privacy, norm=norm)
        row = rows.setdefault(label, {"group": label, "terms": 0, "n_queries": 0, "total_squared_error": 0.0,
                                      "exact": True})
        row["terms"] += 1
        row["n_queries"] += r.n_queries
        row["total_squared_error"] += r.total_squared_error
        row["exact"] &= r.total_exact
    total = sum(r["total_squared_error"] for r in rows.values())
    for r in rows.values():
        r["rmse"] = math.sqrt(r["total_squared_error"] / r["n_queries"])
        r["share"] = r["total_squared_error"] / total if total > 0 else 0.0
    return list(rows.values())
