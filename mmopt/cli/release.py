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
   even then, the answers go to a fallback file and the message says the budget was spent (exit 1).
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
from dataclasses import dataclass

import numpy as np

import mmopt
from mmopt import _family_answers as family_answers
from mmopt import _validation as v
from mmopt.cli import output as out
from mmopt.cli._grammar import load_npy
from mmopt.cli.spec import build_workload
from mmopt.cli.strategies import build_strategy
from mmopt.workload import ImplicitWorkload

__all__ = ["deliver", "plan", "release"]

# the implicit path forms at most this many answers (mmopt.structured.release's max_answers)
_MAX_IMPLICIT_ANSWERS = 10**7


@dataclass(frozen=True)
class Plan:
    """Everything a release needs, checked: nothing in it can fail once the noise is drawn."""

    workload: object
    strategy: object
    x: np.ndarray
    privacy: mmopt.Privacy
    expected: object  # evaluate's report at this budget
    outputs: dict      # option → (path, extension)


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
    outputs = {"--out": (args.out, out.check_extension(args.out, (".npy", ".csv"), "--out"))}
    if args.estimate:
        outputs["--estimate"] = (args.estimate, out.check_extension(args.estimate, (".npy", ".csv"), "--estimate"))
    for option, (path, _) in outputs.items():
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder) or not os.access(folder, os.W_OK) or os.path.isdir(path):
            raise ValueError(f"The {option} file '{path}' cannot be written (no such folder, not writable, or a "
                             "folder).")
        for source, other in _inputs(args):
            if _same_file(path, other):
                raise ValueError(f"The {option} file '{path}' is the {source} input: a release never writes over "
                                 "its own input. Choose another output file.")
    if args.estimate and _same_file(args.out, args.estimate):
        raise ValueError(f"The --out and --estimate files are the same file '{args.out}'. Choose two files.")
    return outputs


def _load_data(path: str) -> np.ndarray:
    ext = out.check_extension(path, (".npy", ".csv"), "--data")
    if ext == ".npy":
        return load_npy(path, "--data file")
    try:
        return np.loadtxt(path, delimiter=",", ndmin=1)
    except ValueError as exc:
        raise ValueError(f"Could not read the --data file '{path}' as numbers separated by commas (no header): "
                         f"{exc}") from None


def _check_answers_available(W) -> None:
    if isinstance(W, ImplicitWorkload):
        ok = W.n_queries <= _MAX_IMPLICIT_ANSWERS
    else:
        ok = W.matrix is not None or (W.family in family_answers.FAMILIES and W.n_queries <= v.MAX_ALLOCATION_ENTRIES)
    if not ok:
        raise ValueError(f"release cannot write the answers of '{W.name}': its queries are not known (a Gram-only "
                         f"workload) or there are more than {_MAX_IMPLICIT_ANSWERS:,} of them. Use a workload given "
                         "by its queries, or a smaller one.")


def plan(args) -> Plan:
    """Phase 1: every check of :func:`release`, before the data is touched or any noise drawn."""
    outputs = _check_outputs(args)
    W = build_workload(args.spec)
    P = mmopt.Privacy(args.epsilon, args.delta)
    A = build_strategy(args.strategy, W)
    x = _load_data(args.data)
    if not isinstance(W, ImplicitWorkload):
        x = x.ravel()  # a dense workload reads a flat histogram (C order)
    _check_answers_available(W)
    expected = mmopt.evaluate(W, A, P)  # refuses an unsupported pair before the data is touched
    return Plan(W, A, x, P, expected, outputs)


def _atomic_save(path: str, vector: np.ndarray, ext: str) -> None:
    """Write ``vector`` to a temporary file beside ``path``, then rename it: ``path`` is whole or untouched."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".mmopt-", suffix=ext, dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            if ext == ".npy":
                np.save(fh, np.asarray(vector))
            else:
                np.savetxt(fh, np.ravel(vector), fmt="%.17g")
        umask = os.umask(0)  # mkstemp makes the file private (0600); give it the mode a plain open() would
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _log10(value) -> float | None:
    return math.log10(value) if isinstance(value, float | int) and math.isfinite(value) and value > 0 else None


def expected_release_error(expected, privacy: mmopt.Privacy, noise_scale: float) -> tuple[float | None, float | None]:
    """(total, log10 total) of least squares' expected squared error at the noise scale actually drawn.

    evaluate's total is c·Δ²·tr(G M) at the calibrated scale; the release drew variance v = 2b² (Laplace) or
    σ² (Gaussian), so its total is v·tr(G M) = total·v/(c·Δ²). Formed in logarithms, so it never overflows,
    underflows to a false 0 or divides by zero; None where evaluate itself has no finite figure.
    """
    log_total = getattr(expected, "log10_total", None)
    if log_total is None:
        log_total = _log10(expected.total_squared_error)
    log_d, log_b = _log10(expected.sensitivity), _log10(noise_scale)
    if log_total is None or log_d is None or log_b is None:
        return None, None
    log_v = 2 * log_b + (math.log10(2.0) if privacy.noise == "laplace" else 0.0)
    log_release = log_total + log_v - privacy.log_variance_factor / math.log(10.0) - 2 * log_d
    return (10.0**log_release if log_release < 308 else math.inf), log_release


def deliver(args, p: Plan, res) -> int:
    """Phase 3: write what was released and print the privacy report; never raises for a released result."""
    written, failed = {}, []
    vectors = {"--out": res.answers, "--estimate": None if res.estimate is None else np.ravel(res.estimate)}
    if res.answers is None:  # post-processing failed after the draw: keep the measurements, never lose them
        vectors["--out"] = np.ravel(res.measurements)
    for option, (path, ext) in p.outputs.items():
        if vectors[option] is None:
            continue
        try:
            _atomic_save(path, vectors[option], ext)
            written[option] = path
        except OSError as exc:
            fd, fallback = tempfile.mkstemp(prefix="mmopt-release-", suffix=".npy")
            with os.fdopen(fd, "wb") as fh:
                np.save(fh, np.asarray(vectors[option]))
            failed.append(f"{option} '{path}' could not be written ({exc}); it was saved to '{fallback}'")
            written[option] = fallback
    total, log_total = expected_release_error(p.expected, p.privacy, res.noise_scale)
    rec = res.reconstruction
    record = {"workload": {"name": p.workload.name, "domain_size": p.workload.domain_size,
                           "n_queries": p.workload.n_queries},
              "strategy": p.expected.strategy, **out.privacy_fields(p.privacy),
              "path": res.path, "noise_scale": res.noise_scale, "sensitivity": res.sensitivity,
              "sensitivity_exact": getattr(res, "sensitivity_exact", True),  # False: a proven upper bound
              "verified_loss": out.jsonable(res.verified_loss),  # OpenDP's privacy map at the sensitivity used
              "contents": "answers" if res.answers is not None else "measurements",
              "n_answers": int(np.size(vectors["--out"])),
              "answers_file": written.get("--out"), "estimate_file": written.get("--estimate"),
              "reconstruct": {"method": rec.method, "solver": rec.solver, "iterations": rec.iterations,
                              "optimality": rec.optimality, "total": rec.total} if rec else args.reconstruct,
              # least squares is unbiased with this total error; projection never exceeds it (nnls may)
              "expected_total_squared_error_least_squares": total,
              "log10_expected_total_squared_error_least_squares": log_total,
              "expected_total_is_upper_bound": not getattr(p.expected, "total_exact", True)}
    if args.json:
        out.write_json(record)
    else:
        print(out.table(record.items(), f"Released {record['n_answers']:,} {record['contents']} of "
                                        f"{p.workload.name} to {record['answers_file']}:"))
    if failed:
        print("mmopt: error: the privacy budget WAS spent — do not run this release again. "
              + "; ".join(failed) + ".", file=sys.stderr)
        return 1
    return 0


def release(args) -> int:
    """``mmopt release``: plan (all checks), measure once (OpenDP), deliver (files and report)."""
    p = plan(args)
    res = mmopt.release(p.workload, p.strategy, p.x, p.privacy, reconstruct=args.reconstruct, total=args.total)
    return deliver(args, p, res)
