"""The chain dual: its P against brute force over every pattern of k steps (weights summing to 1), its gradient
against finite differences, its certified bound below the error of strategies feasible for the schema and below
the cutting planes' primal, close to the cutting planes' certified dual, and the dense-Gram path against the
prefix one."""

import numpy as np
import pytest
from _participation_brute import all_patterns

import mmopt
from mmopt.participation import cosine_decay, learning_rate_workload, min_separation
from mmopt.participation._chain_weights import chain as _chain
from mmopt.participation.chain_banded import chain_banded, scaled_error
from mmopt.participation.chain_dual import _certify, _objective, _split, _start, chain_dual, lagrangian_start
from mmopt.participation.cutting import solve_min_separation
from mmopt.participation.working_set import _Factor


def test_P_is_the_co_occurrence_of_the_chain_over_every_pattern_of_k_steps():
    rng = np.random.default_rng(0)
    b, k, r = 3, 4, 5
    n = b * k
    x = rng.standard_normal(len(_start(b, k, r, rng)))
    a0, A, _ = _split(x, b, k, r)
    s0, Qs, Q, p, F, P, mask = _chain(a0, A, b, k)
    expected, total = np.zeros((n, n)), 0.0
    for pat in all_patterns(n, b, k):
        if len(pat) < k:
            continue
        o = [t - i * b for i, t in enumerate(pat)]
        w = p[0][o[0]] * np.prod([Q[i][o[i], o[i + 1]] for i in range(k - 1)])
        u = np.zeros(n)
        u[list(pat)] = 1.0
        expected += w * np.outer(u, u)
        total += w
    assert total == pytest.approx(1.0, rel=1e-12)  # every monotone offset sequence is a pattern, and only those
    np.testing.assert_allclose(P, expected, rtol=1e-11, atol=1e-15)


@pytest.mark.parametrize("prefix", [True, False])
def test_gradient_matches_finite_differences(prefix):
    rng = np.random.default_rng(1)
    b, k, r = 4, 3, 6
    n = b * k
    i = np.arange(n)
    factor = _Factor(n, True) if prefix else _Factor((n - np.maximum.outer(i, i)) + np.eye(n), False)
    x = rng.standard_normal(len(_start(b, k, r, rng)))
    f, g = _objective(x, factor, b, k, r, [0.0, x])
    for j in rng.choice(len(x), 12, replace=False):
        e = np.zeros_like(x)
        e[j] = 1e-6
        fd = (_objective(x + e, factor, b, k, r, [0.0, x])[0] - _objective(x - e, factor, b, k, r, [0.0, x])[0]) / 2e-6
        # central differences of a smooth function of O(1) curvature: error ~1e-10, round-off ~1e-10
        assert fd == pytest.approx(g[j], abs=1e-7)


def test_certified_bound_is_just_below_the_estimate():
    rng = np.random.default_rng(2)
    b, k, r = 8, 4, 4
    x = _start(b, k, r, rng)
    best = [0.0, x]
    _objective(x, _Factor(b * k, True), b, k, r, best)
    certified = _certify(_Factor(b * k, True), x, b, k, r)
    assert certified <= best[0]
    assert certified == pytest.approx(best[0], rel=1e-8)  # allowances ~n·k·b·u·‖K‖ under each √ω, ω ≥ 1e-4‖K‖


@pytest.mark.slow  # the default run's ~10 minutes (README): run with `pytest -m slow`
def test_bound_lies_below_every_feasible_strategy_and_near_the_cutting_planes():
    n, k = 64, 8
    lower = chain_dual(n, k, max_iterations=400)
    cut = solve_min_separation(n, n // k, k, tol=1e-2)
    chain = chain_banded(n, k, max_iterations=200)
    assert lower.bound <= cut.primal and lower.bound <= chain.error
    # the family's limit is 0.1 % below the optimum here (3,249.2 against 3,252.4); the cutting planes converge
    assert lower.bound >= 0.995 * cut.dual
    assert lower.levels[-1]["n"] == n and lower.iterations > 0


def test_coarse_to_fine_for_prefix_sums_and_the_dense_gram_agree():
    n, k = 128, 4
    coarse = chain_dual(n, k, max_iterations=300)
    assert [level["n"] for level in coarse.levels] == [64, 128]
    i = np.arange(n)
    dense = chain_dual((n - np.maximum.outer(i, i)).astype(float), k, max_iterations=300)
    assert len(dense.levels) == 1
    upper = chain_banded(n, k, max_iterations=200).error  # feasible (Δ² = 1): above every bound
    for result in (coarse, dense):
        assert 0.99 * upper <= result.bound <= upper
    # two paths to one family's maximum (the cutting planes' certified dual here: 3,056.7, 0.1 % above)
    assert coarse.bound == pytest.approx(dense.bound, rel=2e-3)


def test_the_lifted_bound_is_certified_at_n_from_the_coarser_levels():
    """solve_steps: L-BFGS up to it, the iterate carried to n and certified there without steps."""
    n, k = 256, 4
    lifted = chain_dual(n, k, max_iterations=200, solve_steps=128)
    assert [level["n"] for level in lifted.levels] == [64, 128, 256] and lifted.levels[-1]["iterations"] == 0
    assert lifted.start_steps == (64, 128) and not lifted.converged
    full = chain_dual(n, k, max_iterations=200)
    upper = chain_banded(n, k, max_iterations=100).error  # feasible (Δ² = 1): above every bound
    assert lifted.bound <= full.bound * (1 + 1e-9) and full.bound <= upper
    assert lifted.bound >= 0.97 * full.bound  # the optimum's weights at n/2 carried to n lie near the optimum's at n
    assert lifted.levels[-1]["bound"] == lifted.bound


def test_the_carried_chain_beats_repeated_offsets(monkeypatch):
    """_prolong (rows split by their power law, marginals fitted to the solved levels' drift) against each offset
    repeated, at every level change: the certified bound higher (256 steps, k = 8, solved to 128: 17,117 repeated,
    17,430 carried, the dual solved at 256 steps 17,444), still below a feasible strategy's error."""
    import numpy as np

    import mmopt.participation.chain_dual as cd
    n, k = 256, 8
    carried = chain_dual(n, k, max_iterations=200, solve_steps=128)

    def repeated(x, b, k, r, rng, anchors, ahead=1):
        a0, A, L = cd._split(x, b, k, r)
        return np.concatenate([np.repeat(a0, 2), np.repeat(np.repeat(A, 2, axis=1), 2, axis=2).ravel(),
                               np.repeat(L, 2, axis=0).ravel()])
    monkeypatch.setattr(cd, "_prolong", repeated)
    plain = chain_dual(n, k, max_iterations=200, solve_steps=128)
    assert plain.bound * 1.01 < carried.bound <= chain_banded(n, k, max_iterations=100).error


def test_the_split_rows_are_stochastic_and_the_marginals_fitted():
    """_split_rows: Q_i's rows at 2b offsets sum to 1 and a row's first cell splits by its power law (q₀ = q₁:
    β = 1, halves; β clipped to [0.05, 1]); _fit_columns reaches
    marginals within reach, and a target far out of reach gives finite rows (v overflowed to inf, NaN rows: a
    review)."""
    import numpy as np

    from mmopt.participation.chain_lift import fit_columns as _fit_columns
    from mmopt.participation.chain_lift import split_rows as _split_rows
    rng = np.random.default_rng(0)
    b = 8
    A = rng.standard_normal((2, b, b))
    fine = _split_rows(A, b)
    np.testing.assert_allclose(fine.sum(axis=-1), 1.0, rtol=1e-12)
    assert np.all(np.tril(fine[0], -1) == 0)
    flat = np.zeros((1, b, b))
    flat[0, 0, 2:] = -np.inf  # row 0: q₀ = q₁ = ½
    half = _split_rows(flat, b)[0, 0]
    np.testing.assert_allclose(half[:4], 0.25, rtol=1e-12)
    p = np.full(2 * b, 1.0 / (2 * b))
    Q = np.triu(np.ones((2 * b, 2 * b)))
    Q /= Q.sum(axis=1, keepdims=True)
    target = p @ Q
    target = 0.5 * target + 0.5 * np.concatenate([np.zeros(b), np.full(b, 1.0 / b)])  # more mass to the right
    F = _fit_columns(Q, p, target, iterations=2000)
    np.testing.assert_allclose(p @ F, target, atol=1e-6)
    np.testing.assert_allclose(F.sum(axis=1), 1.0, rtol=1e-12)
    q = np.triu(np.ones((8, 8)))
    q /= q.sum(axis=1, keepdims=True)
    p = np.full(8, 1 / 8)
    p[0] = 1e-5
    p /= p.sum()
    t = p @ q
    t[0] = 0.05  # more than p can put on the first offset
    t /= t.sum()
    F = _fit_columns(q, p, t)
    assert np.all(np.isfinite(F)) and np.allclose(F.sum(axis=1), 1.0)


def test_a_budget_stops_it_and_the_bound_stays_certified():
    result = chain_dual(256, 8, seconds=1.0)
    assert not result.converged
    assert result.seconds < 10  # one level's step past the deadline at most
    assert 0 < result.bound <= chain_banded(256, 8, max_iterations=20).error


def test_a_spent_budget_evaluates_each_level_once():
    result = chain_dual(512, 8, seconds=1e-9)  # the line searches stop at their first evaluation past the deadline
    assert [level["iterations"] for level in result.levels] == [0] * 4
    assert 0 < result.bound <= chain_banded(512, 8, max_iterations=5).error


def test_lagrangian_start_is_the_factor_of_X_M_whose_error_is_the_dual_estimate():
    # k = 2: 2b = n bands, nothing cut, so CᵀC = X(M) = Aᵀ K^{−1/2} A and tr(G X(M)⁻¹) = S = tr K^{1/2} exactly
    n = 64
    dual = chain_dual(n, 2, max_iterations=300)
    C = lagrangian_start(dual, n)
    assert np.all(np.triu(C, 1) == 0) and np.all(np.diag(C) > 0)
    W = np.tril(np.ones((n, n)))
    # cond(C) ~ 10², so the dense inverse's relative round-off is ~10⁻¹²
    assert np.linalg.norm(W @ np.linalg.inv(C)) ** 2 == pytest.approx(np.sqrt(dual.levels[-1]["bound"]), rel=1e-9)


def test_lagrangian_start_near_the_bound_and_at_every_prefix_level():
    n, k = 128, 4
    dual = chain_dual(n, k, max_iterations=400)
    for m in (64, 128):
        C = lagrangian_start(dual, m)
        assert C.shape == (m, m) and np.all(np.tril(C, -2 * (m // k)) == 0)
    error = scaled_error(lagrangian_start(dual, n), n // k, k)[0]  # feasible (Δ² = 1 by the chain): above the bound
    # measured 1.022× at n = 128 (2.2–4.3 % from n = 64 to 256): within 6 %, where the row-weighted start is 5.5 %
    assert dual.bound <= error <= 1.06 * dual.bound
    with pytest.raises(ValueError, match="'n' parameter of lagrangian_start must be a level"):
        lagrangian_start(dual, 96)
    with pytest.raises(TypeError, match="'n' parameter of lagrangian_start"):
        lagrangian_start(dual, 64.0)
    with pytest.raises(TypeError, match="'dual' parameter of lagrangian_start must be a ChainDual"):
        lagrangian_start(None, n)
    i = np.arange(n)
    dense = chain_dual((n - np.maximum.outer(i, i)).astype(float), k, max_iterations=20)
    with pytest.raises(ValueError, match="'dual' parameter of lagrangian_start must come from chain_dual on prefix"):
        lagrangian_start(dense, n)  # a dense Gram: no levels' iterates kept


@pytest.mark.parametrize(("args", "kwargs", "match"), [
    ((64, 5), {}, "'participations' parameter of chain_dual must divide n"),
    ((64, 1), {}, "participations"),
    ((np.ones((4, 3)), 2), {}, "gram"),
    ((64, 8), {"rank": 0}, "rank"),
])
def test_bad_input_is_refused(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        chain_dual(*args, **kwargs)


def test_solve_steps_is_for_prefix_sums_only():
    i = np.arange(16)
    with pytest.raises(TypeError, match="'solve_steps' parameter of chain_dual applies to prefix sums"):
        chain_dual((16 - np.maximum.outer(i, i)).astype(float), 2, solve_steps=8)
    with pytest.raises(ValueError, match="'solve_steps' parameter of chain_dual"):
        chain_dual(128, 4, solve_steps=0)


def _optimize(n, schema, **budgets):
    """optimize on prefix sums with short budgets (1 s for each banded strategy unless given)."""
    options = {"free_banded_seconds": 1, "chain_banded_seconds": 1} | budgets
    return mmopt.optimize(mmopt.workload.prefix(n), participation=schema, options=options)


def test_optimize_keeps_the_better_bound_and_names_it():
    n, k = 64, 4
    schema = min_separation(n // k, k)
    # cutting planes cut short (0.5 s) so that the chain dual runs. Which of the two bounds more depends on how
    # far each got in its CPU budget (on an idle machine the chain dual, 5 s, under heavy load not always), so the
    # property is asserted, not the race: the best bound kept and named, never above the objective
    res = _optimize(n, schema, seconds=0.5, chain_dual_seconds=5)
    duals = {"chain dual": res.extra["chain_dual"], "working set": res.extra["cutting_planes_dual"]}
    assert res.lower_bound >= max(duals.values()) * (1 - 1e-12) and res.lower_bound <= res.objective
    best = max(duals, key=duals.get)
    if res.lower_bound == pytest.approx(duals[best], rel=1e-12):  # (else the banded route's own bound was higher)
        assert best in res.extra["lower_bound_method"]
    without = _optimize(n, schema, seconds=0.5, chain_dual_seconds=0)
    assert "chain_dual" not in without.extra and "chain dual" not in without.extra["lower_bound_method"]
    assert without.lower_bound <= without.objective
    with pytest.raises(ValueError, match="chain_dual_seconds"):
        _optimize(n, schema, chain_dual_seconds=-1)


def test_optimize_without_cutting_planes_on_prefix_sums_and_refused_where_they_give_the_only_strategy():
    n, k = 64, 4
    res = _optimize(n, min_separation(n // k, k), seconds=0, chain_dual_seconds=3)
    assert "cutting_planes_dual" not in res.extra and res.strategy is not None
    assert res.lower_bound == pytest.approx(res.extra["chain_dual"], rel=1e-9) and res.lower_bound <= res.objective
    one = _optimize(n, min_separation(n, 1), seconds=0)  # k = 1: no chain dual
    assert "chain_dual" not in one.extra and one.lower_bound <= one.objective
    W = learning_rate_workload(cosine_decay(12, final=0.1), beta=0.9)  # not Toeplitz: no banded strategy either
    with pytest.raises(ValueError, match="only strategy"):
        mmopt.optimize(W, participation=min_separation(4, 3), options={"seconds": 0})
