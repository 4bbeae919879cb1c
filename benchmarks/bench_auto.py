"""optimize(method="auto") on HDMM's census workloads and 2-D ranges 32×32, both noises: error, bound, CPU.

Run:  python benchmarks/bench_auto.py [--seed 0] [--timeout 600] [--only sf1,ranges_2d] [--method auto] [--out FILE]
Each (workload, norm) runs in a fresh process with one BLAS thread; "CPU s" is that process's CPU time for the
optimize call (time.process_time), "wall s" its elapsed time on this shared machine. "objective" is the unit-
privacy total Δ²·tr(G X⁺) of the chosen strategy (exact, or "≤" a certified upper value); "bound" the result's
lower bound (SVD bound or better, e.g. the L2 optimum's dual bound), "ratio" their quotient, "/SVD" the
ratio to the SVD bound itself. ε-DP references: HDMM's own code on this machine
(KronPIdentity / Marginals, 5 restarts; total at ε = 1 is 2× the unit value) for the census workloads, and
HDMM's best of 25 restarts on 2-D ranges 32×32 (6.5033× the SVD bound); HDMM's CPU time on sf1 is ≈ 5.2 s.
The candidates column lists every candidate's objective and seconds (a failed one is marked "failed").
Each case's address space is capped (--memory-gb, default 6): a case past it fails with MemoryError.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

CASES = ("sf1", "sf1_plus", "adult_w1", "adult_w2", "cps_w1", "cps_w2", "ranges_2d")
# HDMM on this machine, ε-DP total at ε = 1 (benchmarks/bench_multidim_optimize.py), as unit values.
HDMM_UNIT = {"sf1": 225_127 / 2, "sf1_plus": 22_581_543 / 2, "adult_w2": 315_883 / 2, "cps_w1": 14_471_175 / 2,
             "cps_w2": 992_128_907 / 2, "adult_w1": 15_360_000 / 2}
HDMM_RANGES_RATIO = 6.5033


def _workload(name: str):
    from mmopt.structured import census
    return census.ranges_2d(32) if name == "ranges_2d" else getattr(census, name)()


def run_case(name: str, norm: str, seed: int, method: str = "auto") -> dict:
    """One optimize call, timed; returns a JSON-able row."""
    import mmopt
    W = _workload(name)
    c0, w0 = time.process_time(), time.perf_counter()
    r = mmopt.optimize(W, method=method, norm=norm, seed=seed, verbose=False)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    cands = {k: {"objective": v["objective"], "seconds": v["seconds"], "exact": v["exact"]}
             for k, v in r.extra.get("candidates", {}).items()}
    return {"workload": name, "N": W.domain_size, "norm": norm, "objective": r.objective, "bound": r.lower_bound,
            "svd": float(mmopt.svd_bound(W)),
            "exact": bool(r.extra.get("total_exact", True)), "cpu": cpu, "wall": wall, "method": r.method,
            "candidates": cands, "failed": sorted(r.extra.get("failed", {}))}


def _cap(gigabytes: float) -> None:
    """Limit the case's address space, so that a runaway candidate fails with MemoryError in its own process
    instead of waking the kernel's OOM killer on a shared machine."""
    limit = int(gigabytes * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _reference(row: dict) -> str:
    if row["norm"] != "l1":
        return ""
    if row["workload"] == "ranges_2d":
        return f"{row['objective'] / row['svd'] / HDMM_RANGES_RATIO:.3f}"  # HDMM's figure is against the SVD bound
    ref = HDMM_UNIT.get(row["workload"])
    return "" if ref is None else f"{row['objective'] / ref:.3f}"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per case (a fresh process)")
    ap.add_argument("--only", default=",".join(CASES))
    ap.add_argument("--norms", default="l2,l1")
    ap.add_argument("--method", default="auto", help="the optimize method (default auto)")
    ap.add_argument("--memory-gb", type=float, default=6.0, help="address-space cap per case (a fresh process)")
    ap.add_argument("--out", default=None, help="also write the table here")
    ap.add_argument("--case", nargs=2, metavar=("WORKLOAD", "NORM"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.case:
        print(json.dumps(run_case(*args.case, args.seed, args.method)))
        return
    lines = [f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, OPENBLAS_NUM_THREADS="
             f"{os.environ.get('OPENBLAS_NUM_THREADS')}, load average {os.getloadavg()[0]:.1f}",
             f"{'workload':<10} {'N':>9} {'norm':<4} {'objective':>15} {'bound':>13} {'ratio':>8} {'/SVD':>8} "
             f"{'vs HDMM':>8} "
             f"{'CPU s':>7} {'wall s':>7} {'chosen':<24} candidates (objective, s)"]
    lines.append("-" * 140)
    print("\n".join(lines), flush=True)
    for name in args.only.split(","):
        for norm in args.norms.split(","):
            cmd = [sys.executable, __file__, "--case", name, norm, "--seed", str(args.seed), "--method", args.method]
            try:
                out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, check=True,
                                     preexec_fn=functools.partial(_cap, args.memory_gb))
                row = json.loads(out.stdout.strip().splitlines()[-1])
            except subprocess.TimeoutExpired:
                line = f"{name:<10} {'':>9} {norm:<4} did not finish within {args.timeout:.0f} s"
            except subprocess.CalledProcessError as exc:
                last = [x for x in exc.stderr.strip().splitlines() if "Error" in x] or ["killed"]
                line = f"{name:<10} {'':>9} {norm:<4} failed (rc {exc.returncode}): {last[-1][:100]}"
            else:
                cands = ", ".join(f"{k} {'' if v['exact'] else '≤'}{v['objective']:,.0f} {v['seconds']:.1f}s"
                                  for k, v in row["candidates"].items())
                cands += "".join(f", {k} failed" for k in row["failed"])
                mark = "" if row["exact"] else "≤"
                line = (f"{name:<10} {row['N']:>9,} {norm:<4} {mark + format(row['objective'], ',.1f'):>15} "
                        f"{row['bound']:>13,.1f} {row['objective'] / row['bound']:>8.4f} "
                        f"{row['objective'] / row['svd']:>8.4f} {_reference(row):>8} "
                        f"{row['cpu']:>7.1f} {row['wall']:>7.1f} {row['method']:<24} {cands}")
            print(line, flush=True)
            lines.append(line)
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
