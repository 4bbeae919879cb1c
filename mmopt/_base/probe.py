"""A fixed probe histogram: the fingerprint by which a release that keeps no x̂ (the hierarchy family's grouping
sets) is matched to the workload its table is asked for. The release stores its queries' exact answers on the probe;
the table computes the given workload's on the same probe and refuses a mismatch. Counts alone (groups per set)
let a workload with its groups in another order, or another tree of the same sizes, label the answers (a helper's
audit: answers off by 4,800 on counts of 100 per cell)."""

from __future__ import annotations

import math

import numpy as np

_SEED = 20_261_205  # fixed: the release and its table draw the same probe


def probe_histogram(n_cells: int) -> np.ndarray:
    """A fixed pseudo-random x in [0, 1)ⁿ (PCG64 at a fixed seed, cells in C order): two different sets of cells
    share a sum with probability ~0. A Weyl sequence frac(jφ) would not do: it is additive, so {i, j} and
    {i + k, j − k} mostly share one (1,456 of 2,016 pairs of 64 cells).

    >>> x = probe_histogram(4)
    >>> bool(np.all((0 <= x) & (x < 1))), bool(np.array_equal(x, probe_histogram(4)))
    (True, True)
    """
    return np.random.Generator(np.random.PCG64(_SEED)).random(n_cells)


def matches(mine: np.ndarray, theirs: np.ndarray) -> bool:
    """Whether two probe answers agree to round-off: each is a sum of at most N values in [0, 1) computed in a
    different order, so they differ by at most ~N·u times their scale; 10⁻⁸ of the largest leaves room to N ~ 10⁷."""
    mine, theirs = np.ravel(mine), np.ravel(theirs)
    if mine.shape != theirs.shape:
        return False
    scale = max(float(np.abs(theirs).max(initial=0.0)), float(np.finfo(float).tiny))
    return bool(np.allclose(mine, theirs, rtol=1e-8, atol=1e-8 * scale))


def gram_probe(apply, n_cells: int) -> tuple[float, float]:
    """(ln ‖A u₁‖², ln ‖A u₂‖²), u_kᵀ(AᵀA)u_k for two fixed probes u_k in [−1, 1)ⁿ, ``apply(u)`` = A u: the
    fingerprint by which a release is matched to the strategy its standard errors are asked for. The variances
    depend on A only through AᵀA and Δ (checked beside it), and these values do not change when A's rows are
    reordered or negated; two strategies with as many rows and the same Δ passed before, with standard errors
    0.5–2× the truth (a helper's audit: l2_approx for prefix(32) given for l2_approx for all_range(32)). In
    logarithms, scaled by a power of two first: ‖A u‖² underflowed to 0 for entries near 10⁻¹⁶² (two different
    strategies matched) and overflowed to inf near 10¹⁵³ (the strategy itself was refused; a helper's audit)."""
    out = []
    for k in (1, 2):
        u = 2.0 * np.random.Generator(np.random.PCG64([_SEED, k])).random(n_cells) - 1.0
        r = np.ravel(np.asarray(apply(u), dtype=float))
        top = float(np.max(np.abs(r), initial=0.0))
        if top == 0.0 or not math.isfinite(top):
            out.append(-math.inf if top == 0.0 else math.nan)
            continue
        e = math.frexp(top)[1]
        s = np.ldexp(r, -e)  # entries in [½, 1) at the largest: the sum of squares neither under- nor overflows
        out.append(math.log(float(s @ s)) + 2 * e * math.log(2.0))
    return out[0], out[1]


def matrix_probe(A: np.ndarray) -> tuple[float, float]:
    """:func:`gram_probe` of a dense strategy matrix A (p × n)."""
    return gram_probe(lambda u: A @ u, A.shape[1])


def same_gram(mine, theirs) -> bool:
    """Whether two :func:`gram_probe` values are one strategy's: 10⁻⁶ relative (in the logarithm) leaves room for
    round-off in A u (a sum of n terms, computed by another route: dense product or Kronecker factors) where a
    different AᵀA moves them at order 1."""
    return all(a == b or abs(a - b) <= 1e-6 for a, b in zip(mine, theirs, strict=True))
