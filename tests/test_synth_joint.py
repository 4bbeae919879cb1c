"""mmopt.synth.joint: the family's maximum-likelihood table against closed forms, and its use by AIM."""

import importlib
import warnings

import numpy as np
import pytest
from test_synth_mst import D, _records

import mmopt
from mmopt.synth import aim, joint
from mmopt.synth.estimate import ResidualModel
from mmopt.synth.residuals import ResidualEstimates

AIM = importlib.import_module("mmopt.synth.aim")


def _exact_estimates(x: np.ndarray, cliques, variance=1.0) -> ResidualEstimates:
    """Noise-free residual estimates r_S = C_S m_S(x) of every subset of the cliques."""
    import itertools
    values = {}
    for C in cliques:
        for k in range(len(C) + 1):
            for S in itertools.combinations(C, k):
                m = x.sum(axis=tuple(i for i in range(x.ndim) if i not in S))
                values[S] = joint._centred(np.asarray(m, dtype=float))
    values[()] = np.array(float(x.sum()))
    return ResidualEstimates(x.shape, values, {S: variance for S in values})


def test_exact_measurements_of_a_chain_give_its_maximum_entropy_table():
    # measured {0,1} and {1,2}: the family's table with those marginals is the decomposable P01·P12/P1 (closed form)
    x = np.random.default_rng(0).integers(1, 50, size=(3, 4, 2)).astype(float)
    est = _exact_estimates(x, [(0, 1), (1, 2)])
    got = joint.fit(ResidualModel(est, [(0, 1), (1, 2)], x.sum()), iterations=500)
    P01, P12, P1 = x.sum(axis=2), x.sum(axis=0), x.sum(axis=(0, 2))
    want = P01[:, :, None] * P12[None, :, :] / P1[None, :, None]
    # the marginals are matched to L-BFGS's tolerance on a loss of O(1)-scaled counts: 10⁻⁵ of a count of ~50
    np.testing.assert_allclose(got.table, want, rtol=1e-5, atol=1e-5 * x.max())
    assert got.status in ("optimal", "optimal_inaccurate")


def test_the_fit_lowers_the_likelihood_loss_and_keeps_a_distribution():
    g = np.random.default_rng(1)
    x = g.integers(0, 30, size=(3, 3, 4)).astype(float)
    est = _exact_estimates(x, [(0, 1), (1, 2), (0, 2)], variance=4.0)
    noisy = ResidualEstimates(est.shape, {S: (r + (g.normal(0, 2.0, np.shape(r)) if S else 0.0))
                                          for S, r in est.values.items()}, est.variances)
    noisy = ResidualEstimates(est.shape, {S: joint._centred(np.asarray(r, float)) if S else r
                                          for S, r in noisy.values.items()}, est.variances)
    model = ResidualModel(noisy, [(0, 1), (1, 2), (0, 2)], float(x.sum()))
    start = joint.fit(model, iterations=0)
    end = joint.fit(model)
    assert end.loss < start.loss and start.status == "user_limit"
    assert end.table.min() >= 0 and np.isclose(end.table.sum(), x.sum(), rtol=1e-12)
    # every marginal is one table's: the two ways to the 1-way marginal of attribute 1 agree exactly
    np.testing.assert_allclose(end.marginal((0, 1)).sum(axis=0), end.marginal((1, 2)).sum(axis=1), rtol=1e-12)


def test_systematic_sampling_follows_the_table_to_one_record_per_cell():
    table = np.random.default_rng(2).random((4, 5, 3)) * 10
    model = joint.JointModel(table, float(table.sum()), 0.0, "optimal", 0)
    n = 100_000
    codes = model.sample(n, np.random.default_rng(3))
    counts = np.zeros(table.shape)
    np.add.at(counts, tuple(codes.T), 1)
    # a single stratum of systematic sampling: every cell's count is ⌊n·p⌋ or ⌈n·p⌉
    assert np.abs(counts - n * table / table.sum()).max() < 1 + 1e-9
    np.testing.assert_allclose(model.marginal((0, 2)), table.sum(axis=1))


def _run(df, epsilon, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return aim(df, D, [(0, 1, 2), (1, 3)], mmopt.Privacy(epsilon, 1e-9), seed=0, **kw)


def test_aim_returns_the_joint_table_on_small_domains_and_the_residual_model_on_request():
    df = _records(2000)
    s, r = _run(df, 1.0), _run(df, 1.0, estimator="residual")
    assert s.details["estimator"]["estimator"] == "joint" and isinstance(s.model, joint.JointModel)
    assert r.details["estimator"] == {"estimator": "residual", "heuristic": True, "consistent": False}
    assert isinstance(r.model, ResidualModel)
    # the same seed draws the same measurements: the estimator is post-processing only
    assert s.measured == r.measured and s.rho == r.rho
    assert np.isclose(s.marginal(("a", "b")).sum(), r.model.total)


def test_bad_estimators_are_refused_before_any_budget_is_spent(monkeypatch):
    df = _records(200)
    with pytest.raises(ValueError, match="'estimator' parameter of aim"):
        _run(df, 1.0, estimator="pgm")
    monkeypatch.setattr(joint, "MAX_CELLS", 10)    # the domain has 48 cells
    with pytest.raises(ValueError, match="cannot be 'joint' for a domain of 48 cells"):
        _run(df, 1.0, estimator="joint")
    assert _run(df, 1.0).details["estimator"]["estimator"] == "junction"       # "auto" falls back
    assert _run(df, 1.0, estimator="residual").details["estimator"]["heuristic"]   # asked for
    big = ResidualModel(_exact_estimates(np.ones((4, 4)), [(0, 1)]), [(0, 1)], 16.0)
    with pytest.raises(ValueError, match="16 cells, above 10"):
        joint.fit(big)


def test_an_initial_share_spends_that_share_on_the_one_way_marginals():
    from fractions import Fraction

    from mmopt.accounting import max_rho
    df = _records(2000)
    s = _run(df, 1.0, initial_share=0.5)
    first = s.steps[0]
    assert first.kind == "gaussian" and first.sets == ((0,), (1,), (2,), (3,))
    # OpenDP's map rounds each ρ up by at most a few ulps; the curator never lets it pass the request
    half = max_rho(1.0, 1e-9) / 2
    assert Fraction(first.rho) <= Fraction(max_rho(1.0, 1e-9)) / 2 and first.rho >= half * (1 - 1e-9)
    paper = _run(df, 1.0)
    assert paper.steps[0].rho < 0.2 * max_rho(1.0, 1e-9)           # the paper's d/(2σ²): 4·0.9/64 = 5.6 % here
    for bad in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError, match="'initial_share' parameter of aim"):
            _run(df, 1.0, initial_share=bad)
