"""DAWA's exponential rule in float64: sampling partitions ∝ Π_B exp(logw_B), and what its rounding costs in ε.

:func:`sample` draws a partition of cells [0, n) into candidate buckets with probability ∝ exp(Σ_B logw_B) by a
forward pass of log-partition sums logz_e and a backward pass of draws (``Noise.gumbel_max``, exact for the float
logits it is given). In exact arithmetic the backward steps' probabilities telescope to exp(Σ logw_B)/Z; in float64
they do not, and the privacy loss of what is really sampled is bounded and charged here (:func:`draw_epsilon`).

Computation. logz_e is kept as an unevaluated sum zh_e + zl_e of two floats. At a cell boundary e with candidate
starts s_j = e − L_j (j < K), the logits a_j = zh_{s_j} + zl_{s_j} + W_j (W = logw) are formed as H_j + l_j by an
error-free two-sum (H_j, lo_j) = TwoSum(zh_{s_j}, W_j) and l_j = fl(lo_j + zl_{s_j}); forward, with top = max H_j,
d̂_j = fl(fl(H_j − top) + l_j), r̂ = log(fl(Σ exp d̂_j)) and (zh_e, zl_e) = TwoSum(top, r̂), so logz_e = top + r̂
exactly; backward, the sampler gets ĉ_j = fl(fl(H_j − zh_e) + fl(l_j − zl_e)) ≈ a_j − logz_e, the step's log
conditional probabilities (small near the likely choices). The former single-float logz_e, of magnitude up to
n·(ln K + βc), rounded by u·|logz_e| at each step; the backward logits logz_s + W rounded by u·|W| ~ u·εN.

Claim. Let u = 2⁻⁵³, logw = fl(−β̂·fl(dev + p)) with β̂ = fl(ε_d/(2Δ)), p ≥ 0 the penalty, dev ≥ 0 the computed
deviations (:mod:`mmopt.adaptive.partition`: |dev_x(B) − dev_x'(B)| ≤ Δ for the bucket B containing the
neighbours' cell, equal otherwise, Σ_B dev_B ≤ 2N(1 + u) on a partition, N = MAX_RECORDS). Assume (as
:mod:`mmopt.adaptive.privbayes` does for log; not a proof: neither libm's log nor numpy's exp is correctly rounded)
that ``np.exp`` is within 4 ulp (or 4·2⁻¹⁰⁷⁴ where subnormal) and ``math.log`` within 4 ulp. Then the sampled law
is (2λ + 4α)-DP, :func:`loss_bound`, with
λ = β̂·(Δ + (2u + u²)(4N(1 + u) + 2p)) and α = [n(η(1 + ρ) + τ + ζ) + ρ(β̂(1 + u)³(2N + n p) + n ln 2)]/(1 − ρ),
ρ = 2.02u, η = u(2K + 9 + 9 ln K) + K·2⁻¹⁰⁶⁹, τ = 2.02u·η + 6uσ, ζ = 1.01K(0.744u + τ), σ = 5uZ + 2u(ln K + 1),
Z = n(ln K + 1.001β̂p + 1) (a bound on |logz_e|; σ ≤ 10⁻³ is required).

Proof. (i) Gibbs over the float logw: only the bucket containing the cell moves, by
|β̂(d + p)(1 + θ) − β̂(d' + p)(1 + θ')| ≤ λ (|θ|, |θ'| ≤ 2u + u²), so numerator and normaliser each move by ≤ λ.
(ii) Forward: the two-sums are exact and |l_j| ≤ 1.001u|H_j − top| + 3.01uZ, so |d̂_j − (a_j − top)| ≤
2.02u|H_j − top| + 2uσ; these offsets, weighted by the softmax (≤ e^{−|d̂_j|+2σ}), move log Σ exp by ≤ 0.75Ku; the
exps (8u), the sum ((K − 1)u) and the log (8u·|log ŝ| ≤ 8u(ln K + 0.01)) add the rest of
η ≥ |logz_e − Λ_e|, Λ_e = log Σ_j exp a_j. Induction over e (the singleton candidate has W = fl(−β̂·p)) gives
|logz_e| ≤ Z. (iii) Backward: c_j = a_j − logz_e = q_j − η_e with q_j = a_j − Λ_e ≤ 0, and |ĉ_j − c_j| ≤
2.01u|ĉ_j| + 5uσ, hence ≤ ρ|q_j| + τ; the sampler's log-normaliser log Σ exp ĉ_j is −η_e + ζ_e, |ζ_e| ≤ ζ (the
errors weighted by e^{q_j}; max_y y e^{−y} = 1/e). So ln P̂(P) = Σ_B logw_B − logz_n + A(P), the sum over P's k ≤ n
steps A(P) = Σ_t (η_{e_t} + ξ_t − ζ_t), and Σ_t |q_t| = −Σ_B logw_B + logz_n − Σ_t η_{e_t} with
−Σ logw_B ≤ β̂(1 + u)³(2N + n p) and logz_n ≤ (n − 1) ln 2 + max|A| (P̂ sums to one over ≤ 2ⁿ⁻¹ partitions, logw ≤ 0):
|A(P)| ≤ α. (iv) P̂_x(P) = exp(S_x(P) + A_x(P))/Σ_Q exp(S_x(Q) + A_x(Q)) with S = Σ_B logw_B, so
|ln P̂_x(P) − ln P̂_x'(P)| ≤ (λ + 2α) + (λ + 2α).

Charge. The bound is affine in ε_d: B(ε_d) = A₀ + R·ε_d. On the release path the logits are built at
ε_d = (ε/(1 + 2⁻³⁰) − A₀)/R, rounded down (so B(ε_d) ≤ ε), and refused when that is below half the budget (tiny
ε: A₀ ≈ 4nu(2.75K + 9 lnK + 10), 1.3·10⁻¹⁰ at n = 4,096 dyadic); R − 1 ≈ 16uN/Δ, 7.6·10⁻⁶/Δ at N = 2³².
Simulation (numpy) builds them at ε itself. Measured (exact law of every partition, mpmath at 60 digits, n ≤ 32,
2³² records): the former sampler (one float logz_e, logits logz_s + W, no charge) moved by up to 1 + 1.1·10⁻⁷ of ε
between adversarial neighbours, these logits uncharged by 1 + 1.6·10⁻⁷ (the rounding of logw itself, λ), and
charged by at most 1 − 5.0·10⁻⁶ (Δ = 1.5; tests/test_adaptive_gibbs.py). At n = 4,096 and ε·c = 10³ the former
law was 4.8·10⁻⁵·ε from the Gibbs law of its own logw (in log-probability), this one 6.5·10⁻⁸·ε. Cost: DAWA at
n = 4,096 takes 0.155 CPU s (was 0.13).
"""

from __future__ import annotations

import math

import numpy as np

from mmopt.adaptive._noise import Noise
from mmopt.dense.exact_answers import MAX_RECORDS, UNIT_ROUNDOFF, two_sum

__all__ = ["draw_epsilon", "log_partition", "loss_bound", "sample", "step_logits"]


def loss_bound(eps_draw: float, n: int, n_lengths: int, sensitivity: float, penalty: float,
               records: float = MAX_RECORDS) -> float:
    """2λ + 4α: the privacy loss of :func:`sample` on logits built at ``eps_draw`` (module docstring); inf when
    its premise σ ≤ 10⁻³ fails.

    >>> 1 < loss_bound(1.0, 4096, 13, 2.0, 5.0) < 1 + 1e-5
    True
    """
    u, K, N, p = UNIT_ROUNDOFF, float(n_lengths), float(records), float(penalty)
    beta = eps_draw * (1.0 + u) / (2.0 * sensitivity)  # ≥ fl(ε_d/(2Δ))
    Z = n * (math.log(K) + 1.001 * beta * p + 1.0)
    sigma = 5.0 * u * Z + 2.0 * u * (math.log(K) + 1.0)
    if not sigma <= 1e-3:
        return math.inf
    rho = 2.02 * u
    eta = u * (2.0 * K + 9.0 + 9.0 * math.log(K)) + K * 2.0**-1069
    tau = 2.02 * u * eta + 6.0 * u * sigma
    zeta = 1.01 * K * (0.744 * u + tau)
    alpha = (n * (eta * (1.0 + rho) + tau + zeta)
             + rho * (beta * (1.0 + u)**3 * (2.0 * N + n * p) + n * math.log(2.0))) / (1.0 - rho)
    lam = beta * (sensitivity + (2.0 * u + u * u) * (4.0 * N * (1.0 + u) + 2.0 * p))
    return 2.0 * lam + 4.0 * alpha


def draw_epsilon(noise: Noise, epsilon: float, n: int, n_lengths: int, sensitivity: float, penalty: float,
                 caller: str = "private_partition") -> float:
    """The ε_d the logits are built at: ε on the simulation path; on the release path the largest with
    :func:`loss_bound` ≤ ``noise.draw_epsilon(epsilon)`` (rounded down), refused below half of it.

    >>> from mmopt.adaptive._noise import resolve_noise
    >>> draw_epsilon(resolve_noise("numpy", 0, caller="example"), 1.0, 4096, 13, 2.0, 5.0)
    1.0
    >>> 0 < 1 - draw_epsilon(Noise("opendp"), 1.0, 4096, 13, 2.0, 5.0) < 1e-5
    True
    """
    if not noise.vetted:
        return float(epsilon)
    avail = noise.draw_epsilon(epsilon)
    a0 = loss_bound(0.0, n, n_lengths, sensitivity, penalty)
    slope = loss_bound(1.0, n, n_lengths, sensitivity, penalty) - a0
    eps_d = (avail - a0) / slope * (1.0 - 2.0**-40)
    if not (eps_d >= 0.5 * avail and loss_bound(eps_d, n, n_lengths, sensitivity, penalty) <= avail):
        raise ValueError(f"{caller}: at epsilon={epsilon!r} the float64 rounding of the exponential rule's sampler "
                         f"over {n:,} cells would cost more than half the budget (mmopt.adaptive.gibbs), or its "
                         "penalty times epsilon is too large for the bound. Use a larger 'epsilon', fewer cells "
                         "or a smaller 'bucket_penalty', or selection='noisy_cost' (exact integer arithmetic; "
                         "mmopt.adaptive.partition).")
    return eps_d


def _candidates(e: int, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    k = int(np.searchsorted(lengths, e, side="right"))  # candidate lengths <= e
    return e - lengths[:k], np.arange(k)


def _logits(zh: np.ndarray, zl: np.ndarray, logw: np.ndarray, starts: np.ndarray,
            cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(H, l) with H + l = zh[s] + zl[s] + logw[s, k] up to u·|l| (H, lo a two-sum; l = lo + zl[s] rounded)."""
    h, lo = two_sum(zh[starts], logw[starts, cols])
    return h, lo + zl[starts]


def log_partition(logw: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(zh, zl): logz_e = zh[e] + zl[e] ≈ log Σ over partitions of [0, e) of exp(Σ_B logw_B), each step within η
    of the log-sum-exp of its own logits (module docstring); logz_0 = 0."""
    n = logw.shape[0]
    zh, zl = np.zeros(n + 1), np.zeros(n + 1)
    for e in range(1, n + 1):
        h, lo = _logits(zh, zl, logw, *_candidates(e, lengths))
        top = float(h.max())
        zh[e], zl[e] = two_sum(top, math.log(float(np.exp((h - top) + lo).sum())))
    return zh, zl


def step_logits(logw: np.ndarray, lengths: np.ndarray, zh: np.ndarray, zl: np.ndarray,
                e: int) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ĉ): the candidate starts of the final bucket of [0, e) and the logits handed to the sampler,
    ĉ_j ≈ logz_{s_j} + logw[s_j, j] − logz_e."""
    starts, cols = _candidates(e, lengths)
    h, lo = _logits(zh, zl, logw, starts, cols)
    return starts, (h - zh[e]) + (lo - zl[e])


def sample(logw: np.ndarray, lengths: np.ndarray, noise: Noise) -> np.ndarray:
    """last[e] = the length of the final bucket of [0, e) on the drawn chain from n (other entries 0): a partition
    drawn with probability ∝ Π_B exp(logw_B), up to the rounding bounded in the module docstring."""
    n = logw.shape[0]
    zh, zl = log_partition(logw, lengths)
    last = np.zeros(n + 1, dtype=np.int64)
    e = n
    while e > 0:  # Pr[final bucket has length L | cells [0, e)] = Z[e−L]·w[e−L, L] / Z[e]
        starts, c = step_logits(logw, lengths, zh, zl, e)
        last[e] = e - int(starts[noise.gumbel_max(c)])
        e = e - int(last[e])
    return last
