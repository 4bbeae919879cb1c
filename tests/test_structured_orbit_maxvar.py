"""The max-variance search in the commutant of a union's cell symmetries (mmopt.structured.orbits, orbit_maxvar,
orbit_strategy): orbits against their definition, block variances against the dense Gram, the optimum against a
dense SDP, the bound at any weights below it, and sf1 through optimize and plan."""

import numpy as np
import pytest

import mmopt
from mmopt import workload as wl
from mmopt.dense._workload_core import Workload
from mmopt.search.max_variance import _variances, solve_max_variance
from mmopt.structured import orbit_maxvar as om
from mmopt.structured import workloads as sw
from mmopt.structured.census import race1, race2, sf1_term_tables
from mmopt.structured.orbit_strategy import OrbitStrategy
from mmopt.structured.orbits import attribute_orbits


def _intervals(n, cuts):
    cells = np.arange(n)
    return np.array([(cells >= a) & (cells < b) for a, b in zip(cuts[:-1], cuts[1:], strict=True)], dtype=float)


def _small_census(age=8):
    """An sf1-like union on (2, 2, 4, age): totals, identities, a one-cell predicate, race-like and age-like
    blocks with intervals of equal and unequal sizes; term weights differ."""
    age1 = Workload.from_matrix(_intervals(age, (0, 2, 3, 4, age)), name="age1")
    age3 = Workload.from_matrix(np.vstack([np.eye(age)[:4], _intervals(age, (4, 6, age))]), name="age3")
    race = Workload.from_matrix(np.vstack([np.eye(4)[1:], [[0, 0, 1, 1]]]), name="race")
    hisp = Workload.from_matrix(np.array([[1.0, 0.0]]), name="hisp")
    T2, I2, IT2 = sw.total(2), sw.identity(2), sw.identity_total(2)
    terms = (sw.Product((T2, T2, sw.total(4), sw.total(age))), sw.Product((T2, I2, race, sw.total(age))),
             sw.Product((I2, T2, sw.total(4), age1), 2.0), sw.Product((IT2, hisp, race, age3)),
             sw.Product((I2, IT2, sw.total(4), age3), 0.5))
    return sw.ImplicitWorkload(terms, "small census")


def _per_query(W, per_term):
    return np.concatenate([np.full(t.n_queries, float(x)) for t, x in zip(W.terms, per_term, strict=True)])


def test_race_orbits_are_the_popcount_classes_that_sf1_tables_do_not_split():
    # race1 names the six one-flag cells and "white" names cell 1; race2 counts cells by popcount: so the twins
    # are: {0}, {1}, the other one-flag cells, then one orbit per popcount 2..6
    o = attribute_orbits([race1().explicit_matrix(), race2().explicit_matrix(), np.eye(64)[[1]], np.ones((1, 64))])
    pop = np.array([bin(r).count("1") for r in range(64)])
    expected = [{0}, {1}, set(np.flatnonzero(pop == 1)) - {1}] + [set(np.flatnonzero(pop == k)) for k in range(2, 7)]
    got = [set(np.flatnonzero(o.labels == i)) for i in range(o.r)]
    assert sorted(map(sorted, got)) == sorted(map(sorted, expected))


def test_an_orbit_never_joins_cells_a_query_tells_apart():
    rng = np.random.default_rng(0)
    F = rng.integers(0, 2, (6, 9)).astype(float)
    o = attribute_orbits([F])
    for i in range(o.r):  # every transposition inside an orbit maps F's rows onto themselves
        cells = np.flatnonzero(o.labels == i)
        for b in cells[1:]:
            G = F.copy()
            G[:, [cells[0], b]] = G[:, [b, cells[0]]]
            assert sorted(map(tuple, G)) == sorted(map(tuple, F))


def test_block_variances_and_diagonal_equal_the_dense_gram():
    W = _small_census()
    red = om.reduce(W)
    tau = _per_query(W, (1.0, 2.0, 3.0, 1.5, 4.0))
    per_class = np.zeros(red.n_classes)
    per_class[red.query_class] = tau
    sol = om.solve(red, per_class, tol=1e-5)
    S = OrbitStrategy(red.orbits, red.combinations, sol.blocks)
    X = S.gram
    dense = _variances(W.dense(), X)
    # the Gram is well conditioned on the queries' span (ridge 1e-9, X_oo ≤ 1): agreement to rounding
    np.testing.assert_allclose(sol.class_variance[red.query_class], dense, rtol=1e-9)
    assert np.max(np.diag(X)) == pytest.approx(S.sensitivity_squared(), rel=1e-12)
    assert np.max(np.diag(X)) <= 1 + 1e-12
    assert sol.objective == pytest.approx(float(np.max(dense / tau)) * np.max(np.diag(X)), rel=1e-9)
    # the measurement rows come from the blocks' own roots (one per measured coordinate, as release measures);
    # X has entries ≤ 1, so AᵀA agrees with it to rounding
    A = S.matrix
    assert A.shape == (S.n_rows, W.domain_size)
    np.testing.assert_allclose(A.T @ A, X, atol=1e-12)


def test_optimum_agrees_with_the_dense_minimax_and_any_weights_bound_it():
    # with the cells' identity as one more term W has full column rank, where the dense minimax converges
    # (mmopt.search.max_variance); both certify an interval [lower, upper] around the same optimum
    base = _small_census(age=6)
    W = sw.ImplicitWorkload((*base.terms, sw.Product(tuple(sw.identity(n) for n in base.shape), 0.3)), "full rank")
    tau = _per_query(W, (1.0, 2.0, 3.0, 1.5, 4.0, 1.0))
    red = om.reduce(W)
    per_class = np.zeros(red.n_classes)
    per_class[red.query_class] = tau
    sol = om.solve(red, per_class, tol=1e-6, max_iterations=5_000)
    dense = solve_max_variance(W.dense(), tau, tol=1e-5, max_iterations=2_000)
    assert (sol.objective - sol.lower_bound) <= 1e-5 * sol.objective
    assert (dense.objective - dense.lower_bound) <= 1e-4 * dense.objective
    assert sol.lower_bound <= dense.objective * (1 + 1e-9)
    assert dense.lower_bound <= sol.objective * (1 + 1e-9)
    rng = np.random.default_rng(1)
    for _ in range(5):  # T(λ, μ)² at any weights on the simplices is a lower bound (weak duality)
        lam = rng.dirichlet(np.ones(red.n_classes))
        mu = rng.dirichlet(np.ones(int(np.prod(red.orbit_shape)))).reshape(red.orbit_shape)
        T, *_ = om._evaluate(red, lam, mu, 1.0 / per_class)
        assert T * T <= dense.objective * (1 + 1e-9)


def test_too_many_blocks_are_refused_before_building(monkeypatch):
    monkeypatch.setattr(om, "MAX_BLOCK", 10)
    with pytest.raises(ValueError, match="symmetry blocks"):
        om.reduce(wl.sf1())


def test_a_refused_reduction_says_what_to_do_instead():
    """The refusal named limits and no way out (a helper's probe); each remedy it gives is one the callers take.
    Both workloads are refused in milliseconds: the counts are checked before any block is built."""
    P, Id, T = sw.prefix, sw.identity, sw.total
    gauss = mmopt.Privacy(1.0, 1e-6)
    # 60 × 60 cell orbits: one block of 3,600 > MAX_BLOCK, on 7,200 cells (past the dense limit)
    big = sw.union([sw.kron(P(60), P(60), T(2)), sw.kron(Id(60), T(60), Id(2))], name="big block")
    with pytest.raises(ValueError, match=r"^optimize: 'big block' has 2 symmetry blocks, the largest of 3,600") as e:
        mmopt.optimize(big, privacy=gauss, objective="max_variance")
    text = str(e.value)
    assert "Instead, coarsen attribute(s) 0 (60 cell orbits), 1 (60 cell orbits)" in text
    assert f"is ≤ {om.MAX_BLOCK:,}" in text and "coarsen the domain to ≤ 4,096 cells" in text
    assert "objective='total'" in text and "one target" not in text  # a union: no factor-by-factor route
    with pytest.raises(ValueError, match="the largest of 3,600") as e:
        mmopt.plan(big, 4.0, delta=1e-6)
    assert "coarsen attribute(s) 0" in str(e.value) and "objective=" not in str(e.value)  # plan has no objective
    # 2¹⁵ blocks of ≤ 2 (15 attributes whose two cells are one orbit), on 65,536 cells
    many = sw.union([sw.kron(P(2), *[Id(2)] * 15), sw.kron(T(2), *[T(2)] * 15)], name="many blocks")
    with pytest.raises(ValueError, match="'many blocks' has 32,768 symmetry blocks") as e:
        mmopt.plan(many, 4.0, delta=1e-6)
    assert "use fewer attributes with orbits of two cells or more" in str(e.value)
    assert "coarsen attribute" not in str(e.value)  # the blocks are small: their number is the limit
    # one product, refused for its per-query targets: one target takes the factor-by-factor route at any size
    one = sw.kron(P(3001), T(2))
    with pytest.raises(ValueError, match="give every query one target") as e:
        mmopt.optimize(one, privacy=gauss, targets=np.arange(1.0, one.n_queries + 1))
    from mmopt.family.maxvar_routes import product_route
    assert product_route(one, 1.0)[0] == "product"
    # and coarsened below the limits, the union the first refusal named is taken by the symmetry route
    coarse = sw.union([sw.kron(P(20), P(20), T(13)), sw.kron(Id(20), T(20), Id(13))])
    assert product_route(coarse, 1.0)[0] == "orbits"


def test_targets_that_split_exchangeable_queries_are_refused():
    W = wl.sf1()
    red = om.reduce(W)
    tau = np.ones(W.n_queries)
    tau[np.flatnonzero(red.class_size[red.query_class] > 1)[0]] = 2.0  # one query of a class of several
    with pytest.raises(ValueError, match="equal targets"):
        mmopt.optimize(W, privacy=mmopt.Privacy(1.0, 1e-9), targets=tau)


@pytest.mark.slow  # ≈ 13 CPU s (sf1: 437 query classes, 312 blocks, ~280 steps), 30 s wall on a loaded machine
def test_sf1_plan_meets_per_table_targets_within_the_certified_minimum():
    W = wl.sf1()
    se = {"P1": 5.0, "P8": 10.0, "P9": 10.0, "P10": 10.0, "P11": 10.0}  # the PL-94-like tables tighter
    tau = _per_query(W, [se.get(t, 20.0) for t in sf1_term_tables()])
    p = mmopt.plan(W, targets=tau, kind="se", delta=1e-9)
    assert p.status == "optimal"
    assert 1.0 <= p.ratio <= 1.001
    assert np.all(p.per_query_variance <= tau**2)
    assert np.max(p.per_query_variance / tau**2) > 0.999  # the budget is tight: some target is met with ≈ 0 slack
    assert isinstance(p.strategy, OrbitStrategy) and p.strategy.sensitivity_squared() <= 1 + 1e-12


def test_solve_checks_its_targets_and_budgets_by_name():
    # targets 0 or NaN failed inside the SVD ("did not converge"), a wrong length as a broadcast error and
    # max_iterations=0 as "cannot unpack non-iterable NoneType"
    P, T = np.tril(np.ones((3, 3))), np.ones((1, 3))
    red = om.reduce(sw.union([sw.kron(P, T), sw.kron(T, P), sw.kron(P, P)]))
    k = red.class_size.size
    for targets in (np.zeros(k), -np.ones(k), np.full(k, np.nan), np.ones(k + 1)):
        with pytest.raises(ValueError, match="'targets' parameter of orbit_maxvar.solve"):
            om.solve(red, targets)
    with pytest.raises(ValueError, match="'max_iterations' parameter of orbit_maxvar.solve"):
        om.solve(red, np.ones(k), max_iterations=0)
    assert om.solve(red, np.ones(k), max_iterations=5).objective > 0


@pytest.mark.parametrize("scale", [1e-7, 1e-30, 1e7])
def test_row_classes_do_not_depend_on_the_factors_scale(scale):
    """Row classes were keyed by (a, s) rounded to 12 decimals absolutely: at entries ~1e-7, s ~1e-14 rounded to 0,
    the differences and the doubled differences shared a class (6 → 4) and one variance, so evaluate reported a
    max variance 4× too small and solve an objective below the optimum. Each class and variance scales by c²."""
    import itertools
    D = []
    for i, j in itertools.permutations(range(3), 2):
        e = np.zeros(3)
        e[i], e[j] = 1.0, -1.0
        D.append(e)
    F = np.vstack([D, 2 * np.array(D), np.ones((1, 3))])  # differences, doubled differences, the total
    reference = None
    for c in (1.0, scale):
        W = sw.kron(sw.predicates(c * F), sw.identity_total(2))
        red = om.reduce(W)
        sol = om.solve(red, np.ones(red.n_classes), tol=1e-6)
        A = OrbitStrategy(red.orbits, red.combinations, sol.blocks)
        X, Wd = A.gram, W.dense()
        # the dense oracle for this strategy: ‖A‖₂² · w X⁺ wᵀ per query
        oracle = np.einsum("ij,jk,ik->i", Wd, np.linalg.pinv(X), Wd) * X.diagonal().max()
        got = mmopt.evaluate(W, A).max_variance
        assert got == pytest.approx(oracle.max(), rel=1e-8)
        assert sol.lower_bound <= oracle.max() * (1 + 1e-9)
        if reference is None:
            reference = (red.n_classes, oracle.max())
        else:
            assert red.n_classes == reference[0] == 6
            assert oracle.max() == pytest.approx(c * c * reference[1], rel=1e-5)


def test_a_block_past_the_allocation_limit_is_refused_before_it_is_built():
    """All ranges of 64 ⊗ 32 cells in a union passed the block and query counts and asked numpy for 16.8 GiB (plan
    under either noise was killed for memory): refused by its size now, and plan falls back to its own refusal."""
    import mmopt
    from mmopt import workload as wl
    from mmopt.structured import orbit_maxvar as om
    from mmopt.structured import workloads as sw
    U = sw.union([sw.kron(wl.all_range(64), wl.all_range(32))] * 5)
    with pytest.raises(ValueError, match=r"plan: the largest symmetry block of .* would need"):
        om.reduce(U, "plan")
    for delta in (0.0, 1e-6):
        with pytest.raises(ValueError, match="holds only its Gram"):
            mmopt.plan(U, 4.0, delta=delta)


def test_twins_are_found_whatever_order_a_rows_entries_sum_in():
    # the rows are the 6 orderings of (0.1, 0.2, 0.3): plain sums round differently by order, which split the orbit
    # {0, 1, 2} into [2, 1] (a helper's probe); exactly rounded sums keep it
    import itertools

    from mmopt.structured.orbits import attribute_orbits
    F = np.array([list(p) + [0.0] for p in itertools.permutations([0.1, 0.2, 0.3])])
    assert sorted(attribute_orbits([F]).sizes.tolist()) == [1, 3]
