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


def test_an_out_that_is_a_file_is_a_usage_error(tmp_path, capsys):
    """It ended in a FileExistsError traceback."""
    f = tmp_path / "f.txt"
    f.write_text("x")
    with pytest.raises(SystemExit) as exc:
        groupby.main(["--out", str(f)])
    assert exc.value.code == 2 and "--out must be a folder" in capsys.readouterr().err
