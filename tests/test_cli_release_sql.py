"""``mmopt release --sql``: the query's table written after one draw, every refusal before the records are opened."""

import json
import re

import numpy as np
import pytest

from mmopt._base import opendp as _opendp
from mmopt.cli import main

pytest.importorskip("opendp")
pytest.importorskip("sqlglot")
pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")

DOMAIN = {"attributes": [{"name": "state", "categories": ["CA", "NY"]},
                         {"name": "sex", "categories": ["F", "M"]},
                         {"name": "age", "edges": [0, 18, 65, "inf"]}]}
QUERY = "SELECT state, sex, age, COUNT(*) AS n FROM people GROUP BY ROLLUP(state, sex), age"


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    pd.DataFrame({"state": rng.choice(["CA", "NY"], 400), "sex": rng.choice(["F", "M"], 400),
                  "age": rng.integers(0, 90, 400).astype(float)}).to_parquet("people.parquet")
    with open("domain.json", "w") as fh:
        json.dump(DOMAIN, fh)
    return tmp_path


@pytest.fixture
def draws(monkeypatch):
    calls = []
    real = _opendp.measure
    monkeypatch.setattr(_opendp, "measure", lambda Ax, *a, **k: calls.append(len(Ax)) or real(Ax, *a, **k))
    return calls


def _args(*extra, query=QUERY, records="people.parquet"):
    return ["release", "--sql", query, "--records", records, "--domain", "domain.json", "--epsilon", "1",
            "--delta", "1e-9", "--out", "n.csv", *extra]


def test_writes_one_block_per_grouping_set(folder, draws, capsys):
    assert main(_args("--alpha", "0.05")) == 0
    t = pd.read_csv("n.csv")
    assert list(t.columns) == ["grouping_set", "state", "sex", "age", "n", "std_error", "lower", "upper"]
    # ROLLUP(state, sex) × age: (state, sex, age) 12 cells, (state, age) 6, (age) 3
    assert t["grouping_set"].value_counts().to_dict() == {"(state, sex, age)": 12, "(state, age)": 6, "(age)": 3}
    assert t.loc[t["grouping_set"] == "(age)", ["state", "sex"]].isna().all().all()
    assert len(draws) == 1 and "Released 21 marginal cells" in capsys.readouterr().out


@pytest.mark.parametrize("query,match", [
    ("SELECT state, COUNT(*) FROM people WHERE age > 3 GROUP BY state", "refuses WHERE"),
    ("SELECT state, AVG(age) FROM people GROUP BY state", "aggregate 'AVG"),
    ("SELECT county, COUNT(*) FROM people GROUP BY county", "column 'county': it is not an attribute"),
    # an unknown grouping column is named as such, as by mmopt.sql (it was 'state ... in no grouping set')
    ("SELECT state, COUNT(*) FROM people GROUP BY county", "column 'county': it is not an attribute"),
])
def test_refusals_exit_2_before_the_records_are_opened(folder, draws, capsys, query, match):
    assert main(_args(query=query, records="missing.parquet")) == 2  # the query is refused before the file is opened
    assert re.search(match, capsys.readouterr().err) and draws == []


def test_an_alpha_no_laplace_interval_resolves_is_refused_before_the_noise(folder, draws, capsys):
    """Checked when the table was written, after the draw: "the privacy budget WAS spent" and no table (an audit)."""
    args = _args("--alpha", "1e-9")
    args[args.index("--delta") + 1] = "0"
    assert main(args) == 2
    assert "≥ 1e-08 for intervals under Laplace noise" in capsys.readouterr().err and draws == []


def test_workload_does_not_go_with_sql(folder, capsys):
    assert main(_args("--workload", "marginals:k=2")) == 2
    assert "--workload does not go with --sql (the query says what is counted). Drop it." in capsys.readouterr().err


def test_duckdb_file_is_opened_read_only_and_the_table_looked_up(folder, capsys):
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect("people.duckdb")
    con.execute("CREATE TABLE people AS SELECT * FROM 'people.parquet'")
    con.close()
    assert main(_args(query="SELECT state, COUNT(*) FROM nobody GROUP BY state", records="people.duckdb")) == 2
    err = capsys.readouterr().err  # in the command's words: --records, which the Python parameter 'source' is
    assert err.startswith("mmopt: error: --records (the 'source' parameter of mmopt.sql) is a DuckDB connection with "
                          "no table or view 'nobody'")


def test_a_quoted_table_name_with_a_dot_is_read_from_the_duckdb_file_as_written(folder):
    """FROM "my.tab" (one table whose name holds a dot) read table tab of schema my: the name was joined without
    its quotes (a helper's probe; the library was mended first, the command line passed the joined name still)."""
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect("two.duckdb")
    rest = "'F' AS sex, 30.0 AS age FROM range(300)"  # the domain's other columns
    con.execute(f"CREATE SCHEMA my; CREATE TABLE my.tab AS SELECT 'CA' AS state, {rest};"
                f"CREATE TABLE \"my.tab\" AS SELECT 'NY' AS state, {rest}")
    con.close()
    for table, big in (('"my.tab"', "NY"), ("my.tab", "CA")):
        assert main(_args("--force", query=f"SELECT state, COUNT(*) AS n FROM {table} GROUP BY state",
                          records="two.duckdb")) == 0
        t = pd.read_csv("n.csv").set_index("state")["n"]
        assert t[big] > 250 and t[{"NY": "CA", "CA": "NY"}[big]] < 50  # 300 against 0, noise sd ~2.5 at ε = 1
