"""Releases at their best strategy, with exact intervals: ε-DP records strategies and interval coverage.

Run:  OPENBLAS_NUM_THREADS=1 python benchmarks/bench_intervals.py [--runs 100000] [--releases 200]
Out:  tables on stdout and benchmarks/results/bench_intervals.txt.

1. **ε-DP records strategy** (ε = 1). For CPS 1988's 2-way marginals, CPS 1988's 1- to 3-way marginals and the
   1- and 2-way marginals of 8 attributes of size 4: the expected total squared error of the strategy a records
   release measures by default (:func:`mmopt.records.plans.choose`), of each candidate, and of
   ``mmopt.optimize(W, privacy=Privacy(1))``'s strategy (HDMM's OPT_M inside ``auto``), with CPU seconds. Target:
   ≤ 1.05× optimize, never above "each marginal once". Then ``--releases`` seeded CPS 2-way releases (the whole
   records pipeline at OpenDP's verified scale): mean total squared error against the release's own
   ``expected_total``, z = (measured − predicted)/se, PASS when |z| < 3.
2. **Coverage** over ``--runs`` seeded noise draws (the error of a least-squares answer is aᵀz; z is drawn, the
   interval is the one the release reports): identity(64), prefix(64)/H₂, all ranges(32)/H₂ (dense tables,
   ``answers_table(alpha=...)``) and CPS 1988's 2-way marginals from records (residual plan and the Laplace
   default; ``RecordsRelease.half_width``), each under Laplace (ε = 1) and Gaussian (ε = 1, δ = 1e-9) noise.
   Coverage pooled over every answer at 90/95/99 %, the normal interval ± z·std_error beside it under Laplace
   noise, and the CPU seconds of the intervals. Target: within ±0.3 points of nominal.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

from benchmarks import _results  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "bench_intervals.txt"
LEVELS = (0.90, 0.95, 0.99)
LAP, GAUSS = (1.0, 0.0), (1.0, 1e-9)


def _privacy(pair):
    import mmopt
    return mmopt.Privacy(*pair)


def strategy_rows() -> list[dict]:
    """Part 1: the default ε-DP records strategy against its candidates and optimize's."""
    import mmopt
    from mmopt.records import datasets
    from mmopt.records import plans as rp
    from mmopt.structured.residual import marginal_workload

    _, D = datasets.cps1988()
    cases = [("CPS 1988, all 2-way", D.shape, list(itertools.combinations(range(7), 2))),
             ("CPS 1988, 1- to 3-way", D.shape, [S for k in (1, 2, 3) for S in itertools.combinations(range(7), k)]),
             ("8 attributes of size 4, 1- and 2-way", (4,) * 8,
              [S for k in (1, 2) for S in itertools.combinations(range(8), k)])]
    P, rows = _privacy(LAP), []
    for name, shape, sets in cases:
        W = marginal_workload(shape, sets)
        t = time.process_time()
        plan = rp.choose(W, P)
        t_plan = time.process_time() - t
        t = time.process_time()
        opt = mmopt.optimize(W.to_implicit(), privacy=P, seed=0, verbose=False)
        t_opt = time.process_time() - t
        ref = mmopt.evaluate(W.to_implicit(), opt.strategy, P).total_squared_error
        c = P.variance_factor
        rows.append({"workload": name, "chosen": plan.strategy.name, "release": c * plan.unit_total,
                     "cpu_plan": t_plan, "optimize": ref, "cpu_optimize": t_opt, "bound": c * plan.unit_bound,
                     **{f"cand:{k}": c * v for k, v in plan.candidates.items()}})
    return rows


def release_check(releases: int) -> dict:
    """Part 1b: seeded CPS 2-way releases against the release's own prediction."""
    from mmopt.records import datasets, marginal_counts, release_marginals

    df, D = datasets.cps1988()
    truth = None
    totals, predicted = [], None
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*numpy's seeded generator", category=UserWarning)
        first = release_marginals(df, D, 2, _privacy(LAP), seed=0)
        truth = marginal_counts(df, D, list(first.marginals))
        predicted = first.expected_total
        for seed in range(releases):
            r = release_marginals(df, D, 2, _privacy(LAP), seed=seed, strategy=first.strategy)
            totals.append(sum(float(np.sum((r.marginals[S] - truth[S]) ** 2)) for S in r.marginals))
    totals = np.array(totals)
    se = totals.std(ddof=1) / math.sqrt(totals.size)
    return {"releases": releases, "measured": float(totals.mean()), "predicted": predicted,
            "z": float((totals.mean() - predicted) / se)}


def _dense_cases():
    import mmopt
    from mmopt import strategy, workload
    return [("identity(64)/I", workload.identity(64), strategy.identity(64)),
            ("prefix(64)/H2", workload.prefix(64), strategy.hierarchical(64)),
            ("all ranges(32)/H2", workload.all_range(32), strategy.hierarchical(32))], mmopt


def _coverage(M: np.ndarray, widths: dict, se: np.ndarray, noise: str, scale: float, runs: int, seed: int):
    """Pooled coverage of errors M z (z i.i.d. noise of ``scale``) by ±widths[level], and of ±z·se."""
    gen = np.random.default_rng(seed)
    hits = {lv: 0 for lv in LEVELS}
    naive = {lv: 0 for lv in LEVELS}
    zq = {lv: stats.norm.ppf(0.5 + lv / 2) for lv in LEVELS}
    done = 0
    while done < runs:
        k = min(5000, runs - done)
        z = (gen.laplace if noise == "laplace" else gen.normal)(0.0, scale, size=(k, M.shape[1]))
        E = np.abs(z @ M.T)
        for lv in LEVELS:
            hits[lv] += int(np.sum(E <= widths[lv]))
            naive[lv] += int(np.sum(E <= zq[lv] * se))
        done += k
    n = runs * M.shape[0]
    return {lv: hits[lv] / n for lv in LEVELS}, {lv: naive[lv] / n for lv in LEVELS}


def coverage_rows(runs: int) -> list[dict]:
    """Part 2: coverage of the reported intervals."""
    from mmopt.answers import answers_table
    from mmopt.records import datasets, release_marginals
    from mmopt.records import plans as rp
    from mmopt.structured import residual

    rows = []
    cases, mmopt = _dense_cases()
    for name, W, A in cases:
        M = W.explicit_matrix() @ np.linalg.pinv(A.matrix)
        for pair in (LAP, GAUSS):
            P = _privacy(pair)
            out = mmopt.matrix_mechanism(W, A, np.zeros(W.domain_size), P, rng=0)
            t = time.process_time()
            tables = {lv: answers_table(out, W, A, alpha=1 - lv) for lv in LEVELS}
            cpu = time.process_time() - t
            widths = {lv: (tb.upper - tb.answer).to_numpy() for lv, tb in tables.items()}
            se = tables[LEVELS[0]].standard_error.to_numpy()
            cov, naive = _coverage(M, widths, se, P.noise, out.noise_scale, runs, seed=1)
            rows.append({"case": name, "noise": P.noise, "answers": M.shape[0], "cpu": cpu, "coverage": cov,
                         "naive": naive, "runs": runs})
    df, D = datasets.cps1988()
    W = residual.marginal_workload(D.shape, list(itertools.combinations(range(7), 2)))
    for pair in (LAP, GAUSS):
        P = _privacy(pair)
        strategies = [("residual plan", residual.plan(W, norm=P.sensitivity_norm).strategy)]
        if P.noise == "laplace":
            strategies.append(("Laplace default", rp.choose(W, P).strategy))
        for label, A in strategies:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*numpy's seeded generator", category=UserWarning)
                r = release_marginals(df, D, 2, P, seed=0, strategy=A)
            t = time.process_time()
            widths = {lv: np.concatenate([np.full(r.marginals[S].size, r.half_width(S, 1 - lv))
                                          for S in r.marginals]) for lv in LEVELS}
            cpu = time.process_time() - t
            se = np.concatenate([np.full(r.marginals[S].size, math.sqrt(r.cell_variance[S])) for S in r.marginals])
            M = _records_map(r)
            cov, naive = _coverage(M, widths, se, P.noise, r.noise_scale, runs, seed=2)
            rows.append({"case": f"CPS 2-way, {label}", "noise": P.noise, "answers": M.shape[0], "cpu": cpu,
                         "coverage": cov, "naive": naive, "runs": runs})
    return rows


def sf1_rows(runs: int) -> list[dict]:
    """sf1 (4,151 queries, N = 29,440) under optimize's strategy (weighted marginals): the intervals of
    answers_table, and their coverage over ``runs`` whole mechanism runs (least squares by LSMR, ~45 ms each)."""
    import mmopt
    import mmopt.structured as st
    from mmopt.answers import answers_table

    W = st.sf1()
    x = np.random.default_rng(0).integers(0, 20, W.shape).astype(float)
    truth = st.answer(W, x)
    rows = []
    for pair in (LAP, GAUSS):
        P = _privacy(pair)
        S = mmopt.optimize(W, privacy=P, budget="fast", seed=0, verbose=False).strategy
        out = st.matrix_mechanism(W, S, x, P, rng=0)
        t = time.process_time()
        tables = {lv: answers_table(out, W, S, alpha=1 - lv) for lv in LEVELS}
        cpu = time.process_time() - t
        widths = {lv: (tb.upper - tb.answer).to_numpy() for lv, tb in tables.items()}
        se = tables[LEVELS[0]].standard_error.to_numpy()
        zq = {lv: stats.norm.ppf(0.5 + lv / 2) for lv in LEVELS}
        hits = {lv: 0 for lv in LEVELS}
        naive = {lv: 0 for lv in LEVELS}
        done, seed = 0, 1
        while done < runs:
            k = min(200, runs - done)
            sim = st.matrix_mechanism(W, S, x, P, rng=seed, size=k)
            E = np.abs(np.asarray(sim.answers).reshape(k, -1) - truth)
            for lv in LEVELS:
                hits[lv] += int(np.sum(E <= widths[lv]))
                naive[lv] += int(np.sum(E <= zq[lv] * se))
            done, seed = done + k, seed + 1
        n = runs * truth.size
        rows.append({"case": f"sf1 ({S.name})", "noise": P.noise, "answers": truth.size, "cpu": cpu,
                     "coverage": {lv: hits[lv] / n for lv in LEVELS}, "naive": {lv: naive[lv] / n for lv in LEVELS},
                     "runs": runs})
    return rows


def _records_map(r) -> np.ndarray:
    """The matrix of the least-squares marginals as a linear map of the measurement noise (unit vectors)."""
    from mmopt.structured.residual import marginals as wm
    from mmopt.structured.residual import reconstruct_all
    from mmopt.structured.residual.reconstruct import Measurements

    A, sets = r.strategy, list(r.marginals)
    shapes = {S: r.measurements.values[S].shape for S in A.subsets}
    cols = []
    for S in A.subsets:
        for idx in np.ndindex(shapes[S]):
            y = {T: np.zeros(shapes[T]) for T in A.subsets}
            y[S][idx] = 1.0
            est = (wm.reconstruct_all(A, y, sets) if isinstance(A, wm.WeightedMarginals)
                   else reconstruct_all(Measurements(A, y, r.noise, 1.0), sets))
            cols.append(np.concatenate([est[T].ravel() for T in sets]))
    return np.array(cols).T


def report(strategies: list[dict], check: dict | None, coverage: list[dict]) -> str:
    lines = ["## 1. ε-DP records releases: the strategy measured by default (ε = 1, expected total squared error)",
             "", f"{'workload':<40}{'chosen':>20}{'release':>12}{'optimize':>12}{'ratio':>8}{'each once':>12}"
             f"{'residual':>12}{'bound':>10}{'cpu plan':>10}{'cpu opt':>9}"]
    for r in strategies:
        lines.append(f"{r['workload']:<40}{r['chosen']:>20}{r['release']:>12,.0f}{r['optimize']:>12,.0f}"
                     f"{r['release'] / r['optimize']:>8.3f}{r['cand:each marginal once']:>12,.0f}"
                     f"{r['cand:residual']:>12,.0f}{r['bound']:>10,.0f}{r['cpu_plan']:>9.2f}s{r['cpu_optimize']:>8.2f}s")
    if check:
        ok = "PASS" if abs(check["z"]) < 3 else "FAIL"
        lines += ["", f"CPS 2-way, {check['releases']} seeded releases: mean total {check['measured']:,.0f}, predicted "
                      f"{check['predicted']:,.0f}, z = {check['z']:+.2f} ({ok})"]
    lines += ["", "## 2. Coverage of the reported intervals (pooled over answers and runs; naive = ± z·std_error; "
                  "cpu: the intervals at all three levels)", "",
              f"{'case':<34}{'noise':>10}{'answers':>9}{'runs':>9}" + "".join(f"{f'{lv:.0%}':>9}" for lv in LEVELS)
              + "".join(f"{f'naive {lv:.0%}':>12}" for lv in LEVELS) + f"{'cpu':>9}"]
    for r in coverage:
        lines.append(f"{r['case']:<34}{r['noise']:>10}{r['answers']:>9}{r['runs']:>9}"
                     + "".join(f"{100 * r['coverage'][lv]:>8.2f}%" for lv in LEVELS)
                     + "".join(f"{100 * r['naive'][lv]:>11.2f}%" for lv in LEVELS) + f"{r['cpu']:>8.2f}s")
    top = max(r["runs"] for r in coverage)
    worst = max(abs(r["coverage"][lv] - lv) for r in coverage for lv in LEVELS if r["runs"] == top)
    lines += ["", f"largest |coverage − nominal| over the rows of {top:,} runs: {100 * worst:.3f} points "
                  f"({'PASS' if worst <= 0.003 else 'FAIL'} at ±0.3); sf1 rows: whole mechanism runs (LSMR), fewer"]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--releases", type=int, default=200)
    ap.add_argument("--sf1-runs", type=int, default=2000, help="whole sf1 mechanism runs for its coverage rows")
    _results.add_args(ap)
    args = ap.parse_args(argv)
    strategies = strategy_rows()
    check = release_check(args.releases) if args.releases else None
    coverage = coverage_rows(args.runs) + (sf1_rows(args.sf1_runs) if args.sf1_runs else [])
    text = report(strategies, check, coverage)
    print(text)
    full = all(getattr(args, k) == ap.get_default(k) for k in ("runs", "releases", "sf1_runs"))
    _results.write(RESULTS, f"# python benchmarks/bench_intervals.py --runs {args.runs} --releases {args.releases} "
                            f"--sf1-runs {args.sf1_runs}\n\n" + text + "\n", no_write=args.no_write, full=full)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
