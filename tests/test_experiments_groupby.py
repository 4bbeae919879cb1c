"""experiments.groupby: the table's claims hold (ratios ≤ 0.5 of independent noise, never below the bound)."""

import pytest

from experiments import groupby


@pytest.fixture(scope="module")
def rows():
    return groupby.run(full=False, say=lambda *_: None)


def test_mmopt_beats_independent_noise_and_never_the_bound(rows):
    assert [r["sets"] for r in rows] == [6, 12, 24]
    for r in rows:
        assert r["lower_bound"] * (1 - 1e-9) <= r["mmopt"] <= r["least_squares"] <= r["independent"]
        assert r["mmopt"] <= 0.5 * r["independent"]
        assert r["mmopt"] <= 1.01 * r["lower_bound"]  # the census rows: node family vs the tree bound


def test_main_writes_table_and_figure(tmp_path, monkeypatch):
    original = groupby.workloads
    monkeypatch.setattr(groupby, "workloads", lambda full=False: original(full)[:1])
    assert groupby.main(["--out", str(tmp_path), "--quiet"]) == 0
    text = (tmp_path / "groupby.csv").read_text()
    assert text.splitlines()[0].split(",") == list(groupby.COLUMNS) and "toy ROLLUP" in text
    assert (tmp_path / "groupby.png").stat().st_size > 1000
    table = (tmp_path / "groupby.md").read_text()
    row = next(r for r in groupby._common.read_csv(tmp_path / "groupby.csv"))
    assert f"| {row['mmopt'] / row['lower_bound']:.5g} |" in table and "| toy ROLLUP | 80 | 126 | 6 |" in table
    assert "cpu_seconds" in (tmp_path / "groupby.run_info.json").read_text()


def test_the_default_folder_is_the_repositorys_not_the_current_ones(tmp_path, monkeypatch):
    """It wrote results/groupby/ under whatever folder it was started in; --paper-figures was missing."""
    original = groupby.workloads
    monkeypatch.setattr(groupby, "workloads", lambda full=False: original(full)[:1])
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    monkeypatch.setattr(groupby._common, "RESULTS", tmp_path / "repo" / "results")
    assert groupby.main(["--quiet"]) == 0
    assert (tmp_path / "repo" / "results" / "groupby" / "groupby.md").is_file()
    assert not any((tmp_path / "cwd").iterdir())
    with pytest.raises(SystemExit) as exc:
        groupby.main(["--out", str(tmp_path), "--paper-figures"])
    assert exc.value.code == 2


def test_an_out_that_is_a_file_is_a_usage_error(tmp_path, capsys):
    """It ended in a FileExistsError traceback."""
    f = tmp_path / "f.txt"
    f.write_text("x")
    with pytest.raises(SystemExit) as exc:
        groupby.main(["--out", str(f)])
    assert exc.value.code == 2 and "--out must be a folder" in capsys.readouterr().err
