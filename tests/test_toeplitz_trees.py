"""mmopt.toeplitz.trees: H_b on prefix sums and all ranges, released and evaluated in O(n) — against the dense
matrix, against the interval-tree error of mmopt.dense._interval_trees (O(n) per node) at 5,000 cells, and against
Monte-Carlo draws of a release."""

import numpy as np
import pytest

import mmopt
from mmopt import toeplitz, workload
from mmopt.dense import _interval_trees as it
from mmopt.dense.exact_answers import RELATIVE_CHARGE
from mmopt.toeplitz import _tree_algebra as ta

# ragged trees (n not a power of b: leaves at two depths), a single cell, b past n, a complete tree
SHAPES = [(1, 8), (2, 2), (7, 2), (9, 8), (37, 4), (64, 4), (130, 16), (301, 8), (5, 100)]


def _all_ranges(n):
    i, j = np.triu_indices(n)
    cols = np.arange(n)
    return ((cols >= i[:, None]) & (cols <= j[:, None])).astype(float)


@pytest.mark.parametrize("n,b", SHAPES)
def test_the_tree_passes_match_dense_linear_algebra(n, b):
    B = toeplitz.tree(n, b).to_dense()
    T = ta.levels(n, b)
    M = B.T @ B
    rng = np.random.default_rng(n + b)
    r, y = rng.standard_normal(n), rng.standard_normal(B.shape[0])
    np.testing.assert_array_equal(T.depth, B.sum(axis=0))
    np.testing.assert_allclose(ta.solve(T, r), np.linalg.solve(M, r), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ta.node_sums(T, r), B @ r, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ta.transpose_apply(T, y), B.T @ y, rtol=1e-12, atol=1e-12)
    K = np.linalg.inv(M)
    P = np.tril(np.ones((n, n)))
    np.testing.assert_allclose(ta.unit_total(T, "prefix"), np.sum((P @ K) * P), rtol=1e-11)
    R = _all_ranges(n)
    np.testing.assert_allclose(ta.unit_total(T, "all_range"), np.sum((R @ K) * R), rtol=1e-11)
    np.testing.assert_allclose(ta.prefix_variances(T), np.einsum("ij,jk,ik->i", P, K, P), rtol=1e-10)


@pytest.mark.parametrize("n,b", [(9, 8), (37, 4), (301, 8), (64, 4)])
def test_it_is_the_interval_tree_h_b_with_exact_sensitivities(n, b):
    """The same rows as mmopt.dense._interval_trees' H_b (breadth-first, root first); Δ₁ and Δ₂ its largest column
    norms; B x and the least-squares estimate as the dense matrix gives them."""
    S = toeplitz.tree(n, b)
    A = S.to_dense()
    root = it.b_ary_tree(n, b)
    dense = it.matrix(root, n, caller="test")
    assert sorted(map(tuple, A)) == sorted(map(tuple, dense))  # the same nodes (leaves listed first here)
    assert A.shape == (S.n_rows, n)
    assert S.sensitivity("l1") == pytest.approx(np.abs(A).sum(axis=0).max(), rel=1e-15)
    assert S.sensitivity("l2") == pytest.approx(np.sqrt((A * A).sum(axis=0)).max(), rel=1e-15)
    x = np.random.default_rng(0).integers(0, 9, n).astype(float)
    np.testing.assert_allclose(S.apply(x), A @ x, rtol=1e-12)
    y = np.random.default_rng(1).standard_normal(A.shape[0])
    np.testing.assert_allclose(S.estimate(y), np.linalg.lstsq(A, y, rcond=None)[0], rtol=1e-9, atol=1e-10)


def test_the_total_equals_the_interval_tree_error_at_5000_cells():
    """mmopt.dense._interval_trees' exact error (one Sherman–Morrison step per node, G·u in O(n) each: O(n²/b)) is
    the oracle past the dense size; a ragged tree (5,000 is no power of 8 or 16) included."""
    n = 5000
    for b in (8, 16):
        S = toeplitz.tree(n, b)
        root = it.b_ary_tree(n, b)
        assert S.unit_total("prefix") == pytest.approx(it.unit_error(root, it.prefix_gram(n)), rel=1e-9)
        assert S.unit_total("all_range") == pytest.approx(it.unit_error(root, it.all_range_gram(n)), rel=1e-9)


@pytest.mark.parametrize("kind", ["prefix", "all_range"])
def test_evaluate_matches_the_dense_report(kind):
    n, b, eps = 150, 4, mmopt.Privacy(0.5)
    S = toeplitz.tree(n, b)
    dense = mmopt.evaluate(getattr(workload, kind)(n), S.to_strategy(), eps, per_query=True)
    r = toeplitz.evaluate(getattr(toeplitz, kind)(n), S, eps)
    assert r.total_squared_error == pytest.approx(dense.total_squared_error, rel=1e-10)
    assert r.sensitivity == S.sensitivity("l1") == 5.0 and r.norm == "l1"  # 150 cells: 4 levels of H₄ and leaves
    worst = float(np.max(dense.per_query_variance))
    # exact on both (all ranges: from the dense M up to 1,024 cells; past it the flagged bound, whose validity
    # tests/test_toeplitz_range_variance.py checks)
    assert r.max_variance_exact and r.max_variance == pytest.approx(worst, rel=1e-9)
    assert mmopt.evaluate(getattr(toeplitz, kind)(n), S, eps).total_squared_error == r.total_squared_error
    gauss = toeplitz.evaluate(getattr(toeplitz, kind)(n), S, mmopt.Privacy(1.0, 1e-6))
    dense_g = mmopt.evaluate(getattr(workload, kind)(n), S.to_strategy(), mmopt.Privacy(1.0, 1e-6))
    assert gauss.total_squared_error == pytest.approx(dense_g.total_squared_error, rel=1e-10)


# the plain tree's run is slow-marked (12 s): the weighted one covers the same release path and more (CI time)
@pytest.mark.parametrize("weights", [pytest.param(None, marks=pytest.mark.slow), (0.4, 1.7, 0.9, 1.0)])
def test_a_laplace_release_has_the_evaluated_error_by_monte_carlo(weights):
    """x̂ is unbiased and ‖W x̂ − W x‖² averages to evaluate's total: 250 releases of prefix(40) with H₄ at ε = 1
    (unit and uneven level weights) through OpenDP's sampler, compared within 4 standard errors of the sample mean
    (so a wrong scale, a wrong estimate or a missed node fails it)."""
    pytest.importorskip("opendp")
    n, eps = 40, mmopt.Privacy(1.0)
    W, S = toeplitz.prefix(n), toeplitz.TreeStrategy(n, 4, weights)
    x = np.random.default_rng(2).integers(0, 20, n).astype(float)
    truth = np.cumsum(x)
    errs, means = [], np.zeros(n)
    for _ in range(250):
        out = mmopt.release(W, S, x, eps)
        errs.append(float(np.sum((out.answers - truth) ** 2)))
        means += out.estimate / 250
    # Δ rounded up (10⁻⁷); with level weights the answers' rounding is charged too (RELATIVE_CHARGE, 9.5·10⁻⁷),
    # without them they are whole numbers, exact
    assert out.reconstruction.solver == "tree" and out.sensitivity == pytest.approx(S.sensitivity("l1"), rel=1.2e-6)
    charged = out.sensitivity >= S.sensitivity("l1") * (1 + RELATIVE_CHARGE)
    assert charged == (weights is not None)
    expected = toeplitz.evaluate(W, S, eps).total_squared_error
    se = np.std(errs) / np.sqrt(len(errs))
    assert abs(np.mean(errs) - expected) < 4 * se
    c = eps.variance_factor * S.sensitivity("l1") ** 2
    sd_mean = np.sqrt(np.diag(np.linalg.inv(S.to_dense().T @ S.to_dense())) * c / 250)
    assert np.all(np.abs(means - x) < 5 * sd_mean)


def test_standard_errors_of_ones_own_queries_match_the_dense_variance():
    n, S = 90, toeplitz.tree(90, 8)
    Q = np.random.default_rng(4).integers(-1, 2, (5, n)).astype(float)
    A = S.to_dense()
    dense = np.sqrt(np.einsum("ij,jk,ik->i", Q, np.linalg.inv(A.T @ A), Q))
    np.testing.assert_allclose(S.query_norms(Q), dense, rtol=1e-10)
    from mmopt.answers._stream_errors import stream_errors
    np.testing.assert_allclose(stream_errors(S, Q, 3.0, "test"), 3.0 * dense, rtol=1e-10)


def test_past_the_dense_limit_release_and_evaluate_take_it():
    """prefix sums of 20,000 cells: release and evaluate took no ε-DP strategy better than the Toeplitz square root
    here; the tree is released in O(n), its answers the prefix sums of its estimate."""
    pytest.importorskip("opendp")
    n = 20_000
    W, S = toeplitz.prefix(n), toeplitz.tree(n, 16)
    x = np.random.default_rng(5).integers(0, 9, n).astype(float)
    out = mmopt.release(W, S, x, mmopt.Privacy(1.0))
    np.testing.assert_allclose(out.answers, np.cumsum(out.estimate), rtol=1e-12)
    assert out.measurements.shape == (S.n_rows,)
    tree_total = mmopt.evaluate(W, S, mmopt.Privacy(1.0)).total_squared_error
    root = mmopt.evaluate(W, toeplitz.equalized(toeplitz.sqrt_strategy(n)), mmopt.Privacy(1.0)).total_squared_error
    assert tree_total * 50 < root


def test_saved_and_loaded_by_its_branching():
    import mmopt.persist as persist
    S = toeplitz.tree(1000, 16)
    path = persist.save(pytest.importorskip("pathlib").Path(__import__("tempfile").mkdtemp()) / "h", S)
    assert persist.load(path).strategy == S


def test_bad_arguments_are_refused_by_name():
    with pytest.raises(ValueError, match="'n' parameter of TreeStrategy"):
        toeplitz.tree(0)
    with pytest.raises(ValueError, match="'branching' parameter of TreeStrategy"):
        toeplitz.tree(10, 1)
    with pytest.raises(TypeError, match="'n' parameter of TreeStrategy must be an integer"):
        toeplitz.tree(10.0)
    with pytest.raises(ValueError, match="norm"):
        toeplitz.tree(10).sensitivity("linf")
    with pytest.raises(ValueError, match="domain"):
        toeplitz.evaluate(toeplitz.prefix(11), toeplitz.tree(10))


def test_its_own_methods_check_their_inputs():
    """A helper's probe: apply and estimate took vectors of other lengths (a bare IndexError, or a silently dropped
    entry), unit_total('PREFIX') gave the all-range total, query_norms took 1-D or mis-sized queries, and an answer
    from a bare x̂ of another length crashed inside the tree's passes."""
    S = toeplitz.tree(10, 3)
    for bad in (np.ones(9), np.ones(11)):
        with pytest.raises(ValueError, match="'x' parameter of TreeStrategy.apply must have length 10"):
            S.apply(bad)
    with pytest.raises(ValueError, match=r"'y' parameter of TreeStrategy.estimate must have length 15"):
        S.estimate(np.r_[np.ones(15), 1e6])
    with pytest.raises(ValueError, match="'kind' parameter of TreeStrategy.unit_total"):
        S.unit_total("PREFIX")
    with pytest.raises(ValueError, match="TreeStrategy.query_norms"):
        S.query_norms(np.ones((1, 11)))
    with pytest.raises(ValueError, match="2-D"):
        S.query_norms(np.ones(10))
    from mmopt.answers._stream_errors import stream_errors
    for strategy in (S, toeplitz.sqrt_strategy(10)):
        with pytest.raises(ValueError, match="the queries"):
            stream_errors(strategy, np.ones((1, 9)), 1.0, "answer")
    assert toeplitz.tree(5, 100) == toeplitz.tree(5, 5) and toeplitz.tree(5, 100).name == "H5"


@pytest.mark.parametrize("n,b", [(7, 2), (37, 4), (130, 16), (150, 4)])
def test_level_weights_match_the_dense_weighted_tree(n, b):
    """Each level's rows scaled by its weight (leaves at two depths included): the passes, the sensitivities, the
    estimate, evaluate's total and largest variance, and the query norms against the dense matrix."""
    levels = len(toeplitz.tree(n, b).tree.levels)
    w = np.random.default_rng(n).uniform(0.3, 2.0, levels)
    S = toeplitz.TreeStrategy(n, b, tuple(w))
    A = S.to_dense()
    assert S.name == f"H{b}w" and A.shape == (S.n_rows, n)
    assert S.sensitivity("l1") == pytest.approx(np.abs(A).sum(axis=0).max(), rel=1e-14)
    assert S.sensitivity("l2") == pytest.approx(np.sqrt((A * A).sum(axis=0)).max(), rel=1e-14)
    K = np.linalg.inv(A.T @ A)
    y = np.random.default_rng(1).standard_normal(A.shape[0])
    np.testing.assert_allclose(S.estimate(y), K @ A.T @ y, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(S.apply(np.arange(n, dtype=float)), A @ np.arange(n), rtol=1e-12)
    P, R = np.tril(np.ones((n, n))), _all_ranges(n)
    assert S.unit_total("prefix") == pytest.approx(np.sum((P @ K) * P), rel=1e-11)
    assert S.unit_total("all_range") == pytest.approx(np.sum((R @ K) * R), rel=1e-11)
    r = toeplitz.evaluate(toeplitz.prefix(n), S, mmopt.Privacy(1.0))
    assert r.max_variance == pytest.approx(2 * S.sensitivity() ** 2 * np.max(np.einsum("ij,jk,ik->i", P, K, P)),
                                           rel=1e-10)
    Q = np.random.default_rng(2).integers(-1, 2, (3, n)).astype(float)
    np.testing.assert_allclose(S.query_norms(Q), np.sqrt(np.einsum("ij,jk,ik->i", Q, K, Q)), rtol=1e-10)


def test_the_weight_search_lowers_the_exact_error_and_saves():
    """L-BFGS-B on the exact error: below the unit-weight tree on both workloads (all ranges: the root's weight
    goes to its bound, it barely informs a range); the weighted tree is saved and loaded with its weights, and bad
    weights are refused."""
    import tempfile
    from pathlib import Path

    import mmopt.persist as persist
    from mmopt.toeplitz.trees import weighted
    for kind, most in (("prefix", 0.95), ("all_range", 0.8)):
        S, objective, converged, calls = weighted(3000, 8, kind)
        unit = toeplitz.tree(3000, 8)
        assert converged and objective < most * unit.sensitivity() ** 2 * unit.unit_total(kind)
        # never below the certified (L2, diagonal) bound, which holds under Laplace noise too
        assert objective >= toeplitz.lower_bound(getattr(toeplitz, kind)(3000)).value
        assert objective == pytest.approx(S.sensitivity() ** 2 * S.unit_total(kind), rel=1e-12)
    assert S.level_weights[0] == pytest.approx(0.01)  # all ranges: the root, at the search's bound
    path = persist.save(Path(tempfile.mkdtemp()) / "w", S)
    assert persist.load(path).strategy == S
    with pytest.raises(ValueError, match="'level_weights' parameter of TreeStrategy must have length"):
        toeplitz.TreeStrategy(3000, 8, (1.0, 1.0))
    with pytest.raises(ValueError, match="weights > 0"):
        toeplitz.TreeStrategy(10, 3, (1.0, -1.0, 1.0, 1.0))
    # a helper's probe: weights 10⁸ apart lost the total's digits (47.7 for 32.0 on 3 cells, then negative), and
    # 1e-200 raised ZeroDivisionError inside evaluate, and inside release after the noise was drawn
    for bad in ((1e4, 1e-4, 1e4), (1.0, 1.0, 1e-200)):
        with pytest.raises(ValueError, match="within a ratio of 1e\\+04"):
            toeplitz.TreeStrategy(3, 2, bad)
    edge = toeplitz.TreeStrategy(3, 2, (100.0, 0.01, 100.0))  # the largest ratio taken: exact to 1e-8
    A = edge.to_dense()
    P = np.tril(np.ones((3, 3)))
    assert edge.unit_total("prefix") == pytest.approx(np.sum((P @ np.linalg.inv(A.T @ A)) * P), rel=1e-8)


@pytest.mark.parametrize("lo,hi", [(-1, 1), (0, 7), (4, 2), (0.0, 2)])
def test_inverse_gram_columns_refuses_columns_outside_the_tree(lo, hi):
    """(-1, 1) returned columns 5 and 0 (a wrap-round where a slice gives none), (0, 7) a bare IndexError."""
    with pytest.raises((ValueError, TypeError), match="inverse_gram_columns"):
        toeplitz.tree(6, 2).inverse_gram_columns(lo, hi)
