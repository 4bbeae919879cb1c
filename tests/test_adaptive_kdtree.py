"""Private kd-trees (Xiao et al. 2010; Cormode et al. 2012): consistency vs dense least squares, limits, budget."""

import math

import numpy as np
import pytest
from _recording_noise import Recording

from mmopt.adaptive._noise import Noise
from mmopt.adaptive.kdtree import kd_tree, level_budgets, tree_consistency


def _random_tree(rng, size):
    children, u = [[]], 0
    while u < len(children) and len(children) < size:
        for _ in range(3 if u == 0 else int(rng.integers(0, 4))):
            children[u].append(len(children))
            children.append([])
        u += 1
    return children


def test_tree_consistency_is_the_dense_weighted_least_squares():
    rng = np.random.default_rng(0)
    children = _random_tree(rng, 30)
    m = len(children)
    leaves = [u for u in range(m) if not children[u]]

    def under(u):
        return [u] if not children[u] else sum((under(c) for c in children[u]), [])

    A = np.zeros((m, len(leaves)))
    for u in range(m):
        A[u, [leaves.index(leaf) for leaf in under(u)]] = 1.0
    y, var = rng.normal(size=m) * 5, rng.uniform(0.5, 3.0, m)
    z = np.linalg.solve(A.T @ (A / var[:, None]), A.T @ (y / var))
    np.testing.assert_allclose(tree_consistency(y, var, children), A @ z, atol=1e-10)


def test_level_budgets():
    b = level_budgets(2.0, 5)
    assert b.size == 6 and math.isclose(b.sum(), 2.0) and np.allclose(b[1:] / b[:-1], 2 ** (1 / 6))
    np.testing.assert_allclose(level_budgets(1.0, 3, "uniform"), 0.25)


@pytest.mark.parametrize("kind", ["kd", "hybrid"])
def test_huge_epsilon_gets_leaf_totals_and_budget_adds_up(kind):
    x = np.random.default_rng(1).integers(0, 9, (16, 12)).astype(float)
    r = kd_tree(x, 1e7, kind=kind, rng=2)
    assert r.estimate.shape == x.shape and r.path == "simulation"
    assert r.method == ("kd_tree" if kind == "kd" else "hybrid_kd_tree")
    assert math.isclose(sum(r.budget.values()), 1e7, rel_tol=1e-13)
    assert r.budget["count_level_0"] == pytest.approx(0.05e7) and r.budget["medians"] == pytest.approx(0.3e7)
    cover = np.zeros(x.shape, int)
    for r0, r1, c0, c1 in r.details["leaves"]:
        cover[r0:r1, c0:c1] += 1
        assert r.estimate[r0:r1, c0:c1].sum() == pytest.approx(x[r0:r1, c0:c1].sum(), abs=1e-3)
        assert np.ptp(r.estimate[r0:r1, c0:c1]) < 1e-9
    assert np.all(cover == 1)  # the leaves tile the domain
    assert r.details["height"] == math.ceil(math.log2(x.size))  # N̂ε/c is huge: full depth


def test_huge_epsilon_medians_balance_the_counts():
    x = np.zeros((8, 8))
    x[0, 0], x[7, 7] = 100.0, 100.0
    r = kd_tree(x, 1e7, height=1, rng=0)
    (a, b) = r.details["leaves"]
    assert x[a[0]:a[1], a[2]:a[3]].sum() == 100.0 and x[b[0]:b[1], b[2]:b[3]].sum() == 100.0


def test_draws_go_through_the_noise_object_with_the_stated_budgets():
    x = np.random.default_rng(3).integers(0, 20, (16, 16)).astype(float)
    rec = Recording("numpy", np.random.default_rng(4))
    r = kd_tree(x, 1.0, kind="hybrid", height=4, median_levels=2, noise=rec)
    np.testing.assert_array_equal(r.estimate, kd_tree(x, 1.0, kind="hybrid", height=4, median_levels=2,
                                                      rng=4).estimate)
    lap = [c for c in rec.calls if c[0] == "laplace"]
    em = [c for c in rec.calls if c[0] == "exponential"]
    assert len(lap) == 1 + 4  # the root, then one vector per depth
    assert [c[1] for c in lap] == pytest.approx([1 / e for e in r.details["level_budgets"]])
    assert len(em) == 1 + 2 and all(c[1:] == (pytest.approx(0.15), 1.0) for c in em)  # medians on 2 levels
    assert r.details["median_levels"] == 2


def test_uniform_input_gives_uniform_output_without_noise():
    class Zero(Noise):
        def add_laplace(self, values, scale):
            return values

    x = np.full((8, 16), 4.0)
    for kind in ("kd", "hybrid"):
        np.testing.assert_allclose(kd_tree(x, 0.3, kind=kind, noise=Zero("numpy", np.random.default_rng(0))
                                           ).estimate, 4.0, rtol=1e-12)


def test_seeded_runs_repeat():
    x = np.random.default_rng(5).poisson(3, (16, 16)).astype(float)
    np.testing.assert_array_equal(kd_tree(x, 1.0, rng=6).estimate, kd_tree(x, 1.0, rng=6).estimate)
    assert not np.array_equal(kd_tree(x, 1.0, rng=6).estimate, kd_tree(x, 1.0, rng=7).estimate)


def test_range_error_sanity_at_low_signal():
    # low signal (N·ε ≈ 2,000 on 64 × 64 cells): the hybrid tree's random-range error is within 1.5× identity's
    n, eps = 64, 0.1
    t = np.arange(n)
    x = np.round(20 * np.exp(-0.5 * (((t[:, None] - 30) / 12) ** 2 + ((t[None, :] - 25) / 15) ** 2)))
    q = np.random.default_rng(0).integers(0, n + 1, (200, 4))
    r0, r1 = np.minimum(q[:, 0], q[:, 1]), np.minimum(np.maximum(q[:, 0], q[:, 1]) + 1, n)
    c0, c1 = np.minimum(q[:, 2], q[:, 3]), np.minimum(np.maximum(q[:, 2], q[:, 3]) + 1, n)

    def ranges(E):
        P = np.zeros((n + 1, n + 1))
        P[1:, 1:] = E.cumsum(0).cumsum(1)
        return P[r1, c1] - P[r0, c1] - P[r1, c0] + P[r0, c0]

    identity = 2 * np.mean((r1 - r0) * (c1 - c0)) / eps**2
    err = np.mean([np.mean((ranges(kd_tree(x, eps, kind="hybrid", rng=s).estimate) - ranges(x)) ** 2)
                   for s in range(3)])
    assert err < 1.5 * identity


def test_input_checks():
    with pytest.raises(ValueError, match="'x' parameter of kd_tree must be a 2-D"):
        kd_tree([1.0, 2.0], 1.0)
    with pytest.raises(ValueError, match="'kind' parameter of kd_tree"):
        kd_tree(np.ones((2, 2)), 1.0, kind="quad")
    with pytest.raises(ValueError, match="'allocation' parameter of kd_tree"):
        kd_tree(np.ones((2, 2)), 1.0, allocation="linear")
    with pytest.raises(ValueError, match="'height' parameter of kd_tree"):
        kd_tree(np.ones((2, 2)), 1.0, height=0)
    with pytest.raises(ValueError, match="'median_share' parameter of kd_tree"):
        kd_tree(np.ones((2, 2)), 1.0, median_share=1.0)
    with pytest.raises(ValueError, match="'median_levels' parameter of kd_tree"):
        kd_tree(np.ones((2, 2)), 1.0, kind="hybrid", median_levels=-1)
    with pytest.raises(ValueError, match="'rng' parameter of kd_tree must be None"):
        kd_tree(np.ones((2, 2)), 1.0, noise="opendp", rng=0)


def test_kd_tree_runs_on_opendp_samplers():
    pytest.importorskip("opendp")
    x = np.random.default_rng(0).poisson(5, (8, 8)).astype(float)
    r = kd_tree(x, 1.0, kind="hybrid", noise="opendp")
    assert r.path == "release" and r.details["noise"] == "opendp" and r.estimate.shape == x.shape
    assert np.all(np.isfinite(r.estimate)) and math.isclose(sum(r.budget.values()), 1.0)


@pytest.mark.slow
def test_kd_tree_privacy_audit():
    """StatDP-style audit (tests/_privacy_audit.py) on 2 × 2 cells, x and x + e_(0,0); ε_lo must not exceed ε."""
    from _privacy_audit import audit

    def stats(x, g):
        r = kd_tree(x, 1.0, height=2, rng=g)
        return [r.estimate.sum(), r.estimate[0, 0], len(r.details["leaves"])]

    a = audit(stats, np.zeros((2, 2)), np.array([[1.0, 0], [0, 0]]), n=40_000, n_pilot=4000, seed=0)
    assert a.epsilon_lower <= 1.0


@pytest.mark.parametrize("kw", [{}, {"kind": "hybrid", "height": 4, "median_levels": 2},
                                {"allocation": "uniform", "height": 5}])
def test_privacy_loss_bound_over_all_neighbours(kw):
    """Brute force (tests/_replay.py): on every x ± e_i the rank scores move by at most 1 and the root and depth
    counts compose (parallel within a depth, sequential along a path) to a loss of at most ε."""
    from _replay import worst_loss
    x = np.random.default_rng(2).integers(0, 5, (4, 5)).astype(float)
    assert 0 < worst_loss(lambda z, n: kd_tree(z, 1.0, c=0.5, noise=n, **kw), x) <= 1.0 + 1e-9


def test_shares_leaving_nothing_for_the_counts_are_refused_before_any_draw():
    rec = Recording("numpy", np.random.default_rng(0))
    with pytest.raises(ValueError, match="'median_share' and 'total_share' parameters of kd_tree"):
        kd_tree(np.ones((4, 4)), 1.0, median_share=0.9, total_share=0.1, noise=rec)
    assert rec.calls == []
    r = kd_tree(np.ones((4, 4)), 1.0, kind="hybrid", median_levels=0, median_share=0.9, total_share=0.1, rng=0)
    assert r.budget["medians"] == 0.0 and math.isclose(sum(r.budget.values()), 1.0)


def test_a_single_cell_spends_all_of_epsilon_on_its_count():
    # no tree: the root count took total_share (5 %) of ε and the rest was reported spent on levels with no nodes
    rec = Recording("numpy", np.random.default_rng(0))
    r = kd_tree(np.full((1, 1), 7.0), 0.5, noise=rec)
    assert [c[:2] for c in rec.calls] == [("laplace", 1 / 0.5)]
    assert r.budget == {"medians": 0.0, "count_level_0": 0.5} and r.details["leaves"] == [(0, 1, 0, 1)]
    draws = np.array([kd_tree(np.full((1, 1), 7.0), 0.5, rng=s).estimate[0, 0] for s in range(2000)])
    assert abs(draws.var() - 2 / 0.5**2) < 5 * 2 / 0.5**2 * np.sqrt(5 / 2000)  # Var Lap(b) = 2b², ±5 SE (kurtosis 6)


def test_a_height_past_the_longest_path_is_cut_so_no_budget_goes_unused():
    # every split shortens a side by a cell: no node of a 4×4 grid lies deeper than 4 + 4 − 2 = 6, and height=10
    # charged levels 7–10 (0.47 of ε) that no data could reach; the levels drawn now carry all of ε
    rec = Recording("numpy", np.random.default_rng(0))
    x = np.arange(16.0).reshape(4, 4)
    r = kd_tree(x, 1.0, height=10, noise=rec)
    assert r.details["height"] == 6 and len(r.details["level_budgets"]) == 7
    assert math.isclose(sum(r.budget.values()), 1.0)
    deepest = max(d for d in range(7) if any(c[0] == "laplace" and math.isclose(c[1], 1 / r.details[
        "level_budgets"][d]) for c in rec.calls))
    assert deepest >= 4  # a balanced 4×4 tree reaches depth 4; the cap never cut a level that could be drawn
    assert kd_tree(x, 1.0, height=3, rng=0).details["height"] == 3  # a reachable height is kept


def test_level_budgets_refuses_a_misspelt_allocation():
    from mmopt.adaptive.kdtree import level_budgets
    with pytest.raises(ValueError, match="'allocation' parameter of level_budgets must be 'geometric' or 'uniform'"):
        level_budgets(1.0, 3, "geometrc")  # was the uniform split
    with pytest.raises(ValueError, match="'epsilon' parameter of level_budgets"):
        level_budgets(-1.0, 3)


@pytest.mark.parametrize("shape", [(2, 2), (1, 2), (2, 1)])
def test_sides_of_two_cells_charge_no_medians(shape):
    """Every split of a side of two cells is forced (one outcome, no data read): the medians took median_share
    (0.3) of ε for nothing, 2.1× the cell variance on 2×2 (an audit). The counts now carry all of ε; no
    exponential draw is made, and the leaves are the cells."""
    rec = Recording("numpy", np.random.default_rng(0))
    x = np.arange(1.0, 1.0 + math.prod(shape)).reshape(shape)
    r = kd_tree(x, 1.0, height=2, noise=rec)
    assert r.budget["medians"] == 0.0 and r.details["median_levels"] == 0
    assert math.isclose(sum(r.budget.values()), 1.0, rel_tol=1e-15)
    assert all(c[0] == "laplace" for c in rec.calls)
    assert sorted(r.details["leaves"]) == sorted((i, i + 1, j, j + 1) for i in range(shape[0])
                                                 for j in range(shape[1]))
    assert kd_tree(np.ones((3, 2)), 1.0, height=2, rng=0).budget["medians"] == 0.3  # a side of 3: a real choice
    # shares that leave the counts nothing only if the medians are paid: on these sides they are not
    r = kd_tree(x, 1.0, height=2, median_share=0.9, total_share=0.1, rng=0)
    assert r.budget["medians"] == 0.0 and math.isclose(sum(r.budget.values()), 1.0, rel_tol=1e-15)
    with pytest.raises(ValueError, match="'median_share' and 'total_share' parameters of kd_tree"):
        kd_tree(np.ones((3, 2)), 1.0, median_share=0.9, total_share=0.1, rng=0)
