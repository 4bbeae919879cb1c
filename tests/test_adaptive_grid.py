"""UGrid / AGrid (Qardaji et al. 2013): grid sizes, limits at huge ε, constrained inference, budget, noise."""

import dataclasses
import math

import numpy as np
import pytest

from mmopt.adaptive._finish import block_edges
from mmopt.adaptive._noise import Noise
from mmopt.adaptive.grid import agrid, grid_size, ugrid


@dataclasses.dataclass(frozen=True, eq=False)
class Zero(Noise):
    """Noise that records every Laplace request and adds nothing (the noise-free limit, exactly)."""

    calls: list = dataclasses.field(default_factory=list)

    def add_laplace(self, values, scale):
        self.calls.append((scale, np.shape(values)))
        return values


def test_block_edges_tile_near_equally():
    for n, m in [(10, 3), (7, 7), (100, 9), (5, 1)]:
        e = block_edges(n, m)
        assert e[0] == 0 and e[-1] == n and np.ptp(np.diff(e)) <= 1 and np.all(np.diff(e) >= 1)


def test_grid_size_formula():
    assert grid_size(1e6, 0.1, 10) == 100 and grid_size(0, 1.0, 10) == 1 and grid_size(-5, 1.0, 10) == 1
    assert grid_size(1001, 1.0, 10) == math.ceil(math.sqrt(100.1))


@pytest.mark.parametrize("f", [ugrid, agrid])
def test_huge_epsilon_recovers_block_constant_data_and_budget_adds_up(f):
    x = np.kron(np.arange(16.0).reshape(4, 4), np.ones((5, 5)))  # 20 × 20, constant on 5 × 5 blocks
    r = f(x, 1e7, rng=0)
    assert r.estimate.shape == x.shape and r.method == f.__name__ and r.path == "simulation"
    assert math.isclose(sum(r.budget.values()), 1e7, rel_tol=1e-14)
    assert r.budget["total"] == pytest.approx(0.05e7)
    # N·ε/c is huge, so the grid is the cells themselves
    np.testing.assert_allclose(r.estimate, x, atol=1e-3)


def test_ugrid_noise_free_estimate_is_block_means_of_the_formula_grid():
    x = np.random.default_rng(1).integers(0, 10, (30, 24)).astype(float)
    z = Zero("numpy", np.random.default_rng(0))
    r = ugrid(x, 0.01, total=x.sum(), noise=z)
    m = grid_size(x.sum(), 0.01, 10.0)
    assert r.details["m"] == (m, m) and "total" not in r.budget and r.budget["counts"] == 0.01
    re, ce = block_edges(30, m), block_edges(24, m)
    for i in range(m):
        for j in range(m):
            blk = x[re[i]:re[i + 1], ce[j]:ce[j + 1]]
            np.testing.assert_allclose(r.estimate[re[i]:re[i + 1], ce[j]:ce[j + 1]], blk.mean(), rtol=1e-12)
    assert z.calls == [(100.0, (m, m))]


def test_agrid_noise_free_totals_and_draw_count():
    x = np.random.default_rng(2).integers(0, 40, (40, 40)).astype(float)
    z = Zero("numpy", np.random.default_rng(0))
    r = agrid(x, 0.2, noise=z)
    assert r.details["m1"] == (10, 10) and r.budget["level1"] == pytest.approx(0.095)
    assert np.isclose(r.estimate.sum(), x.sum())  # no noise: both levels agree with the true totals
    # one Laplace call for N, one for level 1, one per first-level block
    assert len(z.calls) == 2 + 100


def test_agrid_inference_weights_by_hand():
    # one first-level block (a 1 × 1 histogram): total = mix of v (level 1) and u (level 2, one sub-block)
    vals = iter([4.0, -2.0])  # level-1 draw, level-2 draw (N is public: no draw for it)

    @dataclasses.dataclass(frozen=True, eq=False)
    class Scripted(Noise):
        def add_laplace(self, values, scale):
            return values + next(vals)

    r = agrid([[10.0]], 1.0, alpha=0.25, total=10.0, noise=Scripted("numpy"))
    e1, e2 = 0.25, 0.75
    w1, w2 = e1**2, e2**2  # inverse variances 1/(2b²) up to the common factor 1/2
    assert r.estimate[0, 0] == pytest.approx((w1 * 14.0 + w2 * 8.0) / (w1 + w2))


def test_seeded_runs_repeat():
    x = np.random.default_rng(4).poisson(2, (32, 32)).astype(float)
    for f in (ugrid, agrid):
        np.testing.assert_array_equal(f(x, 1.0, rng=5).estimate, f(x, 1.0, rng=5).estimate)
        assert not np.array_equal(f(x, 1.0, rng=5).estimate, f(x, 1.0, rng=6).estimate)


@pytest.mark.parametrize("f", [ugrid, agrid])
def test_beats_identity_on_a_smooth_2d_histogram(f):
    n, eps = 64, 0.1
    t = np.arange(n)
    x = np.round(20 * np.exp(-0.5 * (((t[:, None] - 30) / 12) ** 2 + ((t[None, :] - 25) / 15) ** 2)))
    mse = np.mean([np.mean((f(x, eps, rng=s).estimate - x) ** 2) for s in range(3)])
    assert mse < 0.5 * (2 / eps**2)


def test_uniform_input_gives_uniform_output_without_noise():
    x = np.full((12, 18), 3.0)
    for f in (ugrid, agrid):
        np.testing.assert_allclose(f(x, 0.5, noise=Zero("numpy", None)).estimate, 3.0, rtol=1e-12)


@pytest.mark.parametrize("f", [ugrid, agrid])
def test_input_checks(f):
    name = f.__name__
    with pytest.raises(ValueError, match=f"'x' parameter of {name} must be a 2-D"):
        f([1.0, 2.0], 1.0)
    with pytest.raises(ValueError, match=f"'epsilon' parameter of {name}"):
        f(np.ones((2, 2)), 0)
    with pytest.raises(ValueError, match=f"'c' parameter of {name}"):
        f(np.ones((2, 2)), 1.0, c=0.0)
    with pytest.raises(ValueError, match=f"'total' parameter of {name}"):
        f(np.ones((2, 2)), 1.0, total=-1)
    with pytest.raises(ValueError, match=f"'total_share' parameter of {name}"):
        f(np.ones((2, 2)), 1.0, total_share=1.5)
    with pytest.raises(ValueError, match=f"'total_share' parameter of {name}"):  # unused, still checked
        f(np.ones((2, 2)), 1.0, total=4.0, total_share=5)
    with pytest.raises(ValueError, match=f"'rng' parameter of {name} must be None"):
        f(np.ones((2, 2)), 1.0, noise="opendp", rng=1)
    if f is agrid:
        with pytest.raises(ValueError, match="'alpha' parameter of agrid"):
            agrid(np.ones((2, 2)), 1.0, alpha=0.0)


def test_ugrid_runs_on_opendp_samplers():
    pytest.importorskip("opendp")
    x = np.random.default_rng(0).poisson(5, (8, 8)).astype(float)
    r = ugrid(x, 1.0, noise="opendp")
    assert r.path == "release" and r.details["noise"] == "opendp" and r.estimate.shape == x.shape
    assert np.all(np.isfinite(r.estimate)) and math.isclose(sum(r.budget.values()), 1.0)


def test_agrid_runs_on_opendp_samplers():
    pytest.importorskip("opendp")
    x = np.random.default_rng(0).poisson(5, (8, 8)).astype(float)
    r = agrid(x, 1.0, noise="opendp")
    assert r.path == "release" and r.details["noise"] == "opendp" and r.estimate.shape == x.shape
    assert np.all(np.isfinite(r.estimate)) and math.isclose(sum(r.budget.values()), 1.0)


@pytest.mark.slow
@pytest.mark.parametrize("f", [ugrid, agrid])
def test_grid_privacy_audit(f):
    """StatDP-style audit (tests/_privacy_audit.py) on 2 × 2 cells, x and x + e_(0,0) (UGrid's event is near
    tight: ε̂ ≈ 0.98 measured); ε_lo must not exceed ε."""
    from _privacy_audit import audit

    def stats(x, g):
        r = f(x, 1.0, rng=g)
        return [r.estimate.sum(), r.estimate[0, 0]]

    a = audit(stats, np.zeros((2, 2)), np.array([[1.0, 0], [0, 0]]), n=40_000, n_pilot=4000, seed=0)
    assert a.epsilon_lower <= 1.0


@pytest.mark.parametrize("total", [None, 12.0])
def test_privacy_loss_bound_over_all_neighbours(total):
    """Brute force (tests/_replay.py): on every x ± e_i the noisy total and the (one- or two-level) block counts
    add up to a loss of at most ε; a small c makes several blocks per level."""
    from _replay import worst_loss
    x = np.random.default_rng(2).integers(0, 5, (4, 5)).astype(float)
    for f in (ugrid, agrid):
        assert 0 < worst_loss(lambda z, n, f=f: f(z, 1.0, c=0.5, total=total, noise=n), x) <= 1.0 + 1e-9


def test_grid_size_refuses_a_negative_epsilon_by_name():
    from mmopt.adaptive.grid import grid_size
    with pytest.raises(ValueError, match="'epsilon' parameter of grid_size"):
        grid_size(100, -1.0, 10)  # was 'math domain error'


@pytest.mark.parametrize(("f", "shape"), [(ugrid, (1, 1)), (agrid, (1, 1)), (agrid, (10, 7)), (agrid, (3, 10))])
def test_private_total_is_not_measured_when_the_domain_fixes_the_grid(f, shape):
    # UGrid on one cell, AGrid with no side past its floor of 10: the grid is the same whatever N is, so a
    # noisy N would spend 5% of ε on nothing
    z = Zero("numpy", np.random.default_rng(0))
    r = f(np.ones(shape), 0.5, noise=z)
    assert "total" not in r.budget and r.details["total"] is None and not r.details["total_public"]
    assert math.isclose(sum(r.budget.values()), 0.5, rel_tol=1e-15)
    assert all(shp != () for _, shp in z.calls)  # no scalar draw for N


@pytest.mark.parametrize(("f", "shape"), [(ugrid, (1, 2)), (agrid, (11, 2))])
def test_private_total_is_measured_when_it_can_move_the_grid(f, shape):
    z = Zero("numpy", np.random.default_rng(0))
    r = f(np.ones(shape), 0.5, noise=z)
    assert r.budget["total"] == pytest.approx(0.025) and r.details["total"] == np.ones(shape).sum()
