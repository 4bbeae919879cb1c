"""``mmopt synth``: rows labelled by the domain, the privacy report, and refusals before any noise."""

import json
import os
import signal

import pandas as pd
import pytest
from test_synth_mst import D, _records

from mmopt.cli import main
from mmopt.records import marginal_counts

pytest.importorskip("pyarrow")


@pytest.fixture()
def files(tmp_path):
    df = _records(1500)
    df.to_parquet(tmp_path / "people.parquet")
    D.to_json(tmp_path / "domain.json")
    return tmp_path


@pytest.mark.parametrize("method", ["aim", "mst"])
def test_synth_writes_labelled_rows_and_reports_the_budget(files, method, capsys):
    out = files / "synth.csv"
    code = main(["synth", "--records", str(files / "people.parquet"), "--domain", str(files / "domain.json"),
                 "--method", method, "--workload", "marginals:k=2", "--epsilon", "1", "--rows", "300",
                 "--seed", "0", "--out", str(out), "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    rows = pd.read_csv(out)
    assert rows.columns.tolist() == list(D.names) and len(rows) == report["rows"] == 300
    assert set(rows["a"]) <= {"x", "y", "z"} and set(rows["c"]) <= {0.0, 10.0, 20.0, 30.0}  # bins by left edge
    # the rows written count again under the domain (bin labels were dropped as outside it: zero rows)
    assert int(marginal_counts(rows, D, [("c",)])[(2,)].sum()) == 300
    assert report["method"] == method and report["epsilon"] <= 1.0 and report["rho"] <= report["budget_rho"]
    assert ["a"] in report["measured"] and report["sampler"] == "numpy-seeded"


def test_synth_bins_labels_writes_each_bins_label(files):
    """The help said binned columns were labelled '[a, b)' while they held left edges: --bins chooses."""
    out = files / "labels.csv"
    assert main(["synth", "--records", str(files / "people.parquet"), "--domain", str(files / "domain.json"),
                 "--method", "mst", "--epsilon", "1", "--rows", "200", "--seed", "0", "--bins", "labels",
                 "--out", str(out)]) == 0
    rows = pd.read_csv(out)
    assert len(rows) == 200 and set(rows["c"]) <= {"[0, 10)", "[10, 20)", "[20, 30)", "[30, 40]"}  # the last bin closed


def test_synth_refuses_before_any_noise(files, capsys):
    base = ["synth", "--records", str(files / "people.parquet"), "--domain", str(files / "domain.json"),
            "--epsilon", "1"]
    assert main([*base, "--out", str(files / "synth.txt")]) == 2
    assert main([*base, "--out", str(files / "people.parquet")]) == 2
    assert main([*base, "--out", str(files / "s.csv"), "--workload", "marginals:k=9"]) == 2
    assert main([*base, "--out", str(files / "s.csv"), "--delta", "0"]) == 2
    err = capsys.readouterr().err
    assert "must end in .csv or .parquet" in err and "never writes over its own input" in err
    # in the command's words (it said "The 'privacy' parameter of aim must have delta > 0")
    assert "--delta must be > 0 for synth" in err and "'privacy' parameter" not in err
    assert main([*base, "--out", str(files / "s.csv"), "--rows", "0"]) == 2  # spent the budget on a header
    assert "--rows of synth must be in [1," in capsys.readouterr().err and not (files / "s.csv").exists()


def test_mst_reads_the_workload_when_given_and_messages_name_synth(files, capsys, monkeypatch):
    """--workload with --method mst was dropped without a word; the refusal named 'mmopt release'; ε = 10⁵
    ended in an internal ArithmeticError (exit 1, 'Please report this')."""
    import mmopt.synth as synth_module
    seen = {}
    real = synth_module.mst

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(synth_module, "mst", spy)
    base = ["synth", "--records", str(files / "people.parquet"), "--domain", str(files / "domain.json"),
            "--method", "mst", "--seed", "0", "--out", str(files / "s.csv"), "--force"]
    assert main([*base, "--epsilon", "1", "--workload", "marginals:a*b"]) == 0
    assert seen["workload"] == [("a", "b")]
    assert main([*base, "--epsilon", "1"]) == 0 and seen["workload"] is None  # the paper's score by default
    capsys.readouterr()
    assert main([*base, "--epsilon", "1", "--workload", "marginals:a*zz"]) == 2
    assert "of mmopt synth names attribute 'zz'" in capsys.readouterr().err
    assert main([*base, "--epsilon", "1e5"]) == 2
    assert "past what OpenDP's zCDP → (ε, δ) conversion can evaluate" in capsys.readouterr().err


def test_aim_s_default_workload_fits_a_domain_of_two_attributes(tmp_path, capsys):
    """The default 'marginals:k=3' was refused on two attributes, in words about a --workload never typed."""
    from mmopt.records import Attribute, Domain
    two = Domain((Attribute("a", categories=("x", "y")), Attribute("b", categories=(0, 1))))
    pd.DataFrame({"a": ["x", "y"] * 40, "b": [0, 1, 1, 0] * 20}).to_parquet(tmp_path / "r.parquet")
    two.to_json(tmp_path / "d.json")
    assert main(["synth", "--records", str(tmp_path / "r.parquet"), "--domain", str(tmp_path / "d.json"),
                 "--epsilon", "1", "--rows", "10", "--seed", "0", "--out", str(tmp_path / "s.csv"), "--json"]) == 0
    assert ["a", "b"] in json.loads(capsys.readouterr().out)["measured"]


def test_synth_draws_more_rows_than_one_call_takes_in_batches(files, monkeypatch, capsys):
    """30 million rows on three attributes passed the --rows check, then Synthetic.records refused them after the
    budget was spent (exit 2, the usage code, and no word of the spend). The CLI now draws in calls of at most
    rows_per_call rows: here the allocation limit is lowered so that 250 rows take three calls."""
    from mmopt._base import validation as v
    from mmopt.synth.result import rows_per_call
    monkeypatch.setattr(v, "MAX_ALLOCATION_ENTRIES", 100 * (len(D.names) + 4))
    assert rows_per_call(len(D.names)) == 100
    outs = [files / f"batched{i}.csv" for i in range(2)]
    for out in outs:
        assert main(["synth", "--records", str(files / "people.parquet"), "--domain", str(files / "domain.json"),
                     "--method", "mst", "--epsilon", "1", "--rows", "250", "--seed", "3", "--out", str(out)]) == 0
    rows = [pd.read_csv(out) for out in outs]
    assert len(rows[0]) == 250 and rows[0].equals(rows[1])  # seeded batches repeat
    assert set(rows[0]["a"]) <= {"x", "y", "z"}
    assert int(marginal_counts(rows[0], D, [("c",)])[(2,)].sum()) == 250


def test_the_text_report_never_shows_the_rho_spent_above_the_budget(files, capsys):
    """The ρ spent (rounded up) stood beside the budget rounded to nearest: at ε = 10⁻⁶, "ρ = 6.55e-14 (budget ρ =
    6.54999e-14)" for two equal numbers, as if the budget were overspent (a newcomer's audit)."""
    code = main(["synth", "--records", str(files / "people.parquet"), "--domain", str(files / "domain.json"),
                 "--method", "mst", "--epsilon", "1e-6", "--rows", "10", "--seed", "0",
                 "--out", str(files / "s.csv")])
    assert code == 0
    line = next(t for t in capsys.readouterr().out.splitlines() if t.startswith("privacy:"))
    spent, budget = line.split("ρ = ")[1].split(" ")[0], line.split("budget ρ = ")[1].split(")")[0]
    assert float(spent) <= float(budget), line


def test_synth_spends_from_a_ledger_once_and_refuses_what_does_not_fit(files, capsys):
    """--ledger as 'mmopt release --ledger': one spend of the run on the ledger, and a second run past the total
    refused before the records are read (its --out never written), in the command's words."""
    ledger = files / "budget.json"
    base = ["synth", "--records", str(files / "people.parquet"), "--domain", str(files / "domain.json"),
            "--method", "mst", "--epsilon", "0.6", "--delta", "1e-8", "--rows", "20", "--ledger", str(ledger)]
    assert main([*base, "--ledger-total", "1,1e-6", "--out", str(files / "one.csv"), "--json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert "remain after this release" in captured.err and report["sampler"] == "opendp"
    (spend,) = json.loads(ledger.read_text())["spends"]
    assert (spend["epsilon"], spend["delta"], spend["rho"]) == (report["epsilon"], report["delta"], report["rho"])
    assert spend["status"] == "spent" and spend["epsilon"] <= 0.6
    assert main([*base, "--out", str(files / "two.csv")]) == 2  # 0.6 + 0.6 > 1
    err = capsys.readouterr().err
    assert f"The --ledger file '{ledger}' (total ε=1, δ=1e-06, basic composition) cannot pay" in err
    assert "Rerun with --epsilon 0.4" in err and not (files / "two.csv").exists()
    assert len(json.loads(ledger.read_text())["spends"]) == 1


def test_synth_refuses_a_seed_or_a_run_a_new_ledger_cannot_pay_and_creates_no_ledger(files, capsys):
    ledger = files / "new.json"
    code = main(["synth", "--records", str(files / "people.parquet"), "--domain", str(files / "domain.json"),
                 "--epsilon", "1", "--seed", "0", "--out", str(files / "s.csv"), "--ledger", str(ledger),
                 "--ledger-total", "2,1e-6"])
    assert code == 2 and "--seed 0 draws numpy's seeded noise" in capsys.readouterr().err
    assert not ledger.exists() and not (files / "s.csv").exists()
    # under PLD a run is a worst-case (ε, δ) mechanism: at the total's δ it never fits, and the hint says why
    code = main(["synth", "--records", str(files / "people.parquet"), "--domain", str(files / "domain.json"),
                 "--epsilon", "0.5", "--delta", "1e-6", "--out", str(files / "s.csv"), "--ledger", str(ledger),
                 "--ledger-total", "2,1e-6", "--composition", "pld"])
    assert code == 2 and "give a smaller --delta" in capsys.readouterr().err and not ledger.exists()


def test_synth_save_model_writes_the_model_the_rows_came_from(files, capsys):
    """--save-model: the fitted model, whose rows under the run's seed are those written to --out."""
    from mmopt.cli.release_records import _write
    from mmopt.synth import load

    out, model = files / "synth.csv", files / "model.npz"
    base = ["synth", "--records", str(files / "people.parquet"), "--domain", str(files / "domain.json"),
            "--method", "mst", "--epsilon", "1", "--rows", "300", "--seed", "0", "--out", str(out)]
    assert main([*base, "--save-model", str(model), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == str(model)
    s = load(model)
    assert (s.method, s.sampler, s.seed) == ("mst", "numpy-seeded", 0)
    _write(s.records(300, seed=0), str(files / "again.csv"), ".csv")
    assert (files / "again.csv").read_bytes() == out.read_bytes()
    before = model.read_bytes()
    base[-1] = str(files / "other.csv")
    assert main([*base, "--save-model", str(model)]) == 2                    # exists: refused before any noise
    assert main([*base, "--save-model", str(files / "model.txt")]) == 2
    err = capsys.readouterr().err
    assert "The --save-model file '" in err and "exists. Pass --force" in err and "must end in .npz" in err
    assert model.read_bytes() == before and not (files / "model.txt").exists() and not (files / "other.csv").exists()
    assert main([*base, "--save-model", str(model), "--force", "--method", "aim"]) == 0
    assert load(model).method == "aim" and "model → " in capsys.readouterr().out


def test_synth_says_in_options_why_an_existing_ledger_cannot_pay_for_a_run(files, capsys):
    """The plan phase checks an existing ledger's room as a synth run is charged, and says so in options. Under PLD
    a run is a worst-case (ε, δ) mechanism: (0.6, 1e-8) fits as one Gaussian release but not as a run, so checked
    as a release the plan phase passed and mst's own refusal (in API words) came later. Under basic composition with
    δ used up the remedy was '--delta 0', which synth refuses."""
    import mmopt
    base = ["synth", "--records", str(files / "people.parquet"), "--domain", str(files / "domain.json"),
            "--method", "mst", "--epsilon", "0.6", "--delta", "1e-8", "--out", str(files / "s.csv")]
    pld = files / "pld.json"
    acc = mmopt.Accountant(mmopt.Privacy(1.0, 1e-6), "pld", path=pld)
    acc.spend(mmopt.Privacy(0.5, 1e-8), "earlier")
    assert acc.can_spend(mmopt.Privacy(0.6, 1e-8), release=True)  # as a release it would fit
    assert main([*base, "--ledger", str(pld)]) == 2
    err = capsys.readouterr().err
    assert f"The --ledger file '{pld}' (total ε=1, δ=1e-06, pld composition) cannot pay" in err
    assert "charged as a worst-case (ε, δ) mechanism" in err and "mst:" not in err
    basic = files / "basic.json"
    mmopt.Accountant(mmopt.Privacy(1.0, 1e-6), path=basic).spend(mmopt.Privacy(0.2, 1e-6), "all of δ")
    assert main([*base, "--ledger", str(basic)]) == 2
    err = capsys.readouterr().err
    assert "its δ is used up, and a synth run needs δ > 0" in err and "--delta 0" not in err
    assert not (files / "s.csv").exists() and len(mmopt.Accountant.load(pld).spends) == 1


def _interrupting(monkeypatch, module, name, signum, *, after: bool = False):
    """Replace ``module.name`` by a wrapper that sends ``signum`` to this process (before the call, or ``after`` it);
    the list it returns records the signals sent."""
    real, sent = getattr(module, name), []

    def wrapper(*args, **kwargs):
        if not after:
            sent.append(signum)  # first: an unheld signal raises at once
            os.kill(os.getpid(), signum)
        result = real(*args, **kwargs)
        if after and not sent:
            sent.append(signum)
            os.kill(os.getpid(), signum)
        return result

    monkeypatch.setattr(module, name, wrapper)
    return sent


@pytest.fixture()
def interactive():
    """The handlers of an interactive run (a shell started in the background ignores SIGINT; SIGTERM's default would
    end pytest itself if a signal were not held): each raises KeyboardInterrupt, as Ctrl-C does."""
    def stop(signum, frame):
        raise KeyboardInterrupt

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for s, handler in previous.items():
        signal.signal(s, handler)


def _ledger_run(files, *extra):
    return ["synth", "--records", str(files / "people.parquet"), "--domain", str(files / "domain.json"),
            "--method", "mst", "--epsilon", "0.5", "--delta", "1e-8", "--rows", "20", "--ledger",
            str(files / "budget.json"), "--ledger-total", "1,1e-6", "--out", str(files / "s.csv"), *extra]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_the_rows_are_written_waits_for_them_and_says_the_budget_was_spent(files, capsys, monkeypatch,
                                                                                         interactive, signum):
    """Ctrl-C (or SIGTERM) after the run spent the budget, as the rows were written: it ended 'mmopt: error:
    interrupted' (exit 130) with no rows and no word that the budget was spent. Now the rows and the model are
    written, then the command exits 130 saying the budget was spent and which ledger records it."""
    from mmopt.cli import synth as cmd
    from mmopt.synth import load
    sent = _interrupting(monkeypatch, cmd, "_write", signum)
    code = main(_ledger_run(files, "--save-model", str(files / "model.npz")))
    err = capsys.readouterr().err
    assert code == 130 and sent == [signum]
    assert len(pd.read_csv(files / "s.csv")) == 20 and load(files / "model.npz").method == "mst"
    assert f"{signal.Signals(signum).name} received after the noise was drawn" in err
    ledger = files / "budget.json"
    assert f"the privacy budget WAS spent and is recorded in the ledger '{ledger}'" in err
    (entry,) = json.loads(ledger.read_text())["spends"]
    assert entry["status"] == "spent" and [p.name for p in files.glob(".mmopt-*")] == []  # no temporary file left


def test_ctrl_c_during_the_run_after_its_first_draw_lets_it_finish(files, capsys, monkeypatch, interactive):
    """Ctrl-C between MST's draws: the run was abandoned with its ledger entry pending (the budget counted in full)
    and nothing to show for it; now it finishes, its entry settled, and its rows are written."""
    from mmopt._base import opendp as od
    sent = _interrupting(monkeypatch, od, "note_draw", signal.SIGINT, after=True)
    code = main(_ledger_run(files))
    err = capsys.readouterr().err
    assert code == 130 and sent == [signal.SIGINT] and len(pd.read_csv(files / "s.csv")) == 20
    assert "WAS spent" in err and "remain after this release" in err
    (entry,) = json.loads((files / "budget.json").read_text())["spends"]
    assert entry["status"] == "spent" and entry["epsilon"] <= 0.5


def test_a_second_ctrl_c_after_the_draw_stops_at_once_and_keeps_the_budget_counted(files, capsys, monkeypatch,
                                                                                    interactive):
    """Held, a first Ctrl-C left a long AIM run no way out but SIGKILL: a second one stops the command at once,
    writing nothing, with the run's ledger entry left pending (counted in full) and the spend said."""
    from mmopt._base import opendp as od
    real, sent = od.note_draw, []

    def twice(*args, **kwargs):
        result = real(*args, **kwargs)
        if len(sent) < 2:  # after the first draw, then after the second
            sent.append(signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
        return result

    monkeypatch.setattr(od, "note_draw", twice)
    code = main(_ledger_run(files))
    err = capsys.readouterr().err
    assert code == 130 and sent == [signal.SIGINT] * 2 and not (files / "s.csv").exists()
    assert "a second one stops it at once" in err and "a second SIGINT: stopping now" in err and "WAS spent" in err
    (entry,) = json.loads((files / "budget.json").read_text())["spends"]
    assert entry["status"] == "pending" and entry["epsilon"] == 0.5  # the whole request, until settled by hand


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_second_ctrl_c_while_the_ledger_is_settled_never_undercounts(files, capsys, monkeypatch, interactive,
                                                                        when):
    """The run returned and its pending entry is being replaced by what it spent when a second Ctrl-C comes: before
    the file is written the entry stays pending at the whole request, after it the file holds the settled spend;
    never removed, never lower. The handlers of before the command are back once it stops."""
    from mmopt._base import opendp as od
    from mmopt.accounting import _disk
    real_note, real_write, sent = od.note_draw, _disk.write_atomically, []

    def note():
        real_note()
        if not sent:  # the first Ctrl-C, held: the run goes on
            sent.append(signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)

    def write(target, text, **kwargs):
        settling = '"spent"' in text and len(sent) == 1
        if settling and when == "before":
            sent.append(signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
        real_write(target, text, **kwargs)
        if settling and when == "after":
            sent.append(signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)

    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    monkeypatch.setattr(od, "note_draw", note)
    monkeypatch.setattr(_disk, "write_atomically", write)
    code = main(_ledger_run(files))
    err = capsys.readouterr().err
    assert code == 130 and sent == [signal.SIGINT] * 2 and "a second SIGINT: stopping now" in err
    assert not (files / "s.csv").exists() and [p.name for p in files.glob(".mmopt-*")] == []
    (entry,) = json.loads((files / "budget.json").read_text())["spends"]
    if when == "before":
        assert entry["status"] == "pending" and entry["epsilon"] == 0.5 and entry["delta"] == 1e-8
    else:
        assert entry["status"] == "spent" and 0 < entry["epsilon"] <= 0.5 and entry["rho"] > 0
    assert {s: signal.getsignal(s) for s in handlers} == handlers


def test_the_handlers_are_restored_after_a_run_that_finished_or_failed(files, capsys, monkeypatch, interactive):
    """signals_held puts back the handlers it found, after a run that wrote its rows and after one whose write
    raised (a held signal must not outlive the command: a later Ctrl-C would be held in a library session)."""
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    assert main(_ledger_run(files)) == 0 and {s: signal.getsignal(s) for s in handlers} == handlers
    from mmopt.cli import synth as cmd

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the writer")

    monkeypatch.setattr(cmd, "_deliver", broken)
    for done in ("budget.json", "s.csv"):  # a second run from the start
        (files / done).unlink()
    assert main(_ledger_run(files)) == 1
    assert "a bug in the writer" in capsys.readouterr().err
    assert {s: signal.getsignal(s) for s in handlers} == handlers


def test_ctrl_c_before_the_first_draw_stops_synth_at_once(files, capsys, monkeypatch, interactive):
    """Before any noise nothing is spent: Ctrl-C stops the command at once, and the ledger it was creating is
    removed (held, it would have run and spent)."""
    import mmopt.synth as synth_module
    from mmopt._base import opendp as od
    sent = _interrupting(monkeypatch, synth_module, "mst", signal.SIGINT)
    draws = od.DRAWS
    code = main(_ledger_run(files))
    err = capsys.readouterr().err
    assert code == 130 and sent == [signal.SIGINT] and od.DRAWS == draws
    assert "mmopt: error: interrupted" in err and "WAS spent" not in err
    assert not (files / "s.csv").exists() and not (files / "budget.json").exists()


def test_a_seeded_simulation_stops_at_once_and_leaves_no_partial_file(files, capsys, monkeypatch, interactive):
    """A seeded run spends nothing, so it is not held (and not said to have spent a budget); a Ctrl-C in the middle
    of the write leaves no partial file under the --out name (written to a temporary file, then renamed)."""
    def half_then_ctrl_c(self, path, *args, **kwargs):
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("a,b\nx,")  # a partial row, then the interrupt
        raise KeyboardInterrupt

    monkeypatch.setattr(pd.DataFrame, "to_csv", half_then_ctrl_c)
    code = main(["synth", "--records", str(files / "people.parquet"), "--domain", str(files / "domain.json"),
                 "--method", "mst", "--epsilon", "1", "--rows", "20", "--seed", "0", "--out", str(files / "s.csv")])
    err = capsys.readouterr().err
    assert code == 130 and "mmopt: error: interrupted" in err and "spent" not in err
    assert not (files / "s.csv").exists() and [p.name for p in files.glob(".mmopt-*")] == []
