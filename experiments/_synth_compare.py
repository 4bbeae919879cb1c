"""experiments.synth's verdict table: mmopt's MST and AIM against OpenDP's, cell by cell, with the difference in
standard errors.

Issue #33 asks for workload error at or below the peer's "mean over trials, with its standard error" and for ten
times less CPU. The ratio alone hides which cells are ties: z = (mean_mmopt − mean_peer)/√(se_mmopt² + se_peer²)
says how many standard errors of the difference separate them (|z| < 2: not resolved by the trials run). Rows are
compared with the peer's better rows column (OpenDP's default rounding or its sampling), models with models.
"""

from __future__ import annotations

import math

__all__ = ["comparison", "comparison_markdown"]


def _z(a: float, a_se: float, b: float, b_se: float) -> float:
    if math.isnan(a_se) or math.isnan(b_se):  # one trial: its spread is unknown, not 0 (it gave ±inf: "resolved")
        return math.nan
    se = math.hypot(a_se, b_se)
    if se == 0.0:  # no spread over the trials on both sides: only the sign is known
        return math.copysign(math.inf, a - b) if a != b else 0.0
    return (a - b) / se


def _signed(z: float) -> str:
    return "n/a" if math.isnan(z) else f"{z:+.1f}"


def _cell(dataset, epsilon: float, algorithm: str) -> str:
    return f"{dataset} ε = {epsilon:g} {algorithm}"


def _best_rows(r: dict) -> tuple[float, float]:
    """The peer's better rows error (mean, se): its default rows or its sampled rows."""
    pairs = [(r[k], r[k + "_se"]) for k in ("records_error", "sampled_error") if not math.isnan(r[k])]
    return min(pairs) if pairs else (math.nan, math.nan)


def comparison(summary_rows: list[dict]) -> list[dict]:
    """One row per (dataset, ε, algorithm) with both mmopt's and OpenDP's summaries: error ratios (mmopt / OpenDP)
    and z for the model and the rows, and the CPU ratio (OpenDP / mmopt).

    Examples
    --------
    >>> s = [{"dataset": "d", "epsilon": 1.0, "method": "mmopt MST", "model_error": 0.10, "model_error_se": 0.003,
    ...       "records_error": 0.11, "records_error_se": 0.0, "sampled_error": math.nan,
    ...       "sampled_error_se": math.nan, "cpu_seconds": 1.0},
    ...      {"dataset": "d", "epsilon": 1.0, "method": "OpenDP MST", "model_error": 0.11, "model_error_se": 0.004,
    ...       "records_error": 0.5, "records_error_se": 0.01, "sampled_error": 0.12, "sampled_error_se": 0.0,
    ...       "cpu_seconds": 30.0}]
    >>> c = comparison(s)[0]
    >>> round(c["model_ratio"], 4), round(c["model_z"], 2), round(c["rows_ratio"], 4), c["cpu_ratio"]
    (0.9091, -2.0, 0.9167, 30.0)
    """
    by = {(r["dataset"], r["epsilon"], r["method"]): r for r in summary_rows}
    out = []
    for (ds, e, method), ours in by.items():
        if not method.startswith("mmopt "):
            continue
        algorithm = method.split(" ", 1)[1]
        peer = by.get((ds, e, "OpenDP " + algorithm))
        if peer is None:
            continue
        rows_peer, rows_peer_se = _best_rows(peer)
        out.append({
            "dataset": ds, "epsilon": e, "algorithm": algorithm,
            "model_ratio": ours["model_error"] / peer["model_error"],
            "model_z": _z(ours["model_error"], ours["model_error_se"], peer["model_error"], peer["model_error_se"]),
            "rows_ratio": ours["records_error"] / rows_peer,
            "rows_z": _z(ours["records_error"], ours["records_error_se"], rows_peer, rows_peer_se),
            "cpu_ratio": peer["cpu_seconds"] / ours["cpu_seconds"],
        })
    return out


def comparison_markdown(summary_rows: list[dict]) -> list[str]:
    """The verdict table's markdown lines (empty when no cell has both mmopt's and OpenDP's runs)."""
    rows = comparison(summary_rows)
    if not rows:
        return []
    lines = ["", "## mmopt against OpenDP, cell by cell", "",
             "Ratio = mmopt's mean error / OpenDP's (rows: against OpenDP's better rows column); z = the difference "
             "of the means in standard errors of the difference (|z| < 2: a tie at these trials); CPU = OpenDP's "
             "CPU seconds / mmopt's.", "",
             "| dataset | ε | algorithm | model ratio | model z | rows ratio | rows z | CPU × less |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['dataset']} | {r['epsilon']:g} | {r['algorithm']} | {r['model_ratio']:.3f} | "
                     f"{_signed(r['model_z'])} | {r['rows_ratio']:.3f} | {_signed(r['rows_z'])} | "
                     f"{r['cpu_ratio']:.0f} |")
    # a ratio of nan (no mean on one side) is neither above nor at or below: it was counted as at or below
    below = [r for r in rows if r["model_ratio"] <= 1.0 and r["rows_ratio"] <= 1.0]
    above = [r for r in rows if r["model_ratio"] > 1.0 or r["rows_ratio"] > 1.0]
    unmeasured = [r for r in rows if r not in below and r not in above]
    lines += ["", f"{len(below)} of {len(rows)} cells at or below OpenDP's mean error on both the model and the "
              f"rows" + ("." if not above else "; above it: " + "; ".join(
                  f"{_cell(r['dataset'], r['epsilon'], r['algorithm'])} (model {r['model_ratio']:.3f}, "
                  f"z = {_signed(r['model_z'])}; rows {r['rows_ratio']:.3f}, z = {_signed(r['rows_z'])})"
                  for r in above) + ".")]
    if unmeasured:
        lines += ["", "Without a mean error on one side to compare: " + "; ".join(
            _cell(r["dataset"], r["epsilon"], r["algorithm"]) for r in unmeasured) + "."]
    paired = {(r["dataset"], r["epsilon"], r["algorithm"]) for r in rows}
    alone = [_cell(r["dataset"], r["epsilon"], r["method"].split(" ", 1)[1]) for r in summary_rows
             if r["method"].startswith("mmopt ")
             and (r["dataset"], r["epsilon"], r["method"].split(" ", 1)[1]) not in paired]
    if alone:  # a peer that failed or was stopped leaves no row: say so rather than drop the cell silently
        lines += ["", "No OpenDP trial to compare with (a failed or stopped peer run leaves none): "
                  + "; ".join(alone) + "."]
    return lines
