"""Standard errors of one's own queries under the strategies of :mod:`mmopt.toeplitz`, at any n, nothing n×n.

Both strategies are square and invertible, so x̂ = A⁻¹y and Var(q x̂) = s²·‖A⁻ᵀq‖²:

* a Toeplitz strategy C = D·T(c): C⁻ᵀq = D⁻¹·T(g)ᵀq with g = 1/c mod xⁿ, and T(g)ᵀq = J·T(g)·J q (J the
  reversal);
* the weighted square root A = G^{1/4}E⁻¹ (:mod:`mmopt.toeplitz.weighted`): A⁻ᵀq = G^{−1/4}(e ⊙ q), G symmetric.

One O(n log n) product a query either way. The tree strategy H_b (:mod:`mmopt.toeplitz.trees`) is not square:
Var(q x̂) = s²·‖B M⁻¹q‖², two O(n) passes over the tree a query.

The norm of a vector, not the quadratic form q E G^{−1/2} E qᵀ, is taken: it cannot come out negative by
cancellation.

Every prefix at once (an answers table of ``prefix(n)`` past 4,096 cells, :func:`prefix_units`): the Toeplitz
decoder's rows, Var(x̂₀ + … + x̂ₜ) = s²·Σ_{j ≤ t} b_{t−j}²/y_j (b = cumsum(1/c), one convolution,
:func:`mmopt.toeplitz.error.decoder_rows`), and the tree's recurrence over prefixes
(:meth:`mmopt.toeplitz.TreeStrategy.prefix_variances`), O(n log n) both; the weighted square root's tail sums
(:func:`mmopt.toeplitz.weighted.prefix_variances`), O(n log² n).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from mmopt._base import validation as v


def is_weighted(strategy) -> bool:
    from mmopt.toeplitz.weighted import WeightedSqrtStrategy
    return isinstance(strategy, WeightedSqrtStrategy)


def refuse_laplace(strategy, noise: str | None, caller: str) -> None:
    """The weighted square root is Gaussian-only (release refuses it under ε-DP; its Δ₁ is not computed): a Laplace
    output or Privacy(ε) with it is a mix-up, refused here rather than as an unexplained 'norm' error."""
    if noise == "laplace" and is_weighted(strategy):
        raise ValueError(f"The 'strategy' parameter of {caller} is the weighted square root, which is released with "
                         "Gaussian noise only (its L1 sensitivity is not computed); got Laplace noise (ε-DP). Pass "
                         "the output it was released with, or the Privacy(epsilon, delta > 0) it was released at.")


def stream_errors(strategy, Q, sd: float, caller: str) -> np.ndarray:
    """s·‖A⁺ᵀq‖ per row q of ``Q`` for a ToeplitzStrategy, a WeightedSqrtStrategy or a TreeStrategy (module
    docstring)."""
    Qd = Q.toarray() if sp.issparse(Q) else np.asarray(Q, dtype=float)
    # a bare x̂ of another length made queries over other cells: the tree's passes raised a bare IndexError, the
    # Toeplitz convolution answered for the wrong cells (a helper's probe)
    v.check_same_domain(Qd.shape[-1], strategy.n, caller=caller, what=("the queries (and the estimate)",
                                                                       f"the strategy '{strategy.name}'"))
    v.check_allocation(2 * Qd.size, what=f"{Qd.shape[0]:,} queries' rows on {Qd.shape[1]:,} cells", caller=caller)
    if callable(getattr(strategy, "query_norms", None)):  # the tree strategy
        return sd * strategy.query_norms(Qd)
    out = np.empty(Qd.shape[0])
    if is_weighted(strategy):
        from mmopt.toeplitz import weighted
        kind, n = strategy.workload.kind, strategy.n
        e = weighted.column_scale(kind, n)
        for i, q in enumerate(Qd):
            out[i] = np.linalg.norm(weighted.apply_power(kind, n, -0.25, e * q))
        return sd * out
    from mmopt.toeplitz import _series
    g, y, n = strategy.inverse_column(), strategy.row_scale, strategy.n
    for i, q in enumerate(Qd):
        z = _series.convolve(g, q[::-1], n)[::-1]
        out[i] = np.linalg.norm(z if y is None else z / np.sqrt(y))
    return sd * out


def prefix_units(strategy, caller: str) -> tuple[np.ndarray, int]:
    """(u, e) with q (AᵀA)⁻¹ qᵀ = uₜ/4ᵉ for every prefix q = 1_[0, t] (module docstring): a TreeStrategy (or the
    p-Identity strategy past the dense size, whose prefix_variances it calls alike), a
    ToeplitzStrategy (C = 2ᵉ·C′, u from C′, whose entries stay within float64 where C's overflow) or the weighted
    square root of prefix(n) (:func:`mmopt.toeplitz.weighted.prefix_variances`); any other strategy is refused
    with the remedy."""
    from mmopt.toeplitz.error import check_decodable, decoder_rows
    from mmopt.toeplitz.strategies import ToeplitzStrategy
    if callable(getattr(strategy, "prefix_variances", None)):
        return strategy.prefix_variances(), 0  # the tree, and the p-Identity strategy past the dense size
    if isinstance(strategy, ToeplitzStrategy):
        unit, e = strategy.normalised()
        return decoder_rows(check_decodable(unit, caller), unit.row_scale), e
    if is_weighted(strategy) and strategy.workload.kind == "prefix":
        from mmopt.toeplitz.weighted import prefix_variances
        return prefix_variances(strategy.n), 0
    raise ValueError(f"{caller}: per-query standard errors of every prefix past 4,096 cells are listed for the tree "
                     "(mmopt.toeplitz.tree), the p-Identity strategy (method='min_error'), Toeplitz strategies "
                     "(sqrt_strategy, banded, blt) and the weighted square root of prefix(n); got "
                     f"'{getattr(strategy, 'name', type(strategy).__name__)}'. Use mmopt.answers.answer(queries, "
                     "output, strategy) for the queries you need, or pass strategy=None for the answers alone.")
