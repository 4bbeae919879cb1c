"""The command line's numbers (mmopt.cli._numbers): decimal literals as typed, refused where float() would change
them — digit separators and literals that round to 0 or inf — in every option that takes one."""

import json

import numpy as np
import pytest

from mmopt.cli import main
from mmopt.cli._numbers import number

BASE = ["evaluate", "prefix:8", "--strategy", "identity"]


@pytest.mark.parametrize(("option", "value", "said"), [
    ("--epsilon", "1_0", "is not a decimal number"),        # float() read 10
    ("--delta", "1e-400", "rounds to 0.0"),                  # δ = 0: Laplace noise, without a word
    ("--epsilon", "1e400", "rounds to inf"),
    ("--epsilon", "1,5", "is not a decimal number"),
])
def test_refused_in_the_options_words(option, value, said, capsys):
    args = [*BASE, option, value] + (["--epsilon", "1"] if option != "--epsilon" else [])
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"argument {option}" in err and said in err


@pytest.mark.parametrize(("text", "value"), [("1e-1", 0.1), (".5e-6", 5e-7), ("0", 0.0), ("0e-500", 0.0),
                                             ("-2", -2.0), ("1e-300", 1e-300), ("inf", np.inf)])
def test_plain_literals_read_as_typed(text, value):
    assert number(text) == value  # nan, inf and signs pass: each option refuses them in its own words


def test_ledger_total_is_read_the_same_way(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    np.savetxt("x.csv", np.arange(4.0)[None], delimiter=",")
    assert main(["release", "prefix:4", "--strategy", "identity", "--data", "x.csv", "--epsilon", "0.1",
                 "--out", "a.csv", "--ledger", "l.json", "--ledger-total", "1_0"]) == 2
    assert "--ledger-total must be EPS or EPS,DELTA" in capsys.readouterr().err
    assert not (tmp_path / "l.json").exists() and not (tmp_path / "a.csv").exists()


@pytest.mark.parametrize(("args", "said"), [
    (["evaluate", "stack(0_5*prefix:8,all_range:8)", "--strategy", "identity"], "weight '0_5' is not a number"),
    (["evaluate", "prefix:1_6", "--strategy", "identity"], "'1_6' is not an integer"),
    (["evaluate", "random_range:16:1_0:0", "--strategy", "identity"], "'1_0' is not an integer"),
    (["evaluate", "prefix:16", "--strategy", "hierarchical:1_6"], "is not an integer"),
    (["optimize", "prefix:8", "--seed", "1_0"], "'1_0' is not an integer written in digits"),
    (["optimize", "prefix:8", "--option", "restarts=1_0"], "digit separator"),
    (["optimize", "prefix:8", "--budget", "1_0"], "written plainly"),
])
def test_digit_separators_are_refused_everywhere(args, said, capsys):
    """A newcomer's audit: int() and float() read 1_0 as 10, so a weight 0_5 became 5, prefix:1_6 prefix(16), and
    --seed / --option / --budget took 10, silently, where --epsilon refused it."""
    assert main(args) == 2
    assert said in capsys.readouterr().err


def test_a_folder_or_a_binary_domain_is_named(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "w.npy").mkdir()
    assert main(["evaluate", "w.npy", "--strategy", "identity"]) == 2
    assert "workload file 'w.npy' is a folder" in capsys.readouterr().err
    from mmopt.records import Domain
    np.save(tmp_path / "d.npy", np.arange(3))
    with pytest.raises(ValueError, match="'.*d.npy' is not UTF-8 text: a domain is a JSON file"):
        Domain.from_json(tmp_path / "d.npy")


def test_optimize_extra_figures_are_on_the_workloads_scale():
    """extra['dual_bound'] and extra['objective'] were the normalised Gram's: 8.5× below lower_bound on prefix(16)."""
    import mmopt
    r = mmopt.optimize(mmopt.workload.prefix(16), method="l2_approx")
    assert r.extra["dual_bound"] == pytest.approx(r.lower_bound, rel=1e-12)
    assert r.extra["objective"] == pytest.approx(r.objective, rel=1e-6)


def test_printed_figures_round_to_their_safe_side(tmp_path, capsys, monkeypatch):
    """Each figure printed to the nearest landed on the unsafe side somewhere (a helper's audit): the remaining ε
    after a ledger release was printed 0.666667 (exact 0.6666667) and the next release at it was refused; a plan's
    certified minimum ε printed above itself (3.19547 for 3.1954662), a noise scale and a sensitivity below the
    ones drawn. Oracle: the exact figures in --json / the API."""
    monkeypatch.chdir(tmp_path)
    np.savetxt("x.csv", np.arange(8.0)[None], delimiter=",")
    assert main(["release", "prefix:8", "--strategy", "H2", "--data", "x.csv", "--epsilon", "0.3333333",
                 "--out", "a.csv", "--ledger", "l.json", "--ledger-total", "1"]) == 0
    left = capsys.readouterr().err.split("ε=")[1].split(",")[0]
    assert float(left) <= 1 - 0.3333333
    assert main(["release", "prefix:8", "--strategy", "H2", "--data", "x.csv", "--epsilon", left,
                 "--out", "b.csv", "--ledger", "l.json"]) == 0
    capsys.readouterr()
    assert main(["plan", "prefix:16", "--target", "7", "--delta", "1e-6"]) == 0
    text = capsys.readouterr().out
    assert main(["plan", "prefix:16", "--target", "7", "--delta", "1e-6", "--json"]) == 0
    exact = json.loads(capsys.readouterr().out)
    shown = {line.split()[0]: line.split()[1] for line in text.splitlines() if len(line.split()) == 2}
    assert float(shown["epsilon_lower_bound"]) <= exact["epsilon_lower_bound"] <= exact["epsilon"] <= \
        float(shown["epsilon"])
    np.savetxt("x4.csv", np.arange(4.0)[None], delimiter=",")
    assert main(["release", "prefix:4", "--strategy", "H2", "--data", "x4.csv", "--epsilon", "0.9", "--delta",
                 "1e-6", "--out", "c.csv"]) == 0
    rows = {line.split()[0]: line.split()[1] for line in capsys.readouterr().out.splitlines()
            if len(line.split()) == 2}
    assert float(rows["sensitivity"]) >= 3 ** 0.5 and float(rows["noise_scale"]) >= 8.6596716
