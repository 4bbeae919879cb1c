"""Answers that make sense, measured on real data: least squares vs NNLS vs the projection mechanism.

Run:   python -m experiments.postprocess            (quick: see QUICK; 8.5–10 min on 2 cores at load average 5–7)
       python -m experiments.postprocess --full     (every dataset, more runs; the 1-D part takes many hours)
       python -m experiments.postprocess --part 2d  (only the 2-D part; --part 1d only the 1-D part)
       python -m experiments.postprocess --jobs 2   (two (W, A) pairs at once; the same outputs, byte for byte)
Data:  the DPBench histograms in ../shared/data/dpbench (or --data DIR): 1-D files of 4,096 cells, 2-D files
       of 256×256. Without them the command says where they come from and exits 2 (tests use synthetic data
       through run()).
Out:   results/postprocess/ (not tracked by git; --out DIR elsewhere, --paper-figures into the tracked
       paper_figures/): postprocess.csv, postprocess.png, postprocess.md. postprocess.run_info.json (timings,
       machine) is never tracked.
Talks: a line per strategy, (W, A) pair and dataset on stderr (a bar on a terminal), at least one every 10 s;
       --quiet: none.

DPBench separates a dataset's *shape* (counts ÷ total) from its *scale* (the total); each dataset is studied
at scales 10³, 10⁵, 10⁷ by rescaling its shape, at ε ∈ {0.1, 1} (Laplace), after the strategies I, H2, Y
and (at n = 256, where it runs in seconds) min_error, on the prefix and all-range workloads, with each
reconstruction of :func:`mmopt.matrix_mechanism`. The 2-D part (:mod:`experiments._postprocess_2d`) does the same
on DPBench's 2-D histograms, coarsened, with implicit product workloads (2-D prefix, all 2-D ranges) and
product strategies (I ⊗ I, H₂ ⊗ H₂, OPT_⊗). The error is DPBench's scaled per-query error (mean
|error| ÷ scale) and the RMSE, averaged over seeded runs (mean and 95% interval, :func:`mmopt.monte_carlo`).
Post-processing is data-dependent: that is why this is measured, not computed. It uses only the noisy
measurements and public facts, so the privacy of every release is unchanged.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import mmopt
from experiments import _cli, _common, _progress, _run
from experiments import _postprocess_2d as p2
from mmopt import strategy as st
from mmopt import workload as wl
from mmopt._base.parallel import check_n_jobs, ordered_map
from mmopt.solvers import SolverError

DATA = Path(os.environ.get("MMOPT_DPBENCH", _common.ROOT.parent / "shared" / "data" / "dpbench"))
RECONSTRUCTIONS = ("least_squares", "nnls", "projection")
WORKLOADS = {"prefix": wl.prefix, "all_range": wl.all_range}


@dataclass(frozen=True)
class Config:
    datasets: tuple[str, ...]
    sizes: tuple[tuple[int, tuple[str, ...], tuple[str, ...], tuple[str, ...]], ...]  # (n, W's, A's, reconstructions)
    scales: tuple[int, ...] = (10**3, 10**5, 10**7)
    epsilons: tuple[float, ...] = (0.1, 1.0)
    runs: int = 20
    datasets_2d: tuple[str, ...] = ()  # DPBench 2-D names (experiments._postprocess_2d.DATASETS)
    sizes_2d: tuple[tuple[int, tuple[str, ...], tuple[str, ...], tuple[str, ...]], ...] = ()  # (side, W's, A's, recs)
    runs_2d: int | None = None  # seeded runs per 2-D configuration (None: ``runs``)


# NNLS at 4,096 cells takes ~5 s a run (scipy's active set): the quick mode measures it at 256 cells only.
_SMALL = (256, ("prefix", "all_range"), ("identity", "H2", "wavelet", "min_error"), RECONSTRUCTIONS)
# 2-D: P ⊗ P at 32×32 and R ⊗ R at 16×16 cells, where ADMM's projection converges (experiments._postprocess_2d).
_SIZES_2D = ((32, ("prefix_2d",), ("identity", "H2"), RECONSTRUCTIONS),
             (16, ("ranges_2d",), ("identity", "H2"), RECONSTRUCTIONS))
QUICK = Config(("ADULTFRANK", "NETTRACE", "HEPTH", "PATENT"),
               ((4096, ("prefix",), ("H2",), ("least_squares", "projection")), _SMALL),
               datasets_2d=("Adult_2D", "twitter"), sizes_2d=_SIZES_2D, runs_2d=10)
FULL = Config(("ADULTFRANK", "HEPTH", "INCOME", "MEDCOST", "NETTRACE", "PATENT", "SEARCHLOGS"),
              ((4096, ("prefix",), ("identity", "H2", "wavelet"), RECONSTRUCTIONS), _SMALL), runs=100,
              datasets_2d=p2.DATASETS, sizes_2d=tuple((k, w, p2.STRATEGIES, r) for k, w, _, r in _SIZES_2D),
              runs_2d=50)
COLUMNS = ["dataset", "n", "scale", "epsilon", "workload", "strategy", "reconstruct", "runs", "scaled_error",
           "rmse", "rmse_ci_low", "rmse_ci_high", "total_squared_error", "ratio_to_least_squares"]


def load_shape(name: str, n: int, data: Path = DATA) -> np.ndarray:
    """A 1-D DPBench dataset's shape (counts ÷ total), coarsened to n cells by summing equal blocks."""
    path = Path(data) / "1D" / f"{name}.n4096.npy"
    x = np.load(path).astype(float).ravel()
    if x.size % n:
        raise ValueError(f"load_shape: {x.size} cells cannot be coarsened to n={n}.")
    x = x.reshape(n, -1).sum(axis=1)
    return x / x.sum()


def _strategy(name: str, W, n: int, seed: int):
    if name == "min_error":
        return mmopt.optimize(W, method="min_error", seed=seed, verbose=False).strategy
    return {"identity": st.identity, "H2": st.hierarchical, "wavelet": st.wavelet}[name](n)


def _measure(W, A, x, cfg: Config, reconstructions, runs: int, seed: int, labels: dict, timings: dict | None,
             audit: dict | None) -> list[dict]:
    """One row per scale × ε × reconstruction for the pair (W, A) on the shape x (its cells sum to 1)."""
    rows = []
    for scale in cfg.scales:
        for eps in cfg.epsilons:
            base = base_runs = None
            for rec in reconstructions:
                t0 = time.perf_counter()
                try:
                    r = mmopt.monte_carlo(W, A, scale * x, mmopt.Privacy(eps), reconstruct=rec, total=None,
                                          runs=runs, seed=seed, progress=False)
                except SolverError:  # kept as a row of NaNs (the markdown says "did not converge")
                    r = None
                rmse = math.nan if r is None else r.rmse
                if rec == "least_squares":
                    base, base_runs = rmse, None if r is None else r.per_run_total
                row = {**labels, "scale": scale, "epsilon": eps, "reconstruct": rec, "runs": runs,
                       "scaled_error": math.nan if r is None else r.scaled_error, "rmse": rmse,
                       "rmse_ci_low": math.nan if r is None else r.rmse_ci.low,
                       "rmse_ci_high": math.nan if r is None else r.rmse_ci.high,
                       "total_squared_error": math.nan if r is None else r.total_squared_error,
                       "ratio_to_least_squares": rmse / base}
                rows.append(row)
                key = "{dataset}/{n}/{workload}/{strategy}/{scale}/{epsilon}/{reconstruct}".format(**row)
                if timings is not None:
                    timings[key] = round(time.perf_counter() - t0, 3)
                if audit is not None and rec == "projection" and r is not None and base_runs is not None:
                    # the same seed gives the same noise, run by run: an exact projection is never worse
                    audit[key] = int(np.sum(r.per_run_total > base_runs * (1 + 1e-9)))
    return rows


def _coarsen(shape: np.ndarray, n: int) -> np.ndarray:
    return shape.reshape(n, -1).sum(axis=1) if shape.size != n else shape


def _optimised(two_d: bool, wname: str, sname: str, n: int, seed: int):
    """min_error or OPT_⊗ for W: seeded with ``seed`` alone, the same in any process."""
    return (p2.strategy if two_d else _strategy)(sname, (p2.WORKLOADS if two_d else WORKLOADS)[wname](n), n, seed)


def _pair(two_d: bool, wname: str, sname: str, n: int, A, shapes: dict, cfg: Config, reconstructions, runs: int,
          seed: int) -> tuple[list[dict], dict, dict]:
    """One task of run(): one (W, A) on every dataset (``shapes``: name → shape at W's size), with _measure's
    rows, timings and audit. ``A`` None: a closed form, built here.

    One task per pair, not per dataset: the pair's least-squares factorisation, which mmopt caches on the A
    object, is then computed once (QR of H2 at 4,096 cells: ~15 s), and H2 at 4,096 cells (270 MB pickled) is
    built where it is used rather than sent. Workers cannot keep it between tasks: joblib's loky restarts a
    worker whose memory grew by over 300 MB."""
    timings, audit, rows = {}, {}, []
    # 1-D: W is the family (not its matrix), so "projection" on prefix is isotonic regression; 2-D: W is implicit,
    # least squares factor-wise, NNLS/projection by ADMM/FISTA
    W = (p2.WORKLOADS if two_d else WORKLOADS)[wname](n)
    if A is None:
        A = p2.strategy(sname, W, n, seed) if two_d else _strategy(sname, W, n, seed)
    for dname, x in shapes.items():
        _progress.note(dname)
        labels = {"dataset": dname, "n": n * n if two_d else n, "workload": wname, "strategy": sname}
        rows += _measure(W, A, x, cfg, reconstructions, runs, seed, labels, timings, audit)
    return rows, timings, audit


def _pair_label(two_d: bool, wname: str, sname: str, n: int, runs: int, names, cfg: Config, recs) -> str:
    size = f"{n}×{n}" if two_d else f"n = {n}"
    return (f"{'2-D' if two_d else '1-D'} {wname} {size}, {sname} ({len(names)} datasets × {len(cfg.scales)} scales "
            f"× {len(cfg.epsilons)} ε × {len(recs)} reconstructions, {runs} runs each)")


def run(shapes: dict[str, np.ndarray], cfg: Config, *, seed: int = 0, timings: dict | None = None,
        audit: dict | None = None, n_jobs: int | None = 1, progress: bool | _progress.Progress = False) -> list[dict]:
    """Rows of the table (pure: no files).

    ``shapes`` maps a 1-D dataset name to its shape at 4,096 cells and a 2-D one to its (k, k) shape, k a
    multiple of every 2-D side. ``audit`` (optional) receives, per projection row, the number of runs where
    projection's total squared error exceeded least squares' on the same noise (0 for an exact projection).
    ``n_jobs`` (joblib's convention; 1: in this process) runs that many tasks at once: first the optimised
    strategies (min_error, OPT_⊗; each made once), then the (W, A) pairs, each on every dataset. Every one is
    seeded with ``seed`` alone, so the rows are the same whatever ``n_jobs`` (with one BLAS thread, as workers
    run). ``progress``: True writes a line per strategy, pair and dataset on stderr (:mod:`experiments._progress`),
    or a reporter to write into.
    """
    n_jobs = check_n_jobs(n_jobs, caller="experiments.postprocess.run")
    pairs = []  # (two_d, wname, sname, n, reconstructions, runs, dataset names), in the rows' order
    for two_d, sizes, names in ((False, cfg.sizes, cfg.datasets), (True, cfg.sizes_2d, cfg.datasets_2d)):
        runs = (cfg.runs_2d or cfg.runs) if two_d else cfg.runs
        for n, workloads, strategies, reconstructions in sizes:
            pairs += [(two_d, w, s, n, reconstructions, runs, names) for w in workloads for s in strategies if names]
    with contextlib.ExitStack() as stack:
        prog = progress if isinstance(progress, _progress.Progress) else stack.enter_context(
            _progress.Progress("postprocess", enabled=bool(progress)))
        # the optimised strategies first, each once (seconds each), side by side; closed forms are built in the tasks
        todo = [(*p[:4], seed) for p in pairs if p[2] in ("min_error", "opt_kron")]
        prog.stage("optimised strategies", total=len(todo))
        labels = [f"{s} for {w} at {f'{n}×{n}' if d else f'n = {n}'}" for d, w, s, n, _ in todo]
        made = dict(zip([t[:4] for t in todo], prog.track(ordered_map(_optimised, todo, n_jobs=n_jobs), labels),
                        strict=True))
        tasks = []
        for two_d, wname, sname, n, reconstructions, runs, names in pairs:
            coarse = {d: p2.coarsen(shapes[d], n) if two_d else _coarsen(shapes[d], n) for d in names}
            tasks.append((two_d, wname, sname, n, made.get((two_d, wname, sname, n)), coarse, cfg, reconstructions,
                          runs, seed))
        prog.stage("(W, A) pairs", total=len(tasks))
        labels = [_pair_label(d, w, s, n, runs, names, cfg, recs) for d, w, s, n, recs, runs, names in pairs]
        rows = []
        for got, seconds, runs_worse in prog.track(ordered_map(_pair, tasks, n_jobs=n_jobs), labels):
            rows += got
            if timings is not None:
                timings.update(seconds)
            if audit is not None:
                audit.update(runs_worse)
    return rows


# One look per (reconstruction, ε): colour family by reconstruction (Okabe–Ito, colour-blind safe), and ε by
# shade, marker (filled vs open) and line style, so that ε = 0.1 and ε = 1 stay apart even where lines overlap.
STYLES = {("nnls", 0.1): ("#D55E00", "o", "-", "full"), ("nnls", 1.0): ("#E69F00", "s", (0, (5, 2)), "none"),
          ("projection", 0.1): ("#0072B2", "^", "-", "full"),
          ("projection", 1.0): ("#56B4E9", "D", (0, (5, 2)), "none")}


_NICE_WIDE = (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100)
_NICE_NARROW = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1, 1.25, 1.5, 2, 3, 4, 5, 7, 10)


def plot(rows: list[dict], out: Path) -> Path:
    """RMSE ratio to least squares against scale, one line per reconstruction and ε (medians).

    Row 1: 1-D, one panel per workload and size (median over datasets and strategies). Row 2: 2-D, one panel
    per workload and strategy (median over datasets: there NNLS depends on the strategy more than on the data).
    Each row has exactly as many panels as it has data (no empty panel); one legend for the figure.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    def key(r: dict) -> tuple:
        return (r["n"], r["workload"], r["strategy"]) if p2.is_2d(r) else (r["n"], r["workload"])

    groups = [g for g in ([r for r in rows if not p2.is_2d(r)], [r for r in rows if p2.is_2d(r)]) if g]
    panels = [sorted({key(r) for r in g}) for g in groups]
    width = max((len(p) for p in panels), default=1)
    fig = plt.figure(figsize=(4.3 * width, 3.7 * max(len(groups), 1) + 1.0), layout="constrained")
    subfigs = fig.subfigures(len(groups), 1, squeeze=False)[:, 0] if groups else []
    used = []
    for sub, group, row_panels in zip(subfigs, groups, panels, strict=True):
        axes = sub.subplots(1, len(row_panels), squeeze=False)[0]
        two_d = p2.is_2d(group[0])
        datasets = len({r["dataset"] for r in group})
        if two_d:
            what = f"median over {datasets} datasets"
        else:
            by_n = {n: list(dict.fromkeys(r["strategy"] for r in group if r["n"] == n))
                    for n in sorted({r["n"] for r in group})}
            what = (f"median over {datasets} datasets and the strategies run at each size ("
                    + "; ".join(f"n = {n}: {', '.join(s)}" for n, s in by_n.items()) + ")")
        sub.suptitle(f"{'2-D' if two_d else '1-D'} DPBench data: {what}", fontsize=10)
        for ax, panel in zip(axes, row_panels, strict=True):
            drawn = set()
            for (rec, eps), (colour, marker, ls, fill) in STYLES.items():
                pts = {}
                for r in group:
                    if (key(r), r["reconstruct"], r["epsilon"]) == (panel, rec, eps) and \
                            not math.isnan(r["ratio_to_least_squares"]):
                        pts.setdefault(r["scale"], []).append(r["ratio_to_least_squares"])
                if pts:
                    xs = sorted(pts)
                    ax.plot(xs, [float(np.median(pts[k])) for k in xs], linestyle=ls, color=colour, lw=1.6,
                            marker=marker, ms=6, fillstyle=fill, markerfacecolor="white" if fill == "none" else colour,
                            mew=1.4)
                    used.append((rec, eps))
                    drawn.add(rec)
            ax.axhline(1.0, color="0.3", lw=0.9, ls=":")
            ax.set_xscale("log")
            ax.set_yscale("log")
            lo, hi = ax.get_ylim()  # plain numbers on the log axis, as many as fit
            ticks = _NICE_WIDE if hi / lo > 6 else _NICE_NARROW
            ax.yaxis.set_major_locator(FixedLocator([t for t in ticks if lo <= t <= hi]))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_formatter(NullFormatter())
            ax.tick_params(axis="y", labelsize=8)
            ax.grid(True, which="both", axis="y", alpha=0.25)
            absent = sorted({rec for rec, _ in STYLES} & {r["reconstruct"] for r in rows} - drawn)
            ax.set_title(p2.panel_title(*panel) + (f" ({', '.join(absent)} not run here)" if absent else ""),
                         fontsize=9)
            ax.set_xlabel("scale (total count)")
        axes[0].set_ylabel("RMSE ÷ RMSE of least squares")
    handles = [Line2D([], [], color=c, marker=m, linestyle=ls, lw=1.6, ms=6, fillstyle=f, mew=1.4,
                      markerfacecolor="white" if f == "none" else c) for (c, m, ls, f) in STYLES.values()]
    labels = [f"{rec}, ε = {eps:g}" for rec, eps in STYLES]
    keep = [k for k, re in enumerate(STYLES) if re in used]
    fig.legend([handles[k] for k in keep], [labels[k] for k in keep], loc="outside lower center", ncol=len(keep),
               fontsize=9, title="reconstruction, privacy budget (dotted line: least squares = 1)",
               title_fontsize=9)
    fig.suptitle("Post-processing on DPBench data: RMSE of NNLS and of the projection mechanism relative to least "
                 "squares, after the same strategy and noise (below 1: the reconstruction helps)", fontsize=11)
    return _common.save_png(fig, Path(out) / "postprocess.png", dpi=110)


_TABLE = ["| dataset | n | scale | ε | workload | strategy | reconstruct | scaled error | RMSE | 95% CI | ÷ LS |",
          "|---|---|---|---|---|---|---|---|---|---|---|"]


def _table_row(r: dict) -> str:
    return (f"| {r['dataset']} | {r['n']} | {r['scale']:.0e} | {r['epsilon']:g} | {r['workload']} | "
            f"{r['strategy']} | {r['reconstruct']} | {r['scaled_error']:.3g} | {r['rmse']:.4g} | "
            f"{r['rmse_ci_low']:.4g}–{r['rmse_ci_high']:.4g} | {r['ratio_to_least_squares']:.3f} |")


def markdown(rows: list[dict]) -> str:
    lines = ["# Post-processing on DPBench data (generated by `python -m experiments.postprocess`)", "",
             "RMSE (mean over seeded runs, 95% interval) and DPBench's scaled per-query error (mean |error| ÷ "
             "scale); the last column is the RMSE ratio to least squares after the same strategy and noise.", ""]
    one, two = [r for r in rows if not p2.is_2d(r)], [r for r in rows if p2.is_2d(r)]
    if one:
        lines += _TABLE + [_table_row(r) for r in one]
    text = "\n".join(lines) + "\n"
    if two:
        text += p2.markdown(two) + "\nEvery 2-D row (n = cells):\n\n" + "\n".join(_TABLE + [_table_row(r) for r in two])
        text += "\n"
    return text


def dpbench_inputs(parser: argparse.ArgumentParser, data, out, datasets_1d, datasets_2d) -> tuple[Path, dict]:
    """(output folder, {dataset: shape}) for an experiment on DPBench files; ``parser.error`` (exit 2) naming
    the missing files and their public source, or a bad output folder, before any work."""
    data = Path(data)
    files = [data / "1D" / f"{d}.n4096.npy" for d in datasets_1d] + [p2.data_file(d, data) for d in datasets_2d]
    missing = [str(f.relative_to(data)) for f in files if not f.is_file()]
    if missing:
        parser.error(f"the DPBench files {missing} are not in {data}. They come from the DPBench benchmark's public "
                     "code (github.com/dpcomp-org/dpcomp_core, folder datafiles/); pass their folder with --data or "
                     "$MMOPT_DPBENCH.")
    try:
        out = _run.check_out_dir(out)
    except ValueError as exc:
        parser.error(str(exc))
    shapes = {d: load_shape(d, 4096, data) for d in datasets_1d}
    shapes.update({d: p2.load_shape(d, data) for d in datasets_2d})
    return out, shapes


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.postprocess",
                                description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--full", action="store_true",
                   help="every dataset, all strategies (1-D at 4,096 cells, 100 runs; 2-D with OPT_⊗, 50 runs)")
    p.add_argument("--part", choices=("all", "1d", "2d"), default="all", help="which data (default: both)")
    _common.add_output_args(p, "postprocess")
    p.add_argument("--data", default=str(DATA), help="the DPBench folder (default: $MMOPT_DPBENCH or "
                                                      "../shared/data/dpbench)")
    p.add_argument("--runs", type=int, help="seeded runs per configuration (default: 20/10 quick, 100/50 full)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=_cli._jobs, default=1, metavar="N", help="(W, A) pairs run at once (joblib; "
                   "-1: every core; default 1); the outputs are the same for any N")
    args = p.parse_args(argv)
    cfg = FULL if args.full else QUICK
    if args.runs is not None:
        if args.runs < 2:
            p.error(f"--runs must be >= 2 (a spread needs two runs). Got {args.runs}.")
        cfg = dataclasses.replace(cfg, runs=args.runs, runs_2d=args.runs)
    if args.part == "1d":
        cfg = dataclasses.replace(cfg, datasets_2d=(), sizes_2d=())
    elif args.part == "2d":
        cfg = dataclasses.replace(cfg, datasets=(), sizes=())
    if args.seed < 0:
        p.error(f"--seed must be >= 0. Got {args.seed}.")
    out, shapes = dpbench_inputs(p, args.data, _common.out_of(args, "postprocess"), cfg.datasets, cfg.datasets_2d)
    try:
        with _run.hold(out), _progress.Progress("postprocess", enabled=not args.quiet) as prog:
            t0, timings, audit = time.perf_counter(), {}, {}
            rows = run(shapes, cfg, seed=args.seed, timings=timings, audit=audit, n_jobs=args.jobs, progress=prog)
            prog.stage("writing postprocess.csv, postprocess.png, postprocess.md")
            _common.write_csv(out / "postprocess.csv", COLUMNS, rows)
            tidy = [{k: _common.tidy(v) for k, v in r.items()} for r in rows]
            plot(tidy, out)  # from the values as written: the figure can be redrawn from the CSV alone
            _run.write_text(out / "postprocess.md", markdown(tidy))
            _run.write_json(out / "postprocess.run_info.json", {
                "seconds": round(time.perf_counter() - t0, 1), "jobs": args.jobs, "per_row_seconds": timings,
                "projection_runs_worse_than_least_squares": {k: c for k, c in audit.items() if c},
                "machine": _run.machine()})
            prog.done(f"wrote postprocess.csv, postprocess.png and postprocess.md into {out}")
    except _run.Busy as exc:
        print(f"python -m experiments.postprocess: {exc}", file=sys.stderr)
        return 2
    print(_common.format_table(rows, ["dataset", "n", "scale", "epsilon", "workload", "strategy", "reconstruct",
                                      "rmse", "ratio_to_least_squares"]))
    return 0


if __name__ == "__main__":  # run the imported module's main, so that worker processes find _cell by its name
    from experiments.postprocess import main as _imported_main

    sys.exit(_imported_main())
