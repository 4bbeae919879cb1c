"""Benchmark mmopt.optimize end to end: error, ratio to the SVD bound, seconds, solver.

Run:  python benchmarks/bench_optimize.py [--sizes 8 16 32 64 128 256] [--methods min_error l2_approx]
                                          [--workloads all_range prefix] [--csv out.csv]
Each row: n, workload, method, solver, status, seconds, objective (unit privacy, ε-DP L1 error unless the
method is l2_approx), its ratio to the SVD bound and to the best lower bound, and the baselines' ratios
(I, H₂, Y) under the same norm. The BLAS thread setting and the load average are printed first,
because both change the timings (two busy cores made a 256×256 eigh 100× slower while planning).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import mmopt  # noqa: E402
from experiments._common import format_table  # noqa: E402
from mmopt import strategy as st  # noqa: E402
from mmopt import workload as wl  # noqa: E402


def baseline_ratios(W, norm: str, bound: float) -> dict:
    n = W.domain_size
    out = {}
    for A in (st.identity(n), st.hierarchical(n)) + ((st.wavelet(n),) if n & (n - 1) == 0 else ()):
        out[f"{A.name}_ratio"] = mmopt.evaluate(W, A, norm=norm, per_query=False).total_squared_error / bound
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[8, 16, 32, 64, 128, 256])
    ap.add_argument("--methods", nargs="+", default=["min_error", "l2_approx", "svd_strategy"])
    ap.add_argument("--workloads", nargs="+", default=["all_range", "prefix"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--csv", default=None, help="also write the rows to this CSV")
    args = ap.parse_args(argv)
    threads = {k: os.environ.get(k, "unset") for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    print(f"cpus={os.cpu_count()} load={os.getloadavg()} {threads} solvers={mmopt.solvers.available()}")
    rows = []
    for n in args.sizes:
        for name in args.workloads:
            W = getattr(wl, name)(n)
            svd = mmopt.svd_bound(W)
            for method in args.methods:
                t0 = time.perf_counter()
                r = mmopt.optimize(W, method=method, seed=args.seed)
                secs = time.perf_counter() - t0
                row = {"n": n, "workload": name, "method": method, "solver": r.solver or "-", "status": r.status,
                       "seconds": secs, "objective": r.objective, "svd_ratio": r.objective / svd,
                       "bound_ratio": r.ratio} | baseline_ratios(W, r.norm, svd)
                rows.append(row)
                print(format_table([row], list(row)).splitlines()[-1], flush=True)
    print()
    cols = list(dict.fromkeys(k for r in rows for k in r))
    print(format_table(rows, cols))
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, cols)
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
