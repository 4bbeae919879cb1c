"""Benchmark mmopt.toeplitz: prefix sums and all ranges at n = 2¹⁰ … 2²⁰ against certified lower bounds.

Notation: see README. Every error is the exact total (ε,δ) error at unit privacy, Δ₂²·tr(WᵀW (AᵀA)⁻¹), from
mmopt.toeplitz's O(n log n) / O(n log² n) formulas. "ratio" divides it by the certified lower bound of
mmopt.toeplitz.bound (Σ diag(G^{1/2})², less a round-off allowance); "vs dense" divides it by mmopt's certified
optimum of Program 5.2 ("l2 optimum": mmopt.toeplitz.dual.solve_dual, duality gap ≤ 1e-8, O(n²) per iteration
from the tridiagonal G⁻¹; what optimize(mmopt.workload.prefix(n), method="l2_approx") runs) where n² numbers fit
(n ≤ 4,096 by default, --dense-big adds 8,192). "l2 dual(k)" is the same solver stopped after k iterations.
"seconds" include building the strategy, searching, and the exact evaluation;
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
parser.add_argument("--dense-big", action="store_true", help="also the certified optimum at n = 8192 (~1-2 min each)")
parser.add_argument("--blt-iterations", type=int, default=None,
                    help="L-BFGS iterations for blt/toeplitz past n = 2^16 (default 25: a capped search there)")
parser.add_argument("--out", default=None, help="also write the table to this file")
args = parser.parse_args()
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import collections  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402

import mmopt  # noqa: E402
from mmopt import toeplitz as T  # noqa: E402
from mmopt.toeplitz.dual import solve_dual  # noqa: E402

Row = collections.namedtuple("Row", "status objective")
BIG = 2**16  # past it, the L-BFGS searches are capped (each iteration is a few FFTs of length 2n)


def cases(n):
    capped = {} if n <= BIG else {"max_iterations": args.blt_iterations or 25}
    yield "sqrt", True, lambda W: T.optimize(W, "sqrt", equalize=False)
    yield "sqrt+rows", True, lambda W: T.optimize(W, "sqrt")
    yield "blt(8)+rows", True, lambda W: T.optimize(W, "blt", buffers=8, **capped)
    if n <= BIG:
        yield "toeplitz+rows", True, lambda W: T.optimize(W, "toeplitz")
    yield "weighted_sqrt", False, lambda W: T.optimize(W, "weighted_sqrt")
    if n <= (8192 if args.dense_big else 4096):  # the certified solver stopped early: a strategy in seconds
        for k in (1, 3):
            yield f"l2 dual({k})", False, lambda W, k=k: solve_dual(W, max_iterations=k)
    # what a user gets without choosing: the dense search up to 1,024 cells, the structured closed forms beyond
    yield "auto", False, lambda W: mmopt.optimize(W, method="auto", privacy=mmopt.Privacy(1.0, delta=1e-6))
    if n <= 4096:  # the same on the dense mmopt.workload.prefix(n) / all_range(n) (its n×n Gram is built first)
        yield "auto(dense W)", False, lambda W: mmopt.optimize(getattr(mmopt.workload, W.kind)(W.n), method="auto",
                                                               privacy=mmopt.Privacy(1.0, delta=1e-6))


def dense_optimum(kind, n):
    if n > (8192 if args.dense_big else 4096):
        return None, None
    t0 = time.perf_counter()
    res = solve_dual(T.StreamWorkload(kind, n), tol=1e-8)
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
                say(f"{kind:>9} {n:>8}  {'l2 optimum':<14} {'no':>6} {dense.status:<14} {seconds:>8.2f} "
                    f"{dense.primal:>16.10e} {dense.primal / bound.value:>8.5f} {1.0:>9.5f} {'':>8}   "
                    f"(dual {dense.dual:.10e}, gap {dense.gap:.1e}, {dense.iterations} iterations)")
            for name, causal, run in cases(n):
                tracemalloc.start()
                t0 = time.perf_counter()
                res = run(W)
                seconds = time.perf_counter() - t0
                if isinstance(res, T.dual.DualSolution):  # the same columns as an OptimizeResult
                    res = Row(res.status, res.primal)
                peak = tracemalloc.get_traced_memory()[1] / 1e6
                tracemalloc.stop()
                vs = f"{res.objective / dense.primal:>9.5f}" if dense is not None else f"{'-':>9}"
                say(f"{kind:>9} {n:>8}  {name:<14} {'yes' if causal else 'no':>6} {res.status:<14} {seconds:>8.2f} "
                    f"{res.objective:>16.10e} {res.objective / bound.value:>8.5f} {vs} {peak:>8.1f}")
    say(f"# load average {os.getloadavg()[0]:.1f} at end")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
