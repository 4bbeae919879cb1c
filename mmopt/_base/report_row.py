"""One CSV row of an error report, whichever evaluator made it (dense, Toeplitz): a leaf module, so that both
report types write the same keys without importing one another."""

from __future__ import annotations

from mmopt._base import validation as v

__all__ = ["error_row", "settle_norm"]

_NORMS = ("l1", "l2")  # mmopt.dense._strategy_core.NORMS; this leaf imports nothing of the layers


def error_row(report) -> dict:
    """A flat dict (no arrays) of a report with the dense :class:`~mmopt.error.ErrorReport`'s fields."""
    p = report.privacy
    m = report.n_queries
    return {
        "workload": report.workload, "strategy": report.strategy, "n": report.domain_size,
        # beyond float64 (all predicates past n ≈ 1023) m is written as a power of ten, never inf
        "m": m if m < 2**53 else v.scientific(m),
        "noise": p.noise if p else "unit", "epsilon": p.epsilon if p else "", "delta": p.delta if p else "",
        "sensitivity": report.sensitivity, "sensitivity_norm": report.sensitivity_norm,
        "total_squared_error": report.total_squared_error, "log10_total": report.log10_total,
        "mean_squared_error": report.mean_squared_error, "rmse": report.rmse,
        "max_variance": report.max_variance, "max_variance_upper": report.max_variance_upper,
        "max_variance_exact": report.max_variance_exact,
    }


def settle_norm(report) -> None:
    """Fill ``sensitivity_norm`` from the budget; a report at unit privacy must state it (a report that cannot say
    which Δ it scaled by is the inconsistency this field was added to expose)."""
    norm = report.sensitivity_norm
    if norm is None and report.privacy is not None:
        object.__setattr__(report, "sensitivity_norm", report.privacy.sensitivity_norm)
    elif norm not in _NORMS:
        raise ValueError(f"{type(report).__name__}: sensitivity_norm must be one of {_NORMS}. Got {norm!r}.")
    elif report.privacy is not None and norm != report.privacy.sensitivity_norm:
        raise ValueError(f"{type(report).__name__}: sensitivity_norm {norm!r} disagrees with {report.privacy.noise} "
                         f"noise's {report.privacy.sensitivity_norm!r}.")
