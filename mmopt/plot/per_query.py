"""Each query's expected squared error: by (start, length) for 1-D ranges, by index, by range shape, by term.

Notation: see README. Query w's error is c·Δ²·w M wᵀ (Li et al., PODS 2010, Prop. 4.4). :func:`per_query_error`
draws ``mmopt.evaluate(W, A, privacy, per_query=True).per_query_variance`` (in the workload's row order);
:func:`error_by_shape` (mean error by range height × width) and :func:`error_by_term` (per marginal or table)
draw :func:`mmopt.answers.error_by_shape` / :func:`mmopt.answers.error_by_term`, which a product strategy
computes from its per-factor terms for any number of queries (2-D ranges on 128²: 68 million).
"""

from __future__ import annotations

import numpy as np

from mmopt._base import validation as v
from mmopt.answers.layout import row_intervals
from mmopt.answers.summary import error_by_shape as shape_errors
from mmopt.answers.summary import error_by_term as term_errors
from mmopt.dispatch import evaluate
from mmopt.plot import _mpl

BY = ("start_length", "index")


def range_queries(workload) -> tuple[np.ndarray, np.ndarray] | None:
    """(start a, length ℓ) of every query, in the workload's row order, when each query is a range, else None.

    A range is a 0/1 query whose 1s are contiguous, [a, a + ℓ − 1] (0-based). Closed-form families are
    decoded from their definition (rows of all_range: a ascending, then b ≥ a); an explicit W row by row.
    """
    if not hasattr(workload, "domain_size") or not hasattr(workload, "family"):
        return None
    return row_intervals(workload)


#: Queries a per-query plot lists (one value each); more are refused by per_query_variances' own limits.
_MAX_PLOTTED = 10**7


def _errors(workload, strategy, privacy, norm) -> tuple[np.ndarray, str]:
    """(each query's expected squared error, the plot's title): evaluate's list, or for a union strategy in the
    marginal algebra (a records release's residual strategy), :func:`mmopt.answers.per_query_variances`."""
    try:
        report = evaluate(workload, strategy, privacy, norm=norm, per_query=True)
    except ValueError as exc:
        if "cells are listed for product strategies only" not in str(exc):
            raise
        from mmopt.answers.variance import per_query_variances
        from mmopt.dispatch import as_implicit
        W, A = as_implicit(workload), as_implicit(strategy)
        if W.n_queries > _MAX_PLOTTED:
            raise
        E = np.concatenate([v for _, _, v in per_query_variances(W, A, privacy, norm=norm)])
        return E, f"{A.name} on {W.name}"
    return np.asarray(report.per_query_variance, dtype=float), f"{report.strategy} on {report.workload}"


def per_query_error(workload, strategy, privacy=None, *, by: str = "start_length", ax=None, log: bool = True,
                    colorbar: bool = True, norm: str | None = None):
    """Expected squared error of every query of W under strategy A: by (start, length), or by query index.

    Parameters
    ----------
    workload : Workload
        For ``by="start_length"``, a workload of ranges: :func:`mmopt.workload.all_range`, ``prefix``,
        ``identity``, ``total``, ``random_range`` or any W whose rows are contiguous 0/1 intervals.
    strategy : Strategy, array_like or ImplicitStrategy
    privacy : Privacy or None, default=None
        None: unit privacy (variance factor 1), as in :func:`mmopt.evaluate`.
    by : {"start_length", "index"}, default="start_length"
        "start_length": a heat map with the range start a (cell) across and the length ℓ up; pairs that are
        not a query of W stay blank (NaN). "index": one line over the queries in W's row order (any
        workload whose per-query errors :func:`mmopt.evaluate` can list).
    ax : matplotlib Axes or None
    log : bool, default=True
        Logarithmic colour scale (heat map) or y axis (line).
    colorbar : bool, default=True
        Heat map only.
    norm : {"l1", "l2"} or None
        Sensitivity norm at unit privacy, as in :func:`mmopt.evaluate`.

    Returns
    -------
    matplotlib Axes
        Heat map: ``ax.images[0].get_array()[ℓ − 1, a]`` is the error of the range [a, a + ℓ − 1].
        Line: ``ax.lines[0].get_ydata()`` are the per-query errors.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import mmopt
    >>> from mmopt import plot
    >>> W, A = mmopt.workload.all_range(4), mmopt.strategy.identity(4)
    >>> E = plot.per_query_error(W, A, mmopt.Privacy(1.0)).images[0].get_array()
    >>> E[:, 0].tolist()   # ranges from cell 0: error 2ℓ/ε² under the identity
    [2.0, 4.0, 6.0, 8.0]
    >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    caller = "per_query_error"
    v.check_choice(by, name="by", caller=caller, choices=BY)
    log = _mpl.check_flag(log, name="log", caller=caller)
    colorbar = _mpl.check_flag(colorbar, name="colorbar", caller=caller)
    ranges = None
    if by == "start_length":
        if not hasattr(workload, "domain_size") or (ranges := range_queries(workload)) is None:
            got = getattr(workload, "name", type(workload).__name__)
            raise ValueError(f"The 'workload' parameter of {caller} must be a workload of ranges (contiguous 0/1 "
                             f"queries) on one attribute for by='start_length'. Got {got!r}; use by='index' to draw "
                             "any workload's per-query errors, mmopt.plot.error_by_shape for ranges on several "
                             "attributes (mean error by height × width) or mmopt.plot.error_by_term for marginals.")
    E, title = _errors(workload, strategy, privacy, norm)
    what = f"expected squared error ({_mpl.privacy_text(privacy)})"
    ax = _mpl.new_or_given(ax, caller)
    if ranges is None:
        ax.plot(np.arange(E.size), E, lw=1)
        ax.set(xlabel="query index (row of W)", ylabel=what, title=title, yscale="log" if log else "linear")
        ax.grid(True, which="both", alpha=0.3)
        return ax
    n = workload.domain_size
    a, length = ranges
    H = np.full((n, n), np.nan)
    H[length - 1, a] = E
    from matplotlib.colors import LogNorm, Normalize

    lo, hi = float(np.nanmin(H)), float(np.nanmax(H))
    if log and lo > 0:
        scale = LogNorm(lo, hi if hi > lo else lo * 10)
    else:
        scale = Normalize(lo, hi if hi > lo else lo + 1)
    im = ax.imshow(H, origin="lower", aspect="auto", interpolation="nearest", norm=scale,
                   extent=(-0.5, n - 0.5, 0.5, n + 0.5))
    ax.set(xlabel="range start a (cell)", ylabel="range length ℓ", title=title)
    if colorbar:
        ax.figure.colorbar(im, ax=ax, label=what)
    return ax




def error_by_shape(workload, strategy, privacy=None, *, ax=None, log: bool = True, colorbar: bool = True,
                   norm: str | None = None):
    """Mean expected squared error of the 2-D ranges of each shape, height ℓ₁ × width ℓ₂, as a heat map.

    The means come from :func:`mmopt.answers.error_by_shape`: for a product strategy, exactly, from per-factor
    sums (the query q₁ ⊗ q₂ has error c·Δ²·θ⁻²·(q₁M₁q₁ᵀ)(q₂M₂q₂ᵀ)), however many queries there are.

    Parameters
    ----------
    workload : ImplicitWorkload or Workload
        Ranges on two attributes in every term (e.g. :func:`mmopt.workload.ranges_2d`, ``kron(all_range(n),
        prefix(n))``); one attribute gives a line by length.
    strategy : ImplicitStrategy, Strategy or array_like
        A product or marginals strategy for any size; any strategy on at most 4,096 cells.
    privacy : Privacy or None, default=None
        None: unit privacy (variance factor 1), as in :func:`mmopt.evaluate`.
    ax : matplotlib Axes or None
    log : bool, default=True
        Logarithmic colour scale (or y axis, on one attribute).
    colorbar : bool, default=True
    norm : {"l1", "l2"} or None
        Sensitivity norm at unit privacy.

    Returns
    -------
    matplotlib Axes
        ``ax.images[0].get_array()[ℓ₁ − 1, ℓ₂ − 1]`` is the mean error of the ranges ℓ₁ cells high (attribute 0)
        and ℓ₂ wide (attribute 1); blank where the workload has no such range.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import mmopt
    >>> from mmopt import plot
    >>> W = mmopt.workload.ranges_2d(64)                                   # 4,326,400 queries
    >>> A = mmopt.strategy.kron(mmopt.strategy.identity(64), mmopt.strategy.identity(64))
    >>> E = plot.error_by_shape(W, A, mmopt.Privacy(1.0)).images[0].get_array()
    >>> round(float(E[2, 4]), 9)                                        # 3 × 5 cells under I ⊗ I: 2·15 at ε = 1
    30.0
    >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    caller = "error_by_shape"
    log = _mpl.check_flag(log, name="log", caller=caller)
    colorbar = _mpl.check_flag(colorbar, name="colorbar", caller=caller)
    s = shape_errors(workload, strategy, privacy, norm=norm)
    d = s.mean.ndim
    if d > 2:
        raise ValueError(f"The 'workload' parameter of {caller} must have ranges on one or two attributes for a "
                         f"figure; '{s.workload}' has {d}. mmopt.answers.error_by_shape(W, A, privacy).mean holds the "
                         "means by shape for any number of attributes.")
    what = f"mean expected squared error ({_mpl.privacy_text(privacy)})"
    ax = _mpl.new_or_given(ax, caller)
    title = f"{s.strategy} on {s.workload}"
    if d == 1:
        lengths = np.arange(1, s.mean.size + 1)
        ax.plot(lengths, s.mean, lw=1.2)
        ax.set(xlabel="range length ℓ (cells)", ylabel=what, title=title, yscale="log" if log else "linear")
        ax.grid(True, which="both", alpha=0.3)
        return ax
    from matplotlib.colors import LogNorm, Normalize

    H = s.mean
    lo, hi = float(np.nanmin(H)), float(np.nanmax(H))
    scale = LogNorm(lo, hi if hi > lo else lo * 10) if log and lo > 0 else Normalize(lo, hi if hi > lo else lo + 1)
    n1, n2 = H.shape
    im = ax.imshow(H, origin="lower", aspect="auto", interpolation="nearest", norm=scale,
                   extent=(0.5, n2 + 0.5, 0.5, n1 + 0.5))
    ax.set(xlabel=f"range width ℓ₂ ({s.attributes[1]}, cells)", ylabel=f"range height ℓ₁ ({s.attributes[0]}, cells)",
           title=title)
    if colorbar:
        ax.figure.colorbar(im, ax=ax, label=what)
    return ax


def error_by_term(workload, strategy, privacy=None, *, groups=None, ax=None, log: bool | None = None,
                  norm: str | None = None):
    """Per-term (per-marginal, per-table) error bars: each term's RMSE, with whiskers from its smallest to its
    largest query's standard deviation √(c·Δ²·q M qᵀ).

    The figures are :func:`mmopt.answers.error_by_term`'s (exact from per-factor terms for a product strategy;
    whiskers that are proven bounds rather than attained values are drawn dashed).

    Parameters
    ----------
    workload : ImplicitWorkload or Workload
        A union of products: marginals, census tables, any workload of :func:`mmopt.workload.stack`.
    strategy : ImplicitStrategy, Strategy or array_like
    privacy : Privacy or None, default=None
    groups : sequence of str or None
        One label per term; terms with the same label are pooled (default: the terms' names — a marginal's
        attributes, an SF1 table).
    ax : matplotlib Axes or None
    log : bool or None, default=None
        Logarithmic y axis; None: when the whiskers span more than a factor of 10 (bars on a linear axis start
        at 0, so their heights compare honestly).
    norm : {"l1", "l2"} or None

    Returns
    -------
    matplotlib Axes
        ``[p.get_height() for p in ax.patches]`` are the RMSEs, in term order; the x tick labels name the terms;
        ``ax.collections[0]`` holds the whiskers.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import mmopt
    >>> from mmopt import plot
    >>> W = mmopt.workload.marginals((10, 20, 30), 2)
    >>> A = mmopt.strategy.kron(*[mmopt.strategy.identity(n) for n in (10, 20, 30)])
    >>> ax = plot.error_by_term(W, A, mmopt.Privacy(1.0))
    >>> [round(float(p.get_height()) ** 2, 9) for p in ax.patches]   # 2·(cells per marginal cell), ε = 1
    [60.0, 40.0, 20.0]
    >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    caller = "error_by_term"
    log = None if log is None else _mpl.check_flag(log, name="log", caller=caller)
    rows = term_errors(workload, strategy, privacy, groups=groups, norm=norm)
    ax = _mpl.new_or_given(ax, caller, figsize=(max(5.0, 0.45 * len(rows) + 2.0), 4.2))
    x = np.arange(len(rows))
    rmse = np.array([r.rmse for r in rows])
    lo = np.clip(rmse - np.sqrt([max(r.min, 0.0) for r in rows]), 0.0, None)  # ≥ 0 up to rounding: equal errors
    hi = np.clip(np.sqrt([r.max for r in rows]) - rmse, 0.0, None)
    ax.bar(x, rmse, color="C0", alpha=0.8, label="RMSE of the term's queries")
    exact = np.array([r.exact for r in rows])
    for mask, style, label in ((exact, "-", "smallest to largest query"), (~exact, "--", "proven bounds")):
        if mask.any():
            bars = ax.errorbar(x[mask], rmse[mask], yerr=[lo[mask], hi[mask]], fmt="none", ecolor="k", capsize=3,
                               lw=1, label=label)
            for line in bars.lines[2]:
                line.set_linestyle(style)
    if log is None:
        low = float(np.min(rmse - lo))
        log = low > 0 and float(np.max(rmse + hi)) > 10 * low
    ax.legend(loc="best", fontsize="small")
    ax.set_xticks(x, [r.name for r in rows], rotation=45 if len(rows) > 6 else 0,
                  ha="right" if len(rows) > 6 else "center")
    ax.set(ylabel=f"standard deviation of an answer ({_mpl.privacy_text(privacy)})",
           title=f"{getattr(strategy, 'name', 'strategy')} on {getattr(workload, 'name', 'workload')}",
           yscale="log" if log else "linear")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    return ax


__all__ = ["BY", "error_by_shape", "error_by_term", "per_query_error", "range_queries"]
