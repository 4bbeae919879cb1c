"""Overlapping group-bys: independent noise per grouping set (what OpenDP, Tumult and SmartNoise do) against least
squares on those measurements and against mmopt's optimised strategy, computed exactly (no simulation).

Run:   python -m experiments.groupby [--full] [--out DIR | --paper-figures] [--quiet]
Out:   DIR/groupby.csv (one row per workload), DIR/groupby.md (the table, as ratios), DIR/groupby.png (the three
       totals relative to the lower bound), DIR/groupby.run_info.json (CPU seconds, machine: untracked); DIR
       defaults to results/groupby/ in the repository (it was results/ under the current folder), or
       paper_figures/ with --paper-figures.

Workloads (all under Gaussian noise, the ratios hold at every (ε, δ): every total scales with the same
``Privacy.variance_factor``):
* the toy ROLLUP of the issue: nation ⊃ 4 states ⊃ 16 counties, with and without an attribute of 5 values;
* ROLLUP(state, county) × CUBE(sex, age group) (12 grouping sets) on a synthetic census-like geography of 51
  states and 3,143 counties (:func:`mmopt.hierarchy.synthetic.census_like`, seed 0: skewed sizes, 1 to ~600
  counties per state), 2 sexes, 10 age groups; with ``--full`` also ROLLUP(state, county, tract) on 73,000
  tracts;
* the shipped CPS 1988 table's attributes (:func:`mmopt.records.cps1988`): ROLLUP(region, smsa) × CUBE(ethnicity,
  parttime) × (education) — flat attributes, where the family is ResidualPlanner's.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

from experiments import _common, _run

CMD = "python -m experiments.groupby"
# CPU seconds go to the untracked run_info.json: the tracked table holds what the code computes, not the machine
COLUMNS = ("workload", "cells", "queries", "sets", "independent", "least_squares", "mmopt", "lower_bound",
           "family", "status")


def workloads(full: bool = False) -> list[tuple[str, object]]:
    """(name, builder) pairs; builders return HierarchyWorkload objects."""
    from mmopt.hierarchy import Hierarchy, cross, cube, grouping_sets, rollup
    from mmopt.hierarchy.synthetic import census_like

    def toy():
        geo = Hierarchy.balanced((4, 4), level_names=("nation", "state", "county"), name="geo")
        return grouping_sets([geo, Hierarchy.flat(5, name="attr")], cross(rollup("state", "county"),
                                                                          [("attr",), ()]), name="toy ROLLUP")

    def census(tracts=None):
        geo = census_like(51, 3_143, tracts, seed=0)
        levels = ("state", "county", "tract") if tracts else ("state", "county")
        return grouping_sets([geo, Hierarchy.flat(2, name="sex"), Hierarchy.flat(10, name="agegrp")],
                             cross(rollup(*levels), cube("sex", "agegrp")),
                             name=f"ROLLUP({', '.join(levels)}) × CUBE(sex, agegrp)")

    def cps():
        from mmopt.records.datasets import cps1988
        _, domain = cps1988()
        attrs = [Hierarchy.flat(a.size, name=a.name) for a in domain.attributes]
        return grouping_sets(attrs, cross(rollup("region", "smsa"), cube("ethnicity", "parttime"),
                                          [("education",), ()]), name="CPS 1988 grouping sets")

    out = [("toy", toy), ("counties", census), ("cps", cps)]
    if full:
        out.insert(2, ("tracts", lambda: census(73_000)))
    return out


def run(full: bool = False, say=print, timings: dict | None = None) -> list[dict]:
    """The rows of the table (pure: no files); each workload's CPU seconds into ``timings`` when given."""
    import mmopt
    from mmopt.hierarchy.baselines import independent_total, least_squares_total

    rows = []
    timings = {} if timings is None else timings
    for key, build in workloads(full):
        W = build()
        c0 = time.process_time()
        res = mmopt.optimize(W, privacy=mmopt.Privacy(1.0, 1e-9))
        seconds = time.process_time() - c0
        rows.append({"workload": W.name, "cells": W.domain_size, "queries": W.n_queries, "sets": len(W.sets),
                     "independent": independent_total(W), "least_squares": least_squares_total(W),
                     "mmopt": res.objective, "lower_bound": res.lower_bound, "family": res.extra["family"],
                     "status": res.status})
        timings[W.name] = round(seconds, 3)
        r = rows[-1]
        say(f"{key}: mmopt {r['mmopt'] / r['independent']:.3f}× independent, {r['mmopt'] / r['lower_bound']:.4f}× "
            f"the bound, {seconds:.1f} CPU s")
    return rows


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = [r["workload"] for r in rows]
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(8, 3.6))
    for j, (col, label) in enumerate([("independent", "independent per group-by"),
                                      ("least_squares", "least squares on those"), ("mmopt", "mmopt")]):
        ax.bar(x + (j - 1) * 0.27, [r[col] / r["lower_bound"] for r in rows], 0.27, label=label)
    ax.axhline(1.0, color="k", lw=0.8, ls="--")
    ax.set_xticks(x, [n if len(n) < 28 else n[:26] + "…" for n in names], fontsize=7)
    ax.set_ylabel("total squared error / lower bound")
    ax.set_yscale("log")
    ax.legend(fontsize=7)
    fig.tight_layout()
    _common.save_png(fig, path, 120)


def markdown(rows: list[dict]) -> str:
    """groupby.md: each total as a ratio to the lower bound, and mmopt's to independent noise."""
    lines = [f"# Overlapping group-bys (generated by `{CMD}`)", "",
             "Total squared error of the grouping sets' counts under Gaussian noise, relative to the lower bound "
             "(exact for the residual family, the tree bound for the node family); every total scales with the "
             "same `Privacy.variance_factor`, so the ratios hold at every (ε, δ). *independent*: one Gaussian "
             "measurement per grouping set, an even share of the budget (what OpenDP, Tumult and SmartNoise do); "
             "*least squares*: those measurements reconciled; *mmopt*: `mmopt.optimize` on the workload.", "",
             "| workload | cells | queries | sets | independent ÷ bound | least squares ÷ bound | mmopt ÷ bound "
             "| mmopt ÷ independent | family | status |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        b = r["lower_bound"]
        lines.append(f"| {r['workload']} | {r['cells']:,} | {r['queries']:,} | {r['sets']} | "
                     f"{r['independent'] / b:.4g} | {r['least_squares'] / b:.4g} | {r['mmopt'] / b:.5g} | "
                     f"{r['mmopt'] / r['independent']:.3f} | {r['family']} | {r['status']} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog=CMD, description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--full", action="store_true", help="add ROLLUP(state, county, tract) on 73,000 tracts (~1 min)")
    _common.add_output_args(ap, "groupby")
    args = ap.parse_args(argv)
    try:
        out = _run.check_out_dir(_common.out_of(args, "groupby"))
    except ValueError as exc:  # a file, or a folder that cannot be written: before the work
        ap.error(str(exc))
    say = (lambda *_: None) if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    try:
        with _run.hold(out):
            t0, timings = time.perf_counter(), {}
            rows = run(args.full, say, timings)
            _common.write_csv(out / "groupby.csv", COLUMNS, rows)
            _run.write_text(out / "groupby.md", markdown(rows))
            plot(rows, out / "groupby.png")
            _run.write_json(out / "groupby.run_info.json", {"seconds": round(time.perf_counter() - t0, 1),
                                                            "cpu_seconds": timings, "machine": _run.machine()})
    except _run.Busy as exc:
        ap.error(str(exc))
    say(f"wrote {out / 'groupby.csv'}, groupby.md and groupby.png (peak RSS "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
