"""Benchmark parallel restarts (optimize's n_jobs): seconds for n_jobs = 1 vs 2 and the speed-up, same result.

Notation: see README. Cases: min_error (local engine, 8 restarts) on all ranges at n = 256, and two
product-domain searches: OPT_⊗ (kron, 4 restarts) on the census SF1 workload and OPT_M (marginals,
50 restarts of ~10 ms) on adult W2. Every row checks that its strategy equals the n_jobs = 1 row's
exactly ("same"); "objective" is optimize's (the total squared error at unit privacy). The loky
worker processes are started once before timing (a one-off cost per Python session, printed as "pool
start"); BLAS is pinned to one thread per worker, as mmopt does. On a shared machine the speed-up
depends on what else runs: the load average is printed first.

Run:  python benchmarks/bench_parallel.py [--n 256] [--restarts 8] [--jobs 1 2] [--skip-multidim]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

import mmopt  # noqa: E402
from mmopt import workload as wl  # noqa: E402
from mmopt._base import parallel as _parallel  # noqa: E402


def _matrices(strategy) -> list[np.ndarray]:
    if isinstance(strategy, mmopt.Strategy):
        return [strategy.matrix]
    return [f.matrix for t in strategy.terms for f in t.factors] + [np.array([t.weight for t in strategy.terms])]


def _cases(args) -> list[tuple[str, object, str, dict]]:
    out = [(f"min_error all_range({args.n})", wl.all_range(args.n), "min_error",
            {"engine": "local", "restarts": args.restarts})]
    if not args.skip_multidim:
        out += [("kron sf1", wl.sf1(), "kron", {"restarts": 4}),
                ("marginals adult_w2", wl.adult_w2(), "marginals", {"restarts": 50})]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=256, help="domain size of the min_error case")
    ap.add_argument("--restarts", type=int, default=8, help="min_error local-search restarts")
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 2], help="n_jobs values (the first is the reference)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-multidim", action="store_true")
    args = ap.parse_args()
    print(f"cpus={os.cpu_count()} load={tuple(round(x, 2) for x in os.getloadavg())} "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}")
    t0 = time.perf_counter()
    list(_parallel.ordered_map(abs, [(k,) for k in range(2 * max(args.jobs))], n_jobs=max(args.jobs)))
    print(f"pool start (n_jobs={max(args.jobs)}): {time.perf_counter() - t0:.2f} s\n")
    head = f"{'case':<26} {'n_jobs':>6} {'backend':>10} {'seconds':>8} {'speed-up':>8} {'objective':>14} {'same':>5}"
    print(head)
    print("-" * len(head))
    for label, W, method, options in _cases(args):
        ref_seconds, ref = None, None
        for jobs in args.jobs:
            t0 = time.perf_counter()
            r = mmopt.optimize(W, method=method, seed=args.seed, options=options, n_jobs=jobs)
            sec = time.perf_counter() - t0
            mats = _matrices(r.strategy)
            if ref is None:
                ref_seconds, ref = sec, mats
            same = len(mats) == len(ref) and all(np.array_equal(a, b) for a, b in zip(mats, ref, strict=True))
            print(f"{label:<26} {jobs:>6} {r.extra.get('backend', '?'):>10} {sec:>8.2f} {ref_seconds / sec:>8.2f} "
                  f"{r.objective:>14.6g} {'yes' if same else 'NO':>5}", flush=True)


if __name__ == "__main__":
    main()
