"""What every mmopt.plot function shares: the lazy matplotlib import, the Axes argument, symmetric colour scales.

matplotlib is imported inside these helpers only, so ``import mmopt`` (and ``import mmopt.plot``) work without
it; a plotting call without it raises an ImportError that names the ``plots`` extra.
"""

from __future__ import annotations

import numpy as np

EXTRA_HINT = "pip install 'mmopt[plots]' (or: pip install matplotlib)"


def pyplot(caller: str):
    """matplotlib.pyplot, or an ImportError naming the extra that provides it."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(f"mmopt.plot.{caller} needs matplotlib, which is not installed. Install the plots "
                          f"extra: {EXTRA_HINT}.") from exc
    return plt


def is_axes(ax) -> bool:
    from matplotlib.axes import Axes

    return isinstance(ax, Axes)


def new_or_given(ax, caller: str, *, figsize=(5.0, 4.2)):
    """``ax`` itself when it is a matplotlib Axes; a new figure's single Axes when it is None."""
    plt = pyplot(caller)
    if ax is None:
        return plt.subplots(figsize=figsize, constrained_layout=True)[1]
    if not is_axes(ax):
        raise TypeError(f"The 'ax' parameter of {caller} must be a matplotlib Axes or None. "
                        f"Got {type(ax).__name__} instead.")
    return ax


def check_flag(value, *, name: str, caller: str) -> bool:
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"The '{name}' parameter of {caller} must be True or False. "
                        f"Got {value!r:.60} ({type(value).__name__}) instead.")
    return bool(value)


def symmetric_limit(M: np.ndarray) -> float:
    """max |M|, or 1 for an all-zero matrix (a colour scale needs a non-empty interval)."""
    lim = float(np.max(np.abs(M))) if M.size else 0.0
    return lim if lim > 0 else 1.0


def cell_ticks(n: int) -> range:
    """About four integer ticks over n cells (0, n/4, …), as in the paper-style figures."""
    return range(0, n, max(1, n // 4))


def privacy_text(privacy) -> str:
    """"ε = 1", "ε = 1, δ = 1e-06" or "unit privacy" (privacy None: variance factor 1)."""
    if privacy is None:
        return "unit privacy"
    return f"ε = {privacy.epsilon:g}" + (f", δ = {privacy.delta:g}" if privacy.delta else "")
