"""Releasing prefix sums or all ranges at any n through a Toeplitz strategy: O(n log n), never an n×n matrix.

Notation: see :mod:`mmopt.toeplitz.strategies`. The strategy is C = D^{1/2}·T(c), lower-triangular and
invertible (c₀ ≠ 0), so the least-squares estimate is exact inversion: y = C x + z, x̂ = C⁻¹ y =
T(1/c)·D^{−1/2} y (two FFT convolutions with c and its inverse series), and the answers are W x̂ — the prefix
sums of x̂ (prefix workload) or every range (all ranges, listed only while the n(n+1)/2 answers fit the
allocation limit; x̂ is always returned). The noise is OpenDP's, at Δ = the exact largest column norm of C
(rounded upwards), as for every release (:mod:`mmopt._base.opendp`). C x is computed exactly and rounded once
(:mod:`mmopt.toeplitz.exact_product`: integer convolutions by number-theoretic transforms, O(n log n)) for a
histogram of at most :data:`mmopt.dense.exact_answers.MAX_RECORDS` records, and that rounding is charged in d_in as
the dense release's is; the estimate's FFTs are post-processing.

The tree strategy H_b (:mod:`mmopt.toeplitz.trees`, what ``optimize`` returns under Laplace noise at large n) is
released in O(n): y = B x + z node by node, x̂ = M⁻¹Bᵀy by two passes over the tree (Δ₁ = the tree's depth).

The weighted square root A = G^{1/4}E⁻¹ (:mod:`mmopt.toeplitz.weighted`, what ``optimize`` returns under
Gaussian noise at large n) is released the same way: both Grams are diagonalised by sine transforms, so
G^{±1/4} = T(a) − H(a) (Toeplitz minus Hankel, :func:`~mmopt.toeplitz.weighted.spectral_sequence`) applies in
O(n log n), y = G^{1/4}(x/e) + z, x̂ = e ⊙ G^{−1/4}y (Gaussian noise only). The strategy measured is G^{1/4}E⁻¹ with
its sequence and scale rounded to integers times a power of two; its Δ₂ (1 to ~10⁻¹⁴) is computed exactly and its
answers correctly rounded, by number-theoretic transforms (:mod:`mmopt.toeplitz.weighted_exact`), and that rounding
is charged in d_in as the dense release's is; the estimate's sine transforms are post-processing.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import signal

from mmopt._base import opendp as _opendp
from mmopt._base import validation as v
from mmopt._base.probe import gram_probe
from mmopt.dense.exact_answers import MAX_RECORDS, charged_sensitivity, check_histogram
from mmopt.privacy import Privacy
from mmopt.toeplitz import weighted as weighted_sqrt
from mmopt.toeplitz import weighted_exact
from mmopt.toeplitz.error import StreamWorkload, check_decodable
from mmopt.toeplitz.exact_product import causal_exact, truncation_charge
from mmopt.toeplitz.strategies import ToeplitzStrategy
from mmopt.toeplitz.trees import TreeStrategy

__all__ = ["release"]


def _causal(c: np.ndarray, x: np.ndarray) -> np.ndarray:
    """T(c) x: the first n entries of the convolution (FFT, O(n log n))."""
    n = x.shape[-1]
    return signal.fftconvolve(c[:n], x)[:n]


def _all_ranges(s: np.ndarray) -> np.ndarray:
    """Every range [i, j] (i ≤ j, in np.triu_indices order) as s[j+1] − s[i] from the prefix sums s (s₀ = 0), row by
    row into the output: np.triu_indices' two index arrays and the gathered s[j+1], s[i] were 4× the answers."""
    n = s.size - 1
    out = np.empty(n * (n + 1) // 2)
    start = 0
    for i in range(n):
        np.subtract(s[i + 1:], s[i], out=out[start:start + n - i])
        start += n - i
    return out


def release(workload: StreamWorkload, strategy, x, privacy: Privacy, *, noise_scale: float | None = None,
            reconstruct: str = "least_squares", caller: str = "release", **unused):
    """:func:`mmopt.release` for ``mmopt.toeplitz.prefix(n)`` / ``all_range(n)`` and a ToeplitzStrategy.

    Returns a :class:`mmopt.mechanism.MechanismOutput` (``path="release"``, OpenDP's verified loss). For a
    ToeplitzStrategy C x is correctly rounded (:mod:`mmopt.toeplitz.exact_product`) and its rounding charged in d_in
    (:func:`mmopt.dense.exact_answers.charged_sensitivity`): the FFT's rounding had moved neighbours' answers 10⁻⁷
    of Δ past d_in (n = 4,096, ~2·10⁹ records, 6 of 40 datasets). A tree strategy's answers are node sums of whole
    counts (exact) times one weight each, correctly rounded too, and charged alike (exact, no charge, without level
    weights); the p-Identity stream strategy's are x_j/d_j rounded once and Θ times those correctly rounded, charged
    twice (:func:`mmopt.search.pidentity_stream.exact_apply`). The weighted square root's answers are correctly
    rounded and its Δ₂ exact (:mod:`mmopt.toeplitz.weighted_exact`: 29–31 CPU s at 2²⁰ steps, 18–20 of them Δ₂'s,
    against 0.9–1.3 s for the float64 sine transforms its proof did not cover), the rounding charged alike.
    """
    from mmopt.mechanism import MechanismOutput
    from mmopt.reconstruct._common import Reconstruction
    from mmopt.structured.release import upper_sensitivity
    weighted = isinstance(strategy, weighted_sqrt.WeightedSqrtStrategy)
    if weighted and strategy.workload != workload:
        raise ValueError(f"{caller}: the weighted square root was built for {strategy.workload.kind}({strategy.n:,}), "
                         f"not {workload.kind}({workload.n:,}).")
    if weighted and isinstance(privacy, Privacy) and privacy.noise != "gaussian":
        # optimize(method='blt') is no ε-DP remedy: it optimises the Gaussian objective and refuses δ = 0
        raise ValueError(f"{caller}: the weighted square root is released with Gaussian noise (its Δ₁ is not "
                         f"computed). Got {privacy!r}; pass a δ > 0, or for ε-DP the tree strategy "
                         f"mmopt.toeplitz.tree({strategy.n}) (O(n), Δ₁ exact; what optimize(W, privacy=Privacy(ε)) "
                         "returns at large n).")
    # the tree and the p-Identity strategy past the dense size (mmopt.search.pidentity_stream) measure and
    # estimate themselves: apply(x) and estimate(y), each O(n log n) or O(p²n). No other object that applies
    # itself is taken: its answers' rounding would not be charged (the tree's node sums are exact, the p-Identity
    # strategy's exact_apply correctly rounded)
    tree = (callable(getattr(strategy, "estimate", None)) and callable(getattr(strategy, "apply", None))
            and (isinstance(strategy, TreeStrategy) or callable(getattr(strategy, "exact_apply", None))))
    if not (weighted or tree or isinstance(strategy, ToeplitzStrategy)):
        got = getattr(strategy, "name", type(strategy).__name__)
        raise TypeError(f"The 'strategy' parameter of {caller} must be a ToeplitzStrategy, a TreeStrategy, the "
                        "p-Identity stream strategy or the weighted square root for a workload of "
                        f"{workload.kind}({workload.n:,}). Got {got!r}, which has no fast product (or no charged "
                        "rounding) at this size. Use mmopt.optimize(W, privacy=...).strategy; under ε-DP "
                        f"(Laplace) mmopt.toeplitz.tree({workload.n}) is the strategy it returns at large n.")
    if not isinstance(privacy, Privacy):
        raise TypeError(f"The 'privacy' parameter of {caller} must be a Privacy. Got {type(privacy).__name__}.")
    v.check_same_domain(workload.n, strategy.n, caller=caller)
    if reconstruct != "least_squares":
        raise ValueError(f"The 'reconstruct' parameter of {caller} must be 'least_squares' for a Toeplitz strategy "
                         f"(x̂ = C⁻¹y exactly). Got {reconstruct!r}.")
    if any(val is not None for val in unused.values()):
        raise ValueError(f"{caller}: {sorted(k for k, val in unused.items() if val is not None)} apply to the "
                         "constrained reconstructions, not to a Toeplitz release.")
    n = workload.n
    x = v.check_vector(x, name="x", caller=caller, length=n)
    check_histogram(x, caller)  # whole counts ≥ 0, at most MAX_RECORDS records: what Δ and the charge assume
    if not (weighted or tree):
        check_decodable(strategy, caller)  # before any noise: C⁻¹y would be NaN, the budget spent for nothing
    e, d = _scales(strategy)  # once: the measurement, the fingerprint and the estimate read them
    measure_with = _apply(strategy, e, d)
    d_in = upper_sensitivity(strategy.sensitivity(privacy.sensitivity_norm), caller=caller)
    norm = privacy.sensitivity_norm
    if isinstance(strategy, TreeStrategy):
        # every node sum of whole counts is exact in float64 (below 2⁵³), times one weight: correctly rounded
        Cx = measure_with(x)
        d_in = charged_sensitivity(d_in, norm, strategy.n_rows, n, exact=strategy.level_weights is None)
    elif callable(getattr(strategy, "exact_apply", None)):  # the p-Identity stream strategy
        Cx = strategy.exact_apply(x, caller=caller)
        for _ in range(2):  # the division's rounding and the product's (exact_apply)
            d_in = charged_sensitivity(d_in, norm, strategy.n_rows, n, exact=False)
    elif weighted:  # the released (rounded) strategy's exact Δ₂ and correctly rounded answers
        exact = weighted_exact.released(workload.kind, n)
        Cx = weighted_exact.answers(exact, x)
        d_in = charged_sensitivity(exact.sensitivity, norm, n, n, exact=False)
    else:  # correctly rounded, the rounding charged (module docstring)
        if not d_in * MAX_RECORDS < 2.0**1023:  # |C x| ≤ N·Δ: refused from Δ alone, never from the counts
            raise ValueError(f"{caller}: the strategy's sensitivity ({d_in:.3g}) is too large for C x to stay within "
                             "float64 at every histogram of up to MAX_RECORDS records. Rescale the strategy (C and aC "
                             "have the same error).")
        Cx = causal_exact(strategy.column, x, d, caller=caller)
        d_in = charged_sensitivity(d_in, norm, n, n, exact=False) + truncation_charge(strategy.column, d, norm)
        d_in = math.nextafter(d_in, math.inf)  # the sum's rounding
    Cx = _opendp.finite(Cx, "the strategy answers", caller)
    y, scale, loss = _opendp.measure(Cx, d_in, privacy, noise_scale=noise_scale, caller=caller)

    def finish():
        if weighted:
            xhat = e * weighted_sqrt.apply_power(workload.kind, n, -0.25, y)
        elif tree:
            xhat = strategy.estimate(y)
        else:
            u = y if d is None else y / d
            xhat = _causal(strategy.inverse_column(), u)
        if not np.all(np.isfinite(xhat)):
            raise ValueError("the estimate C⁻¹y overflows (C is too ill-conditioned for float64).")
        if workload.kind == "prefix":
            answers = np.cumsum(xhat)
        elif n * (n + 1) // 2 + n + 1 <= v.MAX_ALLOCATION_ENTRIES:  # the answers and s: nothing else as long
            s = np.concatenate([[0.0], np.cumsum(xhat)])
            answers = _all_ranges(s)
        else:
            answers = None
        return xhat, answers

    done = _opendp.post_process(caller, finish, finish, "the Toeplitz reconstruction")
    xhat, answers = done if done is not None else (None, None)
    how = Reconstruction("least_squares", "sine-transform" if weighted else "toeplitz-fft" if not tree else
                         "tree" if isinstance(strategy, TreeStrategy) else "woodbury")
    return MechanismOutput(answers, xhat, y, float(scale), privacy.noise, privacy, "release", d_in, loss, how,
                           strategy_probe=gram_probe(measure_with, n))


def stream_apply(strategy):
    """x ↦ C x for a strategy :func:`release` takes (a ToeplitzStrategy, with its row scale; the weighted square
    root; a tree or p-Identity strategy that applies itself), else None: what a release measures, and what
    :mod:`mmopt.answers` fingerprints (:func:`mmopt._base.probe.gram_probe`) to match a release to its strategy."""
    return _apply(strategy, *_scales(strategy))


def _scales(strategy) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(e, d): the weighted square root's column scale e (A = G^{1/4}E⁻¹), a Toeplitz strategy's row scale
    d = √row_scale; None where the strategy has none."""
    if isinstance(strategy, weighted_sqrt.WeightedSqrtStrategy):
        return weighted_sqrt.column_scale(strategy.workload.kind, strategy.n), None
    if isinstance(strategy, ToeplitzStrategy) and strategy.row_scale is not None:
        return None, np.sqrt(strategy.row_scale)
    return None, None


def _apply(strategy, e, d):
    """:func:`stream_apply` from the scales of :func:`_scales`."""
    if isinstance(strategy, weighted_sqrt.WeightedSqrtStrategy):
        kind, n = strategy.workload.kind, strategy.n
        return lambda x: weighted_sqrt.apply_power(kind, n, 0.25, x / e)
    if callable(getattr(strategy, "estimate", None)) and callable(getattr(strategy, "apply", None)):
        return strategy.apply
    if isinstance(strategy, ToeplitzStrategy):
        return lambda x: _causal(strategy.column, x) if d is None else d * _causal(strategy.column, x)
    return None
