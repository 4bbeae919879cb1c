"""The coarse-to-fine p-Identity search (mmopt.search.pidentity_ladder) against the one-size search and exact errors.

Notation: see README. The ladder is a heuristic, so its results are checked against the certified diagonal bound
(below it is a bug), against the exact dense error of the strategy it returns, and against a converged one-size
search with a 5% margin (both reach a local optimum at these sizes; 5% is far above their seed-to-seed spread,
0.3% at n = 1,024 in benchmarks/results/bench_eps_search.txt).
"""

import numpy as np
import pytest

from mmopt.dense.gram_operator import all_range_gram, prefix_gram
from mmopt.error import unit_objective
from mmopt.search import pidentity as pi
from mmopt.search import pidentity_ladder as pl
from mmopt.toeplitz import prefix_bound


@pytest.mark.parametrize(("n", "base", "expected"), [(8192, 1024, [1024, 2048, 4096, 8192]), (1024, 1024, [1024]),
                                                     (3001, 1024, [751, 1501, 3001]), (5, 2, [2, 3, 5])])
def test_sizes(n, base, expected):
    assert pl.sizes(n, base) == expected


@pytest.mark.parametrize("n", [12, 11])
def test_tile_is_the_coarse_strategy_on_each_half(n):
    rng = np.random.default_rng(1)
    theta = rng.random((3, 6))
    start = pl.tile(theta, n, 6, rng)
    assert start.shape == (6, n)
    A = pi.PIdentityStrategy(start).matrix
    A_c = pi.PIdentityStrategy(theta).matrix
    # the right half's columns are the first n − 6 columns of the coarse strategy (each column scaled to Δ₁ = 1)
    right = pi.PIdentityStrategy(theta[:, : n - 6]).matrix
    identity_rows, extra_rows = A[:n], A[n:]
    assert np.allclose(identity_rows[:6, :6], A_c[:6]) and np.allclose(identity_rows[6:, 6:], right[: n - 6])
    assert np.allclose(extra_rows[:3, :6], A_c[6:]) and np.allclose(extra_rows[3:, 6:], right[n - 6:])
    assert np.all(extra_rows[:3, 6:] == 0) and np.all(extra_rows[3:, :6] == 0)


def test_tile_drops_light_rows_and_adds_small_ones():
    rng = np.random.default_rng(2)
    theta = np.array([[1.0, 1.0], [0.1, 0.0]])
    fewer = pl.tile(theta, 4, 3, rng)
    assert fewer.tolist() == [[1.0, 1.0, 0.0, 0.0], [0.1, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0]]
    more = pl.tile(theta, 4, 6, rng)
    assert more.shape == (6, 4) and np.all(more[4:] > 0) and np.all(more[4:] <= 1e-3 * theta.mean())


@pytest.mark.parametrize("make", [prefix_gram, all_range_gram])
def test_ladder_result_is_exact_above_the_bound_and_near_a_converged_search(make):
    n = 256
    res = pl.search(make, n, base=64, max_iterations=400, seed=0)
    assert [level["n"] for level in res.history[0]["levels"]] == [64, 128, 256]
    assert [level["p"] for level in res.history[0]["levels"]] == [4, 8, 16]
    G = make(n)
    exact = pi.true_error(res.strategy.theta, G)
    assert exact == pytest.approx(unit_objective(res.strategy.matrix, G.dense()), rel=1e-10)
    # objective is on G scaled to mean diagonal 1
    assert res.objective == pytest.approx(exact * n / G.diagonal().sum(), rel=1e-12)
    if make is prefix_gram:
        assert exact > prefix_bound(n).value
    one_size = pi.search(G, max_iterations=3000, seed=0)
    assert exact <= 1.05 * one_size.objective
    assert res.iterations == sum(level["iterations"] for level in res.history[0]["levels"])


def test_one_level_is_the_one_size_search():
    G = prefix_gram(48)
    normal = G.scaled(48 / G.diagonal().sum())
    ladder = pl.search(prefix_gram, 48, base=64, max_iterations=200, seed=3)
    plain = pi.search(normal, max_iterations=200, seed=3)
    assert ladder.objective == plain.objective and np.array_equal(ladder.strategy.theta, plain.strategy.theta)


def test_restarts_and_status():
    # coarse_iterations caps the sizes below 64 (their default schedule took 45 CPU s; the status is the final size's)
    res = pl.search(prefix_gram, 64, base=16, restarts=2, max_iterations=2, coarse_iterations=40, seed=5)
    # whether a 2-step working-set round at n = 64 ends on its budget or on L-BFGS-B's test depends on the BLAS
    # kernel's round-off (OPENBLAS_CORETYPE=Haswell ends one run "optimal"): the message must count exactly the
    # runs that hit the budget, and any such run makes the result "user_limit"
    hit = sum(h["status"] == "user_limit" for h in res.history)
    assert hit >= 1 and res.status == "user_limit" and f"{hit} of 2 run(s) hit max_iterations=2" in res.message
    assert "coarse-to-fine" in res.message and "16 → 32 → 64" in res.message
    assert res.objective == min(h["objective"] for h in res.history)
    again = pl.search(prefix_gram, 64, base=16, restarts=2, max_iterations=2, coarse_iterations=40, seed=5)
    assert again.objective == res.objective


@pytest.mark.parametrize(("args", "kw", "error", "match"), [
    ((np.eye(4), 8), {}, TypeError, "'make_gram'"),
    ((prefix_gram, 0), {}, ValueError, "'n'"),
    ((prefix_gram, 8), {"base": 0}, ValueError, "'base'"),
    ((prefix_gram, 8), {"restarts": 0}, ValueError, "'restarts'"),
])
def test_refusals(args, kw, error, match):
    with pytest.raises(error, match=match):
        pl.search(*args, **kw)


def test_a_given_p_is_kept_at_n_and_scaled_below():
    res = pl.search(prefix_gram, 256, base=64, p=6, max_iterations=3, coarse_iterations=3, seed=0)
    assert [(level["n"], level["p"]) for level in res.history[0]["levels"]] == [(64, 2), (128, 3), (256, 6)]
    assert res.p == 6 and res.strategy.theta.shape == (6, 256)
    assert all(level["iterations"] <= 3 for level in res.history[0]["levels"])
