"""``mmopt release --records``: every check before the draw, the tidy table after it, never over an input."""

import json
import math
import os

import numpy as np
import pytest

from mmopt._base import opendp as _opendp
from mmopt.cli import main
from mmopt.cli import release_records as rr

pytest.importorskip("opendp")
pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")

DOMAIN = {"attributes": [{"name": "sex", "categories": ["F", "M"]},
                         {"name": "age", "edges": [0, 18, 65, "inf"]},
                         {"name": "region", "categories": ["N", "S", "W"]}]}


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"sex": rng.choice(["F", "M"], 300), "age": rng.integers(0, 90, 300).astype(float),
                       "region": rng.choice(["N", "S", "W"], 300)})
    df.to_parquet("people.parquet")
    df.to_csv("people.csv", index=False)
    with open("domain.json", "w") as fh:
        json.dump(DOMAIN, fh)
    with open("bad_domain.json", "w") as fh:
        json.dump({"attrs": DOMAIN["attributes"]}, fh)
    return tmp_path


@pytest.fixture
def draws(monkeypatch):
    """Every call of OpenDP's measurement (the only place noise is drawn), recorded."""
    calls = []
    real = _opendp.measure

    def spy(Ax, *args, **kwargs):
        calls.append(len(Ax))
        return real(Ax, *args, **kwargs)

    monkeypatch.setattr(_opendp, "measure", spy)
    return calls


def _records(*extra, records="people.parquet", out="m.csv"):
    return ["release", "--records", records, "--domain", "domain.json", "--workload", "marginals:k=2",
            "--epsilon", "1", "--delta", "1e-9", "--out", out, *extra]


@pytest.mark.parametrize("out", ["m.csv", "m.parquet"])
def test_writes_the_tidy_table_of_every_marginal_cell(folder, draws, capsys, out):
    assert main(_records(out=out)) == 0
    table = pd.read_csv(out) if out.endswith(".csv") else pd.read_parquet(out)
    # 2×3 + 2×3 + 3×3 cells of the three 2-way marginals, each labelled by its attributes' cells
    assert len(table) == 21 and list(table.columns) == ["marginal", "sex", "age", "region", "estimate", "std_error"]
    assert set(table["marginal"]) == {"sex×age", "sex×region", "age×region"}
    assert set(table.loc[table["marginal"] == "sex×age", "age"]) == {"[0, 18)", "[18, 65)", "[65, inf]"}
    assert table["estimate"].notna().all() and (table["std_error"] > 0).all()
    # one draw, after aggregation, of the 23 residual measurements: ∅, sex (binary: 1 row), age, region (3 rows
    # each), sex×age, sex×region (3 each), age×region (9)
    assert draws == [1 + 1 + 3 + 3 + 3 + 3 + 9]
    report = capsys.readouterr().out
    assert "Released 21 marginal cells" in report and "rho_zcdp" in report


def test_json_report_predicts_the_table_s_standard_errors(folder, capsys):
    assert main(_records("--json")) == 0
    record = json.loads(capsys.readouterr().out)
    table = pd.read_csv("m.csv")
    assert record["workload"]["cells"] == 21 and record["noise"] == "gaussian" and record["sampler"] == "opendp"
    assert record["expected_total_squared_error_least_squares"] == pytest.approx(float((table["std_error"] ** 2).sum()))
    assert record["rho_zcdp"] == pytest.approx(record["sensitivity"] ** 2 / (2 * record["noise_scale"] ** 2), rel=1e-6)


def test_csv_records_and_named_sets(folder):
    assert main(["release", "--records", "people.csv", "--domain", "domain.json", "--workload",
                 "marginals:sex*region,age", "--epsilon", "1", "--out", "m.parquet"]) == 0
    table = pd.read_parquet("m.parquet")
    assert len(table) == 6 + 3 and set(table["marginal"]) == {"sex×region", "age"}


@pytest.mark.parametrize("args, needle", [
    (_records(out="people.parquet"), "is (or is inside) the --records input"),
    (_records(out="./people.csv", records="people.csv"), "is (or is inside) the --records input"),
    (_records(out="m.txt"), "--out file must end in .csv or .parquet"),
    (_records(out="nowhere/m.csv"), "cannot be written"),
    (["release", "--records", "people.parquet", "--domain", "domain.json", "--epsilon", "1", "--out", "m.csv"],
     "needs --workload (the queries, e.g. 'marginals:k=2')."),
    (["release", "--records", "people.parquet", "--workload", "marginals:k=2", "--epsilon", "1", "--out", "m.csv"],
     "needs --domain DOMAIN.json (the public domain file)."),
    (_records()[:6] + ["marginals:k=4"] + _records()[7:], "integer K in [1, 3]"),
    (_records()[:6] + ["marginals:sex*height"] + _records()[7:], "'height'"),
    (_records()[:6] + ["marginals:2"] + _records()[7:], "For every 2-way marginal write 'marginals:k=2'"),
    (_records()[:6] + ["prefix:16"] + _records()[7:], "must be 'marginals:k=K'"),
    (["release", "prefix:8"] + _records()[1:], "SPEC belongs to a histogram release"),
    (_records("--data", "x.csv"), "--data belongs to a histogram release"),
    (["release", "prefix:8", "--data", "x.csv", "--domain", "domain.json", "--epsilon", "1", "--out", "m.csv"],
     "--domain goes with --records"),
    (["release", "--epsilon", "1", "--out", "m.csv"], "release needs SPEC and --data"),
    (_records(records="missing.parquet"), "does not exist"),
    (_records()[:4] + ["nope.json"] + _records()[5:], "cannot read the domain file"),
    # a domain file without 'attributes' was blamed on --records (a newcomer's audit)
    (_records()[:4] + ["bad_domain.json"] + _records()[5:], "--domain (the 'source' parameter of Domain.from_json)"),
    (_records()[:8] + ["-1"] + _records()[9:], "epsilon"),
    # the Laplace minimum was checked when the table was written, after the draw (an audit)
    (_records()[:10] + ["0"] + _records()[11:] + ["--alpha", "1e-9"], "≥ 1e-08 for intervals under Laplace noise"),
])
def test_refusals_come_before_any_noise_and_write_nothing(folder, draws, capsys, args, needle):
    before = {p.name: os.path.getmtime(p) for p in folder.iterdir()}
    assert main(args) == 2
    assert needle in capsys.readouterr().err
    assert draws == [] and {p.name: os.path.getmtime(p) for p in folder.iterdir()} == before


def test_schema_errors_are_refused_before_the_noise(folder, draws, capsys):
    pd.DataFrame({"sex": [1.0], "age": [3.0], "region": ["N"]}).to_parquet("bad.parquet")
    assert main(_records(records="bad.parquet")) == 2
    assert "'sex' of dtype number" in capsys.readouterr().err and draws == [] and not os.path.exists("m.csv")
    pd.DataFrame({"sex": ["F"], "age": [3.0]}).to_parquet("short.parquet")
    assert main(_records(records="short.parquet")) == 2
    assert "region" in capsys.readouterr().err and draws == []


def test_never_writes_inside_a_partitioned_records_folder(folder, draws, capsys):
    os.mkdir("parts")
    pd.read_parquet("people.parquet").to_parquet("parts/part-0.parquet")
    assert main(_records(records="parts", out="parts/m.parquet")) == 2
    assert "is (or is inside) the --records input" in capsys.readouterr().err and draws == []
    assert main(_records(records="parts", out="m.parquet")) == 0 and len(pd.read_parquet("m.parquet")) == 21


def test_a_failed_write_after_the_draw_keeps_the_answers(folder, capsys, monkeypatch):
    def broken(table, path, ext):
        raise OSError("disk full")

    monkeypatch.setattr(rr, "_write", broken)
    assert main(_records()) == 1
    err = capsys.readouterr().err
    assert "WAS spent" in err and "disk full" in err and not os.path.exists("m.csv")
    fallback = err.split("saved to '")[1].split("'")[0]
    with np.load(fallback) as saved:
        assert sorted(saved.files) == ["age*region", "sex*age", "sex*region"]
        assert saved["sex*age"].shape == (2, 3) and math.isfinite(float(saved["sex*age"].sum()))
    os.remove(fallback)


def test_parse_workload():
    from mmopt.records import Domain

    D = Domain.from_json(DOMAIN)
    assert rr.parse_workload("marginals:k=1", D) == 1
    assert rr.parse_workload("marginals: sex * age , region", D) == [("sex", "age"), ("region",)]
    with pytest.raises(ValueError, match="lists no attribute set"):
        rr.parse_workload("marginals:", D)


def test_laplace_records_release_names_its_strategy_and_writes_intervals(folder, draws, capsys):
    args = ["release", "--records", "people.parquet", "--domain", "domain.json", "--workload", "marginals:k=2",
            "--epsilon", "1", "--out", "m.csv", "--alpha", "0.1", "--json"]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert "× the SVD lower bound" in report["strategy_choice"] and draws == [draws[0]]
    table = pd.read_csv("m.csv")
    assert list(table.columns)[-3:] == ["std_error", "lower", "upper"]
    assert np.all(table.lower < table.estimate) and np.all(table.estimate < table.upper)
    capsys.readouterr()
    assert main(args[:-3] + ["--alpha", "0", "--json", "--force"]) == 2 and len(draws) == 1  # before the draw
    assert "'alpha' parameter of release --alpha" in capsys.readouterr().err


def test_a_warning_about_the_records_is_marked_for_the_data_holder(folder, capsys):
    """Text in a numeric column is dropped with a warning; whether it is raised depends on the records (one added
    record raises it), so the command line marks it as outside the privacy guarantee (a helper's audit)."""
    with open("people.csv", "a") as fh:
        fh.write("F,unknown,N\n")
    assert main(_records(records="people.csv")) == 0
    err = capsys.readouterr().err
    assert "mmopt: data warning (for the data holder" in err and "do not publish it" in err
    assert "'age' holds values that are not numbers" in err


def test_data_warnings_are_their_own_category():
    import warnings

    import mmopt
    from mmopt.records import marginal_counts
    df = pd.DataFrame({"sex": ["F", "M"], "age": pd.Series([30, "unknown"], dtype=object), "region": ["N", "S"]})
    D = mmopt.records.Domain.from_json(DOMAIN)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        marginal_counts(df, D, [(1,)])
    assert [w.category for w in caught] == [mmopt.DataWarning]
    assert issubclass(mmopt.DataWarning, UserWarning)  # code filtering UserWarning still catches it
