"""Reproduce §6 of Li et al. (PODS 2010): strategies for range, prefix and predicate queries.

Run:   python -m experiments.range_queries            (= --quick: 70–125 s measured on 2 cores at load average 4.5–8)
       python -m experiments.range_queries --full     (min_error to n = 1024, min_sensitivity to 8:
                                                       about 9 minutes on 2 shared cores, measured)
Out:   results/range_queries/ (not tracked by git; --out DIR elsewhere, --paper-figures into the tracked
       paper_figures/): range_queries.csv (the §6 table) and range_queries.params.json (the parameters that
       produced it), theorem_checks.csv, the figures (PNG + the CSV behind each) and README.md, generated
       from those rows. run_info.json (timings, machine) is never tracked.
Talks: a line per stage and per row on stderr (a bar on a terminal), at least one every 10 s; --quiet: none.

Strategies, for n = 2ᵏ and each workload (all ranges, prefix, all predicates), ε = 1, Laplace:
identity, H2, H_best (branching in {2,3,4,8,16} with least total error), wavelet (Y), svd_strategy
(Thm 5.25), l2_approx (Program 5.2's optimum, its factor evaluated under ε-DP, i.e. L1),
l2_approx+minsens (that factor after min_sensitivity, Program 5.3) and min_error (Program 5.1 /
local search). Every row has the ratio of its mean squared error to the SVD lower bound.

Runs on one folder are serialised by a lock file. --resume keeps only rows computed with the same ε
(else it refuses, exit code 2) and recomputes min_error rows whose engine the new limits switch. Every
argument is checked before any work.
"""

from __future__ import annotations

import contextlib
import math
import re
import sys
import time
import warnings

import mmopt
from experiments import _cli, _common, _helpers, _progress, _run, geometry, profiles, report, theorem_checks
from experiments._helpers import FULL, QUICK, Config, min_error_engine  # noqa: F401 — the public names
from mmopt import strategy as st

STRATEGIES = ("identity", "H2", "H_best", "wavelet", "svd_strategy", "l2_approx", "l2_approx+minsens", "min_error")
# No per-row seconds: the CSV is tracked and must change only when results do (timings: run_info.json).
COLUMNS = ["n", "workload", "strategy", "branching", "solver", "status", "epsilon", "m", "sensitivity",
           "total_squared_error", "log10_total", "mean_squared_error", "rmse", "max_variance", "max_variance_exact",
           "svd_bound_mean", "svd_ratio", "note"]
KEY = ("n", "workload", "strategy")
TABLE = "range_queries.csv"
_ROUNDOFF = re.compile(r"[-+]?\d+(?:\.\d+)?e[-+]?\d+")


def tasks(cfg: Config, workloads=tuple(_helpers.WORKLOADS)) -> list[tuple[int, str, str]]:
    out = []
    for n in cfg.sizes:
        for w in workloads:
            for s in STRATEGIES:
                if (s == "min_error" and n > cfg.min_error_max) or (s == "l2_approx+minsens" and n > cfg.minsens_max):
                    continue
                out.append((n, w, s))
    return out


def _note(message: str) -> str:
    """The optimiser's message with round-off-level numbers (e.g. a duality gap of 6e-13) shown as "< 1e-12":
    their digits differ between runs on other BLAS builds and would make the tracked CSV churn."""
    return _ROUNDOFF.sub(lambda m: m.group() if abs(float(m.group())) >= 1e-12 else "< 1e-12", message)[:200]


def row(n: int, wname: str, sname: str, cfg: Config) -> dict:
    """Evaluate one strategy on one workload: a dict with COLUMNS and "seconds" (failures give a row with a status)."""
    W, privacy = _helpers.workload(wname, n), mmopt.Privacy(cfg.epsilon)
    out = {"n": n, "workload": wname, "strategy": sname, "branching": "", "solver": "", "status": "closed_form",
           "epsilon": cfg.epsilon, "note": ""}
    t0 = time.perf_counter()
    if sname in ("identity", "H2", "wavelet"):
        A = _helpers.closed_form(sname, n)
    elif sname == "H_best":
        b = _helpers.best_branching(wname, n)
        A, out["branching"] = _helpers.closed_form(f"H{b}", n), b
    elif sname == "svd_strategy":
        A = st.svd_strategy(W)
    else:
        if sname == "min_error":
            run_ = _helpers.optimise("min_error", wname, n, engine=min_error_engine(n, cfg))
        elif sname == "l2_approx":
            run_ = _helpers.optimise("l2_approx", wname, n, engine="fast")
        else:
            run_ = _helpers.optimise("min_sensitivity", wname, n, initial="l2_approx")
        out.update(status=run_.status, note=_note(run_.message))
        if run_.result is None:
            return out | {"seconds": run_.seconds}
        A, out["solver"] = run_.result.strategy, run_.result.solver or ""
        t0 = time.perf_counter() - run_.seconds  # optimiser time (cached runs keep their own) + evaluation
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # totals beyond float64 (predicates): inf, by design
        # norm stated: the L2 methods' strategies are compared under ε-DP on purpose (the paper's figures)
        r = mmopt.evaluate(W, A, privacy, norm=privacy.sensitivity_norm, per_query=False)
    bound = mmopt.svd_bound(W, privacy, per_query=True)
    m = r.n_queries  # ErrorReport.to_row() overflows on 2^1024 queries, so the fields are read directly
    return out | {k: getattr(r, k) for k in ("sensitivity", "total_squared_error", "log10_total",
                                             "mean_squared_error", "rmse", "max_variance", "max_variance_exact")} | {
        "m": m if m < 2**53 else f"~1e{math.log10(m):.2f}",
        "svd_bound_mean": bound, "svd_ratio": r.mean_squared_error / bound, "seconds": time.perf_counter() - t0}


def run(cfg: Config = QUICK, *, workloads=tuple(_helpers.WORKLOADS), skip=lambda **key: False, on_row=None,
        progress: bool | _progress.Progress = True, n_jobs: int | None = None) -> list[dict]:
    """All rows of the §6 table (pure apart from the ``on_row`` callback and the progress lines on stderr).

    ``progress``: True writes a line per row (a bar on a terminal) and at least one every 10 s, False nothing;
    a :class:`experiments._progress.Progress` reports into that run's lines. ``n_jobs`` rows are computed at
    once by joblib (None or 1: one after the other; -1: every core). Rows come back, and reach ``on_row``, in
    task order, and every optimiser row is seeded, so the rows are the same whatever ``n_jobs`` (their
    "seconds" aside). Worker processes do not share the optimiser cache of :func:`experiments._helpers.optimise`,
    so later steps in this process recompute the runs they reuse.
    """
    import joblib

    if n_jobs is not None and (isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0):
        raise ValueError(f"The 'n_jobs' parameter of experiments.range_queries.run must be None or a non-zero "
                         f"integer (joblib's convention: -1 is every core). Got {n_jobs!r} instead.")
    todo = [t for t in tasks(cfg, workloads) if not skip(n=t[0], workload=t[1], strategy=t[2])]
    with contextlib.ExitStack() as stack:
        prog = progress if isinstance(progress, _progress.Progress) else stack.enter_context(
            _progress.Progress("range_queries", enabled=bool(progress)))
        prog.stage("§6 table", total=len(todo))
        # return_as="generator" yields in submission order as results arrive; n_jobs=1 runs in this process.
        done = joblib.Parallel(n_jobs=n_jobs, return_as="generator")(joblib.delayed(row)(*t, cfg) for t in todo)
        rows = []
        for r in prog.track(done, [f"n={n} {w} {s}" for n, w, s in todo]):
            rows.append(r)
            if on_row:
                on_row(r)
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


def plot(rows: list[dict], out, epsilon: float = 1.0) -> list:
    """total_vs_n.png (all ranges, prefix: total error vs n with the SVD bound) and ratio_to_svd.png."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mmopt import plot as mplot

    styles = dict(zip(STRATEGIES, ["o-", "s-", "D--", "^-", "v:", "P-", "X--", "*-"], strict=True))
    labels = {s: _helpers.label(s) for s in STRATEGIES}
    order = {s: k for k, s in enumerate(STRATEGIES)}  # legend order, whichever strategy's first row comes first

    def points(w: str, key: str) -> list[dict]:
        """mmopt.plot.compare's rows for workload w, in legend order; totals carry the SVD bound on the total."""
        pts = []
        for r in rows:
            if r["workload"] != w or not isinstance(r.get("log10_total"), float):
                continue  # a failed optimiser's row
            p = {"n": r["n"], "strategy": r["strategy"]}
            if key == "total_squared_error":
                if not isinstance(r["m"], int):  # m beyond 2⁵³ is written as "~1e…": no bound from it
                    continue
                p |= {key: 10 ** r["log10_total"], "lower_bound": r["svd_bound_mean"] * r["m"]}
            else:
                p[key] = r[key]
            if math.isfinite(p[key]):
                pts.append(p)
        return sorted(pts, key=lambda p: order[p["strategy"]])

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), constrained_layout=True)
    for ax, w in zip(axes, ("all_range", "prefix"), strict=True):
        if pts := points(w, "total_squared_error"):
            mplot.compare(rows=pts, metric="total_squared_error", styles=styles, labels=labels,
                          legend=ax is axes[0], ax=ax)
        ax.set(ylabel=f"total expected squared error (ε = {epsilon:g})", title=f"{w}: total error vs n")
    made = [_common.save_png(fig, out / "total_vs_n.png", dpi=120)]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6), constrained_layout=True, sharey=True)
    for ax, w in zip(axes, _helpers.WORKLOADS, strict=True):
        if pts := points(w, "svd_ratio"):
            mplot.compare(rows=pts, metric="svd_ratio", lower_bound=False, styles=styles, labels=labels,
                          legend=ax is axes[0], ax=ax)
        ax.axhline(1.0, color="k", lw=1)
        ax.set(title=f"{w}: error / SVD lower bound",
               ylabel="mean squared error ÷ SVD bound (≥ 1)" if ax is axes[0] else "")
    return made + [_common.save_png(fig, out / "ratio_to_svd.png", dpi=120)]


def compute_table(cfg: Config, out, kept: list[dict], progress: bool | _progress.Progress,
                  n_jobs: int | None = None) -> tuple[list[dict], dict]:
    """Write range_queries.csv: the ``kept`` rows (--resume), then each missing row as it finishes; finally
    the whole table again in task order, so that a resumed run gives the same file as an uninterrupted one."""
    writer = _common.RowWriter(out / TABLE, COLUMNS, kept)
    have = {tuple(r[k] for k in KEY) for r in kept}
    run(cfg, skip=lambda **key: tuple(key[k] for k in KEY) in have, on_row=writer.write, progress=progress,
        n_jobs=n_jobs)
    by_key = {tuple(r[k] for k in KEY): r for r in writer.rows}
    _common.write_csv(out / TABLE, COLUMNS, [by_key[t] for t in tasks(cfg)])
    seconds = {" ".join(map(str, k)): round(r["seconds"], 3) for k, r in by_key.items() if "seconds" in r}
    return _common.read_complete_rows(out / TABLE, COLUMNS)[0], seconds


def main(argv=None) -> int:
    parser = _cli.parser(__doc__)
    args = parser.parse_args(argv)
    cfg, out = _cli.validate(parser, args)
    t0 = time.perf_counter()
    try:
        with _run.hold(out), _progress.Progress("range_queries", enabled=not args.quiet) as prog:
            return _main(parser, args, cfg, out, argv, t0, prog)
    except _run.Busy as e:
        parser.error(str(e))


def _main(parser, args, cfg: Config, out, argv, t0: float, prog: _progress.Progress) -> int:
    params = _cli.params_of(cfg, args.full)
    info: dict = {"command": " ".join(["python -m experiments.range_queries", *(sys.argv[1:] if argv is None
                                                                                else argv)]), "params": params}
    if args.from_csv:
        prog.stage(f"reading the CSVs in {out}")
        params = _run.read_json(out / _cli.PARAMS)
        rows = _common.read_complete_rows(out / TABLE, COLUMNS)[0]
        checks = theorem_checks.load(out)
    else:
        kept = _cli.resume_rows(parser, out, params, tasks(cfg), COLUMNS, KEY) if args.resume else []
        _run.write_json(out / _cli.PARAMS, params)
        rows, info["row_seconds"] = compute_table(cfg, out, kept, prog, args.jobs)
        info["jobs"] = args.jobs
        info["rows_kept_from_earlier_run"] = len(kept)
        info["table_seconds"] = round(time.perf_counter() - t0, 1)
        if not args.table_only:
            prog.stage("paper-vs-reproduction checks")
            theorem_checks.save(theorem_checks.run(_cli.checks_max_n(cfg)), out)
            checks = theorem_checks.load(out)  # as written, so that --from-csv later renders the same README
            prog.stage("Thm 6.30 constants")
            theorem_checks.save_constants(theorem_checks.fit_constants(theorem_checks.constant_sizes()), out)
            prog.stage("error profiles (n = 16) and per-range errors (n = 64)")
            profiles.save(profiles.run(cfg), out)
            prog.stage("ellipses and min_error's convex iteration")
            geometry.save(geometry.run(cfg), out)
    print(tables(rows))
    files = []
    if not args.table_only:
        prog.stage("figures and README.md")
        files = plot(rows, out, params["epsilon"]) + theorem_checks.plot(out) + profiles.plot(out) + geometry.plot(out)
        print("\n" + theorem_checks.format_checks(checks))
        report.write(out, rows, checks, params)
    seconds = time.perf_counter() - t0
    if not args.from_csv:
        _run.write_run_info(out, info | {"seconds": round(seconds, 1)})
    what = "the table" if args.table_only else f"{len(files)} figures, their CSVs and README.md"
    prog.done(f"wrote {what} into {out}")
    print(f"\nwrote {what} into {out} in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
