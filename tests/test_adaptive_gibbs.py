"""DAWA's exponential rule in float64: the exact law of what is sampled (every backward step's softmax of its float
logits, in mpmath at 60 digits; every partition by dynamic programming), its loss between neighbours at 2³² records,
the forward pass's per-step error η, and the charge."""

import dataclasses
import math

import mpmath as mp
import numpy as np
import pytest
from _float_neighbours import Recorder, recorder

from mmopt.adaptive import gibbs, private_partition
from mmopt.adaptive._noise import Noise, resolve_noise
from mmopt.adaptive.partition import candidate_lengths, deviations, length_sensitivities
from mmopt.dense.exact_answers import MAX_RECORDS

U = 2.0**-53


def _release_logw(x, eps, c, lengths, charged=True):
    """The logits' weights exactly as private_partition builds them on the release path (entropy correction on)."""
    delta = float(np.max(length_sensitivities(lengths)))
    pen = c + (2.0 * delta / eps) * np.log(lengths.size)
    noise = Noise("opendp")
    eps_d = (gibbs.draw_epsilon(noise, eps, len(x), lengths.size, delta, float(pen)) if charged
             else noise.draw_epsilon(eps))  # the latter: the sampler without the charge (its former logits)
    return -(eps_d / (2.0 * delta)) * (deviations(x, lengths) + pen)


def _log_law(logw, lengths):
    """{e: [(start, ln Pr[final bucket of [0, e) starts there])]}: exact softmax of the float logits handed over."""
    zh, zl = gibbs.log_partition(logw, lengths)
    out = {}
    for e in range(1, logw.shape[0] + 1):
        starts, c = gibbs.step_logits(logw, lengths, zh, zl, e)
        v = [mp.mpf(float(t)) for t in c]
        lse = max(v) + mp.log(mp.fsum(mp.exp(t - max(v)) for t in v))
        out[e] = [(int(s), t - lse) for s, t in zip(starts, v, strict=True)]
    return out


def _worst_loss(law_a, law_b, n):
    """max over partitions of |ln P̂_a(P) − ln P̂_b(P)| (longest and shortest path sums over the backward steps)."""
    hi, lo = {0: mp.mpf(0)}, {0: mp.mpf(0)}
    for e in range(1, n + 1):
        d = [(a[1] - b[1], a[0]) for a, b in zip(law_a[e], law_b[e], strict=True)]
        hi[e], lo[e] = max(v + hi[s] for v, s in d), min(v + lo[s] for v, s in d)
    return max(hi[n], -lo[n])


def _adversarial(n, M):
    """x = (0, 0, 0, M, M+1, M+1, M+1, 0, …), x' = x + e₃, buckets of at most 4 cells: adding the record raises the
    deviation of [0, 4) by Δ = 1.5 and lowers that of [3, 7) by Δ, which (large penalty) holds nearly all the mass,
    so the exact loss of P ∋ [0, 4) is ε(1 − 10⁻⁹); its logits are ~ −εM, whose rounding the charge covers."""
    x = np.zeros(n)
    x[3], x[4:7] = M, M + 1
    xp = x.copy()
    xp[3] += 1
    return x, xp


@mp.workdps(60)
def _measured(candidates, charged, trials=12, n=8, seed=0):
    rng = np.random.default_rng(seed)
    lengths = candidate_lengths(n, candidates, 4)
    worst = 0.0
    for _ in range(trials):
        eps, M = float(10 ** rng.uniform(-1, 1)), int(rng.integers(2**29, 2**30 - 2))
        x, xp = _adversarial(n, M)
        la, lb = (_log_law(_release_logw(z, eps, 60.0 / eps, lengths, charged), lengths) for z in (x, xp))
        worst = max(worst, float(_worst_loss(la, lb, n) / eps))
    return worst


@pytest.mark.parametrize("candidates", ["dyadic", "all"])
def test_the_sampled_law_moves_by_at_most_epsilon_between_neighbours_at_2_32_records(candidates):
    worst = _measured(candidates, charged=True)
    assert 1 - 1e-5 < worst <= 1  # measured 1 − 5.0·10⁻⁶ (the charge, 7.6·10⁻⁶/Δ, Δ = 1.5)


def test_without_the_charge_the_same_neighbours_exceed_epsilon():
    """Why the charge: the logits' own rounding (λ) moves the law by up to 1 + 1.6·10⁻⁷ of ε (the former sampler's
    single-float log-partition: 1 + 1.1·10⁻⁷, measured by the same construction)."""
    assert _measured("dyadic", charged=False, trials=40, seed=1) > 1 + 1e-8


@mp.workdps(60)
def test_every_forward_step_is_within_eta_of_its_log_sum_exp():
    """|zh_e + zl_e − log Σ_j exp a_j| ≤ η for the exact logits a_j = zh_s + zl_s + logw (a single float logz_e of
    magnitude ~ n(ln K + βc) missed it by u·|logz_e| ≫ η)."""
    n = 1024
    rng = np.random.default_rng(2)
    x = rng.multinomial(2**32 - 1, rng.dirichlet(np.full(n, 0.3))).astype(float)
    lengths = candidate_lengths(n, "dyadic", n)
    logw = _release_logw(x, 1.0, 20.0, lengths)
    zh, zl = gibbs.log_partition(logw, lengths)
    K = lengths.size
    eta = U * (2 * K + 9 + 9 * math.log(K))
    worst = 0.0
    for e in range(1, n + 1):
        a = [mp.mpf(float(zh[e - L])) + mp.mpf(float(zl[e - L])) + mp.mpf(float(logw[e - L, j]))
             for j, L in enumerate(lengths.tolist()) if L <= e]
        exact = max(a) + mp.log(mp.fsum(mp.exp(t - max(a)) for t in a))
        worst = max(worst, float(abs(mp.mpf(float(zh[e])) + mp.mpf(float(zl[e])) - exact)) / eta)
    assert abs(zh[n]) > 5000 and worst <= 1  # measured 0.016 of η (a single float: u·|logz_e| ~ 60η)


def test_the_charge_is_the_documented_bound():
    n, K, delta, pen = 4096, 13, 2.0, 5.0
    odp = Noise("opendp")
    eps_d = gibbs.draw_epsilon(odp, 1.0, n, K, delta, pen)
    assert gibbs.loss_bound(eps_d, n, K, delta, pen) <= odp.draw_epsilon(1.0)
    assert gibbs.loss_bound(eps_d * (1 + 1e-9), n, K, delta, pen) > odp.draw_epsilon(1.0)  # the largest such
    assert 1 - eps_d == pytest.approx(16 * U * MAX_RECORDS / delta, rel=0.02)  # R − 1 ≈ 16uN/Δ
    assert 1e-10 < gibbs.loss_bound(0.0, n, K, delta, pen) < 2e-10  # A₀, the tiny-ε floor
    assert gibbs.draw_epsilon(resolve_noise("numpy", 0, caller="t"), 1.0, n, K, delta, pen) == 1.0  # simulation
    with pytest.raises(ValueError, match="more than half the budget"):
        gibbs.draw_epsilon(odp, 1e-10, n, K, delta, 2.0 * delta / 1e-10 * math.log(K))


@dataclasses.dataclass(frozen=True, eq=False)
class _Logits(Recorder):
    def gumbel_max(self, logits):
        self.log.append(("gumbel", np.array(logits, dtype=float, copy=True)))
        return int(np.argmax(logits))


def test_the_release_path_hands_the_sampler_the_charged_logits():
    x = np.random.default_rng(3).integers(0, 50, 24).astype(float)
    A = _Logits(*dataclasses.astuple(recorder()))
    p = private_partition(x, 0.7, bucket_penalty=2.0, noise=A)
    lengths = candidate_lengths(24, "dyadic", 24)
    logw = _release_logw(x, 0.7, 2.0, lengths)
    zh, zl = gibbs.log_partition(logw, lengths)
    stops = [24] + p.bounds[::-1, 0].tolist()[:-1]
    assert len(A.log) == p.n_buckets
    for e, (_, c) in zip(stops, A.log, strict=True):
        assert np.array_equal(c, gibbs.step_logits(logw, lengths, zh, zl, e)[1])
    with pytest.raises(ValueError, match="more than half the budget"):
        private_partition(np.ones(4096), 1e-12, bucket_penalty=1.0, noise=recorder())
    assert private_partition(np.ones(4096), 1e-12, bucket_penalty=1.0, rng=0).n_buckets >= 1  # simulation: ε itself
