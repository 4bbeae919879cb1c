"""Workload error as MST and AIM report it: the average L1 distance between normalised marginals.

McKenna et al. (2022, AIM, §6): Error(D, D̂) = (1/|W|) Σ_{r∈W} ‖M_r(D)/|D| − M_r(D̂)/|D̂|‖₁ over the workload's
marginals M_r, each normalised by its table's number of records (so the error is in [0, 2] per marginal and does
not depend on how many synthetic rows were drawn). An evaluation of a release against the private data — not part
of any mechanism, and not private itself.
"""

from __future__ import annotations

import numpy as np

from mmopt.records import counts as rc
from mmopt.records.domain import Domain
from mmopt.records.rows import bin_value

__all__ = ["workload_error"]


def workload_error(records, synthetic, domain: Domain, workload) -> float:
    """(1/|W|) Σ_r ‖M_r(records)/n − M_r(synthetic)/n̂‖₁ (module docstring).

    Parameters
    ----------
    records : the true records (anything :func:`mmopt.records.marginal_counts` reads)
    synthetic : a DataFrame of synthetic rows, or a :class:`mmopt.synth.Synthetic` (its model's marginals)
    domain : Domain
    workload : list of attribute tuples (names or indices)

    Examples
    --------
    >>> import pandas as pd
    >>> from mmopt.records import Attribute, Domain
    >>> D = Domain((Attribute("a", categories=("x", "y")), Attribute("b", categories=(0, 1))))
    >>> df = pd.DataFrame({"a": ["x", "y", "y", "x"], "b": [0, 1, 1, 1]})
    >>> workload_error(df, df.iloc[[0, 1]], D, [("a",), ("a", "b")])     # (0 + ½)/2
    0.25
    """
    # at least one; a repeated marginal counted twice in the mean
    sets = rc.check_sets(workload, domain, caller="workload_error", name="workload", distinct=True)
    true = rc.marginal_counts(records, domain, sets, caller="workload_error")
    if hasattr(synthetic, "model") and hasattr(synthetic, "marginal"):
        fake = {S: synthetic.marginal(S) for S in sets}
    else:
        # the counting layer's schema checks name the parameter (a missing column was a bare KeyError here)
        fake = rc.marginal_counts(_codes_frame(synthetic, domain), domain, sets, caller="workload_error",
                                  name="synthetic")
    errs = []
    for S in sets:
        a = np.asarray(true[S], dtype=np.float64)
        b = np.asarray(fake[S], dtype=np.float64)
        # M/n is undefined without rows: a zero table reported 1.0, an error that looked like any other
        for name, table in (("records", a), ("synthetic", b)):
            if not table.sum() > 0:
                raise ValueError(f"The '{name}' parameter of workload_error has no rows in the domain (all were "
                                 "empty or outside it), so its normalised marginals M/n are undefined.")
        errs.append(np.abs(a / a.sum() - b / b.sum()).sum())
    return float(np.mean(errs))


def _codes_frame(frame, domain: Domain):
    """Synthetic rows whose binned columns hold bin labels ("[a, b)"), mapped to a value inside each bin; anything
    but a pandas DataFrame, and a missing column, is left for marginal_counts to refuse by name."""
    import pandas as pd
    if not isinstance(frame, pd.DataFrame):
        return frame
    out = frame.copy()
    for a in domain.attributes:
        if a.name not in out.columns:
            continue
        col = out[a.name]
        if a.edges is not None and not np.issubdtype(np.asarray(col).dtype, np.number):
            inside = {lb: bin_value(a.edges[j], a.edges[j + 1]) for j, lb in enumerate(a.labels)}
            values = np.asarray(col, dtype=object)
            missing = pd.isna(values)  # dropped, as a missing value of the records is
            if unknown := sorted({str(v) for v, m in zip(values, missing, strict=True) if not m and v not in inside}):
                raise ValueError(f"The 'synthetic' parameter of workload_error must hold the bin labels of "
                                 f"'{a.name}' ({', '.join(a.labels)}) or numbers. Got {unknown[:3]} instead.")
            out[a.name] = np.array([np.nan if m else inside[v] for v, m in zip(values, missing, strict=True)],
                                   dtype=np.float64)
        elif hasattr(col, "cat"):
            out[a.name] = np.asarray(col.astype(object))
    return out
