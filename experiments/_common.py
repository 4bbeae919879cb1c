"""The boring parts of experiments: output paths, CSV rows written as they finish, terminal tables."""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ROOT / "paper_figures"


def out_dir(path: str | Path | None) -> Path:
    """The output folder (default ``paper_figures/`` beside the package), created if missing."""
    d = Path(path) if path is not None else FIGURES
    d.mkdir(parents=True, exist_ok=True)
    return d


class RowWriter:
    """Append rows to a CSV as they complete, so an interrupted run loses nothing.

    With ``resume=True`` existing rows are kept and :meth:`done` tells which keys to skip.
    """

    def __init__(self, path: Path, columns: Sequence[str], *, resume: bool = False, key: Sequence[str] = ()):
        self.path, self.columns, self.key = Path(path), list(columns), tuple(key)
        self.rows: list[dict] = read_csv(self.path) if resume and self.path.exists() else []
        with open(self.path, "w", newline="") as f:
            w = csv.DictWriter(f, self.columns, extrasaction="ignore")
            w.writeheader()
            w.writerows(self.rows)

    def done(self, **key) -> bool:
        want = tuple(str(key[k]) for k in self.key)
        return any(tuple(str(r.get(k)) for k in self.key) == want for r in self.rows)

    def write(self, row: dict) -> None:
        self.rows.append(row)
        with open(self.path, "a", newline="") as f:
            csv.DictWriter(f, self.columns, extrasaction="ignore").writerow(row)


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
        w = RowWriter(out / f"{name}.csv", cols)
        for r in tables[name]:
            w.write(r)


def figure_main(argv, *, description: str, compute, plot) -> int:
    """The CLI of a figure module: ``compute(out)`` writes its CSVs (skipped with --from-csv), then ``plot(out)``."""
    import argparse

    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=None, help="output folder (default paper_figures/)")
    p.add_argument("--from-csv", action="store_true", help="re-plot from the CSVs without recomputing")
    args = p.parse_args(argv)
    out = out_dir(args.out)
    if not args.from_csv:
        compute(out)
    print("\n".join(str(f) for f in plot(out)))
    return 0
