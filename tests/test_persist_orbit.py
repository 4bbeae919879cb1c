"""The saved ``orbit`` kind (mmopt.persist._orbit): plan's grouping-set strategy round-trips bit for bit, serves a
release, and an edited file (checksum recomputed) is refused or keeps Δ₂ honest."""

from __future__ import annotations

import numpy as np
import pytest
from test_persist import read_raw, write_raw

import mmopt
from mmopt.hierarchy import Hierarchy, grouping_sets
from mmopt.structured.orbit_strategy import OrbitStrategy


@pytest.fixture(scope="module")
def planned():
    geo = Hierarchy.balanced((2, 3), level_names=("nation", "state", "county"), name="geo")
    W = grouping_sets([geo, Hierarchy.flat(2, name="sex")], [("state", "sex"), ("county",), ()])
    plan = mmopt.plan(W, targets=3.0, delta=1e-6)
    assert isinstance(plan.result.strategy, OrbitStrategy)  # what this file format is for
    return W, plan


def test_a_planned_orbit_strategy_round_trips(planned, tmp_path):
    """It could not be saved (plan sf1 --save ran 97 s, then refused; a helper's audit)."""
    W, plan = planned
    A = plan.result.strategy
    saved = mmopt.load(mmopt.save(tmp_path / "p", plan.result, privacy=plan.privacy, workload=W), workload=W)
    B = saved.strategy
    assert saved.kind == "orbit" and isinstance(B, OrbitStrategy) and B.name == A.name
    assert B.combinations == A.combinations and B.n_rows == A.n_rows and B.shape == A.shape
    assert all(np.array_equal(o.labels, p.labels) and np.array_equal(o.sizes, p.sizes)
               for o, p in zip(A.orbits, B.orbits, strict=True))
    assert all((X is None and Y is None) or np.array_equal(X, Y) for X, Y in zip(A.blocks, B.blocks, strict=True))
    r, s = mmopt.evaluate(W, A, plan.privacy), mmopt.evaluate(W, B, plan.privacy)
    assert (s.total_squared_error, s.max_variance, s.sensitivity) == (r.total_squared_error, r.max_variance,
                                                                      r.sensitivity)
    x = np.arange(W.domain_size, dtype=float)
    pytest.importorskip("opendp")
    out = mmopt.release(W, B, x, plan.privacy)  # the loaded strategy serves a release at the same noise scale
    assert out.noise_scale == mmopt.release(W, A, x, plan.privacy).noise_scale


def _edit(tmp_path, plan, change):
    path = mmopt.save(tmp_path / "e", plan.result, privacy=plan.privacy, overwrite=True)
    meta, raw = read_raw(path)
    change(meta, raw)
    write_raw(path, meta, raw, rehash=True)
    return path


def _first_block(raw):
    return min(k for k in raw if k.startswith("block_"))


@pytest.mark.parametrize("change, message", [
    (lambda m, r: r.update(labels_0=r["labels_0"][::-1].copy()), "not orbits 0, 1"),
    (lambda m, r: r.update(labels_0=r["labels_0"] + 5), "not orbits 0, 1"),
    (lambda m, r: m["strategy"]["combinations"][0].__setitem__(0, 99), "combination"),
    (lambda m, r: m["strategy"]["measured"].pop(), "measured flags"),
    (lambda m, r: r.update({_first_block(r): -r[_first_block(r)] - np.eye(len(r[_first_block(r)]))}),
     "cannot be rebuilt"),
])
def test_edited_orbit_files_are_refused(planned, tmp_path, change, message):
    _, plan = planned
    with pytest.raises(ValueError, match=message):
        mmopt.load(_edit(tmp_path, plan, change))


def test_delta_is_recomputed_from_the_blocks_not_stored(planned, tmp_path):
    """Doubling a block (checksum recomputed) doubles the Δ₂² the strategy is charged at: nothing stored is trusted."""
    _, plan = planned
    A = plan.result.strategy
    k = next(c for c, X in enumerate(A.blocks) if X is not None)
    B = mmopt.load(_edit(tmp_path, plan, lambda m, r: r.update({f"block_{k}": 4.0 * r[f"block_{k}"]}))).strategy
    assert B.sensitivity_squared() > A.sensitivity_squared() * (1 + 1e-9)


def test_every_kind_is_listed_where_users_read_the_kinds():
    """SavedStrategy.kind's docstring listed 6 of the 11 kinds (a helper's audit)."""
    from mmopt.persist import SavedStrategy
    from mmopt.persist import _format as fmt
    doc = SavedStrategy.kind.__doc__
    assert all(f'"{k}"' in doc for k in fmt.KINDS)


def test_an_orbit_release_reads_as_every_release_and_its_strategy_is_checked_without_its_matrix(planned):
    """mmopt release of a saved sf1 plan (29,440 cells) failed after the draw: the report read out.reconstruction and
    out.path, which an OrbitRelease lacked, and the answer table's provenance check built the strategy's matrix,
    refused past 4,096 cells (the answers were kept in a fallback file). Measured on sf1 after the fix: 4,151
    answers, largest standard error 1.99973 for the planned 2."""
    pytest.importorskip("opendp")
    from mmopt.answers.variance import check_released_with
    W, plan = planned
    A = plan.result.strategy
    out = mmopt.release(W, A, np.arange(W.domain_size, dtype=float), plan.privacy)
    assert out.path == "release" and out.reconstruction is None

    class Large:  # stands in for an OrbitStrategy past 4,096 cells: its matrix is refused
        n_rows = A.n_rows

        def sensitivity(self, norm):
            return A.sensitivity(norm)

        @property
        def matrix(self):
            raise ValueError("too large to build")
    check_released_with(out, Large(), "answers_table")  # the count from n_rows, the matrix never built
