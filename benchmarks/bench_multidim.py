"""Time and peak memory of the structured layer (mmopt.structured) on multi-dimensional workloads.

Run:  python benchmarks/bench_multidim.py [--cases build_eval mechanism] [--runs 20]
Each case runs in its own subprocess; peak memory is that process's ru_maxrss (includes the interpreter
and numpy, ≈ 60–100 MB). Rows: building the workload, evaluate of product strategies (identity factors,
H2 factors), the SVD bound; then the mechanism (1000×1000 cells with a product strategy, sf1_plus with a
union strategy): seconds per reconstruction and Monte-Carlo mean squared error over ``--runs`` runs
against the implicit evaluate (z = (MC mean − expected) / standard error).
Targets on the 2-core machine: each step < 10 s and 2 GB; reconstruction < 60 s and 4 GB.
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
# Factors are small (≤ ~2000 rows): a two-thread BLAS on a shared 2-core machine only waits (measured
# 100× slower SVDs under load). Export OPENBLAS_NUM_THREADS to override.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

WORKLOADS = ("sf1_persons", "sf1_plus", "prefix_3d_256", "marginals_10x10_k3")


def _build(name):
    from mmopt.structured import census, workloads
    if name == "prefix_3d_256":
        return census.prefix_3d(256)
    if name == "marginals_10x10_k3":
        return workloads.lower_marginals((10,) * 10, 3)
    return getattr(census, name)()


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_build_eval(name: str) -> list[dict]:
    import mmopt
    from mmopt import strategy as st
    from mmopt.structured import analysis, bounds
    from mmopt.structured import strategies as ss
    eps1, rows = mmopt.Privacy(1.0), []
    t = time.perf_counter()
    W = _build(name)
    rows.append(dict(case=name, step="build", seconds=time.perf_counter() - t, value=W.n_queries,
                     note=f"N={W.domain_size:.3g} m={W.n_queries} terms={len(W.terms)}"))
    for label, make in (("identity", st.identity), ("H2", st.hierarchical)):
        A = ss.kron_strategy(*[make(n) for n in W.shape], name=label)
        t = time.perf_counter()
        r = analysis.evaluate(W, A, eps1)
        rows.append(dict(case=name, step=f"evaluate {label}", seconds=time.perf_counter() - t,
                         value=r.total_squared_error, note=f"rmse={r.rmse:.4g} max={r.max_variance:.4g} {r.method}"))
    t = time.perf_counter()
    b = bounds.svd_bound(W, eps1)
    rows.append(dict(case=name, step="svd_bound", seconds=time.perf_counter() - t, value=b.value,
                     note=f"{b.method} exact={b.exact}"))
    return rows


def run_mechanism(name: str, runs: int) -> list[dict]:
    import numpy as np

    import mmopt
    from mmopt import strategy as st
    from mmopt import workload as wl
    from mmopt.structured import census, mechanism
    from mmopt.structured import strategies as ss
    from mmopt.structured import workloads as sw
    eps1 = mmopt.Privacy(1.0)
    if name == "product_1000x1000":
        W = sw.kron(wl.prefix(1000), wl.prefix(1000))
        A = ss.kron_strategy(st.hierarchical(1000), st.hierarchical(1000), name="H2⊗H2")
    else:
        W = census.sf1_plus()
        A = ss.marginals_strategy(W.shape, {(0, 1, 2, 3, 4): 1.0, (0, 1, 2, 3): 0.5, (4,): 1.0, (): 1.0},
                                  name="M(θ) union")
    x = np.random.default_rng(0).poisson(3.0, W.shape).astype(float)
    truth = mechanism.answer(W, x)
    t = time.perf_counter()
    out = mechanism.matrix_mechanism(W, A, x, eps1, rng=1, size=runs)
    sec = time.perf_counter() - t
    err = np.sum((out.answers - truth) ** 2, axis=1)
    se = err.std(ddof=1) / np.sqrt(runs)
    return [dict(case=name, step=f"mechanism x{runs} ({A.name}, {out.solve.method} it={out.solve.iterations})",
                 seconds=sec, value=float(err.mean()),
                 note=f"per run {sec / runs:.2f}s; expected {out.expected_total:.6g}; "
                      f"z={(err.mean() - out.expected_total) / se:+.2f}")]


def _child(args) -> int:
    rows = run_mechanism(args.child, args.runs) if args.kind == "mechanism" else run_build_eval(args.child)
    for r in rows:
        r["peak_mb"] = _maxrss_mb()
    print(json.dumps(rows))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="+", default=["build_eval", "mechanism"])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--kind", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return _child(args)
    print(f"cpus={os.cpu_count()} OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')} "
          f"load={os.getloadavg()[0]:.2f}")
    jobs = [("build_eval", w) for w in WORKLOADS] if "build_eval" in args.cases else []
    jobs += [("mechanism", m) for m in ("product_1000x1000", "sf1_plus_union")] if "mechanism" in args.cases else []
    print(f"{'case':<20} {'step':<44} {'seconds':>8} {'peak MB':>8}  {'value':>14}  note")
    for kind, name in jobs:
        proc = subprocess.run([sys.executable, __file__, "--child", name, "--kind", kind, "--runs", str(args.runs)],
                              capture_output=True, text=True, check=False)
        if proc.returncode:
            print(f"{name}: FAILED\n{proc.stderr[-2000:]}")
            continue
        for r in json.loads(proc.stdout.strip().splitlines()[-1]):
            print(f"{r['case']:<20} {r['step']:<44} {r['seconds']:8.2f} {r['peak_mb']:8.0f}  {r['value']:14.6g}  "
                  f"{r['note']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
