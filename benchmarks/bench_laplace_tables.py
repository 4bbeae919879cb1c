"""Exact Laplace intervals in answers tables on the product route: CPU seconds per row, and coverage.

Run:  python benchmarks/bench_laplace_tables.py [--runs 2000]
Out:  tables on stdout and benchmarks/results/bench_laplace_tables.txt.

1. **Speed.** ``answers_table(alpha=0.05)`` of a simulated release (ε = 1) on workloads of products whose strategy
   is ``optimize``'s product strategy θ·⊗Aᵢ (the route :func:`mmopt.answers.widths._product_laws` lists, a row's
   law has up to ∏ᵢ (distinct values of qᵢAᵢ⁺) scales, thousands here): rows, distinct scales per row (median),
   CPU seconds of the table and ms per row.
2. **Coverage** on prefix(40) ⊗ prefix(128) (5,120 cells, optimize's product strategy): ``--runs`` whole
   mechanism runs (``matrix_mechanism`` with numpy's seeded Laplace noise and its own reconstruction), the share
   of |answer − W x| within the table's half-widths pooled over answers at 90/95/99 %. Answers of one run are
   correlated, so the spread of the pooled share is wider than its binomial standard error.
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

import numpy as np  # noqa: E402

from benchmarks import _results  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "bench_laplace_tables.txt"
LEVELS = (0.90, 0.95, 0.99)


def _release(W, A, seed=0):
    import mmopt
    x = np.random.default_rng(seed).integers(0, 20, size=W.domain_size).astype(float)
    return mmopt.matrix_mechanism(W, A, x, mmopt.Privacy(1.0), rng=seed)


def _scales_per_row(W, A, rows: int = 20) -> int:
    """Median number of distinct scales in the first ``rows`` rows' laws."""
    from mmopt.answers.layout import layout_of
    from mmopt.answers.widths import _product_laws
    layout = layout_of(W, caller="bench")
    chunk = next(layout.chunks(rows))
    return int(np.median([np.unique(np.abs(v[v != 0])).size for v, _ in _product_laws(layout, A)(chunk)]))


def speed_rows() -> list[dict]:
    import mmopt
    from mmopt import workload as wl
    out = []
    for name, factors in [("prefix(80) ⊗ total(64)", [wl.prefix(80), wl.total(64)]),
                          ("prefix(80) ⊗ prefix(64)", [wl.prefix(80), wl.prefix(64)]),
                          ("prefix(128) ⊗ prefix(64)", [wl.prefix(128), wl.prefix(64)])]:
        W = wl.kron(factors)
        # past 4,096 cells optimize returns the product strategy (below it a dense one, the dense route's tables)
        A = mmopt.optimize(W, privacy=mmopt.Privacy(1.0), seed=0, verbose=False).strategy
        released = _release(W, A)
        t = time.process_time()
        table = mmopt.answers_table(released, W, A, alpha=0.05)
        cpu = time.process_time() - t
        out.append({"workload": name, "strategy": A.name, "rows": len(table),
                    "scales": _scales_per_row(W, A), "cpu": cpu, "ms_row": 1e3 * cpu / len(table)})
    return out


def coverage_row(runs: int) -> dict:
    """Whole mechanism runs (``matrix_mechanism``, seeded numpy Laplace noise, its own reconstruction) on
    prefix(40) ⊗ prefix(128) (5,120 cells: the product route) against the table's half-widths."""
    import mmopt
    from mmopt import workload as wl
    W = wl.kron([wl.prefix(40), wl.prefix(128)])
    A = mmopt.optimize(W, privacy=mmopt.Privacy(1.0), seed=0, verbose=False).strategy
    released = _release(W, A)
    x = np.random.default_rng(0).integers(0, 20, size=W.domain_size).astype(float)
    t = time.process_time()
    h = {lv: (lambda tab: (tab.upper - tab.answer).to_numpy())(
        mmopt.answers_table(released, W, A, alpha=1 - lv)) for lv in LEVELS}
    cpu = time.process_time() - t
    truth = np.cumsum(np.cumsum(x.reshape(W.shape), axis=0), axis=1).ravel()  # W x of prefix ⊗ prefix, C order
    share = {lv: np.empty(runs) for lv in LEVELS}  # per run: the answers of one run share its noise
    for seed in range(runs):
        E = np.abs(np.ravel(mmopt.matrix_mechanism(W, A, x, mmopt.Privacy(1.0), rng=seed + 1).answers) - truth)
        for lv in LEVELS:
            share[lv][seed] = np.mean(E <= h[lv])
    return {"answers": truth.size, "runs": runs, "strategy": A.name, "cpu": cpu,
            **{lv: float(share[lv].mean()) for lv in LEVELS},
            **{("se", lv): float(share[lv].std(ddof=1) / np.sqrt(runs)) for lv in LEVELS}}


def report(speed: list[dict], cover: dict) -> str:
    lines = ["## 1. Laplace interval tables on the product route (alpha = 0.05, CPU seconds of answers_table)", "",
             f"{'workload':<26}{'rows':>8}{'scales/row':>12}{'cpu':>10}{'ms/row':>9}"]
    for r in speed:
        lines.append(f"{r['workload']:<26}{r['rows']:>8,}{r['scales']:>12,}"
                     f"{r['cpu']:>9.1f}s{r['ms_row']:>9.2f}")
    lines += ["", "## 2. Coverage, prefix(40) ⊗ prefix(128) (5,120 cells) under optimize's product strategy, Laplace "
              "(ε = 1): whole mechanism runs, pooled over answers and runs; cpu: the three tables",
              "", f"{'answers':>8}{'runs':>8}" + "".join(f"{int(100 * lv):>9}%" for lv in LEVELS) + f"{'cpu':>10}",
              f"{cover['answers']:>8}{cover['runs']:>8}" + "".join(f"{100 * cover[lv]:>9.2f}%" for lv in LEVELS)
              + f"{cover['cpu']:>9.2f}s"]
    lines.append(f"{'(se over runs)':>16}" + "".join(f"{100 * cover[('se', lv)]:>9.3f} " for lv in LEVELS))
    z = max(abs(cover[lv] - lv) / cover[("se", lv)] for lv in LEVELS)
    lines += ["", f"largest |coverage − nominal| / se: {z:.2f} (the se from the spread of each run's share: the "
              "answers of one run share its noise)"]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2_000)
    _results.add_args(ap)
    args = ap.parse_args(argv)
    text = report(speed_rows(), coverage_row(args.runs))
    print(text)
    load = os.getloadavg()[0]
    _results.write(RESULTS, f"# python benchmarks/bench_laplace_tables.py --runs {args.runs}  (OPENBLAS_NUM_THREADS="
                            f"{os.environ.get('OPENBLAS_NUM_THREADS')}, load average {load:.2f})\n\n{text}\n",
                   no_write=args.no_write, full=args.runs == ap.get_default("runs"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
