"""EFPA's data-independent sensitivity tables (Δ₁(k) for every k, and C₂): CPU seconds and peak memory.

Run:  python benchmarks/bench_efpa_tables.py [--reference-up-to 16384]
Out:  a table on stdout and benchmarks/results/bench_efpa_tables.txt.

:func:`mmopt.adaptive.fourier_bounds.column_bounds` (the folded row sums, O(n) memory) against the reference it
replaced: every column of Φ̂ summed in blocks (:func:`mmopt.adaptive.efpa._columns`, O(n²) time), run here up to
``--reference-up-to`` cells (53 CPU s at 65,536). Checked on every row: the table is ≥ the reference at every k
(both are upper bounds on the exact Δ₁ of the floats Φ̂ holds; the new one may sit a few ulps above), and C₂² is
not below the reference's float sum of squares by more than that sum's rounding (the exact checks, against
Fractions of Φ̂, are tests/test_adaptive_fourier_bounds.py's). Last column: a whole ``efpa(x, 1.0)`` on n cells,
tables included.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
import tracemalloc
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

from benchmarks import _results  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "bench_efpa_tables.txt"
SIZES = (4_096, 16_384, 65_536)


def reference(n: int) -> tuple[np.ndarray, float]:
    """The column blocks of Φ̂: max_i of the running column sums of |Φ̂| (float, in row order), and max_i ‖Φ̂e_i‖²."""
    efpa = importlib.import_module("mmopt.adaptive.efpa")  # the module (mmopt.adaptive.efpa is the function)
    l1, sq = np.zeros(n), 0.0
    for cols in efpa._column_blocks(n, np.arange(n, dtype=np.int64)):
        block = np.abs(efpa._columns(n, cols))
        sq = max(sq, float((block * block).sum(axis=0).max()))
        np.maximum(l1, np.cumsum(block, axis=0).max(axis=1), out=l1)
    return l1, sq


def _measured(fn, *args):
    tracemalloc.start()
    t = time.process_time()
    out = fn(*args)
    t = time.process_time() - t
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return out, t, peak


def rows(sizes, reference_up_to: int) -> list[str]:
    import mmopt.adaptive as adaptive
    from mmopt.adaptive import fourier_bounds as fb
    efpa = importlib.import_module("mmopt.adaptive.efpa")
    lines = ["| n | tables CPU s | peak MB | reference CPU s | peak MB | × faster | ≥ reference | ulps above (max) "
             "| C₂ − 1 | efpa(x) CPU s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for n in sizes:
        tables = efpa._tables(n)
        (d1, c2), t, peak = _measured(fb.column_bounds, *tables)
        ref = "| – | – | – | – | – "
        if n <= reference_up_to:
            (l1, sq), t_ref, peak_ref = _measured(reference, n)
            widen = 1.0 + 2.0 * (n + 2) * 2.0**-53
            if not (np.all(d1 >= l1 * widen) and Fraction(c2) ** 2 >= Fraction(sq) / (1 + Fraction(2 * n + 2, 2**53))):
                raise SystemExit(f"n = {n}: a bound below the reference: a bug")
            ulps = float(((d1 - np.nextafter(l1 * widen, np.inf)) / np.spacing(l1)).max())
            ref = f"| {t_ref:.2f} | {peak_ref:.1f} | {t_ref / t:.0f} | yes | {ulps:.0f} "
        efpa._column_bounds.cache_clear()
        x = np.random.default_rng(0).integers(0, 50, n).astype(float)
        t0 = time.process_time()
        adaptive.efpa(x, 1.0, rng=0)
        t_e = time.process_time() - t0
        lines.append(f"| {n:,} | {t:.3f} | {peak:.1f} {ref}| {c2 - 1:.1e} | {t_e:.2f} |")
        print(lines[-1], flush=True)
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference-up-to", type=int, default=16_384,
                    help="run the O(n²) reference up to this many cells (default 16,384; 65,536 takes ~1 CPU minute)")
    _results.add_args(ap)
    args = ap.parse_args(argv)
    text = "\n".join(rows(SIZES, args.reference_up_to))
    load = os.getloadavg()[0]
    _results.write(RESULTS, f"# python benchmarks/bench_efpa_tables.py --reference-up-to {args.reference_up_to}  "
                            f"(OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}, load average "
                            f"{load:.2f})\n\n{text}\n", no_write=args.no_write,
                   full=args.reference_up_to == ap.get_default("reference_up_to"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
