"""mmopt.structured.eigenbasis: tr(G X⁺) for union strategies whose factor Grams commute per attribute, against
dense pseudo-inverses, the Haar-basis evaluator, and the routes it must leave alone."""

import numpy as np
import pytest

import mmopt
from mmopt import strategy as st
from mmopt import workload as wl
from mmopt._base.guards import Unsupported
from mmopt.baselines.transforms import haar_evaluate
from mmopt.structured import eigenbasis as eb
from mmopt.structured import strategies as ss
from mmopt.structured import workloads as sw


def _dense_unit(G: np.ndarray, X: np.ndarray) -> float:
    return float(np.trace(G @ np.linalg.pinv(X, hermitian=True)))


@pytest.mark.parametrize("n", [4, 8, 32])
def test_the_quadtree_on_2d_ranges_matches_the_dense_pseudo_inverse(n):
    A = st.quadtree(n)
    G1 = wl.all_range(n).gram
    # X's condition number is ~n² here; the dense pinv and the shared basis both carry ~eps·κ
    assert eb.unit(wl.ranges_2d(n), A) == pytest.approx(_dense_unit(np.kron(G1, G1), A.gram), rel=1e-10)


def test_nested_trees_and_identities_share_a_basis():
    """Binary and 4-ary trees on one attribute (nested partitions: their block Grams commute), identities beside."""
    n = 16
    eye, H2, H4 = st.identity(n), st.hierarchical(n, 2), st.hierarchical(n, 4)
    A = ss.union_strategy([ss.kron_strategy(H2, eye), ss.kron_strategy(eye, H4), ss.kron_strategy(H4, H2)],
                          weights=[1.0, 0.7, 1.3])
    W = sw.union([sw.kron(wl.prefix(n), wl.all_range(n)), sw.kron(wl.identity(n), wl.prefix(n))], weights=[1.0, 2.0])
    G = np.kron(wl.prefix(n).gram, wl.all_range(n).gram) + 4.0 * np.kron(np.eye(n), wl.prefix(n).gram)
    assert eb.unit(W, A) == pytest.approx(_dense_unit(G, A.gram), rel=1e-9)


def test_a_non_commuting_family_is_left_to_the_other_routes():
    n = 8
    rough = st.Strategy(np.random.default_rng(0).normal(size=(n, n)))
    A = ss.union_strategy([ss.kron_strategy(rough, st.identity(n)),
                           ss.kron_strategy(st.hierarchical(n), st.identity(n))])
    assert eb.unit(wl.ranges_2d(n), A) is None


def test_weight_where_the_strategy_measures_nothing_is_refused():
    n = 4
    total = st.Strategy(np.ones((1, n)))
    A = ss.union_strategy([ss.kron_strategy(total, st.identity(n)), ss.kron_strategy(total, total)])
    with pytest.raises(Unsupported, match="does not support"):
        eb.unit(sw.kron(wl.identity(n), wl.identity(n)), A)


def test_evaluate_is_exact_on_the_quadtree_past_the_dense_limit():
    """2-D ranges on 128² (16,384 cells): the Löwner bracket's ends were 1.1·10¹¹ and 3.2·10¹²; the total is now
    exact, as the Haar-basis evaluator (an independent basis, built by hand) computes it."""
    W, A, P = wl.ranges_2d(128), st.quadtree(128), mmopt.Privacy(1.0)
    r = mmopt.evaluate(W, A, P)
    assert (r.method, r.total_exact) == ("eigenbasis", True)
    assert r.total_squared_error == pytest.approx(haar_evaluate(W, A, P), rel=1e-10)
    assert r.max_variance_upper is not None and r.max_variance_upper >= r.total_squared_error / r.n_queries


def test_a_basis_too_costly_to_find_is_left_to_the_other_routes(monkeypatch):
    monkeypatch.setattr(eb, "MAX_FLOPS", 10.0)
    assert eb.unit(wl.ranges_2d(8), st.quadtree(8)) is None


@pytest.mark.parametrize("n1,n2", [(64, 32), (128, 64)])
def test_a_union_no_block_of_which_supports_the_workload_alone_is_exact(n1, n2):
    """The two halves of attribute 0's cells in two blocks: together the identity, apart neither supports a query.
    At 2,048 cells the dense path scored it; routed to the shared basis, the bracket's refusal ("no block supports
    term 0") must not stop the exact total (past the dense limit it was refused outright)."""
    eye = np.eye(n1)
    A = ss.union_strategy([ss.kron_strategy(eye[: n1 // 2], np.eye(n2)), ss.kron_strategy(eye[n1 // 2:], np.eye(n2))])
    r = mmopt.evaluate(sw.kron(wl.all_range(n1), wl.all_range(n2)), A, mmopt.Privacy(1.0))

    def trace(n):  # tr of all_range(n)'s Gram: Σᵢ i(n − i + 1)
        return n * (n + 1) * (n + 2) // 6
    assert (r.method, r.total_exact) == ("eigenbasis", True)  # the identity's error: 2·tr G at ε = 1, Δ₁ = 1
    assert r.total_squared_error == pytest.approx(2.0 * trace(n1) * trace(n2), rel=1e-12)
    assert r.max_variance_upper >= r.total_squared_error / r.n_queries


def _tiny_singular_value_pair(n, s, weight):
    """A = [f ⊗ I₈; ½·f ⊗ 1ᵀ] with f = diag(1, …, 1, s), W = diag(1, …, 1, weight) ⊗ I₈, and the exact unit
    tr(G X⁺) = (n − 1 + weight²/s²)·tr((I + ¼J)⁻¹): X = f² ⊗ (I + ¼J)."""
    f = np.diag(np.r_[np.ones(n - 1), s])
    A = ss.union_strategy([ss.kron_strategy(f, st.identity(8)), ss.kron_strategy(f, np.ones((1, 8)))],
                          weights=[1.0, 0.5])
    W = sw.kron(mmopt.Workload.from_matrix(np.diag(np.r_[np.ones(n - 1), weight])), wl.identity(8))
    return W, A, (n - 1 + weight**2 / s**2) * np.trace(np.linalg.inv(np.eye(8) + 0.25 * np.ones((8, 8))))


@pytest.mark.parametrize("weight", [1e-4, 1.0])
def test_a_small_singular_value_is_not_taken_for_round_off(weight):
    """σ = 1.5·10⁻⁶ on 256 cells is under the 64·n·eps·‖X‖ that first cleared X's eigenvalues as round-off: the
    total lost that cell's share (0.48× the truth reported exact at 1,024 cells) or, with the workload's full
    weight there, the pair was refused as unsupported. The route is exact or stands aside."""
    W, A, exact = _tiny_singular_value_pair(256, 1.5e-6, weight)
    got = eb.unit(W, A)
    assert got is None or got == pytest.approx(exact, rel=1e-6)


def test_past_the_dense_limit_a_small_singular_value_is_bracketed_not_halved():
    W, A, unit = _tiny_singular_value_pair(1024, 3e-6, 1e-4)
    r = mmopt.evaluate(W, A, mmopt.Privacy(1.0))
    total = 2 * 1.5**2 * unit  # Laplace at ε = 1: 2·Δ₁²·tr(G X⁺), Δ₁ = 1 + ½
    assert r.total_lower <= total * (1 + 1e-9) and r.total_squared_error >= total * (1 - 1e-9)


def test_a_light_query_on_a_cell_never_measured_is_not_hidden_by_a_heavy_one():
    """Cell 7 of attribute 0 is never measured; the query on it weighs 10⁻¹⁴ of G's trace beside a 10⁷-weighted
    one, under the share test's round-off allowance: the route reported a finite 'exact' total (8·10¹⁷)."""
    A0 = np.eye(8)[:7]
    A = ss.union_strategy([ss.kron_strategy(A0, st.identity(64)), ss.kron_strategy(A0, np.ones((1, 64)))])
    W0 = np.zeros((2, 8))
    W0[0, 0], W0[1, 7] = 1e7, 1.0
    W = sw.kron(W0, wl.identity(64))
    with pytest.raises(Unsupported, match="a query has weight"):  # its rows settle it
        eb.unit(W, A)
    with pytest.raises(ValueError, match="does not support|no block"):
        mmopt.structured.evaluate(W, A, mmopt.Privacy(1.0), dense_limit=0)


def test_a_rank_deficient_strategy_stays_exact_where_its_rows_settle_support():
    """Only the first marginal measured (two halves, each ⊗ 1ᵀ): G's share where D = 0 is round-off, of either
    sign. Leaving every such share to the other routes refused this pair past the dense limit (a helper's review of
    this fix): the workload's rows put none of their weight there. Exact: Σᵢ i over prefix(n)'s rows at Δ₂ = 1."""
    n = 64
    eye, one = np.eye(n), st.Strategy(np.ones((1, n)))
    A = ss.union_strategy([ss.kron_strategy(st.Strategy(eye[: n // 2]), one),
                           ss.kron_strategy(st.Strategy(eye[n // 2:]), one)])
    W = sw.kron(wl.prefix(n), mmopt.Workload.from_matrix(np.ones((1, n))))
    assert eb.unit(W, A) == pytest.approx(n * (n + 1) / 2, rel=1e-12)
    r = mmopt.structured.evaluate(W, A, None, norm="l2", dense_limit=0)
    assert (r.method, r.total_exact) == ("eigenbasis", True) and r.total_squared_error == pytest.approx(2080.0)


def test_equal_factors_built_apart_are_one_factor(monkeypatch):
    """Factors were told apart by object: H⊗I, I⊗H, H⊗H with st.hierarchical(n) called per term counted three
    factors per attribute against MAX_FLOPS where mmopt.save stores two, so the strategy got the bracket and its
    saved-and-loaded copy the exact total (2-D ranges on 1,000²; a helper's audit). Here the budget admits two."""
    n = 16
    W = wl.ranges_2d(n)

    def strategy(H):
        return st.stack([st.kron(H(), st.identity(n)), st.kron(st.identity(n), H()), st.kron(H(), H())])
    shared = st.hierarchical(n)
    monkeypatch.setattr(eb, "MAX_FLOPS", 2 * n**3 * (10 + 4 * 2) + 1.0)
    apart, one = eb.unit(W, strategy(lambda: st.hierarchical(n))), eb.unit(W, strategy(lambda: shared))
    assert apart is not None and apart == one
    G1 = wl.all_range(n).gram
    assert apart == pytest.approx(_dense_unit(np.kron(G1, G1), strategy(lambda: shared).gram), rel=1e-10)


def test_the_accuracy_check_counts_the_workloads_own_round_off():
    """Directions where D is tiny (θ = 10⁻⁵ on the terms that reach them) amplify the round-off of g = diag(QᵀGQ),
    which can be negative there: the signed slope came out negative and passed any check, and a total 3·10⁻⁵ off
    was reported exact (a helper's audit). Exact to ACCURACY, or left to the bracket."""
    n, m, th = 64, 128, 1e-5
    d = np.linspace(1, 2, n)
    A = ss.union_strategy([ss.kron_strategy(np.diag(d), np.eye(m)), ss.kron_strategy(np.diag(d), np.ones((1, m))),
                           ss.kron_strategy(np.eye(n), np.eye(m))], [th, 1.0, th])
    W = sw.kron(sw.identity(n), sw.total(m))
    exact = float(np.sum(m / (th**2 * (d**2 + 1) + m * d**2)))  # X = diag(d²) ⊗ (θ²I + J) + θ² I
    got = eb.unit(W, A)
    assert got is None or got == pytest.approx(exact, rel=eb.ACCURACY)
    r = mmopt.evaluate(W, A)
    delta2 = r.sensitivity**2
    assert r.total_lower <= delta2 * exact * (1 + 1e-9) and r.total_squared_error >= delta2 * exact * (1 - 1e-9)


@pytest.mark.parametrize("heavy", [1e8, 1e9, 1e10])
def test_a_light_query_is_judged_by_its_rows_whatever_the_sign_of_the_grams_share(heavy):
    """Past 10⁸ : 1 weights G = WᵀW loses the light query (1, −2, 1) altogether, and its share where D = 0 was
    round-off ≤ 0, so the per-row test was skipped: an 'exact' total of 8.6·10²⁰ (a helper's audit). The rows are
    read wherever D has zeros; the dense oracle refuses the pair."""
    A0 = np.array([[1.0, 1, 1], [1, 0, -1]])  # its row space misses (1, −2, 1)
    A = ss.union_strategy([ss.kron_strategy(A0, np.eye(4), np.eye(4)),
                           ss.kron_strategy(np.ones((1, 3)), np.ones((1, 4)), np.ones((1, 4)))])
    W = sw.kron(sw.predicates(np.array([[heavy, 0, -heavy], [1.0, -2, 1]])), wl.identity(4), wl.identity(4))
    with pytest.raises(Unsupported, match="a query has weight"):
        eb.unit(W, A)
    with pytest.raises(ValueError, match="does not support|no block"):
        mmopt.structured.evaluate(W, A, mmopt.Privacy(1.0), dense_limit=0)
    with pytest.raises(ValueError, match="does not support"):
        mmopt.evaluate(W.to_workload(), A.to_strategy(), mmopt.Privacy(1.0))
