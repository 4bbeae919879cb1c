"""The working-set p-Identity search (mmopt.search.pidentity_sparse) against the dense objective and search.

Notation: see README. The sparse objective is the dense one's Woodbury formula evaluated by other products, so
the two agree to rounding: f = tr C − Σ Q∘H loses log10(tr C / f) ≤ 2 digits here, and every product sums at
most n·p terms of one sign pattern, so 1e-10 relative to the largest gradient entry leaves a wide margin over
n·p·u ≈ 1e-13. The search is a heuristic: it is checked against the certified bound (below it is a bug), the
exact dense error of what it returns, L-BFGS-B's own optimality test at every entry, and a converged dense
search with a 5% margin (far above their seed-to-seed spread, 0.3% at n = 1,024).
"""

import numpy as np
import pytest

from mmopt.dense.gram_operator import DenseGram, all_range_gram, prefix_gram
from mmopt.error import unit_objective
from mmopt.search import pidentity as pi
from mmopt.search import pidentity_ladder as pl
from mmopt.search import pidentity_sparse as ps
from mmopt.toeplitz import prefix_bound


def _random_gram(n):
    W = np.random.default_rng(n).integers(0, 2, size=(2 * n, n)).astype(float)
    return DenseGram(W.T @ W)


@pytest.mark.parametrize("make", [prefix_gram, all_range_gram, _random_gram])
@pytest.mark.parametrize("density", [0.05, 0.3, 1.0])
def test_sparse_objective_is_the_dense_one(make, density):
    n, p = 40, 5
    rng = np.random.default_rng(7)
    theta = rng.random((p, n)) * 3 * (rng.random((p, n)) < density)
    rows, cols = np.nonzero(theta)
    G = make(n)
    f, g, full = ps.evaluate(rows, cols, theta[rows, cols], p, n, G, full=True)
    f0, g0 = pi.objective(theta.ravel(), G, p, n)
    g0 = g0.reshape(p, n)
    assert f == pytest.approx(f0, rel=1e-12)
    top = np.abs(g0).max()
    assert np.abs(full - g0).max() <= 1e-10 * top
    assert np.abs(g - g0[rows, cols]).max() <= 1e-10 * top
    f_only, g_only = ps.evaluate(rows, cols, theta[rows, cols], p, n, G)
    assert f_only == f and np.array_equal(g_only, g)


def test_the_identity_is_a_local_optimum():
    # at Θ = 0 every gradient entry is 2 G_jj > 0: nothing is pushed up, and the identity comes back as it went in
    G = prefix_gram(32)
    theta, f, iterations, status, _, rounds = ps.refine(np.zeros((2, 32)), G)
    assert status == "optimal" and iterations == 0 and not theta.any() and rounds == []
    assert f == pytest.approx(float(np.sum(G.diagonal())), rel=1e-14)


@pytest.mark.parametrize("make", [prefix_gram, all_range_gram])
def test_refine_from_a_tiled_start_passes_the_test_at_every_entry(make):
    n, p = 128, 8
    G = make(n).scaled(1.0 / n)
    coarse = pi.search(make(64).scaled(1.0 / 64), p=4, max_iterations=3000, seed=1)
    start = pl.tile(coarse.strategy.theta, n, p, np.random.default_rng(0))
    rows, cols = np.nonzero(start)
    f_start = ps.evaluate(rows, cols, start[rows, cols], p, n, G)[0]
    theta, f, iterations, status, _, rounds = ps.refine(start, G, max_iterations=6000, tol=1e-9)
    assert status == "optimal" and iterations <= 6000 and rounds[-1]["added"] == 0
    assert f < f_start
    nz = np.nonzero(theta)
    f_again, _, gradient = ps.evaluate(*nz, theta[nz], p, n, G, full=True)
    assert f_again == f
    # L-BFGS-B's projected-gradient test, at the entries outside the working set too: none is pushed up
    assert np.all(gradient[theta == 0] >= -1e-6 * f)
    exact = unit_objective(pi.PIdentityStrategy(theta).matrix, G.dense())
    assert f == pytest.approx(exact, rel=1e-10)
    if make is prefix_gram:
        assert f * n > prefix_bound(n).value
    dense = pi.search(G, p=p, max_iterations=4000, seed=2)
    assert f <= 1.05 * dense.objective


def test_budget_and_rounds():
    n, p = 128, 8
    G = prefix_gram(n).scaled(1.0 / n)
    start = np.random.default_rng(3).random((p, n)) * (np.random.default_rng(4).random((p, n)) < 0.2)
    theta, f, iterations, status, _, rounds = ps.refine(start, G, max_iterations=25, inner=10)
    assert status == "user_limit" and iterations == 25
    assert [r["iterations"] for r in rounds] == [10, 10, 5]
    assert all(r["objective"] >= f for r in rounds[:-1]) and rounds[-1]["objective"] == f
    assert theta.shape == (p, n) and np.all(theta >= 0)


def test_a_round_that_cannot_step_ends_as_a_stalled_search(monkeypatch):
    # a line search that fails at the first step (never seen here) must end the search, not repeat the round
    monkeypatch.setattr(ps, "lbfgs", lambda fun, z0, scale, budget, tol, max_evaluations: (z0, fun(z0)[0], 0,
                                                                                           "optimal_inaccurate"))
    start = np.zeros((2, 32))
    start[0, :16] = 1.0
    theta, _, iterations, status, _, rounds = ps.refine(start, prefix_gram(32), max_iterations=100)
    assert status == "optimal_inaccurate" and iterations == 0 and len(rounds) == 1 and rounds[0]["added"] > 0
    assert np.array_equal(theta, start)
