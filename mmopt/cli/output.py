"""How the command line shows results: aligned tables on the terminal, JSON on stdout, JSON/CSV files.

Every record is a plain dict of numbers, strings, booleans and nested dicts. JSON keeps every number at
full precision (exact integers stay exact, e.g. m = 2ⁿ − 1 for all predicates); non-finite floats become
the strings "inf", "-inf" and "nan", so the output is strict JSON. A CSV file holds one header row and one
data row, nested keys joined by dots.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator

import numpy as np

from mmopt._base import jsonable as _json
from mmopt._base.rounding import down, up
from mmopt._base.validation import scientific

__all__ = ["check_extension", "jsonable", "privacy_fields", "record_of", "table", "write_json", "write_record"]


def jsonable(value):
    """``value`` with numpy scalars and arrays, tuples and non-finite floats turned into JSON types.

    Raises TypeError for anything else (callers drop such entries rather than print a repr).
    """
    return _json.jsonable(value, strict=True)


def privacy_fields(privacy) -> dict:
    """noise, epsilon, delta of a Privacy (or unit privacy for None)."""
    if privacy is None:
        return {"noise": "unit", "epsilon": None, "delta": None}
    return {"noise": privacy.noise, "epsilon": privacy.epsilon, "delta": privacy.delta}


def record_of(report) -> dict:
    """The fields of an ErrorReport (dense or implicit) as a flat dict; arrays and the Privacy object left out."""
    out: dict = {}
    for f in dataclasses.fields(report):
        value = getattr(report, f.name)
        if f.name == "privacy":
            out.update(privacy_fields(value))
        elif f.name == "max_variance_bound":  # a stream report's field behind max_variance_upper: the dense
            # reports' name, so that scripts read one key on both sides (the review of that change)
            out["max_variance_upper"] = jsonable(report.max_variance_upper)
        elif not isinstance(value, np.ndarray) and f.name != "per_query_variance":
            out[f.name] = jsonable(value)
    if hasattr(report, "sensitivity_norm") and "sensitivity" in out:  # beside Δ (the stream report's is a property)
        norm = out.pop("sensitivity_norm", None) or report.sensitivity_norm
        items = list(out.items())
        at = [key for key, _ in items].index("sensitivity") + 1
        out = dict(items[:at] + [("sensitivity_norm", norm)] + items[at:])
    return out


def _show(value, key: str = "") -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}" if abs(value) < 10**15 else ("-" if value < 0 else "") + scientific(abs(value))
    if isinstance(value, float):
        # the safe direction by the figure's meaning (mmopt._base.rounding): bounds from below and what remains,
        # down; everything else a table shows (ε, ρ, Δ, σ, variances, errors, upper bounds, ratios), up
        # (a ratio up even when it names its bound: ratio_to_svd_bound was printed rounded down, a review)
        return (down if "ratio" not in key and any(word in key for word in LOWER_WORDS) else up)(value)
    if isinstance(value, list):
        return "(" + ", ".join(_show(v, key) for v in value) + ")"
    return str(value)


#: Table keys whose figure is a lower bound or an allowance, printed rounded down (:func:`_show`).
LOWER_WORDS = ("lower", "remain", "svd_bound", "diagonal_bound", "floor", "cap")


def table(rows, title: str | None = None) -> str:
    """Aligned 'key: value' lines (nested dicts flattened with dots), under an optional title."""
    flat = list(_flatten(dict(rows)).items())
    width = max((len(k) for k, _ in flat), default=0)
    lines = [title] if title else []
    lines += [f"  {k:<{width}}  {_show(v, k)}" for k, v in flat]
    return "\n".join(lines)


def _flatten(record: dict, prefix: str = "") -> dict:
    out: dict = {}
    for k, v in record.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def write_json(record: dict, stream=None) -> None:
    json.dump(jsonable(record), stream or sys.stdout, indent=2, allow_nan=False)
    (stream or sys.stdout).write("\n")


def check_extension(path: str, allowed: tuple[str, ...], option: str) -> str:
    """The lower-case extension of ``path`` if allowed, else a ValueError naming the option."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in allowed:
        raise ValueError(f"The {option} file must end in {' or '.join(allowed)} (the format follows the "
                         f"extension). Got '{path}'.")
    return ext


def budget_arg(text: str | None):
    """--budget as optimize's ``budget``: a name stays a name, a number is CPU seconds (checked by optimize)."""
    if text is None:
        return None
    if "_" in text:  # float() read 1_0 as 10 seconds; a budget name has no '_' either
        raise ValueError(f"The --budget value must be fast, default, thorough or CPU seconds written plainly "
                         f"(e.g. 30). Got '{text}'.")
    try:
        return float(text)
    except ValueError:
        return text


def check_writable(path: str, option: str, *, force: bool) -> None:
    """Refuse, before any noise, an output file that cannot be written: the folder must exist and take a new file
    (tried for real with a temporary file, removed at once — ``os.access`` says yes to root even for /proc), the
    path must not be a folder, and an existing file must open for writing — and is overwritten only with
    ``force`` (--force): a second release to answers.csv replaced the first one's answers without a word, and a
    user who lost them might release again, spending the budget twice."""
    folder = os.path.dirname(os.path.abspath(path))
    problem = None
    if os.path.isfile(path) and not force:
        raise ValueError(f"The {option} file '{path}' exists. Pass --force to overwrite it, or choose another path; "
                         "nothing was computed or drawn.")
    if not os.path.isdir(folder):
        problem = f"its folder '{folder}' does not exist"
    elif os.path.isdir(path):
        problem = "it is a folder"
    else:
        try:
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".mmopt-write-check-"):
                pass
            if os.path.exists(path):
                with open(path, "ab"):
                    pass
        except OSError as exc:
            problem = f"the system refuses it ({exc.strerror or exc})"
    if problem is not None:
        raise ValueError(f"The {option} file '{path}' cannot be written: {problem}. Choose another path; nothing was "
                         "drawn.")


@contextlib.contextmanager
def signals_held(what: str = "the release") -> Iterator[list]:
    """Once the noise draw has started (:data:`mmopt._base.opendp.DRAWS`) and until the block ends, SIGINT and SIGTERM
    are held, not obeyed: the answers are written (or their fallback file) and the report printed before the
    command stops; the list it yields collects the signals held, so the caller can exit 130 and say that the
    budget was spent. A second signal after the draw stops the command at once (KeyboardInterrupt), saying the
    budget was spent. Before the draw a signal stops the command at once, as anywhere else. Ctrl-C after the draw
    used to lose the release with no word (issue 30). Outside the main thread it holds nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield []
        return
    from mmopt._base import opendp as _opendp
    got: list = []
    before = _opendp.DRAWS

    def hold(signum, frame):
        if _opendp.DRAWS == before:  # no noise drawn yet: stop now, nothing is spent
            raise KeyboardInterrupt
        name = signal.Signals(signum).name
        if got:  # a second signal: the person means it (a synth run held a first Ctrl-C for minutes, with no way out)
            # "before the release is written" was said when --out had been written and --estimate had not: a file
            # already written stays (whole), the rest is not written; no report says which
            print(f"mmopt: a second {name}: stopping now; a file not written yet is not written (none is left "
                  "half-written, and no report says which were); the privacy budget WAS spent (a --ledger file "
                  "keeps it counted) — do not run this release again.", file=sys.stderr, flush=True)
            raise KeyboardInterrupt
        got.append(signum)
        print(f"mmopt: {name} received after the noise was drawn: {what} is written first (the privacy budget is "
              "already spent), then the command stops; a second one stops it at once, writing nothing more.",
              file=sys.stderr, flush=True)

    old: dict = {}
    try:  # installed inside: a signal between the two installs left SIGINT's handler in place after the block
        for s in (signal.SIGINT, signal.SIGTERM):
            old[s] = signal.signal(s, hold)
        yield got
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def interrupted_after_draw(got: list, code: int, accountant=None) -> int:
    """The exit code once delivery finished: 130 (and the message, naming the ledger file that records the spend) if
    a signal was held, else ``code``; with a ledger, what remains in it is said on stderr."""
    if accountant is not None:
        left = accountant.remaining
        print(f"mmopt: ledger '{accountant.path}': ε={down(left.epsilon)}, δ={down(left.delta)} remain after this "
              "release.", file=sys.stderr, flush=True)  # rounded down: the nearest was refused when spent
    if not got:
        return code
    where = "" if accountant is None else f" and is recorded in the ledger '{accountant.path}'"
    print("mmopt: interrupted after the noise was drawn: what was released is where the report above says; the "
          f"privacy budget WAS spent{where} — do not run this release again.", file=sys.stderr, flush=True)
    return 130


def write_record(path: str, record: dict) -> None:
    """Write ``record`` as JSON (.json) or as a one-row CSV with dotted column names (.csv)."""
    ext = check_extension(path, (".json", ".csv"), "--out")
    with open(path, "w", newline="", encoding="utf-8") as fh:
        if ext == ".json":
            write_json(record, fh)
            return
        flat = {k: (json.dumps(v) if isinstance(v, list) else v) for k, v in _flatten(jsonable(record)).items()}
        writer = csv.DictWriter(fh, fieldnames=list(flat))
        writer.writeheader()
        writer.writerow(flat)
