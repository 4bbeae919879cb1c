"""The figure, the verdict and the Markdown summary of experiments.dpbench (from the rows as written)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from experiments import _common
from experiments._dpbench_algorithms import ADAPTIVE, ALGORITHMS, INDEPENDENT
from experiments._dpbench_figures import look

CELL = ("dataset", "scale", "epsilon", "workload")
_ORDER = ("prefix", "all_range", "ranges_2d", "marginals")


def cells(rows: list[dict]) -> list[dict]:
    """Per (dataset, scale, ε, workload): the best data-independent and data-adaptive algorithm and the winner."""
    groups: dict[tuple, dict] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in CELL), {})[r["algorithm"]] = r
    out = []
    for key, algs in groups.items():
        ind = {a: algs[a]["scaled_error"] for a in INDEPENDENT if a in algs}
        ada = {a: algs[a]["scaled_error"] for a in ADAPTIVE if a in algs}
        if not ind or not ada:
            continue
        bi, ba = min(ind, key=ind.get), min(ada, key=ada.get)
        proj = algs.get("mmopt+proj")
        out.append({**dict(zip(CELL, key, strict=True)), "signal": key[1] * key[2], "best_independent": bi,
                    "independent_error": ind[bi], "best_adaptive": ba, "adaptive_error": ada[ba],
                    "ratio": ada[ba] / ind[bi], "winner": "data-adaptive" if ada[ba] < ind[bi] else "data-independent",
                    "projection_error": None if proj is None else proj["scaled_error"]})
    return out


def _split(cs: list[dict]) -> dict:
    """The signal threshold t that best separates the winners (data-adaptive iff signal < t), its exceptions."""
    signals = sorted({c["signal"] for c in cs})
    cuts = [signals[0] / 10] + [np.sqrt(a * b) for a, b in zip(signals, signals[1:], strict=False)] + [signals[-1] * 10]

    def wrong(t):
        return [c for c in cs if (c["signal"] < t) != (c["winner"] == "data-adaptive")]

    t = min(cuts, key=lambda t: (len(wrong(t)), t))
    exceptions = wrong(t)
    high = [c for c in cs if c["signal"] >= t]
    if not high or len(high) == len(cs):
        status = "does not hold"
    elif not exceptions:
        status = "holds"
    elif len(exceptions) <= 0.2 * len(cs):
        status = "holds with exceptions"
    else:
        status = "does not hold"
    return {"status": status, "crossover": float(t), "exceptions": exceptions, "high": high}


def verdict(rows: list[dict]) -> dict:
    """Does "data-adaptive wins at low signal (scale × ε), the optimised strategy at high signal" hold?

    The crossover t is the signal threshold that best separates the winners (data-adaptive iff signal < t);
    the cells on the wrong side of it are the exceptions. "holds": no exception and both sides non-empty;
    "holds with exceptions": at most 20% of the cells; otherwise "does not hold", or "holds on some datasets
    only" when the same test, with its own crossover, passes on some datasets.
    """
    cs = cells(rows)
    if not cs:
        raise ValueError("verdict: the rows hold no cell with both a data-independent and a data-adaptive algorithm.")
    split = _split(cs)
    datasets = {}
    for d in sorted({c["dataset"] for c in cs}):
        mine = [c for c in cs if c["dataset"] == d]
        won = [c["signal"] for c in mine if c["winner"] == "data-adaptive"]
        datasets[d] = {**_split(mine), "largest_adaptive_win": max(won) if won else None}
    status = split["status"]
    if status == "does not hold" and any(v["status"] != "does not hold" for v in datasets.values()):
        status = "holds on some datasets only"
    by_signal = {s: (sum(c["winner"] == "data-adaptive" for c in cs if c["signal"] == s),
                     sum(c["signal"] == s for c in cs)) for s in sorted({c["signal"] for c in cs})}
    return {"status": status, "crossover": split["crossover"], "cells": len(cs), "exceptions": split["exceptions"],
            "adaptive_wins": sum(c["winner"] == "data-adaptive" for c in cs), "by_signal": by_signal,
            "mmopt_best_at_high": sum(c["best_independent"] == "mmopt" for c in split["high"]),
            "high": len(split["high"]), "datasets": datasets,
            "projection_beats_adaptive": sum(c["projection_error"] is not None and
                                             c["projection_error"] < c["adaptive_error"] for c in cs),
            "projection_cells": sum(c["projection_error"] is not None for c in cs)}


def _dataset_text(d: str, v: dict) -> str:
    if v["status"] != "does not hold":
        return f"{d} ({v['status']}, crossover ≈ {v['crossover']:.3g})"
    s = v["largest_adaptive_win"]
    return f"{d} ({'data-adaptive never wins' if s is None else f'data-adaptive wins up to signal {s:g}'})"


def verdict_text(v: dict, max_exceptions: int = 20) -> str:
    if v["high"] == v["cells"]:
        split = "data-independent algorithms win at every signal level (scale × ε)"
    elif v["high"] == 0:
        split = "data-adaptive algorithms win at every signal level (scale × ε)"
    else:
        split = (f"the winners are best separated at signal (scale × ε) ≈ {v['crossover']:.3g}: data-adaptive "
                 "below, data-independent above")
    lines = [f"**Verdict (this data, every algorithm above): the tutorial's finding — data-dependent algorithms win "
             f"at low signal, data-independent ones at high signal — {v['status']}.** Data-adaptive algorithms win "
             f"{v['adaptive_wins']} of {v['cells']} (dataset, scale, ε, workload) cells; {split}, with "
             f"{len(v['exceptions'])} exception(s).",
             "Cells won by a data-adaptive algorithm, by signal: "
             + ", ".join(f"{s:g}: {a}/{n}" for s, (a, n) in v["by_signal"].items()) + "."]
    if v["high"]:
        lines.append(f"At signal ≥ {v['crossover']:.3g}, mmopt's optimised strategy is the best data-independent one "
                     f"in {v['mmopt_best_at_high']} of {v['high']} cells.")
    ok = [_dataset_text(d, x) for d, x in v["datasets"].items() if x["status"] != "does not hold"]
    bad = [_dataset_text(d, x) for d, x in v["datasets"].items() if x["status"] == "does not hold"]
    parts = ([f"holds on {', '.join(ok)}"] if ok else []) + ([f"does not hold on {', '.join(bad)}"] if bad else [])
    lines.append("By dataset (the data dependence), the same test with each dataset's own crossover: "
                 f"{'; '.join(parts)}.")
    if v["projection_cells"]:
        lines.append(f"With the projection mechanism as post-processing, mmopt's strategy beats the best data-adaptive "
                     f"algorithm in {v['projection_beats_adaptive']} of {v['projection_cells']} cells.")
    if v["exceptions"]:
        shown = v["exceptions"][:max_exceptions]
        ex = "; ".join(f"{c['dataset']} {c['workload']} scale {c['scale']:.0e} ε={c['epsilon']:g}: {c['winner']} "
                       f"({c['best_adaptive']} ÷ {c['best_independent']} = {c['ratio']:.2f})" for c in shown)
        more = len(v["exceptions"]) - len(shown)
        tail = f"; and {more} more (table below)." if more else "."
        lines.append(f"Exceptions to the overall crossover: {ex}{tail}")
    return "\n\n".join(lines)


def markdown(rows: list[dict], notes: list[str] = (), sections: list[str] = ()) -> str:
    """The summary table per cell and the verdict (the CSV has every algorithm's row); ``sections`` (lines:
    figures, run times) go between the verdict and the table."""
    head = ["# DPBench: data-adaptive algorithms vs the matrix mechanism (generated by "
            "`python -m experiments.dpbench`)", "",
            "Scaled average per-query error (mean |W x̂ − W x| ÷ scale, mean over seeded trials; every algorithm "
            "with its std and 95% interval is in `dpbench.csv`). Best data-independent: "
            f"{', '.join(INDEPENDENT)} (least squares); best data-adaptive: {', '.join(ADAPTIVE)} (each where it "
            "applies: 1-D, 2-D or multi-attribute). "
            "The last column is mmopt's strategy "
            "with the projection mechanism (post-processing; same noise as mmopt).", *notes, "",
            verdict_text(verdict(rows)), "", *sections, *([""] if sections else []),
            "| dataset | scale | ε | workload | best data-independent | error | best data-adaptive | error | "
            "adaptive ÷ independent | winner | mmopt+proj |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    body = []
    for c in sorted(cells(rows), key=lambda c: (c["dataset"], _ORDER.index(c["workload"]), c["scale"], c["epsilon"])):
        proj = "—" if c["projection_error"] is None else f"{c['projection_error']:.3g}"
        body.append(f"| {c['dataset']} | {c['scale']:.0e} | {c['epsilon']:g} | {c['workload']} | "
                    f"{c['best_independent']} | {c['independent_error']:.3g} | {c['best_adaptive']} | "
                    f"{c['adaptive_error']:.3g} | {c['ratio']:.3g} | {c['winner']} | {proj} |")
    return "\n".join(head + body) + "\n"


def plot(rows: list[dict], out: Path, scales=None) -> Path:
    """Rows: workloads; columns: scales; scaled error vs ε per algorithm, geometric mean over datasets with
    bars from the best to the worst dataset (flat for the data-independent ones, whose error ignores x).
    ``scales``: the columns (default: every scale in the rows)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    wnames = [w for w in _ORDER if any(r["workload"] == w for r in rows)]
    scales = sorted({r["scale"] for r in rows} if scales is None else scales)
    fig, axes = plt.subplots(len(wnames), len(scales), figsize=(3.8 * len(scales) + 1.4, 3.0 * len(wnames) + 0.3),
                             squeeze=False, sharex=True, layout="constrained")
    algs = [a for a in ALGORITHMS if any(r["algorithm"] == a for r in rows)]
    for i, wname in enumerate(wnames):
        for j, scale in enumerate(scales):
            ax = axes[i][j]
            for k, alg in enumerate(algs):
                pts: dict[float, list[float]] = {}
                for r in rows:
                    if (r["workload"], r["scale"], r["algorithm"]) == (wname, scale, alg):
                        pts.setdefault(r["epsilon"], []).append(r["scaled_error"])
                if not pts:
                    continue
                eps = sorted(pts)
                shift = 1.07 ** (k - (len(algs) - 1) / 2)  # side by side, so the bars do not overlap
                mid = [float(np.exp(np.mean(np.log(pts[e])))) for e in eps]
                lo = [max(0.0, m - min(pts[e])) for m, e in zip(mid, eps, strict=True)]
                hi = [max(0.0, max(pts[e]) - m) for m, e in zip(mid, eps, strict=True)]
                style = "-" if alg in INDEPENDENT else ("-." if alg == "mmopt+proj" else "--")
                ax.errorbar([e * shift for e in eps], mid, yerr=[lo, hi], fmt=style, ms=3, lw=1, capsize=2, label=alg,
                            **look(alg))
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(f"{wname}, scale {scale:.0e}", fontsize=9)
            if i == len(wnames) - 1:
                ax.set_xlabel("ε")
            if j == 0:
                ax.set_ylabel("scaled error (mean |err| ÷ scale)", fontsize=8)
    legend = {}  # every panel's algorithms (1-D, 2-D and multi-attribute differ), in ALGORITHMS order
    for ax in axes.ravel():
        legend.update(zip(*reversed(ax.get_legend_handles_labels()), strict=True))
    names = [a for a in ALGORITHMS if a in legend]
    fig.legend([legend[a] for a in names], names, loc="outside right center", fontsize=8)
    fig.suptitle("DPBench scaled error: geometric mean over datasets, bars from the best to the worst dataset "
                 "(solid: data-independent, dashed: data-adaptive)", fontsize=9)
    return _common.save_png(fig, Path(out) / "dpbench.png", dpi=100)
