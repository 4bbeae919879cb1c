"""Workloads: closed-form Grams equal WᵀW of the explicit matrices; products, stacks, marginals."""

import itertools
import warnings

import numpy as np
import pytest

from mmopt import workload as wl

FAMILIES = [wl.identity, wl.total, wl.prefix, wl.all_range, wl.all_predicate]


@pytest.mark.parametrize("make", FAMILIES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_closed_form_gram_equals_dense(make, n):
    W = make(n)
    M = W.explicit_matrix()
    assert M.shape == (W.n_queries, n)
    np.testing.assert_allclose(W.gram, M.T @ M, rtol=1e-12, atol=1e-12)


def test_counts_and_paper_formulas():
    n = 6
    assert wl.all_range(n).n_queries == n * (n + 1) // 2
    assert wl.all_predicate(n).n_queries == 2**n - 1
    i = np.arange(1, n + 1)
    G = wl.all_range(n).gram
    assert G[1, 3] == min(2, 4) * (n - max(2, 4) + 1)
    np.testing.assert_allclose(wl.all_predicate(n).gram, 2 ** (n - 2) * (np.eye(n) + 1))
    assert np.max(G.diagonal()) == np.max(i * (n - i + 1))  # Δ(W_R)... column norms squared = diag


def test_all_predicate_large_n_stays_finite():
    W = wl.all_predicate(4096)
    assert np.all(np.isfinite(W.mean_gram))
    np.testing.assert_allclose(W.mean_gram[:2, :2], [[0.5, 0.25], [0.25, 0.5]])
    assert W.n_queries == 2**4096 - 1
    with pytest.raises(OverflowError, match="mean_gram"):
        _ = W.gram
    with pytest.raises(ValueError, match="entries"):
        W.explicit_matrix()


def test_random_range_reproducible():
    a, b = wl.random_range(10, 30, seed=3), wl.random_range(10, 30, seed=3)
    np.testing.assert_array_equal(a.matrix, b.matrix)
    assert not np.array_equal(a.matrix, wl.random_range(10, 30, seed=4).matrix)
    rows = a.matrix
    # each row is one contiguous interval of ones
    assert all(np.all(np.diff(np.flatnonzero(r)) == 1) for r in rows)


def test_kron_and_stack():
    A, B = wl.prefix(3), wl.identity(2)
    K = wl.kron(A, B)
    np.testing.assert_allclose(K.gram, np.kron(A.gram, B.gram))
    np.testing.assert_allclose(K.explicit_matrix().T @ K.explicit_matrix(), K.gram)
    S = wl.stack([wl.prefix(4), wl.total(4)], weights=[1.0, 3.0])
    assert S.n_queries == 5
    np.testing.assert_allclose(S.gram, wl.prefix(4).gram + 9 * wl.total(4).gram)
    np.testing.assert_allclose(S.matrix.T @ S.matrix, S.gram)
    # a 2^n-sized part mixes correctly with a small one
    big = wl.stack([wl.all_predicate(60), wl.total(60)])
    np.testing.assert_allclose(big.mean_gram, wl.all_predicate(60).mean_gram * (2**60 - 1) / 2**60
                               + wl.total(60).mean_gram / 2**60, rtol=1e-12)


@pytest.mark.parametrize("shape,k", [((2, 3), 1), ((2, 3, 2), 2), ((3, 2), 0), ((2, 2, 2), 3)])
def test_marginals_match_brute_force(shape, k):
    W = wl.marginals(shape, k)
    n = int(np.prod(shape))
    cells = list(itertools.product(*[range(d) for d in shape]))
    rows = []
    for S in itertools.combinations(range(len(shape)), k):
        for value in itertools.product(*[range(shape[i]) for i in S]):
            rows.append([float(all(c[i] == val for i, val in zip(S, value, strict=True))) for c in cells])
    dense = np.array(rows).reshape(-1, n)
    assert W.n_queries == dense.shape[0]
    np.testing.assert_allclose(W.gram, dense.T @ dense)


def test_from_gram_keeps_no_matrix():
    W = wl.Workload.from_gram(np.eye(3), n_queries=3, name="census")
    with pytest.raises(ValueError, match="Gram matrix only"):
        W.explicit_matrix()
    assert "census" in repr(W)


def test_workload_arrays_are_copied_and_frozen():
    M = np.array([[1.0, 0.0], [1.0, 1.0]])
    W = wl.Workload.from_matrix(M)
    M[0, 0] = 9.0  # changing the caller's W must not desynchronise W and G/m
    np.testing.assert_array_equal(W.matrix, [[1.0, 0.0], [1.0, 1.0]])
    for w in (W, wl.all_range(4), wl.kron(wl.prefix(2), wl.identity(2)), wl.marginals((2, 3), 1)):
        assert not w.mean_gram.flags.writeable
        assert w.matrix is None or not w.matrix.flags.writeable


@pytest.mark.parametrize("make", FAMILIES, ids=lambda f: f.__name__)
def test_direct_construction_accepts_exactly_the_family_formula(make):
    W = make(5)
    same = wl.Workload(np.array(W.mean_gram), W.n_queries, "copy", None, W.family)
    np.testing.assert_array_equal(same.mean_gram, W.mean_gram)
    other = wl.prefix(5) if W.family != "prefix" else wl.identity(5)
    with pytest.raises(ValueError, match="parameter of Workload"):
        wl.Workload(np.array(other.mean_gram), W.n_queries, "wrong", None, W.family)


@pytest.mark.parametrize("shape,k", [((2, 2, 2, 2), 2), ((3, 1, 2), 1), ((2,) * 6, 3)])
def test_marginals_formula_equals_sum_of_kron_parts(shape, k):
    """G = Σ_S ⊗(I or J) summed explicitly (the old construction), against the C(a, k) formula."""
    W = wl.marginals(shape, k)
    G = 0
    for S in itertools.combinations(range(len(shape)), k):
        part = np.ones((1, 1))
        for i, d in enumerate(shape):
            part = np.kron(part, np.eye(d) if i in S else np.ones((d, d)))
        G = G + part
    np.testing.assert_allclose(W.gram, G, rtol=1e-12)
    np.testing.assert_allclose(W.matrix.T @ W.matrix, G, rtol=1e-12)


def test_stack_given_its_parts_one_by_one_says_it_takes_one_list():
    """kron takes its factors one by one, stack a list: stack(W1, W2) put W2 in 'weights' and was refused as
    'must be a non-empty list of Workload objects', with no hint of the order."""
    for parts in [(wl.prefix(8), wl.prefix(8)), (wl.kron(wl.prefix(100), wl.total(100)),) * 2]:
        with pytest.raises(TypeError, match=r"Got one \w+ \(the second went to 'weights'\)\. Pass them as one list: "
                                            r"stack\(\[W1, W2, \.\.\.\]\)"):
            wl.stack(*parts)
    assert wl.stack([wl.prefix(8), wl.prefix(8)]).n_queries == 16


def test_stack_names_itself_when_a_weight_is_refused():
    """The refusal named 'union', a function the user never called."""
    with pytest.raises(ValueError, match="'weights' parameter of stack"):
        wl.stack([wl.kron(wl.prefix(2), wl.identity(2)), wl.kron(wl.identity(2), wl.total(2))], [1.0, 0.0])
    for parts in ([wl.prefix(4), wl.identity(4)], [wl.kron(wl.prefix(2), wl.identity(2)),
                                                   wl.kron(wl.identity(2), wl.total(2))]):  # dense and implicit alike
        for weights in ([True, True], [True, 1.0]):  # a bool array, and a bool among numbers
            with pytest.raises(TypeError, match="'weights' parameter of stack"):
                wl.stack(parts, weights=weights)


def test_structure_of_a_residual_marginal_workload_is_its_implicit_twin():
    # it returned None: callers that look for a product structure treated the marginals as unstructured
    from mmopt.structured.residual.workload import marginal_workload
    W = marginal_workload((3, 4, 5), [(0, 1), (2,)], weights=[1.0, 2.0])
    twin = wl.structure_of(W)
    assert isinstance(twin, wl.ImplicitWorkload) and twin.n_queries == 3 * 4 + 5
    rows = []
    for attrs, w in ((0, 1), 1.0), ((2,), 2.0):  # the same marginals, built by hand
        parts = [np.eye(n) if i in attrs else np.ones((1, n)) for i, n in enumerate((3, 4, 5))]
        rows.append(w * np.kron(np.kron(parts[0], parts[1]), parts[2]))
    M = np.vstack(rows)
    np.testing.assert_allclose(twin.gram, M.T @ M, rtol=1e-12)


def test_stream_sized_workloads_have_the_dense_attributes():
    # past 10,000 cells prefix/all_range are stream workloads, which had no .gram/.mean_gram/.explicit_matrix
    # (AttributeError at 10,001, an array at 10,000); the dense twin answers, or refuses by size
    from mmopt import toeplitz
    small = toeplitz.prefix(6)
    assert np.array_equal(small.gram, wl.prefix(6).gram)
    assert np.array_equal(small.explicit_matrix(), wl.prefix(6).explicit_matrix())
    with pytest.raises(ValueError, match="more than the limit"):
        wl.all_range(10**6).explicit_matrix()


def test_products_past_the_dense_limit_have_the_dense_attributes():
    # kron/stack/marginals return a dense Workload up to 4,096 cells and an ImplicitWorkload beyond, whose gram was
    # a method: W.gram was an array at 64×64 and a bound method at 64×65, W.mean_gram and W.explicit_matrix missing
    from mmopt import strategy as st
    small, large = wl.kron(wl.prefix(64), wl.prefix(64)), wl.kron(wl.prefix(64), wl.prefix(65))
    assert isinstance(small, wl.Workload) and isinstance(large, wl.ImplicitWorkload)
    P1, P2 = np.tril(np.ones((64, 64))), np.tril(np.ones((65, 65)))
    W = np.kron(P1, P2)  # the oracle, built by hand: 4,160 × 4,160
    np.testing.assert_array_equal(large.explicit_matrix(), W)
    # WᵀW by the mixed-product rule (A ⊗ B)ᵀ(A ⊗ B) = AᵀA ⊗ BᵀB (4,160³ multiply-adds took 15 s of the default run)
    G = np.kron(P1.T @ P1, P2.T @ P2)
    for got in (large.gram, large.mean_gram * large.n_queries):
        np.testing.assert_allclose(got, G, rtol=1e-13)
    np.testing.assert_allclose(small.gram, np.kron(P1.T @ P1, P1.T @ P1), rtol=1e-13)
    A = st.kron(np.eye(64), np.eye(65))
    np.testing.assert_array_equal(A.gram, np.eye(64 * 65))  # the implicit strategy's too (Strategy.gram: a property)
    with pytest.raises(ValueError, match="ImplicitWorkload.gram: .* more than the limit"):
        _ = wl.kron(wl.prefix(2**10), wl.prefix(2**10)).gram  # refused by size, before allocating


def test_a_product_too_large_to_list_says_why_w_is_unknown():
    W = wl.kron(wl.all_range(64), wl.all_range(64))  # m·n = 1.8·10¹⁰: kept as its Gram
    with pytest.raises(ValueError, match="entries exceed .* mmopt.evaluate and mmopt.optimize read the Gram"):
        W.explicit_matrix()


def test_a_negative_weight_is_taken_by_every_dense_stack_as_its_square():
    # only w² enters G: stack([prefix(4), identity(4)], [-2, 1]) was taken, but with Kronecker parts (whose
    # implicit twin takes w > 0 only) the same call was refused (an auditor's probe)
    import mmopt
    parts = [wl.kron(wl.prefix(8), wl.total(8)), wl.kron(wl.total(8), wl.prefix(8))]
    signed, plain = wl.stack(parts, weights=[-2.0, 1.0]), wl.stack(parts, weights=[2.0, 1.0])
    np.testing.assert_array_equal(signed.gram, plain.gram)
    eye = mmopt.strategy.identity(64)
    assert mmopt.evaluate(signed, eye, mmopt.Privacy(1.0)).total_squared_error == pytest.approx(
        mmopt.evaluate(plain, eye, mmopt.Privacy(1.0)).total_squared_error, rel=1e-12)
    assert wl.stack([wl.prefix(4), wl.identity(4)], weights=[-2.0, 1.0]).n_queries == 8
    # past 4,096 cells the implicit union takes w > 0 only: said so, with |w| as the remedy ("must be a float in
    # the range (0, inf)" did not say that the same call passed at 12 cells; an auditor's probe)
    big = [wl.kron(wl.prefix(64), wl.total(65)), wl.kron(wl.identity(64), wl.identity(65))]
    with pytest.raises(ValueError, match=r"must be > 0 for an implicit workload \(past 4,096 cells\).*pass \|w\|"):
        wl.stack(big, weights=[-2.0, 1.0])
    assert wl.stack(big, weights=[2.0, 1.0]).n_queries == 64 + 64 * 65


def test_a_stream_workload_in_kron_or_stack_is_named_with_the_dense_constructor():
    """mmopt.toeplitz.prefix(4) in kron was told to "coarsen below 10,001 values" (it has 4), and in stack that the
    list must hold "Workload objects"; both now name mmopt.workload.prefix(4). A Toeplitz strategy in
    strategy.kron was "not a 2-D array"; it is told to pass .to_strategy() (an auditor's probe)."""
    from mmopt import strategy as st
    from mmopt import toeplitz
    with pytest.raises(TypeError, match=r"factor 0 \('prefix\(4\)'\) is a stream workload.*Pass "
                                        r"mmopt\.workload\.prefix\(4\)"):
        wl.kron(toeplitz.prefix(4), wl.prefix(3))
    with pytest.raises(TypeError, match=r"holds a stream workload.*Pass mmopt\.workload\.all_range\(5\)"):
        wl.stack([toeplitz.all_range(5), wl.identity(5)])
    with pytest.raises(TypeError, match=r"factor 0 is a ToeplitzStrategy\. Pass its dense form, "
                                        r"factors\[0\]\.to_strategy\(\)"):
        st.kron(toeplitz.sqrt_strategy(4), st.identity(4))
    assert st.kron(toeplitz.sqrt_strategy(4).to_strategy(), st.identity(4)).shape == (4, 4)


def test_a_marginal_listed_twice_is_said():
    """wl.marginals(attributes=[(0,), (0,)]) doubled the marginal's weight without a word, where
    release_marginals refuses it as a slip: a UserWarning names both spellings and the weighted stack; the workload
    is the one asked (its rows twice)."""
    with pytest.warns(UserWarning, match=r"the marginal \(0, 2\) is listed twice \(also as \(2, 0\)\).*stack"):
        W = wl.marginals((2, 3, 2), attributes=[(0, 2), (1,), (2, 0)])
    assert W.n_queries == 4 + 3 + 4
    np.testing.assert_allclose(W.gram, wl.stack([wl.marginals((2, 3, 2), attributes=[(0, 2), (1,)]),
                                                       wl.marginals((2, 3, 2), attributes=[(0, 2)])]).gram)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        wl.marginals((2, 3, 2), attributes=[(0, 2), (1,)])  # once each: nothing said


def test_marginals_listed_as_arrays_sets_or_a_generator_are_taken_and_a_repeat_said():
    """The repeat check read each listed marginal with int() unless a tuple or list: rows of an array, sets and
    ranges (which the marginals themselves take) raised a bare TypeError; a generator was read up before the check."""
    expected = wl.marginals((2, 3, 2), attributes=[(0, 2), (1,)]).gram
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no repeat: nothing said
        assert wl.marginals((2, 3, 2), attributes=np.array([(0, 2), (2, 1)])).n_queries == 4 + 6
        np.testing.assert_allclose(wl.marginals((2, 3, 2), attributes=[{2, 0}, range(1, 2)]).gram, expected)
    for given in (np.array([(0, 2), (2, 0)]), [frozenset({0, 2}), (2, 0)], (S for S in [(0, 2), (2, 0)])):
        with pytest.warns(UserWarning, match=r"the marginal \(0, 2\) is listed twice \(also as \(2, 0\)\)"):
            assert wl.marginals((2, 3, 2), attributes=given).n_queries == 8
    with pytest.warns(UserWarning, match="listed twice") as record:
        wl.marginals((2, 3), attributes=[(0,), (0,)])
    assert record[0].filename == __file__  # said at the caller's line, not inside mmopt
