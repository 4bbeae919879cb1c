"""iReduct: marginals released with noise scales reduced where the answers are small, to reduce relative error.

Xiao, Bender, Hay & Gehrke, *iReduct: Differential Privacy with Reduced Relative Errors* (SIGMOD 2011). The
queries are the cells of a set of marginals 𝓜 (K = |𝓜| attribute sets; default every 1- and 2-way marginal) of
counts x on a product domain n₁ × … × n_d (a dense array, one axis per attribute) or of records (a pandas
DataFrame) with a :class:`mmopt.records.Domain`. Neighbours: one record added or removed (x' = x ± e_c), the
library's relation (the paper uses replace-one, which doubles every sensitivity below).

**Generalised sensitivity** (the paper's tool). Releasing y_i = q_i(x) + Lap(b_i) for every query i, each with its
own scale, is GS-DP with GS = max over neighbours Σ_i |q_i(x) − q_i(x')|/b_i (the density ratio of independent
Laplace noise). A record at domain cell c lies in exactly one cell π_M(c) of each marginal M, so
GS = max_c Σ_M 1/b_{M,π_M(c)}. If the other marginals each have one scale, a record can sit in any cell of M,
so GS depends on M only through its smallest scale: giving M's cells different scales buys nothing over giving
all of them the smallest (with several marginals of varying scales some cell combinations can be cheaper; this
module does not search them). It uses **one scale per marginal and round**, b_M, and then GS = Σ_M 1/b_M
exactly. The noise is reduced where answers are small *between* marginals: a marginal
whose cells are small (a sparse 2-way table) gets a smaller scale than one whose cells are large.

**Which variant.** The paper's iReduct lowers the scales of the queries with large estimated relative error and
*resamples* their answers with NoiseDown: a draw from the conditional law of a Laplace(b') answer given the
released Laplace(b) answer, so that the whole sequence costs only the final scales' GS. That conditional law
depends on the true answer (a point mass plus a two-sided exponential piece between the true and the released
value), and no vetted sampler draws it: OpenDP offers Laplace, Gaussian and noisy-max, and a hand-written
floating-point sampler is exactly what the release path avoids. This module implements the variant with
*fresh, independent* Laplace measurements per round, composed sequentially, all rounds kept and combined by
inverse variance. Its price: precision adds as Σ_r 1/b_r², so splitting a marginal's budget over rounds loses
variance (two halves: twice the variance of one whole), which is why round 1 gets a small share.

**Algorithm** (budget ε; R = ``rounds``; every draw through ``resolve_noise``):

1. Round 1 (ε₁ = γε, γ = ``first_share``, default 0.1; R = 1: ε₁ = ε): every marginal with b = K/ε₁.
2. Rounds r = 2..R (ε_r = (1 − γ)ε/(R − 1) each): from the combined estimates ŷ so far (post-processing),
   1/b_M = c·√S_M with S_M = Σ_j 1/max(ŷ_Mj, δ, σ_M), c chosen so that Σ_M 1/b_M = ε_r (times 1 − 4·2⁻⁵²,
   so rounding never overspends). With the true answers in place of ŷ this minimises the expected relative
   error Σ_M Σ_j b_M/max(y_Mj, δ) subject to GS = ε_r (Lagrange: b_M ∝ 1/√S_M); δ = max(1, ``sanity`` · t̂)
   is the paper's sanity bound, t̂ the inverse-variance mean of the K noisy marginal totals, and σ_M the
   standard deviation of ŷ_M so far, a floor of this module: a cell within its own noise is not trusted to
   be small (plugging in the raw ŷ moved budget on noise alone; on the binary data of
   ``benchmarks/bench_adaptive_marginals.py`` it made iReduct much worse than R = 1). A heuristic.
3. Combination (post-processing): ŷ_M = Σ_r y_Mr/b_Mr² / Σ_r 1/b_Mr², variance 2/Σ_r b_Mr⁻²: the released
   noisy marginals.
4. Estimate (post-processing): :func:`mmopt.adaptive._marginals.fit_marginals`, the non-negative table summing
   to max(t̂, 0) whose marginals fit ŷ in least squares weighted by the precisions, by multiplicative-weights
   (entropic mirror-descent) steps, with a certified optimality gap in ``details["fit"]``.

When it helps (``benchmarks/bench_adaptive_marginals.py``, relative error against R = 1): when the
marginals' cells differ in size (attributes of different arity, so 2-way tables are much sparser than 1-way
ones) and the signal is high enough for round 1 to rank them; with similar marginals (binary attributes) or at
low signal the 10% first round is a loss, as the fresh-noise variant must pay for its adaptivity.

Privacy: round r's scales depend only on earlier releases, and its GS is Σ_M 1/b_Mr = ε_r for every pair of
neighbours, so round r is ε_r-DP given the past; adaptive sequential composition gives Σ_r ε_r = ε. Counts
must be whole numbers (the sensitivity counts records); for records, out-of-domain rows are dropped
(:mod:`mmopt.records.domain`), so neighbours still differ by at most one kept record.
"""

from __future__ import annotations

import math

import numpy as np

from mmopt._base import guards as g
from mmopt.adaptive._common import AdaptiveResult, check_epsilon, check_fraction, laplace_scale
from mmopt.adaptive._finish import check_release_histogram, finish, noise_source
from mmopt.adaptive._marginals import by_index, check_marginals, fit_marginals
from mmopt.adaptive.privbayes import _check_data

__all__ = ["ireduct"]

_SAFE = 1.0 - 4.0 * np.finfo(float).eps  # rounds a round's scaled weights down, never up


def _total(est: dict, var: dict) -> float:
    """t̂: the inverse-variance mean of the marginals' noisy totals (each estimates the record count)."""
    tot = np.array([float(est[M].sum()) for M in est])
    v_tot = np.array([float(var[M]) * est[M].size for M in est])
    return float((tot / v_tot).sum() / (1.0 / v_tot).sum())


def ireduct(data, epsilon: float, *, domain=None, marginals=None, rounds: int = 2, first_share: float = 0.1,
            sanity: float = 1e-3, noise="numpy", rng=None) -> AdaptiveResult:
    """Run iReduct, the fresh-measurement variant (module docstring: algorithm, budget split, privacy argument).

    Parameters
    ----------
    data : array_like with d ≥ 2 axes, or pandas.DataFrame
        Whole non-negative counts, one axis per attribute; or records, with ``domain``.
    epsilon : float
        Total ε > 0 (add/remove one record).
    domain : mmopt.records.Domain or None
        The public schema of ``data`` when it is a table of records.
    marginals : tuple of tuples of int (or of attribute names, with ``domain``), or None
        The attribute sets whose marginals are released (each sorted; duplicates dropped). Default: every 1-way
        and 2-way set.
    rounds : int >= 1, default 2
        R (R = 1 is the plain Laplace mechanism on the marginals, every one at scale K/ε).
    first_share : float in (0, 1), default 0.1
        γ, the share of ε spent by round 1 (R ≥ 2); the other rounds split the rest equally.
    sanity : float in (0, 1), default 1e-3
        δ/t̂, the sanity bound of the relative error as a fraction of the noisy record count (δ ≥ 1 always).
    noise : {"numpy", "opendp"} or Noise
        Where every sample comes from (seeded numpy for simulation, OpenDP for release).
    rng : numpy.random.Generator, int or None
        Seed for ``noise="numpy"``.

    Returns
    -------
    AdaptiveResult
        ``estimate``: the fitted non-negative table, shape (n₁, …, n_d). ``budget``: "round_1", …, "round_R".
        ``details``: "marginals" (the attribute sets), "noisy_marginals" ({M: ŷ_M}, the released combined
        answers), "variances" ({M: 2/Σ_r b_Mr⁻², one per marginal}), "rounds" (per round {"noisy": {M: y},
        "scales": {M: b}}), "noisy_total" (t̂), "sanity_bound" (δ, from the last allocation), "fit" (iterations,
        objective, gap, converged).

    Examples
    --------
    >>> x = np.zeros((2, 3)); x[0, 0], x[1, 2] = 40, 2
    >>> r = ireduct(x, 1e9, rng=0)
    >>> bool(np.allclose(r.details["noisy_marginals"][(0, 1)], x)), round(sum(r.budget.values()), 6)
    (True, 1000000000.0)
    """
    caller = "ireduct"
    eps = check_epsilon(epsilon, caller)
    R = g.check_work(rounds, name="rounds", caller=caller, per_item=g.ITERATION_OPS, item="rounds",
                     remedy="Use fewer rounds: each adds a fresh, independent measurement of every marginal.")
    gamma = check_fraction(first_share, "first_share", caller)
    frac = check_fraction(sanity, "sanity", caller)
    shape, marg = _check_data(data, domain, caller)
    Ms = check_marginals(by_index(marginals, domain, caller), len(shape), (1, 2), caller)
    src = noise_source(noise, rng, caller)
    shares = [] if R == 1 else [gamma * eps] + [(1.0 - gamma) * eps / (R - 1)] * (R - 2)
    shares.append(eps - math.fsum(shares))  # the last round takes the remainder: the shares sum to ε
    laplace_scale(float(len(Ms)), min(shares), "a round", caller)

    marg.prefetch(Ms)
    true = {M: np.asarray(marg(M), dtype=np.float64) for M in Ms}
    check_release_histogram(src, true[Ms[0]].sum(), caller, "data")  # whole counts: the total decides
    prec = dict.fromkeys(Ms, 0.0)  # Σ_r w_M² (one scale per marginal and round)
    acc = {M: np.zeros(true[M].shape) for M in Ms}  # Σ_r w_M² y_M
    history, delta = [], None
    for r, eps_r in enumerate(shares):
        if r == 0:
            weight = dict.fromkeys(Ms, 1.0)
        else:
            est = {M: acc[M] / prec[M] for M in Ms}
            delta = max(1.0, frac * _total(est, {M: 2.0 / prec[M] for M in Ms}))
            # a cell is never taken as smaller than its own noise: below it, ŷ says nothing about its size
            weight = {M: math.sqrt(float((1.0 / np.maximum(est[M], max(delta, math.sqrt(2.0 / prec[M])))).sum()))
                      for M in Ms}
        c = eps_r / math.fsum(weight.values()) * _SAFE  # GS = Σ_M c·weight_M = ε_r
        scales = {M: laplace_scale(1.0, c * weight[M], f"marginal {M}", caller) for M in Ms}
        y = {}
        for M in Ms:
            y[M] = src.add_laplace(true[M], scales[M])
            prec[M] += scales[M] ** -2.0
            acc[M] += scales[M] ** -2.0 * y[M]
        history.append({"noisy": y, "scales": scales})
    noisy = {M: acc[M] / prec[M] for M in Ms}
    var = {M: 2.0 / prec[M] for M in Ms}
    t_hat = _total(noisy, var)
    estimate, fit = fit_marginals(noisy, {M: np.full(true[M].shape, 1.0 / var[M]) for M in Ms}, shape,
                                  max(t_hat, 0.0))
    details = {"marginals": Ms, "noisy_marginals": noisy, "variances": var, "rounds": history,
               "noisy_total": t_hat, "sanity_bound": delta, "fit": fit}
    budget = {f"round_{r + 1}": s for r, s in enumerate(shares)}
    return finish("ireduct", estimate, eps, budget, details, src)
