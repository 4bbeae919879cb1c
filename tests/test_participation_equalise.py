"""Equalising a 2b-band strategy's steps (mmopt.participation.equalise): the through-step maxima against brute force
over every pattern, and the scaled strategy's error and Δ² against dense computation."""

import itertools

import numpy as np
import pytest

from mmopt.participation import min_separation, sensitivity_squared
from mmopt.participation.chain_banded import _gram_band, chain_banded, scaled_error
from mmopt.participation.equalise import equalise, through_step_max
from mmopt.participation.sensitivity import chain_pattern_max


def _brute(dg, P, b, k):
    n = dg.size

    def value(pattern):
        pairs = sum(2 * P[s, t - s - b] for s, t in zip(pattern, pattern[1:], strict=False) if t - s < 2 * b)
        return dg[list(pattern)].sum() + pairs

    patterns = [p for m in range(1, k + 1) for p in itertools.combinations(range(n), m)
                if all(t - s >= b for s, t in zip(p, p[1:], strict=False))]
    return np.array([max(value(p) for p in patterns if t in p) for t in range(n)])


@pytest.mark.parametrize("seed", range(40))
def test_through_step_maxima_are_every_pattern_s_best(seed):
    rng = np.random.default_rng(seed)
    b, k = int(rng.integers(1, 4)), int(rng.integers(1, 5))
    n = int(rng.integers(b, 4 * b + 3))
    dg, P = rng.random(n), rng.normal(size=(n, b))  # signed pairs: the lower chain's case too
    P[np.arange(n)[:, None] + b + np.arange(b)[None, :] >= n] = 0.0  # past the end
    got = through_step_max(dg, P, b, k)
    np.testing.assert_allclose(got, _brute(dg, P, b, k), rtol=1e-12, atol=1e-12)
    assert got.max() == pytest.approx(chain_pattern_max(dg, P, b, k), rel=1e-12)


def test_equalise_is_never_worse_and_its_error_and_sensitivity_are_exact():
    n, k = 64, 4
    b = n // k
    C = chain_banded(n, k, max_iterations=5).matrix  # a short run: steps left unequal
    C = C * np.linspace(1.0, 1.3, n)[None, :]  # and more so
    before = scaled_error(C, b, k)[0]
    error, E, sens = equalise(C, b, k)
    assert error < before  # the columns' slack is spent
    W = np.tril(np.ones((n, n)))
    dense = sensitivity_squared(E, min_separation(b, k)).squared * np.linalg.norm(W @ np.linalg.inv(E)) ** 2
    assert dense <= error * (1 + 1e-9)  # the chain's Δ² is a proven upper bound of the dense one
    assert sens.squared == 1.0  # of the strategy returned, scaled to Δ = 1
    assert np.array_equal(E, np.tril(E)) and not np.any(np.tril(E, -2 * b))  # causal, 2b bands
    from mmopt.participation.chain_banded import _gram_band

    def spread(M):  # the lightest step's best pattern over the heaviest's
        dg, P = _gram_band(M, b, k)
        v = through_step_max(dg, np.abs(P), b, k)
        return v.min() / v.max()
    assert spread(E) > spread(C)  # what the scaling is for


def test_a_strategy_off_its_lower_bands_takes_the_dense_path_never_a_lower_delta():
    """The chain read the 2b bands below the diagonal only: an entry above it was dropped, and the identity with
    C[0, 5] = 3 had Δ² 12 said exact where every pattern gives 18 (an audit); equalise then claimed Δ = 1 for a
    strategy of Δ² 1.5, and its error (a review)."""
    from mmopt.participation.chain_banded import chain_sensitivity
    from mmopt.participation.sensitivity import gram_sensitivity_squared
    C = np.eye(6)
    C[0, 5] = 3.0
    truth = max(C[:, list(p)].sum(axis=1) @ C[:, list(p)].sum(axis=1)
                for m in range(1, 4) for p in itertools.combinations(range(6), m)
                if all(t - s >= 2 for s, t in itertools.pairwise(p)))  # X ≥ 0: 1ᵀX_π1 is exact
    assert truth == 18.0
    dense = gram_sensitivity_squared(C.T @ C, min_separation(2, 3))
    assert chain_sensitivity(C, 2, 3).squared == truth == dense.squared
    with pytest.raises(ValueError, match="'C' parameter of scaled_error must be lower-triangular"):
        equalise(C, 2, 3)  # its error was read from one triangle: 675 for 1,215 (a review)


def test_a_relative_step_lowers_a_carried_strategy_s_exact_error():
    """equalise.relative_step on a strategy carried a level up (what the route does past 2,048 steps): a lower
    error, and the error and Δ² it reports are the dense ones (‖W C⁻¹‖²_F; Δ² by the dense sensitivity path);
    balanced leaves every step's best pattern within its tolerance."""
    from mmopt.participation.chain_levels import DECAYS, carry
    from mmopt.participation.equalise import balanced, relative_step
    from mmopt.participation.sensitivity import gram_sensitivity_squared
    n, k = 128, 4
    b = n // k
    C = carry(chain_banded(n // 2, k, max_iterations=30).matrix, k, *DECAYS[1])
    error, C, _ = equalise(C, b, k)
    stepped, D, s = relative_step(C, b, k, error)
    assert stepped < error * (1 - 1e-3)  # 3,162.0 → 3,151.4 here
    W = np.tril(np.ones((n, n)))
    dense = gram_sensitivity_squared(D.T @ D, min_separation(b, k))
    assert s.squared == 1.0 and dense.exact and dense.squared == pytest.approx(1.0, rel=1e-9)
    assert stepped == pytest.approx(np.linalg.norm(W @ np.linalg.inv(D)) ** 2, rel=1e-9)
    assert relative_step(D, b, k, 0.0) is None  # nothing is below an error of 0: C is never returned worse
    assert balanced(C, b, k, passes=0)[0] is C
    E, top = balanced(C * np.linspace(1.0, 1.3, n)[None, :], b, k, passes=50, tol=1e-3)
    dg, P = _gram_band(E, b, k)
    v = through_step_max(dg, np.abs(P), b, k)
    assert v.min() >= (1 - 1.1e-3) * v.max() and top == pytest.approx(v.max(), rel=1e-5)
