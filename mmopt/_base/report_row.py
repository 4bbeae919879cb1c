"""One CSV row of an error report, whichever evaluator made it (dense, Toeplitz): a leaf module, so that both
report types write the same keys without importing one another."""

from __future__ import annotations

from mmopt._base import validation as v

__all__ = ["error_row"]


def error_row(report) -> dict:
    """A flat dict (no arrays) of a report with the dense :class:`~mmopt.error.ErrorReport`'s fields."""
    p = report.privacy
    m = report.n_queries
    return {
        "workload": report.workload, "strategy": report.strategy, "n": report.domain_size,
        # beyond float64 (all predicates past n ≈ 1023) m is written as a power of ten, never inf
        "m": m if m < 2**53 else v.scientific(m),
        "noise": p.noise if p else "unit", "epsilon": p.epsilon if p else "", "delta": p.delta if p else "",
        "sensitivity": report.sensitivity, "total_squared_error": report.total_squared_error,
        "log10_total": report.log10_total, "mean_squared_error": report.mean_squared_error, "rmse": report.rmse,
        "max_variance": report.max_variance, "max_variance_upper": report.max_variance_upper,
        "max_variance_exact": report.max_variance_exact,
    }
