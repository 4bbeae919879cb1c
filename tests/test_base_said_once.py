"""The records' DataWarnings said once per count (per batch before) and once per Curator (per read before), under
``simplefilter("always")`` too (a helper's audit); other warnings and the caller's filters are untouched."""

import warnings

import numpy as np
import pytest

import mmopt
from mmopt._base.said_once import data_warnings_once
from mmopt.records import Attribute, Domain, marginal_counts


def _said(body, said=None):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with data_warnings_once(said):
            body()
    return [(x.category, str(x.message)) for x in w]


def test_each_data_warning_once_others_as_they_came():
    def body():
        for _ in range(3):
            warnings.warn("column 'age' holds text", mmopt.DataWarning, stacklevel=1)
            warnings.warn("a user warning", UserWarning, stacklevel=1)
        warnings.warn("another column", mmopt.DataWarning, stacklevel=1)
    got = _said(body)
    assert got.count((mmopt.DataWarning, "column 'age' holds text")) == 1
    assert got.count((UserWarning, "a user warning")) == 3 and (mmopt.DataWarning, "another column") in got
    said = set()
    assert len(_said(lambda: warnings.warn("x", mmopt.DataWarning, stacklevel=1), said)) == 1
    assert _said(lambda: warnings.warn("x", mmopt.DataWarning, stacklevel=1), said) == []  # a Curator's later read


def test_the_warnings_are_given_when_the_body_raises_and_filters_still_apply():
    def body():
        warnings.warn("before the failure", mmopt.DataWarning, stacklevel=1)
        raise ValueError("the count failed")
    with pytest.warns(mmopt.DataWarning, match="before the failure"), pytest.raises(ValueError, match="failed"):
        with data_warnings_once():
            body()
    with warnings.catch_warnings():
        warnings.simplefilter("error", mmopt.DataWarning)
        with pytest.raises(mmopt.DataWarning):
            with data_warnings_once():
                warnings.warn("made an error by the caller's filter", mmopt.DataWarning, stacklevel=1)


def test_a_count_and_mst_say_each_data_warning_once(tmp_path):
    D = Domain((Attribute("sex", categories=("F", "M")), Attribute("age", edges=(0, 18, 65, 120))))
    path = tmp_path / "ragged.csv"
    path.write_text("sex,age\nF,30\nM,x\nF,30,1\nM,70\n" + "F,5\n" * 200 + "M,zz\n")
    got = _said(lambda: marginal_counts(path, D, [(0, 1)], batch_size=50))
    assert sorted(c.__name__ for c, _ in got) == ["DataWarning", "DataWarning"]  # text in age; the skipped row
    rng = np.random.default_rng(0)
    rows = "\n".join(f"{rng.choice(['F', 'M'])},{rng.integers(0, 100)}" for _ in range(300))
    path.write_text("sex,age\n" + rows + "\nF,30,1\n")
    from mmopt.synth import mst
    got = _said(lambda: mst(path, D, mmopt.Privacy(1.0, 1e-9), seed=0))
    assert sum(c is mmopt.DataWarning and "number of fields" in m for c, m in got) == 1  # mst reads twice
