"""Benchmark the CVXPY-based methods: Program 5.2 (sdp_l2), Program 5.1 (sdp_min_error), Program 5.3.

Notation: see README. Part 1 solves Program 5.2 for all ranges with CLARABEL and SCS, each case in a fresh
subprocess so that "peak GB" is that solve's own peak resident memory. Part 2 runs the MinError heuristic:
"error" is Δ_A² tr(G (AᵀA)⁻¹) of the returned A, "ratio" divides it by the SVD bound (Σᵢ √λᵢ(G))²/n, and
"identity" is the error of I. Past --me-full-max-n only the L2 start is run, with --me-iterations P1 solves
(a time budget). Part 3 runs MinSensitivity on the H and Y profiles.

Run:  python benchmarks/bench_sdp.py [--l2-sizes 8 16 32 64] [--clarabel-max-n 64] [--me-sizes 4 8 16 32]
                                      [--ms-sizes 4 8] [--skip-l2] [--skip-me] [--skip-ms]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mmopt import strategy as st  # noqa: E402
from mmopt import workload as wl  # noqa: E402
from mmopt.search.min_sensitivity import solve_min_sensitivity  # noqa: E402
from mmopt.search.sdp_l2 import solve_l2_sdp  # noqa: E402
from mmopt.search.sdp_min_error import _starts, _true_error, solve_min_error_sdp  # noqa: E402


def all_range_gram(n):
    return wl.all_range(n).gram


def hierarchical(n):
    return st.hierarchical(n).matrix


def wavelet(n):
    return st.wavelet(n).matrix


def fmt(column, x):
    if not isinstance(x, float):
        return "" if x is None else str(x)
    return f"{x:.3g}" if column in ("seconds", "peak GB") else f"{x:.7g}"


def table(rows, columns):
    """Fixed-width table; floats to 7 significant digits (times and memory to 3)."""
    cells = [[fmt(c, r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    out = ["  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True))]
    out += ["  ".join(x.rjust(w) for x, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(out)


def one_l2(n: int, solver: str) -> dict:
    """Run in a child process: one Program 5.2 solve, with its own peak memory."""
    t0 = time.perf_counter()
    res = solve_l2_sdp(all_range_gram(n), solver=solver)
    return {
        "n": n, "solver": solver, "status": res.status, "seconds": time.perf_counter() - t0,
        "objective": res.extra["objective"], "dual bound": res.dual_bound, "iterations": res.iterations,
        "peak GB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
    }  # fmt: skip


def part_l2(sizes, clarabel_max_n):
    rows = []
    for n in sizes:
        for solver in ("CLARABEL", "SCS"):
            if solver == "CLARABEL" and n > clarabel_max_n:
                rows.append({"n": n, "solver": solver, "status": f"skipped (n > {clarabel_max_n})"})
                continue
            out = subprocess.run(
                [sys.executable, __file__, "--one-l2", str(n), solver],
                capture_output=True,
                text=True,
                check=False,
            )
            if out.returncode != 0:
                rows.append({"n": n, "solver": solver, "status": f"failed rc={out.returncode}"})
                continue
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(f"  l2 n={n} {solver}: {rows[-1]['seconds']:.1f} s", file=sys.stderr, flush=True)
    print("Program 5.2 (sdp_l2), all ranges:")
    cols = ["n", "solver", "status", "seconds", "objective", "dual bound", "iterations", "peak GB"]
    print(table(rows, cols))


def part_min_error(sizes, full_max_n, budget_iterations):
    rows = []
    for n in sizes:
        workloads = {"all ranges": all_range_gram(n), "10·1ᵀ; I": 100.0 * np.ones((n, n)) + np.eye(n)}
        for label, G in workloads.items():
            lam = np.clip(np.linalg.eigvalsh(G), 0, None)
            bound = float(np.sqrt(lam).sum() ** 2 / n)
            t0 = time.perf_counter()
            if n <= full_max_n:
                res, how = solve_min_error_sdp(G), "3 starts × ≤50"
            else:
                start = dict(_starts(G, "SCS"))["l2"]
                res = solve_min_error_sdp(G, initial=start, max_iterations=budget_iterations)
                how = f"L2 start × {budget_iterations}"
            secs = time.perf_counter() - t0
            err = res.extra["objective"]
            rows.append({
                "n": n, "workload": label, "run": how, "solver": res.solver, "status": res.status,
                "error": err, "ratio": err / bound, "identity": _true_error(np.eye(n), G), "svd bound": bound,
                "start": res.extra["start"], "iterations": res.iterations, "seconds": secs,
            })  # fmt: skip
            print(f"  min_error n={n} {label}: {secs:.1f} s", file=sys.stderr, flush=True)
    print("\nProgram 5.1 (sdp_min_error), default settings:")
    cols = ["n", "workload", "run", "solver", "status", "error", "ratio", "identity", "svd bound", "start",
            "iterations", "seconds"]  # fmt: skip
    print(table(rows, cols))


def part_min_sensitivity(sizes):
    rows = []
    for n in sizes:
        for label, S in (("H", hierarchical(n)), ("Y", wavelet(n))):
            t0 = time.perf_counter()
            res = solve_min_sensitivity(S.T @ S, seed=0)
            rows.append({
                "n": n, "profile": label, "Δ original": float(np.abs(S).sum(axis=0).max()),
                "Δ start": res.extra["start_sensitivity"], "Δ SDP": res.extra["sdp_sensitivity"],
                "Δ final": res.extra["sensitivity"], "iterations": res.iterations,
                "seconds": time.perf_counter() - t0,
            })  # fmt: skip
            print(f"  min_sensitivity n={n} {label}: {rows[-1]['seconds']:.1f} s", file=sys.stderr)
    print("\nProgram 5.3 (min_sensitivity), seed=0:")
    cols = ["n", "profile", "Δ original", "Δ start", "Δ SDP", "Δ final", "iterations", "seconds"]
    print(table(rows, cols))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--l2-sizes", type=int, nargs="+", default=[8, 16, 32, 64])
    ap.add_argument("--clarabel-max-n", type=int, default=64, help="n=64 takes ~5 min and 3.6 GB")
    ap.add_argument("--me-sizes", type=int, nargs="+", default=[4, 8, 16, 32])
    ap.add_argument("--me-full-max-n", type=int, default=16)
    ap.add_argument("--me-iterations", type=int, default=10, help="P1 budget past --me-full-max-n")
    ap.add_argument("--ms-sizes", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--skip-l2", action="store_true")
    ap.add_argument("--skip-me", action="store_true")
    ap.add_argument("--skip-ms", action="store_true")
    ap.add_argument("--one-l2", nargs=2, metavar=("N", "SOLVER"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one_l2:
        print(json.dumps(one_l2(int(args.one_l2[0]), args.one_l2[1])))
        return 0
    print(f"cpus={os.cpu_count()} load={os.getloadavg()[0]:.2f} (timings are wall clock on a shared machine)")
    if not args.skip_l2:
        part_l2(args.l2_sizes, args.clarabel_max_n)
    if not args.skip_me:
        part_min_error(args.me_sizes, args.me_full_max_n, args.me_iterations)
    if not args.skip_ms:
        part_min_sensitivity(args.ms_sizes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
