"""What every mmopt ``.npz`` file shares: its format name and version, the listing of its arrays, two SHA-256 digests.

Notation: see README. :func:`mmopt.save` (format "mmopt.strategy") and :meth:`mmopt.synth.Synthetic.save` (format
"mmopt.synthetic", :mod:`mmopt.synth.saved`) write their metadata and arrays with :func:`write` and read them back
with :func:`read`, which refuses (through :func:`mmopt.persist._files.refuser`) a file of another format, of a
newer version, or whose arrays or metadata fail the checksums (:mod:`mmopt.persist._format` defines them).
"""

from __future__ import annotations

import datetime
from pathlib import Path

import numpy as np

from mmopt.persist import _files as pf
from mmopt.persist import _format as fmt

__all__ = ["READERS", "header", "read", "write"]

#: What each format holds and what reads it, for the remedy when a file of one is given to the other's reader.
READERS = {"mmopt.strategy": ("a strategy", "mmopt.load"),
           "mmopt.synthetic": ("a synthetic-data model (MST or AIM)", "mmopt.synth.load")}


def header(name: str, version: int) -> dict:
    """The first entries of a file's metadata: format, format_version, mmopt_version, created (UTC)."""
    from mmopt import __version__

    return {"format": name, "format_version": version, "mmopt_version": __version__,
            "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")}


def write(target: Path, meta: dict, arrays: dict, overwrite: bool, caller: str = "save") -> None:
    """``meta`` with the listing of ``arrays`` and the checksums added, written with the arrays (atomically)."""
    meta["arrays"] = {k: {"dtype": a.dtype.str, "shape": list(a.shape)} for k, a in arrays.items()}
    meta["checksum"] = fmt.checksum(meta, arrays)
    text = np.frombuffer(fmt.canonical(meta).encode("utf-8"), dtype=np.uint8)
    pf.write_atomically(target, {fmt.METADATA: text, **arrays}, overwrite, caller)


def read(path, *, name: str = fmt.FORMAT, version: int = fmt.FORMAT_VERSION, what: str = "mmopt strategy file",
         caller: str = "load", writer: str = "mmopt.save", damaged: str = pf.DAMAGED):
    """(source, fail, metadata, arrays) of the file of format ``name`` at ``path``, its version at most
    ``version`` and its checksums verified; ``fail`` refuses what the caller finds wrong next."""
    source = pf.existing_file(path, caller)
    fail = pf.refuser(source, caller=caller, writer=writer, damaged=damaged)
    raw = pf.read_arrays(source, fail)
    meta = pf.parse_metadata(raw.pop(fmt.METADATA, None), fail)
    found = meta.get("format")
    if found != name:
        other = READERS.get(found) if isinstance(found, str) else None
        fail(f"is not an {what} (format {found!r:.40}, expected {name!r})",
             remedy=f"It holds {other[0]}: read it with {other[1]}." if other else f"Pass a file written by {writer}.")
    got = meta.get("format_version")
    if not isinstance(got, int) or isinstance(got, bool) or not 1 <= got <= version:
        from mmopt import __version__

        newer = isinstance(got, int) and not isinstance(got, bool) and got > version
        fail(f"has format version {got!r:.20}, which this mmopt ({__version__}) cannot read: it reads version "
             f"{version} (the file says it was written by mmopt {meta.get('mmopt_version')!r:.20})",
             remedy="Upgrade mmopt to the version that wrote the file (or newer)." if newer else damaged)
    cs = fmt.field(meta, "checksum", dict, "metadata", fail)
    if cs.get("algorithm") != "sha256" or cs.get("metadata") != fmt.metadata_digest(meta):
        fail("was edited or corrupted: its metadata does not match the SHA-256 checksum it carries")
    listing = fmt.field(meta, "arrays", dict, "metadata", fail)
    if set(listing) != set(raw) or any(listing[k] != {"dtype": a.dtype.str, "shape": list(a.shape)}
                                       for k, a in raw.items()):
        fail(f"holds arrays {sorted(raw)} whose names, dtypes or shapes differ from those its metadata lists")
    if cs.get("arrays") != fmt.arrays_digest(raw):
        fail("was corrupted or edited: its arrays do not match the SHA-256 checksum in its metadata")
    return source, fail, meta, raw
