"""Answers that make sense, measured on real data: least squares vs NNLS vs the projection mechanism.

Run:   python -m experiments.postprocess            (quick: see QUICK; about 2 minutes)
       python -m experiments.postprocess --full     (every 1-D dataset, more runs)
Data:  the DPBench histograms in ../shared/data/dpbench (or --data DIR): 1-D files of 4,096 cells. Without
       them the command says where they come from and exits 2 (tests use synthetic data through run()).
Out:   paper_figures/ (or --out DIR): postprocess.csv, postprocess.png, postprocess.md.
       postprocess.run_info.json (timings, machine) is not tracked.

DPBench separates a dataset's *shape* (counts ÷ total) from its *scale* (the total); each dataset is studied
at scales 10³, 10⁵, 10⁷ by rescaling its shape, at ε ∈ {0.1, 1} (Laplace), after the strategies I, H2, Y
and (at n = 256, where it runs in seconds) min_error, on the prefix and all-range workloads, with each
reconstruction of :func:`mmopt.matrix_mechanism`. The error is DPBench's scaled per-query error (mean
|error| ÷ scale) and the RMSE, averaged over seeded runs (mean and 95% interval, :func:`mmopt.monte_carlo`).
Post-processing is data-dependent: that is why this is measured, not computed. It uses only the noisy
measurements and public facts, so the privacy of every release is unchanged.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import mmopt
from experiments import _common, _run
from mmopt import strategy as st
from mmopt import workload as wl

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


# NNLS at 4,096 cells takes ~5 s a run (scipy's active set): the quick mode measures it at 256 cells only.
_SMALL = (256, ("prefix", "all_range"), ("identity", "H2", "wavelet", "min_error"), RECONSTRUCTIONS)
QUICK = Config(("ADULTFRANK", "NETTRACE", "HEPTH", "PATENT"),
               ((4096, ("prefix",), ("H2",), ("least_squares", "projection")), _SMALL))
FULL = Config(("ADULTFRANK", "HEPTH", "INCOME", "MEDCOST", "NETTRACE", "PATENT", "SEARCHLOGS"),
              ((4096, ("prefix",), ("identity", "H2", "wavelet"), RECONSTRUCTIONS), _SMALL), runs=100)
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
        return mmopt.optimize(W, method="min_error", seed=seed).strategy
    return {"identity": st.identity, "H2": st.hierarchical, "wavelet": st.wavelet}[name](n)


def run(shapes: dict[str, np.ndarray], cfg: Config, *, seed: int = 0, timings: dict | None = None) -> list[dict]:
    """Rows of the table (pure: no files). ``shapes`` maps a dataset name to its shape at 4,096 cells."""
    rows = []
    for n, workloads, strategies, reconstructions in cfg.sizes:
        for wname in workloads:
            W = WORKLOADS[wname](n)  # the family (not its matrix): "projection" on prefix is isotonic regression
            for sname in strategies:
                A = _strategy(sname, W, n, seed)
                for dname in cfg.datasets:
                    shape = shapes[dname]
                    shape = shape.reshape(n, -1).sum(axis=1) if shape.size != n else shape
                    for scale in cfg.scales:
                        for eps in cfg.epsilons:
                            base = None
                            for rec in reconstructions:
                                t0 = time.perf_counter()
                                r = mmopt.monte_carlo(W, A, scale * shape, mmopt.Privacy(eps), reconstruct=rec,
                                                      total=None, runs=cfg.runs, seed=seed, progress=False)
                                base = r.rmse if rec == "least_squares" else base
                                rows.append({"dataset": dname, "n": n, "scale": scale, "epsilon": eps,
                                             "workload": wname, "strategy": sname, "reconstruct": rec,
                                             "runs": cfg.runs, "scaled_error": r.scaled_error, "rmse": r.rmse,
                                             "rmse_ci_low": r.rmse_ci.low, "rmse_ci_high": r.rmse_ci.high,
                                             "total_squared_error": r.total_squared_error,
                                             "ratio_to_least_squares": r.rmse / base})
                                if timings is not None:
                                    key = f"{dname}/{n}/{wname}/{sname}/{scale}/{eps}/{rec}"
                                    timings[key] = round(time.perf_counter() - t0, 3)
    return rows


def plot(rows: list[dict], out: Path) -> Path:
    """RMSE ratio to least squares against scale, per reconstruction (ε = 0.1 solid, 1 dashed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = sorted({(r["n"], r["workload"]) for r in rows})
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False)
    for ax, (n, wname) in zip(axes[0], panels, strict=True):
        for rec, color in (("nnls", "C1"), ("projection", "C2")):
            for eps, ls in ((0.1, "-"), (1.0, "--")):
                pts = {}
                for r in rows:
                    if (r["n"], r["workload"], r["reconstruct"], r["epsilon"]) == (n, wname, rec, eps):
                        pts.setdefault(r["scale"], []).append(r["ratio_to_least_squares"])
                if pts:
                    xs = sorted(pts)
                    ax.plot(xs, [float(np.median(pts[s])) for s in xs], ls, color=color, marker="o",
                            label=f"{rec}, ε={eps:g}")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{wname}, n = {n}", fontsize=9)
        ax.set_xlabel("scale (total count)")
    axes[0][0].set_ylabel("RMSE ÷ least squares\n(median over datasets, strategies)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    return _common.save_png(fig, Path(out) / "postprocess.png", dpi=110)


def markdown(rows: list[dict]) -> str:
    lines = ["# Post-processing on DPBench data (generated by `python -m experiments.postprocess`)", "",
             "RMSE (mean over seeded runs, 95% interval) and DPBench's scaled per-query error (mean |error| ÷ "
             "scale); the last column is the RMSE ratio to least squares after the same strategy and noise.", "",
             "| dataset | n | scale | ε | workload | strategy | reconstruct | scaled error | RMSE | 95% CI | ÷ LS |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['dataset']} | {r['n']} | {r['scale']:.0e} | {r['epsilon']:g} | {r['workload']} | "
                     f"{r['strategy']} | {r['reconstruct']} | {r['scaled_error']:.3g} | {r['rmse']:.4g} | "
                     f"{r['rmse_ci_low']:.4g}–{r['rmse_ci_high']:.4g} | {r['ratio_to_least_squares']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.postprocess", description=__doc__.split("\n")[0])
    p.add_argument("--full", action="store_true", help="every 1-D dataset, all strategies at 4,096 cells, 100 runs")
    p.add_argument("--out", default=str(_common.FIGURES), help="output folder (default: paper_figures/)")
    p.add_argument("--data", default=str(DATA), help="the DPBench folder (default: ../shared/data/dpbench)")
    p.add_argument("--runs", type=int, help="seeded runs per configuration (default 20 quick, 100 full)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    cfg = FULL if args.full else QUICK
    if args.runs is not None:
        if args.runs < 2:
            p.error(f"--runs must be >= 2 (a spread needs two runs). Got {args.runs}.")
        cfg = Config(cfg.datasets, cfg.sizes, cfg.scales, cfg.epsilons, args.runs)
    if args.seed < 0:
        p.error(f"--seed must be >= 0. Got {args.seed}.")
    data = Path(args.data)
    missing = [d for d in cfg.datasets if not (data / "1D" / f"{d}.n4096.npy").is_file()]
    if missing:
        p.error(f"the DPBench files {missing} are not in {data}/1D. They come from the DPBench benchmark's public "
                "code (dpcomp-org/dpcomp_core, datafiles/); pass their folder with --data.")
    try:
        out = _run.check_out_dir(args.out)
    except ValueError as exc:
        p.error(str(exc))
    shapes = {d: load_shape(d, 4096, data) for d in cfg.datasets}
    try:
        with _run.hold(out):
            t0, timings = time.perf_counter(), {}
            rows = run(shapes, cfg, seed=args.seed, timings=timings)
            _common.write_csv(out / "postprocess.csv", COLUMNS, rows)
            tidy = [{k: _common.tidy(v) for k, v in r.items()} for r in rows]
            plot(tidy, out)  # from the values as written: the figure can be redrawn from the CSV alone
            _run.write_text(out / "postprocess.md", markdown(tidy))
            _run.write_json(out / "postprocess.run_info.json", {"seconds": round(time.perf_counter() - t0, 1),
                                                                "per_row_seconds": timings, "machine": _run.machine()})
    except _run.Busy as exc:
        print(f"python -m experiments.postprocess: {exc}", file=sys.stderr)
        return 2
    print(_common.format_table(rows, ["dataset", "n", "scale", "epsilon", "workload", "strategy", "reconstruct",
                                      "rmse", "ratio_to_least_squares"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
