"""Multi-dimensional workloads: HDMM's strategy searches against identity, classic baselines and the bound.

Run:   python -m experiments.multidim            (quick: 2-D ranges 64², 3-D prefix 16³, everything else full;
                                                  75–100 s measured on 2 cores at load average 5–7)
       python -m experiments.multidim --full     (2-D ranges 256², 3-D prefix 64³ as well)
       python -m experiments.multidim --jobs 2   (two workloads at once; the same outputs, byte for byte)
Out:   results/multidim/ (not tracked by git; --out DIR elsewhere, --paper-figures into the tracked
       paper_figures/): multidim.csv, multidim.png and multidim.md (the tables, with the HDMM tutorial's
       ratios beside ours). multidim.run_info.json (timings, machine) is never tracked.
Talks: a line per workload and stage on stderr (a bar on a terminal), at least one every 10 s; --quiet: none.

For each workload of the HDMM benchmarks (sf1, sf1_plus, adult W1/W2, cps W1/W2, 2-D ranges, 3-D prefix;
``mmopt.workload``) at ε = 1: the identity strategy, H2 on every attribute (a product), the workload itself
as strategy, each of mmopt's searches ("kron", "union", "marginals", and the dense min_error where the
domain is small) as run by ``optimize(method="auto")``, and the SVD lower bound. Totals are exact where
``total_exact`` says so and proven upper bounds otherwise; the bound is exact where ``bound_exact``.
Under (ε, δ) = (1, 1e-6) the 2-D ranges are also run with norm="l2" against the SVD bound.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import time
from pathlib import Path

import mmopt
from experiments import _cli, _common, _progress, _run
from mmopt import strategy as st
from mmopt import workload as wl
from mmopt._base.parallel import check_n_jobs, ordered_map

QUICK = {"sf1": wl.sf1, "sf1_plus": wl.sf1_plus, "adult_w1": wl.adult_w1, "adult_w2": wl.adult_w2,
         "cps_w1": wl.cps_w1, "cps_w2": wl.cps_w2, "ranges_2d_64": lambda: wl.ranges_2d(64),
         "prefix_3d_16": lambda: wl.prefix_3d(16)}
FULL = QUICK | {"ranges_2d_256": lambda: wl.ranges_2d(256), "prefix_3d_64": lambda: wl.prefix_3d(64)}
GAUSSIAN = ("ranges_2d_64", "ranges_2d_256")
# HDMM's own code (github.com/dpcomp-org/hdmm; KronPIdentity and Marginals templates, 5 restarts): ε = 1 totals,
# the references of benchmarks/bench_multidim_optimize.py too.
HDMM = {"sf1": 225_127, "sf1_plus": 22_581_543, "adult_w2": 315_883, "cps_w1": 14_471_175,
        "cps_w2": 992_128_907, "adult_w1": 15_360_000}
# The tutorial's table (seed 002): HDMM's error ratio to the best competitor, and which competitor.
TUTORIAL = {"sf1": (3.07, "identity"), "sf1_plus": (3.15, "identity"), "adult_w1": (1.38, "identity"),
            "adult_w2": (2.01, "DataCube"), "cps_w1": (1.49, "identity"), "cps_w2": (5.79, "identity")}
COLUMNS = ["workload", "noise", "cells", "queries", "strategy", "status", "total_squared_error", "total_exact",
           "rmse", "ratio_to_identity", "rmse_ratio_to_identity", "svd_bound", "bound_exact", "ratio_to_bound",
           "hdmm_reference", "ratio_to_hdmm"]
TABLE = "multidim.csv"


def _baselines(W) -> dict:
    """Strategies every workload gets: identity, H2 per attribute, and the workload itself."""
    W = wl.structure_of(W)
    out = {"identity": st.kron(*[st.identity(d) for d in W.shape]),
           "H2 (product)": st.kron(*[st.hierarchical(d) for d in W.shape])}
    out["workload"] = st.stack([st.kron(*[f.explicit_matrix() for f in t.factors], weight=t.weight)
                                for t in W.terms], name="workload")
    return out


def _workload_rows(name: str, make, epsilon: float, delta: float, seed: int, gaussian) -> tuple[list, dict, list]:
    """One task of run(): one workload's rows, timings and skipped baselines, under each of its noises."""
    rows, timings, skipped = [], {}, []
    W = make()
    for noise, privacy in [("laplace", mmopt.Privacy(epsilon))] + (
            [("gaussian", mmopt.Privacy(epsilon, delta))] if name in gaussian else []):
        norm = privacy.sensitivity_norm
        c = privacy.variance_factor
        _progress.note(f"{noise}: SVD bound and baselines")
        bound = mmopt.svd_bound(W, privacy)
        # dense workloads (≤ 4,096 cells) have the exact SVD bound; implicit ones say
        exact_bound = mmopt.structured.svd_bound(W).exact if isinstance(W, wl.ImplicitWorkload) else True
        found = {}
        for sname, A in _baselines(W).items():
            t0 = time.perf_counter()
            try:
                r = mmopt.evaluate(W, A, privacy)
            except ValueError as exc:  # e.g. the workload as a union strategy past 4,096 cells: no bound
                skipped.append(f"{name}/{noise}/{sname}: {str(exc)[:160]}")
                continue
            found[sname] = (r.total_squared_error, getattr(r, "total_exact", True), "closed form",
                            time.perf_counter() - t0)
        t0 = time.perf_counter()
        _progress.note(f"{noise}: auto search (kron, union, marginals)")
        res = mmopt.optimize(W, method="auto", norm=norm, seed=seed, verbose=False)
        for cname, cand in res.extra["candidates"].items():
            found[cname] = (c * cand["objective"], cand["exact"], cand["status"], cand["seconds"])
        found["auto"] = (c * res.objective, res.extra["total_exact"], res.status, time.perf_counter() - t0)
        ident = found["identity"][0]
        for sname, (total, exact, status, seconds) in found.items():
            ref = HDMM.get(name) if noise == "laplace" and epsilon == 1.0 else None
            rows.append({"workload": name, "noise": noise, "cells": W.domain_size, "queries": W.n_queries,
                         "strategy": sname, "status": status, "total_squared_error": total,
                         "total_exact": exact, "rmse": math.sqrt(total / W.n_queries),
                         "ratio_to_identity": total / ident, "rmse_ratio_to_identity": math.sqrt(total / ident),
                         "svd_bound": bound, "bound_exact": exact_bound, "ratio_to_bound": total / bound,
                         "hdmm_reference": ref if ref is not None else "",
                         "ratio_to_hdmm": total / ref if ref else ""})
            timings[f"{name}/{noise}/{sname}"] = round(seconds, 3)
    return rows, timings, skipped


def run(workloads: dict | None = None, *, epsilon: float = 1.0, delta: float = 1e-6, seed: int = 0,
        gaussian=GAUSSIAN, timings: dict | None = None, n_jobs: int | None = 1,
        progress: bool | _progress.Progress = False) -> list[dict]:
    """Rows of the table (pure: no files). ``timings`` (if given) receives seconds per row, untracked.

    ``n_jobs`` (joblib's convention; 1: in this process) runs the workloads at once, each in its own task
    (its functions in ``workloads`` must then pickle, as module-level functions and lambdas do with joblib's
    cloudpickle). Every search is seeded with ``seed``, so the rows are the same whatever ``n_jobs`` (with
    one BLAS thread, as workers run). ``progress``: True writes a line per workload and stage on stderr
    (:mod:`experiments._progress`), or a reporter to write into.
    """
    n_jobs = check_n_jobs(n_jobs, caller="experiments.multidim.run")
    rows = []
    todo = workloads or QUICK
    tasks = [(name, make, epsilon, delta, seed, gaussian) for name, make in todo.items()]
    with contextlib.ExitStack() as stack:
        prog = progress if isinstance(progress, _progress.Progress) else stack.enter_context(
            _progress.Progress("multidim", enabled=bool(progress)))
        prog.stage("workloads", total=len(tasks))
        labels = [f"{name}" + (" (Laplace, then Gaussian)" if name in gaussian else "") for name in todo]
        for got, seconds, skipped in prog.track(ordered_map(_workload_rows, tasks, n_jobs=n_jobs), labels):
            rows += got
            if timings is not None:
                timings.update(seconds)
                if skipped:
                    timings.setdefault("skipped", []).extend(skipped)
    return rows


def plot(rows: list[dict], out: Path) -> Path:
    """Bars: RMSE ratio to identity per workload (Laplace), one bar per strategy; the SVD bound as a tick.

    The axis is set by the exact values (exact errors and bounds): a proven upper bound (hatched) that lies
    above them is drawn clipped at the top of the axis, with its value printed, so that a loose bound never
    squeezes the exact results together.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.patches import Patch

    lap = [r for r in rows if r["noise"] == "laplace"]
    names = list(dict.fromkeys(r["workload"] for r in lap))
    strategies = [s for s in dict.fromkeys(r["strategy"] for r in lap) if s != "identity"]
    bound = [math.sqrt(next(r["svd_bound"] / r["total_squared_error"]
                            for r in lap if r["workload"] == n and r["strategy"] == "identity")) for n in names]
    exact = [r["rmse_ratio_to_identity"] for r in lap if r["total_exact"] in (True, "True")] + bound + [1.0]
    exact = [v for v in exact if isinstance(v, float) and math.isfinite(v) and v > 0]
    lo, hi = min(exact) / 1.8, max(exact) * 2.5  # log axis: headroom for the clipped bars' labels
    fig, ax = plt.subplots(figsize=(12, 5))
    width = 0.8 / max(len(strategies), 1)
    clipped = 0
    for k, s in enumerate(strategies):
        got = [next((r for r in lap if r["workload"] == n and r["strategy"] == s), None) for n in names]
        vals = [np.nan if r is None else r["rmse_ratio_to_identity"] for r in got]
        xs = np.arange(len(names)) + k * width
        bars = ax.bar(xs, np.minimum(vals, hi), width, label=s, color=f"C{k}")
        for b, r, v, x in zip(bars, got, vals, xs, strict=True):
            if r is None or r["total_exact"] in (True, "True"):
                continue
            b.set_hatch("///")  # a proven upper bound: the exact error is at most this
            b.set_edgecolor("0.25")
            if v > hi:
                clipped += 1
                b.set_alpha(0.55)
                text = f"{v:,.0f}" if v >= 100 else f"{v:.3g}"
                ax.annotate(f"▲ off scale:\n≤ {text}\n(upper bound)", (x, hi), xytext=(0, -3),
                            textcoords="offset points", ha="center", va="top", fontsize=7, color="0.1",
                            bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "0.5", "lw": 0.6})
    ax.scatter(np.arange(len(names)) + 0.4 - width / 2, bound, marker="_", s=600, color="k", zorder=3,
               label="SVD lower bound")
    ax.axhline(1.0, color="grey", lw=0.8, label="identity (= 1)")
    ax.set_yscale("log")
    ax.set_ylim(lo, hi)
    ax.set_xticks(np.arange(len(names)) + 0.4 - width / 2, names, rotation=20)
    ax.set_ylabel("RMSE ÷ identity's RMSE (ε = 1, Laplace)")
    note = (f"\n{clipped} upper bound(s) lie above every exact value: clipped at the top, their value printed"
            if clipped else "")
    ax.set_title("Multi-dimensional workloads: each strategy's RMSE relative to the identity strategy (lower is "
                 "better).\nHatched: proven upper bounds, not exact errors (the exact error is lower)" + note,
                 fontsize=9)
    ax.grid(True, axis="y", which="both", alpha=0.25)
    handles, labels = ax.get_legend_handles_labels()  # plain patches: only some bars of a strategy are hatched
    colour = {s: f"C{k}" for k, s in enumerate(strategies)}
    handles = [Patch(color=colour[lab]) if lab in colour else h for h, lab in zip(handles, labels, strict=True)]
    handles.append(Patch(facecolor="white", edgecolor="0.25", hatch="///"))
    labels.append("proven upper bound")
    ax.legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return _common.save_png(fig, Path(out) / "multidim.png", dpi=110)


def markdown(rows: list[dict]) -> str:
    """multidim.md: our table, and the tutorial's ratios beside ours as total-error and RMSE ratios."""
    lines = ["# Multi-dimensional workloads (generated by `python -m experiments.multidim`)", "",
             "ε = 1, Laplace unless noted. `auto` is `mmopt.optimize(W, method=\"auto\")`; totals are exact where "
             "total_exact, proven upper bounds otherwise; the SVD bound is exact where bound_exact, a proven lower "
             "bound otherwise. HDMM reference: the total of HDMM's own code (github.com/dpcomp-org/hdmm, "
             "KronPIdentity and Marginals templates, 5 restarts) on the same workload at ε = 1.", "",
             "| workload | noise | strategy | status | total | exact | RMSE | ÷ identity | ÷ bound | ÷ HDMM |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        hd = f"{r['ratio_to_hdmm']:.3f}" if r["ratio_to_hdmm"] != "" else ""
        lines.append(f"| {r['workload']} | {r['noise']} | {r['strategy']} | {r['status']} | "
                     f"{r['total_squared_error']:.6g} | {r['total_exact']} | {r['rmse']:.4g} | "
                     f"{r['ratio_to_identity']:.4g} | {r['ratio_to_bound']:.4g} | {hd} |")
    lines += ["", "## Beside the HDMM tutorial's table", "",
              "The tutorial does not say whether its ratios are of total squared error or of RMSE; both are shown "
              "(competitor's error ÷ auto's error).", "",
              "| workload | tutorial (HDMM vs) | ours: total ratio | ours: RMSE ratio |", "|---|---|---|---|"]
    for name, (ratio, rival) in TUTORIAL.items():
        auto = next((r for r in rows if r["workload"] == name and r["strategy"] == "auto"
                     and r["noise"] == "laplace"), None)
        if auto is None:
            continue
        ours = 1.0 / auto["ratio_to_identity"]
        note = "" if rival == "identity" else f" (tutorial's rival is {rival}; ours is identity)"
        lines.append(f"| {name} | {ratio} ({rival}) | {ours:.3f}{note} | {math.sqrt(ours):.3f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.multidim",
                                description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--full", action="store_true", help="add 2-D ranges 256² and 3-D prefix 64³")
    _common.add_output_args(p, "multidim")
    p.add_argument("--seed", type=int, default=0, help="seed of the searches' restarts (default 0)")
    p.add_argument("--only", nargs="+", metavar="NAME", help="run only these workloads")
    p.add_argument("--jobs", type=_cli._jobs, default=1, metavar="N", help="workloads run at once (joblib; -1: "
                   "every core; default 1); the outputs are the same for any N")
    args = p.parse_args(argv)
    todo = FULL if args.full else QUICK
    if args.only:
        unknown = sorted(set(args.only) - set(FULL))
        if unknown:
            p.error(f"--only: unknown workloads {unknown}; choose from {sorted(FULL)}")
        todo = {k: FULL[k] for k in args.only}
    if args.seed < 0:
        p.error(f"--seed must be >= 0. Got {args.seed}.")
    try:
        out = _run.check_out_dir(_common.out_of(args, "multidim"))
    except ValueError as exc:
        p.error(str(exc))
    try:
        with _run.hold(out), _progress.Progress("multidim", enabled=not args.quiet) as prog:
            t0, timings = time.perf_counter(), {}
            rows = run(todo, seed=args.seed, timings=timings, n_jobs=args.jobs, progress=prog)
            prog.stage("writing multidim.csv, multidim.png, multidim.md")
            _common.write_csv(out / TABLE, COLUMNS, rows)
            plot(rows, out)
            _run.write_text(out / "multidim.md", markdown([{k: _common.tidy(v) for k, v in r.items()} for r in rows]))
            _run.write_json(out / "multidim.run_info.json", {"seconds": round(time.perf_counter() - t0, 1),
                                                             "jobs": args.jobs,
                                                             "per_row_seconds": timings, "machine": _run.machine()})
            prog.done(f"wrote multidim.csv, multidim.png and multidim.md into {out}")
    except _run.Busy as exc:
        print(f"python -m experiments.multidim: {exc}", file=sys.stderr)
        return 2
    print(_common.format_table(rows, ["workload", "noise", "strategy", "status", "total_squared_error",
                                      "ratio_to_identity", "ratio_to_bound", "ratio_to_hdmm"]))
    return 0


if __name__ == "__main__":  # run the imported module's main, so that worker processes find its functions by name
    from experiments.multidim import main as _imported_main

    sys.exit(_imported_main())
