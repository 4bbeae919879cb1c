"""ε-DP MinError on prefix sums and all ranges at n = 1,024 … 8,192: the default search against HDMM-style restarts.

Run:  python benchmarks/bench_eps_search.py [--cases prefix:1024 all_range:1024 prefix:4096 prefix:8192]
                                            [--ref-restarts 3] [--ref-factor 2] [--ref-max 8192] [--jobs 1]
                                            [--out PATH] [--append]
Each case runs ``mmopt.optimize(W, method="min_error", seed=0)`` as a user would (the default single p-Identity run on
the O(n) Gram operator, :mod:`mmopt.min_error_fast`), then ``--ref-restarts`` reference runs of the same search from
other seeds (1, 2, …) with ``--ref-factor`` times the default iteration budget (HDMM's p-Identity restarts with a
generous budget), for n ≤ ``--ref-max``. Columns: p, restarts, L-BFGS-B iterations, status, CPU and wall seconds
(CPU: of the process that ran it), the exact error (unit privacy, total), its ratio to the certified lower bound
(mmopt.toeplitz's diagonal bound, valid under Laplace noise) and to the best reference run. BLAS on one thread.
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

import mmopt  # noqa: E402
from mmopt import toeplitz  # noqa: E402
from mmopt.min_error_fast import default_iterations  # noqa: E402

HEAD = (f"{'workload':<10} {'n':>6} {'run':<10} {'p':>4} {'restarts':>8} {'iters':>6} {'status':<11} {'CPU s':>8} "
        f"{'wall s':>8} {'error':>13} {'/bound':>7} {'/best ref':>9}")
OUT = Path(__file__).resolve().parent / "results" / "bench_eps_search.txt"


def _run(kind: str, n: int, seed: int, max_iterations: int | None) -> dict:
    """One optimize call, timed inside the process that runs it (CPU: time.process_time of that process)."""
    W = (toeplitz.prefix if kind == "prefix" else toeplitz.all_range)(n)
    t0, c0 = time.perf_counter(), time.process_time()
    r = mmopt.optimize(W, method="min_error", seed=seed, max_iterations=max_iterations, verbose=False)
    return {"objective": r.objective, "ratio": r.ratio, "p": r.extra["p"], "restarts": r.extra["restarts"],
            "iterations": r.iterations, "status": r.status, "cpu": time.process_time() - c0,
            "wall": time.perf_counter() - t0}


def case(kind: str, n: int, ref_restarts: int, ref_factor: float, ref_max: int, jobs: int, emit) -> None:
    """The default run (seed 0) and the reference runs (seeds 1, 2, …), ``jobs`` at a time."""
    import joblib

    tasks = [("default", 0, None)]
    if n <= ref_max:
        budget = int(ref_factor * default_iterations(n))
        tasks += [(f"ref seed {s}", s, budget) for s in range(1, ref_restarts + 1)]
    done = joblib.Parallel(n_jobs=jobs)(joblib.delayed(_run)(kind, n, s, b) for _, s, b in tasks)
    refs = [r["objective"] for (name, _, _), r in zip(tasks, done, strict=True) if name != "default"]
    best = min(refs) if refs else None
    for (name, _, _), r in zip(tasks, done, strict=True):
        vs = f"{r['objective'] / best:9.4f}" if best else "        -"
        emit(f"{kind:<10} {n:>6} {name:<10} {r['p']:>4} {r['restarts']:>8} {r['iterations']:>6} {r['status']:<11} "
             f"{r['cpu']:>8.1f} {r['wall']:>8.1f} {r['objective']:>13.6g} {r['ratio']:>7.4f} {vs}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=["prefix:1024", "all_range:1024", "prefix:4096", "prefix:8192"])
    ap.add_argument("--ref-restarts", type=int, default=3)
    ap.add_argument("--ref-factor", type=float, default=2.0)
    ap.add_argument("--ref-max", type=int, default=8192)
    ap.add_argument("--jobs", type=int, default=1, help="runs of a case at once (joblib processes, one BLAS thread)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--append", action="store_true", help="add the rows to --out (cases run in separate processes)")
    args = ap.parse_args(argv)
    lines = [f"# load average at start: {os.getloadavg()}; OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}; "
             f"reference: {args.ref_restarts} runs (seeds 1..{args.ref_restarts}) with {args.ref_factor:g}× the "
             "default iteration budget", HEAD, "-" * len(HEAD)]
    print("\n".join(lines), flush=True)

    def emit(line):
        lines.append(line)
        print(line, flush=True)
    for spec in args.cases:
        kind, n = spec.split(":")
        case(kind, int(n), args.ref_restarts, args.ref_factor, args.ref_max, args.jobs, emit)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.append and args.out.exists():
        with args.out.open("a") as f:
            f.write("\n".join([lines[0]] + lines[3:]) + "\n")
    else:
        args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
