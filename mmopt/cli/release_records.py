"""``mmopt release --records FILE --domain DOMAIN.json``: private marginals of a table of records, in one command.

The same three phases as :mod:`mmopt.cli.release`, and only the second spends budget:

1. **Plan** (:func:`plan`): the output (its extension, that its folder is writable, that it is none of the
   inputs — the records file or folder, the domain file — nor inside a records folder), the domain file, the
   workload, the budget, the table's size, and that pandas, pyarrow and OpenDP import; the records' schema
   (missing column, wrong dtype) is checked by :func:`mmopt.records.release_marginals` before its draw.
2. **Measure**: :func:`mmopt.records.release_marginals` counts the marginals (never the N-cell vector) and
   draws OpenDP's noise once.
3. **Deliver** (:func:`deliver`): the tidy table of :meth:`mmopt.records.RecordsRelease.table` (one row per
   cell of each marginal: ``marginal``, the attributes' cell labels, ``estimate``, ``std_error``) is written
   atomically (:mod:`mmopt._base.atomic`); if it cannot be, it goes to a fallback file and the message says that the
   budget was spent (exit 1).

Workloads: ``marginals:k=K`` (all K-way marginals of the domain's attributes), ``marginals:k<=K`` (every marginal
on 1 to K attributes) or ``marginals:A*B,C`` (the marginals on the listed attribute sets, names joined by ``*``).
"""

from __future__ import annotations

import itertools
import math
import os
import sys
import tempfile
from dataclasses import dataclass

import mmopt
from mmopt._base.atomic import atomic_target
from mmopt.cli import output as out
from mmopt.cli.ledger import ledger_scope, open_ledger
from mmopt.cli.release import MAX_TABLE_ROWS

__all__ = ["deliver", "dispatch", "parse_workload", "plan", "release_records"]

_TABLES = (".csv", ".parquet")
# options of the histogram release that mean nothing for records, with their defaults (build_parser's)
HISTOGRAM_ONLY = {"spec": None, "data": None, "strategy": "auto", "budget": None, "reconstruct": "least_squares",
                   "total": None, "estimate": None}


@dataclass(frozen=True)
class Plan:
    """Everything a records release needs, checked before the records are read or any noise drawn."""

    domain: object
    workload: object  # int k, or a list of attribute-name tuples
    privacy: mmopt.Privacy
    out_path: str
    ext: str
    n_rows: int


def parse_workload(text: str, domain, *, command: str = "mmopt release") -> int | list:
    """``marginals:k=K`` → K; ``marginals:k<=K`` → every set of 1 to K attribute names; ``marginals:A*B,C`` →
    [("A", "B"), ("C",)]; ValueError naming --workload else."""
    from mmopt.records.counts import check_sets

    if not isinstance(text, str) or not text.startswith("marginals:"):
        raise ValueError(f"The --workload of {command} must be 'marginals:k=K' (all K-way marginals), "
                         "'marginals:k<=K' (every marginal on 1 to K attributes) or 'marginals:A*B,C' (attribute "
                         f"names). Got {text!r}.")
    body = text[len("marginals:"):].strip()
    d = len(domain.shape)
    if body.replace(" ", "").startswith("k<="):  # every marginal on 1 to K attributes, as named sets
        from mmopt.records.release import up_to
        k = up_to(body, d, f"The --workload {text!r}")
        names = [a.name for a in domain.attributes]
        return [tuple(names[i] for i in S) for j in range(1, k + 1) for S in itertools.combinations(range(d), j)]
    if body.startswith("k="):
        try:
            k = int(body[2:])
        except ValueError:
            k = None
        if k is None or not 1 <= k <= d:
            raise ValueError(f"The --workload 'marginals:k=K' needs an integer K in [1, {d}] (the domain has {d} "
                             f"attributes). Got {text!r}.")
        return k
    sets = [tuple(a.strip() for a in part.split("*")) for part in body.split(",") if part.strip()]
    if not sets:
        raise ValueError(f"The --workload 'marginals:A*B,C' lists no attribute set. Got {text!r}.")
    check_sets(sets, domain, caller=command, name="--workload", distinct=True)  # unknown names, repeats: ValueError
    return sets


def _inside(path: str, folder: str) -> bool:
    folder, path = os.path.realpath(folder), os.path.realpath(path)
    return os.path.commonpath([folder, path]) == folder


def _check_output(args) -> tuple[str, str]:
    if not args.out:
        raise ValueError("release --records needs --out FILE.csv or FILE.parquet (the tidy table of the marginals).")
    ext = out.check_extension(args.out, _TABLES, "--out")
    for option, path in (("--records", args.records), ("--domain", args.domain)):  # first: --force never writes
        same = os.path.exists(path) and os.path.exists(args.out) and os.path.samefile(path, args.out)  # over one
        if same or os.path.realpath(path) == os.path.realpath(args.out) or (os.path.isdir(path)
                                                                           and _inside(args.out, path)):
            raise ValueError(f"The --out file '{args.out}' is (or is inside) the {option} input '{path}': a release "
                             "never writes over its own input. Choose another output file.")
    out.check_writable(args.out, "--out", force=args.force)
    return args.out, ext


def plan(args) -> Plan:
    """Phase 1: every check that can be made before the records are read (module docstring)."""
    from mmopt.answers.table import require
    from mmopt.records import Domain
    from mmopt.structured.residual import closure as cl

    path, ext = _check_output(args)
    if not os.path.exists(args.records):
        raise ValueError(f"The --records file '{args.records}' does not exist.")
    domain = Domain.from_json(args.domain)
    workload = parse_workload(args.workload, domain)
    privacy = mmopt.Privacy(args.epsilon, args.delta)
    open_ledger(args, privacy, create=False)  # a ledger that cannot pay: said before any work
    if getattr(args, "alpha", None) is not None:  # checked before any noise
        from mmopt.answers.intervals import check_alpha
        check_alpha(args.alpha, "release --alpha", laplace=privacy.sensitivity_norm == "l1")
    require("pandas", "release --records")  # ImportErrors (exit 1) before any noise
    require("pyarrow", "release --records")
    try:
        import opendp  # noqa: F401
    except ImportError:
        raise ImportError("release --records needs OpenDP for its noise: pip install opendp") from None
    sets = (itertools.combinations(range(len(domain.shape)), workload) if isinstance(workload, int)
            else (tuple(sorted(domain.index(a) for a in A)) for A in workload))
    n_rows = sum(cl.cells(domain.shape, A) for A in set(sets))  # the release answers each distinct set once
    if n_rows > MAX_TABLE_ROWS and not args.allow_large_output:
        raise ValueError(f"The --out table would have {n_rows:,} rows, more than {MAX_TABLE_ROWS:,}. Pass "
                         "--allow-large-output to write it anyway, or ask for fewer or smaller marginals.")
    return Plan(domain, workload, privacy, path, ext, n_rows)


def _write(table, path: str, ext: str) -> None:
    with atomic_target(path, ext) as tmp:
        if ext == ".csv":
            table.to_csv(tmp, index=False)
        else:
            table.to_parquet(tmp, index=False, engine="pyarrow")


def deliver(args, p: Plan, res, make_table=None) -> int:
    """Phase 3: write the table (``make_table()``, default the release's tidy table) and print the report; never
    raises for a released result."""
    failed, written = None, None
    try:
        table = make_table() if make_table is not None else res.table(alpha=getattr(args, "alpha", None))
        _write(table, p.out_path, p.ext)
        written = p.out_path
    except Exception as exc:  # the budget is spent: never lose what was released
        try:
            import numpy as np

            fd, fallback = tempfile.mkstemp(prefix="mmopt-release-", suffix=".npz")
            with os.fdopen(fd, "wb") as fh:  # one array per marginal, named by its attributes
                np.savez(fh, **{"*".join(res.domain.names[i] for i in A) or "total": a
                                for A, a in res.marginals.items()})
            written = fallback
            failed = f"--out '{p.out_path}' could not be written ({exc}); the marginals were saved to '{fallback}'"
        except Exception as again:
            failed = f"--out '{p.out_path}' could not be written ({exc}), nor a fallback file ({again})"
    total = sum(math.prod(a.shape) * res.cell_variance[A] for A, a in res.marginals.items())
    record = {"records": args.records, "domain": {"names": list(res.domain.names),
                                                  "shape": list(res.domain.shape)},
              "workload": {"name": res.workload.name, "marginals": len(res.marginals), "cells": p.n_rows},
              "strategy": res.strategy.name, "strategy_choice": res.message,
              "noise": res.noise, "epsilon": res.epsilon, "delta": res.delta,
              "rho_zcdp": res.rho, "noise_scale": res.noise_scale, "sensitivity": res.sensitivity,
              "sampler": res.sampler, "answers_file": written,
              "expected_total_squared_error_least_squares": total,
              "expected_rmse_per_cell": math.sqrt(total / p.n_rows) if p.n_rows else 0.0}
    if args.json:
        out.write_json(record)
    else:
        print(out.table(record.items(), f"Released {p.n_rows:,} marginal cells of {res.workload.name} to "
                                        f"{written}:"))
    if failed:
        print("mmopt: error: the privacy budget WAS spent — do not run this release again. " + failed + ".",
              file=sys.stderr)
        return 1
    return 0


def release_records(args) -> int:
    """``mmopt release --records``: plan (all checks), measure once (OpenDP), deliver (table and report)."""
    from mmopt.records import release_marginals

    p = plan(args)
    # from the draw on, Ctrl-C waits for the table to be written
    with ledger_scope(args, p.privacy) as acc, out.signals_held("the table") as got:
        res = release_marginals(args.records, p.domain, p.workload, p.privacy, accountant=acc)
        code = deliver(args, p, res)
    return out.interrupted_after_draw(got, code, acc)


def dispatch(args) -> int:
    """``mmopt release``: a records release when --records is given, else the histogram release."""
    from mmopt.cli import release as histogram

    if args.records is None:
        missing = [name for name, value in (("SPEC", args.spec), ("--data", args.data)) if value is None]
        stray = [f"--{k}" for k in ("domain", "workload") if getattr(args, k) is not None]
        if stray:
            verb = "goes" if len(stray) == 1 else "go"
            raise ValueError(f"{' and '.join(stray)} {verb} with --records FILE (a records release). Got no --records.")
        if missing:
            raise ValueError(f"release needs {' and '.join(missing)} (a histogram release), or --records FILE "
                             "--domain DOMAIN.json --workload 'marginals:k=2' (a records release).")
        return histogram.release(args)
    stray = [("SPEC" if k == "spec" else f"--{k}") for k, default in HISTOGRAM_ONLY.items()
             if getattr(args, k) != default]
    if stray:
        them, verb = ("it", "belongs") if len(stray) == 1 else ("them", "belong")
        raise ValueError(f"{', '.join(stray)} {verb} to a histogram release, not to --records. Drop {them}.")
    missing = [f"--{k}" for k in ("domain", "workload") if getattr(args, k) is None]
    if missing:
        what = {"--domain": "--domain DOMAIN.json (the public domain file)",
                "--workload": "--workload (the queries, e.g. 'marginals:k=2')"}
        raise ValueError(f"release --records needs {' and '.join(what[m] for m in missing)}.")
    return release_records(args)
