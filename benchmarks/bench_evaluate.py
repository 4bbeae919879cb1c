"""Time mmopt.evaluate for I, H₂ and Y on all ranges (and all predicates), n = 256 … 4096.

Run:  python benchmarks/bench_evaluate.py [--sizes 256 1024 4096] [--workloads all_range all_predicate]
Prints one row per (n, workload, strategy): seconds, rmse, max error (exact or bracketed), ratio of the
mean squared error to the SVD bound, and the BLAS thread setting the timings were taken with.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
# Large dense factorisations use both cores (experiments/ pins BLAS to one thread; not here).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_var, str(os.cpu_count()))

import mmopt  # noqa: E402
from experiments._common import format_table  # noqa: E402
from mmopt import strategy as st  # noqa: E402
from mmopt import workload as wl  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096])
    ap.add_argument("--workloads", nargs="+", default=["all_range", "all_predicate"])
    args = ap.parse_args(argv)
    threads = {k: os.environ.get(k, "unset") for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    print(f"cpus={os.cpu_count()} {threads}")
    eps1 = mmopt.Privacy(1.0)
    rows = []
    for n in args.sizes:
        for name in args.workloads:
            W = getattr(wl, name)(n)
            bound = mmopt.svd_bound(W, eps1, per_query=True)
            for A in (st.identity(n), st.hierarchical(n), st.wavelet(n)):
                t0 = time.perf_counter()
                r = mmopt.evaluate(W, A, eps1, per_query=False)
                secs = time.perf_counter() - t0
                rows.append({"n": n, "workload": name, "strategy": A.name, "seconds": secs, "rmse": r.rmse,
                             "max_variance": r.max_variance, "max_upper": r.max_variance_upper,
                             "max_exact": r.max_variance_exact, "ratio_to_bound": r.mean_squared_error / bound})
                print(format_table(rows[-1:], list(rows[-1])).splitlines()[-1], flush=True)
    print()
    print(format_table(rows, list(rows[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
