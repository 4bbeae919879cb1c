"""Error against domain size n for several strategies on log-log axes, with the SVD lower bound.

Notation: see README. Each point is an exact expected error from :func:`mmopt.evaluate`; the bound is
:func:`mmopt.svd_bound`, c·(Σᵢ σᵢ(W))²/n on the total (Li et al., PODS 2010, Thm 5.26), divided by m for
the mean squared error and square-rooted for the RMSE. No strategy's point can lie below it.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable, Mapping, Sequence

from mmopt._base import validation as v
from mmopt.dense._classic import hierarchical, identity, wavelet
from mmopt.dense._error_common import as_strategy
from mmopt.dense._strategy_core import Strategy
from mmopt.dispatch import evaluate, svd_bound
from mmopt.plot import _mpl

METRICS = ("rmse", "mean_squared_error", "total_squared_error")
_NICE = {"rmse": "RMSE", "mean_squared_error": "mean squared error", "total_squared_error": "total squared error"}
_MARKERS = ("o-", "s-", "^-", "D-", "v-", "P-", "X-", "*-")
_HB = re.compile(r"H(\d+)")


def _named(name: str, caller: str) -> Callable[[int], Strategy]:
    """The closed-form baseline called ``name``: 'identity', 'wavelet' or 'Hb' (hierarchical, branching b ≥ 2)."""
    if name == "identity":
        return identity
    if name == "wavelet":
        return wavelet
    if (m := _HB.fullmatch(name)) and int(m.group(1)) >= 2:
        return lambda n: hierarchical(n, int(m.group(1)))
    raise ValueError(f"The 'strategies' parameter of {caller} names strategies 'identity', 'H2' (or any 'Hb', "
                     f"branching b ≥ 2) or 'wavelet'; pass anything else as a callable n → Strategy. "
                     f"Got {name!r:.60} instead.")


def _strategy_list(strategies, caller: str) -> list[tuple[str | None, Callable]]:
    """[(label or None, n → strategy)] from a sequence of names/callables or a Mapping label → name/callable."""
    items = list(strategies.items()) if isinstance(strategies, Mapping) else None
    if items is None:
        if isinstance(strategies, str) or not isinstance(strategies, Sequence):
            raise TypeError(f"The 'strategies' parameter of {caller} must be a list of strategy names or callables "
                            f"n → Strategy (or a dict label → either). Got {type(strategies).__name__} instead.")
        items = [(None, s) for s in strategies]
    if not items:
        raise ValueError(f"The 'strategies' parameter of {caller} must name at least one strategy. Got none.")
    out = []
    for label, spec in items:
        if isinstance(spec, str):
            out.append((spec if label is None else str(label), _named(spec, caller)))
        elif callable(spec):
            out.append((None if label is None else str(label), spec))
        else:
            raise TypeError(f"The 'strategies' parameter of {caller} must hold strategy names or callables "
                            f"n → Strategy. Got {spec!r:.60} ({type(spec).__name__}).")
    return out


def _computed_rows(workload_fn, strategies, ns, privacy, metric: str, caller: str) -> list[dict]:
    if not callable(workload_fn):
        hint = " To plot precomputed rows, pass rows=[...]." if isinstance(workload_fn, Sequence) else ""
        raise TypeError(f"The 'workload_fn' parameter of {caller} must be a callable n → Workload (e.g. "
                        f"mmopt.workload.all_range). Got {type(workload_fn).__name__} instead.{hint}")
    v.check_choice(metric, name="metric", caller=caller, choices=METRICS)
    if isinstance(ns, str) or not isinstance(ns, Sequence) or not ns:
        raise TypeError(f"The 'ns' parameter of {caller} must be a non-empty list of domain sizes. Got {ns!r:.60}.")
    sizes = [v.check_int(n, name="ns", caller=caller) for n in ns]
    if len(set(sizes)) != len(sizes):
        raise ValueError(f"The 'ns' parameter of {caller} must not repeat a size. Got {sizes}.")
    specs, rows = _strategy_list(strategies, caller), []
    sizes.sort()
    first = {k: _built(build, sizes[0], caller) for k, (label, build) in enumerate(specs) if label is None}
    # a callable's label is its strategy's name at the first n; two unnamed strategies are both "strategy", and
    # the rows of the second were refused as "two rows for strategy 'strategy'" (a helper's audit)
    labels = _unique([first[k].name if label is None else label for k, (label, _) in enumerate(specs)])
    for n in sizes:
        W = workload_fn(n)
        bound = svd_bound(W, privacy, per_query=metric != "total_squared_error")
        bound = math.sqrt(bound) if metric == "rmse" else bound
        for k, (_, build) in enumerate(specs):
            A = first.pop(k) if k in first else _built(build, n, caller)
            rows.append({"n": n, "strategy": labels[k], metric: getattr(evaluate(W, A, privacy), metric),
                         "lower_bound": bound})
    return rows


def _built(build, n: int, caller: str):
    """``build(n)``; a matrix is made a Strategy (it had no name to label its line with: an AttributeError)."""
    A = build(n)
    if isinstance(getattr(A, "name", None), str):
        return A
    try:
        return as_strategy(A, caller)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"The 'strategies' parameter of {caller} holds a callable that returned "
                        f"{type(A).__name__} at n = {n}; it must return a Strategy or a matrix ({exc})") from exc


def _unique(labels: list[str]) -> list[str]:
    """The labels, a repeated one numbered from its second use: ["H2", "H2"] → ["H2", "H2 (2)"]; a number is
    skipped when that label is taken too (["H2", "H2", "H2 (2)"] → ["H2", "H2 (3)", "H2 (2)"])."""
    taken, out = set(labels), []
    for label in labels:
        if label in out:
            k = 2
            while f"{label} ({k})" in taken:
                k += 1
            label = f"{label} ({k})"
            taken.add(label)
        out.append(label)
    return out


def _positive(x, *, name: str, caller: str, n) -> float:
    if isinstance(x, bool) or not isinstance(x, numbers.Real) or not x > 0 or not math.isfinite(x):
        raise ValueError(f"The 'rows' parameter of {caller} must give a finite value > 0 for '{name}' (log axes). "
                         f"Got {x!r:.60} at n = {n}.")
    return float(x)


def _series(rows, metric: str, lower_bound: bool, caller: str) -> tuple[dict, dict]:
    """({strategy: [(n, value)] sorted by n}, {n: bound}), in the rows' order of first appearance."""
    if isinstance(rows, str | Mapping) or not isinstance(rows, Sequence) or not rows:
        raise TypeError(f"The 'rows' parameter of {caller} must be a non-empty list of dicts with keys 'n', "
                        f"'strategy' and {metric!r}. Got {type(rows).__name__}.")
    lines: dict[str, dict[int, float]] = {}
    bounds: dict[int, float] = {}
    for r in rows:
        if not isinstance(r, Mapping) or not {"n", "strategy", metric} <= set(r):
            raise ValueError(f"The 'rows' parameter of {caller} must hold dicts with keys 'n', 'strategy' and "
                             f"{metric!r}. Got {r!r:.80}.")
        n = v.check_int(r["n"], name="rows[...]['n']", caller=caller)
        s = v.check_str(r["strategy"], name="rows[...]['strategy']", caller=caller)
        if n in lines.setdefault(s, {}):
            raise ValueError(f"The 'rows' parameter of {caller} has two rows for strategy {s!r} at n = {n}.")
        lines[s][n] = _positive(r[metric], name=metric, caller=caller, n=n)
        if lower_bound:
            if "lower_bound" not in r:
                raise ValueError(f"The 'rows' parameter of {caller} needs a 'lower_bound' value in every row (in the "
                                 f"units of {metric!r}), or pass lower_bound=False.")
            b = _positive(r["lower_bound"], name="lower_bound", caller=caller, n=n)
            if bounds.setdefault(n, b) != b:
                raise ValueError(f"The 'rows' parameter of {caller} gives two lower bounds at n = {n}: "
                                 f"{bounds[n]:.6g} and {b:.6g}; rows of one plot must share one workload.")
    return {s: sorted(pts.items()) for s, pts in lines.items()}, bounds


def compare(workload_fn=None, strategies=None, ns=None, privacy=None, *, rows=None, metric: str = "rmse",
            lower_bound: bool = True, labels: Mapping[str, str] | None = None,
            styles: Mapping[str, str] | None = None, legend: bool = True, ax=None):
    """Error of several strategies against n (log-log), with the SVD lower bound; computed or from a table.

    Parameters
    ----------
    workload_fn : callable n → Workload
        E.g. :func:`mmopt.workload.all_range`. Leave out when passing ``rows``.
    strategies : list of (str or callable n → Strategy), or dict label → either
        Names: 'identity', 'H2' (any 'Hb'), 'wavelet'. A callable is labelled by its strategy's name.
    ns : list of int
        Domain sizes (distinct; drawn in increasing order).
    privacy : Privacy or None, default=None
        None: unit privacy, as in :func:`mmopt.evaluate`.
    rows : list of dict or None
        Precomputed points instead of the three above: keys 'n', 'strategy', ``metric`` and, when
        ``lower_bound``, 'lower_bound' (the bound in the same units; equal across rows of one n). Here
        ``metric`` may be any key, e.g. a ratio to the bound.
    metric : {"rmse", "mean_squared_error", "total_squared_error"}, default="rmse"
    lower_bound : bool, default=True
        Draw the SVD lower bound (Thm 5.26) as a thick dashed black line.
    labels, styles : dict strategy → str, optional
        Legend text and matplotlib format strings ("o-", "s--", …) per strategy.
    legend : bool, default=True
    ax : matplotlib Axes or None

    Returns
    -------
    matplotlib Axes
        One line per strategy (``ax.lines`` in order), then the bound's line.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import mmopt
    >>> from mmopt import plot
    >>> ax = plot.compare(mmopt.workload.all_range, ["identity", "H2"], [4, 8, 16], mmopt.Privacy(1.0))
    >>> [line.get_label() for line in ax.lines]
    ['identity', 'H2', 'SVD lower bound']
    >>> float(ax.lines[0].get_ydata()[0])   # identity at n = 4: total (2/ε²)·20 over 10 ranges, √4
    2.0
    >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    caller = "compare"
    lower_bound = _mpl.check_flag(lower_bound, name="lower_bound", caller=caller)
    legend = _mpl.check_flag(legend, name="legend", caller=caller)
    v.check_str(metric, name="metric", caller=caller)
    for name, mapping in (("labels", labels), ("styles", styles)):
        if mapping is not None and not isinstance(mapping, Mapping):
            raise TypeError(f"The '{name}' parameter of {caller} must be a dict strategy → str or None. "
                            f"Got {type(mapping).__name__} instead.")
    if rows is None:
        rows = _computed_rows(workload_fn, strategies, ns, privacy, metric, caller)
        ylabel = f"{_NICE[metric]} ({_mpl.privacy_text(privacy)})"
    elif workload_fn is not None or strategies is not None or ns is not None or privacy is not None:
        raise TypeError(f"{caller} takes either workload_fn, strategies, ns (and privacy), or rows=; not both.")
    else:
        ylabel = _NICE.get(metric, metric)
    lines, bounds = _series(rows, metric, lower_bound, caller)
    ax = _mpl.new_or_given(ax, caller)
    labels, styles = labels or {}, styles or {}
    for k, (s, pts) in enumerate(lines.items()):
        ax.plot([n for n, _ in pts], [y for _, y in pts], styles.get(s, _MARKERS[k % len(_MARKERS)]), ms=4,
                label=labels.get(s, s))
    if lower_bound:
        ns_b = sorted(bounds)
        ax.plot(ns_b, [bounds[n] for n in ns_b], "k--", lw=2.5, alpha=0.6, label="SVD lower bound")
    every_n = {n for pts in lines.values() for n, _ in pts}
    ax.set(yscale="log", xlabel="domain size n", ylabel=ylabel)
    ax.set_xscale("log", base=2 if all(n & (n - 1) == 0 for n in every_n) else 10)
    ax.grid(True, which="both", alpha=0.3)
    if legend:
        ax.legend(fontsize=8)
    return ax


__all__ = ["METRICS", "compare"]
