"""Benchmark the BLAS thread setting of mmopt.optimize: OPENBLAS_NUM_THREADS set or not, blas_threads=None/1/2.

Notation: see README. Each row is a fresh Python process, so the environment variable takes effect when
OpenBLAS loads, as in a user's own script. "env" is the value of OPENBLAS_NUM_THREADS (and OMP_, MKL_)
the child starts with ("unset": BLAS picks one thread per core); "blas_threads" is optimize's parameter
("auto", the default: 1 for min_error, as configured for l2_approx; None: leave BLAS as configured);
"threads" is what threadpoolctl saw inside the call (one entry per distinct value over the BLAS libraries).

"evaluate" rows time ``mmopt.evaluate(all_range(n), hierarchical(n))`` the same way. ``--busy K`` runs K
busy-looping processes beside the benchmark (contention, as on a shared machine or under a parallel test run);
the load average printed at the top says how busy the machine was.

Run:  python benchmarks/bench_threads.py [--sizes 256] [--restarts 2] [--l2-sizes 1024 2048]
      [--evaluate-sizes 2048] [--busy 1]
"""

import argparse
import json
import os
import subprocess
import sys
import time

_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def child(method: str, n: int, blas_threads: str, restarts: int) -> None:
    """Run one optimize call and print a JSON line (in the child process)."""
    from threadpoolctl import threadpool_info

    import mmopt
    import mmopt.search.l2_fast
    import mmopt.search.min_error
    from mmopt import workload as wl

    seen: list[int] = []
    if method == "evaluate":
        limit = {"None": None, "auto": "auto"}[blas_threads] if blas_threads in ("None", "auto") else int(blas_threads)
        W, A = wl.all_range(n), mmopt.strategy.hierarchical(n)
        from mmopt._base import runtime as _runtime

        t0 = time.perf_counter()
        with _runtime.blas_threads(_runtime.check_blas_threads(limit, caller="bench")):
            seen.extend(sorted({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}))
            r = mmopt.error.evaluate(W, A, per_query=False)
        print(json.dumps({"seconds": time.perf_counter() - t0, "status": "ok", "objective": r.total_squared_error,
                          "threads": seen}))
        return
    module = mmopt.search.min_error if method == "min_error" else mmopt.search.l2_fast
    name = "solve" if method == "min_error" else "solve_l2"
    inner = getattr(module, name)

    def recording(*args, **kwargs):  # the method's own entry point, noting the BLAS threads it runs with
        if not seen:
            seen.extend(sorted({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}))
        return inner(*args, **kwargs)

    setattr(module, name, recording)
    W = wl.all_range(n)
    limit = {"None": None, "auto": "auto"}[blas_threads] if blas_threads in ("None", "auto") else int(blas_threads)
    options = {"restarts": restarts} if method == "min_error" else {"engine": "fast"}
    t0 = time.perf_counter()
    r = mmopt.optimize(W, method=method, seed=0, blas_threads=limit, options=options)
    print(json.dumps({"seconds": time.perf_counter() - t0, "status": r.status, "objective": r.objective,
                      "threads": seen}))


def run(method: str, n: int, env_value: str | None, blas_threads: str, restarts: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _VARS}
    if env_value is not None:
        env.update(dict.fromkeys(_VARS, env_value))
    cmd = [sys.executable, __file__, "--child", method, str(n), blas_threads, str(restarts)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:  # a failed child is a row saying why, not the end of the table
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return {"seconds": float("nan"), "status": f"error: {last[:80]}", "threads": []}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=4, metavar=("METHOD", "N", "BLAS_THREADS", "RESTARTS"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--sizes", type=int, nargs="*", default=[256], help="min_error on all ranges")
    parser.add_argument("--restarts", type=int, default=2)
    parser.add_argument("--l2-sizes", type=int, nargs="*", default=[1024, 2048], help="l2_approx (fast engine)")
    parser.add_argument("--evaluate-sizes", type=int, nargs="*", default=[2048], help="evaluate H2 on all ranges")
    parser.add_argument("--busy", type=int, default=0, help="busy-looping processes to run beside (contention)")
    args = parser.parse_args()
    if args.child:
        method, n, blas_threads, restarts = args.child
        child(method, int(n), blas_threads, int(restarts))
        return
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    try:
        _table(args)
    finally:
        for proc in busy:
            proc.kill()


def _table(args) -> None:
    print(f"cpus={os.cpu_count()} busy={args.busy} load={os.getloadavg()} caller env: "
          f"{ {k: os.environ.get(k, 'unset') for k in _VARS} }")
    head = f"{'method':>10} {'n':>5} {'env':>6} {'blas_threads':>12} {'threads':>8} {'seconds':>8} {'status':>11}"
    print(head)
    print("-" * len(head))
    configs = [(None, "auto"), (None, "None"), (None, "1"), (None, "2"), ("1", "None")]
    jobs = ([("min_error", n) for n in args.sizes] + [("l2_approx", n) for n in args.l2_sizes]
            + [("evaluate", n) for n in args.evaluate_sizes])
    for method, n in jobs:
        for env_value, blas_threads in configs:
            row = run(method, n, env_value, blas_threads, args.restarts)
            threads = "/".join(map(str, row["threads"]))
            print(f"{method:>10} {n:>5} {env_value or 'unset':>6} {blas_threads:>12} {threads:>8} "
                  f"{row['seconds']:>8.2f} {row['status']:>11}", flush=True)


if __name__ == "__main__":
    main()
