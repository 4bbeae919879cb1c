"""DPBench on real data: every data-adaptive algorithm of mmopt.adaptive (Uniform, MWEM, DAWA, AHP, PHP, EFPA,
NoiseFirst, StructureFirst; UGrid, AGrid, kd-trees; PrivBayes, iReduct, DualQuery) against the matrix mechanism.

Run:   python -m experiments.dpbench            (quick: see QUICK; 5.2–7.5 min with --jobs 1, 2 shared cores)
       python -m experiments.dpbench --full     (all 7 + 5 datasets, 10 trials, figure (a) at 4,096 cells;
                                                 with --trials 3: 37.5 min with --jobs 1 on 2 shared cores)
       python -m experiments.dpbench --jobs 2   (two cells at once; the same outputs, byte for byte)
Data:  the DPBench histograms in ../shared/data/dpbench (or $MMOPT_DPBENCH, or --data DIR): 1-D files of
       4,096 cells, 2-D files of 256 × 256. Without them the command says where they come from and exits 2
       (tests use synthetic data through run()). The multi-attribute table (CPS 1988) ships with mmopt.
Out:   results/dpbench/ (not tracked by git; --out DIR elsewhere, --paper-figures into the tracked
       paper_figures/): dpbench.csv, dpbench.png, dpbench.md (the verdict, the measured run times per algorithm,
       the table), dpbench_algorithms.{csv,png} and dpbench_scale.{csv,png} (the seed's two figures,
       :mod:`experiments._dpbench_figures`); dpbench.run_info.json (timings, the optimised strategies' records,
       the machine) is never tracked. Every file but the run-time section of dpbench.md is the same, byte for
       byte, from run to run.
Talks: a line per strategy and per (dataset, scale, ε) cell on stderr (a bar on a terminal), at least one every
       10 s; --quiet: none.

Design (Hay, Machanavajjhala, Miklau, Chen & Zhang, *Principled Evaluation of Differentially Private
Algorithms using DPBench*, SIGMOD 2016): a dataset's *shape* (counts ÷ total) is studied at several *scales*
by rescaling it (x = scale · shape, as :mod:`experiments.postprocess` does, not by DPBench's multinomial
sampling: every trial sees the same x, so the spread is the algorithms' own), at ε ∈ {0.01, 0.1, 1} and, for
the error-against-scale figure, at more scales (10² … 10⁸) at ε = 0.1, on the prefix and all-range workloads
(1-D) and all 2-D ranges (2-D). The error is DPBench's scaled average
per-query error, mean |W x̂ − W x| ÷ scale, computed exactly over all queries in 1-D (all 523,776 ranges at
1,024 cells through sorted prefix sums) and over a fixed uniform sample of 10,000 rectangles in 2-D
(:mod:`experiments._dpbench_errors`). The algorithms and their settings are in
:mod:`experiments._dpbench_algorithms`; the multi-attribute panel (all 2-way marginals of CPS 1988, one
multinomial draw per scale: PrivBayes, iReduct and DualQuery count records) in
:mod:`experiments._dpbench_marginals`. Domains are coarsened by summing equal blocks: 1-D to 1,024 cells,
because mmopt's ε-DP optimiser (min_error, one restart) takes 10–20 s there (5 min with its defaults), while at
4,096 30 iterations of its local search took 2 min, and l2_approx (2–4 min) is 40–80× worse than H₁₆ under
Laplace noise (measured on this machine); 2-D to 64 × 64, because AHP takes ~20 s a run at 256 × 256
(4 s at 128 × 128). The seed's figure (a), every 1-D algorithm on PATENT (prefix, scale 1,000, ε = 0.1), is
drawn at 4,096 cells with --full (without mmopt's optimised strategy, for the reason above) and at the main
grid's 1,024 in the quick run. Quick: ADULTFRANK (98% empty cells) and PATENT (6%) in 1-D, twitter in 2-D,
CPS 1988, 3 trials, extra scales 10² and 10⁸ at ε = 0.1.
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
from experiments import _dpbench_figures as fg
from experiments import _dpbench_marginals as ma
from experiments import postprocess as pp
from experiments._dpbench_report import cells, markdown, plot, verdict
from mmopt._base.parallel import check_n_jobs, ordered_map

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
    datasets_ma: tuple[str, ...] = ()  # multi-attribute tables (experiments._dpbench_marginals)
    marginal_order: int = 2            # k: the multi-attribute workload is all k-way marginals
    sweep_scales: tuple[int, ...] = ()  # more scales, at sweep_epsilon only: the error-against-scale figure
    sweep_epsilon: float = 0.1
    figure_dataset: str | None = None  # the every-algorithm figure: one 1-D dataset (None: not drawn) ...
    figure_n: int = 1024               # ... at this many cells, scale, ε and workload
    figure_scale: int = 1000
    figure_epsilon: float = 0.1
    figure_workload: str = "prefix"


# The seed's figures (Hay et al. 2016, as the tutorial shows them): every algorithm on PATENT, prefix, 4,096
# cells, scale 1,000, ε = 0.1 (quick: 1,024 cells, the strategies of the main grid); error against scale.
_SWEEP = (10**2, 10**4, 10**6, 10**8)
QUICK = Config(("ADULTFRANK", "PATENT"), ("twitter",), trials=3, opt_iterations=600, datasets_ma=(ma.DATASET,),
               sweep_scales=(10**2, 10**8), figure_dataset="PATENT")
FULL = Config(("ADULTFRANK", "HEPTH", "INCOME", "MEDCOST", "NETTRACE", "PATENT", "SEARCHLOGS"),
              ("Adult_2D", "cabspottingE", "cabspottingS", "checkin", "twitter"), datasets_ma=(ma.DATASET,),
              sweep_scales=_SWEEP, figure_dataset="PATENT", figure_n=4096)
COLUMNS = ["dataset", "dims", "n", "scale", "epsilon", "signal", "workload", "algorithm", "kind", "trials",
           "scaled_error", "scaled_error_std", "ci_low", "ci_high", "ratio_to_best_independent"]


def _summary(errors: np.ndarray) -> dict:
    k = errors.size
    mean, std = float(np.mean(errors)), float(np.std(errors, ddof=1))
    half = float(stats.t.ppf(0.975, k - 1)) * std / np.sqrt(k)  # Student-t interval of the mean over k trials
    return {"scaled_error": mean, "scaled_error_std": std, "ci_low": mean - half, "ci_high": mean + half}


def _cell(ctx: alg.Context, dims: str, key: tuple, dname: str, x: np.ndarray, scale, eps: float, algorithms,
          trials: int) -> tuple[list[dict], dict, list[tuple]]:
    """One task of run(): the rows (ratios still to come), timings and runs of one (dataset, scale, ε), every
    workload. ``key`` = (dims, dataset, scale, ε) indices seeds the noise, as :meth:`Context.estimates`
    describes. Timings: the seconds each row's estimates took (0 when a workload-free algorithm's are reused);
    runs: (dims, algorithm, seconds, trials) per set of estimates made."""
    rows, timings, runs = [], {}, []
    shared = {}  # DAWA, AHP, Uniform, ... ignore the workload: one set of runs serves every workload
    for wi, wname in enumerate(alg.WORKLOADS[dims]):
        _progress.note(wname)
        for a in algorithms:
            t0 = time.perf_counter()
            free = a in alg.WORKLOAD_FREE
            if free and a in shared:
                est, seconds = shared[a], 0.0
            else:
                est = ctx.estimates(a, wname, x, eps, trials, (*key, 9 if free else wi))  # 9: no workload
                seconds = time.perf_counter() - t0
                runs.append((dims, a, seconds, trials))
                if free:
                    shared[a] = est
            errors = ctx.error(wname, est, x) / scale
            rows.append({"dataset": dname, "dims": dims, "n": x.size, "scale": scale, "epsilon": eps,
                         "signal": scale * eps, "workload": wname, "algorithm": a, "kind": alg.KIND[a],
                         "trials": trials, **_summary(errors)})
            timings[f"{dname}/{scale}/{eps}/{wname}/{a}"] = round(seconds, 3)
    return rows, timings, runs


def grid(cfg: Config) -> list[tuple[int, float]]:
    """The (scale, ε) pairs run: every scale × every ε, and the sweep's scales at its ε."""
    pairs = {(s, e) for s in cfg.scales for e in cfg.epsilons} | {(s, cfg.sweep_epsilon) for s in cfg.sweep_scales}
    return sorted(pairs)


def _panels(cfg: Config) -> tuple:
    """(dims, datasets, side) per panel; the multi-attribute tables keep their shape (side None)."""
    return (("1D", cfg.datasets_1d, cfg.n_1d), ("2D", cfg.datasets_2d, cfg.side_2d), ("MA", cfg.datasets_ma, None))


def run(shapes: dict[str, np.ndarray], cfg: Config, *, seed: int = 0, timings: dict | None = None,
        info: dict | None = None, n_jobs: int | None = 1, progress: bool | _progress.Progress = False,
        runtimes: dict | None = None, figure: list | None = None) -> list[dict]:
    """Rows of the table (pure: no files). ``shapes`` maps a dataset to its shape (1-D, 2-D, or a table with
    one axis per attribute for ``cfg.datasets_ma``).

    ``n_jobs`` (joblib's convention; 1: in this process) runs the strategies' construction, then the
    (dataset, scale, ε) cells, that many at once. Every strategy is made once, before any cell (the optimised
    ones take seconds to minutes), and sent to the workers, which rebuild the cheap, seeded rest (workloads,
    query samples); strategies are seeded with ``seed`` and every cell's noise from its indices, so the rows
    are the same whatever ``n_jobs`` (with one BLAS thread, as workers run). ``progress``: True writes a line
    per strategy and cell on stderr (:mod:`experiments._progress`), or a reporter to write into.
    ``runtimes`` gets {(dims, algorithm): [seconds, trials]} (the estimates only; strategies are in ``info``);
    ``figure`` the per-trial rows of the every-algorithm figure (:func:`experiments._dpbench_figures.trials`)
    when ``cfg.figure_dataset`` is set.
    """
    if cfg.trials < 2:
        raise ValueError(f"run: Config.trials must be >= 2 (a spread needs two trials). Got {cfg.trials}.")
    n_jobs = check_n_jobs(n_jobs, caller="experiments.dpbench.run")
    info = {} if info is None else info
    pairs = grid(cfg)
    all_scales, all_eps = sorted({p[0] for p in pairs}), sorted({p[1] for p in pairs})
    tasks, wanted, contexts = [], [], {}
    left_out = set(ma.missing())
    for dims_i, (dims, names, side) in enumerate(_panels(cfg)):
        algorithms = [a for a in cfg.algorithms if a not in alg.SKIP.get(dims, ()) and a not in left_out]
        kw = {"opt_iterations": cfg.opt_iterations, "mwem_queries": cfg.mwem_queries,
              "error_queries_2d": cfg.error_queries_2d, "info": info}
        ctx = contexts[dims] = (ma.MarginalContext(seed, k=cfg.marginal_order, **kw) if dims == "MA"
                                else alg.Context(seed, **kw))
        for di, dname in enumerate(names):
            shape = shapes[dname] if side is None else alg.coarsen(shapes[dname], side)
            # every strategy the rows use, in the order they first use them
            wanted += [(ctx, a.removesuffix("+proj"), wname, side or shape.shape) for wname in alg.WORKLOADS[dims]
                       for a in algorithms if a in (*alg.INDEPENDENT, "mmopt+proj")]
            for scale, eps in pairs:
                si, ei = all_scales.index(scale), all_eps.index(eps)
                x = (ma.sample(shape, scale, np.random.default_rng([seed, 13, di, si])) if side is None
                     else scale * shape)
                tasks.append((ctx, dims, (dims_i, di, si, ei), dname, x, scale, eps, algorithms, cfg.trials))
    fig_algs = fg.algorithms(cfg) if cfg.figure_dataset is not None and figure is not None else []
    wanted += [(contexts["1D"], a.removesuffix("+proj"), cfg.figure_workload, cfg.figure_n) for a in fig_algs
               if a in (*alg.INDEPENDENT, "mmopt+proj")]
    runtimes = {} if runtimes is None else runtimes
    with contextlib.ExitStack() as stack:
        prog = progress if isinstance(progress, _progress.Progress) else stack.enter_context(
            _progress.Progress("dpbench", enabled=bool(progress)))
        alg.make_strategies(wanted, n_jobs, prog)  # once each, before the cells: the costly part shared by all
        prog.stage("cells", total=len(tasks))
        labels = [f"{t[3]} ({t[1]}), scale {t[5]:.0e}, ε = {t[6]:g} ({len(t[7])} algorithms × {t[8]} trials)"
                  for t in tasks]
        rows = []
        for got, seconds, runs in prog.track(ordered_map(_cell, tasks, n_jobs=n_jobs), labels):
            rows += got
            if timings is not None:
                timings.update(seconds)
            for dims, a, sec, k in runs:
                tot = runtimes.setdefault((dims, a), [0.0, 0])
                tot[0], tot[1] = tot[0] + sec, tot[1] + k
        if fig_algs:
            prog.stage(f"every algorithm on {cfg.figure_dataset}, {cfg.figure_n} cells")
            figure += fg.trials(contexts["1D"], shapes[cfg.figure_dataset], cfg, fig_algs)
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
    multi = (f" Multi-attribute: {', '.join(cfg.datasets_ma)} (the CPS 1988 extract shipped with mmopt, 7 attributes, "
             "9,408 cells; at each scale one multinomial draw of that many records from its shape, so counts are "
             f"whole) on all {cfg.marginal_order}-way marginals, error over every marginal cell; mmopt's strategy: "
             "optimize(method=\"marginals\")." if cfg.datasets_ma else "")
    sweep = (f" Scales {', '.join(f'{s:.0e}' for s in cfg.sweep_scales)} are run at ε = {cfg.sweep_epsilon:g} only "
             "(the error-against-scale figure)." if cfg.sweep_scales else "")
    return ["", f"Setup: 1-D datasets {', '.join(cfg.datasets_1d)} at {cfg.n_1d} cells, 2-D "
            f"{', '.join(cfg.datasets_2d)} at {cfg.side_2d} × {cfg.side_2d}; x = scale · shape; {cfg.trials} trials; "
            f"mmopt's min_error: 1 restart, {cfg.opt_iterations} iterations; MWEM with T = 10, 100 replay passes, "
            f"{cfg.mwem_queries} random ranges for all-range and 2-D; 2-D error over {cfg.error_queries_2d} random "
            f"rectangles.{multi}{sweep}{fg.missing_note()} Strategies (expected RMSE per query at ε = 1): "
            f"{strategies}."]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.dpbench",
                                description=" ".join(__doc__.split("\n\n")[0].split()))
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
    shapes.update({d: ma.cps1988_shape() for d in cfg.datasets_ma})  # shipped with mmopt
    try:
        with _run.hold(out), _progress.Progress("dpbench", enabled=not args.quiet) as prog:
            t0, timings, info, runtimes, figure = time.perf_counter(), {}, {}, {}, []
            rows = run(shapes, cfg, seed=args.seed, timings=timings, info=info, n_jobs=args.jobs, progress=prog,
                       runtimes=runtimes, figure=figure)
            prog.stage("writing dpbench.csv, dpbench.png, dpbench.md and the figures")
            _common.write_csv(out / "dpbench.csv", COLUMNS, rows)
            tidy = [{k: _common.tidy(v) for k, v in r.items()} for r in rows]
            plot(tidy, out, scales=cfg.scales)  # from the values as written: redrawn from the CSV alone
            if figure:
                _common.write_csv(out / "dpbench_algorithms.csv", fg.ALG_COLUMNS, figure)
                fg.plot_algorithms([{k: _common.tidy(v) for k, v in r.items()} for r in figure], out)
            if cfg.sweep_scales:
                srows = [{k: _common.tidy(v) for k, v in r.items()} for r in fg.scale_rows(tidy, cfg.sweep_epsilon)]
                _common.write_csv(out / "dpbench_scale.csv", fg.SCALE_COLUMNS, srows)
                fg.plot_scale(srows, out)
            notes = {k: {a: _common.tidy(b) if isinstance(b, float) else b for a, b in v.items()}
                     for k, v in info.items()}
            for v in notes.values():
                v["rmse_at_eps_1"] = float(f"{v['rmse_at_eps_1']:.4g}")
                v.pop("objective", None)
            md = markdown(tidy, _notes(cfg, notes), fg.sections(cfg, figure, runtimes, info))
            _run.write_text(out / "dpbench.md", md)
            _run.write_json(out / "dpbench.run_info.json", {
                "seconds": round(time.perf_counter() - t0, 1), "jobs": args.jobs, "strategies": info,
                "per_row_seconds": timings, "machine": _run.machine(),
                "seconds_per_trial": {f"{d}/{a}": round(t / k, 4) for (d, a), t_k in runtimes.items()
                                      for t, k in [t_k]}})
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
