"""The records' DataWarnings said once per count (per batch before) and once per Curator (per read before), under
``simplefilter("always")`` too (a helper's audit); other warnings and the caller's filters are untouched."""

import warnings

import numpy as np
import pytest

import mmopt
from mmopt._base.said_once import data_warnings_once, warn_data
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
            warn_data("column 'age' holds text")
            warnings.warn("a user warning", UserWarning, stacklevel=1)
        warn_data("another column")
    got = _said(body)
    assert got.count((mmopt.DataWarning, "column 'age' holds text")) == 1
    assert got.count((UserWarning, "a user warning")) == 3 and (mmopt.DataWarning, "another column") in got
    said = set()
    assert len(_said(lambda: warn_data("x"), said)) == 1
    assert _said(lambda: warn_data("x"), said) == []  # a Curator's later read
    assert len(_said(lambda: warn_data("x"))) == 1  # a new scope
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        warn_data("x")
        warn_data("x")  # outside any scope: as warnings.warn
    assert len(w) == 2


def test_the_callers_filters_apply_and_threads_keep_their_own_scope():
    """A first version swapped the process-wide filters (catch_warnings): two threads counting at once left them
    stuck on "always", every later warning lost, and a module filter on mmopt was bypassed (a review)."""
    import threading

    import pandas as pd
    D = Domain((Attribute("sex", categories=("F", "M")), Attribute("age", edges=(0, 18, 65, 120))))
    df = pd.DataFrame({"sex": ["F", "M"] * 500, "age": ["30", "x"] * 500})
    before = list(warnings.filters)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=mmopt.DataWarning, module=r"mmopt\.")
        with warnings.catch_warnings(record=True) as w:
            marginal_counts(df, D, [(0, 1)])
        assert w == []

        def run():
            for _ in range(20):
                marginal_counts(df, D, [(0, 1)], batch_size=100)
        threads = [threading.Thread(target=run) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert warnings.filters == before
    with pytest.warns(mmopt.DataWarning, match="not numbers") as w:
        marginal_counts(df, D, [(0, 1)], batch_size=100)  # ten batches with text: said once
    assert len(w) == 1
    mixed = pd.DataFrame({"sex": [1, "M"] * 50, "age": [30, 40] * 50})  # numbers under string categories
    with pytest.warns(mmopt.DataWarning, match="not strings") as w:
        marginal_counts(mixed, D, [(0, 1)], batch_size=10)  # one site missed warn_data: ten (a review)
    assert len(w) == 1


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


def test_dask_partitions_counted_elsewhere_warn_the_caller_once():
    """On a process (or cluster) scheduler a partition's warning reached the worker's stderr, never the caller: a
    text value in a numeric column dropped its records without a word to a ``dask.distributed`` user."""
    dask = pytest.importorskip("dask")
    import dask.dataframe as dd
    import pandas as pd
    D = Domain((Attribute("sex", categories=("F", "M")), Attribute("age", edges=(0, 18, 65, 120))))
    df = pd.DataFrame({"sex": ["F", "M", "F"] * 4, "age": ["30", "x", "70"] * 4})  # text in every partition
    with pytest.warns(mmopt.DataWarning, match="not numbers"):
        want = marginal_counts(df, D, [(0, 1)])[(0, 1)]
    counts = []
    # another process (forked: a spawned one imports mmopt again, 5 s); threads: test_records_counts
    with dask.config.set({"scheduler": "processes", "num_workers": 1, "multiprocessing.context": "fork"}):
        got = _said(lambda: counts.append(marginal_counts(dd.from_pandas(df, npartitions=3), D, [(0, 1)])))
    assert [m[:40] for c, m in got if c is mmopt.DataWarning] == ["Column 'age' holds values that are not n"]
    assert np.array_equal(counts[0][(0, 1)], want) and want.sum() == 8
    from mmopt._base.said_once import data_warnings_kept
    with warnings.catch_warnings(record=True) as w, data_warnings_kept() as kept:
        warnings.simplefilter("always")
        warn_data("b")
        warn_data("a")
        warn_data("b")
    assert w == [] and kept == ["b", "a"]
