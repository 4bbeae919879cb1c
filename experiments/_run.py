"""What keeps two runs apart: the output-folder lock, the parameter sidecar and the untracked run-info file.

- ``hold(out)``: a lock file ``out/.experiments.lock`` created atomically (O_CREAT | O_EXCL) holding the
  writer's pid, removed on exit. A lock whose pid is dead (a killed run) is taken over; a live one
  raises :class:`Busy`, so two runs never interleave rows in one folder.
- ``range_queries.params.json`` (tracked): the parameters that produced ``range_queries.csv``, so that
  ``--resume`` can refuse rows computed under other parameters.
- ``run_info.json`` (not tracked, see .gitignore): timings, the command as typed and the machine, which
  change on every run and so must stay out of the tracked, reproducible outputs.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import platform
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

LOCK_NAME = ".experiments.lock"
_FRESH = 10.0  # seconds: an empty lock file this young is a run between O_EXCL and writing its pid
RUN_INFO = "run_info.json"
_UMASK = os.umask(0o022)
os.umask(_UMASK)  # read once: mkstemp creates 0600 files, but outputs get the usual umask-derived mode


class Busy(RuntimeError):
    """Another live process holds the output folder's lock."""


def check_out_dir(path) -> Path:
    """The output folder, created if missing and proven writable, or a ValueError saying why not.

    Writability is tested by creating a file: ``os.access`` answers True for root even on a read-only mount.
    """
    d = Path(path)
    if d.exists() and not d.is_dir():
        raise ValueError(f"--out must be a folder; {d} is a file. Choose another path.")
    try:
        d.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=d, prefix=".write-test-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise ValueError(f"--out {d} is not a writable folder ({e.strerror or e}). Choose a folder you can "
                         "write to.") from None
    return d


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _holder(path: Path) -> int | None:
    """The pid written in a lock file; None when it is unreadable or garbled (treated as stale)."""
    try:
        text = path.read_text().split()
        return int(text[0]) if text else None
    except (OSError, ValueError):
        return None


def _create(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(f"{os.getpid()}\n")
    return True


def _live(path: Path) -> int | None:
    """The pid holding the lock if it may still be live, else None (stale).

    O_EXCL creates the file empty and the pid is written just after, so an empty or garbled lock younger
    than _FRESH seconds may be a run in the middle of taking it: it counts as live (pid 0 = unknown)."""
    pid = _holder(path)
    if pid is not None:
        return pid if _pid_alive(pid) else None
    try:
        young = time.time() - path.stat().st_mtime < _FRESH
    except FileNotFoundError:
        return None
    return 0 if young else None


def _take_over_stale(path: Path) -> None:
    """Remove a lock whose writer is dead. The rename is atomic, so of two runs seeing the same stale lock
    only one removes it; if a live lock was created in between, it is put back untouched."""
    aside = path.with_name(f"{path.name}.stale-{os.getpid()}")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return  # someone else took it over first; the O_EXCL retry decides
    if _live(aside) is not None:
        with contextlib.suppress(FileExistsError):
            os.link(aside, path)  # fails only if yet another run holds the lock now: it stays theirs
    os.unlink(aside)


def acquire(out: Path) -> Path:
    """Create the lock in ``out`` or raise :class:`Busy` naming the pid that holds it."""
    path = Path(out) / LOCK_NAME
    for _ in range(3):
        if _create(path):
            return path
        pid = _live(path)
        if pid is not None:
            who = f"pid {pid}" if pid else "a run that is just starting"
            raise Busy(f"{out} is in use by another run ({who}, lock file {path}). Wait for it to finish "
                       f"or use another --out; if no such run exists, delete {path}.")
        _take_over_stale(path)
    raise Busy(f"could not lock {out}: other runs keep taking the lock {path}. Try again.")


@contextlib.contextmanager
def hold(out: Path):
    """Hold ``out``'s lock for the block; SIGTERM (e.g. a killed job) also releases it."""
    path = acquire(out)
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        yield path
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if _holder(path) == os.getpid():
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def _exit_on_sigterm(signum, frame):
    raise SystemExit(128 + signum)  # unwinds through hold()'s finally, which removes the lock


def write_text(path: Path, text: str) -> None:
    """Replace ``path`` atomically (write a temporary file, then rename), so a reader never sees half a file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", newline="") as f:
            f.write(text)
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_json(path: Path, data: dict) -> None:
    """Deterministic JSON (sorted keys), so equal parameters give byte-identical files."""
    write_text(path, json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def read_json(path: Path) -> dict | None:
    """The JSON object in ``path``; None when the file is missing or unreadable."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def machine() -> dict:
    """Where the run happened: Python, numpy and BLAS threads, CPU count (for run_info.json only)."""
    import numpy as np

    info = {"python": sys.version.split()[0], "platform": platform.platform(), "numpy": np.__version__,
            "cpu_count": os.cpu_count(),
            "blas_threads_env": {k: os.environ.get(k) for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                                                  "MKL_NUM_THREADS")}}
    try:
        from threadpoolctl import threadpool_info

        info["blas"] = [{k: p.get(k) for k in ("internal_api", "version", "num_threads")} for p in threadpool_info()]
    except ImportError:
        pass
    return info


def write_run_info(out: Path, info: dict) -> Path:
    """``out/run_info.json``: this run's timings and machine (untracked; see .gitignore)."""
    path = Path(out) / RUN_INFO
    write_json(path, info | {"finished_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                             "machine": machine()})
    return path
