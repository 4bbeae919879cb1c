"""mmopt.sql / mmopt.groupby.release: the same numbers as release_marginals, SQL's table layout (NULL for rolled-up
columns), the sources (DataFrame, Parquet, CSV, mapping, DuckDB), and every refusal before the source is touched."""

import math
import subprocess
import sys
import warnings

import numpy as np
import pytest

import mmopt
from mmopt.records import Attribute, Domain, marginal_counts, release_marginals

pytest.importorskip("sqlglot")
pytest.importorskip("opendp")
pd = pytest.importorskip("pandas")

from mmopt.groupby import release as gr  # noqa: E402
from mmopt.hierarchy.records import plan_grouping_sets  # noqa: E402

D = Domain((Attribute("state", categories=("CA", "NY", "TX")),
            Attribute("county", categories=("c1", "c2", "c3", "c4")),
            Attribute("sex", categories=("F", "M")),
            Attribute("agegrp", edges=(0, 18, 40, 65, 120))))
GAUSS, LAPLACE = mmopt.Privacy(1.0, 1e-6), mmopt.Privacy(1.0)
MIXED = ("SELECT state, county, sex, agegrp, COUNT(*) AS n FROM people "
         "GROUP BY ROLLUP(state, county), CUBE(sex, agegrp)")
SEEDED = ".*numpy's seeded generator"


def _people(n, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"state": rng.choice(["CA", "NY", "TX"], n), "county": rng.choice(["c1", "c2", "c3", "c4"], n),
                         "sex": rng.choice(["F", "M"], n), "agegrp": rng.uniform(0, 100, n)})


@pytest.fixture(scope="module")
def people():
    return _people(2000)


def _quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=SEEDED, category=UserWarning)
        return fn(*args, **kw)


@pytest.mark.parametrize("privacy", [GAUSS, LAPLACE])
def test_same_numbers_as_release_marginals(people, privacy):
    out = _quiet(mmopt.sql, MIXED, people, D, privacy, seed=11)
    ref = _quiet(release_marginals, people, D, list(out.query.grouping_sets), privacy, seed=11)
    assert len(out.query.grouping_sets) == 12 and out.release.strategy.name == ref.strategy.name
    assert out.release.marginals.keys() == ref.marginals.keys() and out.release.cell_variance == ref.cell_variance
    for S in ref.marginals:
        np.testing.assert_array_equal(out.release.marginals[S], ref.marginals[S])


def test_the_table_is_sql_s_layout_with_the_release_s_numbers(people):
    out = _quiet(mmopt.sql, MIXED, people, D, GAUSS, seed=2, alpha=0.1)
    t, r = out.table, out.release
    assert list(t.columns) == ["grouping_set", "state", "county", "sex", "agegrp", "n", "std_error", "lower", "upper"]
    # one block per grouping set, in SQL's order, each with one row per cell of its marginal
    blocks = list(dict.fromkeys(t["grouping_set"]))
    assert blocks == ["(" + ", ".join(S) + ")" for S in out.query.grouping_sets]
    assert len(t) == sum(math.prod(D.shape[D.index(c)] for c in S) for S in out.query.grouping_sets)
    labels = {a.name: list(a.labels) for a in D.attributes}
    truth = {S: marginal_counts(people, D, [S])[S] for S in r.marginals}
    z = []
    for S in out.query.grouping_sets:
        rows = t[t["grouping_set"] == "(" + ", ".join(S) + ")"]
        key = tuple(sorted(D.index(c) for c in S))
        for c in D.names:  # SQL's NULL for every column the set rolls up, a label for the others
            assert rows[c].isna().all() if c not in S else rows[c].notna().all()
        for _, row in rows.iterrows():
            cell = tuple(labels[D.names[i]].index(row[D.names[i]]) for i in key)
            assert row["n"] == r.marginals[key][cell]
            assert row["std_error"] == math.sqrt(r.cell_variance[key])
            assert row["upper"] - row["n"] == pytest.approx(r.half_width(key, 0.1), rel=1e-9)  # + round-off
            z.append((row["n"] - truth[key][cell]) / row["std_error"])
    # the errors are the release's Gaussian noise: |z| < 6 for all 200-odd cells (P(any beyond) < 1e-6)
    assert np.max(np.abs(z)) < 6


def test_the_grand_total_alone_and_with_laplace_intervals(people):
    out = _quiet(mmopt.sql, "SELECT COUNT(*) FROM people", people, D, LAPLACE, seed=0, alpha=0.05)
    t = out.table
    assert len(t) == 1 and t["grouping_set"].tolist() == ["()"] and out.query.grouping_sets == ((),)
    w = out.release.half_width((), 0.05)
    # h widened by the round-off allowance 8u·Σ|x̂| (~10⁻¹² of h here) and rounded outwards, as table's intervals
    assert (t["upper"] - t["count"]).iloc[0] == pytest.approx(w, rel=1e-9) and (t["upper"] - t["count"]).iloc[0] > w
    assert "lower" not in _quiet(mmopt.sql, "SELECT COUNT(*) FROM t", people, D, LAPLACE, seed=0, alpha=None).table


def test_parquet_csv_and_mapping_sources_give_the_same_release(people, tmp_path):
    pytest.importorskip("pyarrow")
    people.to_parquet(tmp_path / "p.parquet")
    people.to_csv(tmp_path / "p.csv", index=False)
    q = "SELECT state, sex, COUNT(*) FROM people GROUP BY GROUPING SETS ((state, sex), (sex), ())"
    ref = _quiet(mmopt.sql, q, people, D, GAUSS, seed=5).table
    for source in (str(tmp_path / "p.parquet"), tmp_path / "p.csv", {"people": people, "other": None}):
        pd.testing.assert_frame_equal(_quiet(mmopt.sql, q, source, D, GAUSS, seed=5).table, ref)


class Untouchable:
    """A source whose every attribute access fails: a refusal must come before the source is looked at."""

    def __getattribute__(self, name):
        if name == "__class__":
            return Untouchable
        raise AssertionError(f"the source was touched ({name})")


@pytest.mark.parametrize("query,privacy,kw,exc,match", [
    ("SELECT state, COUNT(*) FROM people WHERE sex = 'F' GROUP BY state", GAUSS, {}, ValueError, "refuses WHERE"),
    ("SELECT state, income, COUNT(*) FROM people GROUP BY state, income", GAUSS, {}, ValueError,
     "column 'income': it is not an attribute of the domain"),
    # an unknown grouping column is named as such (it was refused as a selected column in no grouping set, or as
    # one to select, whose SELECT then failed on the domain; a helper's probe)
    ("SELECT state, COUNT(*) FROM people GROUP BY foo", GAUSS, {}, ValueError,
     "column 'foo': it is not an attribute of the domain"),
    ("SELECT state, COUNT(*) FROM people GROUP BY state, foo", GAUSS, {}, ValueError,
     "column 'foo': it is not an attribute of the domain"),
    ("SELECT state, SUM(agegrp) FROM people GROUP BY state", GAUSS, {}, ValueError, "aggregate 'SUM"),
    ("SELECT state, COUNT(*) FROM a JOIN b ON a.x = b.x GROUP BY state", GAUSS, {}, ValueError, "refuses JOIN"),
    ("SELECT state, COUNT(*) FROM people GROUP BY state", "1.0", {}, TypeError, "'privacy' parameter of mmopt.sql"),
    ("SELECT state, COUNT(*) FROM people GROUP BY state", GAUSS, {"alpha": 1.5}, ValueError, "alpha"),
    # the Laplace minimum was checked when the table was written, after the draw: budget spent, release lost (an
    # audit)
    ("SELECT state, COUNT(*) FROM people GROUP BY state", mmopt.Privacy(1.0), {"alpha": 1e-9}, ValueError,
     "'alpha' parameter of mmopt.sql must be ≥ 1e-08 for intervals under Laplace noise"),
    ("SELECT state, COUNT(*) FROM people GROUP BY state; DROP TABLE people", GAUSS, {}, ValueError, "2 statements"),
])
def test_refused_before_the_source_is_touched(query, privacy, kw, exc, match, monkeypatch):
    looked = []
    monkeypatch.setattr(gr, "resolve_source", lambda source, table: looked.append(table) or source)
    with pytest.raises(exc, match=match):
        mmopt.sql(query, Untouchable(), D, privacy, **kw)
    assert looked == []  # the source was never looked up, let alone read


def test_a_valid_query_does_reach_the_source(monkeypatch):  # the control of the test above
    looked = []
    monkeypatch.setattr(gr, "resolve_source", lambda source, table: looked.append(table) or source)
    with pytest.raises(TypeError, match="'source' parameter of mmopt.sql must be .* Got Untouchable"):
        mmopt.sql("SELECT state, COUNT(*) FROM people GROUP BY state", Untouchable(), D, GAUSS)
    assert looked == [("people",)]  # the FROM name's identifier parts (a quoted "my.tab" is one part)


def test_mapping_and_duckdb_lookups_refuse_an_unknown_table(people):
    with pytest.raises(ValueError, match="has no table 'people'.*It has \\['persons'\\]"):
        mmopt.sql("SELECT COUNT(*) FROM people", {"persons": people}, D, GAUSS)
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    con.register("people_view", people)
    con.execute("CREATE TABLE people AS SELECT * FROM people_view")
    rel = gr.resolve_source(con, "people")
    assert type(rel).__name__ == "DuckDBPyRelation" and rel.columns == list(people.columns)
    import os
    import tempfile
    with tempfile.TemporaryDirectory() as d:  # a .duckdb path: the connection is the way (the CLI takes the file)
        db = os.path.join(d, "people.duckdb")
        duckdb.connect(db).close()
        with pytest.raises(ValueError, match=r"A DuckDB database is read through a connection: mmopt\.sql\(\.\.\., "
                                             r"duckdb\.connect\(.*people\.duckdb', read_only=True\)"):
            mmopt.sql("SELECT COUNT(*) FROM people", db, D, GAUSS)
    with pytest.raises(ValueError, match="DuckDB connection with no table or view 'nope' .* in its catalog"):
        mmopt.sql("SELECT COUNT(*) FROM nope", con, D, GAUSS)
    # a registered frame (a view), a table by another case, are the catalog's; a file path or a system view is not:
    # con.table() read the file from disk with DuckDB's CSV sniffer, not mmopt's reading (a helper's audit)
    q = "SELECT state, COUNT(*) FROM {} GROUP BY state"
    for name in ("people_view", "PEOPLE"):
        assert mmopt.sql(q.format(name), con, D, GAUSS, seed=0) is not None
    import os
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "people.csv")
        people.to_csv(path, index=False)
        for name in (f'"{path}"', "duckdb_tables"):
            with pytest.raises(ValueError, match="with no table or view .* would read a file or a system view"):
                mmopt.sql(q.format(name), con, D, GAUSS)


def test_duckdb_release_matches_pandas(people):
    """The FROM table of a DuckDB connection is released as its records (counted inside DuckDB)."""
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    con.register("people_view", people)
    con.execute("CREATE TABLE people AS SELECT * FROM people_view")
    q = "SELECT state, sex, COUNT(*) FROM people GROUP BY CUBE(state, sex)"
    pd.testing.assert_frame_equal(_quiet(mmopt.sql, q, con, D, GAUSS, seed=4).table,
                                  _quiet(mmopt.sql, q, people, D, GAUSS, seed=4).table)


def test_polars_and_other_sources_pass_through_unchanged():
    marker = object()
    assert gr.resolve_source(marker, "people") is marker
    pl = pytest.importorskip("polars")
    lf = pl.LazyFrame({"state": ["CA"]})
    assert gr.resolve_source(lf, "people") is lf


def test_release_grouping_sets_is_the_one_hook(people, monkeypatch):
    """mmopt.sql hands the parsed grouping sets (plain tuples of names) to release_grouping_sets' body (which takes
    the name of the function called, for refusals), and nothing else releases."""
    seen = []
    real = gr._grouping_sets
    monkeypatch.setattr(gr, "_grouping_sets", lambda sets, *a, **k: seen.append(sets) or real(sets, *a, **k))
    out = _quiet(mmopt.sql, "SELECT state, county, COUNT(*) FROM t GROUP BY ROLLUP(state, county)", people, D,
                 GAUSS, seed=1)
    assert seen == [(("state", "county"), ("state",), ())] and out.query.grouping_sets == seen[0]


def test_mmopt_sql_is_lazy():
    code = "import sys, mmopt; assert 'sqlglot' not in sys.modules; f = mmopt.sql; print(f.__module__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "mmopt.groupby.release" and mmopt.sql is gr.sql


def test_sql_rolls_up_a_declared_hierarchy():
    import pandas as pd
    counties = [f"c{i}" for i in range(6)]
    state_of = ["A", "A", "B", "B", "B", "C"]
    D = Domain((Attribute("county", categories=tuple(counties)), Attribute("sex", categories=("F", "M"))))
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"county": rng.choice(counties, 3000), "sex": rng.choice(["F", "M"], 3000)})
    q = "SELECT state, county, COUNT(*) AS n FROM people GROUP BY ROLLUP(state, county)"
    out = mmopt.sql(q, df, D, mmopt.Privacy(2000.0, 1e-3), hierarchies={"county": {"state": state_of}})
    assert out.table.columns.tolist() == ["grouping_set", "state", "county", "n", "std_error", "lower", "upper"]
    states = out.table[out.table.grouping_set == "(state)"]
    truth = pd.Series([state_of[counties.index(c)] for c in df["county"]]).value_counts()
    assert states["county"].isna().all()
    assert np.all(np.abs(states["n"].to_numpy() - truth[states["state"]].to_numpy()) <= 8 * states["std_error"])
    with pytest.raises(ValueError, match="'seed' parameter of mmopt.sql does not apply with 'hierarchies'"):
        mmopt.sql(q, df, D, mmopt.Privacy(1.0, 1e-6), seed=1, hierarchies={"county": {"state": state_of}})
    # a set that does not name the parent level shows it NULL, as SQL (DuckDB) does; the table filled it in
    q2 = "SELECT state, county, COUNT(*) AS n FROM people GROUP BY GROUPING SETS ((state, county), (county))"
    t = mmopt.sql(q2, df, D, mmopt.Privacy(2000.0, 1e-3), hierarchies={"county": {"state": state_of}}).table
    assert t[t.grouping_set == "(county)"]["state"].isna().all()
    assert t[t.grouping_set == "(state, county)"]["state"].notna().all()
    with pytest.raises(ValueError, match=r"the level\(s\) \['sex'\] of 'county' are named like domain attributes"):
        mmopt.sql(q, df, D, mmopt.Privacy(1.0, 1e-6), hierarchies={"county": {"sex": state_of}})
    with pytest.raises(ValueError, match="refuses the column 'state'"):
        mmopt.sql(q, df, D, mmopt.Privacy(1.0, 1e-6))


@pytest.mark.parametrize("privacy, kwargs, message", [
    ((1.0,), {}, r"'privacy' parameter of mmopt.sql must have delta > 0 with 'hierarchies'"),
    ((1.0, 1e-6), {"label": "x"}, r"'label' parameter of mmopt.sql names .* without 'accountant'"),  # was dropped
    ((1.0, 1e-6), {"levels": ["A", "B"]}, r"'hierarchies' parameter of mmopt.sql: level 'state' must give one"),
    ((1.0, 1e-6), {"levels": "A"}, r"'hierarchies' parameter of mmopt.sql: level 'state' must be a sequence"),
    ((1.0, 1e-6), {"levels": ["A", None, "B"]}, r"'hierarchies' parameter of mmopt.sql: level 'state' must label"),
    ((1.0, 1e-6), {"levels": ["A", "A", "B"], "finer": ["x", "y", "x"]},
     r"'hierarchies' parameter of mmopt.sql: the 'district' label 'x' lies under two"),
])
def test_sql_hierarchy_errors_name_sql_and_its_parameters(privacy, kwargs, message):
    """The errors of the hierarchy path named release_grouping_sets's 'levels' (a function the user never called)."""
    import pandas as pd
    D = Domain((Attribute("county", categories=("a", "b", "c")), Attribute("sex", categories=("F", "M"))))
    df = pd.DataFrame({"county": ["a", "b", "c"] * 10, "sex": ["F", "M", "M"] * 10})
    levels = {"state": kwargs.pop("levels", ["A", "A", "B"])}
    if "finer" in kwargs:
        levels["district"] = kwargs.pop("finer")
    q = "SELECT state, county, COUNT(*) AS n FROM people GROUP BY ROLLUP(state, county)"
    with pytest.raises(ValueError, match=message):
        mmopt.sql(q, df, D, mmopt.Privacy(*privacy), hierarchies={"county": levels}, **kwargs)


def test_sql_with_hierarchies_spends_from_an_accountant(tmp_path):
    """'hierarchies' refused an accountant, a label and privacy='remaining' (the hierarchy family kept no ledger):
    now the release is charged once, its ledger entry OpenDP's verified loss, as the plain route's; 'remaining'
    spends the rest; without an accountant 'remaining' and a label are refused before anything is read."""
    from mmopt._base import opendp as od
    from mmopt._base.opendp import charged_sensitivity
    D = Domain((Attribute("county", categories=("a", "b", "c")), Attribute("sex", categories=("F", "M"))))
    df = pd.DataFrame({"county": ["a", "b", "c"] * 10, "sex": ["F", "M", "M"] * 10})
    q = "SELECT state, county, COUNT(*) AS n FROM people GROUP BY ROLLUP(state, county)"
    levels = {"county": {"state": ["A", "A", "B"]}}
    acc = mmopt.Accountant(mmopt.Privacy(2.0, 1e-6), path=tmp_path / "ledger.json")
    out = mmopt.sql(q, df, D, mmopt.Privacy(1.0, 1e-7), hierarchies=levels, accountant=acc, label="by county")
    rel = out.release.release  # the GroupedRelease's HierarchyRelease
    (entry,) = acc.spends
    assert (entry.label, entry.status, (entry.epsilon, entry.delta)) == ("by county", "spent", rel.verified_loss)
    rho = charged_sensitivity(rel.sensitivity) ** 2 / (2 * rel.noise_scale ** 2)  # ρ = Δ'²/(2σ²) by hand
    assert entry.rho == pytest.approx(rho, rel=1e-12)
    assert mmopt.Accountant.load(tmp_path / "ledger.json").spends == acc.spends
    left = acc.remaining
    last = mmopt.sql(q, df, D, "remaining", hierarchies=levels, accountant=acc)
    assert (acc.spends[-1].epsilon, acc.spends[-1].delta) == last.release.release.verified_loss
    assert last.release.release.verified_loss[1] == left.delta and acc.spends[-1].epsilon <= left.epsilon
    assert not acc.can_spend(mmopt.Privacy(1e-3, 1e-9), release=True)
    draws = od.DRAWS
    with pytest.raises(ValueError, match="'remaining', which spends what an accountant has left: pass accountant"):
        mmopt.sql(q, object(), D, "remaining", hierarchies=levels)
    with pytest.raises(ValueError, match="mmopt.sql: spending .* would exceed"):  # before the source is read
        mmopt.sql(q, object(), D, mmopt.Privacy(1.0, 1e-7), hierarchies=levels, accountant=acc)
    assert od.DRAWS == draws and len(acc.spends) == 2


def test_sql_with_hierarchies_says_when_remaining_has_no_delta_left():
    """A basic ledger whose δ is spent: 'remaining' with 'hierarchies' was refused as "must have delta > 0 … Give a
    delta, e.g. Privacy(0.5, 1e-6)", a δ the ledger cannot pay; now it says δ is spent, before the source is read.
    The same query without 'hierarchies' is a Laplace release and takes the rest."""
    from mmopt._base import opendp as od
    D = Domain((Attribute("county", categories=("a", "b", "c")), Attribute("sex", categories=("F", "M"))))
    df = pd.DataFrame({"county": ["a", "b", "c"] * 10, "sex": ["F", "M", "M"] * 10})
    acc = mmopt.Accountant(mmopt.Privacy(1.0, 1e-6))
    acc.spend(mmopt.Privacy(0.5, 1e-6), "all of δ")
    draws = od.DRAWS
    with pytest.raises(ValueError) as info:
        mmopt.sql("SELECT state, county, COUNT(*) AS n FROM people GROUP BY ROLLUP(state, county)", object(), D,
                  "remaining", hierarchies={"county": {"state": ["A", "A", "B"]}}, accountant=acc)
    message = str(info.value)
    assert message.startswith("mmopt.sql: privacy='remaining' asks for the rest of the budget, but its δ is spent")
    assert "ε=0.5, δ=0 is left" in message and "Give a delta" not in message
    assert od.DRAWS == draws and len(acc.spends) == 1
    mmopt.sql("SELECT county, COUNT(*) AS n FROM people GROUP BY county", df, D, "remaining", accountant=acc)
    assert acc.spends[-1].noise == "laplace" and acc.remaining.epsilon == 0


def test_sql_refuses_a_stray_label_before_the_hierarchy_plan_is_searched(monkeypatch):
    """label= without an accountant is refused by mmopt.sql itself, before the hierarchy route's strategy search
    (the plan's own check would say it only after that search)."""
    import importlib
    records = importlib.import_module("mmopt.hierarchy.records")

    def unplanned(*args, **kwargs):
        raise AssertionError("the strategy was searched for")

    monkeypatch.setattr(records, "plan_grouping_sets", unplanned)
    D = Domain((Attribute("county", categories=("a", "b", "c")), Attribute("sex", categories=("F", "M"))))
    q = "SELECT state, county, COUNT(*) AS n FROM people GROUP BY ROLLUP(state, county)"
    with pytest.raises(ValueError, match="'label' parameter of mmopt.sql names the run's entry"):
        mmopt.sql(q, object(), D, mmopt.Privacy(1.0, 1e-6), hierarchies={"county": {"state": ["A", "A", "B"]}},
                  label="by county")


def test_a_bad_source_is_named_as_the_user_called_it(people, tmp_path):
    """Schema refusals came from the counting layer and named it — "The 'records' parameter of marginal_counts has
    no column 'sex'" — from mmopt.sql (whose parameter is 'source'), release_marginals and release_grouping_sets
    (a helper's probe); each now names the function called and its parameter, for every kind of source."""
    wrong = people.rename(columns={"sex": "sexx"})
    query = "SELECT state, sex, COUNT(*) FROM people GROUP BY state, sex"
    calls = {"'source' parameter of mmopt.sql": lambda src: mmopt.sql(query, src, D, GAUSS),
             "'records' parameter of release_marginals":
                 lambda src: release_marginals(src, D, [("state", "sex")], GAUSS),
             "'records' parameter of release_grouping_sets":
                 lambda src: gr.release_grouping_sets([("state", "sex")], src, D, GAUSS)}
    path = tmp_path / "wrong.parquet"
    wrong.to_parquet(path)
    for needle, call in calls.items():
        for src in (wrong, str(path)):
            with pytest.raises(ValueError, match=f"{needle} has no column 'sex'"):
                call(src)
        with pytest.raises(TypeError, match=f"{needle} must be a pandas DataFrame"):
            call(np.zeros(3))


@pytest.mark.parametrize("sets, exc, match", [
    ([("foo",)], ValueError, r"'grouping_sets' parameter of release_grouping_sets names 'foo'"),
    (["state"], TypeError, r"'grouping_sets' parameter .* Got 'state' as a set; write \('state',\)"),
    ("state", TypeError, r"'grouping_sets' parameter of release_grouping_sets must be a list .* Got str"),
    # named a 'workload' parameter, or (0,) was released as attribute 0 (helpers' probes)
    ([(True,)], TypeError, r"'grouping_sets' parameter .* Got True \(bool\) in \(True,\)"),
    ([(0,)], TypeError, r"'grouping_sets' parameter .* Got 0 \(int\)"),
    ([("state", "state")], ValueError, r"'grouping_sets' parameter .* each attribute of a set once"),
    ([], ValueError, r"'grouping_sets' parameter .* at least one grouping set"),
])
def test_release_grouping_sets_names_its_own_parameter(people, sets, exc, match):
    # it said "The 'workload' parameter of release_grouping_sets names attribute 's'" (a parameter it does not
    # have, and a string set split into letters; a helper's probe)
    with pytest.raises(exc, match=match):
        gr.release_grouping_sets(sets, people, D, mmopt.Privacy(1.0))


@pytest.mark.parametrize("name, hierarchy", [(n, h) for n in ("std_error", "lower", "upper", "grouping_set")
                                             for h in (None, "leaf", "other")]
                         + [(n, h) for n in ("estimate", "set") for h in ("leaf", "other")])
def test_a_grouping_column_named_like_a_result_column_is_refused_before_the_source_is_touched(
        name, hierarchy, monkeypatch):
    """A grouping column named std_error (lower, upper) had its labels A/B replaced by numbers in mmopt.sql's
    table, and grouping_set overwrote the set names; with hierarchies, std_error, lower and estimate were
    overwritten and grouping_set and set crashed inside pandas after the noise was drawn (a probe)."""
    T = Domain((Attribute(name, categories=("A", "B")), Attribute("sex", categories=("F", "M"))))
    hierarchies = {None: None, "leaf": {name: {"top": ["T", "T"]}}, "other": {"sex": {"top": ["T", "T"]}}}[hierarchy]
    looked = []
    monkeypatch.setattr(gr, "resolve_source", lambda source, table: looked.append(table) or source)
    query = f'SELECT "{name}", sex, COUNT(*) AS n FROM t GROUP BY ROLLUP("{name}", sex)'
    with pytest.raises(ValueError, match=f"(grouping column|'domain' parameter of mmopt.sql names) '{name}'.*"
                                         f"{name}_group"):
        mmopt.sql(query, Untouchable(), T, GAUSS, hierarchies=hierarchies)
    assert looked == []
    df = pd.DataFrame({name: ["A", "A", "B"], "sex": ["F", "M", "M"]})
    release = _quiet(gr.release_grouping_sets, [(name, "sex"), ()], df, T, GAUSS, seed=0)  # measures: no table
    if name in ("std_error", "lower", "upper", "grouping_set"):
        with pytest.raises(ValueError, match=f"'columns' parameter of grouping_table names '{name}'"):
            gr.grouping_table(release, [(name, "sex"), ()], [name, "sex"], alpha=0.05)


def test_a_grouping_column_named_estimate_or_set_is_labelled_without_hierarchies():
    """The control of the test above: only the hierarchy family's own table has estimate and set columns."""
    T = Domain((Attribute("set", categories=("A", "B")), Attribute("estimate", categories=("F", "M"))))
    df = pd.DataFrame({"set": ["A", "A", "B"], "estimate": ["F", "M", "M"]})
    t = _quiet(mmopt.sql, 'SELECT "set", estimate, COUNT(*) AS n FROM t GROUP BY ROLLUP("set", estimate)', df, T,
               GAUSS, seed=0).table
    assert t["set"].tolist()[:4] == ["A", "A", "B", "B"] and t["estimate"].tolist()[:2] == ["F", "M"]


def test_a_quoted_table_name_with_a_dot_is_one_duckdb_table():
    """FROM "my.tab" read table tab of schema my: the parser joined the identifier parts with dots and lost the
    quoting, and DuckDB split the name again (a probe)."""
    duckdb = pytest.importorskip("duckdb")
    T = Domain((Attribute("a", categories=("x", "y")),))
    con = duckdb.connect()
    con.execute("""CREATE SCHEMA my; CREATE TABLE my.tab AS SELECT * FROM (VALUES ('x'), ('x'), ('x')) v(a);
                   CREATE TABLE "my.tab" AS SELECT * FROM (VALUES ('y')) v(a);
                   CREATE TABLE "o""k" AS SELECT * FROM (VALUES ('y'), ('y')) v(a)""")
    big = mmopt.Privacy(1e3, 1e-6)
    for table, want in (('"my.tab"', [0, 1]), ("my.tab", [3, 0]), ('"my"."tab"', [3, 0]), ('"o""k"', [0, 2])):
        t = _quiet(mmopt.sql, f"SELECT a, COUNT(*) AS n FROM {table} GROUP BY a", con, T, big, seed=0).table
        assert t["n"].round().tolist() == want, table
    # a mapping is looked up by the name as the query spells it, unquoted
    t = _quiet(mmopt.sql, 'SELECT a, COUNT(*) AS n FROM "my.tab" GROUP BY a',
               {"my.tab": pd.DataFrame({"a": ["y"]})}, T, big, seed=0).table
    assert t["n"].round().tolist() == [0, 1]


def test_a_repeated_grouping_set_in_another_order_is_measured_once(people):
    """release_grouping_sets deduplicated the ordered tuples: (state, sex) and (sex, state) were two sets, the
    cell measured twice (its variance fell from 22.8 to the wrong strategy's), and grouping_table repeated its rows;
    mmopt.sql already kept one (a probe)."""
    once = [("state", "sex"), ("state",)]
    twice = [("state", "sex"), ("sex", "state"), ("state",)]
    a = _quiet(gr.release_grouping_sets, once, people, D, GAUSS, seed=0)
    b = _quiet(gr.release_grouping_sets, twice, people, D, GAUSS, seed=0)
    assert a.cell_variance == b.cell_variance and a.marginals.keys() == b.marginals.keys()
    for S in a.marginals:
        np.testing.assert_array_equal(a.marginals[S], b.marginals[S])
    table = gr.grouping_table(b, twice, ["state", "sex"], alpha=0.05)
    assert table.grouping_set.unique().tolist() == ["(state, sex)", "(state)"] and len(table) == 3 * 2 + 3
    q = "SELECT state, sex, COUNT(*) FROM t GROUP BY GROUPING SETS ((state, sex), (sex, state), (state))"
    pd.testing.assert_frame_equal(_quiet(mmopt.sql, q, people, D, GAUSS, seed=0).table, table)
    first = gr.grouping_table(b, [("sex", "state"), ("state", "sex")], ["state", "sex"])  # the first order labels
    assert first.grouping_set.unique().tolist() == ["(sex, state)"]


@pytest.mark.parametrize("privacy", [GAUSS, LAPLACE])
def test_grouping_table_intervals_are_the_release_s_widened_for_round_off(people, privacy):
    """grouping_table's intervals were estimate ± h, without the round-off widening RecordsRelease.table applies:
    at counts of 10¹⁷ an h below the estimate's ulp made lower = upper = estimate (a helper's audit). Both now go
    through RecordsRelease.interval."""
    import dataclasses
    out = _quiet(mmopt.sql, "SELECT state, sex, COUNT(*) AS n FROM people GROUP BY GROUPING SETS ((state, sex), ())",
                 people, D, privacy, seed=3, alpha=0.1)
    big = dataclasses.replace(out.release, marginals={S: m + 1e17 for S, m in out.release.marginals.items()})
    for release in (out.release, big):
        t = gr.grouping_table(release, out.query.grouping_sets, ["state", "sex"], alpha=0.1)
        own = release.table(alpha=0.1)
        for S, mark in ((("state", "sex"), "(state, sex)"), ((), "()")):
            key = tuple(sorted(D.index(c) for c in S))
            rows = t[t["grouping_set"] == mark]
            lo, hi = release.interval(key, 0.1)
            np.testing.assert_array_equal(rows["lower"], lo)
            np.testing.assert_array_equal(rows["upper"], hi)
            np.testing.assert_array_equal(own[own["marginal"] == ("×".join(S) if S else "")]["upper"], hi)
            est = release.marginals[key].ravel()
            h = release.half_width(key, 0.1)
            assert np.all(lo < est - 0.999 * h) and np.all(hi > est + 0.999 * h)  # not rounded to nothing


def test_a_generator_of_sets_is_read_once_and_grouping_table_checks_what_it_lays_out(people):
    # a generator was used up by the checks, then read as no sets; grouping_table raised a bare KeyError for a set
    # never released and laid out a column of None for an unknown one (a helper's probe)
    with pytest.warns(UserWarning, match="seed=0 draws the noise with numpy's seeded generator"):
        r = gr.release_grouping_sets((S for S in [("state",), ()]), people, D, mmopt.Privacy(1e4), seed=0)
    assert sorted(r.marginals) == [(), (D.index("state"),)]
    with pytest.raises(ValueError, match=r"names \('sex',\), which the release did not measure"):
        gr.grouping_table(r, [("sex",)], ["sex"])
    with pytest.raises(ValueError, match="'columns' parameter of grouping_table names 'foo'"):
        gr.grouping_table(r, [("state",)], ["foo"])
    assert len(gr.grouping_table(r, [("state",), ()], ["state"])) == len(D.attributes[D.index("state")].labels) + 1


def test_grouping_table_and_release_grouping_sets_refuse_what_they_misread(people):
    """(a helper's probes) grouping_table(r, [("state", "sex")], ["sex"]) returned rows labelled by sex alone with
    different counts and no state column; the records passed first (the hierarchy release's order) had their column
    names read as grouping sets."""
    r = _quiet(gr.release_grouping_sets, [("state", "sex"), ("sex",)], people, D, GAUSS, seed=1)
    with pytest.raises(ValueError, match=r"'columns' parameter of grouping_table leaves out 'state', which the "
                                         r"grouping set \('state', 'sex'\) groups by"):
        gr.grouping_table(r, [("state", "sex")], ["sex"])
    assert len(gr.grouping_table(r, [("sex",)], ["sex"])) == D.attributes[D.index("sex")].size   # a set it covers
    with pytest.raises(TypeError, match=r"'grouping_sets' parameter of release_grouping_sets is a DataFrame: "
                                        r"records\? .* takes \(grouping_sets, records, domain, privacy\)"):
        gr.release_grouping_sets(people, [("state", "sex")], D, GAUSS)


def test_a_gap_in_a_column_the_query_never_groups_by_is_counted_as_sql_counts_it(people):
    """Every domain column was read and a record with a gap in any of them set aside: a query on state alone lost
    the ~30 % of records missing sex or age, against SQL's counts (a helper's audit), and a source without the
    unqueried columns was refused. Only the measured attributes are read now, on every route (plain, Laplace,
    hierarchy, release_marginals); a gap in a grouped column still sets the record aside."""
    rng = np.random.default_rng(3)
    holes = people.assign(sex=people["sex"].where(rng.random(len(people)) > 0.2, None),
                          agegrp=people["agegrp"].where(rng.random(len(people)) > 0.2, np.nan))
    truth = holes["state"].value_counts().reindex(["CA", "NY", "TX"]).to_numpy()
    big = mmopt.Privacy(1e4, 1e-6)  # σ under 1 % of Δ (the largest ε OpenDP converts): atol 0.5 of a count
    for src in (holes, holes[["state", "county"]]):
        for privacy in (big, mmopt.Privacy(1e6)):
            out = _quiet(mmopt.sql, "SELECT state, COUNT(*) AS n FROM people GROUP BY state", src, D, privacy,
                         seed=1)
            np.testing.assert_allclose(out.table["n"].to_numpy(), truth, atol=0.5)
        rel = _quiet(release_marginals, src, D, [("state",), ("county",)], big, seed=1)
        np.testing.assert_allclose(rel.marginals[(0,)], truth, atol=0.5)
        levels = {"county": {"region": ["N", "N", "S", "S"]}}
        Dh = Domain((D.attributes[1], D.attributes[2]))  # county is the leaf; sex is never grouped
        h = mmopt.sql("SELECT region, COUNT(*) AS n FROM people GROUP BY region", src.drop(columns="state"), Dh,
                      big, hierarchies=levels, alpha=None)
        north = int(holes["county"].isin(["c1", "c2"]).sum())
        np.testing.assert_allclose(sorted(h.table["n"].to_numpy()), sorted([north, len(holes) - north]), atol=0.5)
    both = _quiet(mmopt.sql, "SELECT state, sex, COUNT(*) AS n FROM people GROUP BY state, sex", holes, D, big,
                  seed=1)
    assert abs(both.table["n"].sum() - holes["sex"].notna().sum()) < 3  # a gap in sex: set aside


def test_an_attribute_of_one_category_is_read_though_no_strategy_measures_it():
    """A residual strategy never measures an attribute of one category (its residual is empty), so reading only the
    measured attributes counted FR and missing countries as US (a review): the workload's attributes are read."""
    Dc = Domain((Attribute("country", categories=("US",)), Attribute("sex", categories=("F", "M"))))
    df = pd.DataFrame({"country": ["US", "US", "FR", "FR", "FR", None], "sex": ["F", "M", "F", "F", "M", "F"]})
    big = mmopt.Privacy(1e4, 1e-6)
    for privacy in (big, mmopt.Privacy(1e6)):
        out = _quiet(mmopt.sql, "SELECT country, sex, COUNT(*) AS n FROM t GROUP BY country, sex", df, Dc, privacy,
                     seed=0, alpha=None)
        np.testing.assert_allclose(out.table["n"].to_numpy(), [1, 1], atol=0.5)
        rel = _quiet(release_marginals, df, Dc, [("country", "sex")], privacy, seed=0)
        np.testing.assert_allclose(rel.marginals[(0, 1)], [[1, 1]], atol=0.5)


def test_a_query_that_does_not_group_by_the_hierarchy_reads_as_a_plain_one(people):
    """With hierarchies on county, GROUP BY state read county too (the hierarchy family's histogram) and set aside
    the records missing it, where the plain route and SQL count them (a review): such a query is a plain one."""
    rng = np.random.default_rng(5)
    holes = people.assign(county=people["county"].where(rng.random(len(people)) > 0.3, None))
    levels = {"county": {"region": ["N", "N", "S", "S"]}}
    q = "SELECT state, COUNT(*) AS n FROM people GROUP BY state"
    got = mmopt.sql(q, holes, D, mmopt.Privacy(1e4, 1e-6), hierarchies=levels, alpha=None)
    truth = holes["state"].value_counts().reindex(["CA", "NY", "TX"]).to_numpy()
    np.testing.assert_allclose(got.table["n"].to_numpy(), truth, atol=0.5)
    by_region = mmopt.sql("SELECT region, COUNT(*) AS n FROM people GROUP BY region", holes, D,
                          mmopt.Privacy(1e4, 1e-6), hierarchies=levels, alpha=None)
    assert abs(by_region.table["n"].sum() - holes["county"].notna().sum()) < 2  # a gap in the leaf: set aside
    with pytest.raises(ValueError, match="'seed' parameter of mmopt.sql does not apply with 'hierarchies'"):
        mmopt.sql(q, holes, D, mmopt.Privacy(1.0, 1e-6), hierarchies=levels, seed=1)


def test_sql_releases_a_plan_by_accuracy_over_a_declared_hierarchy():
    """mmopt.sql refused 'strategy' with 'hierarchies', so the plan mmopt.plan makes for per-set targets could not be
    released through SQL, and the family's default strategy missed its targets at the plan's budget (the total's
    s.e.² 3.86 for a target of 1; a helper's audit)."""
    import pandas as pd
    counties, state_of = [f"c{i}" for i in range(7)], ["A", "A", "B", "B", "B", "C", "C"]
    D = Domain((Attribute("county", categories=tuple(counties)), Attribute("sex", categories=("F", "M"))))
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"county": rng.choice(counties, 2000), "sex": rng.choice(["F", "M"], 2000)})
    q = "SELECT state, county, sex, COUNT(*) AS n FROM people GROUP BY ROLLUP(state, county), CUBE(sex)"
    sets = [("state", "county", "sex"), ("state", "county"), ("state", "sex"), ("state",), ("sex",), ()]
    W = plan_grouping_sets(D, sets, mmopt.Privacy(1.0, 1e-6), leaf="county", levels={"state": state_of}).workload
    targets = dict(zip(["(state, county, sex)", "(state, county)", "(state, sex)", "(state)", "(sex)", "()"],
                       [9.0, 9.0, 4.0, 4.0, 1.0, 1.0], strict=True))
    p = mmopt.plan(W, list(targets.values()), delta=1e-6, kind="se")
    out = mmopt.sql(q, df, D, p.privacy, hierarchies={"county": {"state": state_of}}, strategy=p.strategy)
    se = out.table.groupby("grouping_set", sort=False)["std_error"].max().to_dict()
    assert se.keys() == targets.keys()
    assert all(se[k] <= t * (1 + 1e-9) for k, t in targets.items())
    assert se["()"] > 0.99  # the plan's binding target: its strategy was measured, not the family's default
    with pytest.raises(ValueError, match="'seed' parameter of mmopt.sql does not apply with 'hierarchies'"):
        mmopt.sql(q, df, D, p.privacy, hierarchies={"county": {"state": state_of}}, strategy=p.strategy, seed=0)
