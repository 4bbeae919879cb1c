"""Synthetic records on real data: mmopt's MST and AIM against OpenDP's (Private-PGM) — workload error and CPU.

Run:   python -m experiments.synth                      (quick: 3 trials of mmopt's methods per ε)
       python -m experiments.synth --full               (20 trials; --trials K: K)
       python -m experiments.synth --peers /work/synthvenv/bin/python   (also OpenDP's MST and AIM, 1 run per ε
                                                         by default, --peer-trials K; that interpreter needs
                                                         ``pip install 'opendp[mbi]'``: JAX, never in mmopt's venv)
       python -m experiments.synth ... --cache paper_figures/synth.csv   (trials already in that CSV are not run
                                                         again, new ones are added to it as they finish: peer runs
                                                         of minutes and gigabytes accumulate over split runs)
       python -m experiments.synth --from-csv paper_figures/synth.csv --paper-figures   (tables from the trials)
Out:   results/synth/ (not tracked; --out DIR elsewhere): synth.csv, synth.png, synth.md;
       synth.run_info.json (timings, machine) is never tracked.
Talks: a line per ε and method on stderr, at least one every 10 s; --quiet: none.

Data (``--datasets``): the CPS 1988 extract shipped with mmopt (28,155 records, 7 attributes, N = 9,408 cells;
``cps1988``) and the RAND Health Insurance Experiment shipped inside statsmodels (20,190 records, 10 attributes,
N = 201,600 cells, public domain; ``randhie``, the ``data`` extra), and a known network of mmopt's own
(``tree15``: :func:`mmopt.records.datasets.tree_network`, 15 attributes of 2–10 values, 20,000 records, N ≈ 3.8·10¹⁰
cells, past AIM's whole-table fit). Workload: all three-way marginals (AIM's paper workload; 35, 120 and 455).
Budget: (ε, 10⁻⁹), ε ∈ {0.1, 1, 10}, spent as the largest ρ OpenDP
converts to within it (the peers get the same ρ directly). Error: the papers' average L1 distance between the
normalised workload marginals of the data and of the synthetic rows (:func:`mmopt.synth.workload_error`), for
rows as many as the records (OpenDP's rows: its default ``synthesize(method="round")``, and "sampled" with
``method="sample"``), and of each model's own marginals ("model"). CPU: process seconds of the
call (for the peers, of their process, all threads; JAX runs several). Peak memory: for mmopt, the tracemalloc
peak of the call (Python and numpy allocations; interpreter and libraries excluded); for the peers, the peak RSS of
their process (JAX and Polars included). mmopt's trials are seeded (numpy noise
at OpenDP's scales, a simulation); OpenDP's samplers cannot be seeded.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

import mmopt
from experiments import _common, _progress, _run, _synth_compare

TABLE = "synth.csv"
COLUMNS = ["dataset", "epsilon", "delta", "rho", "method", "trial", "cpu_seconds", "wall_seconds", "peak_mb",
           "records_error", "sampled_error", "model_error", "epsilon_spent", "measured"]
PEERS = Path(__file__).resolve().parent / "_synth_peers.py"


@dataclass(frozen=True)
class Config:
    epsilons: tuple = (0.1, 1.0, 10.0)
    delta: float = 1e-9
    trials: int = 3
    peer_trials: int = 1
    seed: int = 0


QUICK = Config()
FULL = Config(trials=20)


DATASETS = ("cps1988", "randhie", "tree15")


def load(name: str):
    """(records, domain) of a dataset of :data:`DATASETS`; ``tree15``: 20,000 records of
    :func:`mmopt.records.datasets.tree_network` (15 attributes of 2–10 values, seed 0), a known network."""
    from mmopt.records import datasets
    if name not in DATASETS:
        raise ValueError(f"experiments.synth.load: the dataset must be one of {DATASETS}. Got {name!r}.")
    if name == "tree15":
        return datasets.tree_network(15, 20_000, seed=0)
    return getattr(datasets, name)()


def _ours(records, domain, workload, cfg: Config, eps: float, method: str, trial: int) -> dict:
    import tracemalloc

    from mmopt.synth import aim, mst, workload_error

    seed = cfg.seed + 1000 * trial + int(round(100 * eps))
    privacy = mmopt.Privacy(eps, cfg.delta)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # seeded noise: a simulation, as the docstring says
        tracemalloc.start()
        t0, w0 = time.process_time(), time.perf_counter()
        try:
            s = mst(records, domain, privacy, seed=seed) if method == "mmopt MST" else aim(
                records, domain, workload, privacy, seed=seed)
            rows = s.records(len(records))
            cpu, wall = time.process_time() - t0, time.perf_counter() - w0
            peak = tracemalloc.get_traced_memory()[1] / 2**20
        finally:
            tracemalloc.stop()
    return {"epsilon": eps, "delta": cfg.delta, "rho": s.budget, "method": method, "trial": trial,
            "cpu_seconds": cpu, "wall_seconds": wall, "peak_mb": peak,
            "records_error": workload_error(records, rows, domain, workload),
            "sampled_error": "", "model_error": workload_error(records, s, domain, workload),
            "epsilon_spent": s.epsilon, "measured": len(s.measured)}


def coded(records, domain):
    """(records as integer cell codes, a domain whose categories are those codes): what the peers are given."""
    import pandas as pd

    from mmopt.records import Attribute, Domain
    from mmopt.records import read as rd
    codes = pd.DataFrame({a.name: rd.codes(records[a.name], a).astype(np.int64) for a in domain.attributes})
    return codes[(codes >= 0).all(axis=1)], Domain(tuple(Attribute(a.name, categories=tuple(range(a.size)))
                                                          for a in domain.attributes))


def _peer(python: str, codes, cdomain, workload, cfg: Config, eps: float, method: str, trial: int) -> dict:
    import pandas as pd

    from mmopt.accounting import max_rho
    from mmopt.synth import workload_error

    rho = max_rho(eps, cfg.delta)
    algo = "aim" if method.endswith("AIM") else "mst"
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "codes.parquet", Path(tmp) / "synth.parquet"
        codes.to_parquet(src)
        got = subprocess.run([python, str(PEERS), str(src), json.dumps(list(cdomain.shape)), repr(rho), algo,
                              str(out)], capture_output=True, text=True, check=False)
        if got.returncode != 0:
            raise RuntimeError(f"{method} failed: {got.stderr.strip()[-600:]}")
        info = json.loads(got.stdout.strip().splitlines()[-1])
        rows = pd.read_parquet(out)
        sampled = pd.read_parquet(str(out) + ".sample.parquet")
    return {"epsilon": eps, "delta": cfg.delta, "rho": info["rho"], "method": method, "trial": trial,
            "cpu_seconds": info["cpu"], "wall_seconds": info["wall"], "peak_mb": info["peak_mb"],
            "records_error": workload_error(codes, rows, cdomain, workload),
            "sampled_error": workload_error(codes, sampled, cdomain, workload),
            "model_error": info["model_error"], "epsilon_spent": "", "measured": ""}


METHODS = ("mmopt MST", "mmopt AIM", "OpenDP MST", "OpenDP AIM")


def key(row: dict) -> tuple:
    """(dataset, ε, method, trial): what identifies a trial's row in the cache."""
    return (str(row.get("dataset", "")), float(row["epsilon"]), str(row["method"]), int(row["trial"]))


def run(records=None, domain=None, cfg: Config = QUICK, *, peers: str | None = None, methods=None,
        progress: bool | _progress.Progress = False, each=None, dataset: str | None = None,
        cached=()) -> list[dict]:
    """Rows of synth.csv (pure: no files but the peers' temporary ones). Without records, loads ``dataset``
    (:func:`load`, default cps1988); every row is labelled ``dataset`` ("custom" for records passed in).

    ``methods`` (default: mmopt's two, and OpenDP's two with ``peers``) run in the order of :data:`METHODS`, the
    cheap ones first; ``each(row)`` is called as every row is done (the command line appends it to the CSV).
    A trial whose :func:`key` is among the ``cached`` rows is not run again: its cached row is returned (and not
    passed to ``each``), so that runs cut short, or split by method and ε, accumulate their trials (a peer run
    takes minutes and gigabytes).
    """
    if records is None:
        dataset = dataset or "cps1988"
        records, domain = load(dataset)
    dataset = dataset or "custom"
    workload = list(itertools.combinations(range(len(domain.shape)), min(3, len(domain.shape))))
    wanted = METHODS[:2] + (METHODS[2:] if peers else ()) if methods is None else tuple(methods)
    if any(m.startswith("OpenDP") for m in wanted) and not peers:
        raise ValueError("experiments.synth.run: OpenDP's methods need 'peers' (an interpreter with opendp[mbi]).")
    methods = [m for m in METHODS if m in wanted]
    codes, cdomain = coded(records, domain) if peers else (None, None)
    have = {key(r): r for r in cached}
    out = []
    with contextlib.ExitStack() as stack:
        prog = progress if isinstance(progress, _progress.Progress) else stack.enter_context(
            _progress.Progress("synth", enabled=bool(progress)))
        todo = [(e, m, t) for m in methods for e in cfg.epsilons
                for t in range(cfg.peer_trials if m.startswith("OpenDP") else cfg.trials)]
        prog.stage("runs", total=len(todo))
        for e, m, t in todo:
            if (dataset, float(e), m, t) in have:
                out.append(have[(dataset, float(e), m, t)])
                prog.step(f"ε = {e}, {m}, trial {t + 1} (cached)")
                continue
            prog.step(f"ε = {e}, {m}, trial {t + 1}")
            if m.startswith("mmopt"):
                out.append(_ours(records, domain, workload, cfg, float(e), m, t))
            else:
                out.append(_peer(peers, codes, cdomain, workload, cfg, float(e), m, t))
            out[-1] = {"dataset": dataset, **out[-1]}
            if each is not None:
                each(out[-1])
    return sorted(out, key=_order)


def _order(r: dict):
    return (str(r.get("dataset", "")), r["epsilon"], METHODS.index(r["method"]), r["trial"])


def summary(rows: list[dict]) -> list[dict]:
    """Mean (± standard error) of each (dataset, ε, method) over its trials."""
    out = []
    for (ds, e, m) in dict.fromkeys((r.get("dataset", ""), r["epsilon"], r["method"]) for r in rows):
        mine = [r for r in rows if r.get("dataset", "") == ds and r["epsilon"] == e and r["method"] == m]
        row = {"dataset": ds, "epsilon": e, "method": m, "trials": len(mine)}
        for key in ("records_error", "sampled_error", "model_error", "cpu_seconds", "peak_mb"):
            vals = np.array([r.get(key, "") for r in mine if r.get(key, "") not in ("", None)], dtype=float)
            row[key] = float(vals.mean()) if vals.size else math.nan
            row[key + "_se"] = float(vals.std(ddof=1) / math.sqrt(vals.size)) if vals.size > 1 else math.nan
        out.append(row)
    return out


def plot(rows: list[dict], out: Path) -> Path:
    """Per dataset: workload error (model, solid; rows, dashed) against ε per method (± 2 se), and CPU seconds;
    log axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summ = summary(rows)
    sets = list(dict.fromkeys(r["dataset"] for r in summ))
    fig, axes = plt.subplots(len(sets), 2, figsize=(10, 4 * len(sets)), squeeze=False)
    for row, ds in zip(axes, sets, strict=True):
        mine_ds = [r for r in summ if r["dataset"] == ds]
        for m in dict.fromkeys(r["method"] for r in mine_ds):
            k = METHODS.index(m)  # one colour per method on every panel (by order of appearance, tree15's differed)
            mine = [r for r in mine_ds if r["method"] == m]
            e = [r["epsilon"] for r in mine]
            for key, style in (("model_error", "-"), ("records_error", "--")):
                y = [r[key] for r in mine]
                if all(math.isnan(v) for v in y):
                    continue
                se = [0.0 if math.isnan(r[key + "_se"]) else 2 * r[key + "_se"] for r in mine]
                row[0].errorbar(e, y, yerr=se, marker="o", color=f"C{k}", ls=style, capsize=3,
                                label=f"{m} ({'model' if key == 'model_error' else 'rows'})")
            row[1].plot(e, [r["cpu_seconds"] for r in mine], marker="o", color=f"C{k}", label=m)
        for ax, label in zip(row, ("workload error (avg L1, 3-way marginals)", "CPU seconds"), strict=True):
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("ε (δ = 1e-9)")
            ax.set_ylabel(label)
            ax.set_title(str(ds), fontsize=9)
            ax.grid(True, which="both", alpha=0.25)
            ax.legend(fontsize=6)
    fig.suptitle("Synthetic rows from MST and AIM: mmopt and OpenDP (mean ± 2 se over trials)", fontsize=10)
    fig.tight_layout()
    return _common.save_png(fig, Path(out) / "synth.png", dpi=110)


def markdown(rows: list[dict]) -> str:
    lines = ["# Synthetic records (generated by `python -m experiments.synth`)", "",
             "Workload: all three-way marginals (CPS 1988: 28,155 records, 7 attributes, 35 marginals; RAND HIE: "
             "20,190 records, 10 attributes, 120 marginals; tree15, a known network of mmopt's own: 20,000 records, "
             "15 attributes, 455 marginals); error = average L1 distance of the normalised marginals "
             "(rows: as many synthetic rows as records, OpenDP's by its default synthesize(method='round'), "
             "'sampled' by method='sample'; model: each model's own marginals). Mean ± standard error over the "
             "trials; CPU seconds of the whole call; peak MB: tracemalloc peak for mmopt, process RSS for OpenDP.",
             "",
             "| dataset | ε | method | trials | error (model) | error (rows) | error (rows, sampled) | CPU s "
             "| peak MB |",
             "|---|---|---|---|---|---|---|---|---|"]

    def pm(v, se):
        return "" if math.isnan(v) else (f"{v:.4f}" if math.isnan(se) else f"{v:.4f} ± {se:.4f}")
    for r in summary(rows):
        lines.append(f"| {r['dataset']} | {r['epsilon']:g} | {r['method']} | {r['trials']} | "
                     f"{pm(r['model_error'], r['model_error_se'])} | "
                     f"{pm(r['records_error'], r['records_error_se'])} | "
                     f"{pm(r['sampled_error'], r['sampled_error_se'])} | {r['cpu_seconds']:.3g} | "
                     f"{'' if math.isnan(r['peak_mb']) else format(r['peak_mb'], '.0f')} |")
    lines += _synth_compare.comparison_markdown(summary(rows))
    lines += ["", "OpenDP's MST scores an edge by numpy's matrix 1-norm of its 2-way error table (the largest column "
              "sum, not the paper's sum over the cells); where its model error is lower than mmopt's MST (CPS 1988, "
              "ε = 10) the trees differ in one edge chosen by that score in a near-tie (mmopt.synth.mst's "
              "docstring)."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.synth",
                                description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--full", action="store_true", help="20 trials of mmopt's methods per ε (quick: 3)")
    p.add_argument("--trials", type=int, default=None, metavar="K", help="K trials of mmopt's methods per ε "
                   "(overrides --full)")
    p.add_argument("--peers", default=None, metavar="PYTHON",
                   help="an interpreter with opendp[mbi] installed: also run OpenDP's MST and AIM")
    p.add_argument("--peer-trials", type=int, default=1, metavar="K", help="runs of each peer per ε (default 1)")
    p.add_argument("--methods", default=None, metavar="M,M", help=f"a subset of {', '.join(METHODS)} (default: "
                   "mmopt's, and OpenDP's with --peers)")
    p.add_argument("--datasets", default="cps1988", metavar="D,D",
                   help=f"a subset of {', '.join(DATASETS)} (default cps1988; randhie needs statsmodels)")
    p.add_argument("--epsilons", default=None, metavar="E,E", help="the ε values (default 0.1,1,10)")
    p.add_argument("--cache", default=None, metavar="CSV",
                   help="trials found in this CSV (same columns as synth.csv) are not run again, and every new "
                   "trial is added to it as it is done: partial or split runs accumulate")
    p.add_argument("--from-csv", nargs="+", default=None, metavar="CSV",
                   help="no runs: merge these synth.csv files (e.g. of runs split by method) into the outputs")
    _common.add_output_args(p, "synth")
    p.add_argument("--seed", type=int, default=0, help="seed of mmopt's runs (default 0)")
    args = p.parse_args(argv)
    if args.seed < 0 or args.peer_trials < 1 or (args.trials is not None and args.trials < 1):
        p.error(f"--seed must be >= 0, --peer-trials and --trials >= 1. Got {args.seed}, {args.peer_trials} and "
                f"{args.trials}.")
    if args.peers is not None and not Path(args.peers).is_file():
        p.error(f"--peers must be a Python interpreter. Got {args.peers!r}, which is not a file.")
    methods = None if args.methods is None else [m.strip() for m in args.methods.split(",")]
    if methods is not None and not set(methods) <= set(METHODS):
        p.error(f"--methods must be a subset of {', '.join(METHODS)}. Got {args.methods!r}.")
    datasets = [d.strip() for d in args.datasets.split(",")]
    if not set(datasets) <= set(DATASETS):
        p.error(f"--datasets must be a subset of {', '.join(DATASETS)}. Got {args.datasets!r}.")
    try:
        eps = QUICK.epsilons if args.epsilons is None else tuple(float(e) for e in args.epsilons.split(","))
    except ValueError:
        p.error(f"--epsilons must be numbers separated by commas. Got {args.epsilons!r}.")
    if not all(math.isfinite(e) and e > 0 for e in eps):  # 0, -1, nan, 1e400 crashed (after the first ε's trials)
        p.error(f"--epsilons must be finite numbers > 0. Got {args.epsilons!r}.")
    for f in args.from_csv or ():  # a missing file ended in a FileNotFoundError traceback
        if not Path(f).is_file():
            p.error(f"--from-csv must name existing CSV files. Got {f!r}, which is not a file.")
    if args.cache and not Path(args.cache).parent.is_dir():  # a new cache file is fine; its folder must exist
        p.error(f"--cache's folder must exist. Got {args.cache!r}.")
    cfg = Config(**{**asdict(FULL if args.full else QUICK), "seed": args.seed, "peer_trials": args.peer_trials,
                    "epsilons": eps, **({} if args.trials is None else {"trials": args.trials})})
    try:
        out = _run.check_out_dir(_common.out_of(args, "synth"))
    except ValueError as exc:
        p.error(str(exc))
    try:
        with _run.hold(out), _progress.Progress("synth", enabled=not args.quiet) as prog:
            t0 = time.perf_counter()
            if args.from_csv:
                rows = sorted((r for f in args.from_csv
                               for r in _common.read_csv(Path(f), keep_text=("method", "dataset"))), key=_order)
            else:
                # every row as it is done: a long run cut short keeps its rows (in the cache, for the next run)
                part = Path(args.cache) if args.cache else out / "synth.partial.csv"
                done: list = (_common.read_complete_rows(part, COLUMNS)[0]
                              if args.cache and part.is_file() else [])
                cached = [{**r, "dataset": str(r["dataset"]), "method": str(r["method"])} for r in done]
                rows = []
                for ds in datasets:
                    rows += run(cfg=cfg, peers=args.peers, methods=methods, progress=prog, dataset=ds,
                                cached=cached,
                                each=lambda r: (done.append(r), _common.write_csv(part, COLUMNS, done)))
                if not args.cache:
                    part.unlink(missing_ok=True)
            prog.stage("writing synth.csv, synth.png, synth.md")
            _common.write_csv(out / TABLE, COLUMNS, rows)
            plot(rows, out)
            _run.write_text(out / "synth.md", markdown(rows))
            _run.write_json(out / "synth.run_info.json", {"seconds": round(time.perf_counter() - t0, 1),
                                                         "config": asdict(cfg), "peers": args.peers,
                                                         "machine": _run.machine()})
            prog.done(f"wrote synth.csv, synth.png and synth.md into {out}")
    except _run.Busy as exc:
        print(f"python -m experiments.synth: {exc}", file=sys.stderr)
        return 2
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
