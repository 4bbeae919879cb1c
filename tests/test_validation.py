"""Invalid inputs: every public entry point names itself, the parameter, what it expected and what it got."""

import numpy as np
import pytest

import mmopt
from mmopt import Privacy, Strategy, Workload, evaluate
from mmopt import strategy as st
from mmopt import workload as wl

CASES = {
    "epsilon<=0": (lambda: Privacy(-1.0), ValueError,
                   r"'epsilon' parameter of Privacy must be a float in the range [\(\[]"),
    "epsilon nan": (lambda: Privacy(float("nan")), ValueError, "'epsilon' parameter of Privacy"),
    "epsilon str": (lambda: Privacy("1"), TypeError, "'epsilon' parameter of Privacy must be a real number"),
    "delta>=1": (lambda: Privacy(1.0, 1.0), ValueError, r"'delta' parameter of Privacy .*\[0, 1\)"),
    "delta<0": (lambda: Privacy(1.0, -0.1), ValueError, "'delta' parameter of Privacy"),
    "calibration": (lambda: Privacy(1.0, 1e-5, calibration="classic"), ValueError, "'calibration' parameter"),
    "gram non-square": (lambda: Workload.from_gram(np.ones((2, 3)), n_queries=2), ValueError,
                        r"'gram' parameter of Workload.from_gram must be a square matrix. Got shape \(2, 3\)"),
    "gram asymmetric": (lambda: Workload.from_gram([[1, 2], [0, 1]], n_queries=2), ValueError, "must be symmetric"),
    "gram not psd": (lambda: Workload.from_gram([[1, 2], [2, 1]], n_queries=2), ValueError,
                     "positive semidefinite; its smallest eigenvalue is -1"),
    "gram nan": (lambda: Workload.from_gram([[1, np.nan], [np.nan, 1]], n_queries=2), ValueError, "must be finite"),
    "gram zero": (lambda: Workload.from_gram(np.zeros((2, 2)), n_queries=2), ValueError, "must be non-zero"),
    "n_queries 0": (lambda: Workload.from_gram(np.eye(2), n_queries=0), ValueError, "'n_queries' parameter"),
    "n_queries float": (lambda: Workload.from_gram(np.eye(2), n_queries=2.5), TypeError, "must be an integer"),
    "matrix 1-D": (lambda: Workload.from_matrix([1, 2, 3]), ValueError, "must be a 2-D array"),
    "matrix inf": (lambda: Workload.from_matrix([[1, np.inf]]), ValueError, "must be finite"),
    "matrix text": (lambda: Workload.from_matrix("abc"), TypeError, "must be a 2-D array of real numbers"),
    "n=0": (lambda: wl.all_range(0), ValueError, r"'n' parameter of all_range must be an integer >= 1"),
    "n bool": (lambda: wl.prefix(True), TypeError, "'n' parameter of prefix must be an integer"),
    "marginals k": (lambda: wl.marginals((2, 3), 3), ValueError, "'k' parameter of marginals"),
    "stack domains": (lambda: wl.stack([wl.prefix(3), wl.prefix(4)]), ValueError, "domain size n=3"),
    "stack weight 0": (lambda: wl.stack([wl.prefix(3)], weights=[0.0]), ValueError, "must be non-zero"),
    "wavelet n": (lambda: st.wavelet(12), ValueError, r"wavelet\(n=12\) requires n to be a power of 2"),
    "branching 1": (lambda: st.hierarchical(8, branching=1), ValueError, "'branching' parameter of hierarchical"),
    "strategy zero": (lambda: Strategy(np.zeros((2, 2))), ValueError, "non-zero entry"),
    "strategy nan": (lambda: Strategy([[np.nan]]), ValueError, "must be finite"),
    "norm": (lambda: st.identity(2).sensitivity("linf"), ValueError, "'norm' parameter of Strategy.sensitivity"),
    "domain mismatch": (lambda: evaluate(wl.prefix(4), st.identity(3)), ValueError,
                        "workload has domain size n=4 but the strategy has n=3"),
    "unsupported": (lambda: evaluate(wl.prefix(3), [[1.0, 1.0, 1.0]]), ValueError,
                    "does not support workload 'prefix"),
    "privacy type": (lambda: evaluate(wl.prefix(2), st.identity(2), 1.0), TypeError,
                     "'privacy' parameter of evaluate must be a Privacy"),
    "workload type": (lambda: evaluate(np.eye(2), st.identity(2)), TypeError, "'workload' parameter of evaluate"),
    "norm mismatch": (lambda: evaluate(wl.prefix(2), st.identity(2), Privacy(1.0), norm="l2"), ValueError,
                      "laplace noise uses 'l1'"),
    "per_query gram-only": (lambda: evaluate(Workload.from_gram(np.eye(2), n_queries=2), st.identity(2),
                                             per_query=True), ValueError, "built from its Gram matrix only"),
    "query length": (lambda: mmopt.query_error([1, 0], st.identity(3)), ValueError,
                     "'query' parameter of query_error must have length 3"),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_invalid_input_raises_clear_error(case):
    call, exc, pattern = case
    with pytest.raises(exc, match=pattern):
        call()


def test_entries_below_the_smallest_float64_are_refused_not_zeroed():
    from fractions import Fraction

    from mmopt.workload import Workload
    with pytest.raises(ValueError, match="must be representable in float64"):  # the cell dropped out as 0.0
        Workload.from_matrix([[Fraction(1, 10**400), 1]])
    if np.finfo(np.longdouble).tiny < np.finfo(float).tiny:  # an extended long double (not where it is a double)
        with pytest.raises(ValueError, match="must be representable in float64"):
            Workload.from_matrix(np.array([[np.longdouble("1e-4000"), 1]], dtype=np.longdouble))
    assert Workload.from_matrix([[Fraction(1, 3), 1]]).gram[0, 1] == pytest.approx(1 / 3)


def test_flags_take_numpy_booleans_and_refuse_the_rest_by_name():
    """mst(compress=np.True_) was refused as "must be a bool. Got bool instead" (numpy's type is also named 'bool');
    the six flags now share one check, which takes Python and numpy booleans alike."""
    from mmopt._base import validation as v
    assert v.check_bool(np.True_, name="compress", caller="mst") is True
    assert v.check_bool(False, name="compress", caller="mst") is False
    for bad in ("no", 1, None, np.array([True])):
        with pytest.raises(TypeError, match=r"The 'compress' parameter of mst must be True or False. Got "):
            v.check_bool(bad, name="compress", caller="mst")


def test_a_closed_form_strategy_is_refused_at_its_peak_not_at_one_copy(monkeypatch):
    """identity(14,100) and hierarchical(10⁴) passed a check of one n×n array and raised MemoryError: Strategy
    copied the array built (a helper's probe). The closed forms and the tree strategies hand theirs over (no copy:
    one array at the peak), and are checked at one."""
    import tracemalloc

    from mmopt._base import validation as v
    tracemalloc.start()
    A = st.hierarchical(500)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 1.5 * A.matrix.nbytes  # was 2.00×
    assert not A.matrix.flags.writeable
    mine = np.ones((3, 3))
    B = mmopt.Strategy(mine)
    mine[0, 0] = 5.0  # the caller's own array is still copied: its later writes do not reach the strategy
    assert B.matrix[0, 0] == 1.0
    from mmopt.dense import _interval_trees as trees
    tracemalloc.start()
    from mmopt.baselines.hierarchies import hb
    T = hb(512)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 1.5 * T.matrix.nbytes and not T.matrix.flags.writeable  # was 2.00×
    monkeypatch.setattr(v, "MAX_ALLOCATION_ENTRIES", 1000)
    trees.matrix(trees.b_ary_tree(20, 2), 20, caller="t")  # 39×20 = 780 entries: one array, allowed
    with pytest.raises(ValueError, match="the 63×32 tree strategy"):  # 2,016
        trees.matrix(trees.b_ary_tree(32, 2), 32, caller="t")


def test_a_misspelt_choice_is_answered_with_the_nearest_one():
    with pytest.raises(ValueError, match=r"'method' parameter of optimize must be one of .*Got 'hierarchial' "
                                         r"instead\. Did you mean 'hierarchical'\?$"):
        mmopt.optimize(mmopt.workload.prefix(8), method="hierarchial")
    with pytest.raises(ValueError, match=r"Got 'zzz' instead\.$"):  # nothing near: no guess
        mmopt.optimize(mmopt.workload.prefix(8), method="zzz")


def test_a_pandas_series_whose_labels_disagree_with_its_positions_is_refused():
    """pd.Series([10, 0, 0, 0], index=[3, 2, 1, 0]) was read by position: the count labelled cell 3 went to cell 0,
    silently (release answered prefix sums [10, 10, 10, 10] where the labels say [0, 0, 0, 10])."""
    import pandas as pd
    W, A, p = mmopt.workload.prefix(4), mmopt.strategy.identity(4), mmopt.Privacy(1.0)
    shuffled = pd.Series([10.0, 0, 0, 0], index=[3, 2, 1, 0])
    with pytest.raises(ValueError, match=r"'x' parameter of matrix_mechanism is a pandas Series whose integer index "
                                         r"is not 0, 1, …, 3 in order \(it reads \[3, 2, 1, 0\]\).*x\.sort_index\(\)"):
        mmopt.matrix_mechanism(W, A, shuffled, p, rng=0)
    implicit = mmopt.workload.kron(mmopt.workload.prefix(70), mmopt.workload.prefix(70))   # the structured check
    with pytest.raises(ValueError, match="labelled 4899 would stand for cell 0"):
        mmopt.matrix_mechanism(implicit, mmopt.strategy.kron(mmopt.strategy.identity(70), mmopt.strategy.identity(70)),
                               pd.Series(np.ones(4900), index=np.arange(4900)[::-1]), p, rng=0)
    with pytest.raises(ValueError, match=r"one column \('count'\); pass that column: x\['count'\] if it holds one "
                                         r"count per cell .* mmopt.records.release_marginals"):
        mmopt.matrix_mechanism(W, A, pd.DataFrame({"count": [1.0, 2, 3, 4]}), p, rng=0)
    # by position where position and label agree, or the labels are not cell numbers
    for x in (shuffled.sort_index(), pd.Series([0, 0, 0, 10.0], index=list("abcd"))):
        out = mmopt.matrix_mechanism(W, A, x, mmopt.Privacy(1e12), rng=0)
        assert np.allclose(out.answers, [0, 0, 0, 10], atol=1e-6)


def test_a_series_whose_text_index_spells_cell_numbers_out_of_order_is_refused():
    """value_counts() of string-coded buckets (index '7', '6', '4', …) was read by position, its cells permuted
    without a word (a helper's probe); the remedy sorts the labels as integers ('10' sorts before '2' as text)."""
    import pandas as pd
    W, A, p = mmopt.workload.prefix(12), mmopt.strategy.identity(12), mmopt.Privacy(1e12)
    x = pd.Series(np.arange(12.0), index=[str(k) for k in range(12)])[::-1]
    with pytest.raises(ValueError, match=r"whose text index is not 0, 1, …, 11 in order \(it reads \['11', '10', "
                                         r"'9', '8', …\]\).*x\.set_axis\(x\.index\.astype\(int\)\)\.sort_index\(\)"):
        mmopt.matrix_mechanism(W, A, x, p, rng=0)
    fixed = x.set_axis(x.index.astype(int)).sort_index()
    out = mmopt.matrix_mechanism(W, A, fixed, p, rng=0)
    assert np.allclose(out.estimate, np.arange(12.0), atol=1e-6)
    in_order = pd.Series(np.arange(12.0), index=[str(k) for k in range(12)])  # labels = positions: by position
    assert np.allclose(mmopt.matrix_mechanism(W, A, in_order, p, rng=0).estimate, np.arange(12.0), atol=1e-6)


def test_a_long_entry_is_cut_visibly_in_the_message():
    # "Got an entry ImplicitStrategy(name='strategy⊗identity of type …": cut mid-quote, as if that were all of it
    A = mmopt.strategy.kron(mmopt.strategy.identity(70), mmopt.strategy.identity(70))
    with pytest.raises(TypeError, match=r"Got an entry ImplicitStrategy\(name='identity⊗identit… of type "
                                        r"ImplicitStrategy\.$"):
        mmopt.Workload.from_matrix([[A]])


def test_x_shaped_unlike_the_product_domain_is_told_both_shapes_it_takes():
    """On kron(prefix(4), identity(6)) x of shape (4, 6) is read in C order, but (6, 4) was told "must be a 1-D
    array", contradicting the shape it accepts (a helper's probe): the message names both, and a transpose."""
    W = wl.kron(wl.prefix(4), wl.identity(6))
    A = st.kron(st.hierarchical(4), st.identity(6))
    X = np.arange(24.0).reshape(4, 6)
    assert mmopt.matrix_mechanism(W, A, X, Privacy(1.0), rng=0).estimate.shape == (24,)
    with pytest.raises(ValueError, match=r"must be flat \(24,\) or shaped like the domain \(4, 6\)\. Got an array "
                                         r"of shape \(6, 4\) \(transposed\?\) instead\."):
        mmopt.matrix_mechanism(W, A, X.T, Privacy(1.0), rng=0)
    with pytest.raises(ValueError, match=r"shaped like the domain \(4, 6\)\. Got an array of shape \(2, 12\) instead"):
        mmopt.matrix_mechanism(W, A, X.reshape(2, 12), Privacy(1.0), rng=0)


def test_a_plan_or_saved_strategy_passed_for_what_it_holds_is_told_so(tmp_path):
    """A Plan or a loaded SavedStrategy passed as the strategy met "must be a 2-D array … Got an entry Plan(…", and
    a Plan passed as the privacy "Got Plan.", where an OptimizeResult is told to pass res.strategy (a helper's
    probe): each now names what it holds."""
    W, x = wl.prefix(16), np.arange(16.0)
    p = mmopt.plan(W, targets=5, kind="se", delta=1e-9)
    mmopt.save(tmp_path / "s.npz", st.hierarchical(16))
    saved = mmopt.load(tmp_path / "s.npz")
    with pytest.raises(TypeError, match=r"'strategy' parameter of matrix_mechanism is a Plan: pass the strategy it "
                                        r"holds, matrix_mechanism\(W, plan\.strategy, …\)"):
        mmopt.matrix_mechanism(W, p, x, p.privacy, rng=0)
    with pytest.raises(TypeError, match=r"is a SavedStrategy: .*evaluate\(W, saved\.strategy, …\)"):
        mmopt.evaluate(W, saved, Privacy(1.0))
    with pytest.raises(TypeError, match=r"must be a Privacy.*Got Plan\. It holds one: pass plan\.privacy\.$"):
        mmopt.matrix_mechanism(W, p.strategy, x, p, rng=0)
    assert mmopt.evaluate(W, saved.strategy, Privacy(1.0)).total_squared_error > 0
