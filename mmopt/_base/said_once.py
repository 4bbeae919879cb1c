"""The records' diagnostics said once: a count warned per batch and per read (a helper's audit).

The DataWarning sites call :func:`warn_data`, which skips a message already given inside the innermost
:func:`data_warnings_once` scope. The scope is a :class:`contextvars.ContextVar`, so each thread (and asyncio
task) has its own: a first version swapped the process-wide warning filters (``warnings.catch_warnings``), which two
threads counting at once left stuck on "always", with every later warning lost (a review).

A Dask partition counted on another process or machine warns there, on the worker's stderr, where the caller
never sees it: the partition runs inside :func:`data_warnings_kept`, which keeps its messages to return with its
counts, and the caller says them (:func:`mmopt.records.counts.marginal_counts`).
"""

from __future__ import annotations

import contextlib
import contextvars
import warnings

from mmopt._base.guards import DataWarning

__all__ = ["data_warnings_kept", "data_warnings_once", "warn_data"]

_SAID: contextvars.ContextVar[set | None] = contextvars.ContextVar("mmopt_data_warnings_said", default=None)
_KEPT: contextvars.ContextVar[list | None] = contextvars.ContextVar("mmopt_data_warnings_kept", default=None)


@contextlib.contextmanager
def data_warnings_once(said: set | None = None):
    """Inside, :func:`warn_data` gives each distinct message once: ``said`` holds those already given (a Curator's,
    across its reads); by default an enclosing scope's set, else a fresh one."""
    current = _SAID.get()
    token = _SAID.set(said if said is not None else (current if current is not None else set()))
    try:
        yield
    finally:
        _SAID.reset(token)


@contextlib.contextmanager
def data_warnings_kept():
    """Inside, :func:`warn_data` says nothing and appends each distinct message to the list yielded, for the caller
    to say where the work was asked for (a Dask partition's, module docstring).

    >>> with data_warnings_kept() as kept:
    ...     warn_data("a"); warn_data("a"); warn_data("b")
    >>> kept
    ['a', 'b']
    """
    kept: list = []
    token = _KEPT.set(kept)
    try:
        yield kept
    finally:
        _KEPT.reset(token)


def warn_data(message: str, stacklevel: int = 1) -> None:
    """``warnings.warn(message, DataWarning)``, unless the innermost :func:`data_warnings_once` scope gave it, or
    kept by :func:`data_warnings_kept`; ``stacklevel`` as warnings.warn's from the caller of this function."""
    kept = _KEPT.get()
    if kept is not None:
        if message not in kept:
            kept.append(message)
        return
    said = _SAID.get()
    if said is not None:
        if message in said:
            return
        said.add(message)
    warnings.warn(message, DataWarning, stacklevel=stacklevel + 1)
