"""Grouping sets over hierarchies (issue 32): mmopt's strategy against independent noise per grouping set, certified
against a lower bound, at census scale. Each row runs in its own process (peak RSS is the row's own); CPU seconds
with one BLAS thread include building the workload.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_groupby.py [--out FILE] [--rows a,b]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

ROWS = ("toy", "counties", "counties_stack", "tracts")


def _build(name: str):
    from mmopt import workload as wl
    from mmopt.hierarchy import Hierarchy, cross, cube, grouping_sets, rollup
    from mmopt.hierarchy.synthetic import census_like
    if name == "toy":
        geo = Hierarchy.balanced((4, 4), level_names=("nation", "state", "county"), name="geo")
        return grouping_sets([geo, Hierarchy.flat(5, name="attr")], cross(rollup("state", "county"),
                                                                          [("attr",), ()]), name="toy ROLLUP")
    tracts = 73_000 if name == "tracts" else None
    geo = census_like(51, 3_143, tracts, seed=0)
    levels = ("state", "county", "tract") if tracts else ("state", "county")
    W = grouping_sets([geo, Hierarchy.flat(2, name="sex"), Hierarchy.flat(10, name="agegrp")],
                      cross(rollup(*levels), cube("sex", "agegrp")), name=f"ROLLUP({', '.join(levels)})×CUBE(sex, age)")
    if name != "counties_stack":
        return W
    # today's API: workload.stack of workload.kron of dense level matrices (county identity 3,143², state sums
    # 51 × 3,143, the total; identity/total demographic factors), 12 grouping sets
    sex, age = Hierarchy.flat(2), Hierarchy.flat(10)
    lv = {}

    def level(h, a):
        key = (id(h), a)
        if key not in lv:
            lv[key] = wl.Workload.from_matrix(h.level_matrix(a))
        return lv[key]
    return wl.stack([wl.kron(level(geo, s[0]), level(sex, s[1]), level(age, s[2])) for s in W.sets])


def one(name: str) -> dict:
    import mmopt
    from mmopt.hierarchy.baselines import independent_total
    from mmopt.hierarchy.detect import from_implicit
    c0 = time.process_time()
    W = _build(name)
    res = mmopt.optimize(W, privacy=mmopt.Privacy(1.0, 1e-9))
    seconds = time.process_time() - c0
    H = W if hasattr(W, "sets") else from_implicit(W)
    return {"row": name, "api": "stack of kron" if name == "counties_stack" else "grouping_sets",
            "cells": H.domain_size, "queries": H.n_queries, "sets": len(H.sets), "objective": res.objective,
            "bound": res.lower_bound, "independent": independent_total(H), "family": res.extra.get("family"),
            "status": res.status, "seconds": seconds,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def table(rows: list[dict]) -> str:
    head = (f"{'row':15s} {'API':14s} {'cells':>10s} {'queries':>10s} {'sets':>4s} {'objective':>14s} "
            f"{'lower bound':>14s} {'ratio':>7s} {'vs indep.':>9s} {'family':9s} {'status':14s} {'CPU s':>6s} "
            f"{'RSS MB':>7s}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['row']:15s} {r['api']:14s} {r['cells']:>10,} {r['queries']:>10,} {r['sets']:>4d} "
                     f"{r['objective']:>14,.1f} {r['bound']:>14,.1f} {r['objective'] / r['bound']:7.4f} "
                     f"{r['objective'] / r['independent']:9.3f} {r['family']:9s} {r['status']:14s} "
                     f"{r['seconds']:6.1f} {r['rss_mb']:7.0f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="also write the table here")
    ap.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated subset of {ROWS}")
    ap.add_argument("--row", default=None, help=argparse.SUPPRESS)  # internal: run one row, print JSON
    args = ap.parse_args(argv)
    if args.row:
        print(json.dumps(one(args.row)))
        return 0
    rows = []
    for name in args.rows.split(","):
        out = subprocess.run([sys.executable, __file__, "--row", name], capture_output=True, text=True, check=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(f"{name}: done", file=sys.stderr, flush=True)
    text = (f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, OPENBLAS_NUM_THREADS="
            f"{os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}, load average {os.getloadavg()[0]:.1f}\n"
            + table(rows))
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
