"""Records counted where they live: 10⁸ Parquet records through Polars (streamed), DuckDB and pyarrow.

Run:  OPENBLAS_NUM_THREADS=1 python benchmarks/bench_records_engines.py [--rows 100000000] [--check-rows 1000000]
      [--data results/bench_records_engines] [--threads 2] [--engines pyarrow,polars,duckdb,duckdb-path,polars-path]
Out:  a table on stdout and benchmarks/results/bench_records_engines.txt.

1. **Scale.** ``--rows`` synthetic records × 7 attributes of mixed kinds — ``sex`` and ``race`` strings
   (dictionary-encoded, with an unknown value and nulls), ``age`` int64 in 19 bins, ``income`` float64 in 17 bins
   (NaN too), ``state`` int64 categories (51 of 0–60), ``hours`` float32 categories (37.5 is none), ``married``
   bool — N = 3.6·10⁶ cells, are written once to one Parquet file under ``--data`` (``results/`` is ignored by
   git; reused when it exists). Each engine counts all 7 one-way and 21 two-way marginals of the file in a fresh
   process, ``--threads`` threads: :func:`mmopt.records.marginal_counts` on ``pl.scan_parquet(path)`` (Polars'
   streaming engine), on ``duckdb.read_parquet(path)`` (one GROUPING SETS query), on the path itself (pyarrow
   batches, the default), and on the path with ``engine="duckdb"`` / ``"polars"``. Wall and CPU seconds (user +
   sys of the process), peak RSS (``ru_maxrss``: interpreter and libraries included), and a SHA-256 of the
   counts, which must be the same for every engine. Target: ≤ 50 s wall for Polars and DuckDB on 2 cores.
2. **Bit-identity.** The first ``--check-rows`` records, counted from a pandas DataFrame, the Parquet file
   (pyarrow, DuckDB, Polars), a Polars LazyFrame and DataFrame, a DuckDB relation and a Dask DataFrame: every
   count of every marginal must be equal.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results" / "bench_records_engines.txt"
RACES = tuple(f"r{j}" for j in range(6))
STATES = tuple(s for s in range(1, 57) if s not in (3, 7, 14, 43, 52))  # 51 FIPS-like codes
HOURS = (0.0, 10.0, 20.0, 30.0, 35.0, 40.0, 45.0, 50.0, 60.0)
ENGINES = ("pyarrow", "polars", "duckdb", "duckdb-path", "polars-path")


def domain():
    from mmopt.records import Attribute, Domain

    return Domain((Attribute("sex", categories=("F", "M")),
                   Attribute("race", categories=RACES),
                   Attribute("age", edges=tuple(range(0, 95, 5)) + (math.inf,)),
                   Attribute("income", edges=(-math.inf, 0.0) + tuple(float(k * 10_000) for k in range(1, 16))
                             + (math.inf,)),
                   Attribute("state", categories=STATES),
                   Attribute("hours", categories=HOURS),
                   Attribute("married", categories=(0, 1))))


def sets(d: int = 7) -> list[tuple[int, ...]]:
    return [*((i,) for i in range(d)), *itertools.combinations(range(d), 2)]


def chunk(m: int, rng):
    """``m`` synthetic records as an Arrow table (every kind of out-of-domain value included)."""
    import numpy as np
    import pyarrow as pa

    def dictionary(values, p, null):
        idx = rng.choice(len(values), m, p=p).astype(np.int32)
        return pa.DictionaryArray.from_arrays(pa.array(idx, mask=rng.random(m) < null), pa.array(values))

    age = rng.integers(-1, 110, m)
    income = np.round(rng.lognormal(10.3, 0.9, m) * rng.choice([1, -1], m, p=[0.99, 0.01]), 2)
    income[rng.random(m) < 0.005] = np.nan
    hours = rng.choice(np.array(HOURS + (37.5,), dtype=np.float32), m)
    return pa.table({
        "sex": dictionary(["F", "M", "X"], [0.495, 0.495, 0.01], 0.005),
        "race": dictionary(list(RACES) + ["other"], [0.6, 0.13, 0.12, 0.06, 0.04, 0.03, 0.02], 0.0),
        "age": pa.array(age, mask=rng.random(m) < 0.002),
        "income": pa.array(income),  # NaN stays NaN (not null): Parquet statistics leave it out
        "state": pa.array(rng.integers(0, 61, m)),
        "hours": pa.array(hours),
        "married": pa.array(rng.random(m) < 0.5),
        "id": pa.array(np.arange(m, dtype=np.int64)),  # a column no marginal reads
    })


def write_records(path: Path, rows: int, seed: int = 0) -> None:
    import numpy as np
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    tmp = path.with_suffix(".partial")
    writer, written = None, 0
    while written < rows:
        table = chunk(min(1_000_000, rows - written), rng)
        if writer is None:
            writer = pq.ParquetWriter(tmp, table.schema)
        writer.write_table(table)
        written += table.num_rows
    writer.close()
    tmp.rename(path)


def digest(counts: dict) -> str:
    h = hashlib.sha256()
    for A in sorted(counts):
        h.update(repr(A).encode())
        h.update(counts[A].astype("<i8").tobytes())
    return h.hexdigest()[:16]


def _child(engine: str, path: str, threads: int) -> None:
    """In a fresh process: count with one engine, print a JSON row."""
    os.environ["POLARS_MAX_THREADS"] = str(threads)
    import resource

    from mmopt.records import marginal_counts

    D, S = domain(), sets()
    if engine == "polars":
        import polars as pl
        source, how = pl.scan_parquet(path), "auto"
    elif engine == "duckdb":
        import duckdb
        con = duckdb.connect(config={"threads": threads})
        source, how = con.read_parquet(path), "auto"
    else:
        if engine != "pyarrow":
            __import__(engine.split("-")[0])
        source, how = path, engine.split("-")[0]
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    counts = marginal_counts(source, D, S, engine=how)
    seconds = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    print(json.dumps({"engine": engine, "seconds": seconds, "cpu": cpu, "peak_mb": r1.ru_maxrss / 1024,
                      "kept": int(counts[(0,)].sum()), "digest": digest(counts)}))


def _run_child(engine: str, path: Path, threads: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", engine, str(path), str(threads)],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"child {engine} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def scale(rows: int, data: Path, threads: int, engines) -> list[str]:
    data.mkdir(parents=True, exist_ok=True)
    path = data / f"records_{rows}.parquet"
    made = "reused"
    if not path.exists():
        t0 = time.perf_counter()
        write_records(path, rows)
        made = f"written in {time.perf_counter() - t0:.0f} s, not timed"
    D = domain()
    lines = [f"1. Scale: {rows:,} records × 7 attributes {D.shape} (N = {math.prod(D.shape):,} cells), 7 one-way + 21 "
             f"two-way marginals, {threads} threads",
             f"   Parquet: {path.stat().st_size / 2**20:,.0f} MB ({made}; 8 columns, 1,000,000-row groups, snappy)",
             f"   {'engine':<38}{'wall s':>8}{'CPU s':>8}{'peak RSS MB':>13}{'load avg':>10}  kept records  "
             "counts SHA-256"]
    names = {"pyarrow": "path, pyarrow batches (default)", "polars": "pl.scan_parquet(path) (streaming)",
             "duckdb": "duckdb.read_parquet(path)", "duckdb-path": "path, engine='duckdb'",
             "polars-path": "path, engine='polars'"}
    got = []
    for engine in engines:
        load = os.getloadavg()[0]
        r = _run_child(engine, path, threads)
        got.append(r)
        target = "" if engine not in ("polars", "duckdb") else f"  [≤ 50 s: {'PASS' if r['seconds'] <= 50 else 'MISS'}]"
        lines.append(f"   {names[engine]:<38}{r['seconds']:>8.1f}{r['cpu']:>8.1f}{r['peak_mb']:>13,.0f}{load:>10.2f}  "
                     f"{r['kept']:>12,}  {r['digest']}{target}")
        print(lines[-1], flush=True)
    same = len({r["digest"] for r in got}) == 1
    lines.append(f"   identical counts across engines at {rows:,} records: {same}  [{'PASS' if same else 'FAIL'}]")
    return lines


def identity(rows: int, data: Path) -> list[str]:
    import dask.dataframe as dd
    import duckdb
    import numpy as np
    import pandas as pd
    import polars as pl
    import pyarrow.parquet as pq

    from mmopt.records import marginal_counts

    D, S = domain(), sets()
    with tempfile.TemporaryDirectory(prefix="bench_records_engines-") as tmp:
        path = Path(tmp) / "small.parquet"
        pq.write_table(chunk(rows, np.random.default_rng(1)), path, row_group_size=rows // 7 + 1)
        df = pd.read_parquet(path)
        lf = pl.scan_parquet(path)
        con = duckdb.connect()
        t0 = time.perf_counter()
        got = {"pandas DataFrame": marginal_counts(df, D, S),
               "Parquet path (pyarrow)": marginal_counts(path, D, S),
               "Parquet path, engine='duckdb'": marginal_counts(path, D, S, engine="duckdb"),
               "Parquet path, engine='polars'": marginal_counts(path, D, S, engine="polars"),
               "polars LazyFrame": marginal_counts(lf, D, S),
               "polars DataFrame": marginal_counts(lf.collect(), D, S),
               "DuckDB relation": marginal_counts(con.read_parquet(str(path)), D, S),
               "Dask DataFrame (4 partitions)": marginal_counts(dd.from_pandas(df, npartitions=4), D, S)}
        seconds = time.perf_counter() - t0
    ref = got["pandas DataFrame"]
    same = {k: all(np.array_equal(v[A], ref[A]) and v[A].dtype == ref[A].dtype for A in ref) for k, v in got.items()}
    ok = all(same.values())
    return [f"2. Bit-identity: {rows:,} records (the same generator, another seed), {len(S)} marginals, "
            f"{sum(c.size for c in ref.values()):,} cells, {int(ref[(0,)].sum()):,} records kept, {len(got)} sources "
            f"({seconds:.0f} s)",
            *(f"   {k:<32} {'identical' if v else 'DIFFERENT'}" for k, v in same.items()),
            f"   all identical: {ok}  [{'PASS' if ok else 'FAIL'}]"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=100_000_000)
    p.add_argument("--check-rows", type=int, default=1_000_000)
    p.add_argument("--data", type=Path, default=ROOT / "results" / "bench_records_engines")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--engines", default=",".join(ENGINES))
    p.add_argument("--no-write", action="store_true", help="print only; leave benchmarks/results alone")
    p.add_argument("--child", nargs=3, metavar=("ENGINE", "PATH", "THREADS"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _child(args.child[0], args.child[1], int(args.child[2]))
        return 0
    engines = [e for e in args.engines.split(",") if e]
    if set(engines) - set(ENGINES):
        p.error(f"--engines: choose from {ENGINES}")
    import duckdb
    import polars as pl
    import pyarrow as pa

    lines = [f"bench_records_engines ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, "
             f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())} at start: the machine shared with other "
             f"jobs; polars {pl.__version__}, duckdb {duckdb.__version__}, pyarrow {pa.__version__})"]
    print(lines[0], flush=True)
    if args.rows:
        lines += scale(args.rows, args.data, args.threads, engines)
    if args.check_rows:
        lines += identity(args.check_rows, args.data)
        print("\n".join(lines[-11:]), flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_write:
        RESULTS.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
