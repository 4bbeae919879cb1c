"""Reproduce §6 of Li et al. (PODS 2010): strategies for range, prefix and predicate queries.

Run:   python -m experiments.range_queries            (= --quick: under 2 minutes on 2 cores)
       python -m experiments.range_queries --full     (min_error to n = 1024, min_sensitivity to 8:
                                                       about 9 minutes on 2 shared cores, measured)
Out:   paper_figures/ (or --out DIR): range_queries.csv (the §6 table), theorem_checks.csv,
       the figures (PNG + the CSV behind each) and README.md, generated from those rows.

Strategies, for n = 2ᵏ and each workload (all ranges, prefix, all predicates), ε = 1, Laplace:
identity, H2, H_best (branching in {2,3,4,8,16} with least total error), wavelet (Y), svd_bound
(Thm 5.25), l2_approx (Program 5.2's optimum, its factor evaluated under ε-DP, i.e. L1),
l2_approx+minsens (that factor after min_sensitivity, Program 5.3) and min_error (Program 5.1 /
local search). Every row has the ratio of its mean squared error to the SVD lower bound.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from dataclasses import dataclass

import mmopt
from experiments import _common, _helpers, geometry, profiles, report, theorem_checks
from mmopt import strategy as st

STRATEGIES = ("identity", "H2", "H_best", "wavelet", "svd_bound", "l2_approx", "l2_approx+minsens", "min_error")
COLUMNS = ["n", "workload", "strategy", "branching", "solver", "status", "epsilon", "m", "sensitivity",
           "total_squared_error", "log10_total", "mean_squared_error", "rmse", "max_variance", "max_variance_exact",
           "svd_bound_mean", "svd_ratio", "seconds", "note"]
KEY = ("n", "workload", "strategy")
SIZES = (4, 8, 16, 32, 64, 128, 256, 512, 1024)


@dataclass(frozen=True)
class Config:
    """How far each optimiser goes. quick: the default; full: --full."""

    sizes: tuple[int, ...] = SIZES
    min_error_max: int = 256      # largest n for min_error
    sdp_max: int = 8              # min_error uses the convex-iteration SDP up to here, local search above
    minsens_max: int = 4          # largest n for min_sensitivity (Program 5.3; ~20 s per workload at n = 8)
    epsilon: float = 1.0


QUICK = Config()
# Measured on 2 shared cores: min_sensitivity on the (dense) l2_approx factor takes 4–5 s per workload at n = 8;
# at n = 16, ~35 s on all ranges but over 20 minutes on prefix, so --full stops it at 8. min_error's local
# search takes ~7 s per workload at n = 256, ~35 s at 512 and ~160 s at 1024, so --full runs it to 1024.
FULL = Config(min_error_max=1024, sdp_max=16, minsens_max=8)


def min_error_engine(n: int, cfg: Config) -> str:
    return "sdp" if n <= cfg.sdp_max else "local"


def tasks(cfg: Config, workloads=tuple(_helpers.WORKLOADS)) -> list[tuple[int, str, str]]:
    out = []
    for n in cfg.sizes:
        for w in workloads:
            for s in STRATEGIES:
                if (s == "min_error" and n > cfg.min_error_max) or (s == "l2_approx+minsens" and n > cfg.minsens_max):
                    continue
                out.append((n, w, s))
    return out


def row(n: int, wname: str, sname: str, cfg: Config) -> dict:
    """Evaluate one strategy on one workload: a dict with COLUMNS (failures give a row with a status)."""
    W, privacy = _helpers.workload(wname, n), mmopt.Privacy(cfg.epsilon)
    out = {"n": n, "workload": wname, "strategy": sname, "branching": "", "solver": "", "status": "closed_form",
           "epsilon": cfg.epsilon, "note": ""}
    t0 = time.perf_counter()
    if sname in ("identity", "H2", "wavelet"):
        A = _helpers.closed_form(sname, n)
    elif sname == "H_best":
        b = _helpers.best_branching(wname, n)
        A, out["branching"] = _helpers.closed_form(f"H{b}", n), b
    elif sname == "svd_bound":
        A = st.singular_value_bound(W)
    else:
        if sname == "min_error":
            run_ = _helpers.optimise("min_error", wname, n, engine=min_error_engine(n, cfg))
        elif sname == "l2_approx":
            run_ = _helpers.optimise("l2_approx", wname, n, engine="fast")
        else:
            run_ = _helpers.optimise("min_sensitivity", wname, n, initial="l2_approx")
        out.update(status=run_.status, note=run_.message[:200])
        if run_.result is None:
            return out | {"seconds": run_.seconds}
        A, out["solver"] = run_.result.strategy, run_.result.solver or ""
        t0 = time.perf_counter() - run_.seconds  # optimiser time (cached runs keep their own) + evaluation
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # totals beyond float64 (predicates): inf, by design
        r = mmopt.evaluate(W, A, privacy, per_query=False)
    bound = mmopt.svd_bound(W, privacy, per_query=True)
    m = r.n_queries  # ErrorReport.to_row() overflows on 2^1024 queries, so the fields are read directly
    return out | {k: getattr(r, k) for k in ("sensitivity", "total_squared_error", "log10_total",
                                             "mean_squared_error", "rmse", "max_variance", "max_variance_exact")} | {
        "m": m if m < 2**53 else f"~1e{math.log10(m):.2f}",
        "svd_bound_mean": bound, "svd_ratio": r.mean_squared_error / bound, "seconds": time.perf_counter() - t0}


def run(cfg: Config = QUICK, *, workloads=tuple(_helpers.WORKLOADS), skip=lambda **key: False, on_row=None,
        progress: bool = True) -> list[dict]:
    """All rows of the §6 table (pure apart from the ``on_row`` callback), with a progress bar on a TTY."""
    from tqdm import tqdm

    todo = [t for t in tasks(cfg, workloads) if not skip(n=t[0], workload=t[1], strategy=t[2])]
    rows = []
    bar = tqdm(todo, desc="§6 table", unit="row", file=sys.stderr, disable=not (progress and sys.stderr.isatty()))
    for n, w, s in bar:
        bar.set_postfix_str(f"n={n} {w} {s}")
        rows.append(row(n, w, s, cfg))
        if on_row:
            on_row(rows[-1])
    return rows


def tables(rows: list[dict]) -> str:
    """Per workload: RMSE (ratio to the SVD bound) and the max single-query error, n × strategy."""
    out = []
    for w in _helpers.WORKLOADS:
        sub = [r for r in rows if r["workload"] == w]
        cols = [s for s in STRATEGIES if any(r["strategy"] == s for r in sub)]
        for title, fmt in (("RMSE (ratio of mean squared error to the SVD bound)", _rmse_cell),
                           ("max single-query error (≥: attained, exact maximum unknown)", _max_cell)):
            piv = [{"n": n} | {s: fmt(r) for r in sub if r["n"] == n for s in [r["strategy"]]}
                   for n in sorted({r["n"] for r in sub})]
            out += [f"\n{w}, ε = {sub[0]['epsilon'] if sub else ''}: {title}", _common.format_table(piv, ["n", *cols])]
    return "\n".join(out)


def _num(x) -> str:
    return f"{x:.4g}" if isinstance(x, int | float) and math.isfinite(x) else str(x or "—")


def _max_cell(r: dict) -> str:
    exact = r.get("max_variance_exact") in (True, "True")
    return ("" if exact or not isinstance(r.get("max_variance"), float) else "≥") + _num(r.get("max_variance"))


def _rmse_cell(r: dict) -> str:
    if not isinstance(r.get("rmse"), int | float):
        return r.get("status", "")
    b = f"[H{r['branching']}]" if r.get("branching") != "" else ""
    return f"{r['rmse']:.4g} ({r['svd_ratio']:.2f}){b}"


def plot(rows: list[dict], out) -> list:
    """total_vs_n.png (all ranges, prefix: total error vs n with the SVD bound) and ratio_to_svd.png."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    styles = dict(zip(STRATEGIES, ["o-", "s-", "D--", "^-", "v:", "P-", "X--", "*-"], strict=True))
    made = []
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), constrained_layout=True)
    for ax, w in zip(axes, ("all_range", "prefix"), strict=True):
        sub = [r for r in rows if r["workload"] == w and isinstance(r.get("log10_total"), float)]
        for s in STRATEGIES:
            pts = sorted((r["n"], 10 ** r["log10_total"]) for r in sub if r["strategy"] == s)
            if pts:
                ax.plot(*_helpers.xy(pts), styles[s], ms=4, label=_helpers.label(s))
        bound = sorted({(r["n"], r["svd_bound_mean"] * r["m"]) for r in sub if isinstance(r["m"], int)})
        ax.plot(*_helpers.xy(bound), "k--", lw=2.5, alpha=0.6, label="SVD lower bound")
        ax.set(xscale="log", yscale="log", xlabel="domain size n", ylabel="total expected squared error (ε = 1)",
               title=f"{w}: total error vs n")
        ax.set_xscale("log", base=2)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.savefig(out / "total_vs_n.png", dpi=120)
    made.append(out / "total_vs_n.png")
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6), constrained_layout=True, sharey=True)
    for ax, w in zip(axes, _helpers.WORKLOADS, strict=True):
        sub = [r for r in rows if r["workload"] == w and isinstance(r.get("svd_ratio"), float)]
        for s in STRATEGIES:
            pts = sorted((r["n"], r["svd_ratio"]) for r in sub if r["strategy"] == s)
            if pts:
                ax.plot(*_helpers.xy(pts), styles[s], ms=4, label=_helpers.label(s))
        ax.axhline(1.0, color="k", lw=1)
        ax.set(yscale="log", xlabel="domain size n", title=f"{w}: error / SVD lower bound")
        ax.set_xscale("log", base=2)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("mean squared error ÷ SVD bound (≥ 1)")
    axes[0].legend(fontsize=8)
    fig.savefig(out / "ratio_to_svd.png", dpi=120)
    plt.close("all")
    return made + [out / "ratio_to_svd.png"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="the default: n = 4…1024 for closed forms and "
                      "l2_approx, min_error to n = 256, min_sensitivity at n = 4; under 2 minutes")
    size.add_argument("--full", action="store_true", help="min_error to n = 1024 (SDP to 16), min_sensitivity "
                      "to 8; took 8.5 minutes on 2 shared cores")
    parser.add_argument("--sizes", type=int, nargs="+", help="explicit domain sizes (powers of two)")
    parser.add_argument("--min-error-max", type=int, help="largest n for min_error (quick 256, full 1024)")
    parser.add_argument("--min-sensitivity-max", type=int, help="largest n for min_sensitivity (quick 4, full 8)")
    parser.add_argument("--epsilon", type=float, default=1.0, help="ε (default 1.0; Laplace noise)")
    parser.add_argument("--out", default=None, help="output folder (default paper_figures/)")
    parser.add_argument("--resume", action="store_true", help="keep rows already in range_queries.csv, skip them")
    parser.add_argument("--from-csv", action="store_true", help="re-plot and rewrite README from the CSVs only")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    cfg = FULL if args.full else QUICK
    pick = lambda x, default: default if x is None else x  # noqa: E731
    cfg = Config(tuple(args.sizes or cfg.sizes), pick(args.min_error_max, cfg.min_error_max), cfg.sdp_max,
                 pick(args.min_sensitivity_max, cfg.minsens_max), args.epsilon)
    out = _common.out_dir(args.out)
    t0 = time.perf_counter()
    mode = ("full" if args.full else "quick") + (" with custom sizes" if args.sizes else "")
    if args.from_csv:
        rows = _common.read_csv(out / "range_queries.csv")
        checks = theorem_checks.load(out)
        info = _common.read_csv(out / "run_info.csv")[0]
    else:
        writer = _common.RowWriter(out / "range_queries.csv", COLUMNS, resume=args.resume, key=KEY)
        run(cfg, skip=writer.done, on_row=writer.write, progress=not args.no_progress)
        rows = writer.rows
        info = {"command": " ".join(["python -m experiments.range_queries", *(argv or sys.argv[1:])]), "mode": mode,
                "sizes": " ".join(map(str, cfg.sizes)), "min_error_max": cfg.min_error_max, "sdp_max": cfg.sdp_max,
                "minsens_max": cfg.minsens_max, "epsilon": cfg.epsilon}
        checks = theorem_checks.run(max(s for s in cfg.sizes if s <= 256), progress=not args.no_progress)
        theorem_checks.save(checks, out)
        theorem_checks.save_constants(theorem_checks.fit_constants([s for s in cfg.sizes if s >= 32]), out)
        profiles.save(profiles.run(cfg), out)
        geometry.save(geometry.run(cfg), out)
    files = plot(rows, out) + theorem_checks.plot(out) + profiles.plot(out) + geometry.plot(out)
    print(tables(rows))
    print("\n" + theorem_checks.format_checks(checks))
    seconds = time.perf_counter() - t0
    if not args.from_csv:
        info["seconds"] = round(seconds, 1)
        _common.RowWriter(out / "run_info.csv", list(info)).write(info)
    readme = report.write(out, rows, checks, info, from_csv=args.from_csv)
    print(f"\nwrote {len(files)} figures, their CSVs and {readme} into {out} in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
