"""Issue 31: the searches moved to mmopt.search; every old path still imports — the same module object, with a
DeprecationWarning naming the new one — and the package root no longer holds them."""

import importlib
import sys
import warnings
from pathlib import Path

import pytest

from mmopt import _moved


@pytest.mark.parametrize("old, new", sorted(_moved.MOVED.items()))
def test_old_paths_import_the_moved_module(old, new):
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}"):
        module = _fresh(old)
    assert module is importlib.import_module(new) and module.__spec__.name == new
    assert not (Path(__file__).resolve().parent.parent / (old.replace(".", "/") + ".py")).exists()


def _fresh(name):
    sys.modules.pop(name, None)  # an earlier import under the old name would not warn again
    return importlib.import_module(name)


def test_from_import_of_an_old_name():
    sys.modules.pop("mmopt.lrm", None)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        from mmopt.lrm import project_l1_columns  # noqa: F401 — the old path of mmopt.search.lrm
    assert any("mmopt.lrm moved to mmopt.search.lrm" in str(w.message) for w in seen)
