"""Frozen objects hold read-only copies of their arrays (mmopt._base.readonly): an edit in place raises, and the
caller's array stays the caller's. A helper's probe edited a records measurement's strategy weights ×100: later
releases drew the same σ under the same privacy map with 100× the per-record change."""

from __future__ import annotations

import numpy as np
import pytest

import mmopt
from mmopt.hierarchy import Hierarchy, HierarchyStrategy, grouping_sets, rollup
from mmopt.structured import residual


def _refuses_edits(a: np.ndarray) -> None:
    assert not a.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        a[...] = 0


def test_residual_strategy_and_marginal_workload_weights():
    w = np.array([1.0, 2.0])
    A = residual.ResidualStrategy((3, 4), ((0,), (0, 1)), w)
    W = residual.MarginalWorkload((3, 4), ((0,), (1,)), w)
    w[:] = 100.0  # the caller's array is the caller's
    assert A.weights.tolist() == [1.0, 2.0] and W.weights.tolist() == [1.0, 2.0]
    _refuses_edits(A.weights)
    _refuses_edits(W.weights)
    _refuses_edits(residual.as_marginal_workload(mmopt.workload.marginals((3, 4), 1), caller="t").weights)
    from mmopt.structured.residual.marginals import WeightedMarginals
    theta = np.array([1.0, 2.0])
    M = WeightedMarginals((3, 4), ((0,), (0, 1)), theta)
    theta[1] = -5.0  # after the check: Δ₁ = Σθ was read from the caller's array
    assert M.sensitivity("l1") == 3.0
    _refuses_edits(M.weights)


def test_hierarchy_objects():
    geo = Hierarchy.from_parents([[0, 0, 1]], level_names=("nation", "state", "county"), name="geo")
    for a in (*geo.parents, *geo.groups, *geo.sizes):
        _refuses_edits(a)
    W = grouping_sets([geo], rollup("state", "county"))
    _refuses_edits(W.weights)
    res = mmopt.optimize(W, privacy=mmopt.Privacy(1.0, 1e-6))
    A = res.strategy
    if isinstance(A, HierarchyStrategy):
        _refuses_edits(A.weights)


def test_toeplitz_strategies():
    S = mmopt.toeplitz.sqrt_strategy(16)
    E = mmopt.toeplitz.equalized(S)
    _refuses_edits(S.coefficients)
    _refuses_edits(E.coefficients)
    _refuses_edits(E.row_scale)
    c = np.array([1.0, 0.5, 0.25])
    B = mmopt.toeplitz.banded(c, 16)
    c[1] = 9.0
    assert B.coefficients[1] == 0.5
    levels = mmopt.toeplitz.tree(16, 2).tree.levels
    _refuses_edits(levels[0].lo)


def test_unit_objective_sees_a_gram_changed_in_place():
    """The spectrum was cached by identity: G *= 4 between calls returned the old figure (8.0 for 32.0)."""
    from mmopt.dense.objective import unit_objective
    A = np.array([[1.0, 0.0], [0.0, 0.0]])  # rank-deficient: the objective reads G's spectrum
    G = np.diag([1.0, 0.0])
    first = unit_objective(A, G)
    G *= 4
    assert unit_objective(A, G) == pytest.approx(unit_objective(A, G.copy()))
    assert unit_objective(A, G) != pytest.approx(first)


def test_synth_model_marginal_is_read_only():
    import pandas as pd

    from mmopt.records import Attribute, Domain
    from mmopt.synth import aim
    D = Domain((Attribute("a", categories=(0, 1)), Attribute("b", categories=(0, 1, 2))))
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.integers(0, 2, 200), "b": rng.integers(0, 3, 200)})
    with pytest.warns(UserWarning, match="seeded"):
        s = aim(df, D, [(0, 1)], mmopt.Privacy(1.0, 1e-6), seed=0, estimator="residual")
    _refuses_edits(s.model.marginal((0,)))
    mine = s.marginal("a")
    mine[:] = 0.0  # Synthetic.marginal hands out a copy, free to change
    assert s.marginal("a").sum() > 0
