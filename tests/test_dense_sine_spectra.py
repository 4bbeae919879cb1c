"""mmopt.dense.sine_spectra: the closed-form eigenpairs of the prefix and all-range Grams against LAPACK's eigh,
and evaluate through them against evaluate through eigh on the same Gram."""

import numpy as np
import pytest

import mmopt
from mmopt.dense.profile import workload_spectrum
from mmopt.dense.sine_spectra import sine_spectrum


@pytest.mark.parametrize("family", ["prefix", "all_range"])
@pytest.mark.parametrize("n", [1, 2, 3, 17, 256])
def test_the_sines_diagonalise_the_gram(family, n):
    W = getattr(mmopt.workload, family)(n)
    G = W.mean_gram * W.n_queries  # exact integers
    lam, Q = sine_spectrum(family, n)
    assert np.all(np.diff(lam) <= 0) and lam[-1] > 0
    # orthonormal and reconstructing G to round-off (n·eps of ‖G‖ for the sum of n rank-one terms)
    assert np.abs(Q.T @ Q - np.eye(n)).max() <= 8 * n * np.finfo(float).eps
    assert np.abs((Q * lam) @ Q.T - G).max() <= 8 * n * np.finfo(float).eps * np.abs(G).max()
    # eigh agrees to its own accuracy, eps·λ_max; each eigenvector is G's: G q = λ q to a few ulps relative
    assert np.abs(np.linalg.eigvalsh(G)[::-1] - lam).max() <= 8 * n * np.finfo(float).eps * lam[0]
    assert np.abs(G @ Q - Q * lam).max() <= 8 * n * np.finfo(float).eps * lam[0]


@pytest.mark.parametrize("family", ["prefix", "all_range"])
def test_evaluate_through_the_sines_matches_evaluate_through_eigh(family):
    n = 128
    W = getattr(mmopt.workload, family)(n)
    twin = mmopt.workload.Workload.from_gram(W.mean_gram * W.n_queries, n_queries=W.n_queries)  # eigh's path
    assert workload_spectrum(W).rank == workload_spectrum(twin).rank == n
    for A in (mmopt.strategy.hierarchical(n), mmopt.strategy.identity(n), mmopt.strategy.wavelet(n)):
        for privacy in (mmopt.Privacy(1.0), mmopt.Privacy(1.0, 1e-6)):
            ours, theirs = mmopt.evaluate(W, A, privacy), mmopt.evaluate(twin, A, privacy)
            assert ours.total_squared_error == pytest.approx(theirs.total_squared_error, rel=1e-11)
    # the SVD bound (Σ √λ)²/n: the sines resolve the small eigenvalues eigh rounds at eps·λ_max
    assert mmopt.svd_bound(W) == pytest.approx(mmopt.svd_bound(twin), rel=1e-11)


def test_an_unknown_family_is_refused():
    with pytest.raises(ValueError, match="'family' parameter of sine_spectrum"):
        sine_spectrum("identity", 4)
