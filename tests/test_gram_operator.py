"""The Gram operators (mmopt.dense.gram_operator) against the dense Grams of mmopt.workload.

Notation: see README. The prefix and all-range Grams have small integer entries, so their dense forms must
match exactly; products G V by cumulative sums add n terms, so they agree with the dense product to a few
n·u relative to the largest entry of |G||V| (u = 2⁻⁵³), asserted with margin as 1e-12.
"""

import numpy as np
import pytest
import scipy.sparse

from mmopt import toeplitz
from mmopt import workload as wl
from mmopt.dense.gram_operator import (
    DenseGram,
    FactoredGram,
    GramOperator,
    SemiseparableGram,
    all_range_gram,
    as_gram_operator,
    prefix_gram,
)


@pytest.mark.parametrize("n", [1, 2, 7, 64])
@pytest.mark.parametrize(("make", "family"), [(prefix_gram, wl.prefix), (all_range_gram, wl.all_range)])
def test_semiseparable_matches_dense(n, make, family):
    op, G = make(n), family(n).gram
    assert np.array_equal(op.dense(), G)
    assert np.array_equal(op.diagonal(), np.diag(G))
    V = np.random.default_rng(n).standard_normal((n, 3))
    scale = np.abs(G) @ np.abs(V)
    assert np.max(np.abs(op.matmat(V) - G @ V) / scale) < 1e-12
    assert np.allclose(op.matmat(V[:, 0]), G @ V[:, 0], rtol=1e-12, atol=0)  # a vector in, a vector out
    half = op.scaled(0.5)
    assert np.allclose(half.matmat(V), 0.5 * (G @ V), rtol=1e-12, atol=1e-12 * scale.max())
    # rows in (V G, what the p-Identity search uses): the same sums along contiguous rows
    assert np.max(np.abs(half.rmatmat(V.T) - 0.5 * (V.T @ G)) / (0.5 * scale.T)) < 1e-12
    assert isinstance(op, GramOperator)


@pytest.mark.parametrize("sparse", [False, True])
def test_factored_gram(sparse):
    W = np.random.default_rng(0).integers(0, 2, size=(9, 6)).astype(float)
    op = FactoredGram(scipy.sparse.csr_matrix(W) if sparse else W, scale=2.0)
    V = np.random.default_rng(1).standard_normal((6, 2))
    assert np.allclose(op.matmat(V), 2.0 * W.T @ W @ V, rtol=1e-13, atol=1e-13)
    assert np.allclose(op.rmatmat(V.T), 2.0 * V.T @ W.T @ W, rtol=1e-13, atol=1e-13)
    assert np.array_equal(op.diagonal(), 2.0 * np.sum(W * W, axis=0))
    assert op.n == 6


def test_dense_gram():
    G = wl.all_range(5).gram
    op = DenseGram(G).scaled(3.0)
    assert np.array_equal(op.matmat(np.eye(5)), 3.0 * G) and np.array_equal(op.diagonal(), 3.0 * np.diag(G))
    assert np.array_equal(op.rmatmat(np.eye(5)), 3.0 * G)


def test_as_gram_operator_dispatch():
    assert isinstance(as_gram_operator(toeplitz.prefix(100_000)), SemiseparableGram)  # O(n), no n×n matrix
    assert as_gram_operator(toeplitz.all_range(50)).name == "all_range"
    assert as_gram_operator(wl.prefix(8)).name == "prefix"
    small = wl.Workload.from_matrix(np.tril(np.ones((4, 4))))
    assert isinstance(as_gram_operator(small), FactoredGram)
    assert isinstance(as_gram_operator(wl.Workload.from_gram(np.eye(3), n_queries=3)), DenseGram)
    assert isinstance(as_gram_operator(np.eye(3)), DenseGram)
    with pytest.raises(TypeError, match="'workload' parameter of as_gram_operator"):
        as_gram_operator("prefix")
    with pytest.raises(ValueError):
        as_gram_operator(np.array([[1.0, 2.0], [0.0, 1.0]]))  # not symmetric


@pytest.mark.parametrize(("a", "b", "shortcut"), [
    (np.ones(9), np.arange(9.0, 0.0, -1.0), True),           # prefix sums: two running sums
    (np.ones(9), np.arange(9.0, 0.0, -1.0) + 0.5, False),    # a ≡ 1 but not the prefix Gram
    (np.arange(1.0, 10.0), np.arange(9.0, 0.0, -1.0), False),  # all ranges
])
def test_rmatmat_takes_the_prefix_shortcut_only_for_prefix_sums(a, b, shortcut):
    op = SemiseparableGram(a, b, scale=0.25)
    assert op._is_prefix is shortcut
    V = np.random.default_rng(2).standard_normal((4, 9))
    G = op.dense()
    assert np.max(np.abs(op.rmatmat(V) - V @ G)) <= 1e-13 * np.max(np.abs(V) @ np.abs(G))
