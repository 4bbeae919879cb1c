"""ε-DP MinError on prefix sums and all ranges at n = 1,024 … 8,192: the default search against HDMM-style restarts.

Run:  python benchmarks/bench_eps_search.py [--cases prefix:1024 all_range:1024 prefix:4096 prefix:8192]
                                            [--ref-restarts 3] [--ref-factor 2] [--ref-iterations K]
                                            [--ref-max 8192] [--jobs 1] [--out PATH] [--append] [--refs JSON]
Each case runs ``mmopt.optimize(W, method="min_error", seed=0)`` as a user would (the default single p-Identity run on
the O(n) Gram operator, :mod:`mmopt.search.min_error_fast`: coarse to fine past 1,024 cells), then ``--ref-restarts``
reference runs from other seeds (1, 2, …): HDMM's p-Identity search from its random start
(``options={"start": "random"}``) with ``--ref-iterations`` L-BFGS-B steps, or ``--ref-factor`` times that start's
default budget, for n ≤ ``--ref-max``. Columns: p, restarts, L-BFGS-B iterations, status, CPU and wall seconds
(CPU: of the process that ran it), the exact error (unit privacy, total), its ratio to the certified lower bound
(mmopt.toeplitz's diagonal bound, valid under Laplace noise) and to the best reference run. BLAS on one thread.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import mmopt  # noqa: E402
from mmopt import toeplitz  # noqa: E402
from mmopt.search.min_error_fast import default_iterations  # noqa: E402

HEAD = (f"{'workload':<10} {'n':>6} {'run':<10} {'p':>4} {'restarts':>8} {'iters':>6} {'status':<11} {'CPU s':>8} "
        f"{'wall s':>8} {'error':>13} {'/bound':>7} {'/best ref':>9}")
OUT = Path(__file__).resolve().parent / "results" / "bench_eps_search.txt"


def _run(kind: str, n: int, seed: int, max_iterations: int | None, start: str) -> dict:
    """One optimize call, timed inside the process that runs it (CPU: time.process_time of that process)."""
    W = (toeplitz.prefix if kind == "prefix" else toeplitz.all_range)(n)
    t0, c0 = time.perf_counter(), time.process_time()
    r = mmopt.optimize(W, method="min_error", seed=seed, max_iterations=max_iterations, verbose=False,
                       options={"start": start})
    return {"objective": r.objective, "ratio": r.ratio, "p": r.extra["p"], "restarts": r.extra["restarts"],
            "iterations": r.iterations, "status": r.status, "cpu": time.process_time() - c0,
            "wall": time.perf_counter() - t0}


def _cached(kind: str, n: int, seed: int, budget: int) -> str:
    return f"{kind}:{n}:seed {seed}:{budget} steps"


def case(kind: str, n: int, ref_restarts: int, ref_budget: int, ref_max: int, jobs: int, emit,
         refs_file: Path | None = None, default: bool = True) -> None:
    """The default run (seed 0) and the random-start reference runs (seeds 1, 2, …), ``jobs`` at a time.

    With ``refs_file`` (a JSON file), reference runs found there (same workload, n, seed and budget) are read
    instead of rerun, and new ones are added: at n = 8,192 one costs about an hour.
    """
    import joblib

    cache = json.loads(refs_file.read_text()) if refs_file is not None and refs_file.exists() else {}
    tasks = [("default", 0, None, "auto")] if default else []
    if n <= ref_max:
        tasks += [(f"ref seed {s}", s, ref_budget, "random") for s in range(1, ref_restarts + 1)]
    todo = [t for t in tasks if t[3] == "auto" or _cached(kind, n, t[1], t[2]) not in cache]
    ran = dict(zip(todo, joblib.Parallel(n_jobs=jobs)(joblib.delayed(_run)(kind, n, s, b, st)
                                                     for _, s, b, st in todo), strict=True))
    done = [ran[t] if t in ran else cache[_cached(kind, n, t[1], t[2])] for t in tasks]
    if refs_file is not None:
        cache.update({_cached(kind, n, t[1], t[2]): r for t, r in ran.items() if t[3] == "random"})
        refs_file.write_text(json.dumps(cache, indent=1, sort_keys=True) + "\n")
    refs = [r["objective"] for (name, *_), r in zip(tasks, done, strict=True) if name != "default"]
    best = min(refs) if refs else None
    for (name, *_), r in zip(tasks, done, strict=True):
        vs = f"{r['objective'] / best:9.4f}" if best else "        -"
        emit(f"{kind:<10} {n:>6} {name:<10} {r['p']:>4} {r['restarts']:>8} {r['iterations']:>6} {r['status']:<11} "
             f"{r['cpu']:>8.1f} {r['wall']:>8.1f} {r['objective']:>13.6g} {r['ratio']:>7.4f} {vs}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=["prefix:1024", "all_range:1024", "prefix:4096", "prefix:8192"])
    ap.add_argument("--ref-restarts", type=int, default=3)
    ap.add_argument("--ref-factor", type=float, default=2.0, help="reference budget: this × the random start's default")
    ap.add_argument("--ref-iterations", type=int, default=None, help="reference budget in steps (overrides the factor)")
    ap.add_argument("--ref-max", type=int, default=8192)
    ap.add_argument("--jobs", type=int, default=1, help="runs of a case at once (joblib processes, one BLAS thread)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--refs", type=Path, default=None, metavar="JSON",
                    help="reuse reference runs recorded in this file, and record new ones there")
    ap.add_argument("--refs-only", action="store_true", help="run only the reference runs (to fill --refs)")
    ap.add_argument("--append", action="store_true", help="add the rows to --out (cases run in separate processes)")
    args = ap.parse_args(argv)
    lines = [f"# load average at start: {os.getloadavg()}; OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}; "
             f"reference: {args.ref_restarts} random-start runs (seeds 1..{args.ref_restarts}) with "
             + (f"{args.ref_iterations} steps" if args.ref_iterations else f"{args.ref_factor:g}× the random start's "
                "default budget"), HEAD, "-" * len(HEAD)]
    print("\n".join(lines), flush=True)

    def emit(line):
        lines.append(line)
        print(line, flush=True)
    for spec in args.cases:
        kind, n = spec.split(":")
        budget = args.ref_iterations or int(args.ref_factor * default_iterations(int(n), "random"))
        case(kind, int(n), args.ref_restarts, budget, args.ref_max, args.jobs, emit, args.refs, not args.refs_only)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.append and args.out.exists():
        with args.out.open("a") as f:
            f.write("\n".join([lines[0]] + lines[3:]) + "\n")
    else:
        args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
