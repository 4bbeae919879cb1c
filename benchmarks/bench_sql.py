"""mmopt.sql and the OpenDP measurement on a 12-grouping-set ROLLUP × CUBE: time, error, and the independent baseline.

Run:  OPENBLAS_NUM_THREADS=1 python benchmarks/bench_sql.py [--rows 1000000]
Out:  a table on stdout and benchmarks/results/bench_sql.txt.

The query ``SELECT state, county, sex, agegrp, COUNT(*) FROM people GROUP BY ROLLUP(state, county),
CUBE(sex, agegrp)`` (12 grouping sets) on synthetic records whose attributes are plain (county is its own
attribute here, not nested in state: the hierarchy family is other work), at (ε, δ) = (1, 1e-9), for two
geographies. Per row: CPU seconds of the parse alone, of ``mmopt.sql`` (parse, plan, count, draw, least
squares, table; seeded numpy noise), of ``release_marginals`` on the same grouping sets (seeded, then with
OpenDP's sampler) and of the OpenDP measurement (build + run; OpenDP's sampler: its exact Gaussian sampler
costs some µs per measured entry, p of them); the release's expected total squared error over all cells, its
ratio to the SVD lower bound, and its ratio to **independent noise per group-by** at the same zCDP ρ (what
OpenDP's, Tumult's and SmartNoise's group-bys do): k grouping sets each measured once with ρ/k, σ_S² = k/(2ρ)
per cell, total Σ_S N_S·k/(2ρ), exact (a composition of Gaussians of total ρ has the (ε, δ) of one Gaussian of
that ρ). The release's ρ is OpenDP's map for its σ.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from benchmarks import _results  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "bench_sql.txt"
QUERY = ("SELECT state, county, sex, agegrp, COUNT(*) FROM people "
         "GROUP BY ROLLUP(state, county), CUBE(sex, agegrp)")
GEOGRAPHIES = ((10, 100), (50, 400))  # (states, counties)


def _domain(states: int, counties: int):
    from mmopt.records import Attribute, Domain
    return Domain((Attribute("state", categories=tuple(f"s{i}" for i in range(states))),
                   Attribute("county", categories=tuple(f"c{i}" for i in range(counties))),
                   Attribute("sex", categories=("F", "M")),
                   Attribute("agegrp", edges=tuple(range(0, 100, 10)) + (120,))))


def _records(rows: int, states: int, counties: int, seed: int = 0):
    import numpy as np
    import pandas as pd
    rng = np.random.default_rng(seed)
    county = rng.zipf(1.3, rows) % counties  # skewed county sizes, as real geographies
    return pd.DataFrame({"state": np.char.add("s", (county % states).astype(str)),
                         "county": np.char.add("c", county.astype(str)),
                         "sex": rng.choice(["F", "M"], rows), "agegrp": rng.uniform(0, 100, rows)})


def _cpu(fn, *args, **kwargs):
    t = time.process_time()
    out = fn(*args, **kwargs)
    return out, time.process_time() - t


def run(rows: int) -> list[str]:
    import opendp.prelude as dp

    import mmopt
    from mmopt.groupby.parse import parse_query
    from mmopt.opendp import make_matrix_mechanism, records_space
    from mmopt.records import plans, release_marginals
    from mmopt.structured.residual import closure as cl

    privacy = mmopt.Privacy(1.0, 1e-9)
    lines = [f"{'states':>6} {'counties':>8} {'rows':>9} {'sets':>4} {'cells':>7} {'parse s':>8} {'sql s':>7} "
             f"{'release s':>9} {'(opendp noise)':>14} {'measurement s':>13} {'p':>7} {'total err':>10} "
             f"{'/bound':>7} {'/independent':>12}"]
    for states, counties in GEOGRAPHIES:
        D, df = _domain(states, counties), _records(rows, states, counties)
        q, t_parse = _cpu(parse_query, QUERY)
        sets = list(q.grouping_sets)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # the seeded-noise warning: these are studies
            out, t_sql = _cpu(mmopt.sql, QUERY, df, D, privacy, seed=0)
            ref, t_rel = _cpu(release_marginals, df, D, sets, privacy, seed=0)
        _, t_rel_odp = _cpu(release_marginals, df, D, sets, privacy)  # OpenDP's sampler, as the measurement's
        meas, t_build = _cpu(make_matrix_mechanism, *records_space(D), dp.zero_concentrated_divergence(), D, sets,
                             privacy=privacy)
        m, t_run = _cpu(meas, df)
        r = out.release
        keys = list(r.marginals)
        assert all((r.marginals[A] == ref.marginals[A]).all() for A in keys)  # the same numbers
        assert m.noise_scale == r.noise_scale and m.cell_variance == r.cell_variance
        cells = sum(cl.cells(D.shape, A) for A in keys)
        chosen = plans.choose(r.workload, privacy)
        independent = cells * len(keys) / (2 * r.rho)
        lines.append(f"{states:>6} {counties:>8} {rows:>9,} {len(keys):>4} {cells:>7,} {t_parse:>8.3f} {t_sql:>7.2f} "
                     f"{t_rel:>9.2f} {t_rel_odp:>14.2f} {t_build + t_run:>13.2f} {r.strategy.n_rows:>7,} "
                     f"{r.expected_total:>10.4g} {chosen.unit_total / chosen.unit_bound:>7.4f} "
                     f"{r.expected_total / independent:>12.3f}")
        print(lines[-1], flush=True)
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    _results.add_args(p)
    args = p.parse_args()
    lines = run(args.rows)
    text = "\n".join([f"bench_sql: {QUERY}", "(ε, δ) = (1, 1e-9); CPU seconds; errors are expected totals over all "
                      "released cells", *lines]) + "\n"
    _results.write(RESULTS, text, no_write=args.no_write, full=args.rows == p.get_default("rows"))


if __name__ == "__main__":
    main()
