"""The seed's two figures for experiments.dpbench, and the table of measured run times.

The tutorial (Hay et al., *Principled Evaluation of Differentially Private Algorithms using DPBench*, SIGMOD
2016, as ../shared/seeds/002 shows it) draws (a) the error of every algorithm on one dataset — prefix
workload, PATENT, 4,096 cells, scale 1,000, ε = 0.1 — and (b) the error against increasing scale, 1-D and 2-D.
Here (a) is :func:`trials` + :func:`plot_algorithms` (``dpbench_algorithms.png``/``.csv``: one row per
trial), (b) is :func:`scale_rows` + :func:`plot_scale` (``dpbench_scale.png``/``.csv``: the rows of
experiments.dpbench at the sweep's ε, geometric mean over datasets), one panel per workload, the
multi-attribute marginals included.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from experiments import _common
from experiments import _dpbench_algorithms as alg
from experiments import _dpbench_marginals as ma

__all__ = ["ALG_COLUMNS", "SCALE_COLUMNS", "algorithms", "look", "plot_algorithms", "plot_scale", "runtime_lines",
           "scale_rows", "sections", "trials"]

ALG_COLUMNS = ["dataset", "n", "scale", "epsilon", "workload", "algorithm", "kind", "trial", "scaled_error"]
SCALE_COLUMNS = ["dims", "workload", "epsilon", "scale", "algorithm", "kind", "datasets", "scaled_error",
                 "min_error", "max_error"]
_ORDER = ("prefix", "all_range", "ranges_2d", "marginals")
_DIMS = {"1D": "1-D", "2D": "2-D", "MA": "multi-attribute"}
# mmopt's ε-DP optimiser (min_error) needs minutes per 30 iterations at 4,096 cells (experiments.dpbench's
# docstring): the figure drawn at more cells than the main grid leaves it and its projection out.
_OPTIMISED = ("mmopt", "mmopt+proj")


def algorithms(cfg) -> list[str]:
    """The algorithms of figure (a): every 1-D one of ``cfg``, but mmopt's optimised strategy when the figure
    has more cells than the main grid (its strategies are made for the main grid's size)."""
    out = [a for a in cfg.algorithms if a not in alg.SKIP["1D"]]
    return [a for a in out if not (cfg.figure_n > cfg.n_1d and a in _OPTIMISED)]


def trials(ctx: alg.Context, shape: np.ndarray, cfg, algs) -> list[dict]:
    """Figure (a): one row per (algorithm, trial) on ``cfg.figure_dataset`` at ``cfg.figure_n`` cells, scale
    ``cfg.figure_scale``, ε ``cfg.figure_epsilon`` and ``cfg.figure_workload``; "seconds" is the algorithm's
    mean time per trial (not written to the CSV, which is deterministic)."""
    x = cfg.figure_scale * alg.coarsen(shape, cfg.figure_n)
    wi = alg.WORKLOADS["1D"].index(cfg.figure_workload)
    rows = []
    for a in algs:
        t0 = time.perf_counter()
        est = ctx.estimates(a, cfg.figure_workload, x, cfg.figure_epsilon, cfg.trials,
                            (3, 0, 0, 0, 9 if a in alg.WORKLOAD_FREE else wi))  # 3: this figure's own noise
        seconds = (time.perf_counter() - t0) / cfg.trials
        errors = ctx.error(cfg.figure_workload, est, x) / cfg.figure_scale
        rows += [{"dataset": cfg.figure_dataset, "n": x.size, "scale": cfg.figure_scale,
                  "epsilon": cfg.figure_epsilon, "workload": cfg.figure_workload, "algorithm": a,
                  "kind": alg.KIND[a], "trial": t, "scaled_error": float(e), "seconds": seconds}
                 for t, e in enumerate(errors)]
    return rows


def scale_rows(rows: list[dict], epsilon: float) -> list[dict]:
    """Figure (b)'s data: per (workload, scale, algorithm) at ``epsilon``, the geometric mean of the scaled error
    over datasets, with the smallest and largest."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r["epsilon"] == epsilon:
            groups.setdefault((r["dims"], r["workload"], r["scale"], r["algorithm"]), []).append(r)
    out = []
    for (dims, wname, scale, a), rs in groups.items():
        errs = np.array([r["scaled_error"] for r in rs], dtype=float)
        out.append({"dims": dims, "workload": wname, "epsilon": epsilon, "scale": scale, "algorithm": a,
                    "kind": alg.KIND[a], "datasets": len(rs), "scaled_error": float(np.exp(np.mean(np.log(errs)))),
                    "min_error": float(errs.min()), "max_error": float(errs.max())})
    return sorted(out, key=lambda r: (_ORDER.index(r["workload"]), alg.ALGORITHMS.index(r["algorithm"]), r["scale"]))


def _style(a: str) -> str:
    return "-" if a in alg.INDEPENDENT else ("-." if a == "mmopt+proj" else "--")


def look(a: str) -> dict:
    """A colour (tab20) and a marker of its own per algorithm: the 21 lines stay apart."""
    import matplotlib

    i = alg.ALGORITHMS.index(a)
    return {"color": matplotlib.colormaps["tab20"](i % 20), "marker": "osD^v<>pPhX*"[i % 12]}


def plot_algorithms(rows: list[dict], out: Path) -> Path:
    """Figure (a): the scaled error of each trial per algorithm (a box and its points), best median first."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by: dict[str, list[float]] = {}
    for r in rows:
        by.setdefault(r["algorithm"], []).append(r["scaled_error"])
    names = sorted(by, key=lambda a: (np.median(by[a]), a))
    fig, ax = plt.subplots(figsize=(0.55 * len(names) + 2.5, 4.2), layout="constrained")
    box = ax.boxplot([by[a] for a in names], patch_artist=True, widths=0.6, showfliers=False)
    face = {"data-independent": "#9ecae1", "post-processed": "#c7e9c0", "data-adaptive": "#fdd0a2"}
    for patch, a in zip(box["boxes"], names, strict=True):
        patch.set_facecolor(face[alg.KIND[a]])
    for i, a in enumerate(names, start=1):
        ax.plot(np.full(len(by[a]), i), by[a], "k.", ms=3)
    ax.set_xticks(range(1, len(names) + 1), names, rotation=60, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("scaled error (mean |err| ÷ scale)", fontsize=8)
    r0 = rows[0]
    ax.set_title(f"{r0['dataset']}, {r0['workload']}, {r0['n']} cells, scale {r0['scale']:g}, ε = {r0['epsilon']:g}, "
                 f"{len(by[names[0]])} trials (blue: data-independent, green: post-processed, orange: data-adaptive)",
                 fontsize=8)
    return _common.save_png(fig, Path(out) / "dpbench_algorithms.png", dpi=100)


def plot_scale(srows: list[dict], out: Path) -> Path:
    """Figure (b): the scaled error against the scale at one ε, one panel per workload, a line per algorithm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(d, w) for w in _ORDER for d in _DIMS if any((r["dims"], r["workload"]) == (d, w) for r in srows)]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels) + 0.5, 4.0), squeeze=False,
                             layout="constrained")
    for ax, (dims, wname) in zip(axes[0], panels, strict=True):
        mine = [r for r in srows if (r["dims"], r["workload"]) == (dims, wname)]
        for a in [a for a in alg.ALGORITHMS if any(r["algorithm"] == a for r in mine)]:
            pts = sorted((r["scale"], r["scaled_error"]) for r in mine if r["algorithm"] == a)
            ax.plot(*zip(*pts, strict=True), _style(a), ms=3.5, lw=1, label=a, **look(a))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("scale (records)")
        ax.set_title(f"{_DIMS[dims]}, {wname} ({mine[0]['datasets']} dataset(s))", fontsize=9)
        ax.legend(fontsize=6, ncol=2)
    axes[0][0].set_ylabel("scaled error: geometric mean over datasets", fontsize=8)
    fig.suptitle(f"DPBench: scaled error against scale at ε = {srows[0]['epsilon']:g} (solid: data-independent, "
                 "dashed: data-adaptive, dash-dot: mmopt + projection)", fontsize=9)
    return _common.save_png(fig, Path(out) / "dpbench_scale.png", dpi=100)


def runtime_lines(runtimes: dict, figure: list[dict] = (), info: dict | None = None) -> list[str]:
    """The Markdown table of measured run times: mean seconds per trial of each algorithm's estimates, per
    panel (and in figure (a)), with the one-off strategy construction of the data-independent ones."""
    dims = [d for d in _DIMS if any(k[0] == d for k in runtimes)]
    fig_n = figure[0]["n"] if figure else None
    fig_t = {r["algorithm"]: r["seconds"] for r in figure}
    built: dict[tuple, float] = {}
    for key, rec in (info or {}).items():  # "workload/side/name"
        wname, name = key.split("/")[0], key.split("/")[-1]
        d = next(k for k, v in alg.WORKLOADS.items() if wname in v)
        built[(d, name)] = built.get((d, name), 0.0) + float(rec.get("seconds") or 0.0)
    head = ["algorithm", "kind", *(f"{_DIMS[d]} (s/trial)" for d in dims)]
    head += [f"figure (a), {fig_n} cells (s/trial)"] if figure else []
    head += ["strategy construction (s, once per workload and size)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for a in alg.ALGORITHMS:
        if not any(k[1] == a for k in runtimes) and a not in fig_t:
            continue
        cells = [(f"{runtimes[(d, a)][0] / runtimes[(d, a)][1]:.3g}" if (d, a) in runtimes else "—") for d in dims]
        cells += [f"{fig_t[a]:.3g}" if a in fig_t else "—"] if figure else []
        con = [f"{_DIMS[d]} {_seconds(built[(d, a.removesuffix('+proj'))])}" for d in dims
               if (d, a.removesuffix("+proj")) in built and a != "mmopt+proj"]
        lines.append(f"| {a} | {alg.KIND[a]} | " + " | ".join(cells) + f" | {', '.join(con) or '—'} |")
    return lines


def sections(cfg, figure: list[dict], runtimes: dict, info: dict) -> list[str]:
    """The figures and the run-time table of dpbench.md."""
    out = ["## The seed's figures", ""]
    if figure:
        dropped = [a for a in ("mmopt", "mmopt+proj") if a in cfg.algorithms and a not in {r["algorithm"]
                                                                                          for r in figure}]
        why = (f" ({', '.join(dropped)} left out: mmopt's ε-DP optimiser takes minutes per 30 iterations at "
               f"{cfg.figure_n} cells; its strategies are made for the main grid's {cfg.n_1d})" if dropped else "")
        out += [f"Every 1-D algorithm on {cfg.figure_dataset}, {cfg.figure_workload}, {cfg.figure_n} cells, scale "
                f"{cfg.figure_scale:,}, ε = {cfg.figure_epsilon:g}, {cfg.trials} trials{why}: "
                "![every algorithm](dpbench_algorithms.png) (per trial: `dpbench_algorithms.csv`). "
                + _ranking(figure), ""]
    if cfg.sweep_scales:
        out += [f"Scaled error against scale at ε = {cfg.sweep_epsilon:g}, 1-D, 2-D and multi-attribute: "
                "![error against scale](dpbench_scale.png) (`dpbench_scale.csv`).", ""]
    return out + ["## Measured run times", "",
                  "Mean seconds per trial of each algorithm's estimates on this run's machine (numpy noise, one BLAS "
                  "thread), averaged over every cell of a panel; a workload-free algorithm's estimates serve every "
                  "workload of a cell and are counted once. Strategy construction is separate (once per workload "
                  f"and domain size). {_load()}", "", *runtime_lines(runtimes, figure, info)]


def _ranking(figure: list[dict]) -> str:
    """Which algorithm has the lowest median error in figure (a), and the best of each kind."""
    med: dict[str, float] = {}
    for a in {r["algorithm"] for r in figure}:
        med[a] = float(np.median([r["scaled_error"] for r in figure if r["algorithm"] == a]))
    best = {}
    for a in sorted(med, key=lambda a: (med[a], a)):
        best.setdefault(alg.KIND[a], a)
    parts = [f"{k} {a} ({med[a]:.3g})" for k, a in best.items()]
    return f"Lowest median scaled error, by kind: {'; '.join(parts)}."


def _load() -> str:
    """The machine's load when the table is written: times on a shared machine are longer than on an idle one."""
    try:
        one, five, _ = os.getloadavg()
    except OSError:  # not available on this platform
        return ""
    return f"Load average when written: {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} cores."


def _seconds(t: float) -> str:
    return "< 0.01" if t < 0.005 else f"{t:.3g}"  # the records round to 0.01 s


def missing_note() -> str:
    gone = ma.missing()
    return (f" Not run (not in this install's mmopt.adaptive): {', '.join(gone)}." if gone else "")
