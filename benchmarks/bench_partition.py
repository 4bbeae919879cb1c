"""DAWA's private partition: CPU seconds of the exact deviations (wavelet-matrix queries against cell by cell) and
of the whole selection under both rules.

Run:  python benchmarks/bench_partition.py
Out:  a table on stdout and benchmarks/results/bench_partition.txt.

Histograms of n cells (counts uniform in 0..49, seed 1), dyadic candidates (DPBench's), ε₁ = 0.5, penalty 2.
``cells`` is the cell-by-cell deviation pass every window used before (skipped past 65,536 cells, where it takes
minutes); ``wavelet`` the default path (windows of 64 cells or more by query); the two agree to the bit
(tests/test_adaptive_wavelet.py). ``exponential`` and ``noisy_cost``: ``private_partition`` with numpy noise.
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

RESULTS = Path(__file__).resolve().parent / "results" / "bench_partition.txt"
SIZES = (4_096, 65_536, 262_144)


def _cpu(f) -> float:
    t = time.process_time()
    f()
    return time.process_time() - t


def row(n: int) -> dict:
    import mmopt.adaptive.partition as part
    x = np.random.default_rng(1).integers(0, 50, n).astype(float)
    lengths = part.candidate_lengths(n, "dyadic", n)
    out = {"n": n, "wavelet": _cpu(lambda: part.deviations(x, lengths))}
    if n <= 65_536:
        long, part._LONG = part._LONG, 10**12  # every window cell by cell
        try:
            out["cells"] = _cpu(lambda: part.deviations(x, lengths))
        finally:
            part._LONG = long
    for rule in ("exponential", "noisy_cost"):
        out[rule] = _cpu(lambda rule=rule: part.private_partition(x, 0.5, bucket_penalty=2.0, selection=rule, rng=0))
    return out


def report(rows: list[dict]) -> str:
    lines = ["CPU seconds, dyadic candidates, whole counts (module docstring)", "",
             f"{'cells':>9}{'deviations: cells':>19}{'wavelet':>9}{'exponential':>13}{'noisy_cost':>12}"]
    for r in rows:
        cells = f"{r['cells']:.2f}" if "cells" in r else "—"
        lines.append(f"{r['n']:>9,}{cells:>19}{r['wavelet']:>9.2f}{r['exponential']:>13.2f}{r['noisy_cost']:>12.2f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    _results.add_args(ap)
    args = ap.parse_args(argv)
    text = report([row(n) for n in args.sizes])
    print(text)
    load = os.getloadavg()[0]
    _results.write(RESULTS, f"# python benchmarks/bench_partition.py  (OPENBLAS_NUM_THREADS="
                            f"{os.environ.get('OPENBLAS_NUM_THREADS')}, load average {load:.2f})\n\n{text}\n",
                   no_write=args.no_write, full=tuple(args.sizes) == SIZES)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
