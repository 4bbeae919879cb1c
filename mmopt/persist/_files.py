"""File handling for :mod:`mmopt.persist`: path names, atomic writes, reading an ``.npz`` without unpickling.

Notation: see README. Every refusal while reading goes through :func:`refuser`, so each message starts
"load: the file '<path>'" and ends with a remedy.
"""

from __future__ import annotations

import inspect
import json
import math
import os
import secrets
import tokenize
import zipfile
import zlib
from pathlib import Path
from types import MappingProxyType

import numpy as np

from mmopt._base import validation as v

# numpy >= 2.1 takes allow_pickle in savez_compressed; older ones never pickle numeric arrays anyway.
_NO_PICKLE = {"allow_pickle": False} if "allow_pickle" in inspect.signature(np.savez_compressed).parameters else {}
# What numpy and zipfile raise on a damaged .npy or .npz while reading its arrays. A flipped bit in the zip directory
# reads as "encrypted" (RuntimeError) or an unknown compression method (NotImplementedError), one in a .npy header as
# a tokenizer error, an empty file as EOFError: all corruption, none a crash to report. (The CLI reads its .npy and
# .npz inputs with the same list.)
CORRUPT_FILE_ERRORS = (OSError, EOFError, RuntimeError, NotImplementedError, SyntaxError, tokenize.TokenError,
                       zipfile.BadZipFile, zlib.error)
DAMAGED = ("Restore the file from a copy, or save the strategy again with mmopt.save; "
           "load does not repair a damaged file.")


def refuser(source: Path, *, caller: str = "load", writer: str = "mmopt.save", damaged: str = DAMAGED):
    """``fail(what, remedy=...)``: raise the ValueError "<caller>: the file '<source>' <what>. <remedy>".

    The readers below name mmopt.save as the writer; another file format (:mod:`mmopt.synth.saved`) passes its own
    ``writer``, put in their place, and its own remedy for a damaged file."""
    def fail(what: str, *, remedy: str = damaged):
        message = f"{caller}: the file '{source}' {what}. {remedy}"
        raise ValueError(message if writer == "mmopt.save" else message.replace("mmopt.save", writer))
    return fail


def check_path(path, caller: str, example: str = "strategy.npz") -> Path:
    """A non-empty str or os.PathLike (not bytes) as a Path; ``example`` is the file name a refusal suggests."""
    if not isinstance(path, str | os.PathLike) or isinstance(os.fspath(path), bytes):
        raise TypeError(f"The 'path' parameter of {caller} must be a non-empty str or os.PathLike. "
                        f"Got {type(path).__name__} {str(path)[:40]!r}.")
    text = os.fspath(path)
    if not text:  # the right type, the wrong value
        raise ValueError(f"The 'path' parameter of {caller} must be a non-empty str or os.PathLike (a file name). "
                         "Got '' instead.")
    if text.endswith(("/", os.sep)):  # Path() drops the slash: save("results/") wrote ./results.npz
        raise ValueError(f"The 'path' parameter of {caller} ends in a separator, so it names a directory: "
                         f"'{text}'. Give a file name, e.g. '{text}{example}'.")
    # ~ as the shell reads it: "the directory '~' does not exist. Create it first." invited a folder named '~'
    return Path(os.path.expanduser(text))


def npz_name(path, caller: str, example: str = "strategy.npz") -> Path:
    """The name save writes: ``path`` with ``.npz`` appended unless it already ends with it, in any case (".NPZ"
    was written as "x.NPZ.npz" while the CLI reported "x.NPZ")."""
    p = check_path(path, caller, example)
    if p.is_dir():  # numpy would write a sibling "<dir>.npz"; a directory given here is a missing file name
        raise ValueError(f"The 'path' parameter of {caller} names a directory, '{p}'. Give a file name, e.g. "
                         f"'{p / example}'.")
    return p if p.name.lower().endswith(".npz") else p.with_name(p.name + ".npz")


def existing_file(path, caller: str = "load") -> Path:
    """``path`` if it is a file, else ``path + ".npz"`` if that is one (what save("x") wrote)."""
    p = check_path(path, caller)
    if p.is_file():
        return p
    alt = npz_name(p, caller)
    if alt.is_file():
        return alt
    # save("c.NPZ") wrote c.NPZ, which load("c") looked for as c.npz only (a helper's audit)
    upper = alt.with_name(alt.name[:-4] + ".NPZ")
    if upper.is_file() and not p.name.lower().endswith(".npz"):
        return upper
    tried = f"'{p}'" + ("" if alt == p else f" or '{alt}'")
    raise FileNotFoundError(f"{caller}: there is no file {tried}. Check the path (save returns the name it wrote).")


def exists_message(target: Path, caller: str = "save") -> str:
    return (f"{caller}: the file '{target}' already exists. Pass overwrite=True to replace it, or choose another "
            "path.")


def write_atomically(target: Path, arrays: dict, overwrite: bool, caller: str = "save") -> None:
    """Write ``arrays`` as a compressed npz to a temporary file beside ``target``, then move it into place:
    ``target`` is either complete or untouched, whatever fails (a crash leaves at most a hidden ``.tmp``)."""
    if target.is_dir():
        raise ValueError(f"The 'path' parameter of {caller} names a directory, '{target}'. Give a file name.")
    if target.parent.exists() and not target.parent.is_dir():  # "does not exist" of a file that does
        raise NotADirectoryError(f"{caller}: '{target.parent}' is a file, not a directory. Give a path in a directory.")
    if not target.parent.is_dir():
        raise FileNotFoundError(f"{caller}: the directory '{target.parent}' does not exist. Create it first.")
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    # O_EXCL: never follow or reuse someone else's file; mode 0o666 lets the umask decide, as open() would
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    except OSError as exc:  # the temporary's name is ours, not the user's: name the file they asked for
        raise type(exc)(exc.errno, f"{caller}: cannot write '{target}' ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez_compressed(f, **arrays, **_NO_PICKLE)  # a file object: numpy appends no suffix
            f.flush()
            os.fsync(f.fileno())
        if overwrite:
            os.replace(tmp, target)
            return
        try:
            os.link(tmp, target)  # atomic, and fails if the target appeared since the check in save
        except FileExistsError:
            raise FileExistsError(exists_message(target, caller)) from None
        except OSError:  # no hard links on this file system: check, then rename
            if target.exists():
                raise FileExistsError(exists_message(target, caller)) from None
            os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def read_arrays(source: Path, fail) -> dict[str, np.ndarray]:
    """Every array of the npz ``source``, read with allow_pickle=False after checking it is a plain zip of .npy."""
    if not zipfile.is_zipfile(source):
        fail("is not an .npz (zip) archive: it is truncated, or was not written by mmopt.save")
    with open(source, "rb") as f:  # zip finds its directory at the end; numpy reads the start, and a file with
        head = f.read(4)  # bytes put before the archive read there as a pickle ("cannot be read without unpickling")
    if head != b"PK\x03\x04":
        fail("is corrupted: it does not begin with its first zip entry (bytes were put before the archive)")
    try:
        with zipfile.ZipFile(source) as z:
            infos = z.infolist()
    # a flipped bit in the zip directory reads as an unsupported zip version (NotImplementedError; a helper's probe:
    # ~1 in 900 single-bit flips of a saved product strategy, which crashed load) or "encrypted" (RuntimeError)
    except (zipfile.BadZipFile, OSError, NotImplementedError, RuntimeError, EOFError, ValueError) as exc:
        fail(f"is a damaged zip archive ({type(exc).__name__}: {exc})")
    names = [i.filename for i in infos]
    if len(set(names)) != len(names) or not all(n.endswith(".npy") and "/" not in n for n in names):
        fail(f"holds entries {names[:6]} that are not the .npy arrays of an .npz file")
    size, largest = sum(i.file_size for i in infos), max((i.file_size for i in infos), default=0)
    # the limit is per array, as everywhere in mmopt (twice the total was held against it, so a dense strategy of
    # more than half the limit could be built, evaluated and saved, but not loaded; a helper's audit); the total,
    # held twice while loading (the arrays, then the object's own copy), may reach two of them
    limit = 8 * v.MAX_ALLOCATION_ENTRIES
    if largest > limit or size > 2 * limit:
        fail(f"would unpack to {size:,} bytes ({largest:,} in its largest array), more than mmopt's allocation limit "
             f"({limit:,} bytes per array, twice that in all; mmopt._base.validation.MAX_ALLOCATION_ENTRIES)",
             remedy="Raise the limit if the file is genuine.")
    _check_headers(source, fail)
    try:
        with np.load(source, allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}
    except ValueError as exc:  # numpy refuses object arrays and pickles when allow_pickle=False
        if "allow_pickle" not in str(exc):
            fail(f"is corrupted: an array header is malformed ({exc})")
        fail(f"cannot be read without unpickling ({exc})",
             remedy="mmopt files hold numeric arrays only, and load never unpickles (unpickling can run code). "
                    "Pass a file written by mmopt.save.")
    except CORRUPT_FILE_ERRORS as exc:
        fail(f"is corrupted: reading its arrays failed ({type(exc).__name__}: {exc})")


def _check_headers(source: Path, fail) -> None:
    """Each .npy header's shape and dtype against the bytes its entry holds, before numpy allocates the array: a
    1.9 kB file declaring a 10⁶ × 10⁶ matrix raised a bare MemoryError (7.3 TiB; a helper's audit), past the size
    check above, which reads the zip directory, not the headers."""
    try:
        problem = _header_problem(source)
    except ValueError as exc:  # a malformed header (numpy's own refusal)
        problem = f"an array header is malformed ({exc})"
    except CORRUPT_FILE_ERRORS as exc:
        problem = f"reading its arrays failed ({type(exc).__name__}: {exc})"
    if problem is not None:
        fail(f"is corrupted: {problem}")


def _header_problem(source: Path) -> str | None:
    readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    with zipfile.ZipFile(source) as z:
        for info in z.infolist():
            with z.open(info) as f:
                version = np.lib.format.read_magic(f)
                if version not in readers:
                    return (f"entry '{info.filename}' has .npy format version {version}, which mmopt.save does "
                            "not write")
                shape, _, dtype = readers[version](f)
                declared = math.prod(shape) * dtype.itemsize
                if declared > info.file_size:
                    return (f"entry '{info.filename}' declares an array of shape {shape} ({declared:,} bytes of "
                            f"{dtype}) but holds {info.file_size:,} bytes")
    return None


def parse_metadata(entry, fail) -> dict:
    """The JSON object stored as UTF-8 bytes in the uint8 vector ``entry``; NaN/Infinity tokens refused."""
    if entry is None:
        fail("has no 'metadata' entry, so it was not written by mmopt.save",
             remedy="Pass a file written by mmopt.save.")
    if entry.dtype != np.uint8 or entry.ndim != 1:
        fail(f"has a 'metadata' entry of dtype {entry.dtype} and shape {entry.shape}, not UTF-8 bytes")

    def refuse_constant(token):
        fail(f"has the non-JSON number {token} in its metadata")

    try:
        meta = json.loads(entry.tobytes().decode("utf-8"), parse_constant=refuse_constant)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:  # (nesting past the parser's depth)
        fail(f"has metadata that is not valid UTF-8 JSON ({type(exc).__name__}: {exc})")
    if not isinstance(meta, dict):
        fail(f"has metadata that is a JSON {type(meta).__name__}, not an object")
    return meta


def frozen(x):
    """Dicts as read-only mappings and lists as tuples, recursively."""
    if isinstance(x, dict):
        return MappingProxyType({k: frozen(val) for k, val in x.items()})
    if isinstance(x, list):
        return tuple(frozen(val) for val in x)
    return x


def thaw(x):
    """json.dumps ``default`` for :func:`frozen` data."""
    if isinstance(x, MappingProxyType):
        return dict(x)
    raise TypeError(f"not JSON: {type(x).__name__}")
