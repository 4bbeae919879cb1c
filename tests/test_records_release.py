"""mmopt.records.release_marginals: the dense oracles (residual reconstruct, least squares), the variance by
Monte Carlo, the privacy report, pandas = Dask bit for bit, and refusals before the draw."""

import itertools
import math
import warnings

import numpy as np
import pandas as pd
import pytest

import mmopt
from mmopt._base.opendp import charged_sensitivity
from mmopt.accounting._zcdp import gaussian_rho, max_rho
from mmopt.records import Attribute, Domain, RecordsRelease, marginal_counts, release_marginals
from mmopt.records import mechanism as rm
from mmopt.records import release as rr
from mmopt.structured import residual

pytest.importorskip("opendp")

D = Domain((Attribute("sex", categories=("F", "M")),
            Attribute("edu", categories=("none", "school", "degree")),
            Attribute("age", edges=(0, 25, 45, 65, 120)),
            Attribute("kids", categories=(0, 1))))  # N = 48 cells
GAUSS = mmopt.Privacy(1.0, 1e-9)
SEEDED = "numpy's seeded generator"


def _records(n, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"sex": rng.choice(["F", "M"], n), "edu": rng.choice(["none", "school", "degree", "?"], n),
                         "age": rng.uniform(0, 125, n), "kids": rng.integers(0, 2, n)})


def _dense(df):
    c = marginal_counts(df, D, [(0, 1, 2, 3)])[(0, 1, 2, 3)]
    assert c.shape == D.shape
    return c.astype(float)


def _residual(workload, privacy):
    """The residual plan for a k-way workload on D: what the release measures under Gaussian noise, and what these
    tests ask for explicitly under Laplace noise (whose default is the best strategy found)."""
    sets = [S for S in itertools.combinations(range(4), workload)]
    return residual.plan(residual.marginal_workload(D.shape, sets), norm=privacy.sensitivity_norm)


def _release(df, workload=2, privacy=GAUSS, **kw):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=f".*{SEEDED}", category=UserWarning)
        return release_marginals(df, D, workload, privacy, **kw)


@pytest.fixture(scope="module")
def df():
    return _records(400)


@pytest.mark.parametrize("privacy", [GAUSS, mmopt.Privacy(0.5)])
def test_same_noise_as_dense_measure_and_reconstruct(df, privacy):
    r = _release(df, 2, privacy, seed=3, strategy=_residual(2, privacy))
    A, x = r.strategy, _dense(df)
    exact = residual.measure(A, x).values  # noise-free measurements from the dense data vector
    z = np.random.default_rng(3)
    noise = (z.normal if privacy.noise == "gaussian" else z.laplace)(0.0, r.noise_scale, A.n_rows)
    got = np.concatenate([r.measurements.values[S].ravel() for S in A.subsets])
    want = np.concatenate([exact[S].ravel() for S in A.subsets]) + noise
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9 * (1 + np.abs(want).max()))
    dense = residual.reconstruct_all(residual.Measurements(A, {S: r.measurements.values[S] for S in A.subsets},
                                                           r.noise, r.noise_scale), r.workload.sets)
    assert set(r.marginals) == set(r.workload.sets) and len(r.marginals) == 6
    for S, est in r.marginals.items():
        np.testing.assert_array_equal(est, dense[S])
    assert r.sampler == "numpy-seeded" and isinstance(r, RecordsRelease)


def test_estimates_are_dense_least_squares(df):
    r = _release(df, [("sex", "edu", "age"), ("age", "kids")], seed=1)
    A = r.strategy
    M = A.to_implicit().dense()
    assert M.shape == (A.n_rows, math.prod(D.shape))
    y = np.concatenate([r.measurements.values[S].ravel() for S in A.subsets])
    xhat = np.linalg.lstsq(M, y, rcond=None)[0].reshape(D.shape)
    P = np.linalg.pinv(M)
    for S, est in r.marginals.items():
        np.testing.assert_allclose(est, xhat.sum(axis=tuple(i for i in range(4) if i not in S)), atol=1e-8)
        # every cell's variance, densely: s²·diag(Q P Pᵀ Qᵀ) for the marginal's query matrix Q
        Q = np.stack([np.broadcast_to(np.expand_dims(np.eye(math.prod(D.shape[i] for i in S))[k].reshape(
            [D.shape[i] for i in S]), [i for i in range(4) if i not in S]), D.shape).ravel()
            for k in range(math.prod(D.shape[i] for i in S))])
        var = r.noise_scale**2 * np.einsum("ij,ij->i", Q @ P, Q @ P)
        np.testing.assert_allclose(var, r.cell_variance[S], rtol=1e-9)


def test_variance_matches_evaluate(df):
    r = _release(df, 2, seed=0)
    rep = residual.evaluate(r.workload, r.strategy, norm="l2")  # unit privacy: Δ²·Σ r N/(N_A² c²)
    for j, S in enumerate(r.workload.sets):
        assert r.cell_variance[S] == pytest.approx(r.noise_scale**2 * rep.per_marginal_variance[j] / rep.sensitivity**2,
                                              rel=1e-12)
    # the default plan is the optimal one: its total meets the SVD bound, at the noise actually drawn
    total = sum(r.cell_variance[S] * math.prod(D.shape[i] for i in S) for S in r.workload.sets)
    bound = residual.svd_bound(r.workload) * r.noise_scale**2 / r.sensitivity**2
    # r.sensitivity is the d_in the noise was calibrated to: Δ·(1 + 1e-7) and the charged rounding of A x (9.5e-7;
    # mmopt.records.exact_answers), so the bound formed from it sits (d_in/Δ)² ≈ 1 + 2.1e-6 below the total
    assert total == pytest.approx(bound, rel=3e-6)


@pytest.mark.parametrize("privacy, kurtosis", [(GAUSS, 3.0), (mmopt.Privacy(1.0), 6.0)])
def test_variance_by_monte_carlo(df, privacy, kurtosis):
    r = _release(df, 2, privacy, seed=0, strategy=_residual(2, privacy))
    counts = marginal_counts(df, D, r.workload.sets)
    R = 3000
    sim = residual.measure(r.strategy, counts, privacy, rng=11, size=R)
    ratio = (sim.noise_scale / r.noise_scale) ** 2
    for S in r.workload.sets:
        err = residual.reconstruct(sim, S) - counts[S]
        mse = float(np.mean(err**2))
        # the mean over draws of one cell's squared error has sd ≤ var·√((κ−1)/R) (κ ≤ 6 for sums of Laplace
        # variables, 3 for Gaussian); averaging over correlated cells can only shrink it: 5 sd
        tol = 5 * math.sqrt((kurtosis - 1) / R)
        assert abs(mse / (r.cell_variance[S] * ratio) - 1) < tol, S


def test_privacy_report():
    df = _records(200, 5)
    g = _release(df, 1, GAUSS)
    assert g.sampler == "opendp" and g.noise == "gaussian" and (g.epsilon, g.delta) == (1.0, 1e-9)
    delta2 = residual.sensitivity(g.strategy, "l2").value
    assert delta2 <= g.sensitivity <= delta2 * (1 + 2e-6)  # d_in: the 1e-7 slack and the rounding charge
    # OpenDP verifies Gaussian noise through zCDP (ρ ↦ (ε, δ)), a little looser than the analytic σ
    assert g.noise_scale >= GAUSS.noise_scale(g.sensitivity)
    # ρ at the sensitivity charged on OpenDP's lattice (mmopt._base.opendp.charged_sensitivity): ≤ 2⁻²⁸ more
    assert g.rho == pytest.approx(g.sensitivity**2 / (2 * g.noise_scale**2), rel=2.0**-28)
    assert g.rho == gaussian_rho(charged_sensitivity(g.sensitivity), g.noise_scale)
    assert max_rho(1.0, 1e-9) * (1 - 1e-3) <= g.rho <= max_rho(1.0, 1e-9) * (1 + 1e-12)
    lap = _release(df, 1, mmopt.Privacy(0.5))
    assert (lap.noise, lap.rho, lap.delta) == ("laplace", None, 0.0)
    assert lap.noise_scale == pytest.approx(lap.strategy.sensitivity("l1") / 0.5, rel=2e-6)  # d_in/ε (d_in above)


def test_seed_reproducible_warns_and_out_of_domain_records_change_nothing(df):
    with pytest.warns(UserWarning, match="anyone who knows the seed can remove the noise"):
        a = release_marginals(df, D, 2, GAUSS, seed=9)
    extra = pd.DataFrame({"sex": ["F", None], "edu": ["school", "none"], "age": [30.0, 40.0], "kids": [7, 0]})
    b = _release(pd.concat([df, extra], ignore_index=True), 2, seed=9)  # both extra records are dropped
    c = _release(df, 2, seed=10)
    for S in a.marginals:
        np.testing.assert_array_equal(a.marginals[S], b.marginals[S])
        assert not np.array_equal(a.marginals[S], c.marginals[S])


@pytest.mark.filterwarnings("ignore:The inplace keyword")  # dask.dataframe under pandas 3.1
def test_pandas_and_dask_release_bit_identical(df, tmp_path):
    dd = pytest.importorskip("dask.dataframe")
    distributed = pytest.importorskip("distributed")
    want = _release(df, 2, seed=4)
    ddf = dd.from_pandas(df, npartitions=4)
    with (distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None)
          as cluster, distributed.Client(cluster)):
        ddf.to_parquet(tmp_path / "parts")
        runs = [_release(ddf, 2, seed=4), _release(dd.read_parquet(tmp_path / "parts"), 2, seed=4)]
    runs.append(_release(tmp_path / "parts", 2, seed=4, batch_size=33))
    for got in runs:
        for S in want.measurements.values:
            assert np.array_equal(got.measurements.values[S], want.measurements.values[S])
        for S in want.marginals:
            assert np.array_equal(got.marginals[S], want.marginals[S])


def test_table(df):
    r = _release(df, [("sex", "age"), ("kids",)], seed=2)
    t = r.table()
    assert list(t.columns) == ["marginal", "sex", "age", "kids", "estimate", "std_error"]
    assert len(t) == 2 * 4 + 2
    row = t[(t["marginal"] == "sex×age") & (t["sex"] == "M") & (t["age"] == "[45, 65)")]
    assert row["estimate"].item() == r.marginals[(0, 2)][1, 2]
    assert row["std_error"].item() == pytest.approx(math.sqrt(r.cell_variance[(0, 2)]))
    assert t.loc[t["marginal"] == "kids", "sex"].isna().all()
    codes = r.table(names=False)
    assert codes["marginal"].iloc[0] == "(0, 2)" and codes["age"].dtype == "Int64"
    assert codes.loc[codes["marginal"] == "(3,)", "kids"].tolist() == [0, 1]


def test_refusals_before_the_draw(df, monkeypatch):
    def never(*a, **k):
        raise AssertionError("noise drawn")

    monkeypatch.setattr(rr._opendp, "measure", never)
    with pytest.raises(ValueError, match="'epsilon' parameter of Privacy must be a float in the range"):
        release_marginals(df, D, 2, mmopt.Privacy(0.0))
    with pytest.raises(ValueError, match="'epsilon' parameter of Privacy must be a float in the range"):
        release_marginals(df, D, 2, mmopt.Privacy(-1.0))
    with pytest.raises(TypeError, match="'privacy' parameter of release_marginals must be a Privacy"):
        release_marginals(df, D, 2, 1.0)
    with pytest.raises(ValueError, match="has no column 'age'"):
        release_marginals(df.drop(columns="age"), D, 2, GAUSS)
    with pytest.raises(ValueError, match="column 'sex' of dtype number"):
        release_marginals(df.assign(sex=1.0), D, 2, GAUSS)
    with pytest.raises(ValueError, match=r"'workload' parameter of release_marginals must be an integer in \[1, 4\]"):
        release_marginals(df, D, 5, GAUSS)
    with pytest.raises(ValueError, match="names attribute 'income', which is not in the domain"):
        release_marginals(df, D, [("income", "sex")], GAUSS)
    # a bare tuple of names released the two 1-way marginals where the 2-way one was meant as often
    with pytest.raises(ValueError, match=r"reads as 2 sets of one attribute.*\[\('sex', 'age'\)\] for the one 2-way "
                                         r"marginal, or \['sex', 'age'\] for the 2 one-way"):
        release_marginals(df, D, ("sex", "age"), GAUSS)
    assert marginal_counts(df, D, ["sex", "age"]).keys() == {(0,), (2,)}  # a list: one set per name, as documented
    small = residual.plan(residual.marginal_workload(D.shape, [(0, 1)])).strategy
    with pytest.raises(ValueError, match=r"does not support the workload.*residual subspaces of \[\(2,\)"):
        release_marginals(df, D, [("sex", "age")], GAUSS, strategy=small)
    with pytest.raises(ValueError, match=r"is over shape \(2, 3\)"):
        release_marginals(df, D, 1, GAUSS, strategy=residual.plan(residual.marginal_workload((2, 3), [(0, 1)])))
    with pytest.raises(TypeError, match="'strategy' parameter of release_marginals must be measurable from records"):
        release_marginals(df, D, 1, GAUSS, strategy="identity")
    with pytest.raises(ValueError, match="'seed' parameter of release_marginals must be an integer >= 0"):
        release_marginals(df, D, 1, GAUSS, seed=-1)
    with pytest.raises(ValueError, match=r"workload' parameter of release_marginals is over shape \(2, 2\)"):
        release_marginals(df, D, residual.marginal_workload((2, 2), [(0, 1)]), GAUSS)


def test_nothing_raises_after_the_draw(df, monkeypatch):
    def broken(*a, **k):
        raise ValueError("simulated failure")

    monkeypatch.setattr(rm, "reconstruct_all", broken)
    with pytest.warns(RuntimeWarning, match="budget is spent.*simulated failure"):
        r = _release(df, 1, seed=0)
    assert r.marginals == {} and len(r.measurements.values) == len(r.strategy.subsets)


def test_an_attribute_named_like_a_table_column_is_refused_before_any_noise():
    """Attributes named 'estimate', 'marginal' or 'lower' lost their labels to the table's own columns (a helper's
    probe: the marginal column showed category labels, estimate's labels became numbers); refused, nothing spent."""
    acc = mmopt.Accountant(mmopt.Privacy(2.0, 1e-6), "zcdp")
    for name in ("marginal", "estimate", "std_error", "lower", "upper"):
        domain = Domain((Attribute(name, categories=("a", "b")), Attribute("k", categories=(0, 1))))
        with pytest.raises(ValueError, match=f"'domain' parameter of release_marginals names '{name}', a column"):
            release_marginals(pd.DataFrame({name: ["a", "b"], "k": [0, 1]}), domain, 1, mmopt.Privacy(1.0, 1e-6),
                              accountant=acc)
    assert acc.spends == ()


def test_a_seeded_simulation_is_not_recorded_as_a_release(df):
    """seed= with accountant= was charged and recorded as source "release" ("OpenDP drew the noise") though numpy's
    seeded generator drew it (a helper's finding): refused before anything is read or spent."""
    acc = mmopt.Accountant(mmopt.Privacy(2.0, 1e-6), "zcdp")
    with pytest.raises(ValueError, match="seed=0 draws numpy's seeded noise.*Drop 'accountant' to simulate"):
        release_marginals(df, D, 1, mmopt.Privacy(1.0, 1e-6), seed=0, accountant=acc)
    assert acc.spends == ()


def test_a_label_without_an_accountant_is_refused_before_anything_is_read(df):
    """label= names a ledger entry: without an accountant release_marginals and release_grouping_sets dropped it
    without a word (mmopt.synth refused it already; a helper's finding). Refused by the one shared check, before
    the records are read (object() is no source) or anything drawn; with an accountant it names the entry."""
    from mmopt._base import opendp as od
    from mmopt.groupby import release_grouping_sets
    from mmopt.hierarchy import release_grouping_sets as hierarchy_sets
    calls = {"release_marginals": lambda src, **k: release_marginals(src, D, 1, GAUSS, **k),
             "release_grouping_sets": lambda src, **k: release_grouping_sets([("sex",), ()], src, D, GAUSS, **k),
             "hierarchy": lambda src, **k: hierarchy_sets(src, D, [("region",), ("edu",)], GAUSS, leaf="edu",
                                                          levels={"region": ["R", "R", "S"]}, **k)}
    draws = od.DRAWS
    for name, call in calls.items():
        caller = "release_grouping_sets" if name == "hierarchy" else name
        with pytest.raises(ValueError, match=f"The 'label' parameter of {caller} names the run's entry in an "
                                             "accountant's ledger. Got label='mine' without 'accountant'; pass "
                                             "accountant=... too, or drop 'label'."):
            call(object(), label="mine")
    assert od.DRAWS == draws
    acc = mmopt.Accountant(mmopt.Privacy(10.0, 1e-5))
    for call in calls.values():
        call(df, label="mine", accountant=acc)
    assert [s.label for s in acc.spends] == ["mine"] * 3 and od.DRAWS == draws + 3


@pytest.mark.parametrize("composition", ["basic", "zcdp", "pld"])
def test_remaining_spends_what_the_accountant_has_left_in_a_records_release(df, composition):
    """The accountant's refusal told a records release to pass privacy='remaining' (as Accountant.release takes it),
    which release_marginals and mmopt.sql then refused as "must be a Privacy ... Got str" (a newcomer's audit).
    The ledger entry is the one Accountant.release's own "remaining" writes (an independent, dense release)."""
    from mmopt.groupby import release_grouping_sets
    total = mmopt.Privacy(1.0, 1e-6)
    acc, ref = mmopt.Accountant(total, composition), mmopt.Accountant(total, composition)
    for a in (acc, ref):
        release_marginals(df, D, 1, mmopt.Privacy(0.6, 1e-7), accountant=a)
    with pytest.raises(ValueError, match="privacy='remaining'"):  # the hint the refusal gives
        release_marginals(df, D, 1, mmopt.Privacy(1.0, 1e-6), accountant=acc)
    left = acc.remaining
    r = release_marginals(df, D, 1, "remaining", accountant=acc)
    ref.release(mmopt.workload.identity(4), mmopt.strategy.identity(4), [3.0, 1.0, 0.0, 2.0], "remaining")
    assert (r.epsilon, r.delta) == (left.epsilon, left.delta) and len(acc.spends) == len(ref.spends) == 2
    got, want = acc.spends[-1], ref.spends[-1]
    assert (got.source, got.status, got.delta) == ("release", "spent", want.delta)
    assert got.epsilon == pytest.approx(want.epsilon, rel=1e-12) and got.rho == pytest.approx(want.rho, rel=1e-12)
    if composition != "pld":  # under PLD the check assumes the analytic σ: some budget is left (Accountant.release)
        assert not acc.can_spend(mmopt.Privacy(1e-3, 1e-9), release=True)
    with pytest.raises(ValueError, match="'remaining', which spends what an accountant has left"):
        release_marginals(df, D, 1, "remaining")
    acc3 = mmopt.Accountant(total, composition)
    fresh = acc3.remaining
    g = release_grouping_sets([("sex",), ()], df, D, "remaining", accountant=acc3)
    assert (g.epsilon, g.delta) == (fresh.epsilon, fresh.delta) and len(acc3.spends) == 1
    pytest.importorskip("sqlglot")
    acc2 = mmopt.Accountant(total, composition)
    out = mmopt.sql("SELECT sex, COUNT(*) FROM t GROUP BY sex", df, D, "remaining", accountant=acc2)
    assert (out.release.epsilon, out.release.delta) == (fresh.epsilon, fresh.delta) and len(acc2.spends) == 1


def test_a_weighted_dict_is_the_weighted_workload_and_a_repeated_marginal_is_refused(df):
    """A dict's weights were dropped (iterating it gave its keys), and [("sex", "age"), ("age", "sex")] optimised
    one marginal at double weight while releasing it once (an auditor's finding): the dict is now the weighted
    workload, bit for bit, and the repeat is refused before any noise."""
    weights = {("sex", "age"): 3.0, ("kids",): 1.0}
    by_dict = _release(df, weights, seed=5)
    by_workload = _release(df, residual.marginal_workload(D.shape, [(0, 2), (3,)], weights=[3.0, 1.0]), seed=5)
    plain = _release(df, list(weights), seed=5)
    for A in [(0, 2), (3,)]:
        np.testing.assert_array_equal(by_dict.marginals[A], by_workload.marginals[A])
    se = {A: by_dict.table().query("marginal == @A").std_error.max() for A in ["sex×age", "kids"]}
    se_plain = {A: plain.table().query("marginal == @A").std_error.max() for A in ["sex×age", "kids"]}
    # the weight moves accuracy to the heavier marginal, away from the lighter one
    assert se["sex×age"] < se_plain["sex×age"] and se["kids"] > se_plain["kids"]
    with pytest.raises(ValueError, match=r"'workload' parameter of release_marginals names the marginal "
                                         r"\('sex', 'age'\) twice \(also as \('age', 'sex'\)\)"):
        release_marginals(df, D, [("sex", "age"), ("age", "sex")], GAUSS)
    with pytest.raises(ValueError, match=r"'workload\[\('sex', 'age'\)\]' parameter of release_marginals .* Got -1\.0"):
        release_marginals(df, D, {("sex", "age"): -1.0}, GAUSS)


def test_a_marginal_asked_by_names_or_unsorted_says_the_key_to_use(df):
    """marginals[("kids", "sex")] and marginals[(3, 0)] raised a bare KeyError (the key is (0, 3), sorted indices,
    axes in that order): the KeyError names it; it is never guessed (an unsorted key read back would swap axes)."""
    import pickle
    r = _release(df, [(0, 3), (1,)], seed=0)
    for key in [("kids", "sex"), (3, 0), ("kids", 0)]:
        for table in (r.marginals, r.cell_variance):
            with pytest.raises(KeyError, match=r"use \(0, 3\) \(its axes in that order: sex, kids\)"):
                table[key]
    with pytest.raises(KeyError, match=r"'edu': marginals are keyed .* use \(1,\)"):
        r.marginals["edu"]
    # floats are no indices: (3.9, 0) is not read as (3, 0), inf is a KeyError like any other (not an OverflowError)
    for missing in [(0, 1), ("sex", "age"), ("nope",), 2.5, (0, 0), (3.9, 0), (0.5, 3), float("inf"), float("nan")]:
        with pytest.raises(KeyError, match=r"no such marginal was released; .* e\.g\. \[\(0, 3\), \(1,\)\]"):
            r.marginals[missing]
    assert r.marginals[(0, 3)].shape == (2, 2) and r.marginals.get((3, 0)) is None and (3, 0) not in r.marginals
    again = pickle.loads(pickle.dumps(r.marginals))
    assert again.names == ("sex", "edu", "age", "kids") and sorted(again) == [(0, 3), (1,)]
    with pytest.raises(KeyError, match=r"use \(0, 3\)"):
        again[(3, 0)]


def test_a_dense_strategy_is_refused_naming_the_histogram_route(df):
    """A Laplace plan on a small marginal workload returns a dense Strategy: refused by the records release as not
    measurable from records, with no word of how to release it (without strategy= the release missed the plan's
    targets; an audit). The route the message names releases it."""
    W = mmopt.workload.marginals(D.shape, attributes=[(0, 1), (3,)])
    A = mmopt.strategy.identity(W.domain_size)
    with pytest.raises(TypeError, match=r"Got Strategy instead\. A dense Strategy .* is released on the histogram: "
                                        r"x = mmopt\.records\.marginal_counts\(records, domain, "
                                        r"\[tuple\(range\(len\(domain\.attributes\)\)\)\]\)"):
        _release(df, [(0, 1), (3,)], mmopt.Privacy(1.0), strategy=A)
    x = marginal_counts(df, D, [tuple(range(len(D.attributes)))])[(0, 1, 2, 3)]
    out = mmopt.release(W, A, x, mmopt.Privacy(1.0))
    assert out.estimate.shape == (48,) and np.isfinite(out.estimate).all()
