"""mmopt.toeplitz.release (issue 31): prefix sums and all ranges released through a Toeplitz strategy at any n,
against dense exact inversion; workload.prefix(n) / all_range(n) become the stream workloads past the dense
limit, and evaluate(workload.prefix(2**16), optimize(...).strategy) works."""

import numpy as np
import pytest

import mmopt
from mmopt import toeplitz, workload
from mmopt.dense.exact_answers import RELATIVE_CHARGE

pytest.importorskip("opendp")
GAUSS = mmopt.Privacy(1.0, 1e-6)


@pytest.mark.parametrize("kind", ["prefix", "all_range"])
@pytest.mark.parametrize("strategy", [toeplitz.sqrt_strategy(48), toeplitz.equalized(toeplitz.sqrt_strategy(48)),
                                      toeplitz.blt([0.5, 0.2], [0.9, 0.5], 48)])
def test_release_is_exact_inversion(kind, strategy):
    W = getattr(toeplitz, kind)(48)
    x = np.random.default_rng(0).integers(0, 9, 48).astype(float)
    for privacy in (GAUSS, mmopt.Privacy(0.5)):
        out = mmopt.release(W, strategy, x, privacy)
        C = strategy.to_dense()
        np.testing.assert_allclose(out.estimate, np.linalg.solve(C, out.measurements), rtol=1e-9, atol=1e-9)
        Wd = getattr(workload, kind)(48).explicit_matrix()
        np.testing.assert_allclose(out.answers, Wd @ out.estimate, rtol=1e-9, atol=1e-8)
        norm = privacy.sensitivity_norm
        # rounded up (1e-7) and the answers' rounding charged (RELATIVE_CHARGE = 9.5e-7 at 2³² records)
        assert strategy.sensitivity(norm) * (1 + RELATIVE_CHARGE) <= out.sensitivity
        assert out.sensitivity <= strategy.sensitivity(norm) * (1 + RELATIVE_CHARGE + 2e-7)
        assert out.path == "release" and out.noise_scale >= privacy.noise_scale(strategy.sensitivity(norm)) * (1 - 1e-9)


def test_workload_constructors_switch_to_streams_past_the_dense_limit():
    n = workload.STREAM_FROM
    assert isinstance(workload.prefix(n - 1), mmopt.Workload)
    assert isinstance(workload.prefix(n), toeplitz.StreamWorkload)
    assert isinstance(workload.all_range(n), toeplitz.StreamWorkload)
    W = workload.prefix(2**16)
    res = mmopt.optimize(W, privacy=GAUSS, seed=0, verbose=False)
    r = mmopt.evaluate(W, res.strategy, GAUSS)
    assert r.total_squared_error == pytest.approx(res.objective * GAUSS.variance_factor, rel=1e-9)
    assert r.total_squared_error >= mmopt.svd_bound(W, GAUSS) * (1 - 1e-12)


@pytest.mark.parametrize("kind", ["prefix", "all_range"])
def test_the_weighted_square_root_is_released_by_sine_transforms(kind):
    """What optimize returns under Gaussian noise at large n is released as it is: A x and A⁻¹y in O(n log n),
    against the dense A at n = 40; at n = 2¹⁶ the answers' error matches the evaluated total."""
    W = getattr(toeplitz, kind)(40)
    S = toeplitz.weighted_sqrt(W)
    x = np.random.default_rng(1).integers(0, 9, 40).astype(float)
    out = mmopt.release(W, S, x, GAUSS)
    A = S.to_dense()
    np.testing.assert_allclose(out.estimate, np.linalg.solve(A, out.measurements), rtol=1e-9, atol=1e-9)
    assert out.sensitivity == pytest.approx(1.0, rel=1e-6) and out.reconstruction.solver == "sine-transform"
    with pytest.raises(ValueError, match="released with Gaussian noise"):
        mmopt.release(W, S, x, mmopt.Privacy(1.0))


def test_past_the_dense_limit_optimize_then_release_works():
    n = 2**14  # a stream workload (OpenDP's exact Gaussian sampler takes ~0.7 s for these 16,384 draws)
    W = workload.prefix(n)
    res = mmopt.optimize(W, privacy=GAUSS, seed=0, verbose=False)
    x = np.random.default_rng(2).integers(0, 9, n).astype(float)
    outs = [mmopt.release(W, res.strategy, x, GAUSS) for _ in range(4)]
    measured = np.mean([np.sum((o.answers - np.cumsum(x)) ** 2) for o in outs])
    # against the total predicted at OpenDP's σ (evaluate's is at the analytic σ): a total of correlated answers
    # has sd ≤ √2·mean, so the mean of 4 draws lies within these limits unless something is wrong by a factor
    predicted = res.objective * outs[0].noise_scale**2
    assert 0.05 < measured / predicted < 4.0


def test_a_numerically_singular_strategy_is_refused_before_any_noise():
    """banded([1, 2]) has C⁻¹ growing like 2^t: release drew the noise and returned 2,000 NaN answers, and
    offline_decode passed NaN measurements through. Both refuse now, release before the draw."""
    from mmopt._base import opendp as _opendp
    from mmopt.toeplitz.streaming import offline_decode
    C = toeplitz.banded([1.0, 2.0], 2000)
    draws = _opendp.DRAWS
    with pytest.raises(ValueError, match="release: the strategy 'banded.*overflow"):
        mmopt.release(toeplitz.prefix(2000), C, np.ones(2000), mmopt.Privacy(1.0, 1e-6))
    assert _opendp.DRAWS == draws  # refused before any draw
    with pytest.raises(ValueError, match="offline_decode: the strategy .* overflow"):
        offline_decode(C, np.ones(2000))
    with pytest.raises(ValueError, match="'measurements' parameter of offline_decode must be finite"):
        offline_decode(toeplitz.banded([1.0, 0.5], 3), [1.0, np.nan, 0.0])


def test_refusals_name_what_works():
    small = mmopt.release(toeplitz.prefix(8), mmopt.strategy.hierarchical(8), np.ones(8), GAUSS)  # its dense twin
    assert small.answers.shape == (8,)
    H = mmopt.strategy.hierarchical(8192)
    with pytest.raises(TypeError, match="must be a ToeplitzStrategy for a workload of prefix"):
        mmopt.release(toeplitz.prefix(8192), H, np.ones(8192), GAUSS)
    with pytest.raises(ValueError, match="'reconstruct' parameter of release must be 'least_squares'"):
        mmopt.release(toeplitz.prefix(8), toeplitz.sqrt_strategy(8), np.ones(8), GAUSS, reconstruct="nnls")
    with pytest.raises(ValueError, match="must hold counts >= 0"):
        mmopt.release(toeplitz.prefix(8), toeplitz.sqrt_strategy(8), -np.ones(8), GAUSS)


def test_all_range_answers_peak_at_their_own_size():
    """The gate counts the n(n+1)/2 answers, but np.triu_indices' two int64 index arrays and the gathered s[j+1],
    s[i] made the peak 4× that (n = 15,000: 3.6 GB past a 0.9 GB gate). Row by row into the output now; the answers
    are the old formula's, bit for bit (the same subtraction s[j+1] − s[i])."""
    import tracemalloc
    n = 3000
    size = 8 * n * (n + 1) // 2
    x = np.random.default_rng(3).integers(0, 9, n).astype(float)
    mmopt.release(toeplitz.all_range(8), toeplitz.sqrt_strategy(8), x[:8], GAUSS)  # first-call imports: ~16 MB
    tracemalloc.start()
    try:
        out = mmopt.release(toeplitz.all_range(n), toeplitz.sqrt_strategy(n), x, GAUSS)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.answers.nbytes == size and peak < 1.3 * size
    s = np.concatenate([[0.0], np.cumsum(out.estimate)])
    i, j = np.triu_indices(n)
    np.testing.assert_array_equal(out.answers, s[j + 1] - s[i])


@pytest.mark.parametrize("kind", ["prefix", "all_range"])
def test_epsilon_dp_refusals_name_routes_that_run(kind):
    """Both refusals pointed ε-DP users to method='blt', which optimises the Gaussian objective and refuses δ = 0,
    then to the Toeplitz square root (far from optimal under Laplace noise). They name the tree strategy now, what
    optimize returns under ε-DP at large n; the named call runs under Privacy(ε)."""
    from mmopt.toeplitz.release import release
    n, eps = 40, mmopt.Privacy(1.0)
    W, x = getattr(toeplitz, kind)(n), np.ones(n)
    with pytest.raises(ValueError, match="released with Gaussian noise") as weighted:
        mmopt.release(W, toeplitz.weighted_sqrt(W), x, eps)
    with pytest.raises(TypeError, match="must be a ToeplitzStrategy") as dense:
        release(W, mmopt.strategy.identity(n), x, eps)
    for err in (weighted, dense):
        msg = str(err.value)
        assert "blt" not in msg and f"mmopt.toeplitz.tree({n})" in msg
    with pytest.raises(ValueError, match="optimises the"):  # why blt is no remedy
        mmopt.optimize(W, privacy=eps, method="blt")
    assert mmopt.release(W, toeplitz.tree(n), x, eps).noise == "laplace"
    dense_w = getattr(workload, kind)(n)
    res = mmopt.optimize(dense_w, privacy=eps, verbose=False)
    assert mmopt.release(dense_w, res.strategy, x, eps).noise == "laplace"
