"""The command line's numbers (mmopt.cli._numbers): decimal literals as typed, refused where float() would change
them — digit separators and literals that round to 0 or inf — in every option that takes one."""

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
