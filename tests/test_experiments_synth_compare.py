"""experiments._synth_compare: the cell-by-cell verdict against OpenDP (ratios, z, CPU, missing peers)."""

import math

from experiments import _synth_compare as sc


def _row(method, model, model_se, rows, rows_se, sampled=math.nan, sampled_se=math.nan, cpu=1.0, ds="d", eps=1.0):
    return {"dataset": ds, "epsilon": eps, "method": method, "model_error": model, "model_error_se": model_se,
            "records_error": rows, "records_error_se": rows_se, "sampled_error": sampled,
            "sampled_error_se": sampled_se, "cpu_seconds": cpu}


def test_ratios_and_z_against_the_peer_and_its_better_rows():
    s = [_row("mmopt AIM", 0.30, 0.03, 0.32, 0.04, cpu=2.0),
         _row("OpenDP AIM", 0.20, 0.04, 0.90, 0.10, sampled=0.40, sampled_se=0.03, cpu=50.0)]
    (c,) = sc.comparison(s)
    assert c["algorithm"] == "AIM" and math.isclose(c["model_ratio"], 1.5)
    assert math.isclose(c["model_z"], 0.10 / 0.05)  # √(0.03² + 0.04²) = 0.05
    assert math.isclose(c["rows_ratio"], 0.8) and math.isclose(c["rows_z"], -0.08 / 0.05)  # the sampled rows
    assert c["cpu_ratio"] == 25.0
    text = "\n".join(sc.comparison_markdown(s))
    assert "0 of 1 cells" in text and "d ε = 1 AIM (model 1.500, z = +2.0" in text


def test_a_deterministic_difference_has_infinite_z_and_a_missing_peer_is_named():
    s = [_row("mmopt MST", 0.11, 0.0, 0.12, 0.0), _row("OpenDP MST", 0.10, 0.0, 0.13, 0.0),
         _row("mmopt AIM", 0.05, 0.001, 0.06, 0.001, eps=10.0)]
    (c,) = sc.comparison(s)
    assert c["model_z"] == math.inf and c["rows_z"] == -math.inf
    text = "\n".join(sc.comparison_markdown(s))
    assert "No OpenDP trial to compare with (a failed or stopped peer run leaves none): d ε = 10 AIM." in text


def test_without_any_peer_there_is_no_table():
    assert sc.comparison_markdown([_row("mmopt MST", 0.1, 0.01, 0.1, 0.01)]) == []


def test_one_trial_resolves_nothing_and_a_missing_mean_is_not_at_or_below():
    """One trial has an unknown spread, not none (z was −inf, "resolved"); a cell without mmopt's rows error
    (ratio nan) was counted among those at or below OpenDP's error."""
    s = [_row("mmopt MST", 0.09, math.nan, math.nan, math.nan), _row("OpenDP MST", 0.10, math.nan, 0.13, 0.01)]
    (c,) = sc.comparison(s)
    assert math.isnan(c["model_z"]) and math.isnan(c["rows_ratio"]) and math.isnan(c["rows_z"])
    text = "\n".join(sc.comparison_markdown(s))
    assert "| 0.900 | n/a | nan | n/a |" in text and "0 of 1 cells at or below" in text
    assert "Without a mean error on one side to compare: d ε = 1 MST." in text
