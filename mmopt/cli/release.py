"""``mmopt release``: answer a workload on real data, spending the privacy budget exactly once.

A release has three phases, and only the second spends budget:

1. **Plan** (:func:`plan`): everything that can fail is checked before the data is touched — the output
   paths (their extensions, that their folders are writable, that none of them names an input or another
   output), the workload, strategy and data, that the answers can be formed, and the expected error.
2. **Measure**: :func:`mmopt.release` draws OpenDP's noise once. It checks its own inputs before drawing, and
   a post-processing step that fails after the draw falls back to least squares with a warning.
3. **Deliver** (:func:`deliver`): the answers are written atomically (a temporary file in the same folder,
   then ``os.replace``, so no partial file is ever left under the final name), and the privacy report is
   printed with overflow-safe arithmetic. Once noise is drawn the exit code is 0; if a file cannot be written
   even then, the answers go to a fallback file and the message says the budget was spent (exit 1). From the
   draw on, Ctrl-C (SIGINT) and SIGTERM wait for the files and the report, then the command exits 130 saying
   that the budget was spent (:func:`mmopt.cli.output.signals_held`); before it, they stop it at once.

Outputs: ``--out FILE.csv`` or ``FILE.parquet`` is the labelled table of :mod:`mmopt.answers` (one row per
query: its labels, ``answer`` and ``standard_error``), streamed block by block; ``--out FILE.npy`` is the bare
vector W x̂ (as before); ``--estimate FILE`` (.npy or .csv) is x̂. At least one of them is needed, and
``--estimate`` alone releases workloads too large to answer in memory (2-D ranges on 128²: 68 million
queries). A table of more than :data:`MAX_TABLE_ROWS` rows (about 1 GB of CSV) is refused before the noise
unless ``--allow-large-output`` is given.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import numpy as np

import mmopt
from mmopt.cli import output as out
from mmopt.cli._release_files import (
    atomic_save,
    check_data,
    expected_release_error,
    fallback,
    load_data,
    measurement_table,
)
from mmopt.cli.ledger import ledger_scope, open_ledger
from mmopt.cli.spec import build_workload
from mmopt.cli.strategies import build_strategy, saved_file
from mmopt.mechanism import answers_available
from mmopt.structured.mechanism import MAX_ANSWERS
from mmopt.workload import ImplicitWorkload, structure_of

__all__ = ["MAX_TABLE_ROWS", "deliver", "plan", "release"]

# a --out table (.csv/.parquet) of more rows needs --allow-large-output (measured: 85 bytes a CSV row, 20 in Parquet)
MAX_TABLE_ROWS = 10**7
_TABLES = (".csv", ".parquet")


@dataclass(frozen=True)
class Plan:
    """Everything a release needs, checked: nothing in it can fail once the noise is drawn."""

    workload: object
    strategy: object
    x: np.ndarray
    privacy: mmopt.Privacy
    expected: object  # evaluate's report at this budget
    outputs: dict      # option → (path, extension)
    table: object = None  # mmopt.answers.table.TableSpec of a --out .csv/.parquet table, else None
    alpha: float | None = None  # --alpha: the table's exact 1 − α intervals


def _same_file(a: str, b: str) -> bool:
    if os.path.exists(a) and os.path.exists(b):
        return os.path.samefile(a, b)
    return os.path.realpath(a) == os.path.realpath(b)


def _inputs(args) -> list[tuple[str, str]]:
    """(option, path) of every input that is a file: the data, and a workload or strategy read from a file."""
    found = [("--data", args.data)]
    for option, value in (("SPEC", args.spec), ("--strategy", args.strategy)):
        if value and os.path.isfile(value):
            found.append((option, value))
    return found


def _check_outputs(args) -> dict:
    if not args.out and not args.estimate:
        raise ValueError("release needs --out FILE (the answers: .csv or .parquet for the labelled table, .npy for "
                         "the bare vector W x̂) or --estimate FILE (x̂ alone), or both.")
    outputs = {}
    if args.out:
        outputs["--out"] = (args.out, out.check_extension(args.out, (".npy", *_TABLES), "--out"))
    if args.estimate:
        outputs["--estimate"] = (args.estimate, out.check_extension(args.estimate, (".npy", ".csv"), "--estimate"))
    for option, (path, _) in outputs.items():
        for source, other in _inputs(args):  # first: --force never writes over an input
            if _same_file(path, other):
                raise ValueError(f"The {option} file '{path}' is the {source} input: a release never writes over "
                                 "its own input. Choose another output file.")
        out.check_writable(path, option, force=args.force)
    if args.out and args.estimate and _same_file(args.out, args.estimate):
        raise ValueError(f"The --out and --estimate files are the same file '{args.out}'. Choose two files.")
    return outputs


def _check_answers_available(W) -> None:
    """A bare --out .npy vector is formed in memory: known queries, at most 10⁷ of them for an implicit W."""
    ok = W.n_queries <= MAX_ANSWERS if isinstance(W, ImplicitWorkload) else answers_available(W)
    if not ok:
        raise ValueError(f"release cannot write the answers of '{W.name}' to a .npy file: its queries are not known "
                         f"(a Gram-only workload) or there are more than {MAX_ANSWERS:,} of them. Write x̂ "
                         "alone with --estimate FILE, or stream the answers to --out FILE.parquet (or .csv).")


def _check_table(args, W, A, P):
    """The labels and standard errors of a --out table, and its size, checked before any noise."""
    from mmopt.answers import table

    table.require("pyarrow", "release --out FILE.csv/.parquet")  # an ImportError (exit 1) before the noise
    m = W.n_queries
    if m > MAX_TABLE_ROWS and not args.allow_large_output:
        raise ValueError(f"The --out table of '{W.name}' would have {m:,} rows (about {85 * m / 1e9:.2g} GB of CSV), "
                         f"more than {MAX_TABLE_ROWS:,}. Pass --allow-large-output to write it anyway (Parquet is "
                         "about 4 times smaller), or write x̂ alone with --estimate FILE and answer the queries you "
                         "need from it (mmopt.answers.answer).")
    return table.prepare_table(W, A, noise=P.noise, caller="release")


def _strategy(args, W, P):
    """--strategy: a spec, or "auto": the best strategy :func:`mmopt.optimize` finds for this budget's noise within
    --budget (data-independent: it sees the workload only), said on stderr."""
    if args.strategy.strip() != "auto":
        if getattr(args, "budget", None) is not None:  # it was ignored, silently
            raise ValueError(f"--budget sets the search's time with --strategy auto; --strategy {args.strategy} "
                             "is given, so nothing is searched. Drop --budget.")
        saved = saved_file(args.strategy, W)
        if saved is None:
            return build_strategy(args.strategy, W)
        made_for = saved.privacy
        if made_for is not None and made_for.delta > 0 and not getattr(args, "delta_given", True):
            # evaluate takes the file's δ when --delta is omitted; a release drew Laplace noise instead, and said so
            # on stderr beside the answers (a newcomer's audit): refused before anything is drawn
            raise ValueError(f"The strategy in '{args.strategy.strip()}' was planned for Gaussian noise at δ = "
                             f"{made_for.delta!r}, and --delta is not given, so this release would draw Laplace noise "
                             f"(δ = 0), for which it may be far from the best. Pass --delta {made_for.delta!r} to "
                             "release as planned, or --delta 0 to release under ε-DP anyway.")
        if made_for is not None and made_for.noise != P.noise:  # evaluate takes the file's δ; a release must be told
            fix = f"pass --delta {made_for.delta:g}" if made_for.delta else "omit --delta"
            # a plan's targets were checked for its own noise only (Laplace plan for s.e. 3 released at δ = 1e-6 gave
            # 9.80 with no word of the targets; a helper's probe)
            planned = ((saved.result or {}).get("extra") or {}).get("targets") is not None
            targets = (" Its accuracy targets were planned for that noise only: this release's standard errors may "
                       "miss them (compare the table's std_error)." if planned else "")
            print(f"mmopt: warning: the strategy in '{args.strategy.strip()}' was optimised for {made_for.noise} noise "
                  f"(δ = {made_for.delta:g}); this release draws {P.noise} noise (δ = {P.delta:g}), for which it may "
                  f"be far from the best.{targets} To release as planned, {fix}; or optimise for this noise.",
                  file=sys.stderr, flush=True)
        elif made_for is not None:
            _warn_plan_budget(saved, made_for, P, args.strategy.strip())
        return saved.strategy
    res = mmopt.optimize(_searched(W), privacy=P, seed=0, verbose=False, budget=out.budget_arg(args.budget or "fast"))
    print(f"mmopt: strategy {res.method} ({res.ratio:.4g}× the lower bound, {res.seconds:.1f} s; --strategy to choose "
          "another)", file=sys.stderr, flush=True)
    return res.strategy


def _warn_plan_budget(saved, made_for, P, path: str) -> None:
    """A warning when a plan's file (its result records ``targets``) is released at a budget whose noise is larger
    than the one it was planned for: the table's standard errors then exceed the targets, without a word (a
    helper's probe: a plan for s.e. 2.5 at ε = 3.73 released at ε = 1 gave 8.52)."""
    from mmopt.planning.calibration import variance_factor
    extra = (saved.result or {}).get("extra") or {}
    if extra.get("targets") is None:
        return
    # this release draws OpenDP's noise ("release"); the plan met its targets at its own calibration (files before it
    # was recorded: "release", plan's default)
    planned = extra.get("plan_calibration", "release")
    ratio = variance_factor(P.epsilon, P.delta) / variance_factor(made_for.epsilon, made_for.delta, planned)
    if ratio > 1.0 + 1e-9:
        delta = f" --delta {made_for.delta!r}" if made_for.delta else ""
        how = (f"release with --epsilon {made_for.epsilon!r}{delta}" if planned == "release" else
               "plan again without --calibration analytic (that calibration is for noise drawn elsewhere; this "
               "release draws OpenDP's, whose σ is larger at the same ε)")
        print(f"mmopt: warning: '{path}' was planned to meet its targets at ε = {made_for.epsilon!r}, δ = "
              f"{made_for.delta:g} ({planned} calibration); this release's noise variance is {ratio:.4g}× that, so "
              f"its standard errors are up to {out.up(ratio ** 0.5, 4)}× the targets. To meet them, {how}.",
              file=sys.stderr, flush=True)


def _searched(W):
    """The workload auto searches: prefix:n and all_range:n past 4,096 cells as their stream twins, whose strategies
    (tree, weighted square root) release, evaluate and list in O(n log n). On the dense prefix:5000 auto found the
    dense optimum (1.0001× the bound), and then its evaluate, reconstruction and per-query variances took 59.5 CPU s
    (O(n³)); the weighted square root is 1.003× the bound, and its evaluate, release and table 2.9 s after the search
    (the whole command 5.3 CPU s)."""
    from mmopt.structured._checks import DENSE_LIMIT
    from mmopt.toeplitz.error import stream_twin
    return stream_twin(W, DENSE_LIMIT) or W


def _check_packages(outputs: dict) -> None:
    """OpenDP (the noise) and, for a --out table, pyarrow: both said at once, before any work. One at a time, and
    pyarrow's after the strategy search, a bare install met two errors in a row (a newcomer's audit)."""
    import importlib.util
    needed = ["opendp"] + (["pyarrow"] if "--out" in outputs and outputs["--out"][1] in _TABLES else [])
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    if missing:
        extras = ",".join(dict.fromkeys("release" if name == "opendp" else "tables" for name in missing))
        raise ImportError(f"release needs {' and '.join(missing)}, not installed. Install: pip install "
                          f"{' '.join(missing)} (from a checkout: pip install -e '.[{extras}]')")


def plan(args) -> Plan:
    """Phase 1: every check of :func:`release`, before the data is touched or any noise drawn."""
    outputs = _check_outputs(args)
    _check_packages(outputs)
    W = build_workload(args.spec)
    P = mmopt.Privacy(args.epsilon, args.delta)
    open_ledger(args, P, create=False)  # a ledger that cannot pay: said before any work
    if args.total is not None and args.reconstruct == "least_squares":  # the library's message names its keywords
        raise ValueError(f"--total {args.total:g} is imposed by a constrained reconstruction: add --reconstruct nnls "
                         "or --reconstruct projection (least squares is unconstrained).")
    x = check_data(args.data, W, load_data(args.data))  # before the strategy search, which can take minutes
    ext = outputs["--out"][1] if "--out" in outputs else None
    if args.alpha is not None:  # α alone, before the search: --alpha 1.5 was refused after up to --budget's minutes
        if ext not in _TABLES:
            raise ValueError("--alpha adds interval columns to the --out table: pass --out FILE.csv or FILE.parquet.")
        from mmopt.answers.intervals import check_alpha
        check_alpha(args.alpha, "release --alpha", laplace=P.noise == "laplace")
    A = _strategy(args, W, P)
    if ext == ".npy":
        _check_answers_available(W)
    expected = mmopt.evaluate(W, A, P)  # refuses an unsupported pair before the data is touched
    spec = _check_table(args, W, A, P) if ext in _TABLES else None
    if args.alpha is not None:  # refused before any noise when no exact interval can be written (a table: above)
        from mmopt.answers import widths
        widths.preflight(args.alpha, spec.model, P.noise, args.reconstruct, W.name, "release --alpha", A)
    return Plan(W, A, x, P, expected, outputs, spec, args.alpha)


def _write_table(p: Plan, res, path: str) -> None:
    """The labelled table, streamed; when no x̂ survived, the measurements as a two-column table."""
    from mmopt.answers import files, table

    fmt = files.table_format(path, "release")
    if res.estimate is None:
        measurement_table(np.ravel(res.measurements), path, fmt)
        return
    plan_ = table.plan_table(res, p.workload, p.strategy, p.privacy, spec=p.table, caller="release", alpha=p.alpha)
    files.stream(plan_, path, fmt, files.DEFAULT_CHUNK_ROWS)


def deliver(args, p: Plan, res) -> int:
    """Phase 3: write what was released and print the privacy report; never raises for a released result."""
    written, failed, contents, n_answers = {}, [], None, 0
    estimate = None if res.estimate is None else np.ravel(res.estimate)
    measurements = np.ravel(res.measurements)
    twin = structure_of(p.workload)  # the attribute sizes: x̂ is written flat, and answer(..., shape=) reads it so
    shape = list(twin.shape if twin is not None else (p.workload.domain_size,))
    for option, (path, ext) in p.outputs.items():
        if option == "--out":  # W x̂: a table (from x̂) or a vector; the measurements y when post-processing failed
            table = ext in _TABLES
            kept = (estimate if table else res.answers) is not None
            contents = "answers" if kept else "measurements"
            n_answers = p.workload.n_queries if kept else int(measurements.size)
        elif estimate is None and "--out" in p.outputs:
            continue  # --out holds the measurements
        else:  # x̂, or y when it is the only output and nothing else survived
            contents = contents or ("estimate" if estimate is not None else "measurements")
        try:
            if option == "--out" and table:
                _write_table(p, res, path)
            elif option == "--out":
                atomic_save(path, res.answers if kept else measurements, ext)
            else:
                atomic_save(path, estimate if estimate is not None else measurements, ext)
            written[option] = path
        except Exception as exc:  # the budget is spent: never lose what was released
            if option == "--out" and res.answers is not None:
                keep, note = res.answers, ""
            elif estimate is not None:
                keep, note = estimate, (" (x̂, flat in C order: answer any query from it with "
                                        f"mmopt.answers.answer(..., shape={tuple(shape)}))")
            else:
                keep, note = measurements, " (the noisy measurements y = A x + z)"
            try:
                written[option] = fallback(keep)
                failed.append(f"{option} '{path}' could not be written ({exc}); it was saved to "
                              f"'{written[option]}'{note}")
            except Exception as again:  # nowhere to write: say so, the report below still prints
                failed.append(f"{option} '{path}' could not be written ({exc}), nor a fallback file ({again})")
    total, log_total = expected_release_error(p.expected, p.privacy, res.noise_scale)
    rec = res.reconstruction
    record = {"workload": {"name": p.workload.name, "domain_size": p.workload.domain_size,
                           "n_queries": p.workload.n_queries,
                           "domain_shape": shape},
              "strategy": p.expected.strategy, **out.privacy_fields(p.privacy),
              "path": res.path, "noise_scale": res.noise_scale, "sensitivity": res.sensitivity,
              "sensitivity_exact": getattr(res, "sensitivity_exact", True),  # False: a proven upper bound
              "verified_loss": out.jsonable(res.verified_loss),  # OpenDP's privacy map at the sensitivity used
              "contents": contents, "n_answers": n_answers,
              "answers_file": written.get("--out"), "estimate_file": written.get("--estimate"),
              "answers_format": None if "--out" not in p.outputs else
              ("table" if p.outputs["--out"][1] in _TABLES else "vector"),
              "standard_error": "least_squares" if p.table is not None and p.table.model is not None
              and contents == "answers" else None,
              "reconstruct": {"method": rec.method, "solver": rec.solver, "iterations": rec.iterations,
                              "optimality": rec.optimality, "total": rec.total} if rec else args.reconstruct,
              # least squares is unbiased with this total error; projection never exceeds it (nnls may)
              "expected_total_squared_error_least_squares": total,
              "log10_expected_total_squared_error_least_squares": log_total,
              "expected_total_is_upper_bound": not getattr(p.expected, "total_exact", True)}
    if args.json:
        out.write_json(record)
    elif "--out" in p.outputs:
        print(out.table(record.items(), f"Released {n_answers:,} {contents} of {p.workload.name} to "
                                        f"{record['answers_file']}:"))
    else:
        print(out.table(record.items(), f"Released the {contents} ({p.workload.domain_size:,} cells) of "
                                        f"{p.workload.name} to {record['estimate_file']}:"))
    if failed:
        print("mmopt: error: the privacy budget WAS spent — do not run this release again. "
              + "; ".join(failed) + ".", file=sys.stderr)
        return 1
    return 0


def release(args) -> int:
    """``mmopt release``: plan (all checks), measure once (OpenDP), deliver (files and report)."""
    p = plan(args)
    with ledger_scope(args, p.privacy) as acc, out.signals_held() as got:  # from the draw on, Ctrl-C waits for
        spend = acc.release if acc is not None else mmopt.release  # the answers; with a ledger: checked, recorded
        res = spend(p.workload, p.strategy, p.x, p.privacy, reconstruct=args.reconstruct, total=args.total,
                    verbose=args.verbose)
        code = deliver(args, p, res)
    return out.interrupted_after_draw(got, code, acc)
