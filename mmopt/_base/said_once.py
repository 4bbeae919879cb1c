"""The records' diagnostics said once: a count warned per batch and per read (a helper's audit)."""

from __future__ import annotations

import contextlib
import warnings

from mmopt._base.guards import DataWarning

__all__ = ["data_warnings_once"]

#: warn_explicit's registry for the warnings given again: under Python's "default" action each location's warning
#: is then shown once, as it was when raised directly (without one every call would show it again)
_REGISTRY: dict = {}


@contextlib.contextmanager
def data_warnings_once(said: set | None = None):
    """Inside, each distinct :class:`DataWarning` (by message) reaches the caller once: ``said`` holds those already
    given (a Curator's across its reads; a fresh set per call by default). A count warned per batch and per read:
    under ``simplefilter("always")`` mst gave the skipped-rows warning twice, a numeric column's text once per batch
    (a helper's audit). Every other warning passes as it came; all are given even when the body raises."""
    said = set() if said is None else said
    caught: list = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
    finally:
        for w in caught:
            if issubclass(w.category, DataWarning):
                if str(w.message) in said:
                    continue
                said.add(str(w.message))
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, registry=_REGISTRY, source=w.source)
