"""mmopt.toeplitz.release (issue 31): prefix sums and all ranges released through a Toeplitz strategy at any n,
against dense exact inversion; workload.prefix(n) / all_range(n) become the stream workloads past the dense
limit, and evaluate(workload.prefix(2**16), optimize(...).strategy) works."""

import numpy as np
import pytest

import mmopt
from mmopt import toeplitz, workload

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
        assert strategy.sensitivity(norm) <= out.sensitivity <= strategy.sensitivity(norm) * (1 + 1e-6)  # rounded up
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


def test_refusals_name_what_works():
    W = workload.prefix(2**16)
    weighted = mmopt.optimize(W, privacy=GAUSS, method="weighted_sqrt").strategy
    with pytest.raises(TypeError, match="method='blt'"):
        mmopt.release(W, weighted, np.ones(2**16), GAUSS)
    with pytest.raises(ValueError, match="'reconstruct' parameter of release must be 'least_squares'"):
        mmopt.release(toeplitz.prefix(8), toeplitz.sqrt_strategy(8), np.ones(8), GAUSS, reconstruct="nnls")
    with pytest.raises(ValueError, match="must hold counts >= 0"):
        mmopt.release(toeplitz.prefix(8), toeplitz.sqrt_strategy(8), -np.ones(8), GAUSS)
