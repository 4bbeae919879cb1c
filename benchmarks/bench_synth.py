"""Synthetic records (mmopt.synth): MST and AIM on CPS 1988, MST and AIM at d = 15, 50, 100, 10⁶ rows to Parquet.

Run:  OPENBLAS_NUM_THREADS=1 python benchmarks/bench_synth.py [--rows 100000]
Out:  a table on stdout and benchmarks/results/bench_synth.txt.

Each row is a fresh process (so its peak RSS, ``ru_maxrss``, is its own: interpreter, numpy, pandas included):
CPU seconds of the call (``time.process_time``), wall seconds, peak MB, and the workload error of the rows
(:func:`mmopt.synth.workload_error`). Budget (ε, δ) = (1, 10⁻⁹), seeded numpy noise at OpenDP's scales.

* CPS 1988 (28,155 records, 7 attributes): MST, and AIM on all 35 three-way marginals (error on those).
* A known Bayesian network (:func:`mmopt.records.datasets.tree_network`: a random tree over d attributes, each
  child drawn from a Dirichlet(½) conditional of its parent; sizes 2 for "binary", uniform in 2–10 for "mixed"),
  ``--rows`` records: MST, error on the 2-way
  marginals of every tenth attribute pair (their number grows as d²); AIM ("bn aim ...") on the workload of all
  d(d − 1)/2 two-way marginals (1,225 at d = 50, 4,950 at d = 100), error on the same pairs as MST's.
* Sampling 10⁶ rows from the CPS MST model and writing them to Parquet.
* ``--peers PYTHON`` (an interpreter with ``opendp[mbi]``, e.g. ``/work/synthvenv/bin/python``): OpenDP's
  contingency-table MST and AIM (Private-PGM inside; AIM on the same all-2-way workload) on the same
  Bayesian-network data at d = 50 and 100 (``opendp ...`` cases), each limited to 600 CPU s (``RLIMIT_CPU``, the
  issue's 10 minutes); a run that is stopped or fails is reported as such, with the CPU seconds and peak RSS it
  reached (``RUSAGE_CHILDREN``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from benchmarks import _results  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "bench_synth.txt"


def _one(case: str, rows: int) -> dict:
    """Run one case in this process; a JSON-able row."""
    import itertools
    import resource
    import tempfile
    import time
    import warnings

    import mmopt
    from mmopt.records.datasets import cps1988, tree_network
    from mmopt.synth import aim, mst, workload_error
    warnings.simplefilter("ignore", UserWarning)
    privacy = mmopt.Privacy(1.0, 1e-9)
    t0, w0 = time.process_time(), time.perf_counter()
    if case in ("cps mst", "cps aim", "cps 10^6 rows"):
        df, D = cps1988()
        W = list(itertools.combinations(range(7), 3))
        s = aim(df, D, W, privacy, seed=0) if case == "cps aim" else mst(df, D, privacy, seed=0)
        if case == "cps 10^6 rows":
            t0, w0 = time.process_time(), time.perf_counter()
            with tempfile.TemporaryDirectory() as tmp:
                s.records(10**6).to_parquet(Path(tmp) / "rows.parquet")
            err = float("nan")
        else:
            err = workload_error(df, s.records(len(df)), D, W)
    else:
        *algo, kind, d = case.split()[1:]
        df, D = tree_network(int(d), rows, seed=0, binary=kind == "binary")
        if algo == ["aim"]:
            s = aim(df, D, list(itertools.combinations(range(int(d)), 2)), privacy, seed=0)
        else:
            s = mst(df, D, privacy, seed=0)
        synth = s.records(rows)
        step = max(1, int(d) // 10)
        W = [(i, j) for i in range(0, int(d), step) for j in range(i + 1, int(d), step)]
        cpu, wall = time.process_time() - t0, time.perf_counter() - w0
        err = workload_error(df, synth, D, W)
        return {"case": case, "cpu": cpu, "wall": wall, "peak_mb": _peak(resource), "error": err}
    cpu, wall = time.process_time() - t0, time.perf_counter() - w0
    return {"case": case, "cpu": cpu, "wall": wall, "peak_mb": _peak(resource), "error": err}


def _peer(case: str, rows: int, python: str) -> dict:
    """One OpenDP case (module docstring) in a child process limited to 600 CPU s."""
    import resource
    import tempfile
    import time

    import pandas as pd

    from mmopt.accounting import max_rho
    from mmopt.records.datasets import tree_network
    from mmopt.synth import workload_error
    algo, kind, d = case.split()[1:]
    d = int(d)
    df, D = tree_network(d, rows, seed=0, binary=kind == "binary")
    peers = Path(__file__).resolve().parent.parent / "experiments" / "_synth_peers.py"
    limit = 600

    def cap():
        resource.setrlimit(resource.RLIMIT_CPU, (limit, limit))

    w0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "codes.parquet", Path(tmp) / "synth.parquet"
        df.to_parquet(src)
        got = subprocess.run([python, str(peers), str(src), json.dumps([len(a.categories) for a in D.attributes]),
                              repr(max_rho(1.0, 1e-9)), algo, str(out), "2"], capture_output=True, text=True,
                             check=False, preexec_fn=cap)
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        row = {"case": case, "cpu": usage.ru_utime + usage.ru_stime, "wall": time.perf_counter() - w0,
               "peak_mb": usage.ru_maxrss / 1024, "error": float("nan")}
        if got.returncode == 0:
            step = max(1, d // 10)
            W = [(i, j) for i in range(0, d, step) for j in range(i + 1, d, step)]
            synth = pd.read_parquet(out)
            synth.columns = df.columns
            row["error"] = workload_error(df, synth, D, W)
            row["status"] = "done"
        else:
            # the innermost reason (OpenDP nests its tracebacks; the last lines are closing brackets)
            reasons = [ln.strip() for ln in got.stderr.splitlines() if "Error" in ln or "Failed" in ln]
            # SIGXCPU at the soft limit, SIGKILL at the hard one (the same value here)
            stopped = got.returncode in (-24, -9, 152) and row["cpu"] >= 0.9 * limit
            row["status"] = (f"stopped at the {limit} CPU s limit" if stopped
                             else f"failed: {(reasons or [f'exit {got.returncode}'])[-1][:120]}")
    return row


def _peak(resource) -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


CASES = ["cps mst", "cps aim", "cps 10^6 rows", "bn mixed 15", "bn mixed 50", "bn binary 100", "bn mixed 100",
         "bn aim mixed 15", "bn aim binary 50", "bn aim mixed 50", "bn aim binary 100", "bn aim mixed 100"]


PEER_CASES = ["opendp mst binary 50", "opendp aim binary 50", "opendp mst binary 100", "opendp aim binary 100"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=100_000, help="records of the Bayesian-network data (default 10⁵)")
    p.add_argument("--case", default=None, help=argparse.SUPPRESS)  # internal: run one case, print JSON
    p.add_argument("--cases", default=None, metavar="C;C", help="run only these cases (separated by ';')")
    p.add_argument("--peers", default=None, metavar="PYTHON", help="add OpenDP's MST and AIM at d = 50, 100")
    _results.add_args(p)
    args = p.parse_args(argv)
    if args.case:
        print(json.dumps(_peer(args.case, args.rows, args.peers) if args.case.startswith("opendp")
                         else _one(args.case, args.rows)))
        return 0
    lines = [f"{'case':<18} {'CPU s':>8} {'wall s':>8} {'peak MB':>8} {'error':>8}"]
    cases = CASES + (PEER_CASES if args.peers else [])
    for case in cases if args.cases is None else [c.strip() for c in args.cases.split(";")]:
        got = subprocess.run([sys.executable, __file__, "--case", case, "--rows", str(args.rows),
                              *(["--peers", args.peers] if args.peers else [])],
                             capture_output=True, text=True, check=True)
        r = json.loads(got.stdout.strip().splitlines()[-1])
        lines.append(f"{r['case']:<18} {r['cpu']:>8.2f} {r['wall']:>8.1f} {r['peak_mb']:>8.0f} {r['error']:>8.4f}"
                     + (f"  {r['status']}" if "status" in r else ""))
        print(lines[-1], flush=True)
    text = "\n".join([lines[0], *lines[1:]]) + "\n"
    _results.write(RESULTS, f"# python benchmarks/bench_synth.py --rows {args.rows}\n" + text,
                   no_write=args.no_write, full=args.cases is None and args.rows == p.get_default("rows"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
