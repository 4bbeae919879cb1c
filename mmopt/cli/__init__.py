"""The ``mmopt`` command line: list workloads, evaluate a strategy, optimise one, release data privately.

Run ``mmopt --help`` (or ``python -m mmopt.cli --help``) for the sub-commands and examples, and
``mmopt workloads`` for the workload spec grammar (:mod:`mmopt.cli.spec`). Exit codes: 0 success, 2 a usage
or validation error (the library's ValueError/TypeError message, printed as ``mmopt: error: ...``, no
traceback), 1 a failure of the computation (NumericalError, SolverError, a missing optional package).

Examples
--------
>>> main(["evaluate", "all_range:4", "--json"])  # doctest: +ELLIPSIS
{...
  "total_squared_error": 40.0,
...
0
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import traceback
import warnings

from mmopt._base.guards import DataWarning
from mmopt._base.hints import did_you_mean
from mmopt.cli.parser import build_parser
from mmopt.error import NumericalError
from mmopt.solvers import SolverError

__all__ = ["build_parser", "main"]


def _check_force(args) -> None:
    """--force with no file to write: every other option that does not apply is refused; this one ran unsaid."""
    files = [name for name in ("out", "save", "estimate") if getattr(args, name, None)]
    if getattr(args, "force", False) and not files:
        raise ValueError("--force overwrites an existing output file, and no --out, --save or --estimate is given. "
                         "Drop --force.")


def _warn(message, category, filename, lineno, file=None, line=None) -> None:
    if issubclass(category, DataWarning):  # raised or not by the records themselves: for the holder's eyes only
        print(f"mmopt: data warning (for the data holder: it depends on the records, outside the privacy guarantee; "
              f"do not publish it): {message}", file=sys.stderr)
        return
    print(f"mmopt: warning: {message}", file=sys.stderr)


# The library's parameter → the option that sets it, where the two names differ or the option is the only way in
_OPTIONS = {"targets": "target", "x": "data", "source": "records", "records": "records", **{k: k for k in (
    "max_iterations", "epsilon", "delta", "alpha", "tol", "seed", "total", "rows", "method", "budget", "norm",
    "objective", "kind", "reconstruct", "calibration")}}


def _in_command_words(message: str, args) -> str:
    """"The 'targets' parameter of plan must …" → "--target (the 'targets' parameter of plan) must …" when the
    command has that option: a command-line user never typed 'targets' (scikit-learn's message, the CLI's name)."""
    m = re.match(r"The '(\w+)' parameter of ([\w.]+)", message)
    dest = _OPTIONS.get(m.group(1)) if m else None
    if m and m.group(2) == "Domain.from_json":  # its 'source' is the --domain file, not the --records one
        dest = "domain"
    if dest is None or not hasattr(args, dest) or message[m.end():].startswith(" --"):  # "of release --alpha"
        return message
    if "(building '" in message:  # a workload spec's own field (random_range:8:5:-1's seed), not the option
        return message
    return f"--{dest.replace('_', '-')} (the '{m.group(1)}' parameter of {m.group(2)})" + message[m.end():]


def _fail(message: str, code: int) -> int:
    print(f"mmopt: error: {message}", file=sys.stderr)
    return code


def _unrecognized(parser: argparse.ArgumentParser, extra: list[str]) -> None:
    """Exit as argparse does (code 2), with the sub-command's usage and "did you mean" for a misspelt option."""
    options = [o for o in parser._option_string_actions if o.startswith("--")]
    flag = next((e.split("=", 1)[0] for e in extra if e.startswith("--")), None)
    hint = did_you_mean(flag, options, quote=str) if flag else ""
    if parser.prog.endswith(" plan") and flag is not None and "--epsilon".startswith(flag) and len(flag) > 3:
        # plan's answer is ε: "Did you mean --json?" sent a newcomer the wrong way (a helper's audit)
        hint = (" plan finds ε itself (the smallest budget whose strategy meets --target) and takes none; drop it "
                "(--delta fixes δ)")
    parser.error(f"unrecognized arguments: {' '.join(extra)}" + (f".{hint}" if hint else ""))


def main(argv: list[str] | None = None) -> int:
    """Run the command line on ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # argparse refused them with the top-level usage: the sub-command's, and the nearest option
            _unrecognized(parser.commands.get(args.command, parser), extra)
    except SystemExit as exc:  # --help, --version, or argparse's own usage error (code 2)
        return exc.code if isinstance(exc.code, int) else 0
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        _check_force(args)
        with warnings.catch_warnings():  # the library's warnings (e.g. a total beyond float64), without source lines
            warnings.showwarning = _warn
            return args.func(args)
    except BrokenPipeError:  # e.g. 'mmopt ... --json | head': stop quietly, as other command-line tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (NumericalError, SolverError) as exc:  # NumericalError is a ValueError: caught first
        return _fail(str(exc), 1)
    except ImportError as exc:
        # the message names its remedy where mmopt raised it; else the module numpy or a library could not import
        said = "pip install" in str(exc)
        return _fail(str(exc) if said else f"{exc} (an optional package is missing: pip install "
                     f"{(getattr(exc, 'name', None) or 'it').split('.')[0]})", 1)
    except (ValueError, TypeError, OSError) as exc:
        return _fail(_in_command_words(str(exc), args), 2)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except Exception as exc:  # a bug: say so, with the traceback a report needs
        traceback.print_exc()
        return _fail(f"unexpected {type(exc).__name__}: {exc}. Please report this.", 1)
