"""Benchmark mmopt.toeplitz: prefix sums and all ranges at n = 2¹⁰ … 2²⁰ against certified lower bounds.

Notation: see README. Every error is the exact total (ε,δ) error at unit privacy, Δ₂²·tr(WᵀW (AᵀA)⁻¹), from
mmopt.toeplitz's O(n log n) / O(n log² n) formulas. "ratio" divides it by the certified lower bound of
mmopt.toeplitz.bound (Σ diag(G^{1/2})², less a round-off allowance); "vs dense" divides it by mmopt's certified
dense optimum (optimize(method="l2_approx")) where that runs (n ≤ 1,024 by default, --dense-big adds 4,096:
about 5 minutes per workload). "seconds" include building the strategy, searching, and the exact evaluation;
"peak MB" is tracemalloc's peak of Python and numpy allocations during the case. "causal": the strategy is lower
triangular, so it runs online (BLT: O(d) state per step, mmopt.toeplitz.streaming). "auto" is
mmopt.optimize(mmopt.toeplitz.prefix(n) or all_range(n), method="auto") under (ε,δ)-DP (status of its pick);
"auto(dense W)" the same on the dense workload (its seconds and memory include building the n×n Gram).

Run:  python benchmarks/bench_prefix.py [--sizes 1024 4096 65536 1048576] [--dense-big] [--blt-iterations K]
"""

import argparse
import os
import sys

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--sizes", type=int, nargs="+", default=[2**10, 2**12, 2**16, 2**20])
parser.add_argument("--dense-big", action="store_true", help="also the dense optimum at n = 4096 (~5 min each)")
parser.add_argument("--blt-iterations", type=int, default=None,
                    help="L-BFGS iterations for blt/toeplitz past n = 2^16 (default 25: a capped search there)")
parser.add_argument("--out", default=None, help="also write the table to this file")
args = parser.parse_args()
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import time  # noqa: E402
import tracemalloc  # noqa: E402

import mmopt  # noqa: E402
from mmopt import toeplitz as T  # noqa: E402

BIG = 2**16  # past it, the L-BFGS searches are capped (each iteration is a few FFTs of length 2n)


def cases(n):
    capped = {} if n <= BIG else {"max_iterations": args.blt_iterations or 25}
    yield "sqrt", True, lambda W: T.optimize(W, "sqrt", equalize=False)
    yield "sqrt+rows", True, lambda W: T.optimize(W, "sqrt")
    yield "blt(8)+rows", True, lambda W: T.optimize(W, "blt", buffers=8, **capped)
    if n <= BIG:
        yield "toeplitz+rows", True, lambda W: T.optimize(W, "toeplitz")
    yield "weighted_sqrt", False, lambda W: T.optimize(W, "weighted_sqrt")
    # what a user gets without choosing: the dense search up to 1,024 cells, the structured closed forms beyond
    yield "auto", False, lambda W: mmopt.optimize(W, method="auto", privacy=mmopt.Privacy(1.0, delta=1e-6))
    if n <= 4096:  # the same on the dense mmopt.workload.prefix(n) / all_range(n) (its n×n Gram is built first)
        yield "auto(dense W)", False, lambda W: mmopt.optimize(getattr(mmopt.workload, W.kind)(W.n), method="auto",
                                                               privacy=mmopt.Privacy(1.0, delta=1e-6))


def dense_optimum(kind, n):
    if n > 1024 and not (args.dense_big and n <= 4096):
        return None, None
    Wd = mmopt.workload.prefix(n) if kind == "prefix" else mmopt.workload.all_range(n)
    t0 = time.perf_counter()
    res = mmopt.optimize(Wd, method="l2_approx")
    return res, time.perf_counter() - t0


def main():
    lines = []

    def say(line):
        print(line, flush=True)
        lines.append(line)

    say(f"# mmopt.toeplitz; OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}; os.cpu_count()="
        f"{os.cpu_count()}; load average {os.getloadavg()[0]:.1f} at start")
    head = (f"{'workload':>9} {'n':>8}  {'strategy':<14} {'causal':>6} {'status':<14} {'seconds':>8} "
            f"{'total error':>16} {'ratio':>8} {'vs dense':>9} {'peak MB':>8}")
    say(head)
    say("-" * len(head))
    for kind in ("prefix", "all_range"):
        for n in sorted(args.sizes):
            W = T.StreamWorkload(kind, n)
            t0 = time.perf_counter()
            bound = T.lower_bound(W)
            say(f"{kind:>9} {n:>8}  {'bound':<14} {'':>6} {'certified':<14} {time.perf_counter() - t0:>8.2f} "
                f"{bound.value:>16.10e} {1.0:>8.5f} {'':>9} {'':>8}   (SVD bound ratio {bound.svd / bound.value:.5f})")
            dense, seconds = dense_optimum(kind, n)
            if dense is not None:
                say(f"{kind:>9} {n:>8}  {'dense l2':<14} {'no':>6} {dense.status:<14} {seconds:>8.2f} "
                    f"{dense.objective:>16.10e} {dense.objective / bound.value:>8.5f} {1.0:>9.5f} {'':>8}")
            for name, causal, run in cases(n):
                tracemalloc.start()
                t0 = time.perf_counter()
                res = run(W)
                seconds = time.perf_counter() - t0
                peak = tracemalloc.get_traced_memory()[1] / 1e6
                tracemalloc.stop()
                vs = f"{res.objective / dense.objective:>9.5f}" if dense is not None else f"{'-':>9}"
                say(f"{kind:>9} {n:>8}  {name:<14} {'yes' if causal else 'no':>6} {res.status:<14} {seconds:>8.2f} "
                    f"{res.objective:>16.10e} {res.objective / bound.value:>8.5f} {vs} {peak:>8.1f}")
    say(f"# load average {os.getloadavg()[0]:.1f} at end")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
