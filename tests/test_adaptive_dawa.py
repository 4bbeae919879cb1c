"""DAWA-style estimates: recovery at huge ε, budget, sanity at small ε, 2-D Hilbert order, bucket measurement."""

import math

import numpy as np
import pytest

import mmopt
from mmopt.adaptive import dawa, hilbert_order
from mmopt.adaptive._measure import _tree, measure, tree_least_squares

STEPS = np.repeat([5.0, 40.0, 0.0, 0.0], 16)


@pytest.mark.parametrize("strategy", ["hierarchical", "identity"])
def test_huge_epsilon_recovers_a_step_histogram(strategy):
    # a public penalty far above the selection's temperature 2Δ/ε₁ makes the fewest flat buckets win
    r = dawa(STEPS, 1e6, strategy=strategy, bucket_penalty=1e-3, rng=0)
    assert r.details["buckets"].tolist() == [[0, 16], [16, 32], [32, 64]]
    np.testing.assert_allclose(r.estimate, STEPS, atol=1e-3)
    assert r.method == "dawa" and r.path == "simulation"
    # the default penalty scales like 2Δ/ε₁, so flat runs may be split further, never merged across a step
    for seed in range(5):
        d = dawa(STEPS, 1e6, strategy=strategy, rng=seed)
        assert {16, 32, 64} <= set(d.details["buckets"][:, 1].tolist()) and d.details["partition"].n_buckets <= 12
        np.testing.assert_allclose(d.estimate, STEPS, atol=1e-3)


def test_budget_adds_up_and_small_epsilon_estimates_are_sane():
    x = np.random.default_rng(1).integers(0, 5, 300).astype(float)
    for eps in (0.01, 0.1, 1.0):
        r = dawa(x, eps, rng=2)
        assert set(r.budget) == {"partition", "measure"}
        assert math.isclose(sum(r.budget.values()), eps, rel_tol=1e-15)
        assert math.isclose(r.budget["partition"], 0.25 * eps, rel_tol=1e-15)
        assert np.all(np.isfinite(r.estimate)) and r.estimate.shape == x.shape
        lo, hi = r.details["buckets"].T
        # the expansion is uniform within each bucket and keeps the bucket totals
        for a, b in zip(lo, hi, strict=True):
            assert np.ptp(r.estimate[a:b]) <= 1e-9 * max(1.0, abs(r.estimate[a]))
        clipped = dawa(x, eps, nonnegative=True, rng=2)
        assert np.all(clipped.estimate >= 0)
        np.testing.assert_array_equal(clipped.estimate, np.maximum(r.estimate, 0.0))  # same draws, then clipped


def test_measurement_noise_scales():
    r = dawa(STEPS, 2.0, strategy="identity", rng=3)
    assert r.details["measure"]["noise_scale"] == 1.0 / 1.5 and r.details["measure"]["sensitivity"] == 1.0
    h = dawa(STEPS, 2.0, rng=3).details["measure"]
    assert h["strategy"] == "H2" and h["noise_scale"] == h["sensitivity"] / 1.5


@pytest.mark.parametrize("x, kwargs", [(np.array([7.0]), {}), (STEPS, {"max_bucket_length": 1}),
                                       (STEPS[:5], {"max_bucket_length": 1, "candidates": "all"})])
def test_a_forced_partition_charges_nothing(x, kwargs):
    """Singleton buckets only (one cell, or max_bucket_length=1): the partition has one outcome and reads no data,
    so all of ε goes to the counts (ρ·ε was charged to it and unused: (1 − ρ)⁻² = 1.78× the variance)."""
    r = dawa(x, 2.0, strategy="identity", rng=4, **kwargs)
    assert r.budget == {"partition": 0.0, "measure": 2.0} and r.details["partition"].epsilon == 0.0
    assert r.details["buckets"].tolist() == [[j, j + 1] for j in range(x.size)]
    assert r.details["measure"]["noise_scale"] == 0.5  # Δ = 1 over ε = 2
    # one bucket length allowed beyond 1: the choice is real again and ρ·ε is spent on it
    if x.size > 1:
        assert dawa(x, 2.0, rng=4, max_bucket_length=2).budget == {"partition": 0.5, "measure": 1.5}


@pytest.mark.parametrize("k,b", [(1, 2), (2, 2), (5, 2), (7, 3), (16, 2), (17, 4)])
def test_tree_matches_mmopt_hierarchical_and_least_squares_is_exact(k, b):
    nodes, children = _tree(k, b)
    A = np.zeros((len(nodes), k))
    for row, (lo, hi) in enumerate(nodes):
        A[row, lo:hi] = 1.0
    H = mmopt.strategy.hierarchical(k, b)
    np.testing.assert_array_equal(A, H.matrix)  # same rows, same order, so the same Δ₁ and noise
    y = np.random.default_rng(k).normal(size=len(nodes)) * 10
    np.testing.assert_allclose(tree_least_squares(nodes, children, y, k), np.linalg.lstsq(A, y, rcond=None)[0],
                               rtol=1e-10, atol=1e-10)
    _, rec = measure(np.ones(k), 1.0, "hierarchical", b, np.random.default_rng(0), "test")
    assert rec["sensitivity"] == H.sensitivity("l1")


def test_callable_strategy_runs_through_the_matrix_mechanism():
    r = dawa(STEPS, 1e6, strategy=lambda k: mmopt.strategy.hierarchical(k), bucket_penalty=1e-3, rng=4)
    np.testing.assert_allclose(r.estimate, STEPS, atol=1e-3)
    assert r.details["measure"]["strategy"] == "H2"
    with pytest.raises(ValueError, match="'strategy' callable of dawa must return a strategy over the 3 buckets"):
        dawa(STEPS, 1e6, strategy=lambda k: np.eye(k + 1), bucket_penalty=1e-3, rng=4)


def test_two_dimensional_quadrants_are_four_hilbert_buckets():
    img = np.zeros((16, 16))
    img[:8, :8], img[:8, 8:], img[8:, :8], img[8:, 8:] = 3.0, 10.0, 0.0, 7.0
    r = dawa(img, 1e6, bucket_penalty=1e-3, rng=5)
    assert r.estimate.shape == (16, 16) and r.details["partition"].n_buckets == 4
    np.testing.assert_allclose(r.estimate, img, atol=1e-3)
    np.testing.assert_array_equal(r.details["order"], hilbert_order((16, 16)))
    # row-major rows alternate between two quadrants: many more buckets
    rm = dawa(img, 1e6, bucket_penalty=1e-3, order="row_major", rng=5)
    assert rm.details["order"] is None and rm.details["partition"].n_buckets >= 16
    np.testing.assert_allclose(rm.estimate, img, atol=1e-3)


def test_seeded_reproducibility():
    x = np.random.default_rng(6).integers(0, 50, 500).astype(float)
    a = dawa(x, 0.3, rng=8)
    assert np.array_equal(a.estimate, dawa(x, 0.3, rng=8).estimate)
    assert not np.array_equal(a.estimate, dawa(x, 0.3, rng=9).estimate)


@pytest.mark.parametrize("kwargs,exc,words", [
    (dict(ratio=1.0), ValueError, "'ratio' parameter of dawa"),
    (dict(strategy="wavelet"), ValueError, "'strategy' parameter of dawa"),
    (dict(order="zorder"), ValueError, "'order' parameter of dawa"),
    (dict(nonnegative="yes"), TypeError, "'nonnegative' parameter of dawa"),
    (dict(branching=1), ValueError, "'branching' parameter of dawa"),
    (dict(selection="greedy"), ValueError, "'selection' parameter of dawa"),
    (dict(epsilon=float("nan")), ValueError, "'epsilon' parameter of dawa"),
    (dict(x=[[1.0, -1.0]]), ValueError, "'x' parameter of dawa must hold counts >= 0"),
    (dict(bucket_penalty=-1.0), ValueError, "'bucket_penalty' parameter of dawa"),
    (dict(max_bucket_length=0), ValueError, "'max_bucket_length' parameter of dawa"),
    (dict(entropy_correction="no"), TypeError, "'entropy_correction' parameter of dawa"),
])
def test_validation(kwargs, exc, words):
    args = dict(x=STEPS, epsilon=1.0, rng=0) | kwargs
    with pytest.raises(exc, match=words):
        dawa(**args)
