"""Benchmark mmopt.search.l2_fast.solve_l2 (Program 5.2 without an SDP) on all-range or prefix workloads.

Notation: see README. "objective" is the solver's certified upper bound on tr(G X⁻¹) for the returned
X. "dual" is its certified lower bound g(λ), and "gap" is their relative difference. "ratio" divides
the objective by the SVD bound (Σᵢ √λᵢ(G))² / n. That bound is read off the first iterate: at λ = 1
the dual is 2 tr G^{1/2} − n, so no extra eigendecomposition is needed. "check" is the relative
difference from an independent tr(G X⁻¹) computed by Cholesky, for n ≤ 2048.

Run:  python benchmarks/bench_l2_fast.py [--sizes 256 512 1024 2048 4096] [--big] [--threads T]
      [--workload all_range|prefix]
"""

import argparse
import os
import sys

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096])
parser.add_argument("--workload", choices=("all_range", "prefix"), default="all_range",
                    help="all n(n+1)/2 ranges (default) or the n prefix sums")
parser.add_argument("--big", action="store_true", help="also run n = 8192 (about 10–15 minutes on 2 cores)")
parser.add_argument("--threads", type=int, default=None,
                    help="BLAS threads. The default keeps OPENBLAS_NUM_THREADS if set, else uses 1. On two "
                         "cores shared with other jobs, OpenBLAS threads spin-wait for a busy core (eigh at "
                         "n = 1024 measured 9x slower with 2 threads than with 1).")
args = parser.parse_args()
# The BLAS reads its thread count once, when it is loaded, so this must come before importing numpy.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    if args.threads is not None:
        os.environ[_var] = str(args.threads)
    else:
        os.environ.setdefault(_var, "1")

import time  # noqa: E402

import numpy as np  # noqa: E402
import scipy.linalg  # noqa: E402

from mmopt.search.l2_fast import solve_l2  # noqa: E402


def all_range_gram(n):
    """Gram of all n(n+1)/2 range queries: G_ij = min(i, j)·(n − max(i, j) + 1), 1-indexed."""
    i = np.arange(1, n + 1)
    return np.minimum.outer(i, i) * (n - np.maximum.outer(i, i) + 1.0)


def prefix_gram(n):
    """Gram of the n prefix sums (W lower-triangular ones): G_ij = n − max(i, j), 0-indexed."""
    i = np.arange(n)
    return n - np.maximum.outer(i, i).astype(float)


def independent_objective(G, X):
    return float(np.trace(scipy.linalg.cho_solve(scipy.linalg.cho_factor(X), G)))


def blas_name():
    try:
        return np.show_config(mode="dicts")["Build Dependencies"]["blas"]["name"]
    except (AttributeError, KeyError, TypeError):
        return "unknown"


def main():
    sizes = sorted(set(args.sizes + ([8192] if args.big else [])))
    print(f"# BLAS {blas_name()}; OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}; os.cpu_count()={os.cpu_count()}; "
          f"load average {os.getloadavg()[0]:.1f} at start; workload {args.workload}", flush=True)
    header = (f"{'n':>5}  {'method':<9} {'solver':<16} {'iter':>4} {'eigh':>4} {'CG':>3} {'seconds':>8}  "
              f"{'objective':>18} {'dual':>18} {'gap':>8} {'ratio':>7} {'check':>8} {'threads':>7}")
    print(header)
    print("-" * len(header), flush=True)
    for n in sizes:
        G = all_range_gram(n) if args.workload == "all_range" else prefix_gram(n)
        start = time.perf_counter()
        sol = solve_l2(G)
        seconds = time.perf_counter() - start
        primal, dual = sol.extra["primal_bound"], sol.dual_bound
        # the SVD bound (tr G^{1/2})²/n from G's own eigenvalues (it was read from the history's first entry, the dual
        # at λ = 1 until solve_l2's history began with its start: ratio 0.0000)
        svd = float(np.sqrt(np.clip(scipy.linalg.eigvalsh(G), 0.0, None)).sum()) ** 2 / n
        check = (f"{abs(independent_objective(G, sol.gram) - primal) / primal:8.1e}" if n <= 2048
                 else f"{'-':>8}")
        rejected = sum("rejected" in h["step"] for h in sol.history)
        note = f"  ({rejected} rejected steps)" if rejected else ""
        note += "" if sol.status == "optimal" else f"  {sol.status}: {sol.message}"
        print(f"{n:>5}  {'solve_l2':<9} {sol.solver:<16} {sol.iterations:>4} {sol.iterations:>4} "
              f"{sol.extra['cg_iterations']:>3} {seconds:8.2f}  {primal:18.10e} {dual:18.10e} "
              f"{(primal - dual) / primal:8.1e} {primal / svd:7.4f} {check} "
              f"{os.environ.get('OPENBLAS_NUM_THREADS'):>7}{note}", flush=True)
        del G, sol
    print(f"# load average {os.getloadavg()[0]:.1f} at end", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
