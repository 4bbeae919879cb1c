"""γ(F), the factorization norm: identity with the L2 program, the seed's repeated-query example, products."""

import math

import numpy as np
import pytest

import mmopt
from mmopt import workload as wl
from mmopt.search.l2_fast import solve_l2
from mmopt.structured import workloads as sw


def _explicit_gamma(F: np.ndarray, M: np.ndarray) -> float:
    """‖R‖_F‖M‖_{1→2}/√m with R = F M⁺, computed from the matrices (the definition, not the L2 identity)."""
    R = F @ np.linalg.pinv(M)
    assert np.allclose(R @ M, F, atol=1e-8 * max(1.0, np.abs(F).max()))  # it is a factorization of F
    return np.linalg.norm(R) * np.max(np.linalg.norm(M, axis=0)) / math.sqrt(F.shape[0])


@pytest.mark.parametrize("make, n", [(wl.identity, 1024), (wl.prefix, 1024), (wl.all_range, 1024),
                                     (wl.prefix, 37), (wl.all_range, 64)])
def test_gamma_is_root_of_l2_optimum_per_query(make, n):
    W = make(n)
    res = mmopt.factorization_norm(W)
    sol = solve_l2(W.mean_gram, tol=1e-9)  # OPT(G/m) = OPT(G)/m: the program is linear in G
    assert sol.status in ("optimal", "optimal_inaccurate")
    opt_low, opt_high = sol.dual_bound, sol.extra["primal_bound"]
    assert res.status == "optimal" and res.method == "dense" and res.n_queries == W.n_queries
    assert res.lower <= res.value == res.upper and 0 <= res.gap <= 1e-8
    assert math.isclose(res.value, math.sqrt(opt_high), rel_tol=1e-8)
    assert math.sqrt(opt_low) * (1 - 1e-12) <= res.value and res.lower <= math.sqrt(opt_high) * (1 + 1e-12)
    assert np.max(np.linalg.norm(res.strategy.matrix, axis=0)) <= 1 + 1e-12  # M has ‖M‖_{1→2} ≤ 1


def test_identity_has_gamma_one_and_known_small_case():
    assert math.isclose(mmopt.factorization_norm(wl.identity(50)).value, 1.0, rel_tol=1e-12)
    # prefix(2): OPT = (3 + √5)/2 (l2_fast's docstring), m = 2
    assert math.isclose(mmopt.factorization_norm(wl.prefix(2)).value ** 2, (3 + math.sqrt(5)) / 4, rel_tol=1e-8)


@pytest.mark.parametrize("make, n", [(wl.prefix, 16), (wl.all_range, 12)])
def test_value_is_attained_by_an_explicit_factorization_and_matches_the_sdp(make, n):
    W = make(n)
    res = mmopt.factorization_norm(W)
    F = W.explicit_matrix()
    assert math.isclose(_explicit_gamma(F, res.strategy.matrix), res.value, rel_tol=1e-9)
    sdp = mmopt.optimize(W, method="l2_approx", options={"engine": "sdp"})  # an independent solver (CVXPY)
    assert math.isclose(math.sqrt(sdp.objective_per_query), res.value, rel_tol=1e-4)


@pytest.mark.parametrize("query", [[1.0, 1.0, 0.0, 1.0], [1.0, 1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0]])
@pytest.mark.parametrize("k", [1, 5, 100])
def test_seed_example_one_query_repeated_k_times(query, k):
    """Seed 001: F = 1_k f. Measuring f once and copying it gives γ = 1 whatever k (and whatever cells f leaves
    out); the Gaussian mechanism on F itself (M = F, R = I) has the factor ‖I‖_F‖F‖_{1→2}/√k = √k."""
    F = np.tile(query, (k, 1))
    res = mmopt.factorization_norm(F)
    assert math.isclose(res.value, 1.0, rel_tol=1e-9) and res.lower <= 1.0 + 1e-12
    assert res.status == "optimal"
    # measure-once factorization M = f, R = 1_k, and the Gaussian mechanism M = F, R = I
    assert math.isclose(_explicit_gamma(F, np.array([query])), 1.0, rel_tol=1e-12)
    gaussian = _explicit_gamma(F, F) if k == 1 else np.sqrt(k) * np.max(np.linalg.norm(F, axis=0)) / np.sqrt(k)
    assert math.isclose(gaussian, math.sqrt(k), rel_tol=1e-12)
    # through mmopt's names: the Gaussian mechanism on F (mmopt.laplace_mechanism with δ > 0) has unit per-query
    # error Δ₂(F)² = k; the matrix mechanism with A = F reconstructs by least squares, R = F F⁺, which
    # averages the k copies: Δ₂(F)²·tr(G (FᵀF)⁺)/m = 1 = γ².
    assert math.isclose(mmopt.strategy.Strategy(F, "F").sensitivity("l2") ** 2, k, rel_tol=1e-12)
    assert math.isclose(mmopt.evaluate(wl.Workload.from_matrix(F), F, norm="l2").mean_squared_error, 1.0,
                        rel_tol=1e-9)


def test_product_workload_is_product_of_factors_and_matches_dense():
    W = sw.kron(sw.prefix(8), sw.all_range(6), sw.identity_total(3), weight=2.0)
    res = mmopt.factorization_norm(W)
    assert res.method == "product" and res.status == "optimal" and res.n_queries == W.n_queries
    g = [mmopt.factorization_norm(f).value for f in W.terms[0].factors]
    assert math.isclose(res.value, 2.0 * math.prod(g), rel_tol=1e-8)
    assert np.allclose(res.factors, g, rtol=1e-10)
    dense = mmopt.factorization_norm(W.to_workload())
    assert math.isclose(res.value, dense.value, rel_tol=1e-7)
    assert res.lower <= dense.value * (1 + 1e-9) and dense.lower <= res.value * (1 + 1e-9)


def test_large_product_never_forms_the_dense_gram():
    W = sw.kron(sw.all_range(256), sw.prefix(256))  # 65,536 cells: the N×N program would be 34 GB
    res = mmopt.factorization_norm(W)
    a, b = mmopt.factorization_norm(wl.all_range(256)).value, mmopt.factorization_norm(wl.prefix(256)).value
    assert math.isclose(res.value, a * b, rel_tol=1e-8) and res.gap <= 2e-8


def test_small_union_goes_dense_and_large_union_is_refused():
    small = sw.marginals((4, 5, 6), 2)
    res = mmopt.factorization_norm(small)
    assert res.method == "dense"
    assert math.isclose(res.value, mmopt.factorization_norm(small.to_workload()).value, rel_tol=1e-12)
    with pytest.raises(ValueError, match="single product or a union over at most 4,096 cells"):
        mmopt.factorization_norm(sw.marginals((20, 20, 20), 2))


def test_invalid_inputs():
    with pytest.raises(ValueError, match="non-zero entry"):
        mmopt.factorization_norm(np.zeros((3, 4)))
    with pytest.raises(TypeError, match="Got a Strategy"):
        mmopt.factorization_norm(mmopt.strategy.identity(4))
    with pytest.raises(TypeError, match="complex"):
        mmopt.factorization_norm(np.eye(3) + 0j)
    with pytest.raises(ValueError, match="2-D array"):
        mmopt.factorization_norm(np.ones(4))
    with pytest.raises(ValueError, match="must be finite"):
        mmopt.factorization_norm([[1.0, np.nan]])
    with pytest.raises(ValueError, match="'tol' parameter of factorization_norm"):
        mmopt.factorization_norm(wl.prefix(4), tol=0.0)
    with pytest.raises(TypeError, match="'max_iterations' parameter of factorization_norm"):
        mmopt.factorization_norm(wl.prefix(4), max_iterations=2.5)


def test_spent_budget_is_user_limit_not_optimal():
    res = mmopt.factorization_norm(wl.all_range(200), max_iterations=1, tol=1e-12)
    assert res.status == "user_limit"
    assert res.lower < res.value and res.gap > 0  # still a valid bracket


def test_stream_and_records_marginal_workloads_are_factorized_like_their_twins():
    # evaluate takes both; factorization_norm refused them as "must be a 2-D array of real numbers"
    from mmopt import toeplitz
    from mmopt.structured.residual.workload import marginal_workload
    assert mmopt.factorization_norm(toeplitz.prefix(16)).value == pytest.approx(
        mmopt.factorization_norm(mmopt.workload.prefix(16)).value, rel=1e-9)
    W = marginal_workload((4, 3, 2), {(0, 1): 1.0, (0, 2): 1.0, (1, 2): 1.0})
    assert mmopt.factorization_norm(W).value == pytest.approx(
        mmopt.factorization_norm(mmopt.structured.marginals((4, 3, 2), 2)).value, rel=1e-9)


def test_grouping_sets_are_factorized_as_the_queries_they_are():
    """factorization_norm(HierarchyWorkload) was refused as "must be a 2-D array … Got an entry HierarchyWorkload"
    (a helper's audit); the Laplace paths that do not take it name W.to_implicit()."""
    import numpy as np

    import mmopt
    from mmopt.hierarchy import Hierarchy, grouping_sets
    geo = Hierarchy.balanced((2, 3), level_names=("nation", "state", "county"), name="geo")
    H = grouping_sets([geo, Hierarchy.flat(2, name="sex")], [("state", "sex"), ("county",), ()])
    got = mmopt.factorization_norm(H).value
    assert got == pytest.approx(mmopt.factorization_norm(H.to_implicit().to_workload()).value, rel=1e-6)
    with pytest.raises(TypeError, match=r"W\.to_implicit\(\), which laplace_mechanism takes"):
        mmopt.laplace_mechanism(H, np.ones(12), mmopt.Privacy(1.0), rng=0)
    with pytest.raises(ValueError, match=r"give delta > 0 \(or plan their queries .*W\.to_implicit\(\)"):
        mmopt.plan(H, 4.0, kind="se")
