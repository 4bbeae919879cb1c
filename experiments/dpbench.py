"""DPBench on real data: data-adaptive algorithms (MWEM, DAWA, AHP, Uniform, PHP, EFPA, UGrid, AGrid, kd-trees)
against the matrix mechanism.

Run:   python -m experiments.dpbench            (quick: see QUICK; 3.5–4.5 min on 2 cores at load average 6–7)
       python -m experiments.dpbench --full     (all 7 + 5 datasets, 10 trials; 9 min measured)
       python -m experiments.dpbench --jobs 2   (two cells at once; the same outputs, byte for byte)
Data:  the DPBench histograms in ../shared/data/dpbench (or $MMOPT_DPBENCH, or --data DIR): 1-D files of
       4,096 cells, 2-D files of 256 × 256. Without them the command says where they come from and exits 2
       (tests use synthetic data through run()).
Out:   results/dpbench/ (not tracked by git; --out DIR elsewhere, --paper-figures into the tracked
       paper_figures/): dpbench.csv, dpbench.png, dpbench.md; dpbench.run_info.json (timings, the optimised
       strategies' records, the machine) is never tracked.
Talks: a line per strategy and per (dataset, scale, ε) cell on stderr (a bar on a terminal), at least one every
       10 s; --quiet: none.

Design (Hay, Machanavajjhala, Miklau, Chen & Zhang, *Principled Evaluation of Differentially Private
Algorithms using DPBench*, SIGMOD 2016): a dataset's *shape* (counts ÷ total) is studied at several *scales*
by rescaling it (x = scale · shape, as :mod:`experiments.postprocess` does, not by DPBench's multinomial
sampling: every trial sees the same x, so the spread is the algorithms' own), at ε ∈ {0.01, 0.1, 1}, on the
prefix and all-range workloads (1-D) and all 2-D ranges (2-D). The error is DPBench's scaled average
per-query error, mean |W x̂ − W x| ÷ scale, computed exactly over all queries in 1-D (all 523,776 ranges at
1,024 cells through sorted prefix sums) and over a fixed uniform sample of 10,000 rectangles in 2-D
(:mod:`experiments._dpbench_errors`). The algorithms and their settings are in
:mod:`experiments._dpbench_algorithms`. Domains are coarsened by summing equal blocks: 1-D to 1,024 cells,
because mmopt's ε-DP optimiser (min_error, one restart) takes 10–20 s there (5 min with its defaults), while at
4,096 30 iterations of its local search took 2 min, and l2_approx (2–4 min) is 40–80× worse than H₁₆ under
Laplace noise (measured on this machine); 2-D to 64 × 64, because AHP takes ~20 s a run at 256 × 256
(4 s at 128 × 128). Quick: ADULTFRANK (98% empty cells) and PATENT (6%) in 1-D, twitter in 2-D, 3 trials.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats

from experiments import _cli, _common, _progress, _run
from experiments import _dpbench_algorithms as alg
from experiments import postprocess as pp
from experiments._dpbench_report import cells, markdown, plot, verdict
from mmopt._parallel import check_n_jobs, ordered_map

DATA = pp.DATA  # $MMOPT_DPBENCH, else ../shared/data/dpbench
__all__ = ["COLUMNS", "Config", "FULL", "QUICK", "cells", "main", "markdown", "plot", "run", "verdict"]


@dataclass(frozen=True)
class Config:
    datasets_1d: tuple[str, ...]
    datasets_2d: tuple[str, ...]
    n_1d: int = 1024                # 1-D cells (the 4,096-cell files coarsened)
    side_2d: int = 64               # 2-D cells per axis (the 256 × 256 files coarsened)
    scales: tuple[int, ...] = (10**3, 10**5, 10**7)
    epsilons: tuple[float, ...] = (0.01, 0.1, 1.0)
    trials: int = 10
    opt_iterations: int = 1000      # L-BFGS-B iterations of min_error's local search (one restart)
    mwem_queries: int = 1000        # MWEM's candidate ranges (all-range and 2-D; prefix uses the workload)
    error_queries_2d: int = 10_000  # the sample of rectangles the 2-D error is averaged over
    algorithms: tuple[str, ...] = alg.ALGORITHMS


QUICK = Config(("ADULTFRANK", "PATENT"), ("twitter",), trials=3, opt_iterations=600)
FULL = Config(("ADULTFRANK", "HEPTH", "INCOME", "MEDCOST", "NETTRACE", "PATENT", "SEARCHLOGS"),
              ("Adult_2D", "cabspottingE", "cabspottingS", "checkin", "twitter"))
COLUMNS = ["dataset", "dims", "n", "scale", "epsilon", "signal", "workload", "algorithm", "kind", "trials",
           "scaled_error", "scaled_error_std", "ci_low", "ci_high", "ratio_to_best_independent"]


def _summary(errors: np.ndarray) -> dict:
    k = errors.size
    mean, std = float(np.mean(errors)), float(np.std(errors, ddof=1))
    half = float(stats.t.ppf(0.975, k - 1)) * std / np.sqrt(k)  # Student-t interval of the mean over k trials
    return {"scaled_error": mean, "scaled_error_std": std, "ci_low": mean - half, "ci_high": mean + half}


def _cell(ctx: alg.Context, dims: str, key: tuple, dname: str, x: np.ndarray, scale, eps: float, algorithms,
          trials: int) -> tuple[list[dict], dict]:
    """One task of run(): the rows (ratios still to come) and timings of one (dataset, scale, ε), every workload.

    ``key`` = (dims, dataset, scale, ε) indices seeds the noise, as :meth:`Context.estimates` describes."""
    rows, timings = [], {}
    shared = {}  # DAWA, AHP, Uniform ignore the workload: one set of runs serves every workload
    for wi, wname in enumerate(alg.WORKLOADS[dims]):
        _progress.note(wname)
        for a in algorithms:
            t0 = time.perf_counter()
            free = a in alg.WORKLOAD_FREE
            if free and a in shared:
                est = shared[a]
            else:
                est = ctx.estimates(a, wname, x, eps, trials, (*key, 9 if free else wi))  # 9: no workload
                if free:
                    shared[a] = est
            errors = ctx.error(wname, est, x) / scale
            rows.append({"dataset": dname, "dims": dims, "n": x.size, "scale": scale, "epsilon": eps,
                         "signal": scale * eps, "workload": wname, "algorithm": a, "kind": alg.KIND[a],
                         "trials": trials, **_summary(errors)})
            timings[f"{dname}/{scale}/{eps}/{wname}/{a}"] = round(time.perf_counter() - t0, 3)
    return rows, timings


def run(shapes: dict[str, np.ndarray], cfg: Config, *, seed: int = 0, timings: dict | None = None,
        info: dict | None = None, n_jobs: int | None = 1, progress: bool | _progress.Progress = False) -> list[dict]:
    """Rows of the table (pure: no files). ``shapes`` maps a dataset to its shape (1-D or 2-D array).

    ``n_jobs`` (joblib's convention; 1: in this process) runs the strategies' construction, then the
    (dataset, scale, ε) cells, that many at once. Every strategy is made once, before any cell (the optimised
    ones take seconds to minutes), and sent to the workers, which rebuild the cheap, seeded rest (workloads,
    query samples); strategies are seeded with ``seed`` and every cell's noise from its indices, so the rows
    are the same whatever ``n_jobs`` (with one BLAS thread, as workers run). ``progress``: True writes a line
    per strategy and cell on stderr (:mod:`experiments._progress`), or a reporter to write into.
    """
    if cfg.trials < 2:
        raise ValueError(f"run: Config.trials must be >= 2 (a spread needs two trials). Got {cfg.trials}.")
    n_jobs = check_n_jobs(n_jobs, caller="experiments.dpbench.run")
    info = {} if info is None else info
    tasks, wanted = [], []
    for dims_i, (dims, names, side) in enumerate((("1D", cfg.datasets_1d, cfg.n_1d),
                                                  ("2D", cfg.datasets_2d, cfg.side_2d))):
        algorithms = [a for a in cfg.algorithms if a not in alg.SKIP.get(dims, ())]
        ctx = alg.Context(seed, opt_iterations=cfg.opt_iterations, mwem_queries=cfg.mwem_queries,
                          error_queries_2d=cfg.error_queries_2d, info=info)
        if names:  # every strategy the rows use, in the order they first use them
            wanted += [(ctx, a.removesuffix("+proj"), wname, side) for wname in alg.WORKLOADS[dims]
                       for a in algorithms if a in (*alg.INDEPENDENT, "mmopt+proj")]
        for di, dname in enumerate(names):
            shape = alg.coarsen(shapes[dname], side)
            for si, scale in enumerate(cfg.scales):
                for ei, eps in enumerate(cfg.epsilons):
                    tasks.append((ctx, dims, (dims_i, di, si, ei), dname, scale * shape, scale, eps, algorithms,
                                  cfg.trials))
    with contextlib.ExitStack() as stack:
        prog = progress if isinstance(progress, _progress.Progress) else stack.enter_context(
            _progress.Progress("dpbench", enabled=bool(progress)))
        alg.make_strategies(wanted, n_jobs, prog)  # once each, before the cells: the costly part shared by all
        prog.stage("cells", total=len(tasks))
        labels = [f"{t[3]} ({t[1]}), scale {t[5]:.0e}, ε = {t[6]:g} ({len(t[7])} algorithms × {t[8]} trials)"
                  for t in tasks]
        rows = []
        for got, seconds in prog.track(ordered_map(_cell, tasks, n_jobs=n_jobs), labels):
            rows += got
            if timings is not None:
                timings.update(seconds)
    best = {}
    for r in rows:
        if r["algorithm"] in alg.INDEPENDENT:
            k = (r["dataset"], r["scale"], r["epsilon"], r["workload"])
            best[k] = min(best.get(k, np.inf), r["scaled_error"])
    for r in rows:
        r["ratio_to_best_independent"] = r["scaled_error"] / best.get(
            (r["dataset"], r["scale"], r["epsilon"], r["workload"]), np.nan)
    return rows


def _notes(cfg: Config, info: dict) -> list[str]:
    def fmt(v: dict) -> str:
        return ", ".join(f"{a}={b}" for a, b in v.items() if a != "seconds" and b is not None)

    strategies = "; ".join(f"{k}: {fmt(v)}" for k, v in sorted(info.items()))
    return ["", f"Setup: 1-D datasets {', '.join(cfg.datasets_1d)} at {cfg.n_1d} cells, 2-D "
            f"{', '.join(cfg.datasets_2d)} at {cfg.side_2d} × {cfg.side_2d}; x = scale · shape; {cfg.trials} trials; "
            f"mmopt's min_error: 1 restart, {cfg.opt_iterations} iterations; MWEM with T = 10, 100 replay passes, "
            f"{cfg.mwem_queries} random ranges for all-range and 2-D; 2-D error over {cfg.error_queries_2d} random "
            f"rectangles. Strategies (expected RMSE per query at ε = 1): {strategies}."]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.dpbench", description=__doc__.split("\n")[0])
    p.add_argument("--full", action="store_true", help="every dataset, scales 1e3/1e5/1e7, 10 trials")
    _common.add_output_args(p, "dpbench")
    p.add_argument("--data", default=str(DATA), help="the DPBench folder (default: $MMOPT_DPBENCH or "
                                                      "../shared/data/dpbench)")
    p.add_argument("--trials", type=int, help="seeded trials per configuration (default 3 quick, 10 full)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=_cli._jobs, default=1, metavar="N", help="(dataset, scale, ε) cells run at once "
                   "(joblib; -1: every core; default 1); the outputs are the same for any N")
    args = p.parse_args(argv)
    cfg = FULL if args.full else QUICK
    if args.trials is not None:
        if args.trials < 2:
            p.error(f"--trials must be >= 2 (a spread needs two trials). Got {args.trials}.")
        cfg = replace(cfg, trials=args.trials)
    if args.seed < 0:
        p.error(f"--seed must be >= 0. Got {args.seed}.")
    out, shapes = pp.dpbench_inputs(p, args.data, _common.out_of(args, "dpbench"), cfg.datasets_1d,
                                    cfg.datasets_2d)
    try:
        with _run.hold(out), _progress.Progress("dpbench", enabled=not args.quiet) as prog:
            t0, timings, info = time.perf_counter(), {}, {}
            rows = run(shapes, cfg, seed=args.seed, timings=timings, info=info, n_jobs=args.jobs, progress=prog)
            prog.stage("writing dpbench.csv, dpbench.png, dpbench.md")
            _common.write_csv(out / "dpbench.csv", COLUMNS, rows)
            tidy = [{k: _common.tidy(v) for k, v in r.items()} for r in rows]
            plot(tidy, out)  # from the values as written: the figure can be redrawn from the CSV alone
            notes = {k: {a: _common.tidy(b) if isinstance(b, float) else b for a, b in v.items()}
                     for k, v in info.items()}
            for v in notes.values():
                v["rmse_at_eps_1"] = float(f"{v['rmse_at_eps_1']:.4g}")
                v.pop("objective", None)
            _run.write_text(out / "dpbench.md", markdown(tidy, _notes(cfg, notes)))
            _run.write_json(out / "dpbench.run_info.json", {"seconds": round(time.perf_counter() - t0, 1),
                                                            "jobs": args.jobs,
                                                            "strategies": info, "per_row_seconds": timings,
                                                            "machine": _run.machine()})
            prog.done(f"wrote dpbench.csv, dpbench.png and dpbench.md into {out}")
    except _run.Busy as exc:
        print(f"python -m experiments.dpbench: {exc}", file=sys.stderr)
        return 2
    table = sorted(cells(tidy), key=lambda c: (c["dataset"], c["workload"], c["scale"], c["epsilon"]))
    print(_common.format_table(table, ["dataset", "workload", "scale", "epsilon", "best_independent",
                                       "independent_error", "best_adaptive", "adaptive_error", "winner"]))
    print(f"verdict: {verdict(tidy)['status']}")
    return 0


if __name__ == "__main__":  # run the imported module's main, so that worker processes find _cell by its name
    from experiments.dpbench import main as _imported_main

    sys.exit(_imported_main())
