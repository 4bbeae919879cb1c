"""Residual strategies (ResidualPlanner) on marginal workloads up to d = 100: bound, objective, CPU, memory.

Run:  python benchmarks/bench_residual.py [--timeout 300] [--quick]
Unit-σ Gaussian total squared error Δ₂²·tr(WᵀW(AᵀA)⁺) (= optimize(..., norm="l2").objective) against the
certified lower bound optimize reports (on the marginal rows the exact SVD bound (Σσ)²/N). Methods:
  residual      optimize(W, method="residual", norm="l2") on mmopt's implicit marginals workload, end to end
                (closed form, exact re-evaluation through mmopt.evaluate, bound through mmopt.svd_bound);
  residual-api  the residual module alone (marginal_workload + plan + evaluate + svd_bound): no
                ImplicitWorkload, whose one Workload object per (term, attribute) is 16 million objects for
                3-way marginals on 100 attributes;
  marginals, auto  HDMM's OPT_M and the "auto" search, for d ≤ 16 only;
  kron, union   HDMM's OPT_⊗ and OPT_+ (prefix rows).
Prefix rows: the 1- and 2-way *prefix* marginals on (16,)⁵ (prefix on the chosen attributes, total on the others;
N = 2²⁰), where "residual" is the split strategy (a fitted basis of 1^⊥ per attribute) and the bound optimize's L2
dual bound, 109,688.6, above the SVD bound (102,459.5, from the 2,640 × 2,640 factor-root Gram). QuerySmasher
(He et al., arXiv 2604.00868) reports 121,469.
Every case runs in a fresh process; CPU is that process's user+system time for the step (building the
workload is listed apart), peak RSS its high-water mark (interpreter and numpy included, ~100 MB). Targets:
ratio ≤ 1 + 1e-9; ≤ 1 s CPU up to d = 30; 2-way on 100 attributes of size 8 in ≤ 60 s and ≤ 4 GB.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

# (label, shape, k, lower): all k-way marginals, or all ≤ k-way when lower.
TABLE = [("2-way", (4,) * 5, 2, False), ("0-3-way", (10,) * 6, 3, True), ("2-way", (50, 100, 7, 4, 2), 2, False),
         ("2-way", (75, 16, 5, 2, 20), 2, False), ("2-way", (8,) * 10, 2, False), ("2-way", (8,) * 16, 2, False)]
LARGE = [(f"{k}-way", (n,) * d, k, False) for k in (2, 3) for d in (30, 50, 100) for n in (2, 8)]
PREFIX = [("1+2-way prefix", (16,) * 5, 2, "prefix")]
IMPLICIT_LIMIT = 10**6  # terms × d factor objects above which the ImplicitWorkload is not built


def _sets(shape, k, lower):
    import itertools
    return [S for j in range(0 if lower else k, k + 1) for S in itertools.combinations(range(len(shape)), j)]


def _prefix(shape, k):
    """1- to k-way prefix marginals: prefix(nᵢ) on the chosen attributes, the total on the others."""
    import numpy as np

    from mmopt.structured import workloads as sw
    d = len(shape)
    terms = [sw.kron(*[np.tril(np.ones((shape[i],) * 2)) if i in S else np.ones((1, shape[i])) for i in range(d)])
             for S in _sets(shape, k, True) if S]
    return sw.union(terms, name=f"1-{k}-way prefix marginals")


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def _case(method, shape, k, lower, out) -> None:
    """Child process: run one case and send its row through ``out``."""
    import resource
    try:
        import mmopt
        from mmopt.structured import residual as rp
        from mmopt.structured import workloads as sw
        t0 = _cpu()
        if method == "residual-api":
            W = rp.marginal_workload(shape, _sets(shape, k, lower))
            build = _cpu() - t0
            t1 = _cpu()
            p = rp.plan(W)
            rep = rp.evaluate(W, p.strategy, norm="l2")
            row = {"objective": rep.total_squared_error, "bound": rp.svd_bound(W), "status": p.status,
                   "closure": len(W.closure)}
        else:
            W = _prefix(shape, k) if lower == "prefix" else (sw.lower_marginals if lower else sw.marginals)(shape, k)
            build = _cpu() - t0
            t1 = _cpu()
            r = mmopt.optimize(W, method=method, norm="l2", seed=0, verbose=False)
            closure = r.extra.get("closure_size") or (
                0 if lower == "prefix" else len(rp.as_marginal_workload(W, caller="bench").closure))
            row = {"objective": r.objective, "bound": r.lower_bound, "status": r.status, "closure": closure,
                   "chosen": r.method}
        row |= {"build": build, "cpu": _cpu() - t1,
                "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    except Exception as exc:  # noqa: BLE001 - a bench row reports what went wrong
        row = {"error": f"{type(exc).__name__}: {str(exc)[:120]}"}
    out.send(row)


def _run(method, shape, k, lower, timeout):
    ctx = mp.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_case, args=(method, shape, k, lower, send))
    proc.start()
    row = recv.recv() if recv.poll(timeout) else {"error": f"timeout after {timeout:.0f} s"}
    if proc.is_alive():
        proc.terminate()  # only the child this function started
    proc.join()
    return row


def _print(label, shape, method, row) -> None:
    d = len(shape)
    sizes = f"({shape[0]},)^{d}" if len(set(shape)) == 1 else str(shape)
    name = f"{label} {sizes}"
    if "error" in row:
        print(f"{name:<24} {d:>3} {'':>7} {method:<13} {row['error']}", flush=True)
        return
    ratio = row["objective"] / row["bound"]
    status = row["status"] + (f" ({row['chosen']})" if method == "auto" else "")
    print(f"{name:<24} {d:>3} {row['closure']:>7,} {method:<13} {row['bound']:>16.10g} {row['objective']:>16.10g} "
          f"{ratio - 1:>10.1e} {row['build']:>8.2f} {row['cpu']:>8.2f} {row['rss']:>8.0f}  {status}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per case (wall clock)")
    ap.add_argument("--quick", action="store_true", help="residual rows only")
    args = ap.parse_args()
    load = open("/proc/loadavg").read().split()[:3] if Path("/proc/loadavg").exists() else ["?"]
    print(f"cpus={os.cpu_count()} OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']} "
          f"load={' '.join(load)} date={time.strftime('%Y-%m-%d %H:%M')}")
    head = (f"{'workload':<24} {'d':>3} {'closure':>7} {'method':<13} {'bound':>16} {'objective':>16} "
            f"{'ratio-1':>10} {'build s':>8} {'CPU s':>8} {'peak MB':>8}  status")
    print(head)
    print("-" * len(head))
    for label, shape, k, kind in PREFIX:
        for method in ["residual"] + ([] if args.quick else ["kron", "union", "auto"]):
            _print(label, shape, method, _run(method, shape, k, kind, args.timeout))
    for label, shape, k, lower in TABLE + LARGE:
        d = len(shape)
        terms = len(_sets(shape, k, lower))
        methods = ["residual-api"]
        if terms * d <= IMPLICIT_LIMIT:
            methods.append("residual")
        if d <= 16 and not args.quick:
            methods += ["marginals", "auto"]
        for method in methods:
            _print(label, shape, method, _run(method, shape, k, lower, args.timeout))


if __name__ == "__main__":
    main()
