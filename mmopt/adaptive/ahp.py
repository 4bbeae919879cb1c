"""AHP: noisy counts, threshold, sort, cluster, measure the clusters (Zhang, Chen, Xu, Meng & Xie, SDM 2014).

*Towards Accurate Histogram Publication under Differential Privacy*, Algorithm 1, as DPBench implements it
(``dpcomp_core.algorithm.ahp``, ratio ρ = 0.85 and η = 0.35 by default):

1. x̃ = x + Lap(1/ε₁) per cell, ε₁ = ρ·ε (the histogram has L1 sensitivity 1 under add/remove).
2. Threshold: x̃_j := 0 where x̃_j ≤ η·ln(n)/ε₁.
3. Sort x̃ (ascending) and cluster the sorted sequence greedily: extend the current cluster by the next value
   unless that raises its error (sum of squared deviations + 2/(ε₂²·size), the variance of its spread noisy
   total) by at least err*, the best error the value could have in a new cluster (the scan for err* stops
   early as in the reference code — a heuristic bound, as in the paper).
4. Measure each cluster's true total + Lap(1/ε₂), ε₂ = (1 − ρ)·ε, and spread it evenly over its cells.

Privacy: steps 2–3 are post-processing of the ε₁-DP x̃; the clusters are disjoint, so their totals have
sensitivity 1 and step 4 is ε₂-DP given the clusters. Total ε by sequential composition. 2-D data are
flattened (the order does not matter: AHP sorts). ``noise="numpy"`` (default) is seeded, for simulation and
benchmarking only; ``noise="opendp"`` draws both Laplace steps with OpenDP's vetted sampler (release-grade).
"""

from __future__ import annotations

import math

import numpy as np

from mmopt._base import validation as v
from mmopt.adaptive._common import (
    AdaptiveResult,
    check_epsilon,
    check_fraction,
    check_histogram,
    laplace_scale,
    make_result,
)
from mmopt.adaptive._finish import noise_source

__all__ = ["ahp"]


def ahp(x, epsilon: float, *, ratio: float = 0.85, eta: float = 0.35, rng=None, noise="numpy") -> AdaptiveResult:
    """Run AHP (module docstring).

    Parameters
    ----------
    x : array_like, 1-D (n,) or 2-D (n1, n2)
    epsilon : float
    ratio : float in (0, 1), default 0.85
        ρ, the share of ε spent on the noisy counts that drive the clustering.
    eta : float >= 0, default 0.35
        Threshold factor η.
    rng : numpy.random.Generator, int or None
        Seed for ``noise="numpy"``; must be None with ``noise="opendp"``.
    noise : {"numpy", "opendp"} or Noise, default "numpy"
        Seeded numpy noise (simulation) or OpenDP's vetted samplers (release, ``path == "release"``).

    Returns
    -------
    AdaptiveResult
        ``budget = {"counts": ε₁, "clusters": ε₂}``; ``details``: "clusters" (list of arrays of row-major cell
        indices), "threshold".

    Examples
    --------
    >>> x = np.array([0, 0, 9, 9, 9, 0, 30, 0], float)
    >>> r = ahp(x, 1e5, rng=0)
    >>> bool(np.allclose(r.estimate, x, atol=0.01))
    True
    """
    caller = "ahp"
    X = check_histogram(x, caller)
    eps = check_epsilon(epsilon, caller)
    rho = check_fraction(ratio, "ratio", caller)
    eta = v.check_real(eta, name="eta", caller=caller, low=0.0)
    src = noise_source(noise, rng, caller, data=X)
    xf = X.ravel()
    n = xf.size
    if n == 1:  # one cell is one cluster whatever the counts say: its total takes all of ε (15 % went to noisy
        # counts that chose nothing, a helper's audit)
        b = laplace_scale(1.0, eps, "the cluster totals", caller)
        est = np.asarray(src.add_laplace(xf.astype(float), b), dtype=float)
        details = {"clusters": [np.array([0])], "threshold": 0.0, "noise_scales": (math.inf, b), "eta": eta}
        return make_result("ahp", est.reshape(X.shape), eps, {"counts": 0.0, "clusters": eps}, details, src)
    eps1 = rho * eps
    eps2 = eps - eps1
    noisy = src.add_laplace(xf, laplace_scale(1.0, eps1, "the cell counts", caller))
    cutoff = eta * math.log(n) / eps1
    noisy = np.where(noisy <= cutoff, 0.0, noisy)
    perm = np.argsort(noisy, kind="stable")
    spans = greedy_clusters(noisy[perm], eps2)
    b2 = laplace_scale(1.0, eps2, "the cluster totals", caller)
    est = np.empty(n)
    clusters = []
    for lo, hi in spans:
        cells = perm[lo:hi]
        est[cells] = src.add_laplace(xf[cells].sum(), b2) / (hi - lo)
        clusters.append(cells)
    details = {"clusters": clusters, "threshold": cutoff, "noise_scales": (1.0 / eps1, b2), "eta": eta}
    return make_result("ahp", est.reshape(X.shape), eps, {"counts": eps1, "clusters": eps2}, details, src)


def greedy_clusters(values: np.ndarray, epsilon: float) -> list[tuple[int, int]]:
    """Contiguous clusters [lo, hi) of a sorted sequence (step 3; a port of DPBench's ``greedy_cluster``)."""
    z = np.concatenate([[0.0], np.asarray(values, dtype=float)])
    P, PP = np.cumsum(z), np.cumsum(z * z)
    n = z.size
    two = 2.0 / (epsilon * epsilon)

    def err(i: int, j: int) -> float:  # cluster i..j inclusive (1-based positions of z)
        size = j - i + 1
        avg = (P[j] - P[i - 1]) / size
        return (PP[j] - PP[i - 1]) - size * avg * avg + two / size

    spans, i, j = [], 1, 2
    last = err(i, j - 1)
    while j < n:
        now = err(i, j)
        if now >= last + _err_star(z[j], P, j, n, two):
            spans.append((i - 1, j - 1))
            i = j
            last = err(i, j)
        else:
            last = now
        j += 1
    spans.append((i - 1, j - 1))
    return spans


def _err_star(xj: float, P: np.ndarray, j: int, n: int, two: float) -> float:
    """min over l ≥ j of (x_j − mean(j..l))² + two/len², scanning l upward until the reference's stopping rule."""
    bound = two / float(n - j + 1) ** 2
    best, last1, last2 = two, 0.0, two
    start, width = j + 1, 32
    while start < n:
        ends = np.arange(start, min(n, start + width))
        size = (ends - j + 1).astype(float)
        e1 = (xj - (P[ends] - P[j - 1]) / size) ** 2
        e2 = two / size**2
        prev1 = np.concatenate([[last1], e1[:-1]])
        prev2 = np.concatenate([[last2], e2[:-1]])
        stop = np.flatnonzero(e1 - prev1 >= prev2 - bound)
        upto = stop[0] if stop.size else ends.size
        if upto:
            best = min(best, float(np.min(e1[:upto] + e2[:upto])))
        if stop.size:
            break
        last1, last2 = float(e1[-1]), float(e2[-1])
        start += width
        width *= 2
    return best
