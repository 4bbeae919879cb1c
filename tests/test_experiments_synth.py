"""experiments.synth on tiny records: its rows, summary, table, figure and command line."""

import math
from dataclasses import replace

import pytest
from test_synth_mst import D, _records

from experiments import synth

pytest.importorskip("matplotlib")
CFG = replace(synth.QUICK, epsilons=(1.0,), trials=2)


@pytest.fixture(scope="module")
def rows():
    return synth.run(_records(2000), D, CFG)


def test_rows_are_complete_and_the_errors_are_the_papers(rows):
    assert [(r["method"], r["trial"]) for r in rows] == [("mmopt MST", 0), ("mmopt MST", 1), ("mmopt AIM", 0),
                                                         ("mmopt AIM", 1)]
    for r in rows:
        assert set(r) == set(synth.COLUMNS)
        assert 0 <= r["records_error"] <= 2 and 0 <= r["model_error"] <= 2 and r["epsilon_spent"] <= 1.0
    assert rows[0]["records_error"] != rows[1]["records_error"]          # the trials are different draws
    s = synth.summary(rows)
    assert [r["trials"] for r in s] == [2, 2]
    mean = (rows[0]["records_error"] + rows[1]["records_error"]) / 2
    assert math.isclose(s[0]["records_error"], mean, rel_tol=1e-12)
    assert "| 1 | mmopt AIM | 2 |" in synth.markdown(rows)


def test_main_writes_its_files_and_refuses_a_missing_interpreter(tmp_path, monkeypatch, rows):
    monkeypatch.setattr(synth, "run", lambda **kw: rows)
    assert synth.main(["--out", str(tmp_path), "--quiet"]) == 0
    for name in ("synth.csv", "synth.png", "synth.md", "synth.run_info.json"):
        assert (tmp_path / name).is_file()
    with pytest.raises(SystemExit):
        synth.main(["--out", str(tmp_path), "--peers", str(tmp_path / "no-python")])


def test_split_runs_merge_from_their_csvs(tmp_path, monkeypatch, rows):
    monkeypatch.setattr(synth, "run", lambda **kw: [r for r in rows if r["method"] in kw["methods"]])
    assert synth.main(["--out", str(tmp_path / "a"), "--quiet", "--methods", "mmopt MST"]) == 0
    assert synth.main(["--out", str(tmp_path / "b"), "--quiet", "--methods", "mmopt AIM"]) == 0
    assert synth.main(["--out", str(tmp_path / "c"), "--quiet", "--from-csv", str(tmp_path / "a" / "synth.csv"),
                       str(tmp_path / "b" / "synth.csv")]) == 0
    merged = (tmp_path / "c" / "synth.md").read_text()
    assert "| 1 | mmopt MST | 2 |" in merged and "| 1 | mmopt AIM | 2 |" in merged
    with pytest.raises(SystemExit):
        synth.main(["--out", str(tmp_path / "d"), "--methods", "PrivBayes"])


def test_rows_carry_their_dataset_and_unknown_datasets_are_refused(rows, tmp_path):
    assert {r["dataset"] for r in rows} == {"custom"}                 # records passed in
    assert all(set(r) == set(synth.COLUMNS) for r in rows)
    assert "| custom | 1 | mmopt MST | 2 |" in synth.markdown(rows)
    with pytest.raises(ValueError, match="experiments.synth.load"):
        synth.load("adult")
    with pytest.raises(SystemExit):
        synth.main(["--out", str(tmp_path), "--datasets", "cps1988,adult"])


def test_cached_trials_are_returned_not_run_again(rows):
    marked = {**rows[1], "records_error": -1.0}                          # a value no run can produce
    done = []
    again = synth.run(_records(2000), D, CFG, methods=["mmopt MST"], cached=[marked], each=done.append)
    assert [(r["method"], r["trial"]) for r in again] == [("mmopt MST", 0), ("mmopt MST", 1)]
    assert again[1] is marked and again[0]["records_error"] >= 0       # trial 1 from the cache, trial 0 run
    assert [(r["method"], r["trial"]) for r in done] == [("mmopt MST", 0)]   # only the new trial is reported


def test_the_cache_file_accumulates_over_runs(tmp_path, monkeypatch, rows):
    def fake_run(**kw):
        have = {synth.key(r) for r in kw["cached"]}
        out = []
        for r in rows:
            if r["method"] in kw["methods"] and synth.key(r) not in have:
                kw["each"](r)
            out.append(r)
        return [r for r in out if r["method"] in kw["methods"]]
    monkeypatch.setattr(synth, "run", fake_run)
    cache = tmp_path / "trials.csv"
    assert synth.main(["--out", str(tmp_path / "a"), "--quiet", "--methods", "mmopt MST", "--cache", str(cache)]) == 0
    assert synth.main(["--out", str(tmp_path / "b"), "--quiet", "--methods", "mmopt AIM", "--cache", str(cache)]) == 0
    assert synth.main(["--out", str(tmp_path / "b"), "--quiet", "--methods", "mmopt AIM", "--cache", str(cache)]) == 0
    kept = [synth.key(r) for r in synth._common.read_csv(cache, keep_text=("method", "dataset"))]
    assert sorted(kept) == sorted(synth.key(r) for r in rows)           # every trial once, none twice


def test_tree15_is_the_known_network_of_mmopt_records():
    from mmopt.records.datasets import tree_network
    df, domain = synth.load("tree15")
    again, _ = tree_network(15, 20_000, seed=0)
    assert len(df) == 20_000 and len(domain.shape) == 15 and df.equals(again)


def test_trials_sets_how_many_of_ours_run(tmp_path, monkeypatch, rows):
    seen = []
    monkeypatch.setattr(synth, "run", lambda **kw: seen.append(kw["cfg"]) or rows)
    assert synth.main(["--out", str(tmp_path), "--quiet", "--full", "--trials", "5"]) == 0
    assert seen[-1].trials == 5
    with pytest.raises(SystemExit):
        synth.main(["--out", str(tmp_path), "--trials", "0"])


def test_each_method_keeps_its_colour_on_every_panel(rows, tmp_path, monkeypatch):
    """Colours were by order of appearance per dataset: where a method was missing (OpenDP's MST at tree15,
    ε = 0.1) the next one took its colour, so the same colour meant two methods in one figure."""
    colours: dict[str, set] = {}

    def capture(fig, path, dpi):
        for ax in fig.axes[1::2]:  # the CPU panels: one line per method
            for line in ax.get_lines():
                colours.setdefault(line.get_label(), set()).add(line.get_color())
        return path

    monkeypatch.setattr(synth._common, "save_png", capture)
    only_aim = [dict(r, dataset="only AIM") for r in rows if r["method"] == "mmopt AIM"]
    synth.plot(rows + only_aim, tmp_path)
    assert set(colours) == {"mmopt MST", "mmopt AIM"} and all(len(c) == 1 for c in colours.values())
    assert colours["mmopt MST"] != colours["mmopt AIM"]


@pytest.mark.parametrize("args", [["--epsilons", "0.1,0"], ["--epsilons", "nan"], ["--from-csv", "missing.csv"],
                                  ["--cache", "no/such/folder/x.csv"]])
def test_bad_arguments_are_usage_errors_before_any_trial(args, tmp_path, capsys):
    """ε = 0 ran the ε = 0.1 trials, then crashed with a traceback (a partial CSV left behind); a missing
    --from-csv or --cache folder ended in FileNotFoundError. Each is now argparse's exit 2."""
    with pytest.raises(SystemExit) as exc:
        synth.main([*args, "--out", str(tmp_path / "out")])
    assert exc.value.code == 2 and "error:" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
