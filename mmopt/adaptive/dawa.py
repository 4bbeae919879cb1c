"""DAWA-style two-stage estimate: a private partition, then a matrix-mechanism measurement of the buckets.

Li, Hay, Miklau & Wang (PVLDB 2014). Stage 1 spends ε₁ = ρ·ε on a partition of the cells into intervals
(:func:`mmopt.adaptive.private_partition`); stage 2 spends ε₂ = (1 − ρ)·ε measuring the bucket totals with a
strategy over the buckets (:mod:`mmopt.adaptive._measure`) and spreads each estimated total uniformly over
its bucket. Where this differs from DAWA: the partition is drawn by the exponential mechanism over partitions
(or by DAWA's noisy-cost rule with the noise its proof needs), with an entropy correction of the per-bucket
penalty, because the reference code's rule is not ε₁-DP (:mod:`mmopt.adaptive.partition`); and the paper's
second stage is GreedyH, a workload-weighted hierarchy, where here the default is the unweighted H₂ over the
buckets and any mmopt strategy can be plugged in (``strategy=callable``). So this is a DAWA-style baseline,
not a reproduction of DAWA's numbers.

2-D data are ordered along a Hilbert curve first (:func:`mmopt.adaptive.hilbert_order`, as DAWA and DPBench
do), so that buckets are compact regions; ``order="row_major"`` uses the plain flattening.

Privacy: stage 1 is ε₁-DP (see :mod:`mmopt.adaptive.partition` for the proofs); given the partition, which is
public once released, the bucket totals have sensitivity 1 and stage 2 is ε₂-DP; the expansion is
post-processing. By sequential composition the estimate is ε-DP, ε = ε₁ + ε₂. ``noise="numpy"`` (default) is
seeded, for simulation and benchmarking only; ``noise="opendp"`` draws both stages' samples with OpenDP's vetted
samplers (release-grade, ``path == "release"``).
"""

from __future__ import annotations

import numpy as np

from mmopt._base import validation as v
from mmopt.adaptive._common import (
    EPSILON_RANGE,
    AdaptiveResult,
    check_epsilon,
    check_fraction,
    check_histogram,
    make_result,
)
from mmopt.adaptive._finish import noise_source
from mmopt.adaptive._measure import MEASURES, measure
from mmopt.adaptive.hilbert import hilbert_order
from mmopt.adaptive.partition import CANDIDATES, SELECTIONS, candidate_lengths, private_partition, singletons

__all__ = ["dawa"]

ORDERS = ("hilbert", "row_major")


def dawa(x, epsilon: float, *, ratio: float = 0.25, strategy="hierarchical", branching: int = 2,
         selection: str = "exponential", candidates: str = "dyadic", bucket_penalty: float | None = None,
         max_bucket_length: int | None = None, entropy_correction: bool = True, nonnegative: bool = False,
         order: str = "hilbert", rng=None, noise="numpy") -> AdaptiveResult:
    """Partition privately, measure the bucket totals, expand uniformly (module docstring).

    Parameters
    ----------
    x : array_like, 1-D (n,) or 2-D (n1, n2)
        Non-negative counts.
    epsilon : float
        Total ε > 0.
    ratio : float in (0, 1), default 0.25
        ρ, the share of ε spent on the partition (the DAWA paper's 0.25); none where every bucket must be a
        single cell (one cell, or ``max_bucket_length=1``): that partition has one outcome and reads no data.
    strategy : {"hierarchical", "identity"} or callable, default "hierarchical"
        The measurement of the k bucket totals: H_b (``branching``) with exact least squares, Laplace on each
        total, or ``f(k) -> Strategy`` (or p × k matrix) run through :func:`mmopt.matrix_mechanism`.
    selection, candidates, max_bucket_length, entropy_correction
        Passed to :func:`mmopt.adaptive.private_partition` (default: the exponential mechanism over partitions
        into dyadic-length buckets, with the entropy correction).
    bucket_penalty : float or None
        c, the per-bucket cost of the partition; None gives DAWA's 1/ε₂.
    nonnegative : bool, default False
        Clip negative bucket estimates to 0 (post-processing; biased upwards, as DPBench's L1partition does).
    order : {"hilbert", "row_major"}
        Cell order of 2-D data (ignored for 1-D).
    rng : numpy.random.Generator, int or None
        Seed for ``noise="numpy"``; must be None with ``noise="opendp"``.
    noise : {"numpy", "opendp"} or Noise, default "numpy"
        Seeded numpy noise (simulation) or OpenDP's vetted samplers (release).

    Returns
    -------
    AdaptiveResult
        ``budget = {"partition": ε₁, "measure": ε₂}``; ``details``: "buckets" ((k, 2) [start, stop) in the
        ordered sequence), "order" (row-major cell indices in sequence order, or None for 1-D),
        "partition" (the Partition record), "measure" (strategy, Δ, noise scale).

    Examples
    --------
    >>> x = np.repeat([5.0, 40.0, 0.0, 0.0], 16)
    >>> r = dawa(x, 1e5, rng=0)
    >>> bool(np.allclose(r.estimate, x, atol=0.01)), r.budget["partition"]
    (True, 25000.0)
    """
    caller = "dawa"
    X = check_histogram(x, caller)
    eps = check_epsilon(epsilon, caller)
    rho = check_fraction(ratio, "ratio", caller)
    if not callable(strategy):
        v.check_choice(strategy, name="strategy", caller=caller, choices=MEASURES)
    branching = v.check_int(branching, name="branching", caller=caller, low=2)
    v.check_choice(selection, name="selection", caller=caller, choices=SELECTIONS)
    v.check_choice(candidates, name="candidates", caller=caller, choices=CANDIDATES)
    order = v.check_choice(order, name="order", caller=caller, choices=ORDERS)
    nonnegative = v.check_bool(nonnegative, name="nonnegative", caller=caller)
    # the release domain (whole counts, ≤ MAX_RECORDS), checked before any draw: what every measure's proof and
    # mmopt.release (a callable strategy's buckets) take
    src = noise_source(noise, rng, caller, data=X)
    if max_bucket_length is not None:
        max_bucket_length = v.check_int(max_bucket_length, name="max_bucket_length", caller=caller)
    # singleton buckets only (one cell, or max_bucket_length=1): the partition has one outcome and reads no data,
    # so the measurement takes all of ε (ρ·ε went unused: (1 − ρ)⁻² the variance; a helper's audit)
    forced = candidate_lengths(X.size, candidates, X.size if max_bucket_length is None else max_bucket_length)[-1] == 1
    eps1 = 0.0 if forced else rho * eps
    eps2 = eps - eps1
    lo, hi = EPSILON_RANGE
    if not ((forced or lo <= eps1 <= hi) and lo <= eps2 <= hi):  # said in dawa's words, not its partition step's
        raise ValueError(f"The 'epsilon' parameter of {caller} splits into ε₁ = {eps1:g} (partition) and ε₂ = "
                         f"{eps2:g} (measurement) at ratio={rho:g}; each must be between {lo:g} and {hi:g}, so that "
                         f"the noise variances are normal floats. Got epsilon={eps!r}.")
    # the partition step's own parameters, checked in dawa's name (private_partition was named, a helper's probe)
    c = 1.0 / eps2 if bucket_penalty is None else v.check_real(bucket_penalty, name="bucket_penalty", caller=caller,
                                                               low=0.0)
    entropy_correction = v.check_bool(entropy_correction, name="entropy_correction", caller=caller)

    perm = hilbert_order(X.shape) if X.ndim == 2 and order == "hilbert" else None
    seq = X.ravel() if perm is None else X.ravel()[perm]
    if forced:  # the one partition, drawn from nothing and charged nothing
        part = singletons(seq.size, 0.0, selection, candidates, c, src.backend)
    else:
        part = private_partition(seq, eps1, bucket_penalty=c, candidates=candidates, selection=selection,
                                 max_bucket_length=max_bucket_length, entropy_correction=entropy_correction,
                                 noise=src)
    lo, hi = part.bounds[:, 0], part.bounds[:, 1]
    cs = np.concatenate([[0.0], np.cumsum(seq)])
    zhat, record = measure(cs[hi] - cs[lo], eps2, strategy, branching, src, caller)
    if nonnegative:
        zhat = np.maximum(zhat, 0.0)
    est_seq = np.repeat(zhat / (hi - lo), hi - lo)
    est = np.empty(seq.size)
    if perm is None:
        est[:] = est_seq
    else:
        est[perm] = est_seq
    details = {"buckets": part.bounds, "order": perm, "partition": part, "measure": record,
               "bucket_penalty": c, "nonnegative": bool(nonnegative)}
    return make_result("dawa", est.reshape(X.shape), eps, {"partition": eps1, "measure": eps2}, details, src)
