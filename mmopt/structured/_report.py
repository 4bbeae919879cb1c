"""The report of :func:`mmopt.structured.evaluate`: a leaf module, so that every evaluator (the structured
analysis, the residual algebra's closed forms) builds it without importing one another."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mmopt._base.report_row import settle_norm
from mmopt.privacy import Privacy

__all__ = ["ImplicitErrorReport"]


@dataclass(frozen=True)
class ImplicitErrorReport:
    """Expected squared errors; totals are exact when ``total_exact``, else proven upper bounds.

    ``max_variance`` is attained by a real query; ``max_variance_upper`` is a proven upper bound
    (equal when ``max_variance_exact``). ``sensitivity_exact`` False means Δ is an upper bound.
    The true total lies in [``total_lower``, ``total_squared_error``]: both ends are certified, the lower
    one is the total itself when ``total_exact``; ``total_width`` is the bracket's relative width
    (upper − lower)/upper, 0 when exact. ``sensitivity_norm`` says which column norm ``sensitivity`` is ("l1"
    for Laplace noise, "l2" for Gaussian; at unit privacy the one asked for): the figures scale with its square.
    """

    workload: str
    strategy: str
    privacy: Privacy | None
    shape: tuple
    domain_size: int
    n_queries: int
    sensitivity: float
    sensitivity_exact: bool
    total_squared_error: float
    total_exact: bool
    mean_squared_error: float
    rmse: float
    max_variance: float | None
    max_variance_upper: float | None
    max_variance_exact: bool
    method: str
    per_query_variance: np.ndarray | None = field(default=None, repr=False, compare=False)
    total_lower: float | None = None
    total_width: float | None = None
    sensitivity_norm: str | None = None

    def __post_init__(self) -> None:
        settle_norm(self)
        # an exact report is its own bracket; a bounded one must state its lower end
        if self.total_lower is None and self.total_exact:
            object.__setattr__(self, "total_lower", self.total_squared_error)
        if self.total_width is None and self.total_lower is not None:
            up, low = self.total_squared_error, self.total_lower
            object.__setattr__(self, "total_width", 0.0 if up <= low else (up - low) / up)
