"""Where a benchmark's table goes: ``benchmarks/results/`` (tracked) only from a run of its whole default
configuration; a partial run (a case filter, fewer rows or runs) or ``--no-write`` prints it and leaves the file
alone. A quick ``--cases`` run had replaced a 34-line results file with 2 rows under a header that claimed the
full command (a helper's audit)."""

from __future__ import annotations

from pathlib import Path


def add_args(parser) -> None:
    """``--no-write``, with the same help on every benchmark."""
    parser.add_argument("--no-write", action="store_true",
                        help="print only; leave benchmarks/results alone (a partial run never writes there)")


def write(path: Path, text: str, *, no_write: bool, full: bool) -> None:
    """``text`` into ``path`` when the run was ``full`` and writing was not declined; else say why not."""
    path = Path(path)
    if no_write:
        return
    if not full:
        print(f"(a partial run: {path.name} is left as it is; run the default configuration to refresh it)")
        return
    path.parent.mkdir(exist_ok=True)
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}")
