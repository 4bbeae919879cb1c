"""Records in, private marginals out: 10⁷ records end to end, Dask against pandas, and a Monte Carlo on CPS 1988.

Run:  OPENBLAS_NUM_THREADS=1 python benchmarks/bench_records.py [--rows 10000000] [--dask-rows 1000000]
      [--draws 200] [--skip-large] [--skip-dask]
Out:  a table on stdout and benchmarks/results/bench_records.txt.

1. **Scale.** ``--rows`` synthetic records × 15 attributes (sizes 2–50, N = 1.06·10¹⁵ cells: 3 string
   categories, 2 float columns binned by edges, 10 integer categories; skewed values) are written to Parquet
   first (not timed). Then, in a fresh process, :func:`mmopt.records.release_marginals` releases all 105 two-way
   marginals under Gaussian noise (ε = 1, δ = 1e-9, OpenDP's sampler): read the Parquet in batches, count,
   measure, draw, reconstruct every marginal. Wall seconds, and the process's peak RSS (``ru_maxrss``:
   interpreter, numpy, pandas and pyarrow included). Target: ≤ 60 s and ≤ 4 GB on the 2-core machine. A second
   fresh process times :func:`mmopt.records.marginal_counts` alone, to show where the time goes.
2. **Dask.** ``--dask-rows`` records as 8 Parquet files; the same seeded release through a Dask
   ``LocalCluster`` (2 worker processes, 1 thread each) and through pandas; every measurement and every
   marginal must be bit-identical (counts are integers summed exactly, noise drawn once after aggregation).
3. **Monte Carlo.** On the shipped CPS 1988 extract, ``--draws`` seeded releases (the whole records pipeline,
   numpy's sampler at OpenDP's verified scale) at ε ∈ {0.1, 1}: the mean total squared error of the
   least-squares 2-way marginals against the predicted Σ_A N_A·var_A, z = (measured − predicted)/se. PASS when
   |z| < 3.
4. **Dask at scale** (``--dask-large ROWS``, e.g. 10⁸; alone, with ``--skip-large --skip-dask --draws 0``, it
   appends to the results file): ROWS records in Parquet files of 1.25 million rows, released through a Dask
   LocalCluster and by streaming the same folder in one process; wall seconds, peak RSS (this process and its
   workers), bit-identity.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

RESULTS = Path(__file__).resolve().parent / "results" / "bench_records.txt"
SIZES = (2, 3, 3, 4, 5, 6, 8, 10, 12, 16, 20, 25, 32, 40, 50)
STRINGS, FLOATS = (0, 1, 2), (9, 13)  # attribute kinds by position; the rest are integer categories
EPSILON, DELTA = 1.0, 1e-9
SEEDED = ".*seed=.*numpy's seeded generator"


def domain():
    from mmopt.records import Attribute, Domain

    attrs = []
    for i, n in enumerate(SIZES):
        if i in STRINGS:
            attrs.append(Attribute(f"s{i}", categories=tuple(f"v{j}" for j in range(n))))
        elif i in FLOATS:
            attrs.append(Attribute(f"f{i}", edges=tuple(float(j) for j in range(n)) + (math.inf,)))
        else:
            attrs.append(Attribute(f"i{i}", categories=tuple(range(n))))
    return Domain(tuple(attrs))


def write_records(path: Path, rows: int, seed: int = 0, files: int = 1) -> None:
    """``rows`` skewed synthetic records as Parquet (one file, or ``files`` files in the folder ``path``)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    D = domain()
    rng = np.random.default_rng(seed)
    chunk = 1_000_000 if files == 1 else math.ceil(rows / files)  # rows generated at once: one file each
    writer, written, part = None, 0, 0
    while written < rows:
        m = min(chunk, rows - written)
        cols = {}
        for i, (a, n) in enumerate(zip(D.attributes, SIZES, strict=True)):
            code = np.floor(n * rng.random(m) ** 1.5).astype(np.int16)  # skewed towards low cells
            if i in STRINGS:
                cols[a.name] = pa.DictionaryArray.from_arrays(pa.array(code.astype(np.int32)),
                                                              pa.array([f"v{j}" for j in range(n)]))
            elif i in FLOATS:
                cols[a.name] = pa.array(code + rng.random(m))  # inside bin [code, code + 1)
            else:
                cols[a.name] = pa.array(code.astype(np.int64))
        table = pa.table(cols)
        if files > 1:
            path.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, path / f"part-{part:03d}.parquet")
            part += 1
        else:
            writer = writer or pq.ParquetWriter(path, table.schema)
            writer.write_table(table)
        written += m
    if writer is not None:
        writer.close()


def _child(task: str, path: str) -> None:
    """In a fresh process: time one step on the Parquet at ``path``, print a JSON row."""
    import resource

    import mmopt
    from mmopt.records import marginal_counts, release_marginals

    D = domain()
    t0 = time.perf_counter()
    if task == "release":
        r = release_marginals(path, D, 2, mmopt.Privacy(EPSILON, DELTA))
        extra = {"marginals": len(r.marginals), "cells": int(sum(a.size for a in r.marginals.values())),
                 "measurements": int(sum(y.size for y in r.measurements.values.values())),
                 "noise_scale": r.noise_scale, "rho": r.rho, "sampler": r.sampler,
                 "rmse_per_cell": math.sqrt(sum(a.size * r.cell_variance[A] for A, a in r.marginals.items())
                                            / sum(a.size for a in r.marginals.values()))}
    else:
        import itertools

        counts = marginal_counts(path, D, list(itertools.combinations(range(len(SIZES)), 2)))
        extra = {"records": int(next(iter(counts.values())).sum())}
    seconds = time.perf_counter() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kB
    print(json.dumps({"task": task, "seconds": seconds, "peak_mb": peak_mb, **extra}))


def _run_child(task: str, path: Path) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", task, str(path)], capture_output=True, text=True,
                         check=False)
    if out.returncode != 0:
        raise RuntimeError(f"child {task} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def scale(rows: int, folder: Path) -> list[str]:
    path = folder / "records.parquet"
    t0 = time.perf_counter()
    write_records(path, rows)
    made = time.perf_counter() - t0
    size_mb = path.stat().st_size / 2**20
    release = _run_child("release", path)
    counts = _run_child("counts", path)
    ok = release["seconds"] <= 60 and release["peak_mb"] <= 4096
    return [f"1. Scale: {rows:,} records × {len(SIZES)} attributes {SIZES} (N = {math.prod(SIZES):.3g} cells), all "
            f"{release['marginals']} two-way marginals ({release['cells']:,} cells), Gaussian ε = {EPSILON}, "
            f"δ = {DELTA:g}",
            f"   Parquet written first (not timed): {size_mb:,.0f} MB in {made:.1f} s",
            f"   release_marginals (read + count + measure + OpenDP draw + reconstruct), fresh process: "
            f"{release['seconds']:.1f} s wall, peak RSS {release['peak_mb']:,.0f} MB  "
            f"[target ≤ 60 s, ≤ 4096 MB: {'PASS' if ok else 'FAIL'}]",
            f"   of which marginal_counts alone (fresh process): {counts['seconds']:.1f} s, peak RSS "
            f"{counts['peak_mb']:,.0f} MB; {release['measurements']:,} noisy measurements, σ = "
            f"{release['noise_scale']:.4g}, ρ = {release['rho']:.4g}, predicted RMSE per cell "
            f"{release['rmse_per_cell']:.4g} (sampler: {release['sampler']})"]


def dask_check(rows: int, folder: Path) -> list[str]:
    import numpy as np
    import pandas as pd
    from dask import dataframe as dd
    from distributed import Client, LocalCluster

    import mmopt
    from mmopt.records import release_marginals

    parts = folder / "parts"
    write_records(parts, rows, seed=1, files=8)
    D, P = domain(), mmopt.Privacy(EPSILON, DELTA)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=SEEDED, category=UserWarning)
        t0 = time.perf_counter()
        df = pd.read_parquet(parts)
        r_pd = release_marginals(df, D, 2, P, seed=7)
        t_pd = time.perf_counter() - t0
        del df
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                          silence_logs=logging.ERROR) as cluster, \
                Client(cluster):
            t0 = time.perf_counter()
            r_dd = release_marginals(dd.read_parquet(parts), D, 2, P, seed=7)
            t_dd = time.perf_counter() - t0
    same_y = all(np.array_equal(r_pd.measurements.values[S], r_dd.measurements.values[S])
                 for S in r_pd.strategy.subsets)
    same_m = all(np.array_equal(r_pd.marginals[A], r_dd.marginals[A]) for A in r_pd.marginals)
    return [f"2. Dask: {rows:,} records in 8 Parquet files, all 2-way marginals, seed 7",
            f"   pandas (read_parquet + release): {t_pd:.1f} s; Dask LocalCluster (2 processes × 1 thread, "
            f"read + release): {t_dd:.1f} s",
            f"   bit-identical: measurements {same_y}, marginals {same_m}  [{'PASS' if same_y and same_m else 'FAIL'}]"]


def dask_large(rows: int, folder: Path) -> list[str]:
    """``rows`` records in Parquet files of 1.25 million rows: the Dask release (LocalCluster, 2 workers × 1
    thread, 4 GiB each) and the streaming release of the same folder (pyarrow batches in this process), each
    with the peak resident memory of this process and its children (sampled every 0.2 s), and bit-identity."""
    import threading

    import numpy as np
    import psutil
    from dask import dataframe as dd
    from distributed import Client, LocalCluster

    import mmopt
    from mmopt.records import release_marginals

    parts, files = folder / "large-parts", max(8, math.ceil(rows / 1_250_000))
    t0 = time.perf_counter()
    write_records(parts, rows, seed=2, files=files)
    t_write = time.perf_counter() - t0
    D, P = domain(), mmopt.Privacy(EPSILON, DELTA)

    def measured(run):
        peak, stop = [0], threading.Event()

        def sample():
            me = psutil.Process()
            while not stop.is_set():
                procs = [me, *me.children(recursive=True)]
                total = 0
                for proc in procs:
                    try:
                        total += proc.memory_info().rss
                    except psutil.Error:  # a worker that just exited
                        pass
                peak[0] = max(peak[0], total)
                stop.wait(0.2)

        thread = threading.Thread(target=sample, daemon=True)
        thread.start()
        t = time.perf_counter()
        try:
            out = run()
        finally:
            stop.set()
            thread.join()
        return out, time.perf_counter() - t, peak[0] / 2**20

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=SEEDED, category=UserWarning)
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit="4GiB",
                          dashboard_address=None, silence_logs=logging.ERROR) as cluster, Client(cluster):
            r_dd, t_dd, m_dd = measured(lambda: release_marginals(dd.read_parquet(parts), D, 2, P, seed=7))
        r_st, t_st, m_st = measured(lambda: release_marginals(parts, D, 2, P, seed=7))
    same = all(np.array_equal(r_dd.measurements.values[S], r_st.measurements.values[S])
               for S in r_dd.strategy.subsets) and all(np.array_equal(r_dd.marginals[A], r_st.marginals[A])
                                                       for A in r_dd.marginals)
    return [f"4. Dask at scale: {rows:,} records in {files} Parquet files of {math.ceil(rows / files):,} rows "
            f"(written in {t_write:.0f} s, not timed), all 105 two-way marginals, Gaussian ε = {EPSILON}, "
            f"δ = {DELTA:g}, seed 7",
            f"   Dask LocalCluster (2 processes × 1 thread, 4 GiB limit each): {t_dd:.1f} s wall, peak RSS of this "
            f"process and its workers {m_dd:,.0f} MB",
            f"   the same folder streamed by pyarrow in one process: {t_st:.1f} s wall, peak RSS {m_st:,.0f} MB",
            f"   bit-identical: {same}  [{'PASS' if same else 'FAIL'}]"]


def monte_carlo(draws: int) -> list[str]:
    import itertools

    import numpy as np

    import mmopt
    from mmopt.records import marginal_counts, release_marginals
    from mmopt.records.datasets import cps1988

    df, D = cps1988()
    sets = list(itertools.combinations(range(len(D.shape)), 2))
    truth = marginal_counts(df, D, sets)
    lines = [f"3. Monte Carlo on CPS 1988 ({len(df):,} records, N = {math.prod(D.shape):,}), all 21 two-way "
             f"marginals, {draws} seeded releases per ε (the whole records pipeline)"]
    for e, eps in enumerate((0.1, 1.0)):
        t0 = time.perf_counter()
        errs, predicted = [], None
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=SEEDED, category=UserWarning)
            for k in range(draws):
                r = release_marginals(df, D, 2, mmopt.Privacy(eps, DELTA), seed=(e + 1) * 1_000_000 + k)
                errs.append(sum(float(((r.marginals[A] - truth[A]) ** 2).sum()) for A in sets))
                if predicted is None:
                    predicted = sum(r.marginals[A].size * r.cell_variance[A] for A in sets)
        errs = np.array(errs)
        se = errs.std(ddof=1) / math.sqrt(draws)
        z = (errs.mean() - predicted) / se
        lines.append(f"   ε = {eps}: predicted total {predicted:,.1f}, measured {errs.mean():,.1f} ± {se:,.1f} (se), "
                     f"ratio {errs.mean() / predicted:.4f}, z = {z:+.2f}  [{'PASS' if abs(z) < 3 else 'FAIL'}; "
                     f"{time.perf_counter() - t0:.0f} s]")
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--dask-rows", type=int, default=1_000_000)
    p.add_argument("--draws", type=int, default=200)
    p.add_argument("--skip-large", action="store_true")
    p.add_argument("--skip-dask", action="store_true")
    p.add_argument("--dask-large", type=int, default=0, metavar="ROWS",
                   help="also run section 4 on ROWS records (e.g. 100000000); alone (with --skip-large "
                        "--skip-dask --draws 0) its lines are appended to the results file")
    p.add_argument("--no-write", action="store_true", help="print only; leave benchmarks/results alone")
    p.add_argument("--child", nargs=2, metavar=("TASK", "PATH"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _child(*args.child)
        return 0
    lines = [f"bench_records ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, "
             f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}, load average "
             f"{', '.join(f'{x:.2f}' for x in os.getloadavg())} at start)"]
    with tempfile.TemporaryDirectory(prefix="bench_records-") as tmp:
        if not args.skip_large:
            lines += scale(args.rows, Path(tmp))
            print("\n".join(lines), flush=True)
        if not args.skip_dask:
            lines += dask_check(args.dask_rows, Path(tmp))
            print("\n".join(lines[-3:]), flush=True)
        if args.dask_large:
            lines += dask_large(args.dask_large, Path(tmp))
            print("\n".join(lines[-4:]), flush=True)
    if args.draws:
        lines += monte_carlo(args.draws)
    text = "\n".join(lines) + "\n"
    print(text)
    alone = args.dask_large and args.skip_large and args.skip_dask and not args.draws
    if not args.no_write and alone:
        with RESULTS.open("a", encoding="utf-8") as f:
            f.write("\n".join(lines[-4:]).replace("4. Dask", f"4. ({lines[0][len('bench_records ('):-1]}) Dask", 1)
                    + "\n")
    elif not args.no_write:
        RESULTS.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
