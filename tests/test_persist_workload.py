"""mmopt.persist._workload: a strategy file loaded with other queries over the same cells is said (a UserWarning
naming both workloads); the same queries in any representation are not; files without a sketch are not compared."""

import re
import warnings

import numpy as np
import pytest

import mmopt
from mmopt import strategy as st
from mmopt import toeplitz
from mmopt import workload as wl
from mmopt.persist._workload import differs, sketch
from mmopt.structured import workloads as sw


def _load_quietly(path, W):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return mmopt.load(path, workload=W)


@pytest.mark.parametrize(("saved", "same", "other"), [
    (wl.all_range(8), [wl.all_range(8), mmopt.Workload.from_matrix(wl.all_range(8).explicit_matrix())],
     [wl.prefix(8), wl.random_range(8, 10, seed=0)]),
    (wl.random_range(16, 10, seed=0), [wl.random_range(16, 10, seed=0)], [wl.random_range(16, 10, seed=1)]),
    (wl.kron(wl.prefix(4), wl.identity(4)), [sw.kron(wl.prefix(4), wl.identity(4))],
     [wl.kron(wl.all_range(4), wl.identity(4))]),
    (toeplitz.prefix(64), [wl.prefix(64)], [toeplitz.all_range(64)]),
    # the same best strategy: a scaled workload, a stack with every weight doubled (they were said)
    (wl.stack([wl.prefix(8), wl.identity(8)], weights=[2.0, 1.0]),
     [wl.stack([wl.prefix(8), wl.identity(8)], weights=[4.0, 2.0])],
     [wl.stack([wl.prefix(8), wl.identity(8)], weights=[1.0, 1.0])]),
    # ranges over one attribute or the other: rᵀGr alone was within round-off's allowance of Σ|G| (not said)
    (wl.kron([wl.all_range(64), wl.total(64)]), [], [wl.kron([wl.total(64), wl.all_range(64)])]),
])
def test_other_queries_are_said_the_same_in_another_form_are_not(tmp_path, saved, same, other):
    path = tmp_path / "s.npz"
    mmopt.save(path, st.identity(saved.domain_size), workload=saved)
    for W in same:
        _load_quietly(path, W)
    for W in other:
        said = f"saved with workload '{re.escape(saved.name)}'.*differ.*'{re.escape(W.name)}'"
        with pytest.warns(UserWarning, match=said):
            mmopt.load(path, workload=W)


def test_sketch_is_of_the_gram_and_tolerates_round_off():
    W = wl.prefix(12)
    G = W.explicit_matrix().T @ W.explicit_matrix()
    t, q, s, qu, qv = sketch(W)
    r = np.cos(1.0 + np.pi * (3 - np.sqrt(5)) * np.arange(12))
    assert (t, s) == (np.trace(G), np.abs(G).sum()) and q == pytest.approx(r @ G @ r, rel=1e-12)
    assert 0 < qu <= s and abs(qv) <= s  # probes in [0, 1) and [−1, 1)
    assert not differs([t * (1 + 1e-13), q + 1e-12, s, qu, qv], [t, q, s, qu, qv])
    assert differs([t, q, s, qu + 1e-3, qv], [t, q, s, qu, qv]) and differs([t, q, s, qu, qv + 1e-3], [t, q, s, qu, qv])
    assert not differs([2 * t, 2 * q, 2 * s, 2 * qu, 2 * qv], [t, q, s, qu, qv])  # 2·G: the same best strategy
    # a file written with three numbers is compared on them, unnormalised, as then
    assert not differs(sketch(W), [t, q, s]) and differs(sketch(W), [t, q + 1e-3, s])
    assert differs(sketch(W), [2 * t, q, s])
    assert not differs(sketch(W), None) and sketch(wl.prefix(5000)) is None  # not compared past 4,096 cells


def test_grouping_sets_are_recorded_and_checked_as_the_queries_they_are(tmp_path):
    """save(..., workload=H) and load(..., workload=H) refused a HierarchyWorkload (the remedy save itself named for
    its strategy then failed; a helper's audit); a bare matrix is told to be wrapped."""
    import numpy as np

    import mmopt
    from mmopt.hierarchy import Hierarchy, grouping_sets
    geo = Hierarchy.balanced((2, 3), level_names=("nation", "state", "county"), name="geo")
    H = grouping_sets([geo, Hierarchy.flat(2, name="sex")], [("state", "sex"), ("county",), ()])
    P = mmopt.Privacy(1.0, 1e-6)
    res = mmopt.optimize(H, privacy=P)
    A = mmopt.Strategy.from_gram(res.strategy.dense_gram())  # a dense twin, saved with the grouping sets
    path = mmopt.save(tmp_path / "a", A, workload=H, privacy=P)
    loaded = mmopt.load(path, workload=H)  # the same queries: no warning, and the same error
    recorded = loaded.metadata["workload"]
    assert recorded["kind"] == "implicit" and recorded["n_queries"] == H.n_queries
    want = mmopt.evaluate(H, res.strategy, P).total_squared_error
    assert mmopt.evaluate(H, loaded.strategy, P).total_squared_error == pytest.approx(want, rel=1e-9)
    other = grouping_sets([geo, Hierarchy.flat(2, name="sex")], [("county", "sex")])
    with pytest.warns(UserWarning):  # other queries over the same cells are said
        mmopt.load(path, workload=other)
    with pytest.raises(TypeError, match=r"Got ndarray\. Wrap the matrix: mmopt\.Strategy\(A\)"):
        mmopt.save(tmp_path / "m", np.eye(12))


@pytest.mark.parametrize("recorded", [["x", "y", "z"], 5, ["nan"] * 5, [1.0, 2.0], [1.0, True, 3.0], [10**400, 1, 2]])
def test_a_recorded_sketch_that_is_not_numbers_is_refused_as_corruption(tmp_path, recorded):
    """A hand-edited sketch (checksum recomputed): strings raised a bare ValueError, a number a bare TypeError, and
    NaNs silenced the mismatch warning (a helper's audit)."""
    import json

    from mmopt.persist import _format as fmt
    path = mmopt.save(tmp_path / "s", st.identity(16), workload=wl.prefix(16))
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(arrays.pop("metadata").tobytes())
    meta["workload"]["gram_sketch"] = recorded
    meta["checksum"] = fmt.checksum(meta, arrays)
    np.savez_compressed(path, metadata=np.frombuffer(fmt.canonical(meta).encode(), dtype=np.uint8), **arrays)
    with pytest.raises(ValueError, match=r"records a workload sketch .*, not 3 or 5 finite numbers"):
        mmopt.load(path, workload=wl.all_range(16))
