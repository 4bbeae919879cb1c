"""mmopt.records.pgm: residual measurements as mbi measurements, and Private-PGM's marginals (skipped without mbi)."""

import sys
import warnings

import numpy as np
import pytest

import mmopt
from mmopt.records import pgm
from mmopt.structured import residual as rp

SHAPE = (3, 2, 4)
SETS = [(0, 1), (1, 2)]
NAMES = ("a", "b", "c")


def _measure(x, privacy, rng=0):
    W = rp.marginal_workload(SHAPE, SETS)
    return rp.measure(rp.plan(W).strategy, x, privacy, rng=rng)


def test_without_mbi_the_import_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "mbi", None)  # import mbi now raises ImportError
    m = _measure(np.ones(24), mmopt.Privacy(1.0, 1e-6))
    with pytest.raises(ImportError, match=r"mmopt\[pgm\]"):
        pgm.pgm_marginals(m, NAMES)


@pytest.mark.parametrize("bad, kwargs, err, needle", [
    ("none", {}, ValueError, "'source' parameter of pgm_marginals must be noisy"),
    ("batch", {}, ValueError, "'source' parameter of pgm_marginals must hold one draw"),
    ("names", {"names": ("a", "a", "c")}, ValueError, "3 distinct attribute names"),
    # pgm_marginals' parameter is 'source' (a release or its measurements); the refusals named 'measurements'
    ("type", {}, TypeError, "'source' parameter of pgm_marginals must be a RecordsRelease or its .measurements"),
    ("iters", {"iters": 0}, ValueError, "'iters' parameter of pgm_marginals"),
])
def test_refusals(bad, kwargs, err, needle):
    x = np.arange(24.0)
    W = rp.marginal_workload(SHAPE, SETS)
    A = rp.plan(W).strategy
    source = {"none": rp.measure(A, x), "batch": rp.measure(A, x, mmopt.Privacy(1.0, 1e-6), size=2),
              "type": x}.get(bad, rp.measure(A, x, mmopt.Privacy(1.0, 1e-6)))
    with pytest.raises(err, match=needle):
        pgm.pgm_marginals(source, kwargs.pop("names", NAMES), **kwargs)


@pytest.fixture(scope="module")
def mbi():
    mbi = pytest.importorskip("mbi")
    warnings.filterwarnings("ignore", message="JAX .*", category=UserWarning)
    return mbi


def test_queries_reproduce_the_noiseless_measurements(mbi):
    """ResidualQuery on the true marginal = c_S (⊗Bᵢ) m_S, as rp.measure computes it (the oracle)."""
    import jax

    x = np.random.default_rng(0).integers(0, 30, 24).astype(float)
    m = _measure(x, mmopt.Privacy(1.0, 1e-6))
    exact = rp.measure(m.strategy, x).values
    counts = rp.marginal_counts(x, SHAPE, m.strategy.subsets)
    ms = pgm.to_mbi_measurements(m, NAMES)
    assert len(ms) == len(m.strategy.subsets) - 1  # every non-empty subset; the total is PGM's known_total
    domain = mbi.Domain(NAMES, SHAPE)
    with jax.enable_x64(True):
        for meas in ms:
            S = tuple(NAMES.index(a) for a in meas.clique)
            f = mbi.Factor(domain.project(meas.clique), counts[S])
            assert np.allclose(np.asarray(meas.query(f)), exact[S].ravel(), atol=1e-9)
            assert meas.stddev == pytest.approx(m.noise_scale)
            assert meas.query.op_norm_sq() == pytest.approx(m.strategy.weights[m.strategy.index[S]] ** 2)


def test_pgm_is_least_squares_when_that_is_already_non_negative(mbi):
    """PGM projects the least-squares answer onto consistent non-negative marginals (module docstring): with
    large counts and little noise the LS marginals are inside, so PGM must return them."""
    x = np.random.default_rng(1).integers(50, 100, 24).astype(float)
    m = _measure(x, mmopt.Privacy(1.0, 1e-6), rng=2)
    ls = rp.reconstruct_all(m, SETS)
    assert min(v.min() for v in ls.values()) > 0
    est = pgm.pgm_marginals(m, NAMES, SETS, iters=1500)
    for A in SETS:
        assert np.allclose(est.marginals[A], ls[A], rtol=1e-5, atol=1e-3)
    assert est.total == pytest.approx(float(rp.reconstruct(m, ())))


def test_small_epsilon_gives_consistent_non_negative_marginals(mbi):
    x = np.zeros(24)
    x[:3] = [40.0, 5.0, 1.0]  # sparse: least squares goes negative at ε = 0.1
    m = _measure(x, mmopt.Privacy(0.1, 1e-6), rng=3)
    assert min(v.min() for v in rp.reconstruct_all(m, SETS).values()) < 0
    est = pgm.pgm_marginals(m, NAMES, SETS, iters=500)
    ab, bc = est.marginals[(0, 1)], est.marginals[(1, 2)]
    assert ab.min() >= 0 and bc.min() >= 0
    assert np.allclose(ab.sum(axis=0), bc.sum(axis=1), rtol=1e-6, atol=1e-6)  # the shared marginal on b
    assert ab.sum() == pytest.approx(est.total) and bc.sum() == pytest.approx(est.total)
    syn = est.synthetic(seed=0)
    state = np.random.get_state()[1].copy()  # noqa: NPY002 — synthetic must leave the global state alone
    again = est.synthetic(seed=0)
    assert syn.equals(again) and np.array_equal(np.random.get_state()[1], state)  # noqa: NPY002
    assert list(syn.columns) == list(NAMES) and len(syn) == max(1, round(est.total))  # the docstring: rounded
    assert syn["c"].between(0, 3).all()
    with pytest.raises(ValueError, match="labels=True needs the records domain"):
        est.synthetic(labels=True)


def test_model_size_is_refused_before_fitting(mbi):
    m = _measure(np.ones(24), mmopt.Privacy(1.0, 1e-6))
    with pytest.raises(ValueError, match="max_model_mb"):
        pgm.pgm_marginals(m, NAMES, max_model_mb=1e-6)


def test_from_a_records_release_with_labels(mbi):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("opendp")
    from mmopt.records import Domain, marginal_counts, release_marginals

    D = Domain.from_json({"attributes": [{"name": "sex", "categories": ["F", "M"]},
                                         {"name": "age", "edges": [0, 18, 65, "inf"]}]})
    df = pd.DataFrame({"sex": ["F", "M", "M"] * 40, "age": [30.0, 70.0, 12.0] * 40})
    r = release_marginals(df, D, 2, mmopt.Privacy(1.0, 1e-6))
    est = pgm.pgm_marginals(r, iters=300)
    assert list(est.marginals) == [(0, 1)] and est.marginals[(0, 1)].shape == (2, 3)
    syn = est.synthetic(rows=10, seed=1, labels=True, bins="labels")
    assert set(syn["sex"]) <= {"F", "M"} and set(syn["age"]) <= {"[0, 18)", "[18, 65)", "[65, inf]"}
    # labels=True wrote bin labels only, which counting drops as values outside the domain: the synthetic rows
    # counted again were 0 in every binned attribute. By default they now hold each bin's left edge and count again
    syn = est.synthetic(rows=200, seed=1, labels=True)
    assert set(syn["age"]) <= {0.0, 18.0, 65.0}
    again = marginal_counts(syn, D, [("sex", "age")])[(0, 1)]
    codes = est.synthetic(rows=200, seed=1)  # the same draw as cell indices
    cells = np.zeros((2, 3))
    np.add.at(cells, (codes["sex"].to_numpy(), codes["age"].to_numpy()), 1)
    assert again.sum() == 200 and np.array_equal(again, cells)
    with pytest.raises(ValueError, match="'bins' parameter of PGMEstimate.synthetic"):
        est.synthetic(rows=5, labels=True, bins="edges")


def test_laplace_release_weighted_marginals_fit_to_least_squares(mbi):
    """An ε-DP release measures weighted marginals; PGM takes them as marginal measurements y_S/θ_S and, with
    large counts and little noise, returns the least-squares marginals."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("opendp")
    from mmopt.records import Domain, release_marginals
    from mmopt.structured.residual import marginals as wm

    D = Domain.from_json({"attributes": [{"name": "a", "categories": ["x", "y", "z"]},
                                         {"name": "b", "categories": ["u", "v"]},
                                         {"name": "c", "categories": [0, 1, 2, 3]}]})
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.choice(["x", "y", "z"], 20_000), "b": rng.choice(["u", "v"], 20_000),
                       "c": rng.integers(0, 4, 20_000)})
    with pytest.warns(UserWarning, match="seeded generator"):
        r = release_marginals(df, D, 2, mmopt.Privacy(1.0), seed=0)
    assert isinstance(r.strategy, wm.WeightedMarginals)
    ms = pgm.to_mbi_measurements(r.measurements, D.names)
    assert len(ms) == sum(1 for S in r.strategy.subsets if S)
    est = pgm.pgm_marginals(r, iters=1500)
    for A in r.workload.sets:
        assert np.allclose(est.marginals[A], r.marginals[A], rtol=1e-4, atol=0.05)
    assert est.total == pytest.approx(float(sum(r.marginals[(0, 1)].ravel())), rel=1e-9)


def test_names_other_than_the_releases_are_refused():
    # the model named its axes by 'names' while synthetic(labels=True) read them by the domain's: ("b", "a") put b's
    # values under a's label (a helper's probe)
    pd = pytest.importorskip("pandas")
    pytest.importorskip("opendp")
    from mmopt.records import Domain, release_marginals

    D = Domain.from_json({"attributes": [{"name": "a", "categories": ["p", "q", "r"]},
                                         {"name": "b", "categories": ["x", "y", "z"]}]})
    df = pd.DataFrame({"a": ["p", "q", "r"] * 10, "b": ["x", "z", "z"] * 10})
    with pytest.warns(UserWarning, match="seeded generator"):
        r = release_marginals(df, D, [("a", "b")], mmopt.Privacy(10.0, 1e-6), seed=0)
    for names in (("b", "a"), ("x", "y"), "ab"):
        with pytest.raises(ValueError, match=r"'names' parameter of pgm_marginals must be the release's own"):
            pgm.pgm_marginals(r, names=names)


@pytest.mark.parametrize("rows, err", [(0, ValueError), (-3, ValueError), (2.7, TypeError), ("5", TypeError),
                                       (True, TypeError), (10**11, ValueError)])
def test_synthetic_rows_are_checked(rows, err):
    # mbi read 0 as its default, -3 as one row, 2.7 as 2 and "5" as 5 (a helper's probe); checked before sampling
    est = pgm.PGMEstimate({}, 1990.63, 1, 0.0, None, ("a",))
    with pytest.raises(err, match="'rows' parameter of PGMEstimate.synthetic"):
        est.synthetic(rows=rows)


def test_synthetic_rows_default_to_the_rounded_total(mbi):
    est = pgm.pgm_marginals(_measure(np.full(24, 83.0), mmopt.Privacy(1e4, 1e-6)), NAMES, iters=200)
    assert est.total == pytest.approx(1992.0, abs=0.5)
    assert len(est.synthetic(seed=0)) == round(est.total)


@pytest.mark.parametrize("kw, err", [({"seed": -1}, ValueError), ({"seed": 1.5}, TypeError),
                                     ({"seed": 2**128}, ValueError), ({"labels": "no"}, TypeError)])
def test_synthetic_seed_and_labels_are_checked(kw, err):
    # numpy's bare "Seed must be between 0 and 2**32 - 1" before, and labels="no" was read as True
    est = pgm.PGMEstimate({}, 10.0, 1, 0.0, None, ("a",))
    with pytest.raises(err, match=f"'{next(iter(kw))}' parameter of PGMEstimate.synthetic"):
        est.synthetic(rows=5, **kw)


def test_unseeded_synthetic_draws_differ_and_large_seeds_repeat(mbi):
    """The global state was restored after every call, so each unseeded call drew the same rows (a helper's audit);
    seeds past 2³² were numpy's error."""
    est = pgm.pgm_marginals(_measure(np.full(24, 83.0), mmopt.Privacy(1.0, 1e-6)), NAMES, iters=50)
    state = np.random.get_state()[1].copy()  # noqa: NPY002
    a, b = est.synthetic(200), est.synthetic(200)
    assert not a.equals(b) and np.array_equal(np.random.get_state()[1], state)  # noqa: NPY002
    big = est.synthetic(200, seed=2**40)
    assert big.equals(est.synthetic(200, seed=2**40)) and not big.equals(est.synthetic(200, seed=2**41))
    assert est.synthetic(200, seed=3).equals(est.synthetic(200, seed=3))
