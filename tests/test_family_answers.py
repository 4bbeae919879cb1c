"""The closed-form families answered without W (mmopt.dense._family_answers), against W built from its definition."""

import numpy as np
import pytest

import mmopt
from mmopt import strategy as st
from mmopt import workload as wl
from mmopt.dense import _family_answers as fa
from mmopt.dense._gram_forms import BUILDERS


@pytest.mark.parametrize("family", fa.FAMILIES)
@pytest.mark.parametrize("n", [1, 2, 7, 12])
def test_fast_product_equals_w_x(family, n):
    rng = np.random.default_rng(n)
    X = rng.normal(size=(3, n)) * 10
    W = BUILDERS[family](n)
    # a sum of ≤ n terms in another order: within 2n·eps·Σ|x| of the row sum (cumulative sums, then a difference)
    bound = 2 * n * np.finfo(float).eps * np.abs(X).sum(axis=1, keepdims=True)
    assert np.all(np.abs(fa.apply(family, X) - X @ W.T) <= bound)
    # along another axis of a batch: the same numbers, moved
    assert np.array_equal(fa.apply(family, X.T, axis=0), fa.apply(family, X).T)


def test_unknown_family_is_refused():
    with pytest.raises(ValueError, match="apply: no fast product for workload family 'gram'"):
        fa.apply("gram", np.ones(3))


@pytest.mark.parametrize("family", ["prefix", "all_range"])
def test_mechanism_answers_families_without_forming_w(family, monkeypatch):
    """answers used to be None past m·n = 10⁷ (prefix(4096)); now they never need W, at any n."""
    W = getattr(wl, family)(64)
    x = np.arange(64) % 5 * 1.0
    monkeypatch.setattr(type(W), "explicit_matrix", lambda *a, **k: pytest.fail("W was formed"))
    out = mmopt.matrix_mechanism(W, st.hierarchical(64), x, mmopt.Privacy(1.0), rng=0, size=2)
    monkeypatch.undo()
    Wx = out.estimate @ W.explicit_matrix().T
    assert out.answers.shape == (2, W.n_queries)
    assert np.all(np.abs(out.answers - Wx) <= 2 * 64 * np.finfo(float).eps * np.abs(out.estimate).sum())


def test_all_predicate_answers_match_w_and_huge_families_warn():
    x = np.array([3.0, 0.0, 2.0, 5.0, 1.0])
    W = wl.all_predicate(5)
    out = mmopt.matrix_mechanism(W, st.identity(5), x, mmopt.Privacy(1.0), rng=1, size=2)
    assert np.allclose(out.answers, out.estimate @ W.explicit_matrix().T, rtol=1e-13)
    # 2⁴⁰ − 1 answers cannot be formed: the estimate is returned and the missing answers are said, not silent
    big = wl.all_predicate(40)
    with pytest.warns(UserWarning, match="more answers than the allocation limit; 'answers' will be None"):
        out = mmopt.matrix_mechanism(big, st.identity(40), np.ones(40), mmopt.Privacy(1.0), rng=1)
    assert out.answers is None and out.estimate.shape == (40,)


def test_identity_answers_do_not_alias_the_estimate():
    out = mmopt.matrix_mechanism(wl.identity(4), st.identity(4), [1.0, 2.0, 3.0, 4.0], mmopt.Privacy(1.0), rng=0)
    assert np.array_equal(out.answers, out.estimate) and not np.shares_memory(out.answers, out.estimate)


def test_all_range_sums_do_not_cancel_against_a_large_cell():
    """x = [10¹⁷, 1, 1, 1]: differences of one prefix sum gave every range after cell 0 as 0 (10¹⁷ + 1 = 10¹⁷);
    each range is now its own sum, as W x computes it."""
    x = np.array([1e17, 1.0, 1.0, 1.0])
    W = wl.all_range(4).explicit_matrix()
    assert np.array_equal(fa.apply("all_range", x), W @ x)
    stacked = np.stack([x, x[::-1]])  # along either axis, several draws at once
    assert np.array_equal(fa.apply("all_range", stacked), stacked @ W.T)
    assert np.array_equal(fa.apply("all_range", stacked.T, axis=0), W @ stacked.T)
