"""Monte-Carlo oracle for the participation tests: a strategy's reported error against a run of the mechanism."""

import math

import numpy as np


def assert_error_matches_the_mechanism(C, error, *, draws=40_000, seed=7):
    """y = C x + z (unit σ at Δ = 1), x̂ = C⁻¹ y, answers W x̂ (prefix sums): the mean squared error of the answers
    is within 6 standard errors of ``error`` (Var ‖M z‖² = 2‖MᵀM‖²_F for z ~ N(0, I), M = W C⁻¹)."""
    n = C.shape[0]
    rng = np.random.default_rng(seed)
    W = np.tril(np.ones((n, n)))
    x = rng.integers(0, 50, n).astype(float)
    y = C @ x[:, None] + rng.standard_normal((n, draws))
    err = ((W @ np.linalg.solve(C, y) - (W @ x)[:, None]) ** 2).sum(axis=0)
    M = W @ np.linalg.inv(C)
    se = math.sqrt(2 * np.linalg.norm(M.T @ M) ** 2 / draws)
    assert abs(err.mean() - error) <= 6 * se
