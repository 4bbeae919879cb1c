"""Implicit workloads: counts from WORKLOADS_MULTIDIM.md, dense agreement, validation and size refusals."""

import numpy as np
import pytest

from mmopt import workload as wl
from mmopt.structured import census
from mmopt.structured import workloads as sw


@pytest.mark.parametrize("build,shape,m", [
    (census.sf1_persons, (2, 2, 64, 17, 115), 4151),
    (census.sf1, (2, 2, 64, 115), 4151),
    (census.sf1_plus, (2, 2, 64, 115, 51), 215_852),
    (census.adult_w1, (75, 16, 5, 2, 20), 76 * 17 * 6 * 3 * 21),
    (census.adult_w2, (75, 16, 5, 2, 20), 75 * 16 + 75 * 5 + 75 * 2 + 75 * 20 + 16 * 5 + 16 * 2 + 16 * 20
     + 5 * 2 + 5 * 20 + 2 * 20),
    (census.cps_w1, (50, 100, 7, 4, 2), 51 * 101 * 8 * 5 * 3),
    (census.cps_w2, (50, 100, 7, 4, 2), 600_000),
])
def test_census_counts(build, shape, m):
    W = build()
    assert W.shape == shape and W.domain_size == int(np.prod(shape))
    assert W.n_queries == m and isinstance(W.n_queries, int)


def test_sf1_domain_sizes_and_terms():
    assert census.sf1_persons().domain_size == 500_480
    assert census.sf1_plus().domain_size == 1_501_440
    assert len(census.sf1().terms) == 33  # the 12 tables' product terms, repeats kept


def test_race_and_age_predicates():
    r1, r2 = census.race1().matrix, census.race2().matrix
    np.testing.assert_array_equal(r1.sum(axis=0), np.ones(64))  # a partition of the 64 race cells
    assert r1.shape == (7, 64) and r2.shape == (70, 64)
    np.testing.assert_array_equal(r2[69], r2[64:69].sum(axis=0))  # two or more = Σ_{k≥2} exactly k
    np.testing.assert_array_equal(r2[63:69].sum(axis=0), np.r_[0, np.ones(63)])  # r = 0 has no race
    blocks = census._sf1_blocks()
    np.testing.assert_array_equal(blocks["age1"].matrix.sum(axis=0), np.ones(115))
    assert blocks["age3"].matrix.shape == (103, 115) and blocks["adult"].matrix.sum() == 97


def test_dense_matches_np_kron(rng):
    A, B = rng.integers(0, 2, (3, 4)).astype(float), rng.integers(0, 2, (2, 3)).astype(float)
    A[0, 0] = B[0, 0] = 1
    W = sw.union([sw.kron(A, B), sw.kron(sw.identity_total(4), sw.prefix(3), weight=2.0)], weights=[1.0, 0.5])
    IT = np.vstack([np.eye(4), np.ones((1, 4))])
    D = np.vstack([np.kron(A, B), np.kron(IT, np.tril(np.ones((3, 3))))])
    np.testing.assert_array_equal(W.dense(), D)
    np.testing.assert_allclose(W.gram, D.T @ D, rtol=1e-14)
    assert W.n_queries == D.shape[0] == 6 + 15


def test_marginals_match_dense_workload():
    W = sw.marginals((2, 3, 4), 2)
    ref = wl.marginals((2, 3, 4), 2)
    assert W.n_queries == ref.n_queries
    np.testing.assert_allclose(W.gram, ref.gram, rtol=1e-14)
    W2 = sw.marginals((2, 3, 4), attributes=[(0, 2), (1,), ()])
    assert W2.n_queries == 8 + 3 + 1
    assert sw.lower_marginals((3, 3, 3), 2).n_queries == 1 + 9 + 27


def test_validation_messages():
    with pytest.raises(ValueError, match="different domains"):
        sw.union([sw.kron(sw.prefix(3), sw.prefix(4)), sw.kron(sw.prefix(4), sw.prefix(3))])
    with pytest.raises(ValueError, match="'weight' parameter of kron"):
        sw.kron(sw.prefix(3), weight=-1.0)
    with pytest.raises(ValueError, match="'weights' parameter of union"):
        sw.union([sw.kron(sw.prefix(3))], weights=[0.0])
    with pytest.raises(ValueError, match="exactly one of 'k'"):
        sw.marginals((2, 3))
    with pytest.raises(ValueError, match="repeats"):
        sw.marginals((2, 3), attributes=[(0, 0)])
    with pytest.raises(TypeError, match="union"):
        sw.union([sw.prefix(3)])
    with pytest.raises(TypeError, match="'factors' parameter of Product"):
        sw.Product((np.eye(3),))
    with pytest.raises(ValueError, match="'weight' parameter of Product"):
        sw.Product((sw.prefix(3),), -2.0)


def test_dense_requests_refused_with_size():
    W = census.prefix_3d(256)
    with pytest.raises(ValueError, match=r"281,474,976,710,656 entries \(2.25e\+03 TB"):
        _ = W.gram
    with pytest.raises(ValueError, match="entries"):
        census.sf1_persons().dense()
    huge = sw.lower_marginals((10,) * 13, 1)  # 10¹³ cells
    with pytest.raises(ValueError, match="data vector"):
        from mmopt.structured.mechanism import answer
        answer(huge, np.zeros(3))


def test_marginal_terms_share_their_factors():
    """One identity(n) and one total(n) per size for the whole union: each holds an n×n Gram, so 2-way marginals on
    (10⁴,)⁵ would otherwise need 50 of them (40 GB) before anything is evaluated."""
    from mmopt import structured as s

    W = s.marginals((5, 7, 5, 7), 2)
    distinct = {id(f) for t in W.terms for f in t.factors}
    assert len(distinct) == 4  # I₅, 1ᵀ₅, I₇, 1ᵀ₇
    assert W.to_workload().mean_gram.shape == (1225, 1225)  # and they still mean what they meant
    assert W.n_queries == sum(a * b for a, b in [(5, 7), (5, 5), (5, 7), (7, 5), (7, 7), (5, 7)])


def test_a_weighted_union_says_its_weights_in_its_name():
    # two unions of the same parts with other weights (errors 3,998 and 11,708 under the identity) had one name
    a, b = sw.kron(np.tril(np.ones((4, 4))), np.eye(8)), sw.kron(np.eye(4), np.tril(np.ones((8, 8))))
    assert sw.union([a, b]).name != sw.union([a, b], weights=[1.0, 2.0]).name
    assert sw.union([a, b], weights=[1.0, 2.0]).name.endswith("+2*" + b.name)


@pytest.mark.parametrize("builder", ["sf1", "sf1_persons", "sf1_plus"])
def test_census_weights_refusals_name_the_builder_called(builder):
    # sf1_persons and sf1_plus were named "sf1" (a helper's probe)
    with pytest.raises(ValueError, match=f"'weights' parameter of {builder} must be"):
        getattr(census, builder)({"P1": -1})
