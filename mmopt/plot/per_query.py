"""Each query's expected squared error: a heat map by (start, length) for range workloads, or a line by index.

Notation: see README. Query w's error is c·Δ²·w M wᵀ (Li et al., PODS 2010, Prop. 4.4); the values drawn are
``mmopt.evaluate(W, A, privacy, per_query=True).per_query_variance``, in the workload's row order.
"""

from __future__ import annotations

import numpy as np

from mmopt import _validation as v
from mmopt.dispatch import evaluate
from mmopt.plot import _mpl

BY = ("start_length", "index")


def range_queries(workload) -> tuple[np.ndarray, np.ndarray] | None:
    """(start a, length ℓ) of every query, in the workload's row order, when each query is a range, else None.

    A range is a 0/1 query whose 1s are contiguous, [a, a + ℓ − 1] (0-based). Closed-form families are
    decoded from their definition (rows of all_range: a ascending, then b ≥ a); an explicit W row by row.
    """
    n = workload.domain_size
    matrix, family = getattr(workload, "matrix", None), getattr(workload, "family", None)
    if matrix is None:
        if family == "all_range":
            a, b = np.triu_indices(n)
        elif family == "prefix":
            a, b = np.zeros(n, dtype=int), np.arange(n)
        elif family == "identity":
            a = b = np.arange(n)
        elif family == "total":
            a, b = np.array([0]), np.array([n - 1])
        else:
            return None
        return a, b - a + 1
    if not isinstance(matrix, np.ndarray) or not np.all((matrix == 0) | (matrix == 1)):
        return None
    W = matrix.astype(bool)
    length = W.sum(axis=1)
    a = np.argmax(W, axis=1)
    cells = np.arange(n)
    inside = (cells >= a[:, None]) & (cells < (a + length)[:, None])
    if np.any(length == 0) or not np.array_equal(inside, W):
        return None
    return a, length


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
                             f"queries) for by='start_length'. Got {got!r}; use by='index' to draw any workload's "
                             "per-query errors.")
    report = evaluate(workload, strategy, privacy, norm=norm, per_query=True)
    E = np.asarray(report.per_query_variance, dtype=float)
    what = f"expected squared error ({_mpl.privacy_text(privacy)})"
    ax = _mpl.new_or_given(ax, caller)
    title = f"{report.strategy} on {report.workload}"
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


__all__ = ["BY", "per_query_error", "range_queries"]
