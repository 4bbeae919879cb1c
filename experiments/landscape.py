"""The data-independent landscape: the seed's "Error on Prefix workload" table, all ranges, 2-D ranges, marginals.

Run:   python -m experiments.landscape            (quick: n = 128 … 1,024, sides 16 … 64, 2-way marginals on
                                                   2^8, 4^4, 4^6)
       python -m experiments.landscape --full     (n = 128 … 8,192, sides 16 … 256; min_error at every n, ~10 CPU
                                                   min per workload at 8,192, kron at 256² ~3.5 min; marginals
                                                   also on 2^12 and 8^5)
       python -m experiments.landscape --jobs 2   (sizes side by side; the same numbers)
Out:   results/landscape/ (not tracked; --out DIR elsewhere): landscape.csv, landscape.md (= README.md), landscape.png.
Talks: a line per (table, size) on stderr, at least one every 10 s; --quiet: none.

Every figure is an exact expected error (ε = 1, Laplace noise: RMSE ratios do not depend on ε), never a
simulation: tree strategies (H_b, HB, GreedyH) through :class:`mmopt.baselines.hierarchies.IntervalTree` (tested equal
to mmopt.evaluate), Privelet in 1-D and the quad-tree through the Haar spectrum (mmopt.baselines.transforms), products
and optimised strategies through mmopt.evaluate. The 1-D tables also list, outside the reference, the Low-Rank
Mechanism (``method="lrm"``, up to ``lrm_max`` cells) and Eigen-design (``method="eigen_design"``, an L2 design, up
to ``eigen_max``), both scored exactly under ε-DP by mmopt.evaluate; the marginals table (2-way marginals on
``marginal_domains``: Identity, Fourier, datacube, OPT_M, auto) is :mod:`experiments._landscape_marginals`.
The reference column ("mmopt", HDMM's in the seed) is the best ε-DP strategy mmopt has at that size in reasonable
time: min_error (one restart of its p-Identity search; from 512 cells on the O(n) Gram search of
:mod:`mmopt.search.min_error_fast`) up to ``min_error_max`` cells, and always also every H_b with b = 2 … 16 and HB; in
2-D, HDMM's OPT_⊗ (``method="kron"``) up to ``kron_max`` per side and every H_b ⊗ H_b and HB ⊗ HB. Which one won
is recorded (in the marginals table: the best of its five rows).
"""

from __future__ import annotations

import argparse
import math
import time
import warnings
from dataclasses import dataclass

import numpy as np

import mmopt
from experiments import _common, _progress, _run
from experiments import _landscape_marginals as marg
from experiments import _landscape_report as report
from mmopt import strategy as st
from mmopt import toeplitz
from mmopt import workload as wl
from mmopt._base.parallel import ordered_map
from mmopt.baselines import hierarchies as hi
from mmopt.baselines import transforms as tr
from mmopt.search.min_error_fast import FAST_MIN_N
from mmopt.structured import census

EPS = mmopt.Privacy(1.0)
COLUMNS = ["table", "n", "strategy", "sensitivity", "rmse", "ratio", "seed_ratio", "ratio_to_identity",
           "seed_ratio_to_identity", "detail", "seconds"]
TABLES = ("prefix", "all_range", "ranges_2d", "marginals")
BRANCHINGS = tuple(range(2, 17))


@dataclass(frozen=True)
class Config:
    sizes_1d: tuple[int, ...]
    sides_2d: tuple[int, ...]
    min_error_max: int = 256   # largest n for min_error in the reference column
    kron_max: int = 64         # largest side for the 2-D kron search
    marginal_domains: tuple[tuple[int, ...], ...] = ()  # product domains of the 2-way marginals table
    lrm_max: int = 256         # largest n for the listed LRM row (its ALM takes ~1 min at 256, O(n⁴))
    eigen_max: int = 1024      # largest n for the listed Eigen-design row (dense n × n eigendecomposition, ~1 s)


_MARGINALS_QUICK = ((2,) * 8, (4,) * 4, (4,) * 6)
QUICK = Config((128, 256, 512, 1024), (16, 32, 64), min_error_max=1024, kron_max=64,
               marginal_domains=_MARGINALS_QUICK)
# min_error runs at every size of --full: past 1,024 cells it starts coarse to fine
# (mmopt.search.pidentity_ladder), about
# 7½–9 CPU min at 8,192 (448–549 s measured; benchmarks/results/bench_eps_search.txt)
FULL = Config((128, 256, 512, 1024, 2048, 4096, 8192), (16, 32, 64, 128, 256), min_error_max=8192, kron_max=256,
              marginal_domains=(*_MARGINALS_QUICK, (2,) * 12, (8,) * 5))  # 2^12: ~25 s (OPT_M and auto)


def _row(table, n, name, delta, unit, m, detail="", seconds=0.0) -> dict:
    """A row: RMSE = √(c·Δ²·tr(G X⁺)/m) at ε = 1 from the unit error tr(G X⁺)."""
    rmse = math.sqrt(EPS.variance_factor * delta**2 * unit / m)
    return {"table": table, "n": n, "strategy": name, "sensitivity": delta, "rmse": rmse, "detail": detail,
            "seconds": round(seconds, 2)}


def _tree_row(table, n, T, op, name=None, detail=""):
    t0 = time.perf_counter()
    unit = T.error(op) / T.sensitivity() ** 2
    return _row(table, n, name or T.name, T.sensitivity(), unit, op.n_queries, detail, time.perf_counter() - t0)


def _listed(table, n, W, name, method) -> dict:
    """A listed row (never a reference candidate): the strategy ``method`` returns, scored exactly under EPS by
    mmopt.evaluate — its Δ₁ counts, whatever norm the method optimised (Eigen-design's is L2)."""
    t0 = time.perf_counter()
    res = mmopt.optimize(W, method=method, verbose=False)
    with warnings.catch_warnings():  # scoring an L2 method's strategy under Laplace noise is this row's point: the
        # "optimise it with privacy=…" advice was printed on every table
        warnings.filterwarnings("ignore", message=r".*was optimised with no privacy given", category=UserWarning)
        r = mmopt.evaluate(W, res.strategy, EPS)
    return {**_row(table, n, name, r.sensitivity, 1.0, 1, f"{method} ({res.status})", time.perf_counter() - t0),
            "rmse": r.rmse}


def one_d(table: str, n: int, cfg: Config) -> list[dict]:
    """The rows of one 1-D size: identity, H2, Privelet, HB, GreedyH (both objectives), LRM and Eigen-design
    (listed only, up to their limits), the reference."""
    op = (hi.prefix_gram if table == "prefix" else hi.all_range_gram)(n)
    rows = [_row(table, n, "Identity", 1.0, float(op.diagonal.sum()), op.n_queries)]
    rows.append(_tree_row(table, n, hi.hierarchical_tree(n, 2), op, "H2"))
    t0 = time.perf_counter()
    g, s = tr.haar_quadratics(op)
    rows.append(_row(table, n, "Privelet", 1 + math.log2(n), float(np.sum(g / s)), op.n_queries,
                     "Y (Haar, ±1 rows)", time.perf_counter() - t0))
    hb = hi.hb_tree(n)
    rows.append(_tree_row(table, n, hb, op, "HB", hb.name))
    rows.append(_tree_row(table, n, hi.greedy_h_tree(op), op, "GreedyH", "authors' code: tr(G²X⁺) objective"))
    rows.append(_tree_row(table, n, hi.greedy_h_tree(op, objective="workload"), op, "GreedyH (tr GX⁺)",
                          "objective: the workload's error"))
    if n <= max(cfg.lrm_max, cfg.eigen_max):
        Wd = getattr(wl, table)(n)  # dense: both methods work on the n × n Gram
        rows += [_listed(table, n, Wd, name, method) for name, method, limit in
                 (("LRM", "lrm", cfg.lrm_max), ("Eigen-design", "eigen_design", cfg.eigen_max)) if n <= limit]
    cands = [_tree_row(table, n, hi.hierarchical_tree(n, b), op) for b in BRANCHINGS if b <= n] + [rows[3]]
    if n <= cfg.min_error_max:
        t0 = time.perf_counter()
        # the structured workload from 512 cells on: never an n×n Gram (mmopt.search.min_error_fast)
        W = (getattr(toeplitz, table) if n >= FAST_MIN_N else getattr(wl, table))(n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            res = mmopt.optimize(W, method="min_error", seed=0, options={"restarts": 1}, verbose=False)
        # res.objective is the exact Δ₁²·tr(G X⁺) of the returned strategy (mmopt.evaluate below 512 cells, the
        # Woodbury form on the structured G above), and both paths return Δ₁ = 1
        cands.append(_row(table, n, "min_error", 1.0, res.objective, op.n_queries, f"min_error ({res.status})",
                          time.perf_counter() - t0))
    best = min(cands, key=lambda r: r["rmse"])
    rows.append({**best, "strategy": "mmopt", "detail": f"best of {len(cands)}: {best['detail'] or best['strategy']}",
                 "seconds": round(sum(c["seconds"] for c in cands), 2)})
    return rows


def two_d(n: int, cfg: Config) -> list[dict]:
    """The rows of one 2-D side: all n² × n² rectangles (ranges_2d), implicit, exact."""
    W = census.ranges_2d(n)
    m = W.n_queries

    def ev(name, A, detail=""):
        t0 = time.perf_counter()
        r = mmopt.evaluate(W, A, EPS)
        if not r.total_exact:
            raise RuntimeError(f"landscape: {name} on ranges_2d({n}) is not exact ({r.method})")
        return {**_row("ranges_2d", n, name, r.sensitivity, 1.0, 1, detail, time.perf_counter() - t0), "rmse": r.rmse}

    rows = [ev("Identity", st.kron(st.identity(n), st.identity(n))),
            ev("H2⊗H2", st.kron(st.hierarchical(n), st.hierarchical(n))),
            ev("Privelet", st.privelet((n, n)), "Y ⊗ Y")]
    t0 = time.perf_counter()
    qt = st.quadtree(n)
    total = tr.haar_evaluate(W, qt, EPS)
    rows.append({**_row("ranges_2d", n, "quad-tree", qt.sensitivity(), 1.0, 1, "geometric budget, Haar-exact",
                        time.perf_counter() - t0), "rmse": math.sqrt(total / m)})
    hb = st.hb(n)
    rows.append(ev("HB⊗HB", st.kron(hb, hb), hb.name + " per axis"))
    g = st.greedy_h(wl.all_range(n))
    rows.append(ev("GreedyH⊗GreedyH", st.kron(g, g), "per axis, all-range weights"))
    cands = [rows[4]] + [ev(f"H{b}⊗H{b}", st.kron(st.hierarchical(n, b), st.hierarchical(n, b)))
                         for b in BRANCHINGS if b <= n]
    if n <= cfg.kron_max:
        t0 = time.perf_counter()
        res = mmopt.optimize(W, method="kron", seed=0, verbose=False)
        cands.append({**ev("kron", res.strategy, f"kron ({res.status})"),
                      "seconds": round(time.perf_counter() - t0, 2)})
        rows.append(cands[-1])
    best = min(cands, key=lambda r: r["rmse"])
    rows.append({**best, "strategy": "mmopt", "detail": f"best of {len(cands)}: {best['detail'] or best['strategy']}",
                 "seconds": round(sum(c["seconds"] for c in cands), 2)})
    return rows


def _cell(table: str, n, cfg: Config) -> list[dict]:
    if table == "marginals":  # n is the domain's shape here
        rows = marg.rows(n, EPS)
    else:
        rows = two_d(n, cfg) if table == "ranges_2d" else one_d(table, n, cfg)
    ref = next(r["rmse"] for r in rows if r["strategy"] == "mmopt")
    ident = next(r["rmse"] for r in rows if r["strategy"] == "Identity")
    for r in rows:
        seed = report.SEED.get((n, r["strategy"])) if table == "prefix" else None
        seed_ident = report.SEED.get((n, "Identity")) if table == "prefix" else None
        r.update(ratio=r["rmse"] / ref, ratio_to_identity=r["rmse"] / ident, seed_ratio=seed if seed else "",
                 seed_ratio_to_identity=seed / seed_ident if seed and seed_ident else "")
    return rows


def run(cfg: Config = QUICK, *, n_jobs: int | None = 1, progress: _progress.Progress | None = None) -> list[dict]:
    """All rows (see COLUMNS), table by table, sizes in order."""
    tasks = ([(t, n, cfg) for t in TABLES[:2] for n in cfg.sizes_1d] + [("ranges_2d", n, cfg) for n in cfg.sides_2d]
             + [("marginals", tuple(s), cfg) for s in cfg.marginal_domains])
    made = ordered_map(_cell, tasks, n_jobs=n_jobs)
    if progress is not None:
        progress.stage("tables", total=len(tasks))
        made = progress.track(made, [f"{t} n={marg.label(n) if t == 'marginals' else n}" for t, n, _ in tasks])
    return [r for rows in made for r in rows]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.landscape", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--full", action="store_true", help="n = 128 … 8,192 and sides 16 … 256")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="sizes computed at once (joblib; -1: every core)")
    p.add_argument("--from-csv", action="store_true", help="rewrite the README and figure from landscape.csv")
    _common.add_output_args(p, "landscape")
    args = p.parse_args(argv)
    if args.jobs == 0:
        p.error("argument --jobs must be a non-zero integer (1: one at a time, -1: every core); got 0")
    try:
        out = _run.check_out_dir(_common.out_of(args, "landscape"))
    except ValueError as e:
        p.error(str(e))
    if args.from_csv and _common.missing(out, ["landscape.csv"]):
        p.error(f"--from-csv: {out} has no landscape.csv; run without --from-csv first")
    cfg = FULL if args.full else QUICK
    try:
        with _run.hold(out), _progress.Progress("landscape", enabled=not args.quiet) as prog:
            if not args.from_csv:
                rows = run(cfg, n_jobs=args.jobs, progress=prog)
                _common.write_csv(out / "landscape.csv", COLUMNS, rows)
            rows = _common.read_csv(out / "landscape.csv")
            prog.stage("report")
            made = report.write(rows, out, mode="full" if args.full else "quick")
            prog.done(f"wrote {', '.join(f.name for f in made)} into {out}")
    except _run.Busy as e:
        p.error(str(e))
    print(report.table_text(rows, "prefix"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
