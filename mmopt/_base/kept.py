"""Noisy measurements kept when a release is interrupted after its draw: the budget is spent, so they must not be lost.

The command line holds Ctrl-C from the draw until the answers are written (:func:`mmopt.cli.output.signals_held`).
A library should not take over a program's signals, so the Python API does the other half instead: every public
release's body runs inside :func:`keeping_draws`; each vector drawn meanwhile (:func:`keep`, called by
:func:`mmopt._base.opendp.measure`) is kept, and if the call then raises anything — a KeyboardInterrupt during a
long reconstruction, a MemoryError, a bug — the exception carries them as ``noisy_measurements`` (a tuple of
:class:`Drawn`) with a note saying so. Before, they were reachable only through the traceback's frames, and a
user who did not know that released again, spending the budget twice. In an interactive session the last
exception is ``sys.last_value``.

>>> import numpy as np
>>> try:
...     with keeping_draws("demo"):
...         keep(np.array([1.5, 2.5]), 1.0, 0.5, "demo", "laplace")
...         raise KeyboardInterrupt
... except KeyboardInterrupt as exc:
...     print(exc.noisy_measurements[0].y, exc.noisy_measurements[0].noise_scale)
[1.5 2.5] 1.0
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

__all__ = ["Drawn", "keep", "keeping_draws"]

_KEPT: contextvars.ContextVar[list | None] = contextvars.ContextVar("mmopt_kept_draws", default=None)


@dataclass(frozen=True)
class Drawn:
    """One noisy measurement vector y = A x + noise, drawn by ``caller`` at ``noise_scale`` (b or σ) with
    ``noise`` noise; ``verified_loss`` is the privacy loss OpenDP verified for it (ε, or (ε, δ))."""

    caller: str
    y: np.ndarray
    noise_scale: float
    verified_loss: object
    noise: str


def keep(y: np.ndarray, noise_scale: float, verified_loss, caller: str, noise: str) -> None:
    """Keep ``y`` for the innermost :func:`keeping_draws` call running (nothing when none is)."""
    kept = _KEPT.get()
    if kept is not None:
        kept.append(Drawn(caller, y, float(noise_scale), verified_loss, noise))


@contextlib.contextmanager
def keeping_draws(caller: str) -> Iterator[None]:
    """Around a public release's body: an exception raised once noise was drawn carries the draws (module
    docstring). A context manager, not a decorator: a wrapper's frame would move every warning's ``stacklevel``
    off the user's line. Nested releases (``Accountant.release`` calling ``mmopt.release``) keep them in the
    outermost block's list."""
    if _KEPT.get() is not None:  # an outer release keeps them
        yield
        return
    kept: list = []
    token = _KEPT.set(kept)
    try:
        yield
    except BaseException as exc:
        if kept:
            exc.noisy_measurements = tuple(kept)
            exc.add_note(f"{caller}: this was raised after the noise was drawn, so the privacy budget is spent. The "
                         f"{len(kept)} noisy measurement vector(s) are kept in this exception's 'noisy_measurements' "
                         "(each with .y, .noise_scale, .verified_loss; in an interactive session "
                         "sys.last_value.noisy_measurements): post-process them rather than releasing again.")
        raise
    finally:
        _KEPT.reset(token)
