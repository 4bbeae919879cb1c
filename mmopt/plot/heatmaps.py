"""Heat maps of a strategy's error profile M = (AᵀA)⁺ and of the strategy A itself (dense, or factor by factor).

Notation: see README. Query w has expected squared error c·Δ²·w M wᵀ (Li et al., PODS 2010, Prop. 4.4 and
Def. 4.6), so the picture of M (or of Δ²·M, ``scaled=True``) shows which cells and pairs of cells a strategy
answers well. Profiles have entries of both signs spanning orders of magnitude; they are drawn on a
symmetric-logarithmic colour scale centred at 0, linear within ±``linear_fraction`` of the largest entry.
"""

from __future__ import annotations

import numpy as np

from mmopt._base import validation as v
from mmopt.dense._error_common import as_strategy
from mmopt.dense._strategy_analysis import error_profile as _profile_of
from mmopt.dense._strategy_core import NORMS, Strategy
from mmopt.dense._workload_core import Workload
from mmopt.dense.profile import Profile
from mmopt.plot import _mpl
from mmopt.structured.strategies import ImplicitStrategy

# A grid of factor heat maps beyond this many panels is unreadable; plot parts of the union instead.
MAX_PANELS = 64


def _stream_drawable(obj, caller: str):
    """A stream strategy (Toeplitz, weighted square root, p-Identity: held in O(n)) as the dense Strategy it
    stands for, up to the dense limit; past it a refusal naming what draws its error instead."""
    from mmopt.search.pidentity import PIdentityStrategy
    from mmopt.structured._checks import DENSE_LIMIT
    from mmopt.toeplitz.strategies import ToeplitzStrategy
    from mmopt.toeplitz.weighted import WeightedSqrtStrategy
    if not isinstance(obj, ToeplitzStrategy | WeightedSqrtStrategy | PIdentityStrategy):
        return obj
    n = obj.domain_size
    if n > DENSE_LIMIT:
        raise ValueError(f"{caller}: a heat map of the {n:,}×{n:,} {type(obj).__name__} needs the dense matrix, "
                         f"drawn up to {DENSE_LIMIT:,} cells. Its exact error at this size: mmopt.evaluate(W, A) "
                         "(O(n log n)); heat maps of the same strategy at n ≤ 4,096 show its shape.")
    return obj.to_strategy()


def _profile_matrix(obj, caller: str, scaled: bool, norm: str) -> tuple[np.ndarray, str | None]:
    """(M or Δ²·M, the strategy's name or None) for a Strategy, ImplicitStrategy, Profile or M itself."""
    from mmopt.dispatch import as_implicit  # a records release's strategy (residual or weighted marginals)
    obj = _stream_drawable(as_implicit(obj), caller)
    if isinstance(obj, Workload):
        raise TypeError(f"The 'strategy_or_profile' parameter of {caller} must be a Strategy, a Profile or the "
                        "profile matrix M. Got a Workload; its strategy is mmopt.strategy.from_workload(W).")
    if isinstance(obj, ImplicitStrategy):
        obj = obj.to_strategy()  # refuses, with the size, beyond the dense limit
    if isinstance(obj, Strategy):
        M = _profile_of(obj).matrix
        return (obj.sensitivity(norm) ** 2 * M if scaled else M), obj.name
    if scaled:
        raise ValueError(f"The 'scaled' parameter of {caller} needs a Strategy (Δ comes from A). Got a "
                         f"{type(obj).__name__}: pass Δ²·M yourself, or the Strategy.")
    M = obj.matrix if isinstance(obj, Profile) else v.check_matrix(obj, name="strategy_or_profile", caller=caller,
                                                                    square=True)
    if np.max(np.abs(M - M.T)) > 1e-9 * _mpl.symmetric_limit(M):
        raise ValueError(f"The 'strategy_or_profile' parameter of {caller} is a square matrix that is not symmetric, "
                         "so it is not an error profile M = (AᵀA)⁺. To plot a strategy's profile pass "
                         "mmopt.Strategy(A).")
    return M, None


def error_profile(strategy_or_profile, *, scaled: bool = False, norm: str = "l1", ax=None, colorbar: bool = True,
                  linear_fraction: float | None = None, cmap: str = "RdBu_r", label: str | None = None):
    """Heat map of the error profile M = (AᵀA)⁺ of a strategy (Def. 4.6) on a symmetric-log colour scale.

    Parameters
    ----------
    strategy_or_profile : Strategy, ImplicitStrategy, Profile or array_like (n, n)
        A strategy (an implicit one is made dense, up to mmopt's dense limit), the result of
        :func:`mmopt.error_profile`, or the symmetric matrix M itself. An array is always read as M, never
        as A: wrap a strategy matrix in ``mmopt.Strategy(A)``.
    scaled : bool, default=False
        Draw Δ²·M, so that w (Δ²M) wᵀ is the error of w per unit of the variance factor c (2/ε² for
        Laplace noise). Needs a strategy.
    norm : {"l1", "l2"}, default="l1"
        The sensitivity Δ of ``scaled`` (L1: Laplace, L2: Gaussian).
    ax : matplotlib Axes or None
        Where to draw; a new figure when None.
    colorbar : bool, default=True
    linear_fraction : float in (0, 1] or None, default=None
        The colour scale is linear within ±linear_fraction·max|M|, logarithmic beyond. None: 0.01, or less when
        most entries are smaller (the median non-zero |entry| drawn, down to 10⁻⁶·max|M|), so that a large
        profile's small off-diagonal entries still get colour.
    cmap : str, default="RdBu_r"
    label : str or None
        Colour bar label; default "(AᵀA)⁺ [i, j]" or "Δ²·(AᵀA)⁺ [i, j]".

    Returns
    -------
    matplotlib Axes
        ``ax.images[0].get_array()`` is the matrix drawn (M, or Δ²·M; past :data:`MAX_PIXELS` cells a side,
        pooled over b×b blocks by :func:`pooled`, which the title says).

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import numpy as np
    >>> from mmopt import plot, strategy
    >>> ax = plot.error_profile(strategy.wavelet(4))
    >>> np.round(8 * ax.images[0].get_array()[0], 12).tolist()   # Fig. 3: M_Y = (1/8)[[3, -1, 0, 0], ...]
    [3.0, -1.0, 0.0, 0.0]
    >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    caller = "error_profile"
    scaled = _mpl.check_flag(scaled, name="scaled", caller=caller)
    colorbar = _mpl.check_flag(colorbar, name="colorbar", caller=caller)
    v.check_choice(norm, name="norm", caller=caller, choices=NORMS)
    frac = None if linear_fraction is None else v.check_real(linear_fraction, name="linear_fraction", caller=caller,
                                                             low=0.0, high=1.0, low_open=True)
    M, name = _profile_matrix(strategy_or_profile, caller, scaled, norm)
    ax = _mpl.new_or_given(ax, caller)
    from matplotlib.colors import SymLogNorm

    n, lim = M.shape[0], _mpl.symmetric_limit(M)
    shown, b = pooled(M, MAX_PIXELS)
    if frac is None:
        mags = np.abs(shown[shown != 0])
        frac = 0.01 if lim == 0 or not mags.size else float(np.clip(np.median(mags) / lim, 1e-6, 0.01))
    im = ax.imshow(shown, cmap=cmap, norm=SymLogNorm(lim * frac, vmin=-lim, vmax=lim, base=10),
                   extent=(-0.5, n - 0.5, n - 0.5, -0.5), interpolation="nearest")
    ax.set(xlabel="cell j", ylabel="cell i", xticks=_mpl.cell_ticks(n), yticks=_mpl.cell_ticks(n))
    if name is not None:
        pool = f" ({b}×{b} blocks: largest |entry|)" if b > 1 else ""
        ax.set_title(f"{name}: {'Δ²·' if scaled else ''}(AᵀA)⁺{pool}")
    if colorbar:
        ticks = [-lim, -lim / 10, 0.0, lim / 10, lim]
        default = f"{'Δ²·' if scaled else ''}(AᵀA)⁺ [i, j]"
        cb = ax.figure.colorbar(im, ax=ax, shrink=0.85, label=default if label is None else label)
        cb.set_ticks(ticks, labels=[f"{t:.3g}" for t in ticks])
    return ax


#: Past this many cells a side, the profile is drawn pooled: a screen shows a few hundred pixels, and the resampler
#: averaged a 4,096-cell profile's thin diagonal structure into a blank square.
MAX_PIXELS = 512


def pooled(M: np.ndarray, most: int = MAX_PIXELS) -> tuple[np.ndarray, int]:
    """(M pooled over b×b blocks, b): each block shown by its entry of largest magnitude (sign kept), so that
    no structure thinner than a pixel averages away; b = 1 (M itself) up to ``most`` cells a side.

    Examples
    --------
    >>> P, b = pooled(np.diag([1.0, -2.0, 3.0, 4.0]), 2)
    >>> b, P.tolist()
    (2, [[-2.0, 0.0], [0.0, 4.0]])
    """
    n = M.shape[0]
    b = -(-n // most)
    if b == 1:
        return M, 1
    k = -(-n // b)
    padded = np.zeros((k * b, k * b))
    padded[:n, :n] = M
    blocks = padded.reshape(k, b, k, b).transpose(0, 2, 1, 3).reshape(k, k, b * b)
    pick = np.abs(blocks).argmax(axis=2)
    return np.take_along_axis(blocks, pick[..., None], axis=2)[..., 0], b


def _draw_matrix(ax, A: np.ndarray, title: str, cmap: str, colorbar: bool) -> None:
    """One heat map of a strategy matrix, linear and symmetric about 0 (entries are rarely far apart)."""
    lim = _mpl.symmetric_limit(A)
    p, n = A.shape
    im = ax.imshow(A, cmap=cmap, vmin=-lim, vmax=lim, aspect="auto" if max(p / n, n / p) > 3 else "equal",
                   interpolation="nearest")
    ax.set(xlabel="cell j", ylabel="row of A (measurement)", xticks=_mpl.cell_ticks(n), title=title)
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # rows are whole measurements
    if colorbar:
        ax.figure.colorbar(im, ax=ax, shrink=0.85)


def strategy(strategy, *, ax=None, axes=None, colorbar: bool = True, cmap: str = "RdBu_r"):
    """Heat map of a strategy matrix A; for an implicit product strategy, one small heat map per factor.

    Parameters
    ----------
    strategy : Strategy, array_like (p, n) or ImplicitStrategy
        Dense strategies are drawn whole. An implicit strategy (:func:`mmopt.strategy.kron`,
        :func:`mmopt.strategy.stack` of products, :func:`mmopt.strategy.marginals`) is never formed: its
        factors Aᵢ are drawn instead, one row of panels per product term θ·(A₁ ⊗ … ⊗ A_d).
    ax : matplotlib Axes or None
        For a dense strategy: where to draw (a new figure when None).
    axes : array_like of matplotlib Axes or None
        For an implicit strategy: terms × d Axes (any shape with that many), filled row by row; a new
        figure when None.
    colorbar : bool, default=True
        One colour bar per panel (each panel has its own symmetric linear scale).
    cmap : str, default="RdBu_r"

    Returns
    -------
    matplotlib Axes (dense strategy), or ndarray of Axes: shape (d,) for a product strategy, (terms, d) for
    a union. Panel [k, i] shows factor i of term k; ``get_array()`` of its image is that factor's matrix.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> from mmopt import plot, strategy as st
    >>> plot.strategy(st.hierarchical(4)).images[0].get_array().shape   # H₄: 7 rows, 4 cells
    (7, 4)
    >>> [a.images[0].get_array().shape for a in plot.strategy(st.kron(st.identity(3), st.hierarchical(2)))]
    [(3, 3), (3, 2)]
    >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    caller = "strategy"
    colorbar = _mpl.check_flag(colorbar, name="colorbar", caller=caller)
    from mmopt.dispatch import as_implicit  # a records release's strategy (residual or weighted marginals)
    strategy = _stream_drawable(as_implicit(strategy), "strategy")
    if not isinstance(strategy, ImplicitStrategy):
        if axes is not None:
            raise TypeError(f"The 'axes' parameter of {caller} is for implicit (product) strategies; this one is "
                            "dense, so pass one Axes as ax=.")
        A = as_strategy(strategy, caller)
        ax = _mpl.new_or_given(ax, caller)
        _draw_matrix(ax, A.matrix, f"{A.name} ({A.matrix.shape[0]}×{A.domain_size})", cmap, colorbar)
        return ax
    if ax is not None:
        raise TypeError(f"The 'ax' parameter of {caller} takes one Axes, but strategy '{strategy.name}' is implicit "
                        "and is drawn factor by factor: pass axes= (terms × factors Axes) instead.")
    terms, d = len(strategy.terms), len(strategy.shape)
    if terms * d > MAX_PANELS:
        raise ValueError(f"{caller}: strategy '{strategy.name}' has {terms} product terms of {d} factors, "
                         f"{terms * d} panels (at most {MAX_PANELS} are drawn). Plot a few of its terms, e.g. "
                         "mmopt.strategy.kron(*strategy.terms[0].factors).")
    if axes is None:
        plt = _mpl.pyplot(caller)
        grid = plt.subplots(terms, d, figsize=(2.8 * d + 0.6, 2.6 * terms + 0.4), squeeze=False,
                            constrained_layout=True)[1]
    else:
        grid = np.asarray(axes, dtype=object)
        others = sorted({type(a).__name__ for a in grid.flat if not _mpl.is_axes(a)})
        if grid.size != terms * d or others:
            got = (f"{grid.size} object(s)" if not others else
                   f"{grid.size} object(s), not all Axes (also {', '.join(others)})")
            raise ValueError(f"The 'axes' parameter of {caller} must hold {terms * d} matplotlib Axes ({terms} "
                             f"term(s) × {d} factors of '{strategy.name}'). Got {got} instead.")
        grid = grid.reshape(terms, d)
    for k, term in enumerate(strategy.terms):
        for i, f in enumerate(term.factors):
            weight = "" if terms == 1 and term.weight == 1 else f"θ = {term.weight:.3g}: "
            _draw_matrix(grid[k, i], f.matrix, f"{weight}A{i + 1} = {f.name} "
                         f"({f.matrix.shape[0]}×{f.domain_size})", cmap, colorbar)
    return grid[0] if terms == 1 else grid


__all__ = ["MAX_PANELS", "error_profile", "strategy"]
