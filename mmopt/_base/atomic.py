"""Files that are whole or absent: write to a temporary file beside the target, then rename it over.

``os.replace`` within one folder is atomic on POSIX and Windows, so a reader (or a crash) never sees a half-written
file under the final name; a failure removes the temporary file. Used by the command line's release outputs and
by :mod:`mmopt.answers`' streamed tables.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator


@contextlib.contextmanager
def atomic_target(path: str, suffix: str) -> Iterator[str]:
    """Yield a temporary path beside ``path``; when the block ends normally it becomes ``path``.

    The file gets the permissions a plain ``open()`` would give it (``mkstemp`` makes it private, 0600).
    """
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):  # mkstemp's error would name its temporary file, not the caller's path
        raise FileNotFoundError(f"Cannot write {path!r}: its folder {folder!r} does not exist. Create it first.")
    fd, tmp = tempfile.mkstemp(prefix=".mmopt-", suffix=suffix, dir=folder)
    os.close(fd)
    try:
        yield tmp
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
