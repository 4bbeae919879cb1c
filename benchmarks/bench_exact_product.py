"""A Toeplitz release's C x: exactly rounded (mmopt.toeplitz.exact_product, NTT) against the float64 FFT it replaced.

Run:  python benchmarks/bench_exact_product.py [--sizes 4096 65536 1048576] [--pairs 4] [--out PATH]
For each n and strategy (the square root, its equalized row-scaled twin, a BLT; the weighted square root of prefix
sums and of all ranges, mmopt.toeplitz.weighted_exact): the exact product's CPU seconds and its 54-bit slices of c
(the weighted square root: "Δ" s, the CPU seconds of its exact Δ₂), the float64 FFT's (sine transforms') CPU seconds,
their largest relative difference, and over ``--pairs`` neighbouring histograms of 2³² − 1 records (one record
added at a random step; n ≤ 65,536) the largest ‖ŷ(x′) − ŷ(x)‖₂ / Δ₂ − 1 of each, beside the charge d_in / Δ₂ − 1
of the release (mmopt.dense.exact_answers.charged_sensitivity and mmopt.toeplitz.exact_product.truncation_charge).
For the weighted square root Δ₂ is the released strategy's exact one; the float64 path was released at Δ₂ = 1.
BLAS on one thread.
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
from scipy import signal  # noqa: E402

from mmopt import toeplitz  # noqa: E402
from mmopt.dense.exact_answers import MAX_RECORDS, charged_sensitivity  # noqa: E402
from mmopt.toeplitz import weighted as ws  # noqa: E402
from mmopt.toeplitz import weighted_exact as we  # noqa: E402
from mmopt.toeplitz.exact_product import _slices, causal_exact, truncation_charge  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "bench_exact_product.txt"
HEAD = (f"{'n':>9} {'strategy':<10} {'slices':>6} {'exact s':>8} {'fft s':>7} {'max rel diff':>12} "
        f"{'fft excess':>11} {'exact excess':>12} {'charge':>9}")


def _cases(n: int):
    """(name, slices, exact(x), float(x), Δ₂, charge) per strategy; the weighted square root's exact Δ₂ timed
    into its slices column ("Δ <s>")."""
    sqrt = toeplitz.sqrt_strategy(n)
    for name, S in (("sqrt", sqrt), ("equalized", toeplitz.equalized(sqrt)),
                    ("blt", toeplitz.blt([0.5, 0.2], [0.9, 0.5], n))):
        delta = S.sensitivity("l2")
        charge = (charged_sensitivity(delta, "l2", n, n, exact=False)
                  + truncation_charge(S.column, _scale(S), "l2")) / delta - 1
        yield (name, str(sum(1 for _ in _slices(S.column, float(np.abs(S.column).max())))),
               lambda x, S=S: causal_exact(S.column, x, _scale(S)), lambda x, S=S: _fft(S, x), delta, charge)
    for kind in ("prefix", "all_range"):
        we.released.cache_clear()
        t = time.process_time()
        r = we.released(kind, n)
        setup = time.process_time() - t
        e = ws.column_scale(kind, n)
        yield (f"w-{kind[:3]}", f"Δ {setup:.0f}", lambda x, r=r: we.answers(r, x),
               lambda x, kind=kind, e=e: ws.apply_power(kind, n, 0.25, x / e), r.sensitivity,
               charged_sensitivity(r.sensitivity, "l2", n, n, exact=False) / r.sensitivity - 1)


def _scale(S):
    return None if S.row_scale is None else np.sqrt(S.row_scale)


def _fft(S, x):
    y = signal.fftconvolve(S.column, x)[:S.n]
    d = _scale(S)
    return y if d is None else d * y


def run(sizes, pairs: int, seed: int = 0) -> list[dict]:
    """One row per (n, strategy) (module docstring)."""
    rows = []
    for n in sizes:
        rng = np.random.default_rng(seed)
        x = rng.multinomial(MAX_RECORDS - 1, np.full(n, 1.0 / n)).astype(float)
        for name, slices, exact_of, float_of, delta, charge in _cases(n):
            t = time.process_time()
            exact = exact_of(x)
            t_exact = time.process_time() - t
            t = time.process_time()
            fft = float_of(x)
            t_fft = time.process_time() - t
            row = dict(n=n, strategy=name, slices=slices, exact_s=t_exact, fft_s=t_fft,
                       diff=float(np.max(np.abs(fft - exact) / np.abs(exact))), fft_excess=None, exact_excess=None,
                       charge=charge)
            if n <= 65536 and pairs:
                worst = {"fft": -np.inf, "exact": -np.inf}
                for _ in range(pairs):
                    x2 = x.copy()
                    x2[int(rng.integers(n))] += 1
                    for key, f in (("fft", float_of), ("exact", exact_of)):
                        moved = np.linalg.norm(f(x2) - (fft if key == "fft" else exact))
                        worst[key] = max(worst[key], moved / delta - 1)
                row["fft_excess"], row["exact_excess"] = worst["fft"], worst["exact"]
            rows.append(row)
            print(_line(row), flush=True)
    return rows


def _line(r: dict) -> str:
    def g(value):
        return "—" if value is None else f"{value:.2e}"
    return (f"{r['n']:>9,} {r['strategy']:<10} {r['slices']:>6} {r['exact_s']:>8.2f} {r['fft_s']:>7.2f} "
            f"{r['diff']:>12.2e} {g(r['fft_excess']):>11} {g(r['exact_excess']):>12} {r['charge']:>9.2e}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 65536, 1048576])
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    print(HEAD, flush=True)
    rows = run(args.sizes, args.pairs)
    args.out.write_text("\n".join([HEAD] + [_line(r) for r in rows]) + "\n")


if __name__ == "__main__":
    main()
