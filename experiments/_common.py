"""The boring parts of experiments: output paths, reproducible CSV rows and PNGs, terminal tables.

Tracked outputs must change only when results change, so every float written to a CSV goes through
:func:`tidy` and every PNG through :func:`save_png`.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from experiments import _run

ROOT = Path(__file__).resolve().parent.parent
# Where a run writes: RESULTS/<experiment>/ by default (untracked, see .gitignore), so running an experiment
# never changes the checkout; the tracked FIGURES only with --paper-figures (or --out DIR anywhere else).
RESULTS = ROOT / "results"
FIGURES = ROOT / "paper_figures"
# Floats are written to 10 significant digits after snapping to 13. Measured on the same code (sizes 4…512,
# 22 729 values): two runs on 1 BLAS thread are bitwise identical; 1 vs 2 threads differ by at most 1.7e-14
# relatively (outside the svd_bound rows, whose basis is not unique), which 10 digits absorb. But 167 of those
# values are exact decimals on a 10-digit rounding tie (dyadic entries of the Haar profile, e.g. 107.76171875),
# where round-off of either sign would flip the last digit; the snap to 13 digits lands them on the tie itself.
SNAP_DIGITS, DIGITS = 13, 10


def tidy(x):
    """``x`` as written to a tracked file: floats to DIGITS significant digits, text on one line."""
    if isinstance(x, bool):
        return x
    if isinstance(x, float):
        if not math.isfinite(x) or x == 0.0:
            return x
        return float(f"{float(f'{x:.{SNAP_DIGITS}g}'):.{DIGITS}g}")
    if isinstance(x, str):
        return " ".join(x.split())  # one record per line, so a cut-off last line is detectable
    return x


def _csv_text(columns: Sequence[str], rows: Iterable[dict], header: bool = True) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, list(columns), extrasaction="ignore", lineterminator="\n")
    if header:
        w.writeheader()
    w.writerows({k: tidy(v) for k, v in r.items()} for r in rows)
    return buf.getvalue()


def write_csv(path: Path, columns: Sequence[str], rows: Iterable[dict]) -> None:
    """Write a whole CSV atomically (rows tidied), so a reader never sees half a table."""
    _run.write_text(Path(path), _csv_text(columns, rows))


class RowWriter:
    """Append rows to a CSV as they complete, so an interrupted run loses at most the row in progress.

    ``kept`` rows (from :func:`read_complete_rows`, for --resume) are written first.
    """

    def __init__(self, path: Path, columns: Sequence[str], kept: Sequence[dict] = ()):
        self.path, self.columns = Path(path), list(columns)
        self.rows: list[dict] = list(kept)
        write_csv(self.path, self.columns, self.rows)

    def write(self, row: dict) -> None:
        self.rows.append(row)
        with open(self.path, "a", newline="") as f:
            f.write(_csv_text(self.columns, [row], header=False))


def read_complete_rows(path: Path, columns: Sequence[str]) -> tuple[list[dict], int]:
    """The complete rows of a CSV written by :class:`RowWriter` and how many incomplete ones were dropped.

    A row is incomplete when the file does not end with a newline after it (the run was killed while
    writing it) or when its column count is wrong. Raises ValueError when the header is not ``columns``
    (a file from another version of the experiment, whose rows cannot be trusted to mean the same).
    """
    text = Path(path).read_text()
    records = list(csv.reader(io.StringIO(text)))
    if not records or records[0] != list(columns):
        raise ValueError(f"{path} does not have the expected columns ({', '.join(columns)}); it was written by "
                         "another version of this experiment")
    body = records[1:]
    cut = 0 if text.endswith("\n") else 1
    complete = [r for r in body[: len(body) - cut] if len(r) == len(columns)]
    rows = [{k: _parse(v) for k, v in zip(columns, r, strict=True)} for r in complete]
    return rows, len(body) - len(complete)


def read_csv(path: Path, *, keep_text: Iterable[str] = ()) -> list[dict]:
    """Rows of a CSV with numbers parsed back to float/int where they look like numbers.

    Columns named in ``keep_text`` stay strings (e.g. "0.090" printed as the paper prints it).
    """
    keep = set(keep_text)
    with open(path, newline="") as f:
        return [{k: v if k in keep else _parse(v) for k, v in r.items()} for r in csv.DictReader(f)]


def _parse(s: str):
    if s in ("", None):
        return s
    for cast in (int, float):
        try:
            return cast(s)
        except ValueError:
            pass
    return s


def save_png(fig, path: Path, dpi: int) -> Path:
    """Save ``fig`` as a PNG that depends only on what is drawn, then close it.

    Agg rasterises deterministically; the only run-dependent bytes matplotlib would add are metadata,
    of which it writes just "Software" (its version) to PNGs, so that is dropped too.
    """
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=dpi, metadata={"Software": None})
    plt.close(fig)
    return Path(path)


def format_table(rows: Iterable[dict], columns: Sequence[str]) -> str:
    """A plain fixed-width table of the given columns (numbers to 4 significant digits)."""
    rows = list(rows)

    def fmt(x) -> str:
        if isinstance(x, float):
            if math.isinf(x) or math.isnan(x):
                return str(x)
            return f"{x:.4g}" if abs(x) < 1e6 else f"{x:.3e}"
        return str(x)

    cells = [[fmt(r.get(c, "")) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(x.rjust(w) for x, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)


def save_tables(tables: dict[str, list[dict]], out: Path, columns: dict[str, Sequence[str]]) -> None:
    """Write each table of ``tables`` to ``out/<name>.csv`` with the given columns."""
    for name, cols in columns.items():
        write_csv(out / f"{name}.csv", cols, tables[name])


def missing(out: Path, names: Iterable[str]) -> list[str]:
    """The files of ``names`` that ``out`` lacks."""
    return [f for f in names if not (Path(out) / f).is_file()]


def default_out(experiment: str, paper_figures: bool = False) -> Path:
    """The output folder of a run without --out: ``results/<experiment>/``, or ``paper_figures/`` when asked."""
    return FIGURES if paper_figures else RESULTS / experiment


def add_output_args(p, experiment: str, *, quiet: bool = True) -> None:
    """--out DIR | --paper-figures, and --quiet, with the same help on every experiment."""
    where = p.add_mutually_exclusive_group()
    where.add_argument("--out", default=None, metavar="DIR",
                       help=f"output folder (default: results/{experiment}/ in the repository, not tracked by git)")
    where.add_argument("--paper-figures", action="store_true",
                       help="write into the tracked paper_figures/ instead (refreshes the committed figures; "
                       "their numbers can differ in the last digits from machine to machine)")
    if quiet:
        p.add_argument("--quiet", "-q", action="store_true",
                       help="no progress on stderr (by default: a line per stage and configuration, and at least "
                       "one every 10 s; a bar when stderr is a terminal)")


def out_of(args, experiment: str) -> Path:
    """The folder chosen by add_output_args' arguments (not yet created or checked)."""
    return Path(args.out) if args.out is not None else default_out(experiment, args.paper_figures)


def link(out: Path, target, name: str | None = None) -> str:
    """A Markdown link target, from a file in ``out``, to ``target``: a path, or with ``name`` the file ``name``
    of the experiment ``target``, which sits beside it in paper_figures/ and in a folder of its own under
    results/ (elsewhere: assumed beside it, in the folder the user chose for both)."""
    out = Path(out).resolve()
    if name is not None:
        default = (RESULTS / "range_queries").resolve()
        return f"../{target}/{name}" if out == default else name
    target = Path(target).resolve()
    if out == ROOT.resolve() or ROOT.resolve() in out.parents:
        return Path(os.path.relpath(target, out)).as_posix()
    return target.as_posix()


def figure_main(argv, *, name: str, description: str, compute, plot, inputs: Sequence[str]) -> int:
    """The CLI of a figure module: ``compute(out)`` writes its CSVs (skipped with --from-csv), then ``plot(out)``.

    ``inputs`` are the CSVs ``plot`` reads; --from-csv on a folder without them is refused before any work.
    The folder is locked while the module writes to it (see :mod:`experiments._run`).
    """
    import argparse

    from experiments import _progress

    p = argparse.ArgumentParser(prog=f"python -m experiments.{name}", description=description,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_output_args(p, "range_queries")  # these figures belong to the main job's folder
    p.add_argument("--from-csv", action="store_true", help="re-plot from the CSVs without recomputing")
    args = p.parse_args(argv)
    try:
        out = _run.check_out_dir(out_of(args, "range_queries"))
    except ValueError as e:
        p.error(str(e))
    if args.from_csv and (lost := missing(out, inputs)):
        p.error(f"--from-csv: {out} has no {', '.join(lost)}; run without --from-csv first")
    try:
        with _run.hold(out), _progress.Progress(name, enabled=not args.quiet) as prog:
            if not args.from_csv:
                prog.stage("computing")
                compute(out)
            prog.stage("plotting")
            made = plot(out)
            prog.done(f"wrote {len(made)} figures into {out}")
            print("\n".join(str(f) for f in made))
    except _run.Busy as e:
        p.error(str(e))
    return 0
