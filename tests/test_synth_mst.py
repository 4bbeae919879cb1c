"""MST (mmopt.synth.mst): the ledger adds up exactly, selections see only paid quantities, reconstruction is exact
as the noise vanishes, sampling follows the tree, and the rows are labelled by the domain."""

import ast
import itertools
import warnings
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import mmopt
from mmopt.accounting import epsilon_of_rho, gaussian_rho, max_rho
from mmopt.accounting._zcdp import round_up
from mmopt.adaptive._noise import Noise
from mmopt.records import Attribute, Domain, marginal_counts
from mmopt.synth import curator as cu
from mmopt.synth import mst, workload_error

D = Domain((Attribute("a", categories=("x", "y", "z")), Attribute("b", categories=(0, 1)),
            Attribute("c", edges=(0, 10, 20, 30, 40)), Attribute("d", categories=("p", "q"))))


def _records(n=6000, seed=0):
    """A strongly tree-structured table a → b → c, a → d (the MST by exact scores is {ab, bc, ad})."""
    g = np.random.default_rng(seed)
    a = g.choice(3, n, p=[0.5, 0.3, 0.2])
    b = np.where(g.random(n) < 0.9, a % 2, 1 - a % 2)
    c = np.where(g.random(n) < 0.85, 2 * b + g.integers(0, 2, n), g.integers(0, 4, n))
    d = np.where(g.random(n) < 0.8, (a == 0).astype(int), (a != 0).astype(int))
    return pd.DataFrame({"a": np.array(["x", "y", "z"])[a], "b": b, "c": c * 10 + 5.0,
                         "d": np.array(["p", "q"])[d]})


def _run(df, epsilon, seed=0, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the seeded-noise warning
        return mst(df, D, mmopt.Privacy(epsilon, 1e-9), seed=seed, **kw)


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 10.0])
def test_the_ledger_adds_up_exactly_to_the_budget(epsilon):
    s = _run(_records(), epsilon)
    budget = max_rho(epsilon, 1e-9)
    total = sum(Fraction(st.rho) for st in s.steps)
    assert s.budget == budget and total <= Fraction(budget)
    assert total >= Fraction(budget) * (1 - Fraction(1, 10**9))          # the whole budget is used
    assert s.rho == round_up(total)
    assert s.epsilon == epsilon_of_rho(s.rho, 1e-9) and s.epsilon <= epsilon
    kinds = [st.kind for st in s.steps]
    assert kinds == ["gaussian"] + ["exponential"] * 3 + ["gaussian"]   # d = 4: three edges
    # mst.SPLIT: ρ/5 for the 1-way marginals, ρ/10 for the choices (ρ/30 each), the rest (≥ 7ρ/10) for the tree
    assert Fraction(s.steps[0].rho) <= Fraction(budget) / 5
    assert sum(Fraction(st.rho) for st in s.steps[1:4]) <= Fraction(budget) / 10
    assert Fraction(s.steps[4].rho) >= Fraction(budget) * 7 / 10 * (1 - Fraction(1, 10**9))
    for st in s.steps[1:4]:   # ε²/8 of the exponential mechanism, exactly as charged
        assert Fraction(st.rho) >= Fraction(st.scale) ** 2 / 8
    for st in (s.steps[0], s.steps[4]):   # OpenDP's Gaussian map at the strategy's Δ₂ (1 exactly, rounded up)
        assert 1.0 <= st.sensitivity <= 1.0 + 2e-6 and st.rho == gaussian_rho(st.sensitivity, st.scale)  # + rounding


def test_two_attributes_draw_no_choice_and_the_tree_takes_its_share():
    """The one edge of two attributes was chosen by an exponential mechanism over one candidate: 1/10 of ρ spent
    reading nothing (a helper's audit; AIM had the same waste, fixed earlier)."""
    df = _records()[["a", "b"]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        s = mst(df, Domain(D.attributes[:2]), mmopt.Privacy(1.0, 1e-9), seed=0)
    budget = Fraction(max_rho(1.0, 1e-9))
    assert [st.kind for st in s.steps] == ["gaussian", "gaussian"]
    assert Fraction(s.steps[1].rho) >= budget * 4 / 5 * (1 - Fraction(1, 10**9))
    assert s.marginal(("a", "b")).shape == (3, 2)


class _Recording(Noise):
    """numpy noise that records, at every draw, how many steps the curator's ledger held."""

    def __init__(self, ledger, seed=0):
        object.__setattr__(self, "backend", "numpy")
        object.__setattr__(self, "rng", np.random.default_rng(seed))
        object.__setattr__(self, "ledger", ledger)
        object.__setattr__(self, "calls", [])

    def add_gaussian(self, values, scale):
        self.calls.append(("gaussian", len(self.ledger), scale))
        return super().add_gaussian(values, scale)

    def exponential(self, scores, epsilon, sensitivity):
        self.calls.append(("exponential", len(self.ledger), epsilon))
        return super().exponential(scores, epsilon, sensitivity)


def test_every_draw_is_charged_before_it_is_made_and_a_spent_budget_draws_nothing():
    df = _records()
    cur = cu.Curator(df, D, 0.05, None)
    cur.noise = _Recording(cur.steps)
    est = cur.measure([(0,), (1,)], 0.02, "one")
    j = cur.select([(0, 1), (1, 2)], {(0, 1): np.zeros((3, 2)), (1, 2): np.zeros((2, 4))}, 0.02, "pick")
    assert j in (0, 1) and est.covers((0,)) and est.covers((1,)) and not est.covers((0, 1))
    assert [(k, n) for k, n, _ in cur.noise.calls] == [("gaussian", 1), ("exponential", 2)]
    assert cur.noise.calls[1][2] == cu.em_epsilon(0.02)
    for ask in (lambda: cur.measure([(2,)], 0.02, "too much"),
                lambda: cur.select([(0, 1)], {(0, 1): np.zeros((3, 2))}, 0.02, "too much")):
        with pytest.raises(ValueError, match="remains. Nothing was drawn"):
            ask()
    assert len(cur.noise.calls) == 2 and len(cur.steps) == 2


def test_no_algorithm_can_read_an_exact_count_outside_the_curator():
    """By structure: the curator's public surface returns only noisy or chosen things, and the algorithms never
    name the records' counts (an exact-error call planted in mst.py or aim.py would fail this test)."""
    public = {n for n in dir(cu.Curator(None, D, 1.0, None)) if not n.startswith("_")}
    assert public == {"budget", "compress", "compression", "measure", "noise", "remaining", "select", "select_gain",
                      "shape", "spent", "steps"}
    root = Path(cu.__file__).parent
    for name in ("mst.py", "aim.py"):
        if not (root / name).exists():
            continue
        tree = ast.parse((root / name).read_text(encoding="utf-8"))
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom | ast.Import) for a in n.names}
        assert not ({"marginal_counts", "count_codes", "_counts", "_exact", "_records"} & (names | attrs | imported))


def test_reconstruction_is_exact_as_the_noise_vanishes():
    df = _records()
    s = _run(df, 2e4)                       # ρ ≈ 2·10⁴: σ ≈ 0.006 on counts of hundreds
    assert sorted(s.details["edges"]) == [(0, 1), (0, 3), (1, 2)]     # the maximum spanning tree of the exact scores
    est = s.details["estimates"]
    true = marginal_counts(df, D, [(0,), (1,), (2,), (3,), *s.details["edges"]])
    for S, m in true.items():
        # the least-squares marginals are non-negative here, so both projections return them unchanged …
        np.testing.assert_allclose(s.marginal(S), est.marginal(S), atol=1e-6 * len(df))
        # … and they are the true ones within 6 standard deviations per cell (probability < 2e-9 each)
        assert np.abs(s.marginal(S) - m).max() <= 6 * np.sqrt(est.cell_variance(S))


def test_sampling_follows_the_tree_marginals():
    s = _run(_records(), 1.0)
    n = 40_000
    rows = s.records(n, seed=1)
    got = marginal_counts(rows.assign(c=rows["c"].cat.codes * 10 + 5.0,
                                      b=rows["b"].astype(int)), D, [(0,), *s.details["edges"]])
    # Pearson's χ² against the model's own tables; threshold: the 1 − 10⁻⁴ quantile (Bonferroni over 4 tables)
    for S, counts in got.items():
        expected = s.marginal(S) / s.model.total * n
        keep = expected > 0
        chi2 = float(((counts[keep] - expected[keep]) ** 2 / expected[keep]).sum())
        assert chi2 <= stats.chi2.ppf(1 - 1e-4, df=int(keep.sum()) - 1), (S, chi2)
        assert counts[~keep].sum() == 0                                  # never a cell the model excludes


def test_records_are_labelled_by_the_domain():
    s = _run(_records(), 1.0)
    rows = s.records(123)
    assert rows.shape == (123, 4) and rows.columns.tolist() == list(D.names)
    assert list(rows["a"].cat.categories) == ["x", "y", "z"]
    assert list(rows["c"].cat.categories) == [0.0, 10.0, 20.0, 30.0]  # each bin's left edge: counted again
    assert list(s.records(5, bins="labels")["c"].cat.categories) == list(D.attributes[2].labels)
    assert len(s.records()) == round(s.model.total)
    pd.testing.assert_frame_equal(s.records(50, seed=3), s.records(50, seed=3))
    with pytest.raises(ValueError, match="'n' parameter of Synthetic.records"):
        s.records(-1)
    with pytest.raises(ValueError, match="synthetic rows would need"):
        s.records(10**8)                       # 8·10⁸ entries: refused before allocating


def test_rows_with_bin_values_count_again_under_the_domain():
    """bins="values": the rows marginal_counts reads back are the rows drawn (the labels were dropped by the
    domain's value rule: all-zero counts, a helper's probe)."""
    s = _run(_records(), 1.0)
    labelled, valued = s.records(2000, seed=5, bins="labels"), s.records(2000, seed=5)  # values: the default
    assert list(valued["c"].cat.categories) == [0.0, 10.0, 20.0, 30.0]
    counts = marginal_counts(valued, D, [("c",)])[(2,)]
    expected = labelled["c"].cat.codes.value_counts().reindex(range(4), fill_value=0).to_numpy()
    np.testing.assert_array_equal(np.ravel(counts), expected)
    assert np.ravel(marginal_counts(labelled, D, [("c",)])[(2,)]).sum() == 0  # labels: outside the value rule
    with pytest.raises(ValueError, match="'bins' parameter of Synthetic.records"):
        s.records(5, bins="codes")


def test_the_model_and_its_rows_have_the_papers_workload_error():
    df = _records()
    s = _run(df, 10.0)
    W = list(itertools.combinations(range(4), 2))
    model = workload_error(df, s, D, W)
    rows = workload_error(df, s.records(len(df)), D, W)
    # the tree holds ab, bc, ad exactly up to noise; ac, bd, cd are implied. Sampling 6,000 rows adds about
    # √(cells/n) ≈ 0.03 of L1 per marginal, so the rows sit within that of the model
    assert 0 < model < 0.05 and abs(rows - model) < 0.06
    # M/n is undefined without rows: a zero table gave 1.0, like a real (worst) error
    with pytest.raises(ValueError, match="'synthetic' parameter of workload_error has no rows"):
        workload_error(df, df.iloc[:0], D, W)
    with pytest.raises(ValueError, match="'records' parameter of workload_error has no rows"):
        workload_error(df.iloc[:0], df, D, W)
    # bad frames were refused as marginal_counts' records, or by a bare KeyError / TypeError (a helper's probe)
    missing = df.drop(columns=[D.names[1]])
    with pytest.raises(ValueError, match=f"'records' parameter of workload_error has no column '{D.names[1]}'"):
        workload_error(missing, df, D, W)
    with pytest.raises(ValueError, match=f"'synthetic' parameter of workload_error has no column '{D.names[1]}'"):
        workload_error(df, missing, D, W)
    with pytest.raises(TypeError, match="'synthetic' parameter of workload_error must be a pandas DataFrame"):
        workload_error(df, df.values.tolist(), D, W)


def test_bad_input_is_refused_before_any_draw():
    df = _records(100)
    with pytest.raises(ValueError, match="delta > 0"):
        mst(df, D, mmopt.Privacy(1.0))
    with pytest.raises(TypeError, match="'privacy' parameter of mst"):
        mst(df, D, 1.0)
    with pytest.raises(TypeError, match="'domain' parameter of mst"):
        mst(df, {"a": 3}, mmopt.Privacy(1.0, 1e-9))
    with pytest.raises(ValueError, match="'seed' parameter of mst"):
        mst(df, D, mmopt.Privacy(1.0, 1e-9), seed=-1)
    with pytest.raises(ValueError, match=r"'workload' parameter of mst names the marginal \(0, 1\) twice"):
        mst(df, D, mmopt.Privacy(1.0, 1e-9), workload=[(0, 1), (1, 0)])  # its edges' weight doubled
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the seeded generator's
        s = mst(df, D, mmopt.Privacy(1.0, 1e-9), seed=0)
    with pytest.raises(ValueError, match="'seed' parameter of Synthetic.records"):  # numpy's bare words before
        s.records(3, seed=-1)


def test_refusals_of_the_records_name_mst_and_aim():
    """The records are first read by the curator's counts: a missing column was refused as a parameter of
    marginal_counts, a function the caller never called."""
    from mmopt.synth import aim, mst
    df = _records(60).drop(columns="d")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the seeded-noise warning
        with pytest.raises(ValueError, match="'records' parameter of mst has no column 'd'"):
            mst(df, D, mmopt.Privacy(1.0, 1e-9), seed=0)
        with pytest.raises(ValueError, match="'records' parameter of aim has no column 'd'"):
            aim(df, D, [(0, 1)], mmopt.Privacy(1.0, 1e-9), seed=0)


def test_a_default_row_count_past_the_cap_says_where_it_came_from():
    """At ε = 10⁻¹² the model's noisy total is ~10⁹: records() with no n blamed 'the n parameter', never passed."""
    s = _run(_records(60), 1e-12)
    if round(float(s.model.total)) > 10**8:
        with pytest.raises(ValueError, match="the model's total .* Pass n="):
            s.records()
    assert len(s.records(5)) == 5


def test_batches_draw_past_one_call_with_distinct_seeded_batches(monkeypatch):
    """records(n) refuses more rows than one call draws (rows_per_call); batches() yields them in parts, the first
    records(m, seed)'s rows, the others seeded by (seed, i): repeatable, and no batch repeats another."""
    from mmopt._base import validation as v
    from mmopt.synth.result import rows_per_call
    s = _run(_records(), 1.0)
    monkeypatch.setattr(v, "MAX_ALLOCATION_ENTRIES", 100 * (len(D.names) + 4))
    assert rows_per_call(len(D.names)) == 100
    with pytest.raises(ValueError, match="rows_per_call"):
        s.records(250)
    parts = list(s.batches(250, seed=3))
    assert [len(p) for p in parts] == [100, 100, 50]
    pd.testing.assert_frame_equal(parts[0], s.records(100, seed=3))
    again = pd.concat(s.batches(250, seed=3), ignore_index=True)
    pd.testing.assert_frame_equal(again, pd.concat(parts, ignore_index=True))
    assert not parts[0].equals(parts[1]) and not parts[1].equals(parts[2].iloc[:0]) and \
        not parts[1].iloc[:50].reset_index(drop=True).equals(parts[2])
    # seed + i would make batch 1 of seed 3 batch 0 of seed 4: the pair (seed, i) does not
    assert not parts[1].equals(s.records(100, seed=4)) and not parts[1].equals(s.records(100, seed=3 + 2**32))
    assert [len(p) for p in s.batches(7, rows_per_batch=3, bins="labels")] == [3, 3, 1]
    assert sum(map(len, s.batches())) == s.default_rows
    with pytest.raises(ValueError, match="'rows_per_batch' parameter of Synthetic.batches"):
        next(s.batches(10, rows_per_batch=101))
    with pytest.raises(ValueError, match="'n' parameter of Synthetic.batches"):
        next(s.batches(-1))


def test_seeds_stop_below_two_to_the_128():
    """numpy pads a seed's entropy to four words before the spawn key: SeedSequence(s, spawn_key=(i,)) is
    SeedSequence(s + i·2¹²⁸), so batch 1 of seed 7 was batch 0 of seed 7 + 2¹²⁸ (a helper's audit)."""
    s = _run(_records(), 1.0)
    with pytest.raises(ValueError, match="'seed' parameter of Synthetic.batches"):
        next(s.batches(20, rows_per_batch=10, seed=7 + 2**128))
    with pytest.raises(ValueError, match="'seed' parameter of Synthetic.records"):
        s.records(5, seed=2**128)
    assert len(s.records(5, seed=2**128 - 1)) == 5


def test_an_epsilon_past_opendps_conversion_names_the_parameter():
    with pytest.raises(ValueError, match=r"The 'privacy' parameter of mst: .*Give ε ≤ 10⁴"):
        mmopt.synth.mst(_records(), D, mmopt.Privacy(1e6, 1e-9), seed=0)


def test_details_hold_no_timing():
    """details["seconds"] (CPU) grew with the number of records: a timing channel in a saved result."""
    assert "seconds" not in _run(_records(), 1.0).details


def test_the_curators_measurements_are_charged_for_their_rounding():
    """Curator.measure calibrates to d_in = Δ₂·(1 + 1e-7) with the rounding of its answers charged
    (mmopt.records.exact_answers): the float residual measurement passed Δ₂·(1 + 1e-7) for 45 of 180 neighbours at
    ~2³² records (a review); its answers are now the correctly rounded integer residuals."""
    from mmopt.records import exact_answers as ea
    from mmopt.structured.residual import plan
    from mmopt.structured.residual import strategy as rs
    from mmopt.structured.residual.workload import marginal_workload
    cur = cu.Curator(_records(), D, 0.05, None)
    cur.noise = _Recording(cur.steps)
    cur.measure([(0,), (1,)], 0.02, "one")
    (step,) = cur.steps
    A = plan(marginal_workload(cur.shape, ((0,), (1,)))).strategy
    Delta = rs.sensitivity(A, "l2").value
    assert Delta * (1 + 1e-7 + 9.5e-7) < step.sensitivity < Delta * (1 + 1.2e-6)
    counts = cur._counts(((0,), (1,)))
    answers = ea.residual_answers(A, counts, caller="t")
    assert all(np.array_equal(answers[S], ea.residual_answers(A, counts, caller="t")[S]) for S in A.subsets)
