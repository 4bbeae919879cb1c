"""Streaming the correlated noise of private training: CPU time per step of the recursion and of OpenDP's draws.

Run:  python benchmarks/bench_stream_noise.py [--n 4096] [--k 16] [--dims 100 1000] [--steps 50]

For the banded strategy mmopt optimises for prefix sums under ``fixed_epochs(k)`` (b = n/k row-scaled bands) and a
BLT with 4 buffers, :func:`mmopt.participation.noise.correlate` applied to numpy's standard normals ("recursion":
the linear map alone, O(bands·p) per step) and :func:`mmopt.participation.noise.stream_noise` (OpenDP's Gaussian
draws and the recursion: what a training loop pays) for p model parameters. CPU seconds by
``time.process_time`` over ``--steps`` steps once the state has filled (the first ``bands`` steps read less of it),
after OpenDP's one-off set-up; one BLAS thread; "state" is the floats the recursion keeps.
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

HERE = Path(__file__).resolve().parent


def main() -> None:
    import mmopt
    from mmopt import toeplitz
    from mmopt.participation import fixed_epochs
    from mmopt.participation.noise import correlate, stream_noise

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--k", type=int, default=16)
    p.add_argument("--dims", type=int, nargs="+", default=[100, 1000])
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--out", type=Path, default=HERE / "results" / "bench_stream_noise.txt")
    a = p.parse_args()
    banded = mmopt.optimize(toeplitz.prefix(a.n), participation=fixed_epochs(a.k), method="banded").strategy
    blt = mmopt.optimize(toeplitz.prefix(a.n), method="blt", options={"buffers": 4}).strategy
    header = f"{'strategy':<18} {'p':>6} {'state floats':>12} {'recursion ms/step':>18} {'with OpenDP ms/step':>20}"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [f"n = {a.n:,}, k = {a.k}, {a.steps} steps; load average at start {load}", header, "-" * len(header)]
    print(header, flush=True)
    for _ in stream_noise(blt, 1.0, dimension=1, steps=1):  # OpenDP's one-off set-up (~0.3 s), outside every row
        pass
    for C, state in ((banded, len(banded.coefficients) - 1), (blt, 4)):
        for dim in a.dims:
            # past the first `bands` steps the recursion reads its whole state: time steps after it has filled
            warm = min(state, a.n - a.steps)
            Z = np.random.default_rng(0).standard_normal((warm + a.steps, dim))
            gen = correlate(C, Z, steps=warm + a.steps)
            for _ in range(warm):
                next(gen)
            t = time.process_time()
            for _ in range(a.steps):
                next(gen)
            rec = (time.process_time() - t) / a.steps * 1e3
            gen = stream_noise(C, 1.0, dimension=dim, steps=warm + a.steps)  # the same steps as the recursion's
            for _ in range(warm):
                next(gen)
            t = time.process_time()
            for _ in range(a.steps):
                next(gen)
            full = (time.process_time() - t) / a.steps * 1e3
            line = f"{C.name:<18} {dim:>6} {state * dim:>12,} {rec:>18.3f} {full:>20.2f}"
            print(line, flush=True)
            lines.append(line)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    lines.append(f"load average at end {load}")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(__doc__ + "\n" + "\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
