"""mmopt.toeplitz.bound: the closed-form SVD of the prefix matrix and the certified bounds, against dense oracles."""

import numpy as np
import pytest

import mmopt
from mmopt import toeplitz as T
from mmopt.toeplitz import bound


@pytest.mark.parametrize("n", [1, 2, 7, 50])
def test_singular_values_match_numpy(n):
    W = np.tril(np.ones((n, n)))
    np.testing.assert_allclose(T.prefix_singular_values(n), np.linalg.svd(W, compute_uv=False), rtol=1e-12)


@pytest.mark.parametrize("n", [1, 5, 64, 300])
def test_svd_bound_matches_mmopt(n):
    assert T.svd_bound(n) == pytest.approx(mmopt.svd_bound(mmopt.workload.prefix(n)), rel=1e-12)


@pytest.mark.parametrize("n", [1, 3, 60, 257])
def test_gram_sqrt_diagonal_matches_eigendecomposition(n):
    W = np.tril(np.ones((n, n)))
    lam, V = np.linalg.eigh(W.T @ W)
    h = (V * np.sqrt(np.maximum(lam, 0))) @ V.T
    np.testing.assert_allclose(bound.gram_sqrt_diagonal(n), np.diag(h), rtol=1e-11)


@pytest.mark.parametrize("n", [16, 64, 256])
def test_bounds_are_below_the_certified_dense_optimum(n):
    b = T.prefix_bound(n)
    opt = mmopt.optimize(mmopt.workload.prefix(n), method="l2_approx")
    assert opt.status == "optimal"
    assert b.svd <= b.value < b.diagonal <= opt.objective
    # tight: the diagonal bound is within 0.41 % of the optimum at n = 256 (the SVD bound 4.3 %)
    assert opt.objective / b.diagonal < {16: 1.02, 64: 1.01, 256: 1.0042}[n]


def test_bound_at_large_n_and_its_rounding_allowance():
    n = 2**16
    b = T.prefix_bound(n)
    assert b.n == n and b.svd < b.value < b.diagonal
    assert (b.diagonal - b.value) / b.diagonal == pytest.approx(64 * np.finfo(float).eps * n)
    # no strategy may beat it: the square root is above it by its known margin
    r = T.evaluate(T.prefix(n), T.sqrt_strategy(n))
    assert 1.0 < r.total_squared_error / b.value < 1.09


def test_refusals():
    with pytest.raises(ValueError, match="'n' parameter of prefix_bound"):
        T.prefix_bound(0)
    with pytest.raises(TypeError, match="must be an integer"):
        T.prefix_singular_values(3.5)


@pytest.mark.parametrize("n", [1, 2, 9, 64])
def test_all_range_closed_forms_match_dense(n):
    W = mmopt.workload.all_range(n)
    lam, V = np.linalg.eigh(W.gram)
    np.testing.assert_allclose(np.sort(T.range_singular_values(n) ** 2), lam, rtol=1e-10, atol=1e-10)
    h = (V * np.sqrt(np.maximum(lam, 0))) @ V.T
    np.testing.assert_allclose(bound.gram_sqrt_diagonal(n, "all_range"), np.diag(h), rtol=1e-11)
    assert T.svd_bound(n, "all_range") == pytest.approx(mmopt.svd_bound(W), rel=1e-12)


@pytest.mark.parametrize("n", [16, 128])
def test_all_range_bound_is_below_and_close_to_the_dense_optimum(n):
    b = T.all_range_bound(n)
    opt = mmopt.optimize(mmopt.workload.all_range(n), method="l2_approx")
    assert opt.status == "optimal"
    # measured: the optimum is 1.0011× the diagonal bound at n = 16, 1.00044× at n = 128
    assert b.svd <= b.value < b.diagonal <= opt.objective < {16: 1.0012, 128: 1.0005}[n] * b.diagonal


def test_the_bounds_are_computed_once_per_size_and_input_is_still_checked():
    """auto and each candidate it scored recomputed the bound: three DFTs of length 2n + 1, 10 s each at n = 10⁷."""
    assert T.prefix_bound(301) is T.prefix_bound(301) and T.all_range_bound(301) is T.all_range_bound(301)
    assert T.prefix_bound(301).workload == "prefix" and T.all_range_bound(301).workload == "all_range"
    with pytest.raises(TypeError, match="'n' parameter of prefix_bound"):
        T.prefix_bound(301.0)  # equal to 301 as a key: refused before the cache


@pytest.mark.parametrize("kind", ["prefix", "all_range"])
def test_the_diagonal_is_a_running_sum_accurate_to_its_last_digits(kind):
    # h_i = c_n Σ_k σ_k (1 − cos(2θ_k i)) in 40-digit arithmetic, at the ends and the middle: the bound's allowance
    # is 64·n·u; the running sum keeps (n + 4)·u (measured: below 10⁻² of it). The FFT it replaced lost h_1 to
    # cancellation against Σσ (≈ n log n).
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    n = 3000
    if kind == "prefix":
        N = 2 * n + 1
        h = bound.gram_sqrt_diagonal(n)[::-1]  # rows 1..n of (W Wᵀ)^{1/2}
        theta = [(2 * k - 1) * mpmath.pi / N for k in range(1, n + 1)]
        sigma = [1 / (2 * mpmath.sin(t / 2)) for t in theta]
        c = mpmath.mpf(2) / N
    else:
        h = bound.gram_sqrt_diagonal(n, "all_range")
        theta = [k * mpmath.pi / (n + 1) for k in range(1, n + 1)]
        sigma = [mpmath.sqrt(n + 1) / (2 * mpmath.sin(t / 2)) for t in theta]
        c = mpmath.mpf(1) / (n + 1)
    for i in (1, 2, 1500, n):
        exact = float(c * mpmath.fsum(s * (1 - mpmath.cos(2 * t * i)) for s, t in zip(sigma, theta, strict=True)))
        assert abs(h[i - 1] - exact) <= (n + 4) * np.finfo(float).eps * exact


@pytest.mark.parametrize("kind", ["prefix", "all_range"])
@pytest.mark.parametrize("n", [1, 2, 3, 1000, 2003])  # 2n + 1 = 4007 is prime: the prefix DFT is a Bluestein one
def test_closed_form_sequences_match_their_defining_transform(kind, n):
    from mmopt.toeplitz import weighted
    closed, fft = weighted.spectral_sequence(kind, n, -0.5), weighted._fft_sequence(kind, n, -0.5)
    assert closed.shape == fft.shape == (2 * n + 2,)
    # the transform's round-off is u·log n relative to Σ_k σ_k^{±1} (≤ n log n): the scale of the comparison
    np.testing.assert_allclose(closed, fft, rtol=0, atol=1e-13 * np.abs(fft).max())
    # G^{1/2}'s diagonal (the weighted square root's column scale): a(0) − a(2i) of the defining transform at +1/2
    a = weighted._fft_sequence(kind, n, 0.5)
    frame = a[0] - a[2 * np.arange(1, n + 1)]
    h = bound.gram_sqrt_diagonal(n, kind)
    np.testing.assert_allclose(h[::-1] if kind == "prefix" else h, frame, rtol=0, atol=1e-13 * np.abs(a).max())
    j = np.array([1, 3, -5, 4 * n + 1, 4 * n + 3, 8 * n + 9])  # past D/2 and past D: the reductions' branches
    k = np.arange(1, n + 1)
    angles = (2 * k - 1) * np.pi / (2 * (2 * n + 1)) if kind == "prefix" else k * np.pi / (2 * (n + 1))
    direct = np.sin(np.outer(j, angles)).sum(axis=1)
    np.testing.assert_allclose(bound.sine_sums(kind, n, j), direct, rtol=1e-10, atol=1e-12 * n)


def test_svd_bound_names_itself_and_its_parameter():
    """n was checked only in the singular values' helpers, which named themselves (prefix_singular_values), and a
    workload (mmopt.svd_bound's argument) got their TypeError (a helper's audit)."""
    from mmopt import toeplitz
    with pytest.raises(ValueError, match="'n' parameter of toeplitz.svd_bound"):
        toeplitz.svd_bound(0)
    with pytest.raises(ValueError, match="'n' parameter of toeplitz.svd_bound"):
        toeplitz.svd_bound(-1, "all_range")
    with pytest.raises(TypeError, match=r"toeplitz.svd_bound must be an integer.*svd_bound\(5, 'prefix'\)"):
        toeplitz.svd_bound(toeplitz.prefix(5))
    assert toeplitz.svd_bound(5) == pytest.approx(mmopt.svd_bound(toeplitz.prefix(5)), rel=1e-12)
