"""OpenDP's contingency-table MST and AIM (Private-PGM inside), run in *another* Python that has ``opendp[mbi]``.

Not imported by mmopt or its tests: ``experiments.synth`` runs this file as a script with the interpreter given to
``--peers`` (a separate venv, so that JAX never enters mmopt's), passing integer-coded records:

    PYTHON experiments/_synth_peers.py CODES.parquet '[n1, n2, ...]' RHO {mst|aim} OUT.parquet [K]

(K: AIM's workload is all K-way marginals, default 3; given, the model's own error is not computed — the caller
scores the rows — as ``benchmarks/bench_synth.py --peers`` does at d = 50 and 100.)

It prints one JSON line: CPU seconds (this process, all threads), wall seconds, peak RSS (MB), rows written,
the ρ used (a hair below the budget when OpenDP's own split needs it).
Same data, domain (keys = every code of every column, so OpenDP needs no δ for the keys), privacy unit (one
record added or removed) and zCDP budget ρ as mmopt's runs; AIM with ``queries=3`` (all 3-way marginals, the
experiment's workload). OpenDP's samplers cannot be seeded, so trials differ by their noise alone.
"""

import json
import resource
import sys
import time


def main(argv):
    path, shape, rho, algorithm, out = argv[0], json.loads(argv[1]), float(argv[2]), argv[3], argv[4]
    way = int(argv[5]) if len(argv) > 5 else None
    import opendp.prelude as dp
    import polars as pl

    dp.enable_features("contrib")
    codes = pl.read_parquet(path)
    keys = {c: list(range(k)) for c, k in zip(codes.columns, shape, strict=True)}
    for shrink in (0.0, 1e-12, 1e-9, 1e-6, 1e-4, 1e-3, 3e-3):
        # OpenDP 0.16's MST can split its budget into parts whose sum exceeds it by an ulp ("insufficient budget
        # for query: 8.856922359251039e-6 > 8.856922359251037e-6" at ρ = 1.7714e-4): retry a hair below ρ (10⁻⁴ below it
        # was enough there)
        used = rho * (1.0 - shrink)
        t0, w0 = time.process_time(), time.time()  # the successful attempt only
        context = dp.Context.compositor(data=codes.lazy(), privacy_unit=dp.unit_of(contributions=1),
                                        privacy_loss=dp.loss_of(rho=used), split_evenly_over=1)
        algo = dp.mbi.AIM(queries=way or 3) if algorithm == "aim" else dp.mbi.MST()
        try:
            table = context.query().contingency_table(keys=keys, algorithm=algo).release()
            break
        except dp.OpenDPException as exc:
            if "insufficient budget" not in str(exc) or shrink == 3e-3:
                raise
    synth = table.synthesize(rows=codes.height)  # OpenDP's default, method="round"
    cpu, wall = time.process_time() - t0, time.time() - w0
    synth.write_parquet(out)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if way is not None:
        print(json.dumps({"cpu": cpu, "wall": wall, "peak_mb": peak, "rows": synth.height, "rho": used}))
        return
    table.synthesize(rows=codes.height, method="sample").write_parquet(out + ".sample.parquet")
    print(json.dumps({"cpu": cpu, "wall": wall, "peak_mb": peak, "rows": synth.height, "rho": used,
                      "model_error": _model_error(table, codes)}))


def _model_error(table, codes) -> float:
    """The workload error of the model's own 3-way marginals (``project_melted``; the null key OpenDP adds to
    every column is dropped, and each table normalised by its own total)."""
    import itertools

    import numpy as np

    errs = []
    n = codes.height
    for attrs in itertools.combinations(codes.columns, 3):
        est = table.project_melted(list(attrs)).drop_nulls(list(attrs))
        true = codes.group_by(list(attrs)).len(name="true")
        both = est.join(true, on=list(attrs), how="full", coalesce=True).fill_null(0)
        m = both["len"].to_numpy().astype(float)
        errs.append(float(np.abs(both["true"].to_numpy() / n - m / max(m.sum(), 1e-300)).sum()))
    return float(np.mean(errs))


if __name__ == "__main__":
    main(sys.argv[1:])
