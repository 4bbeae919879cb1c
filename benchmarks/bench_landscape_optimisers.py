"""Eigen-design, the Low-Rank Mechanism and data cubes against mmopt's own optimisers: objective, bound, seconds.

Run:  python benchmarks/bench_landscape_optimisers.py [--sizes 64 256 1024] [--lrm-max 256] [--min-error-max 256]
1-D rows (prefix and all ranges): every objective is the exact unit-privacy total from mmopt.optimize.
Eigen-design is scored in L2 (its own noise) against l2_approx (Program 5.2, the certified (ε,δ) optimum):
"vs ref" = objective / l2_approx's. LRM is scored in L1 (ε-DP) against min_error (mmopt's ε-DP heuristic)
where it runs (n ≤ --min-error-max) and H₂ always: "vs ref" = objective / min_error's, else / H₂'s.
"ratio" = objective / the proven lower bound (SVD bound, raised to l2_approx's dual bound where computed).
Marginal rows: datacube (Ding et al.) against OPT_M (HDMM, 50 restarts) and the residual strategy under
ε-DP, and the identity, on 2-way marginals; "vs ref" = objective / OPT_M's. BLAS on one thread.
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
from mmopt import structured as S  # noqa: E402
from mmopt import workload as wl  # noqa: E402

HEAD = (f"{'workload':<22} {'n':>6} {'method':<13} {'norm':<4} {'objective':>13} {'ratio':>8} {'vs ref':>7} "
        f"{'reference':<12} {'status':<18} {'wall s':>8} {'CPU s':>8}")


def _row(name, n, res, ref, ref_name, seconds):
    vs = f"{res.objective / ref:7.3f}" if ref else "      -"
    print(f"{name:<22} {n:>6} {res.method:<13} {res.norm:<4} {res.objective:>13.6g} {res.ratio:>8.3f} {vs} "
          f"{ref_name:<12} {res.status:<18} {seconds[0]:>8.2f} {seconds[1]:>8.2f}", flush=True)


def _cpu() -> float:
    """CPU seconds of this process and its finished children (joblib workers, if any)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _timed(W, **kw):
    t0, c0 = time.perf_counter(), _cpu()
    res = mmopt.optimize(W, verbose=False, **kw)
    return res, (time.perf_counter() - t0, _cpu() - c0)


def one_d(sizes, lrm_max, min_error_max, lrm_iterations):
    for n in sizes:
        for W in (wl.prefix(n), wl.all_range(n)):
            l2, s = _timed(W, method="l2_approx")
            _row(W.name, n, l2, None, "", s)
            eig, s = _timed(W, method="eigen_design")
            _row(W.name, n, eig, l2.objective, "l2_approx", s)
            h2, s = _timed(W, method="hierarchical")
            _row(W.name, n, h2, None, "", s)
            ref, ref_name = h2.objective, "H2"
            if n <= min_error_max:
                me, s = _timed(W, method="min_error", seed=0)
                _row(W.name, n, me, h2.objective, "H2", s)
                ref, ref_name = me.objective, "min_error"
            if n <= lrm_max:
                lrm, s = _timed(W, method="lrm", max_iterations=lrm_iterations)
                _row(W.name, n, lrm, ref, ref_name, s)


def marginals(shapes):
    eps = mmopt.Privacy(1.0)
    for shape in shapes:
        W = S.marginals(shape, 2)
        N = W.domain_size
        opt_m, s = _timed(W, method="marginals", privacy=eps, seed=0)
        _row(W.name, N, opt_m, None, "", s)
        for method in ("datacube", "residual"):
            res, s = _timed(W, method=method, privacy=eps)
            _row(W.name, N, res, opt_m.objective, "OPT_M", s)
        ident = mmopt.evaluate(W, S.kron_strategy(*[mmopt.strategy.identity(k) for k in shape]), norm="l1")
        print(f"{W.name:<22} {N:>6} {'identity':<13} {'l1':<4} {ident.total_squared_error:>13.6g} "
              f"{ident.total_squared_error / opt_m.lower_bound:>8.3f} "
              f"{ident.total_squared_error / opt_m.objective:7.3f} {'OPT_M':<12} {'closed_form':<18} {'-':>8} {'-':>8}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--lrm-max", type=int, default=256, help="largest n for LRM (O(n⁴): ~hours at 1,024)")
    ap.add_argument("--lrm-iterations", type=int, default=2000)
    ap.add_argument("--min-error-max", type=int, default=256)
    args = ap.parse_args(argv)
    print(f"# load average at start: {os.getloadavg()}; OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}; "
          "wall and CPU seconds (CPU: this process and its children)")
    print(HEAD)
    print("-" * len(HEAD))
    one_d(args.sizes, args.lrm_max, args.min_error_max, args.lrm_iterations)
    marginals([(10,) * 5, (8,) * 6, (2,) * 10, (16, 16, 16, 16)])


if __name__ == "__main__":
    main()
