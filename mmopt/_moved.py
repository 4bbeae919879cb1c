"""Old import paths of modules that moved (``mmopt.min_error`` → ``mmopt.search.min_error``), kept importable.

A meta-path finder maps each old name to the module's new home: ``import mmopt.min_error`` and
``from mmopt.min_error import X`` give the same module object as the new path (one module, never two copies),
with a DeprecationWarning naming the new path. No file is left at the old place.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

SEARCHES = ("min_error", "min_error_fast", "pidentity", "pidentity_ladder", "pidentity_sparse", "l2_fast", "sdp_l2",
            "sdp_min_error", "local_search", "lrm", "eigen_design", "min_sensitivity")
MOVED = {f"mmopt.{m}": f"mmopt.search.{m}" for m in SEARCHES}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self) -> None:
        self._specs: dict = {}

    def find_spec(self, fullname, path, target=None):
        if fullname in MOVED:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        new = MOVED[spec.name]
        warnings.warn(f"{spec.name} moved to {new}; import it from there (the old path will be removed).",
                      DeprecationWarning, stacklevel=3)
        module = importlib.import_module(new)
        self._specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module):
        # the module was executed under its new name; the import machinery has just set its __spec__ to the old
        # name's, so give it back its own (reload and pickling read it)
        module.__spec__ = self._specs[module.__name__]


def install() -> None:
    if not any(isinstance(f, _Alias) for f in sys.meta_path):
        sys.meta_path.append(_Alias())
