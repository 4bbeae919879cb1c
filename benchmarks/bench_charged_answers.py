"""An implicit release's A x: compensated mode products with a charged bound (mmopt.structured.charged_answers)
against the plain BLAS mode products they replaced.

Run:  python benchmarks/bench_charged_answers.py [--shapes 64x64x25 128x128x64] [--pairs 20] [--out PATH]
For each domain shape, the strategy A = P ⊗ P ⊗ I (P a dense positive factor with the identity added, as the
optimised per-attribute factors are) and A′ = hierarchical ⊗ hierarchical ⊗ I (integer: exact, nothing charged):
CPU seconds of the charged answers and of BLAS, their largest relative difference, the charge d_in/Δ − 1, and over
``--pairs`` neighbouring histograms of 2³² − 1 records (one record added at a random cell; domains ≤ 10⁵ cells) the
largest (‖ŷ(x′) − ŷ(x)‖₂ − ‖A e_cell‖₂)/Δ₂ of each (what the rounding adds; its differences summed exactly, in
Fractions), beside the charge. BLAS on one thread.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

from mmopt import strategy as st  # noqa: E402
from mmopt.dense.exact_answers import MAX_RECORDS  # noqa: E402
from mmopt.structured import charged_answers as ca  # noqa: E402
from mmopt.structured.mechanism import strategy_apply  # noqa: E402
from mmopt.structured.release import upper_sensitivity  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "bench_charged_answers.txt"
HEAD = (f"{'shape':>12} {'strategy':<13} {'cells':>9} {'charged s':>9} {'blas s':>7} {'max rel diff':>12} "
        f"{'blas excess':>11} {'charged excess':>14} {'charge':>9}")
NEIGHBOURS_MAX_CELLS = 10**5


def run(shapes, pairs: int, seed: int = 0) -> list[dict]:
    """One row per (shape, strategy): pure, returns the measurements."""
    rng = np.random.default_rng(seed)
    rows = []
    for shape in shapes:
        a, b, c = shape
        dense = [rng.random((n, n)) / n + np.eye(n) for n in (a, b)]
        strategies = (("dense⊗dense⊗I", st.kron(dense[0], dense[1], st.identity(c))),
                      ("H⊗H⊗I", st.kron(st.hierarchical(a), st.hierarchical(b), st.identity(c))))
        x = rng.multinomial(MAX_RECORDS - 1, rng.dirichlet(np.full(a * b * c, 0.5))).reshape(shape).astype(float)
        for name, A in strategies:
            plan = ca.plan(A)
            t0 = time.process_time()
            mine = ca.answers(A, x, plan)
            t1 = time.process_time()
            blas = strategy_apply(A, x)
            t2 = time.process_time()
            delta = A.sensitivity("l2")
            d_in = ca.charged_sensitivity(upper_sensitivity(delta), plan.relative, plan.absolute, "l2", A.n_rows)
            row = {"shape": "x".join(map(str, shape)), "strategy": name, "cells": a * b * c,
                   "charged_s": t1 - t0, "blas_s": t2 - t1,
                   "rel_diff": float(np.max(np.abs(mine - blas) / np.maximum(np.abs(mine), 1e-300))),
                   "charge": d_in / delta - 1, "blas_excess": math.nan, "charged_excess": math.nan}
            if a * b * c <= NEIGHBOURS_MAX_CELLS:
                worst = {"blas": 0.0, "charged": 0.0}
                for _ in range(pairs):
                    cell = tuple(int(rng.integers(n)) for n in shape)
                    x2 = x.copy()
                    x2[cell] += 1
                    for key in ("blas", "charged"):
                        y, y2 = ((strategy_apply(A, x), strategy_apply(A, x2)) if key == "blas" else
                                 (ca.answers(A, x, plan), ca.answers(A, x2, plan)))
                        moved = np.flatnonzero(y != y2)
                        sq = sum((Fraction(float(y2[i])) - Fraction(float(y[i]))) ** 2 for i in moved)
                        column = math.prod(float(np.linalg.norm(f.matrix[:, j])) for f, j in
                                           zip(A.terms[0].factors, cell, strict=True))  # ‖A e_cell‖₂
                        worst[key] = max(worst[key], (math.sqrt(float(sq)) - column) / delta)
                row["blas_excess"], row["charged_excess"] = worst["blas"], worst["charged"]
            rows.append(row)
    return rows


def table(rows) -> str:
    lines = [HEAD]
    for r in rows:
        lines.append(f"{r['shape']:>12} {r['strategy']:<13} {r['cells']:>9,} {r['charged_s']:>9.2f} "
                     f"{r['blas_s']:>7.2f} {r['rel_diff']:>12.2e} {r['blas_excess']:>11.2e} "
                     f"{r['charged_excess']:>14.2e} {r['charge']:>9.2e}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="+", default=["16x16x8", "32x32x16", "64x64x25", "128x128x64", "256x256x64"])
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    shapes = [tuple(int(s) for s in text.split("x")) for text in args.shapes]
    if any(len(s) != 3 for s in shapes):
        ap.error("--shapes takes three sizes per shape, e.g. 64x64x25")
    out = table(run(shapes, args.pairs))
    print(out)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(__doc__.split("\n\n")[1] + "\n\n" + out + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
