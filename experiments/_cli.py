"""The command line of experiments.range_queries: every argument is checked before any work starts.

Bad input ends in ``parser.error`` (a usage line, the reason, exit code 2), never in a traceback after
minutes of computing. The limits below are what the experiment supports, and why.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import mmopt
from experiments import _common, _helpers, _run

CMD = "python -m experiments.range_queries"
PARAMS = "range_queries.params.json"
# Version of range_queries.csv's columns and rounding: rows written under another version are not resumed.
FORMAT = 2
# n must be a power of two (Yₙ and the Table-1 basis need it) and ≥ 2 (H_best needs a branching b ≤ n).
# 4096 is the largest n at which mmopt.evaluate and the l2_approx solver are benchmarked (benchmarks/results:
# 46 s for l2_approx at 4096, about 8× per doubling), so larger n would run for hours, unmeasured.
MIN_SIZE, MAX_SIZE = 2, 4096
# Program 5.3 (min_sensitivity) took over 20 minutes at n = 16 on prefix (measured; see _helpers.FULL).
MINSENS_LIMIT = 16
# Every error is c·(unit error) with c = 2/ε²; the unit errors of this table lie within about 1e-10…1e100,
# and c must keep them normal floats. Privacy accepts any finite ε > 0, but 2/ε² overflows to inf below
# ε ≈ 1e-154 and underflows to 0 above ε ≈ 1e154, so the table is limited to a range with margin.
EPSILON_RANGE = (1e-100, 1e100)
SIDE_INPUTS = ("theorem_checks.csv", "thm630_constants.csv", "profiles_n16.csv", "range_error_n64.csv",
               "ellipses.csv", "convergence.csv")
# Parameters that change every row's values: rows computed under others cannot be resumed. (sdp_max changes
# only min_error rows whose engine it switches; resume_rows recomputes just those.)
ROW_PARAMS = ("format", "epsilon")


def _size(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"sizes must be integers; got {text!r}") from None
    if n < MIN_SIZE or n > MAX_SIZE or n & (n - 1):
        raise argparse.ArgumentTypeError(f"sizes must be powers of two in [{MIN_SIZE}, {MAX_SIZE}] (the wavelet "
                                         f"Yₙ needs a power of two); got {n}")
    return n


def _limit(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer; got {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 (0 skips the method); got {n}")
    return n


def _jobs(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer; got {text!r}") from None
    if n == 0:
        raise argparse.ArgumentTypeError("must be a non-zero integer (1: one row at a time, -1: every core); got 0")
    return n


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=CMD, description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="the default: n = 4…1024 for closed forms and "
                      "l2_approx, min_error to n = 256, min_sensitivity at n = 4; 70–125 s measured on 2 cores at load "
                      "average 4.5–8")
    size.add_argument("--full", action="store_true", help="min_error to n = 1024 (SDP to 16), min_sensitivity "
                      "to 8; took 8.5 minutes on 2 shared cores")
    p.add_argument("--sizes", type=_size, nargs="+", metavar="N",
                   help=f"domain sizes, powers of two in [{MIN_SIZE}, {MAX_SIZE}] (duplicates are ignored)")
    p.add_argument("--min-error-max", type=_limit, metavar="N", help="largest n for min_error (quick 256, full 1024)")
    p.add_argument("--min-sensitivity-max", type=_limit, metavar="N",
                   help=f"largest n for min_sensitivity (quick 4, full 8; at most {MINSENS_LIMIT})")
    p.add_argument("--epsilon", type=float, default=None, help="ε (default 1.0; Laplace noise)")
    _common.add_output_args(p, "range_queries", quiet=False)
    p.add_argument("--resume", action="store_true", help="keep rows already in range_queries.csv; refuse if "
                   "they were computed with another ε (min_error rows of another engine are recomputed)")
    p.add_argument("--from-csv", action="store_true", help="re-plot and rewrite README from the CSVs only")
    p.add_argument("--table-only", action="store_true", help="write range_queries.csv only: no checks, "
                   "figures or README")
    p.add_argument("--quiet", "-q", "--no-progress", dest="quiet", action="store_true",
                   help="no progress on stderr (by default: a line per stage and per row of the table, and at "
                   "least one every 10 s; a bar when stderr is a terminal)")
    p.add_argument("--jobs", type=_jobs, default=None, metavar="N",
                   help="rows of the table computed at once (joblib; -1: every core; default 1). The table is "
                   "the same for any N; each optimiser still runs its restarts in turn")
    return p


def validate(p: argparse.ArgumentParser, args) -> tuple[_helpers.Config, Path]:
    """The run's Config and output folder; any bad argument ends here with p.error (exit code 2)."""
    if args.from_csv:
        given = [f for f, v in (("--resume", args.resume), ("--sizes", args.sizes), ("--epsilon", args.epsilon),
                                ("--min-error-max", args.min_error_max), ("--full", args.full),
                                ("--quick", args.quick), ("--table-only", args.table_only),
                                ("--min-sensitivity-max", args.min_sensitivity_max),
                                ("--jobs", args.jobs)) if v not in (None, False)]
        if given:
            p.error(f"--from-csv re-plots what the folder holds, so {', '.join(given)} would have no effect; "
                    "drop them, or drop --from-csv to recompute")
    eps = 1.0 if args.epsilon is None else args.epsilon
    try:
        mmopt.Privacy(eps)
    except (TypeError, ValueError) as e:
        p.error(f"argument --epsilon: {e}")
    if not EPSILON_RANGE[0] <= eps <= EPSILON_RANGE[1]:
        p.error(f"argument --epsilon must be in [{EPSILON_RANGE[0]:g}, {EPSILON_RANGE[1]:g}], so that the "
                f"noise variance 2/ε² times every error in the table stays a normal float. Got {eps!r}.")
    if args.min_sensitivity_max is not None and args.min_sensitivity_max > MINSENS_LIMIT:
        p.error(f"argument --min-sensitivity-max must be <= {MINSENS_LIMIT}: Program 5.3 already took over 20 "
                f"minutes at n = 16. Got {args.min_sensitivity_max}.")
    base = _helpers.FULL if args.full else _helpers.QUICK
    pick = lambda x, default: default if x is None else x  # noqa: E731
    cfg = _helpers.Config(tuple(sorted(set(args.sizes))) if args.sizes else base.sizes,
                          pick(args.min_error_max, base.min_error_max), base.sdp_max,
                          pick(args.min_sensitivity_max, base.minsens_max), float(eps))
    folder = _common.out_of(args, "range_queries")
    if args.from_csv and not folder.is_dir():
        p.error(f"--from-csv: {folder} is not a folder; run without --from-csv first")
    try:
        out = _run.check_out_dir(folder)
    except ValueError as e:
        p.error(str(e))
    if args.from_csv:
        lost = _common.missing(out, ("range_queries.csv", PARAMS, *SIDE_INPUTS))
        if lost:
            p.error(f"--from-csv: {out} has no {', '.join(lost)}; run without --from-csv first")
        if _run.read_json(out / PARAMS) is None:
            p.error(f"--from-csv: {out / PARAMS} is not readable JSON; run without --from-csv to rebuild it")
    return cfg, out


def params_of(cfg: _helpers.Config, full: bool) -> dict:
    """What produced range_queries.csv: the config, a mode name and the shortest command that repeats it."""
    base = _helpers.FULL if full else _helpers.QUICK
    flags = ["--full"] if full else []
    if cfg.sizes != base.sizes:
        flags += ["--sizes", *map(str, cfg.sizes)]
    if cfg.min_error_max != base.min_error_max:
        flags += ["--min-error-max", str(cfg.min_error_max)]
    if cfg.minsens_max != base.minsens_max:
        flags += ["--min-sensitivity-max", str(cfg.minsens_max)]
    if cfg.epsilon != 1.0:
        flags += ["--epsilon", repr(cfg.epsilon)]
    mode = "custom" if cfg not in (_helpers.QUICK, _helpers.FULL) else ("full" if cfg == _helpers.FULL else "quick")
    return {"format": FORMAT, "mode": mode, "command": " ".join([CMD, *flags]), "sizes": list(cfg.sizes),
            "min_error_max": cfg.min_error_max, "sdp_max": cfg.sdp_max, "minsens_max": cfg.minsens_max,
            "epsilon": cfg.epsilon}


def resume_rows(p: argparse.ArgumentParser, out: Path, params: dict, todo, columns, key) -> list[dict]:
    """The rows of ``out``'s table that --resume may keep: complete, computed with the same row parameters,
    and still asked for. Rows of another ε or engine limit make it refuse (p.error) rather than mix runs."""
    table = out / "range_queries.csv"
    if not table.exists():
        print(f"--resume: {table} does not exist yet; computing every row")
        return []
    old = _run.read_json(out / PARAMS)
    if old is None:
        p.error(f"--resume: {out / PARAMS} is missing or unreadable, so the parameters of the rows in {table} "
                "are unknown. Run without --resume to recompute them")
    if not isinstance(old.get("sdp_max"), int):
        p.error(f"--resume: {out / PARAMS} has no valid sdp_max, so the engine of its min_error rows is unknown. "
                "Run without --resume to recompute them")
    differ = [f"{k}={old.get(k)!r} there, {params[k]!r} now" for k in ROW_PARAMS if old.get(k) != params[k]]
    if differ:
        p.error(f"--resume: the rows in {table} were computed with other parameters ({'; '.join(differ)}). "
                "Run without --resume to recompute them, use another --out, or repeat the original parameters")
    try:
        rows, dropped = _common.read_complete_rows(table, columns)
    except ValueError as e:
        p.error(f"--resume: {e}. Run without --resume to recompute")
    wanted = {tuple(t) for t in todo}
    engine = lambda n, sdp_max: "sdp" if n <= sdp_max else "local"  # noqa: E731 — as _helpers.min_error_engine
    kept: dict = {}
    switched = 0
    for r in rows:
        k = tuple(r[c] for c in key)
        if r["strategy"] == "min_error" and engine(r["n"], old.get("sdp_max")) != engine(r["n"], params["sdp_max"]):
            switched += k in wanted
            continue
        if k in wanted and k not in kept and r.get("epsilon") == params["epsilon"]:
            kept[k] = r
    notes = [f"{len(kept)} rows kept"]
    if switched:
        notes.append(f"{switched} min_error row(s) recomputed with the other engine (SDP limit "
                     f"{old.get('sdp_max')} there, {params['sdp_max']} now)")
    if dropped:
        notes.append(f"{dropped} incomplete row(s) dropped (an interrupted write)")
    if len(rows) - switched > len(kept):
        notes.append(f"{len(rows) - switched - len(kept)} row(s) not asked for by this run (or repeated) dropped")
    print(f"--resume: {', '.join(notes)}; {len(wanted) - len(kept)} to compute")
    return list(kept.values())


def checks_max_n(cfg: _helpers.Config) -> int:
    """The largest n of the theorem-check sweeps: the table's largest n, capped at 256 (the sweeps are
    O(n³) per size and the Θ-rate fit always goes to 1024 anyway)."""
    return min(max(cfg.sizes), 256)
