"""Private training's prefix sums under multiple participations: mmopt against Google's jax_privacy.

Run:  python benchmarks/bench_participation.py [--n 1024 2048 4096] [--k 1 4 8 16] [--big] [--jax-python PATH]
      [--jax-cache DIR] [--beta 0.9]   (momentum rows: saved to results/bench_participation_momentum.txt)
jax_privacy is never a dependency of mmopt: its half (benchmarks/_jax_participation.py) runs under a separate
venv (``python3 -m venv /work/jaxvenv && /work/jaxvenv/bin/pip install jax jax_privacy``; ``--jax-python`` or
$MMOPT_JAX_PYTHON points at its interpreter) and saves its strategies to ``--jax-cache`` (reused when present, so
the two halves may run apart); this script evaluates every strategy with mmopt's exact sensitivity and error.

Workload: prefix sums of n steps, W lower-triangular ones; schema: k fixed epochs (b = n/k), and for the compact
families also the (k, b) minimum separation. "error" is the total squared error at unit σ,
Δ²·‖W C⁻¹‖²_F (jax_privacy's mean loss × n), with Δ² mmopt's exact sensitivity under the schema ("Δ² jax/exact":
jax_privacy's own sensitivity² of the same C over mmopt's, ≥ 1: its |X| bound); "bound" mmopt's certified lower
bound under fixed epochs (a valid bound under the larger minimum-separation schema too; in the minsep rows the
larger of it and the cutting planes' certified dual), "ratio" error/bound;
"CPU s" time.process_time of the optimisation (all threads; jax runs XLA on both cores; mmopt's certified
optimum with tol = 1e-5: mmopt.participation.tridiagonal, O(n·k²) per step). "row-weighted banded" is
mmopt.participation.weighted (b bands, row weights chosen for fixed epochs; exact sensitivity and error under
both schemas, as it has at most b bands).
"mmopt optimize (auto)" (minsep, n ≤ 4,096) is ``mmopt.optimize(prefix(n), participation=min_separation(b, k))``
with its default budgets (cutting planes up to 512 steps, the chain dual, the free banded and 2b-band strategies;
past 2,048 steps the banded strategies and the 2b-band strategy refined to n/2, carried to n and equalised,
with the rest of 110 s: mmopt.family.training_separation); its error uses its Δ² (exact, or the chain's proven
upper bound), its bound is its certified one; its gap, status, lower-bound method and the load average are listed
under the table (``--no-minsep-route`` skips it).
``--big`` adds n = 2¹⁶, k = 16, where no certified optimum runs: "bound" is then the proven diagonal bound of
mmopt.participation.bound (0.993–0.997 of the certified optimum where both run, n ≤ 4,096).
ML notation: with noise multiplier z (σ = z·clip norm C_clip) and batch size B,
jax_privacy's mean loss of the gradient average is z²·C_clip²·error/(n·B²).

``--beta β`` (> 0): the workload is heavy-ball momentum SGD, W = T(a), a_k = Σ_{j≤k} β^j (mmopt's
``participation.momentum``, jax_privacy's ``momentum_sgd_matrix``), dense (n ≤ 4,096); mmopt's rows are its
certified optimum and its banded Toeplitz strategy with b row-scaled bands (``method="banded"``), jax_privacy's
its dense optimiser and its column-normalised banded family (``banded.optimize(A=momentum_sgd_matrix(β))``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import scipy.linalg  # noqa: E402

HERE = Path(__file__).resolve().parent
TOL = 1e-5  # the certified optimum's target gap (optimize's default is 1e-4)


def dense_error(C: np.ndarray, W: np.ndarray | None = None) -> float:
    """‖W C⁻¹‖²_F; for the prefix W (None) W C⁻¹ = cumsum of C⁻¹'s rows."""
    Ci = scipy.linalg.solve_triangular(C, np.eye(C.shape[0]), lower=True)
    return float(np.sum(np.cumsum(Ci, axis=0) ** 2)) if W is None else float(np.sum((W @ Ci) ** 2))


def _tag(n: int, k: int, beta: float) -> str:
    return f"n{n}_k{k}" + (f"_beta{beta:g}" if beta > 0 else "")


def jax_half(n: int, k: int, python: str, cache: Path, dense_max: int, beta: float = 0.0) -> dict:
    path = cache / f"jax_{_tag(n, k, beta)}.npz"
    if not path.exists():
        skip = ["--skip", "dense"] if n > dense_max else []
        extra = ["--beta", str(beta)] if beta > 0 else []
        subprocess.run([python, str(HERE / "_jax_participation.py"), str(n), str(k), str(path), *skip, *extra],
                       check=True)
    return dict(np.load(path))


def momentum_rows(n: int, k: int, beta: float, python: str, cache: Path, dense_max: int, reuse: bool,
                  run_jax: bool) -> list[dict]:
    """The momentum workload's rows: mmopt's certified optimum and banded strategies, jax_privacy's dense and
    column-normalised banded, every one scored by mmopt's exact sensitivity under the schema and dense error."""
    import mmopt
    from mmopt.participation import fixed_epochs, min_separation, momentum, sensitivity_squared

    b = n // k
    fe, ms = fixed_epochs(k), min_separation(b, k)
    W = momentum(n, beta)
    path = cache / f"mmopt_{_tag(n, k, beta)}.json"
    if reuse and path.exists():
        out = json.loads(path.read_text())
    else:
        t = time.process_time()
        res = mmopt.optimize(W, participation=fe, tol=TOL)
        out = [{"method": "mmopt certified optimum", "schema": "fixed", "error": res.objective,
                "sec": time.process_time() - t, "jax_over_exact": float("nan"), "bound": res.lower_bound}]
        for schema, name in ((fe, "fixed"), (ms, "minsep")):
            t = time.process_time()
            r = mmopt.optimize(W, participation=schema, method="banded")
            out.append({"method": f"mmopt banded ({b} bands)", "schema": name, "error": r.objective,
                        "sec": time.process_time() - t, "jax_over_exact": float("nan"), "bound": res.lower_bound})
        path.write_text(json.dumps(out))
    bound = out[0]["bound"]
    if run_jax or (cache / f"jax_{_tag(n, k, beta)}.npz").exists():
        jax = jax_half(n, k, python, cache, dense_max, beta)
        if "dense_C" in jax:
            C = jax["dense_C"]
            s = sensitivity_squared(C, fe)
            out.append({"method": "jax dense", "schema": "fixed", "error": s.squared * dense_error(C, W.matrix),
                        "sec": float(jax["dense_seconds"]), "jax_over_exact": float(jax["dense_sens2"]) / s.squared,
                        "bound": bound})
        C = jax["banded_C"]
        for schema, name in ((fe, "fixed"), (ms, "minsep")):
            s = sensitivity_squared(C, schema)
            out.append({"method": f"jax banded ({b} bands)", "schema": name,
                        "error": s.squared * dense_error(C, W.matrix), "sec": float(jax["banded_seconds"]),
                        "jax_over_exact": float("nan"), "bound": bound})
    return [row | {"n": n, "k": k} for row in out]


def mmopt_half(n: int, k: int, cache: Path, reuse: bool, minsep_route: bool = True) -> list[dict]:
    """mmopt's rows (certified optimum, banded under both schemas), saved beside jax's strategies; ``reuse``
    reads them back (so the two halves can run apart on a loaded machine)."""
    import mmopt
    from mmopt import toeplitz
    from mmopt.participation import fixed_epochs, min_separation
    from mmopt.participation.bound import diagonal_bound
    from mmopt.participation.toeplitz import schema_error
    from mmopt.participation.weighted import weighted_banded
    from mmopt.toeplitz.solve import optimize as toeplitz_optimize

    path = cache / f"mmopt_n{n}_k{k}.json"
    if reuse and path.exists():
        return json.loads(path.read_text())
    b = n // k
    fe, ms = fixed_epochs(k), min_separation(b, k)
    W = toeplitz.prefix(n)
    out = []
    if n <= 4096:
        t = time.process_time()
        res = mmopt.optimize(W, participation=fe, tol=TOL)
        sec = time.process_time() - t
        bound = res.lower_bound
        out.append({"method": "mmopt certified optimum", "schema": "fixed", "error": res.objective,
                    "sec": sec, "jax_over_exact": float("nan")})
    else:
        bound = diagonal_bound(W, fe)
    t = time.process_time()
    C = weighted_banded(n, k)
    sec = time.process_time() - t
    for schema, name in ((fe, "fixed"), (ms, "minsep")):  # b bands: exact sensitivity under both schemas
        out.append({"method": f"mmopt row-weighted banded ({b})", "schema": name,
                    "error": schema_error(W, C, schema)[0], "sec": sec, "jax_over_exact": float("nan")})
    for schema, name in ((fe, "fixed"), (ms, "minsep")):
        # the equal-column banded strategy (optimize(method="banded") returns the better of it and the row-weighted)
        t = time.process_time()
        E = toeplitz_optimize(W, "banded", bands=b).strategy
        out.append({"method": f"mmopt banded ({b} bands)", "schema": name, "error": schema_error(W, E, schema)[0],
                    "sec": time.process_time() - t, "jax_over_exact": float("nan")})
    minsep_bound = bound
    if n <= 4096 and minsep_route:  # its route on prefix sums (past 2,048 steps: the banded ones and the free band)
        t = time.process_time()
        res = mmopt.optimize(mmopt.workload.prefix(n), participation=ms)
        minsep_bound = max(bound, res.lower_bound)
        out.append({"method": "mmopt optimize (auto)", "schema": "minsep", "error": res.objective,
                    "sec": time.process_time() - t, "jax_over_exact": float("nan"), "bound": minsep_bound,
                    "gap": res.objective / res.lower_bound, "status": res.status,
                    "how": f"{res.solver}; bound: {res.extra['lower_bound_method']}"})
    for row in out:
        row.setdefault("bound", minsep_bound if row["schema"] == "minsep" else bound)
    path.write_text(json.dumps(out))
    return out


def rows_for(n: int, k: int, python: str, cache: Path, dense_max: int, reuse: bool, run_jax: bool,
             minsep_route: bool = True) -> list[dict]:
    from mmopt import toeplitz
    from mmopt.participation import fixed_epochs, min_separation, sensitivity_squared
    from mmopt.participation.toeplitz import schema_error

    b = n // k
    fe, ms = fixed_epochs(k), min_separation(b, k)
    W = toeplitz.prefix(n)
    out = mmopt_half(n, k, cache, reuse, minsep_route)
    bound = out[0]["bound"]
    minsep_bound = max(r["bound"] for r in out if r["schema"] == "minsep")
    if not run_jax and not (cache / f"jax_n{n}_k{k}.npz").exists():
        return [row | {"n": n, "k": k} for row in out]
    jax = jax_half(n, k, python, cache, dense_max)
    if "dense_C" in jax:
        C = jax["dense_C"]
        s = sensitivity_squared(C, fe)
        out.append({"method": "jax dense", "schema": "fixed", "error": s.squared * dense_error(C),
                    "sec": float(jax["dense_seconds"]), "jax_over_exact": float(jax["dense_sens2"]) / s.squared})
    for key, name, jax_sens in (("toeplitz", f"jax banded Toeplitz ({b} bands)", "toeplitz_sens2"),
                                ("blt", "jax BLT", None)):
        if f"{key}_coef" not in jax:
            continue
        C = toeplitz.banded(jax[f"{key}_coef"], n)
        for schema, sname in ((fe, "fixed"), (ms, "minsep")):
            error, s = schema_error(W, C, schema)
            ratio = float(jax[jax_sens]) / s.squared if (jax_sens and sname == "minsep") else float("nan")
            out.append({"method": name, "schema": sname, "error": error, "sec": float(jax[f"{key}_seconds"]),
                        "jax_over_exact": ratio})
    for row in out:
        row |= {"n": n, "k": k}
        row.setdefault("bound", minsep_bound if row["schema"] == "minsep" else bound)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, nargs="+", default=[1024, 2048])
    p.add_argument("--k", type=int, nargs="+", default=[1, 4, 8])
    p.add_argument("--big", action="store_true", help="add n = 2¹⁶, k = 16 (compact strategies, proven bound)")
    p.add_argument("--jax-python", default=os.environ.get("MMOPT_JAX_PYTHON", "/work/jaxvenv/bin/python"))
    p.add_argument("--jax-cache", type=Path, default=Path(os.environ.get("MMOPT_JAX_CACHE", "/tmp/jax_participation")))
    p.add_argument("--jax-dense-max", type=int, default=2048, help="run jax's dense optimiser up to this n")
    p.add_argument("--reuse", action="store_true", help="read mmopt's rows saved in --jax-cache by an earlier run")
    p.add_argument("--no-run-jax", action="store_true", help="use jax's saved strategies only, never start it")
    p.add_argument("--beta", type=float, default=0.0, help="momentum β > 0: the momentum workload's rows")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--no-minsep-route", action="store_true",
                   help="skip mmopt.optimize under min separation (n ≤ 4,096, ~115 CPU s each)")
    a = p.parse_args()
    if a.out is None:
        a.out = HERE / "results" / ("bench_participation_momentum.txt" if a.beta > 0 else "bench_participation.txt")
    a.jax_cache.mkdir(parents=True, exist_ok=True)
    header = (f"{'n':>5} {'k':>2} {'schema':>6}  {'method':<32} {'error':>12} {'bound':>12} {'ratio':>8} "
              f"{'vs jax best':>11} {'CPU s':>7} {'Δ² jax/exact':>12}")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [f"workload: {f'momentum β = {a.beta:g}' if a.beta > 0 else 'prefix sums'}",
             f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}; load average at start {load}",
             header, "-" * len(header)]
    print(header, flush=True)
    notes = []
    for n, k in [(n, k) for n in a.n for k in a.k] + ([(2 ** 16, 16)] if a.big else []):
        rows = (momentum_rows(n, k, a.beta, a.jax_python, a.jax_cache, a.jax_dense_max, a.reuse,
                              not a.no_run_jax) if a.beta > 0 else
                rows_for(n, k, a.jax_python, a.jax_cache, a.jax_dense_max, a.reuse, not a.no_run_jax,
                         not a.no_minsep_route))
        for schema in ("fixed", "minsep"):
            group = [r for r in rows if r["schema"] == schema]
            jax_best = min((r["error"] for r in group if r["method"].startswith("jax")), default=float("nan"))
            for r in group:
                line = (f"{n:>5} {k:>2} {schema:>6}  {r['method']:<32} {r['error']:>12.2f} {r['bound']:>12.2f} "
                        f"{r['error'] / r['bound']:>8.5f} {r['error'] / jax_best:>11.5f} {r['sec']:>7.2f} "
                        f"{r['jax_over_exact']:>12.4f}")
                print(line, flush=True)
                lines.append(line)
                if "gap" in r:
                    notes.append(f"n = {n:,}, k = {k}: optimize {r['status']}, error/bound {r['gap']:.5f}, "
                                 f"{r['sec']:.1f} CPU s ({r['how']}), load average "
                                 f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    lines.append(f"load average at end {load}")
    lines.extend(notes)
    a.out.write_text(__doc__ + "\n" + "\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
