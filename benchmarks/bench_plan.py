"""Planning by accuracy (issue 35): the smallest budget at which every query meets its target, and how far it is
from the certified minimum. Prints a table: workload, targets, noise, ε found, certified minimum ε, ratio, zCDP ρ,
the max-variance search's status, CPU seconds (one BLAS thread).

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_plan.py [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import mmopt
from mmopt import workload as wl


def _rollup_counties():
    from mmopt.hierarchy import Hierarchy, cross, cube, grouping_sets, rollup
    from mmopt.hierarchy.synthetic import census_like
    geo = census_like(51, 3_143, seed=0)
    return grouping_sets([geo, Hierarchy.flat(2, name="sex"), Hierarchy.flat(10, name="agegrp")],
                         cross(rollup("state", "county"), cube("sex", "agegrp")))


def _sf1_targets():
    """Per-table standard errors on sf1: the PL-94-like tables (P8–P11: race, Hispanic × race, both at 18+)
    ±10, the total P1 ±5, every other table ±20."""
    from mmopt.structured.census import sf1_term_tables
    se = {"P1": 5.0, "P8": 10.0, "P9": 10.0, "P10": 10.0, "P11": 10.0}
    return np.concatenate([np.full(t.n_queries, se.get(table, 20.0))
                           for t, table in zip(wl.sf1().terms, sf1_term_tables(), strict=True)])


def _cases():
    rng = np.random.default_rng(0)
    heterogeneous = rng.uniform(2.0, 20.0, 256 * 257 // 2)
    wide = rng.uniform(2.0, 20.0, 1024 * 1025 // 2)
    return [
        ("census sf1, 29,440 cells, PL-94-like tables", wl.sf1, _sf1_targets(), "se", 1e-9),
        ("prefix(1,024)", lambda: wl.prefix(1024), 5.0, "se", 1e-9),
        ("all ranges on 64 cells", lambda: wl.all_range(64), 10.0, "halfwidth", 1e-9),
        ("all ranges on 256, targets U(2, 20)", lambda: wl.all_range(256), heterogeneous, "se", 1e-9),
        ("all ranges on 1,024, targets U(2, 20)", lambda: wl.all_range(1024), wide, "se", 1e-9),
        ("all ranges on 64 cells", lambda: wl.all_range(64), 10.0, "se", 0.0),
        ("prefix(256)", lambda: wl.prefix(256), 4.0, "se", 0.0),
        ("2-way marginals (8,)^30", lambda: wl.marginals((8,) * 30, 2), 10.0, "se", 1e-9),
        ("3-way marginals (2,)^20", lambda: wl.marginals((2,) * 20, 3), 10.0, "se", 1e-9),
        ("1- and 2-way marginals (10,)^8", lambda: wl.stack([wl.marginals((10,) * 8, 1), wl.marginals((10,) * 8, 2)]),
         5.0, "se", 1e-9),
        ("ROLLUP(state,county)×CUBE(sex,age), 3,143 counties", _rollup_counties, 50.0, "halfwidth", 1e-9),
    ]


def run(only: str | None = None) -> list[dict]:
    rows = []
    for name, build, targets, kind, delta in _cases():
        if only and only not in name:
            continue
        W = build()
        c0 = time.process_time()
        p = mmopt.plan(W, targets=targets, kind=kind, delta=delta)
        seconds = time.process_time() - c0
        shown = f"{kind} ≤ {targets:g}" if np.ndim(targets) == 0 else \
            f"{kind} {np.min(targets):.2g}–{np.max(targets):.2g}"
        rows.append({"workload": name, "targets": shown, "noise": "Gauss" if delta else "Laplace",
                     "epsilon": p.epsilon, "minimum": p.lower_bound, "ratio": p.ratio, "rho": p.rho,
                     "status": p.status, "seconds": seconds})
    return rows


def table(rows: list[dict]) -> str:
    head = f"{'workload':52s} {'targets':16s} {'noise':7s} {'ε found':>10s} {'certified min':>13s} {'ratio':>9s} " \
           f"{'ρ':>9s} {'status':18s} {'CPU s':>6s}"
    lines = [head, "-" * len(head)]
    for r in rows:
        rho = "" if r["rho"] is None else f"{r['rho']:.4g}"
        lines.append(f"{r['workload']:52s} {r['targets']:16s} {r['noise']:7s} {r['epsilon']:10.6g} "
                     f"{r['minimum']:13.6g} {r['ratio']:9.6f} {rho:>9s} {r['status']:18s} {r['seconds']:6.1f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="also write the table here")
    ap.add_argument("--only", default=None, help="run only the rows whose name contains this text")
    args = ap.parse_args(argv)
    text = (f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, OPENBLAS_NUM_THREADS="
            f"{os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}, load average {os.getloadavg()[0]:.1f}\n"
            + table(run(args.only)))
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
