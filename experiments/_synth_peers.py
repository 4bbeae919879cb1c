"""OpenDP's contingency-table MST and AIM (Private-PGM inside), run in *another* Python that has ``opendp[mbi]``.

Not imported by mmopt or its tests: ``experiments.synth`` runs this file as a script with the interpreter given to
``--peers`` (a separate venv, so that JAX never enters mmopt's), passing integer-coded records:

    PYTHON experiments/_synth_peers.py CODES.parquet '[n1, n2, ...]' RHO {mst|aim} OUT.parquet

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
        algo = dp.mbi.AIM(queries=3) if algorithm == "aim" else dp.mbi.MST()
        try:
            table = context.query().contingency_table(keys=keys, algorithm=algo).release()
            break
        except dp.OpenDPException as exc:
            if "insufficient budget" not in str(exc) or shrink == 3e-3:
                raise
    synth = table.synthesize(rows=codes.height)
    cpu, wall = time.process_time() - t0, time.time() - w0
    synth.write_parquet(out)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"cpu": cpu, "wall": wall, "peak_mb": peak, "rows": synth.height, "rho": used}))


if __name__ == "__main__":
    main(sys.argv[1:])
