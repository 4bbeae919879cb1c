"""mmopt.synth.junction: the family on a junction tree against the whole-table fit (mmopt.synth.joint), its
marginals against the dense product of its tree, its sampler against its marginals, and its use by AIM."""

import itertools
import math

import numpy as np
import pytest
from test_synth_joint import _exact_estimates

from mmopt.synth import joint, junction
from mmopt.synth.estimate import ResidualModel
from mmopt.synth.model_size import junction_tree
from mmopt.synth.residuals import ResidualEstimates

SHAPE = (3, 4, 2, 3, 2)
CYCLE = [(0, 1), (1, 2), (2, 3), (0, 3), (3, 4)]  # a 4-cycle: the tree needs a fill-in edge


def _noisy_model(seed=0, sigma=3.0):
    g = np.random.default_rng(seed)
    x = g.integers(0, 30, size=SHAPE).astype(float)
    exact = _exact_estimates(x, CYCLE)
    values = {S: (r + sigma * g.standard_normal(np.shape(r)) * (S != ())) for S, r in exact.values.items()}
    values = {S: joint._centred(np.asarray(r, dtype=float)) if S else r for S, r in values.items()}
    est = ResidualEstimates(SHAPE, values, {S: sigma**2 for S in values})
    return ResidualModel(est, CYCLE, float(x.sum()))


def _dense(P: junction.JunctionModel) -> np.ndarray:
    """The whole table of the tree's factorisation: the roots' beliefs times each child's conditional."""
    d = len(P.shape)
    table = np.ones(P.shape) * P.total
    for k, K in enumerate(P.cliques):
        p = P.parent[k]
        sep = () if p < 0 else tuple(i for i in K if i in P.cliques[p])
        mu = P.beliefs[k]
        below = mu.sum(axis=tuple(q for q, i in enumerate(K) if i not in sep), keepdims=True)
        factor = np.divide(mu, below, out=np.zeros_like(mu), where=below > 0)
        table = table * factor.reshape([P.shape[i] if i in K else 1 for i in range(d)])
    return table


def test_the_fit_is_the_whole_table_fit_of_the_same_family():
    model = _noisy_model()
    dense = joint.fit(model, iterations=2000)
    got = junction.fit(model, junction_tree(SHAPE, CYCLE), iterations=3000, tol=1e-12)
    assert got.loss >= dense.loss * (1 - 1e-6) - 1e-9  # the same family: never below its minimum
    # both converge to one maximum-likelihood table; the tolerance is L-BFGS's and mirror descent's stopping
    # point on a loss of O(100) (σ = 3): 10⁻³ of the total count in every marginal
    for A in [(0, 1), (1, 3), (0, 2, 4), (1, 2, 3, 4)]:
        np.testing.assert_allclose(got.marginal(A), dense.marginal(A), atol=1e-3 * got.total)
    assert got.loss <= dense.loss * (1 + 1e-4)


def test_every_marginal_is_the_dense_products_and_the_beliefs_are_consistent():
    P = junction.fit(_noisy_model(1), junction_tree(SHAPE, CYCLE), iterations=50)
    table = _dense(P)
    assert math.isclose(table.sum(), P.total, rel_tol=1e-12)
    for r in range(1, 6):
        for A in itertools.combinations(range(5), r):
            want = table.sum(axis=tuple(i for i in range(5) if i not in A))
            np.testing.assert_allclose(P.marginal(A), want, rtol=1e-10, atol=1e-10 * P.total)
    for K, mu in zip(P.cliques, P.beliefs, strict=True):  # calibrated: each belief is the table's marginal
        np.testing.assert_allclose(mu, table.sum(axis=tuple(i for i in range(5) if i not in K)), rtol=1e-10)


def test_a_forest_of_two_trees_is_a_product():
    shape = (2, 3, 2, 2)
    x = np.random.default_rng(2).integers(1, 20, size=shape).astype(float)
    cliques = [(0, 1), (2, 3)]
    P = junction.fit(ResidualModel(_exact_estimates(x, cliques), cliques, x.sum()), junction_tree(shape, cliques),
                     iterations=2000, tol=1e-13)
    m01, m23 = x.sum(axis=(2, 3)), x.sum(axis=(0, 1))
    want = m01[:, :, None, None] * m23[None, None] / x.sum()
    np.testing.assert_allclose(P.marginal((0, 1, 2, 3)), want, rtol=1e-4, atol=1e-4 * x.sum())


def test_records_follow_the_model():
    P = junction.fit(_noisy_model(3), junction_tree(SHAPE, CYCLE), iterations=100)
    n = 100_000
    codes = P.sample(n, np.random.default_rng(0))
    assert codes.shape == (n, 5) and np.all(codes < np.array(SHAPE))
    for A in [(0, 1), (1, 2, 3), (0, 4)]:  # against the model's marginal: 5 binomial standard errors
        p = P.marginal(A) / P.total
        got = np.zeros(p.shape)
        np.add.at(got, tuple(codes[:, i] for i in A), 1.0 / n)
        assert np.all(np.abs(got - p) <= 5 * np.sqrt(p * (1 - p) / n) + 1 / n)


def test_a_tree_without_a_measured_clique_is_refused():
    with pytest.raises(ValueError, match=r"junction.fit: the measured clique \(0, 3\) lies in no clique"):
        junction.fit(_noisy_model(), junction_tree(SHAPE, [(0, 1), (1, 2), (2, 3), (3, 4)]))


def _model_of(model: ResidualModel, cliques) -> ResidualModel:
    """The ResidualModel of the measurements of ``model`` inside ``cliques`` (an earlier AIM round's)."""
    from mmopt.synth.residuals import ResidualEstimates
    est = model.estimates
    keep = {S: r for S, r in est.values.items() if any(set(S) <= set(C) for C in cliques)}
    return ResidualModel(ResidualEstimates(est.shape, keep, {S: est.variances[S] for S in keep}), cliques,
                         model.total)


def test_a_warm_start_begins_at_the_earlier_fit_and_reaches_the_same_optimum():
    full = _noisy_model(4)
    early = junction.fit(_model_of(full, CYCLE[:3]), junction_tree(SHAPE, CYCLE[:3]), iterations=40)
    tree = junction_tree(SHAPE, CYCLE)
    # zero iterations: θ of the new cliques is 0, so P is the earlier fit's, marginal for marginal
    same = junction.fit(full, tree, iterations=0, start=early)
    for A in [(0, 1), (1, 2), (0, 2, 4), (3,)]:
        np.testing.assert_allclose(same.marginal(A), early.marginal(A), rtol=1e-9, atol=1e-9 * full.total)
    assert same.step == early.step
    # and from there to the optimum the cold start reaches (as in the whole-table test: 10⁻³ of the total)
    warm = junction.fit(full, tree, iterations=3000, tol=1e-12, start=early)
    cold = junction.fit(full, tree, iterations=3000, tol=1e-12)
    assert abs(warm.loss - cold.loss) <= 1e-4 * max(cold.loss, 1.0)   # here both fit the measurements: f ≈ 0
    for A in [(0, 1), (1, 3), (2, 3, 4)]:
        np.testing.assert_allclose(warm.marginal(A), cold.marginal(A), atol=1e-3 * full.total)


def test_a_start_with_a_clique_not_measured_is_refused():
    full = _noisy_model(5)
    other = junction.fit(_model_of(full, [(0, 1), (1, 2)]), junction_tree(SHAPE, [(0, 1), (1, 2)]), iterations=2)
    path = _model_of(full, [(0, 1), (2, 3)])
    with pytest.raises(ValueError, match=r"the 'start' model's clique \(1, 2\) lies in none"):
        junction.fit(path, junction_tree(SHAPE, [(0, 1), (2, 3)]), start=other)


def test_a_fit_to_round_off_says_optimal():
    """On consistent measurements f falls geometrically towards 0, so its relative fall never gets small: a fit at
    f = 7·10⁻¹³ after its 300 iterations said 'user_limit' (a helper's audit). f ≥ 0 bounds its own gap."""
    import itertools
    import warnings

    import pandas as pd

    import mmopt
    from mmopt.records import Domain
    from mmopt.synth import aim
    g = np.random.default_rng(0)
    n = 400
    a = g.choice(["x", "y", "z"], n, p=[0.5, 0.3, 0.2])
    b = np.where(a == "x", g.choice([0, 1], n, p=[0.8, 0.2]), g.choice([0, 1], n, p=[0.3, 0.7]))
    df = pd.DataFrame({"a": a, "b": b, "c": g.uniform(0, 30, n), "d": g.choice(["p", "q"], n)})
    D = Domain.from_json({"attributes": [{"name": "a", "categories": ["x", "y", "z"]},
                                         {"name": "b", "categories": [0, 1]}, {"name": "c", "edges": [0, 10, 20, 30]},
                                         {"name": "d", "categories": ["p", "q"]}]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        s = aim(df, D, list(itertools.combinations(range(4), 2)), mmopt.Privacy(10.0, 1e-6), seed=0,
                estimator="junction")
    fit = s.details["estimator"]
    assert fit["loss"] <= 1e-7 and fit["status"] == "optimal"
