"""ε-DP on prefix sums and all ranges at large n: H_b as a tree strategy (mmopt.toeplitz.trees), O(n).

Run:  python benchmarks/bench_tree_stream.py [--sizes 4096 6000 8192 100000 1000000] [--release-max 100000]
                                             [--out PATH]
For each workload and n: the tree built and scored (CPU s; H₈, H₁₆, and the branching auto picks, with unit weights and
with the level weights auto searched, "w"), where n ≤ 8,192 its relative difference from
the O(n²/b) interval-tree error (:mod:`mmopt.dense._interval_trees`, the oracle) and what auto did before: H_b in
p-Identity form (columns scaled to Δ₁ = 1) scored by Woodbury, O(p·n²) (CPU s, its error over the tree's), the
exact total at ε = 1 and its ratio to the certified
lower bound (mmopt.toeplitz's, valid under Laplace noise), the Toeplitz square root with unit column norms (what
release's ε-DP refusals named before) as a ratio to H_b, ``optimize`` under Privacy(1) (CPU s, the strategy it
returns: auto scores :func:`mmopt.toeplitz.trees.branchings`, whose best is listed too; where auto's ε-DP search
runs, below 8,192 cells, it returns a p-Identity strategy instead, and the tree candidate it beat is listed) and its
error over the tree's, and one
release (CPU s, OpenDP's Laplace sampler for every node) up to ``--release-max`` cells. BLAS on one thread;
``optimize`` with seed 0 (its search is seeded).
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

import mmopt  # noqa: E402
from mmopt import toeplitz  # noqa: E402
from mmopt.auto import trees as auto_trees  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "bench_tree_stream.txt"
HEAD = (f"{'workload':<10} {'n':>9} {'H':>4} {'tree s':>7} {'vs oracle':>9} {'p-Id s':>7} {'p-Id/tree':>9} "
        f"{'error (ε=1)':>13} "
        f"{'/bound':>7} {'sqrt/tree':>9} {'auto s':>7} {'auto':>9} {'auto/tree':>9} {'release s':>9}")
EPS = mmopt.Privacy(1.0)


def _cpu(f):
    c0 = time.process_time()
    out = f()
    return out, time.process_time() - c0


def row(kind: str, n: int, S, release_max: int, auto: tuple[float, str, float]) -> str:
    """One tree ``S`` (unit or searched level weights) on ``kind``: see the module docstring."""
    W = getattr(toeplitz, kind)(n)
    b = S.branching
    total, tree_s = _cpu(lambda: type(S)(n, b, S.level_weights).unit_total(kind))
    delta2 = S.sensitivity("l1") ** 2
    wood_s, same, old_ratio = "", "", ""
    if n <= 8192 and S.level_weights is None:
        from mmopt.dense import _interval_trees as it
        from mmopt.dense.gram_operator import as_gram_operator
        from mmopt.search.min_error_fast import hierarchy_theta
        from mmopt.search.pidentity import true_error
        gram = it.prefix_gram(n) if kind == "prefix" else it.all_range_gram(n)
        same = f"{abs(it.unit_error(it.b_ary_tree(n, b), gram) / total - 1):.0e}"
        old, s = _cpu(lambda: true_error(hierarchy_theta(n, b), as_gram_operator(W)))
        wood_s, old_ratio = f"{s:.2f}", f"{old / (delta2 * total):.2f}"
    bound = toeplitz.lower_bound(W).value
    root = toeplitz.evaluate(W, toeplitz.equalized(toeplitz.sqrt_strategy(n)), EPS).total_squared_error
    error = EPS.variance_factor * delta2 * total
    rel = ""
    if n <= release_max:
        x = np.random.default_rng(0).poisson(5.0, n).astype(float)
        _, s = _cpu(lambda: mmopt.release(W, S, x, EPS))
        rel = f"{s:.2f}"
    return (f"{kind:<10} {n:>9,} {S.name:>4} {tree_s:>7.3f} {same:>9} {wood_s:>7} {old_ratio:>9} {error:>13.6e} "
            f"{delta2 * total / bound:>7.2f} "
            f"{root / error:>9.1f} {auto[0]:>7.2f} {auto[1]:>9} {auto[2] / error:>9.3f} {rel:>9}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[4096, 6000, 8192, 100_000, 1_000_000])
    ap.add_argument("--release-max", type=int, default=100_000)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    lines = [HEAD]
    print(HEAD, flush=True)
    for kind in ("prefix", "all_range"):
        for n in args.sizes:
            W = getattr(toeplitz, kind)(n)
            r, s = _cpu(lambda W=W: mmopt.optimize(W, privacy=EPS, seed=0, verbose=False))
            trees = [toeplitz.tree(n, b) for b in (8, 16)]
            if isinstance(r.strategy, toeplitz.TreeStrategy):
                trees += [toeplitz.tree(n, r.strategy.branching), r.strategy]
            else:  # auto's search won: list the tree candidate it beat (the best branching, unit and searched weights)
                chosen: dict = {}
                trees += [auto_trees.tree(W, chosen).strategy, auto_trees.weighted_tree(W, chosen).strategy]
            for S in sorted(set(trees), key=lambda S: (S.branching, S.level_weights is not None)):
                line = row(kind, n, S, args.release_max, (s, r.strategy.name, EPS.variance_factor * r.objective))
                print(line, flush=True)
                lines.append(line)
    args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
