"""Benchmark mmopt.search.local_search.minimize_l1 on all-range and prefix workloads against I, H2 and Haar.

Notation: see README. Errors are unit-privacy Δ² tr(G X⁻¹); "ratio" columns divide by the SVD bound
(Σᵢ √λᵢ(G))² / n.

Run:  python benchmarks/bench_local_search.py [--sizes 8 16 ... 256] [--large] [--restarts R] [--sweep-p]
"""

import os

# Two cores are shared with other jobs: a multithreaded BLAS on these mid-sized products spends more time
# waiting for a busy core than computing (27x slower at n = 1024 when measured), so pin it before numpy loads.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import mmopt  # noqa: E402
from mmopt import strategy as st  # noqa: E402
from mmopt import workload as wl  # noqa: E402
from mmopt.search.local_search import minimize_l1  # noqa: E402


def all_range_gram(n):
    return wl.all_range(n).gram


def prefix_gram(n):
    return wl.prefix(n).gram


def hierarchical(n):
    return st.hierarchical(n).matrix


def wavelet(n):
    return st.wavelet(n).matrix


def error(G, A):
    """Δ₁²·tr(G(AᵀA)⁻¹), via mmopt.evaluate."""
    return mmopt.evaluate(wl.Workload.from_gram(G, n_queries=len(G)), A).total_squared_error


def svd_bound(G):
    return mmopt.svd_bound(wl.Workload.from_gram(G, n_queries=len(G)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 16, 32, 64, 128, 256])
    parser.add_argument("--large", action="store_true", help="also run n = 1024 (~5 min/workload)")
    parser.add_argument("--restarts", type=int, default=None, help="default: 8 up to n = 256, 3 at n = 1024")
    parser.add_argument("--max-iterations", type=int, default=3000)
    parser.add_argument("--sweep-p", action="store_true", help="also try p = n/32, n/8 (n/16 is the default)")
    args = parser.parse_args()
    sizes = args.sizes + ([1024] if args.large else [])

    head = (f"{'n':>5} {'workload':>8} {'method':>12} {'solver':>11} {'p':>4} {'rest':>4} {'seconds':>8} "
            f"{'error':>12} {'ratio':>7} {'I':>7} {'H2':>7} {'Y':>7} {'status':>10}")
    print(head)
    print("-" * len(head))
    for n in sizes:
        for name, G in (("ranges", all_range_gram(n)), ("prefix", prefix_gram(n))):
            bound = svd_bound(G)
            base = [np.trace(G) / bound] + [error(G, A) / bound for A in (hierarchical(n), wavelet(n))]
            restarts = args.restarts or (8 if n <= 256 else 3)
            runs = [("p-identity", {"restarts": restarts})]
            if args.sweep_p:
                sweep = sorted({max(1, n // 32), max(1, n // 8)})
                runs += [("p-identity", {"restarts": restarts, "p": q}) for q in sweep]
            if n <= 256:
                runs.append(("polish(H2)", {"initial": hierarchical(n)}))
            for method, kwargs in runs:
                t0 = time.perf_counter()
                sol = minimize_l1(G, seed=0, max_iterations=args.max_iterations, **kwargs)
                seconds = time.perf_counter() - t0
                e = error(G, sol.matrix)
                print(f"{n:>5} {name:>8} {method:>12} {sol.solver:>11} {sol.extra['p']:>4} "
                      f"{kwargs.get('restarts', 1):>4} {seconds:>8.1f} {e:>12.6g} {e / bound:>7.4f} "
                      f"{base[0]:>7.3f} {base[1]:>7.3f} {base[2]:>7.3f} {sol.status:>10}", flush=True)


if __name__ == "__main__":
    main()
