"""Overlapping group-bys: independent noise per grouping set (what OpenDP, Tumult and SmartNoise do) against least
squares on those measurements and against mmopt's optimised strategy, computed exactly (no simulation).

Run:   python -m experiments.groupby [--full] [--out DIR] [--quiet]
Out:   DIR/groupby.csv (one row per workload), DIR/groupby.png (the three totals relative to the lower bound);
       DIR defaults to results/groupby/.

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
import csv
import resource
import sys
import time
from pathlib import Path

CMD = "python -m experiments.groupby"
COLUMNS = ("workload", "cells", "queries", "sets", "independent", "least_squares", "mmopt", "lower_bound",
           "family", "status", "cpu_seconds")


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


def run(full: bool = False, say=print) -> list[dict]:
    """The rows of the table (pure: no files)."""
    import mmopt
    from mmopt.hierarchy.baselines import independent_total, least_squares_total

    rows = []
    for key, build in workloads(full):
        W = build()
        c0 = time.process_time()
        res = mmopt.optimize(W, privacy=mmopt.Privacy(1.0, 1e-9))
        seconds = time.process_time() - c0
        rows.append({"workload": W.name, "cells": W.domain_size, "queries": W.n_queries, "sets": len(W.sets),
                     "independent": independent_total(W), "least_squares": least_squares_total(W),
                     "mmopt": res.objective, "lower_bound": res.lower_bound, "family": res.extra["family"],
                     "status": res.status, "cpu_seconds": seconds})
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
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog=CMD, description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--full", action="store_true", help="add ROLLUP(state, county, tract) on 73,000 tracts (~1 min)")
    ap.add_argument("--out", type=Path, default=Path("results/groupby"), help="output folder")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    if args.out.exists() and not args.out.is_dir():  # it ended in a FileExistsError traceback
        ap.error(f"--out must be a folder. Got {str(args.out)!r}, which is a file.")
    args.out.mkdir(parents=True, exist_ok=True)
    say = (lambda *_: None) if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    rows = run(args.full, say)
    with open(args.out / "groupby.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, COLUMNS)
        w.writeheader()
        w.writerows(rows)
    plot(rows, args.out / "groupby.png")
    say(f"wrote {args.out / 'groupby.csv'} and groupby.png (peak RSS "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
