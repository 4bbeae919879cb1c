"""MST's two edge scores (mmopt.synth.mst): the paper's against the workload gain (``workload=``), on model error.

Run:  OPENBLAS_NUM_THREADS=1 python benchmarks/bench_mst_scores.py [--trials 10]
Out:  a table on stdout and benchmarks/results/bench_mst_scores.txt.

The paper's score of an edge is the L1 error of its own 2-way marginal under the independence model (sensitivity
1); with ``workload=`` each edge is scored by its mean L1 gain on the workload marginals containing it
(:mod:`mmopt.synth.gain`, sensitivity ≈ 3), at the same ρ per choice, so its choices are noisier. The datasets and
the workload (all three-way marginals) are those of ``python -m experiments.synth``: CPS 1988, RAND HIE and
tree15; δ = 10⁻⁹; seeded numpy noise at OpenDP's scales, the same seeds for both scores. Error: the model's
(:func:`mmopt.synth.workload_error` of the Synthetic), mean ± standard error over the trials; z: the difference of
the means (workload − paper) in standard errors of the difference.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

from benchmarks import _results  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "bench_mst_scores.txt"
EPSILONS = (0.1, 1.0, 10.0)
DATASETS = ("cps1988", "randhie", "tree15")


def _mean_se(values) -> tuple[float, float]:
    v = np.asarray(values, dtype=float)
    return float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size))


def run(trials: int = 10, datasets=DATASETS, epsilons=EPSILONS) -> list[dict]:
    """One row per (dataset, ε): both scores' model errors over the same seeded trials."""
    import mmopt
    from experiments.synth import load
    from mmopt.synth import mst, workload_error
    rows = []
    for name in datasets:
        records, domain = load(name)
        W = list(itertools.combinations(range(len(domain.shape)), 3))
        for eps in epsilons:
            errors = {"paper": [], "workload": []}
            for trial in range(trials):
                for score, workload in (("paper", None), ("workload", W)):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", UserWarning)  # seeded noise: a simulation
                        s = mst(records, domain, mmopt.Privacy(eps, 1e-9), seed=1000 * trial + 7, workload=workload)
                    errors[score].append(workload_error(records, s, domain, W))
            (p, sp), (w, sw) = _mean_se(errors["paper"]), _mean_se(errors["workload"])
            rows.append({"dataset": name, "epsilon": eps, "paper": p, "paper_se": sp, "workload": w,
                         "workload_se": sw, "ratio": w / p, "z": (w - p) / math.hypot(sp, sw)})
    return rows


def table(rows: list[dict], trials: int) -> str:
    lines = [f"MST model error on all 3-way marginals, {trials} trials (mean ± standard error)", "",
             f"{'dataset':<9} {'ε':>5} {'paper score':>18} {'workload gain':>18} {'ratio':>6} {'z':>6}"]
    for r in rows:
        lines.append(f"{r['dataset']:<9} {r['epsilon']:>5g} {r['paper']:>10.4f} ± {r['paper_se']:.4f} "
                     f"{r['workload']:>10.4f} ± {r['workload_se']:.4f} {r['ratio']:>6.3f} {r['z']:>+6.1f}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trials", type=int, default=10, help="seeded trials per cell (default 10)")
    _results.add_args(p)
    args = p.parse_args(argv)
    if args.trials < 2:
        p.error(f"--trials must be at least 2 (a standard error needs two). Got {args.trials}.")
    text = table(run(args.trials), args.trials)
    print(text, end="")
    _results.write(RESULTS, f"# python benchmarks/bench_mst_scores.py --trials {args.trials}\n" + text,
                   no_write=args.no_write, full=args.trials == 10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
