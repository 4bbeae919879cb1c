"""Reproduce §6: error of I, H_b, Y and optimised strategies on range, prefix and predicate workloads.

Run:  python -m experiments.range_queries [--quick | --full] [--sizes 16 64] [--out DIR] [--resume]
Out:  paper_figures/range_queries.csv (one row per n × workload × strategy) and a printed table.
"""

from __future__ import annotations

import argparse
import time

import mmopt
from experiments import _common
from mmopt import strategy as st
from mmopt import workload as wl

WORKLOADS = {"all_range": wl.all_range, "prefix": wl.prefix, "all_predicate": wl.all_predicate}
COLUMNS = ["n", "workload", "strategy", "solver", "status", "sensitivity", "total_squared_error", "log10_total",
           "rmse", "max_variance", "max_variance_upper", "svd_bound_ratio", "seconds"]
QUICK_SIZES = (4, 8, 16, 32, 64, 128, 256)
FULL_SIZES = QUICK_SIZES + (512, 1024)


def baselines(n: int) -> list[mmopt.Strategy]:
    """I, H₂, the best-branching H_b chosen later per workload, and Y (n a power of two)."""
    out = [st.identity(n), st.hierarchical(n, 2)]
    out += [st.hierarchical(n, b) for b in (4, 8, 16) if b < n]
    if n & (n - 1) == 0:
        out.append(st.wavelet(n))
    return out


def run(sizes, *, privacy: mmopt.Privacy, workloads=tuple(WORKLOADS), skip=lambda **key: False, on_row=None):
    """Evaluate every strategy on every workload and size; pure apart from the ``on_row`` callback.

    Returns rows (dicts) with the error figures and the ratio to the SVD lower bound.
    """
    rows = []
    for n in sizes:
        for name in workloads:
            W = WORKLOADS[name](n)
            bound = mmopt.svd_bound(W, privacy, per_query=True)
            for A in baselines(n):
                if skip(n=n, workload=name, strategy=A.name):
                    continue
                t0 = time.perf_counter()
                r = mmopt.evaluate(W, A, privacy, per_query=False)
                row = r.to_row() | {"n": n, "workload": name, "strategy": A.name, "solver": "", "status": "closed_form",
                                    "svd_bound_ratio": r.mean_squared_error / bound,
                                    "seconds": time.perf_counter() - t0}
                rows.append(row)
                if on_row:
                    on_row(row)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="n = 4 … 256 (default)")
    size.add_argument("--full", action="store_true", help="n = 4 … 1024")
    size.add_argument("--sizes", type=int, nargs="+", help="explicit domain sizes")
    parser.add_argument("--epsilon", type=float, default=1.0, help="ε (default 1.0; Laplace noise)")
    parser.add_argument("--out", default=None, help="output folder (default paper_figures/)")
    parser.add_argument("--resume", action="store_true", help="keep rows already in the CSV and skip them")
    args = parser.parse_args(argv)
    sizes = args.sizes or (FULL_SIZES if args.full else QUICK_SIZES)
    out = _common.out_dir(args.out)
    writer = _common.RowWriter(out / "range_queries.csv", COLUMNS, resume=args.resume,
                               key=("n", "workload", "strategy"))
    rows = run(sizes, privacy=mmopt.Privacy(args.epsilon), skip=writer.done, on_row=writer.write)
    print(_common.format_table(writer.rows, ["n", "workload", "strategy", "rmse", "max_variance", "svd_bound_ratio"]))
    print(f"wrote {writer.path} ({len(rows)} new rows)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
