"""Where the experiments write and what they say while they run, and what their figures show.

- Output: ``results/<experiment>/`` (untracked) by default, the tracked ``paper_figures/`` only with
  ``--paper-figures``; both folders are redirected to tmp_path here, so no test writes into the repository.
- Progress: a plain line per stage and configuration on stderr (pytest's stderr is not a terminal), a
  heartbeat when a configuration runs long, a bar on a terminal, nothing with ``--quiet``.
- Figures: postprocess tells ε apart and has no empty panel; multidim's axis is set by exact values;
  convergence names its own matrix and says what to conclude; no internal issue numbers in paper_figures/.
"""

import io
import logging
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from experiments import _common, _progress, geometry, multidim, range_queries  # noqa: E402
from experiments import dpbench as db  # noqa: E402
from experiments import postprocess as pp  # noqa: E402
from mmopt import workload as wl  # noqa: E402

TABLE = ["--sizes", "4", "--min-error-max", "0", "--min-sensitivity-max", "0", "--table-only"]
TINY_MULTIDIM = {"tiny_marginals": lambda: wl.marginals((3, 4, 5), 2)}


@pytest.fixture
def folders(tmp_path, monkeypatch):
    """(results, paper_figures) in tmp_path, standing in for the repository's folders."""
    results, figures = tmp_path / "results", tmp_path / "paper_figures"
    monkeypatch.setattr(_common, "RESULTS", results)
    monkeypatch.setattr(_common, "FIGURES", figures)
    return results, figures


@pytest.fixture
def figures_drawn(monkeypatch):
    """Every matplotlib figure an experiment saves, kept for inspection (and still saved)."""
    made = []
    real = _common.save_png

    def keep(fig, path, dpi):
        made.append(fig)
        return real(fig, path, dpi)

    monkeypatch.setattr(_common, "save_png", keep)
    return made


# ---- where the outputs go -----------------------------------------------------------------------------------

def test_the_default_folder_is_untracked_results():
    assert _common.default_out("multidim") == _common.ROOT / "results" / "multidim"
    assert _common.default_out("multidim", paper_figures=True) == _common.ROOT / "paper_figures"
    assert "/results/" in (ROOT / ".gitignore").read_text().splitlines()
    if shutil.which("git") and (ROOT / ".git").exists():  # read-only: does git ignore what a run writes?
        p = subprocess.run(["git", "check-ignore", "-q", "results/range_queries/range_queries.csv"], cwd=ROOT)
        assert p.returncode == 0


def test_range_queries_writes_results_by_default_and_paper_figures_only_when_asked(folders):
    results, figures = folders
    assert range_queries.main([*TABLE, "--quiet"]) == 0
    assert (results / "range_queries" / "range_queries.csv").is_file() and not figures.exists()
    assert range_queries.main([*TABLE, "--quiet", "--paper-figures"]) == 0
    assert (figures / "range_queries.csv").read_text() == (results / "range_queries" / "range_queries.csv").read_text()


@pytest.mark.parametrize("main", [range_queries.main, multidim.main, pp.main, db.main, geometry.main],
                         ids=["range_queries", "multidim", "postprocess", "dpbench", "geometry"])
def test_out_and_paper_figures_exclude_each_other(main, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["--out", str(tmp_path), "--paper-figures"])
    assert e.value.code == 2 and "not allowed with" in capsys.readouterr().err


def test_the_readme_links_the_other_experiments_where_they_are(tmp_path, folders):
    results, figures = folders
    assert _common.link(results / "range_queries", "multidim", "multidim.md") == "../multidim/multidim.md"
    assert _common.link(figures, "multidim", "multidim.md") == "multidim.md"
    assert _common.link(tmp_path / "anywhere", "multidim", "multidim.md") == "multidim.md"
    notes = _common.ROOT / "docs" / "paper_notes.md"
    assert _common.link(_common.ROOT / "paper_figures", notes) == "../docs/paper_notes.md"


# ---- progress -----------------------------------------------------------------------------------------------

def test_range_queries_talks_on_stderr_unless_quiet(folders, capsys):
    assert range_queries.main(TABLE) == 0
    err = capsys.readouterr().err
    assert "[range_queries 0:0" in err and "§6 table 1/" in err and "n=4 all_range identity" in err
    assert "wrote the table into" in err
    assert range_queries.main([*TABLE, "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_a_long_configuration_gets_a_heartbeat():
    buf = io.StringIO()
    with _progress.Progress("demo", every=0.2, stream=buf) as prog:
        prog.stage("stage", total=2)
        prog.step("slow one")
        time.sleep(0.9)
        prog.step("quick one")
        prog.done()
    lines = buf.getvalue().splitlines()
    assert lines[0] == "[demo 0:00] stage 0/2" and lines[1] == "[demo 0:00] stage 1/2: slow one"
    assert sum("slow one … still running" in line for line in lines) >= 2
    assert lines[-2] == "[demo 0:00] stage 2/2: quick one" and lines[-1] == "[demo 0:00] done"


def test_quiet_writes_nothing_and_note_needs_a_reporter():
    _progress.note("no reporter: ignored")
    buf = io.StringIO()
    with _progress.Progress("demo", enabled=False, every=0.1, stream=buf) as prog:
        prog.stage("stage", total=1)
        prog.step("x")
        _progress.note("y")
        time.sleep(0.3)
        prog.done()
    assert buf.getvalue() == ""
    mmopt_logger = logging.getLogger("mmopt")
    before = mmopt_logger.level
    with _progress.Progress("demo", enabled=False):  # mmopt's own "still running" lines are silenced too
        assert not mmopt_logger.isEnabledFor(logging.INFO)
    assert mmopt_logger.level == before
    with _progress.Progress("demo", every=0, stream=buf) as prog:
        prog.stage("stage", total=1)
        prog.step("config")
        _progress.note("sub-stage")
    assert buf.getvalue().splitlines()[-1] == "[demo 0:00] stage 1/1: config — sub-stage"


def test_a_terminal_gets_a_bar_and_the_lines_above_it():
    buf = io.StringIO()
    with _progress.Progress("demo", stream=buf, tty=True, every=0) as prog:
        prog.stage("rows", total=3)
        for k in range(3):
            prog.step(f"row {k}")
        prog.stage("plots")
        prog.done()
    text = buf.getvalue()
    assert "rows" in text and "row 2" in text and "3/3" in text and "[demo 0:00] plots" in text


def test_multidim_writes_results_and_talks(folders, monkeypatch, capsys):
    results, figures = folders
    monkeypatch.setattr(multidim, "FULL", TINY_MULTIDIM)
    assert multidim.main(["--only", "tiny_marginals"]) == 0
    assert (results / "multidim" / "multidim.csv").is_file() and not figures.exists()
    err = capsys.readouterr().err
    assert "workloads 1/1: tiny_marginals" in err and "auto search" in err and "wrote multidim.csv" in err


def _shape(seed, shape):
    x = np.random.default_rng(seed).pareto(1.5, shape)
    return x / x.sum()


def test_postprocess_and_dpbench_write_results_and_talk(folders, tmp_path, monkeypatch, capsys):
    results, figures = folders
    data = tmp_path / "data"
    (data / "1D").mkdir(parents=True)
    (data / "2D").mkdir()
    np.save(data / "1D" / "SYNTH.n4096.npy", np.round(_shape(1, 4096) * 5000))
    np.save(data / "2D" / "GRID_256_256.npy", np.round(_shape(2, (256, 256)) * 5000))
    monkeypatch.setattr(pp, "QUICK", pp.Config(("SYNTH",), ((64, ("prefix",), ("H2",), pp.RECONSTRUCTIONS),),
                                               scales=(10**3,), epsilons=(1.0,), runs=3))
    assert pp.main(["--data", str(data)]) == 0
    err = capsys.readouterr().err
    assert (results / "postprocess" / "postprocess.csv").is_file()
    assert "(W, A) pairs 1/1: 1-D prefix n = 64, H2 (1 datasets × 1 scales" in err and "— SYNTH" in err
    monkeypatch.setattr(db, "QUICK", db.Config(("SYNTH",), ("GRID",), n_1d=64, side_2d=16, scales=(10**3,),
                                               epsilons=(1.0,), trials=2, opt_iterations=20, mwem_queries=100,
                                               error_queries_2d=200))
    assert db.main(["--data", str(data), "--quiet"]) == 0
    assert (results / "dpbench" / "dpbench.csv").is_file() and not figures.exists()
    assert capsys.readouterr().err == ""
    assert db.main(["--data", str(data), "--paper-figures"]) == 0
    err = capsys.readouterr().err
    assert (figures / "dpbench.csv").is_file()
    assert "strategies 1/" in err and "cells 1/2: SYNTH (1D), scale 1e+03, ε = 1" in err


# ---- figures ------------------------------------------------------------------------------------------------

def test_postprocess_figure_tells_epsilon_apart_and_has_no_empty_panel(tmp_path, figures_drawn):
    cfg = pp.Config(("a",), ((32, ("prefix",), ("H2",), pp.RECONSTRUCTIONS),), scales=(10**3, 10**5),
                    epsilons=(0.1, 1.0), runs=3, datasets_2d=("g",),
                    sizes_2d=((4, ("prefix_2d", "ranges_2d"), ("identity",), pp.RECONSTRUCTIONS),))
    rows = pp.run({"a": _shape(0, 4096), "g": _shape(1, (16, 16))}, cfg)
    pp.plot(rows, tmp_path)
    fig = figures_drawn[-1]
    assert len(fig.axes) == 3  # 1 panel of 1-D data, 2 of 2-D: none empty, none hidden
    assert all(ax.get_visible() and ax.get_lines() for ax in fig.axes)
    assert "relative to least squares" in fig._suptitle.get_text()
    (legend,) = fig.legends
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels == ["nnls, ε = 0.1", "nnls, ε = 1", "projection, ε = 0.1", "projection, ε = 1"]
    looks = {(str(h.get_color()), h.get_marker(), str(h.get_linestyle()), h.get_fillstyle())
             for h in legend.legend_handles}
    assert len(looks) == 4 and len({m for _, m, _, _ in looks}) == 4 and len({c for c, *_ in looks}) == 4


def _md_row(workload, strategy, ratio, exact=True):
    return {"workload": workload, "noise": "laplace", "strategy": strategy, "total_exact": exact,
            "rmse_ratio_to_identity": ratio, "total_squared_error": 100.0 * ratio**2, "svd_bound": 1.0}


def test_multidim_axis_is_set_by_exact_values(tmp_path, figures_drawn):
    rows = [_md_row(w, "identity", 1.0) for w in ("a", "b")]
    rows += [_md_row("a", "kron", 0.3), _md_row("a", "union", 1.4e4, exact=False), _md_row("b", "kron", 2.0),
             _md_row("b", "union", 0.5, exact=False)]
    multidim.plot(rows, tmp_path)
    (ax,) = figures_drawn[-1].axes
    low, high = ax.get_ylim()
    assert high < 10 and low <= 0.1  # the exact values 0.3…2 and the bound 0.1 set it, not the 14,000
    notes = [t.get_text() for t in ax.texts]
    assert len(notes) == 1 and "off scale" in notes[0] and "14,000" in notes[0]


def test_convergence_figure_names_its_matrix_and_says_what_to_conclude(tmp_path, figures_drawn):
    rows = [{"workload": "all_range", "n": 4, "step": k + 1, "rank_gap": g, "objective": o, "target": 1.0,
             "start": s} for s, gaps, objs in (("svd", [1e-2, 1e-9, 1e-3], [5.0, 4.0, 4.0]),
                                               ("identity", [1e-2, 1e-3], [6.0, 6.0]))
            for k, (g, o) in enumerate(zip(gaps, objs, strict=True))]
    _common.write_csv(tmp_path / "convergence.csv", geometry.CONV_COLUMNS, rows)
    geometry.plot_convergence(tmp_path)
    fig = figures_drawn[-1]
    title = fig._suptitle.get_text()
    assert "What to conclude" in title and "met at only 1 of 5 solves" in title and "identity start never" in title
    assert "not the workload's Gram G" in title and "L = [[I, A], [Aᵀ, X]]" in title
    assert all(" of G" not in ax.get_ylabel() for ax in fig.axes)
    assert "×1.50" in " ".join(t.get_text() for t in fig.axes[0].get_legend().get_texts())


def test_no_internal_issue_numbers_in_what_the_experiments_write():
    rows = multidim.run(TINY_MULTIDIM, gaussian=())
    assert not re.search(r"\bissue\b", multidim.markdown(rows), re.IGNORECASE)
    for path in (ROOT / "paper_figures").glob("*.md"):
        assert not re.search(r"\bissue \d+", path.read_text(), re.IGNORECASE), path
