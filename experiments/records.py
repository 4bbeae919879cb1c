"""Records in, private marginals out, on real data: predicted against measured error of the released 2-way marginals.

Run:   python -m experiments.records            (quick: 200 Monte-Carlo draws and 2 Private-PGM fits per ε)
       python -m experiments.records --full     (2,000 draws and 10 PGM fits per ε)
       python -m experiments.records --jobs 2   (the ε values at once; the same outputs)
Out:   results/records/ (not tracked; --out DIR elsewhere): records.csv, records.png, records.md;
       records.run_info.json (timings, machine) is never tracked.
Talks: a line per ε and stage on stderr, at least one every 10 s; --quiet: none.

Data: the CPS 1988 extract shipped with mmopt (:func:`mmopt.records.datasets.cps1988`, 28,155 records, 7
attributes, N = 9,408 cells). Workload: all 21 two-way marginals (369 cells). Gaussian noise at (ε, 1e-9),
ε ∈ {0.1, 1}, every noise scale calibrated by OpenDP as :func:`mmopt.records.release_marginals` does. Methods:

* ``residual (optimal)``: the residual plan :func:`mmopt.records.release_marginals` uses by default (optimal
  among all matrix mechanisms for this workload under Gaussian noise);
* ``OPT_M``: HDMM's best weighted-marginals strategy (:func:`mmopt.multidim.marginals.solve_marginals`, L2);
* ``identity``: noise on each of the N cells, marginals summed from them;
* ``residual via release_marginals``: the same as the first, through the whole records pipeline (counting,
  OpenDP-scaled noise drawn by the seeded sampler, reconstruction) on the first few draws;
* ``PGM``: Private-PGM's consistent non-negative marginals (:mod:`mmopt.records.pgm`, needs ``mmopt[pgm]``)
  fitted to those release draws; its "predicted" column is least squares' prediction, which is *not* its
  error — the mis-match between strategy optimisation and inference — and ``ls_same_draws`` is least
  squares' error on the same draws.

Predicted: Σ_A N_A·var_A, least squares' exact expected total squared error over the 369 cells (equal to
``mmopt.evaluate``'s figure rescaled to OpenDP's σ; checked in the tests). Measured: the mean over draws of
Σ‖M_A x̂ − m_A‖², with its standard error; z = (measured − predicted)/se. The Monte-Carlo rows simulate the
least-squares error exactly in distribution (:mod:`experiments._records_sim`), they are not private releases.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

import mmopt
from experiments import _cli, _common, _progress, _run
from experiments import _records_sim as sim
from mmopt._base.parallel import check_n_jobs, ordered_map

TABLE = "records.csv"
COLUMNS = ["epsilon", "delta", "method", "status", "sensitivity", "noise_scale", "draws", "predicted_total",
           "measured_total", "measured_se", "ratio", "z", "predicted_rmse", "measured_rmse", "ls_same_draws",
           "negative_share", "seconds"]


@dataclass(frozen=True)
class Config:
    epsilons: tuple = (0.1, 1.0)
    delta: float = 1e-9
    k: int = 2
    draws: int = 200
    pgm_draws: int = 2
    pgm_iters: int = 1000
    seed: int = 0


QUICK = Config()
FULL = Config(draws=2000, pgm_draws=10, pgm_iters=2000)


def _have_mbi() -> bool:
    from mmopt.records.pgm import _require_mbi

    try:
        _require_mbi("experiments.records")
    except ImportError:
        return False
    return True


def _row(cfg: Config, eps: float, method: str, status: str, sens: float, sigma: float, errs, predicted: float,
         cells: int, seconds: float, **extra) -> dict:
    errs = np.asarray(errs, dtype=float)
    n = errs.size
    mean = float(errs.mean())
    se = float(errs.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    row = {"epsilon": eps, "delta": cfg.delta, "method": method, "status": status, "sensitivity": sens,
           "noise_scale": sigma, "draws": n, "predicted_total": predicted, "measured_total": mean,
           "measured_se": se, "ratio": mean / predicted, "z": (mean - predicted) / se if se > 0 else math.nan,
           "predicted_rmse": math.sqrt(predicted / cells), "measured_rmse": math.sqrt(mean / cells),
           "ls_same_draws": "", "negative_share": "", "seconds": round(seconds, 3)}
    row.update(extra)
    return row


def _epsilon_rows(records, domain, cfg: Config, eps: float) -> list[dict]:
    """One task of run(): every method's row at one ε (module docstring)."""
    from mmopt.multidim.marginals import solve_marginals
    from mmopt.records import marginal_counts, release_marginals
    from mmopt.structured import marginals as implicit_marginals
    from mmopt.structured.residual import closure as cl
    from mmopt.structured.residual import plan

    P = mmopt.Privacy(eps, cfg.delta)
    d = len(domain.shape)
    sets = sim.all_k_way(d, cfg.k)
    cells = sum(cl.cells(domain.shape, A) for A in sets)
    truth = marginal_counts(records, domain, sets)
    rng = np.random.default_rng([cfg.seed, int(round(eps * 1e6))])
    rows = []

    # the records pipeline, a few draws (their seeds fixed by cfg.seed): numpy's seeded sampler at OpenDP's scale
    _progress.note(f"ε = {eps}: release_marginals draws")
    t0 = time.perf_counter()
    releases = []
    with warnings.catch_warnings():
        # "seed= draws with numpy's seeded generator, for simulations": that is what this is
        warnings.filterwarnings("ignore", message=".*seed=.*numpy's seeded generator", category=UserWarning)
        for j in range(max(cfg.pgm_draws, 2)):
            releases.append(release_marginals(records, domain, cfg.k, P,
                                               seed=(cfg.seed * 1_000_003 + round(eps * 1e6)) * 100 + j))
    r0 = releases[0]
    ls_errs = [sum(float(((r.marginals[A] - truth[A]) ** 2).sum()) for A in sets) for r in releases]
    predicted_ls = sim.predicted_total(r0.strategy, sets, r0.noise_scale)
    rows.append(_row(cfg, eps, "residual via release_marginals", "", r0.sensitivity, r0.noise_scale,
                     ls_errs, predicted_ls, cells, time.perf_counter() - t0,
                     negative_share=float(np.mean([sum(int((r.marginals[A] < 0).sum()) for A in sets) / cells
                                                   for r in releases]))))

    # Monte Carlo of the least-squares marginals: residual plan, OPT_M, identity; "seconds" = the strategy's
    # search (plan or OPT_M) and calibration, plus its draws
    t0 = time.perf_counter()
    residual_plan = plan(r0.workload, norm="l2")  # the plan release_marginals used, with its status
    rows[0]["status"] = residual_plan.status
    candidates = [("residual (optimal)", residual_plan.status, r0.strategy, r0.sensitivity, r0.noise_scale,
                   time.perf_counter() - t0)]
    _progress.note(f"ε = {eps}: OPT_M search")
    t0 = time.perf_counter()
    sol = solve_marginals(implicit_marginals(domain.shape, cfg.k), norm="l2", seed=cfg.seed)
    searched = time.perf_counter() - t0
    identity = np.zeros(2**d)
    identity[-1] = 1.0
    for name, status, theta, setup in (("OPT_M", sol.status, sol.extra["theta"], searched),
                                       ("identity", "fixed", identity, 0.0)):
        t0 = time.perf_counter()
        d_in, sigma = sim.opendp_scale(float(np.linalg.norm(theta)), P)
        A = sim.gram_equivalent(domain.shape, np.asarray(theta, dtype=float), sets, name)
        candidates.append((name, status, A, d_in, sigma, setup + time.perf_counter() - t0))
    for name, status, A, d_in, sigma, seconds in candidates:
        _progress.note(f"ε = {eps}: {cfg.draws} draws of {name}")
        t1 = time.perf_counter()
        errs = sim.simulate(A, truth, sets, sigma, cfg.draws, rng)
        rows.append(_row(cfg, eps, name, status, d_in, sigma, errs, sim.predicted_total(A, sets, sigma), cells,
                         seconds + time.perf_counter() - t1))

    if cfg.pgm_draws > 0 and _have_mbi():
        from mmopt.records.pgm import pgm_marginals

        _progress.note(f"ε = {eps}: Private-PGM on {cfg.pgm_draws} release draws")
        t0 = time.perf_counter()
        pgm_errs = []
        for r in releases[:cfg.pgm_draws]:
            est = pgm_marginals(r, iters=cfg.pgm_iters)
            pgm_errs.append(sum(float(((est.marginals[A] - truth[A]) ** 2).sum()) for A in sets))
        rows.append(_row(cfg, eps, "PGM (mbi)", f"{cfg.pgm_iters} iterations", r0.sensitivity, r0.noise_scale,
                         pgm_errs, predicted_ls, cells, time.perf_counter() - t0,
                         ls_same_draws=float(np.mean(ls_errs[:cfg.pgm_draws])), negative_share=0.0))
    return rows


def run(records=None, domain=None, cfg: Config = QUICK, *, n_jobs: int | None = 1,
        progress: bool | _progress.Progress = False) -> list[dict]:
    """Rows of records.csv (pure: no files). ``records``/``domain`` default to the CPS 1988 extract.

    Every draw is seeded from ``cfg.seed`` and ε, so the rows are the same whatever ``n_jobs`` (ε values run
    at once with joblib). Gaussian noise only (``cfg.delta`` > 0): the Monte Carlo of OPT_M and identity is
    exact in distribution for Gaussian noise alone.
    """
    n_jobs = check_n_jobs(n_jobs, caller="experiments.records.run")
    if not cfg.delta > 0:
        raise ValueError(f"experiments.records.run: cfg.delta must be > 0 (Gaussian noise). Got {cfg.delta!r}.")
    if records is None:
        from mmopt.records.datasets import cps1988

        records, domain = cps1988()
    rows = []
    with contextlib.ExitStack() as stack:
        prog = progress if isinstance(progress, _progress.Progress) else stack.enter_context(
            _progress.Progress("records", enabled=bool(progress)))
        prog.stage("privacy budgets", total=len(cfg.epsilons))
        tasks = [(records, domain, cfg, float(eps)) for eps in cfg.epsilons]
        for got in prog.track(ordered_map(_epsilon_rows, tasks, n_jobs=n_jobs), [f"ε = {e}" for e in cfg.epsilons]):
            rows += got
    return rows


def plot(rows: list[dict], out: Path) -> Path:
    """RMSE per cell of each method, measured (bars, ± 2 se) and predicted (black ticks), one panel per ε."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    eps = list(dict.fromkeys(r["epsilon"] for r in rows))
    fig, axes = plt.subplots(1, len(eps), figsize=(5.5 * len(eps), 4.2), squeeze=False)
    for ax, e in zip(axes[0], eps, strict=True):
        mine = [r for r in rows if r["epsilon"] == e]
        xs = np.arange(len(mine))
        meas = np.array([r["measured_rmse"] for r in mine])
        se = np.array([0.0 if not (r["measured_se"] == r["measured_se"]) else r["measured_se"] for r in mine])
        # ± 2 se of the RMSE √(m/cells), from that of the mean square m by the delta method: se/(2√(m·cells))
        cells = np.array([r["measured_total"] / r["measured_rmse"] ** 2 for r in mine])
        err = 2 * se / (2 * np.sqrt(np.array([r["measured_total"] for r in mine]) * cells))
        ax.bar(xs, meas, yerr=err, color=[f"C{k}" for k in range(len(mine))], capsize=3)
        ax.scatter(xs, [r["predicted_rmse"] for r in mine], marker="_", s=500, color="k", zorder=3,
                   label="predicted (least squares)")
        ax.set_xticks(xs, [r["method"].replace(" via ", "\nvia ") for r in mine], rotation=25, fontsize=7)
        ax.set_yscale("log")
        low = min(min(meas), min(r["predicted_rmse"] for r in mine))
        ax.set_ylim(bottom=low / 3)  # bars on a log axis start at its bottom: leave room to compare their heights
        ax.set_title(f"ε = {e}, δ = {mine[0]['delta']:g}", fontsize=9)
        ax.set_ylabel("RMSE per marginal cell (records)")
        ax.grid(True, axis="y", which="both", alpha=0.25)
        ax.legend(fontsize=7)
    fig.suptitle("CPS 1988, all 2-way marginals: measured (bars) vs predicted (ticks) error", fontsize=10)
    fig.tight_layout()
    return _common.save_png(fig, Path(out) / "records.png", dpi=110)


def markdown(rows: list[dict]) -> str:
    lines = ["# Records in, private marginals out (generated by `python -m experiments.records`)", "",
             "CPS 1988 (28,155 records, 7 attributes), all 2-way marginals (369 cells), Gaussian noise at OpenDP's "
             "scale. Totals are squared errors summed over the 369 cells; z = (measured − predicted) / se. PGM's "
             "predicted column is least squares' prediction (not PGM's error: the mis-match); ls_same_draws is "
             "least squares' measured total on the draws PGM was fitted to.", "",
             "| ε | method | draws | predicted total | measured total (± se) | ratio | z | RMSE/cell pred. | "
             "RMSE/cell meas. | LS same draws |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['epsilon']:g} | {r['method']} | {r['draws']} | {r['predicted_total']:.6g} | "
                     f"{r['measured_total']:.6g} (± {r['measured_se']:.3g}) | {r['ratio']:.4f} | {r['z']:.2f} | "
                     f"{r['predicted_rmse']:.4g} | {r['measured_rmse']:.4g} | "
                     f"{'' if r['ls_same_draws'] == '' else format(r['ls_same_draws'], '.6g')} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.records",
                                description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--full", action="store_true", help="2,000 draws and 10 PGM fits per ε (quick: 200 and 2)")
    _common.add_output_args(p, "records")
    p.add_argument("--seed", type=int, default=0, help="seed of every draw (default 0)")
    p.add_argument("--jobs", type=_cli._jobs, default=1, metavar="N", help="ε values run at once (joblib; -1: "
                   "every core; default 1); the outputs are the same for any N")
    args = p.parse_args(argv)
    if args.seed < 0:
        p.error(f"--seed must be >= 0. Got {args.seed}.")
    cfg = Config(**{**asdict(FULL if args.full else QUICK), "seed": args.seed})
    try:
        out = _run.check_out_dir(_common.out_of(args, "records"))
    except ValueError as exc:
        p.error(str(exc))
    try:
        with _run.hold(out), _progress.Progress("records", enabled=not args.quiet) as prog:
            t0 = time.perf_counter()
            rows = run(cfg=cfg, n_jobs=args.jobs, progress=prog)
            prog.stage("writing records.csv, records.png, records.md")
            _common.write_csv(out / TABLE, COLUMNS, rows)
            plot(rows, out)
            _run.write_text(out / "records.md", markdown([{k: _common.tidy(v) for k, v in r.items()} for r in rows]))
            _run.write_json(out / "records.run_info.json", {"seconds": round(time.perf_counter() - t0, 1),
                                                           "jobs": args.jobs, "config": asdict(cfg),
                                                           "pgm": _have_mbi(), "machine": _run.machine()})
            prog.done(f"wrote records.csv, records.png and records.md into {out}")
    except _run.Busy as exc:
        print(f"python -m experiments.records: {exc}", file=sys.stderr)
        return 2
    print(_common.format_table(rows, ["epsilon", "method", "draws", "predicted_total", "measured_total", "ratio",
                                      "z", "ls_same_draws"]))
    return 0


if __name__ == "__main__":  # run the imported module's main, so that worker processes find its functions by name
    from experiments.records import main as _imported_main

    sys.exit(_imported_main())
