"""optimize(method="auto") on issue 28's table: 1-D, products, marginals and census workloads, both noises.

Run:  python benchmarks/bench_auto.py [--only prefix1024,sf1] [--budget default] [--timeout 900] [--out FILE]
                                      [--hdmm PATH_TO_HDMM_SRC] [--refs benchmarks/results/bench_auto_refs.json]
Each (workload, noise) runs in a fresh process with one BLAS thread. Columns: the unit-privacy objective
Δ²·tr(G X⁺) of the chosen strategy (exact, or "≤" a certified upper value); the result's lower bound and their
ratio; the reference and the objective's ratio to it; CPU s (time.process_time of the optimize call) and the
process's peak RSS; the chosen candidate; every candidate run (objective, CPU s) and every one skipped.
References (unit privacy), from ``--refs`` (a JSON file this script writes to and reads from):

* ε-DP 1-D rows: HDMM's OPT_0 (its ``PIdentity(n/16, n)`` template, L-BFGS-B with its ftol 1e-4), the best of 5
  seeds, exact error of its strategy; measured with ``--hdmm`` pointing at a checkout of HDMM's ``src``
  (dpcomp-org/hdmm; run, not copied) and cached;
* Gaussian prefix(4,096): the certified optimum (``solve_dual`` to a gap of 1e-9, its primal);
* products and marginals under Gaussian noise: ``auto`` on main ab9f780 (before issue 28), measured and cached;
* census ε-DP rows: HDMM's own code on this machine (KronPIdentity / Marginals, 5 restarts).
Each case's address space is capped (--memory-gb, default 6): a case past it fails with MemoryError.
"""

from __future__ import annotations

import argparse
import functools
import itertools
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

REFS = Path(__file__).resolve().parent / "results" / "bench_auto_refs.json"
# (workload, noise): what each row is held to (issue 28's "done when" table)
ROWS = [("prefix1024", "l1"), ("random_range512", "l1"), ("random_range1024", "l1"), ("width32_256", "l1"),
        ("prefix4096", "l2"), ("stream_prefix4096", "l2"), ("stream_prefix4096", "l1"), ("all_range3000", "l1"),
        ("stream_prefix5000", "l1"), ("prefix5000", "l1"), ("stream_prefix1e7", "l1"),
        ("stream_prefix1e7", "l2"), ("stream_range1e7", "l2"),
        ("ranges_2d64", "l2"), ("prefix_3d16", "l2"), ("range_union64", "l2"),
        ("prefix_marginals16x10", "l2"), ("prefix_marginals32x4", "l2"),
        ("marginals2_8x30", "l2"), ("marginals3_8x100", "l2"),
        *[(w, n) for w in ("sf1", "sf1_plus", "adult_w1", "adult_w2", "cps_w1", "cps_w2", "ranges_2d32")
          for n in ("l2", "l1")]]
# HDMM's own code on this machine, ε-DP total at ε = 1 (benchmarks/bench_multidim_optimize.py), as unit values.
HDMM_CENSUS = {"sf1": 225_127 / 2, "sf1_plus": 22_581_543 / 2, "adult_w2": 315_883 / 2, "cps_w1": 14_471_175 / 2,
               "cps_w2": 992_128_907 / 2, "adult_w1": 15_360_000 / 2}


def _width_ranges(n: int, w: int):
    import numpy as np

    from mmopt import workload as wl
    W = np.zeros((n - w + 1, n))
    for i in range(n - w + 1):
        W[i, i:i + w] = 1.0
    return wl.Workload.from_matrix(W, name=f"width{w}({n})")


def _prefix_marginals(shape, k: int = 2):
    """1- to k-way prefix marginals: prefix(nᵢ) on the chosen attributes, the total on the others."""
    import numpy as np

    from mmopt.structured import workloads as sw
    d = len(shape)
    sets = [S for j in range(1, k + 1) for S in itertools.combinations(range(d), j)]
    return sw.union([sw.kron(*[np.tril(np.ones((shape[i],) * 2)) if i in S else np.ones((1, shape[i]))
                               for i in range(d)]) for S in sets], name=f"1-{k}-way prefix marginals {shape}")


def workload(name: str):
    import numpy as np

    from mmopt import toeplitz
    from mmopt import workload as wl
    from mmopt.structured import census
    from mmopt.structured import workloads as sw
    builders = {
        "prefix1024": lambda: wl.prefix(1024), "random_range512": lambda: wl.random_range(512, 2000, seed=0),
        "random_range1024": lambda: wl.random_range(1024, 2000, seed=0),
        "width32_256": lambda: _width_ranges(256, 32), "prefix4096": lambda: wl.prefix(4096),
        "stream_prefix4096": lambda: toeplitz.prefix(4096), "stream_prefix5000": lambda: toeplitz.prefix(5000),
        "prefix5000": lambda: wl.prefix(5000), "stream_prefix1e7": lambda: toeplitz.prefix(10**7),
        "stream_range1e7": lambda: toeplitz.all_range(10**7),
        "ranges_2d64": lambda: census.ranges_2d(64),
        "prefix_3d16": lambda: census.prefix_3d(16),
        "range_union64": lambda: sw.union([sw.kron(sw.all_range(64), np.eye(64)),
                                           sw.kron(np.eye(64), sw.all_range(64))], name="R⊗I ∪ I⊗R (64²)"),
        "prefix_marginals16x10": lambda: _prefix_marginals((16,) * 10),
        "prefix_marginals32x4": lambda: _prefix_marginals((32,) * 4),
        "marginals2_8x30": lambda: sw.marginals((8,) * 30, 2), "marginals3_8x100": lambda: sw.marginals((8,) * 100, 3),
        "ranges_2d32": lambda: census.ranges_2d(32), "all_range3000": lambda: wl.all_range(3000),
    }
    return builders[name]() if name in builders else getattr(census, name)()


def run_case(name: str, norm: str, seed: int, budget: str | None) -> dict:
    """One optimize call, timed; returns a JSON-able row."""
    import mmopt
    W = workload(name)
    privacy = mmopt.Privacy(1.0) if norm == "l1" else mmopt.Privacy(1.0, 1e-6)
    c0, w0 = time.process_time(), time.perf_counter()
    r = mmopt.optimize(W, privacy=privacy, seed=seed, verbose=False, budget=budget)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    cands = {k: {"objective": v["objective"], "cpu": v["cpu"], "estimate": v["estimate"], "exact": v["exact"]}
             for k, v in r.extra.get("candidates", {}).items()}
    return {"workload": name, "N": W.domain_size, "norm": norm, "objective": r.objective, "bound": r.lower_bound,
            "bound_exact": bool(r.extra.get("bound_exact", True)),
            "bound_method": r.extra.get("bound_method", "svd"), "exact": bool(r.extra.get("total_exact", True)),
            "cpu": cpu, "wall": wall, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "method": r.method, "status": r.status, "candidates": cands, "skipped": sorted(r.extra.get("skipped", {})),
            "failed": sorted(r.extra.get("failed", {}))}


def hdmm_reference(name: str, path: str, restarts: int = 5) -> dict:
    """HDMM's OPT_0 on a 1-D workload: its PIdentity template from HDMM's own source at ``path``, best of seeds."""
    import numpy as np
    sys.path.insert(0, path)
    from hdmm import templates
    from hdmm import workload as hw
    W = workload(name)
    G = W.mean_gram * W.n_queries
    n, best, c0 = G.shape[0], np.inf, time.process_time()
    for s in range(restarts):
        T = templates.PIdentity(max(1, n // 16), n, seed=s)
        T.optimize(hw.ExplicitGram(G))
        A = T.strategy().dense_matrix()
        best = min(best, float(np.abs(A).sum(0).max() ** 2 * np.trace(np.linalg.solve(A.T @ A, G))))
    return {"objective": best, "cpu": time.process_time() - c0, "what": f"HDMM OPT_0, best of {restarts} seeds"}


def certified_reference(name: str) -> dict:
    from mmopt.toeplitz.dual import solve_dual
    c0 = time.process_time()
    sol = solve_dual(workload(name), tol=1e-9, max_iterations=400)
    return {"objective": sol.primal, "cpu": time.process_time() - c0, "what": f"certified optimum (gap {sol.gap:.1e})"}


def _cap(gigabytes: float) -> None:
    limit = int(gigabytes * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _reference(row: dict, refs: dict) -> tuple[str, str]:
    key = f"{row['workload']}:{row['norm']}"
    if key in refs:
        return f"{refs[key]['objective']:,.1f}", f"{row['objective'] / refs[key]['objective']:.4f}"
    if row["norm"] == "l1" and row["workload"] in HDMM_CENSUS:
        ref = HDMM_CENSUS[row["workload"]]
        return f"{ref:,.1f}", f"{row['objective'] / ref:.4f}"
    return "", ""


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--budget", default=None, help="optimize's budget (default: its default)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per case (a fresh process)")
    ap.add_argument("--only", default=None, help="comma-separated workload names (default: every row)")
    ap.add_argument("--memory-gb", type=float, default=6.0, help="address-space cap per case (a fresh process)")
    ap.add_argument("--hdmm", default=None, help="HDMM's src folder: (re)measure the ε-DP 1-D references")
    ap.add_argument("--refs", default=str(REFS), help="the references' JSON cache")
    ap.add_argument("--out", default=None, help="also write the table here")
    ap.add_argument("--case", nargs=2, metavar=("WORKLOAD", "NORM"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    from mmopt.cli.output import budget_arg
    budget = budget_arg(args.budget)
    if args.case:
        print(json.dumps(run_case(*args.case, args.seed, budget)))
        return
    refs_path = Path(args.refs)
    refs = json.loads(refs_path.read_text(encoding="utf-8")) if refs_path.exists() else {}
    rows = [r for r in ROWS if args.only is None or r[0] in args.only.split(",")]
    for name, norm in rows:  # references this run can make (cached)
        key = f"{name}:{norm}"
        if key not in refs and name == "prefix4096":
            refs[key] = certified_reference(name)
        if key not in refs and norm == "l1" and args.hdmm and name in ("prefix1024", "random_range512",
                                                                          "random_range1024", "width32_256"):
            refs[key] = hdmm_reference(name, args.hdmm)
    refs_path.write_text(json.dumps(refs, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    refs["stream_prefix4096:l2"] = refs.get("prefix4096:l2", {"objective": float("nan")})
    lines = [f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, OPENBLAS_NUM_THREADS="
             f"{os.environ.get('OPENBLAS_NUM_THREADS')}, load average {os.getloadavg()[0]:.1f}, budget "
             f"{args.budget or 'default'}",
             f"{'workload':<22} {'N':>12} {'noise':<5} {'objective':>17} {'bound':>15} {'ratio':>8} {'reference':>15} "
             f"{'vs ref':>7} {'CPU s':>6} {'RSS MB':>6} {'chosen':<22} candidates run (objective, CPU s) | skipped"]
    lines.append("-" * 170)
    print("\n".join(lines), flush=True)
    for name, norm in rows:
        cmd = [sys.executable, __file__, "--case", name, norm, "--seed", str(args.seed)]
        cmd += ["--budget", args.budget] if args.budget else []
        noise = "Lap" if norm == "l1" else "Gauss"
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, check=True,
                                 preexec_fn=functools.partial(_cap, args.memory_gb))
            row = json.loads(out.stdout.strip().splitlines()[-1])
        except subprocess.TimeoutExpired:
            line = f"{name:<22} {'':>12} {noise:<5} did not finish within {args.timeout:.0f} s"
        except subprocess.CalledProcessError as exc:
            last = [x for x in exc.stderr.strip().splitlines() if "Error" in x] or ["killed"]
            line = f"{name:<22} {'':>12} {noise:<5} failed (rc {exc.returncode}): {last[-1][:100]}"
        else:
            cands = ", ".join(f"{k} {'' if v['exact'] else '≤'}{v['objective']:,.0f} {v['cpu']:.1f}"
                              for k, v in row["candidates"].items())
            cands += "".join(f", {k} failed" for k in row["failed"])
            cands += f" | {', '.join(row['skipped'])}" if row["skipped"] else ""
            ref, vs = _reference(row, refs)
            mark = "" if row["exact"] else "≤"
            tag = "†" if row.get("bound_method") == "dual_product" else ("" if row["bound_exact"] else "*")
            bound = f"{row['bound']:,.1f}" + tag
            line = (f"{name:<22} {row['N']:>12,} {noise:<5} {mark + format(row['objective'], ',.1f'):>17} "
                    f"{bound:>15} {row['objective'] / row['bound']:>8.4f} {ref:>15} {vs:>7} {row['cpu']:>6.1f} "
                    f"{row['rss_mb']:>6.0f} {row['method']:<22} {cands}")
        print(line, flush=True)
        lines.append(line)
    lines.append("* a proven lower bound below the SVD bound (the exact one is out of reach for this union)")
    lines.append("† the certified L2 Lagrange-dual bound at product cell weights (valid under both noises) "
                 "(mmopt.structured.dual_bound)")
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
