"""mmopt.structured.gamma2: the multiplicative-weights ascent of the γ₂ dual, on closed forms."""

import numpy as np
import pytest

from mmopt.structured.gamma2 import ascend


@pytest.mark.parametrize("start", [[0.2, 0.8], [0.1, 0.9], [0.05, 0.45, 0.5]])
def test_the_ascent_leaves_a_two_cycle(start):
    # disjoint unit queries on cell groups: T(λ, μ) = Σᵢ √(λᵢμᵢ), max over the simplices T = 1 at λ = μ. Its gradients
    # are v = √(μ/λ) and diag X = √(λ/μ); at η = 2 the update swaps λ and μ exactly, so T never moves
    def evaluate(lam, mu):
        T = float(np.sum(np.sqrt(lam * mu)))
        return T * T, T, np.sqrt(mu / lam), np.sqrt(lam / mu), None

    mu = np.asarray(start) / np.sum(start)
    lam = np.full(mu.size, 1.0 / mu.size)
    status, k, lower, _, best, _ = ascend(evaluate, lam, mu, eta=2.0, tol=1e-6, max_iterations=200)
    assert status == "optimal" and k < 10
    assert 1.0 - 1e-5 <= lower <= 1.0 + 1e-12 and lower <= best[0] <= 1.0 + 1e-5
