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
# the second re-layout (issue 31): the root keeps the public nouns, each helper lives with its layer
LAYERED = {
    "_validation": "_base.validation", "_guards": "_base.guards", "_runtime": "_base.runtime",
    "_parallel": "_base.parallel", "_atomic": "_base.atomic", "_gaussian_delta": "_base.gaussian_delta",
    "_persist_json": "_base.jsonable", "_opendp": "_base.opendp", "_result": "_base.result",
    "_solution": "_base.solution",
    "_workload_core": "dense._workload_core", "_workload_type": "dense._workload_type",
    "_gram_forms": "dense._gram_forms", "_queries": "dense._queries", "_interval_trees": "dense._interval_trees",
    "_strategy_core": "dense._strategy_core", "_strategy_analysis": "dense._strategy_analysis",
    "_error_common": "dense._error_common", "_family_answers": "dense._family_answers",
    "profile": "dense.profile", "gram_operator": "dense.gram_operator", "least_squares": "dense.least_squares",
    "hierarchies": "baselines.hierarchies", "transforms": "baselines.transforms",
    "factorization": "search.factorization",
    "_local_objectives": "search._local_objectives", "_methods": "search._methods",
    "_persist_files": "persist._files", "_persist_format": "persist._format", "_persist_toeplitz": "persist._toeplitz",
    "_svt_core": "sparse_vector._core", "_svt_noise": "sparse_vector._noise",
}
MOVED = {f"mmopt.{m}": f"mmopt.search.{m}" for m in SEARCHES} | {f"mmopt.{a}": f"mmopt.{b}" for a, b in LAYERED.items()}


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
