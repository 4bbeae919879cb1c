"""What dense error analysis and the mechanisms share: the ErrorReport record and the input checks.

Notation: see README. Kept apart from :mod:`mmopt.error` so that the mechanisms, the structured layer and
the single-strategy helpers (:mod:`mmopt.dense._strategy_analysis`) use the same checks and messages without
importing the evaluation machinery; every name here is re-exported by :mod:`mmopt.error`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mmopt._base import validation as v
from mmopt._base.hints import holder_name
from mmopt._base.report_row import error_row, settle_norm
from mmopt.dense._strategy_core import NORMS, Strategy, column_norm_parts, norm_from_parts
from mmopt.dense._workload_core import Workload
from mmopt.privacy import Privacy

_PRIVACY_EXAMPLE = "Privacy(epsilon=1.0)"


@dataclass(frozen=True, eq=False)
class ErrorReport:
    """Expected squared errors of answering ``workload`` with ``strategy`` under ``privacy``.

    ``privacy=None`` means unit privacy: variance factor 1 (the paper's Δ²·tr(G M) units).
    ``max_variance`` is the largest error of a single query; ``max_variance_upper`` a proven upper
    bound on it, equal to ``max_variance`` when ``max_variance_exact`` (it is not exact only for
    all-predicate workloads beyond n = 22, where the maximum is an NP-hard binary quadratic program). A workload
    built from its Gram alone has no known queries: ``max_variance`` None, ``max_variance_upper`` the total.
    ``total_squared_error`` is ``inf`` (with a warning) when it exceeds float64; ``log10_total`` is
    always finite. ``sensitivity_norm`` says which column norm ``sensitivity`` is ("l1" for Laplace noise, "l2"
    for Gaussian; at unit privacy the one asked for): the figures scale with its square.
    """

    workload: str
    strategy: str
    privacy: Privacy | None
    domain_size: int
    n_queries: int
    sensitivity: float
    total_squared_error: float
    log10_total: float
    mean_squared_error: float
    rmse: float
    max_variance: float | None
    max_variance_upper: float | None
    max_variance_exact: bool
    per_query_variance: np.ndarray | None = field(default=None, repr=False)
    sensitivity_norm: str | None = None

    def __post_init__(self) -> None:
        settle_norm(self)

    def to_row(self) -> dict:
        """A flat dict for one CSV row (no arrays)."""
        return error_row(self)


def check_type(value, expected: type, *, name: str, caller: str, optional: bool = False, example: str = "") -> None:
    """Refuse ``value`` unless it is an ``expected`` instance (or None when ``optional``), naming both types.

    The one template for "wrong object passed" across the dense and structured layers, e.g.
    "The 'privacy' parameter of evaluate must be a Privacy or None, e.g. Privacy(epsilon=1.0). Got float."
    """
    if isinstance(value, expected) or (optional and value is None):
        return
    kind = expected.__name__
    article = "an" if kind[0] in "AEIOU" else "a"
    allowed = f"{article} {kind}" + (" or None" if optional else "")
    hint = f", e.g. {example}" if example else ""
    # a Plan passed as the privacy holds one (its .privacy): say so, as for a result passed as a strategy
    held = f" It holds one: pass {holder_name(value)}.{name}." \
        if isinstance(getattr(value, name, None), expected) else ""
    raise TypeError(f"The '{name}' parameter of {caller} must be {allowed}{hint}. Got {type(value).__name__}.{held}")


def check_workload(workload, caller: str) -> None:
    """A dense :class:`~mmopt.workload.Workload`."""
    check_type(workload, Workload, name="workload", caller=caller)


def check_privacy(privacy, caller: str, *, optional: bool = True) -> None:
    """A :class:`~mmopt.privacy.Privacy`; None (unit privacy) is allowed when ``optional``."""
    check_type(privacy, Privacy, name="privacy", caller=caller, optional=optional, example=_PRIVACY_EXAMPLE)


def as_strategy(strategy, caller: str) -> Strategy:
    """A Strategy, or a matrix made into one; a Workload is refused with the remedy."""
    if isinstance(strategy, Strategy):
        return strategy
    if isinstance(strategy, Workload):
        raise TypeError(f"The 'strategy' parameter of {caller} must be a Strategy or a matrix. Got a Workload; "
                        "use mmopt.strategy.from_workload(W) to use the workload as strategy.")
    if callable(getattr(strategy, "to_strategy", None)) and isinstance(getattr(strategy, "domain_size", None), int):
        # an implicit or Toeplitz strategy: its matrix up to the dense limit (it was "must be a 2-D array … Got an
        # entry ImplicitStrategy", where evaluate takes it; a helper's audit)
        from mmopt.structured._checks import DENSE_LIMIT  # lazy: the structured layer imports this one
        if strategy.domain_size > DENSE_LIMIT:
            raise ValueError(f"The 'strategy' parameter of {caller} is a {type(strategy).__name__} over "
                             f"{strategy.domain_size:,} cells; {caller} works on the dense matrix, up to "
                             f"{DENSE_LIMIT:,} cells. mmopt.evaluate takes it at any size.")
        return strategy.to_strategy()
    return Strategy(v.check_matrix(strategy, name="strategy", caller=caller), "strategy")


def resolve_norm(privacy: Privacy | None, norm: str | None, caller: str) -> str:
    """The sensitivity norm: ``privacy``'s own, or ``norm`` (default "l1") at unit privacy."""
    if norm is not None:
        v.check_choice(norm, name="norm", caller=caller, choices=NORMS)
    if privacy is None:
        return norm or "l1"
    if norm is not None and norm != privacy.sensitivity_norm:
        raise ValueError(f"The 'norm' parameter of {caller} is {norm!r} but {privacy.noise} noise uses "
                         f"{privacy.sensitivity_norm!r}. Drop 'norm' when passing privacy.")
    return privacy.sensitivity_norm


def scaled_sensitivity(As: np.ndarray, norm: str) -> float:
    """Largest column norm of a matrix already scaled to max|entry| in [0.5, 1), e.g. by
    :func:`mmopt.dense.profile.scaled_profile`: in [1/2, p] (L1) or [1/2, √p] (L2), so it never under- or overflows.

    The same computation as every other sensitivity (:func:`mmopt.dense._strategy_core.column_norm_parts`); for
    an As of any other scale it is still exact, or raises ValueError when Δ is not a normal float64.
    """
    c, k = column_norm_parts(As, norm)
    return norm_from_parts(float(np.max(c)), k, norm, what="the scaled strategy", caller="scaled_sensitivity")


def check_per_query_flag(per_query, caller: str, *, optional: bool = False) -> None:
    """``per_query`` must be a bool (or None when ``optional``): a string such as 'x' is truthy, never a choice."""
    if isinstance(per_query, bool | np.bool_) or (optional and per_query is None):
        return
    allowed = "True, False or None" if optional else "True or False"
    raise TypeError(f"The 'per_query' parameter of {caller} must be {allowed}. "
                    f"Got {per_query!r:.60} ({type(per_query).__name__}) instead.")
