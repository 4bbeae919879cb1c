"""``mmopt synth --records FILE --domain DOMAIN.json``: synthetic records by AIM or MST (:mod:`mmopt.synth`).

Phases as :mod:`mmopt.cli.release_records`: every check that can be made before the records are read (the output
file's extension and folder, that it is not an input, the domain, the workload, the budget, the number of rows,
the packages), then the algorithm (the only phase that spends budget, through OpenDP's samplers; ``--seed`` swaps
them for numpy's seeded generator, a simulation), then the rows written atomically (.parquet or .csv). If they
cannot be written the message says that the budget was spent (exit 1). ``--save-model FILE.npz`` also writes the
fitted model (:meth:`mmopt.synth.Synthetic.save`; checked like --out before anything is read, saved before the rows
are drawn). The report gives ε, δ, ρ and what was measured. ``--ledger FILE`` spends the run from a privacy ledger
as ``mmopt release --ledger`` does (:mod:`mmopt.cli.ledger`): its room is checked in the first phase, the run is one
spend of (ε, δ) (pending from before its first draw, :mod:`mmopt.synth.spend`), and what remains is said on stderr.
From the first draw on, Ctrl-C (SIGINT) and SIGTERM wait for the run to finish and its files to be written, then the
command exits 130 saying that the budget was spent (:func:`mmopt.cli.output.signals_held`); before it, or in a seeded
simulation, they stop it at once.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import sys

import mmopt
from mmopt.cli import output as out
from mmopt.cli.ledger import ledger_scope, open_ledger
from mmopt.cli.release_records import _inside, _write, parse_workload

__all__ = ["synth"]

MAX_ROWS = 10**8


def _check(args):
    import os

    from mmopt.answers.table import require
    from mmopt.records import Domain

    if not args.out:
        raise ValueError("synth needs --out FILE.parquet or FILE.csv (the synthetic rows).")
    ext = out.check_extension(args.out, (".csv", ".parquet"), "--out")
    model = getattr(args, "save_model", None)
    outputs = [("--out", args.out)] + ([] if model is None else [("--save-model", model)])
    if model is not None:  # (.npz: Synthetic.save appends no suffix, and it is never the --out file)
        out.check_extension(model, (".npz",), "--save-model")
    for name, target in outputs:
        for option, path in (("--records", args.records), ("--domain", args.domain)):  # first: --force never
            if os.path.realpath(path) == os.path.realpath(target) or (os.path.isdir(path) and _inside(target, path)):
                raise ValueError(f"The {name} file '{target}' is (or is inside) the {option} input '{path}': synth "
                                 "never writes over its own input. Choose another output file.")  # writes over one
        out.check_writable(target, name, force=args.force)
    if not os.path.exists(args.records):
        raise ValueError(f"The --records file '{args.records}' does not exist.")
    domain = Domain.from_json(args.domain)
    # AIM's default: the 3-way marginals, or all attributes' when there are fewer (k=3 on two attributes was
    # refused in words about a --workload the user never typed)
    default = f"marginals:k={min(3, len(domain.shape))}"
    text = args.workload if args.workload is not None or args.method == "mst" else default
    workload = None if text is None else parse_workload(text, domain, command="mmopt synth")
    if isinstance(workload, int):
        workload = list(itertools.combinations(range(len(domain.shape)), workload))
    privacy = mmopt.Privacy(args.epsilon, args.delta)
    if privacy.delta == 0:  # said in the command's words (aim's own message names its 'privacy' parameter)
        raise ValueError("--delta must be > 0 for synth: AIM and MST are ρ-zCDP (Gaussian noise), reported as "
                         "(ε, δ). Got --delta 0; the default is 1e-9.")
    if args.seed is not None and getattr(args, "ledger", None) is not None:  # (the API names seed, accountant)
        raise ValueError(f"--seed {args.seed} draws numpy's seeded noise, which anyone who knows the seed can remove: "
                         "a simulation, not a release, and a --ledger records releases. Drop --ledger to simulate, or "
                         "--seed to release through OpenDP's samplers.")
    open_ledger(args, privacy, create=False, run=True)  # a ledger that cannot pay: said before the records are read
    if args.rows is not None and not 1 <= args.rows <= MAX_ROWS:  # 0 rows spent the budget for a header alone
        raise ValueError(f"The --rows of synth must be in [1, {MAX_ROWS:,}] (default: the noisy number of records). "
                         f"Got {args.rows}.")
    require("pandas", "synth")
    require("pyarrow", "synth")
    if args.seed is None:
        try:
            import opendp  # noqa: F401
        except ImportError:
            raise ImportError("synth needs OpenDP for its noise: pip install opendp") from None
    return domain, workload, privacy, ext


def _draw(s, n: int, bins: str, seed):
    """n synthetic rows through :meth:`mmopt.synth.result.Synthetic.batches` (30 million rows on three attributes
    passed the --rows check, then one Synthetic.records call refused them after the budget was spent)."""
    import pandas as pd
    parts = list(s.batches(n, bins=bins, seed=seed))
    return parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)


def synth(args) -> int:
    """Run ``mmopt synth`` (module docstring); the exit code."""
    from mmopt.synth import aim, mst

    domain, workload, privacy, ext = _check(args)
    # from the first draw on, Ctrl-C and SIGTERM wait for the run, the model and the rows, as a release waits for its
    # answers: a KeyboardInterrupt while the rows were written said only "interrupted", though the budget was spent.
    # A seeded run is a simulation that spends nothing: it stops at once (its files are atomic, never partial).
    held = (out.signals_held("the synthetic data, once the run has finished,") if args.seed is None
            else contextlib.nullcontext([]))
    with ledger_scope(args, privacy, run=True) as acc, held as got:  # a new ledger never spent from is removed
        if args.method == "mst":
            s = mst(args.records, domain, privacy, seed=args.seed, workload=workload, accountant=acc)
        else:
            s = aim(args.records, domain, workload, privacy, seed=args.seed, accountant=acc)
        code = _deliver(args, s, domain, ext)
    return out.interrupted_after_draw(got, code, acc)


def _deliver(args, s, domain, ext: str) -> int:
    """The model saved (--save-model), the rows written and the report printed; the exit code (1, said, when the
    rows or the model cannot be written)."""
    model, unsaved = getattr(args, "save_model", None), None
    if model is not None:  # first: the model draws any number of rows later, so it matters more than these
        try:
            s.save(model, overwrite=args.force)
        except (OSError, ValueError) as exc:  # said after the rows are written: the budget is spent either way
            unsaved = exc
    n = args.rows if args.rows is not None else s.default_rows
    if n > MAX_ROWS:  # the noisy record count (a post-processed figure: capping it costs no privacy)
        print(f"mmopt: warning: the model's noisy record count is {n:,}; writing {MAX_ROWS:,} rows (pass --rows "
              "for another number).", file=sys.stderr)
        n = MAX_ROWS
    try:  # the budget is spent from here on: any failure must say so (exit 1, never the usage code 2)
        rows = _draw(s, n, args.bins, args.seed)
        _write(rows, args.out, ext)
    except (OSError, ValueError, MemoryError) as exc:
        saved = "" if model is None or unsaved else f" (the model was saved to '{model}': mmopt.synth.load reads it)"
        print(f"mmopt: error: the budget was spent, but drawing or writing the {n:,} rows to '{args.out}' failed"
              f"{saved}: {exc}", file=sys.stderr)
        return 1
    if unsaved is not None:
        print(f"mmopt: error: the budget was spent and the rows written to '{args.out}', but saving the model to "
              f"'{model}' failed: {unsaved}", file=sys.stderr)
        return 1
    report = {"method": s.method, "rows": len(rows), "epsilon": s.epsilon, "delta": s.delta, "rho": s.rho,
              "budget_rho": s.budget, "sampler": s.sampler, "out": args.out,
              "measured": [[domain.names[i] for i in S] for S in s.measured], "model": model}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{s.method}: {len(rows):,} rows → {args.out}\n"
              f"privacy: ε = {out.up(s.epsilon)}, δ = {s.delta:g}, ρ = {out.up(s.rho)} (budget ρ = "
              f"{out.up(s.budget)}), "  # both rounded up: spent == budget printed 6.55e-14 beside 6.54999e-14
              f"noise from {s.sampler}\nmeasured: {len(s.measured)} marginal(s)"
              + ("" if model is None else f"\nmodel → {model}"))
    return 0
