"""Issue 31: every (workload family × public function) pair. Each either returns the numbers of the family's own
representation-specific function (to 1e-12 relative) or refuses with a message naming the combination that works.

Families: dense prefix(64); stream prefix / all ranges at 64 and 2¹⁶ cells (``mmopt.toeplitz`` and
``mmopt.workload.prefix(2**16)``); a Kronecker product (2-D ranges); a union of products (R⊗I ∪ I⊗R); a marginal
workload of the residual layer; a records release's workload and strategy. Functions: optimize, evaluate,
expected_error, svd_bound, matrix_mechanism, release, save/load, the family lookup and the routing table.
"""

import warnings

import numpy as np
import pytest

import mmopt
from mmopt import error as dense_error
from mmopt import family, toeplitz, workload
from mmopt.structured import analysis, residual
from mmopt.structured import bounds as product_bounds
from mmopt.toeplitz.bound import svd_bound as stream_svd_bound

GAUSS = mmopt.Privacy(1.0, 1e-6)
REL = 1e-12


def _records():
    pd = pytest.importorskip("pandas")
    pytest.importorskip("opendp")
    from mmopt.records import Attribute, Domain, release_marginals
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.integers(0, 3, 200), "b": rng.integers(0, 4, 200), "c": rng.integers(0, 2, 200)})
    dom = Domain(tuple(Attribute(k, categories=tuple(range(v))) for k, v in {"a": 3, "b": 4, "c": 2}.items()))
    with warnings.catch_warnings():  # seed=0: the seeded (test) noise, which warns by design
        warnings.simplefilter("ignore", UserWarning)
        r = release_marginals(df, dom, 2, GAUSS, seed=0)
    return r.workload, r.strategy


def _optimized(W):
    return W, mmopt.optimize(W, privacy=GAUSS, seed=0, verbose=False, budget="fast").strategy


# name -> (family name, builder of (W, A), the family's own evaluate and SVD bound on (W, A) at GAUSS)
def _stream_eval(W, A):
    if isinstance(A, mmopt.Strategy):  # a dense strategy (auto's on small streams): the dense twin's path
        return dense_error.evaluate(getattr(workload, W.kind)(W.n), A, GAUSS).total_squared_error
    return toeplitz.evaluate(W, A, GAUSS).total_squared_error


def _stream_bound(W):
    return stream_svd_bound(W.n, W.kind) * GAUSS.variance_factor


def _product_eval(W, A):
    return analysis.evaluate(W, A, GAUSS).total_squared_error


def _product_bound(W):
    return product_bounds.svd_bound(W, GAUSS).value


def _residual_eval(W, A):
    return residual.evaluate(W, A, GAUSS).total_squared_error


def _residual_bound(W):
    return residual.svd_bound(W, GAUSS)


R65 = workload.all_range(65)  # 4,225 cells: just past the dense limit (4,096), so the union stays a product
CASES = {
    "dense prefix(64)": ("dense", lambda: _optimized(workload.prefix(64)),
                         lambda W, A: dense_error.evaluate(W, A, GAUSS).total_squared_error,
                         lambda W: dense_error.svd_bound(W, GAUSS)),
    "stream prefix(64)": ("stream", lambda: _optimized(toeplitz.prefix(64)), _stream_eval, _stream_bound),
    "stream all_range(64)": ("stream", lambda: _optimized(toeplitz.all_range(64)), _stream_eval, _stream_bound),
    "stream prefix(2^16)": ("stream", lambda: _optimized(workload.prefix(2**16)), _stream_eval, _stream_bound),
    "stream all_range(2^16)": ("stream", lambda: _optimized(toeplitz.all_range(2**16)), _stream_eval, _stream_bound),
    "product ranges 16²": ("product", lambda: _optimized(workload.ranges_2d(16)), _product_eval, _product_bound),
    "union R⊗I ∪ I⊗R": ("product",
                        lambda: _optimized(workload.stack([workload.kron(R65, workload.identity(65)),
                                                           workload.kron(workload.identity(65), R65)])),
                        _product_eval, _product_bound),
    "residual marginals": ("residual",
                           lambda: (residual.marginal_workload((4, 3, 5), [(0, 1), (1, 2)]),
                                    residual.solve_residual(residual.marginal_workload((4, 3, 5), [(0, 1), (1, 2)]))
                                    .strategy),
                           _residual_eval, _residual_bound),
    "records release": ("residual", _records, _residual_eval, _residual_bound),
}


def _cells(W) -> int:
    return W.domain_size if hasattr(W, "domain_size") else W.n


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request):
    fam, build, own_eval, own_bound = CASES[request.param]
    W, A = build()
    return request.param, fam, W, A, own_eval, own_bound


def test_family_lookup(case):
    name, fam, W, _, _, _ = case
    assert family.family_of(W).name == fam


def test_evaluate_and_expected_error_equal_the_family_path(case):
    _, _, W, A, own_eval, _ = case
    own = own_eval(W, A)
    assert mmopt.evaluate(W, A, GAUSS).total_squared_error == pytest.approx(own, rel=REL)
    assert mmopt.expected_error(W, A, GAUSS) == pytest.approx(own, rel=REL)


def test_svd_bound_equals_the_family_path_and_stays_below(case):
    _, _, W, A, own_eval, own_bound = case
    bound = mmopt.svd_bound(W, GAUSS)
    assert bound == pytest.approx(own_bound(W), rel=REL)
    assert bound <= own_eval(W, A) * (1 + 1e-9)


def test_matrix_mechanism_simulates_or_names_release(case):
    _, fam, W, A, _, _ = case
    x = np.ones(_cells(W))
    if fam == "stream" and _cells(W) > 4096:
        with pytest.raises(ValueError, match="use mmopt.release"):
            mmopt.matrix_mechanism(W, A, x, GAUSS, rng=0)
        return
    out = mmopt.matrix_mechanism(W, A, x, GAUSS, rng=0)
    again = mmopt.matrix_mechanism(W, A, x, GAUSS, rng=0)
    assert np.all(np.isfinite(out.answers)) and np.array_equal(out.answers, again.answers)


def test_release_runs(case):
    pytest.importorskip("opendp")
    _, _, W, A, _, _ = case
    out = mmopt.release(W, A, np.ones(_cells(W)), GAUSS)
    assert np.all(np.isfinite(out.estimate)) and out.estimate.size == _cells(W)


def test_save_and_load_keep_the_error(case, tmp_path):
    _, _, W, A, own_eval, _ = case
    path = mmopt.save(tmp_path / "s.npz", A)
    B = mmopt.load(path).strategy
    assert mmopt.evaluate(W, B, GAUSS).total_squared_error == pytest.approx(own_eval(W, A), rel=1e-12)


def test_a_dense_strategy_on_a_large_stream_is_refused_naming_what_works():
    W = workload.prefix(2**16)
    H = mmopt.strategy.identity(8)  # any non-Toeplitz strategy; the size check comes first
    for fn in (mmopt.evaluate, mmopt.expected_error):
        with pytest.raises(ValueError, match="must be a ToeplitzStrategy.*dense path, which no workload of more "
                                             "than 10,000 cells takes"):
            fn(W, H, GAUSS)
    with pytest.raises(TypeError, match="must be a ToeplitzStrategy"):
        mmopt.release(W, H, np.ones(2**16), GAUSS)


def test_every_route_is_reachable_and_the_table_covers_every_method():
    names = [r.name for r in family.ROUTES]
    assert names[-1] == "dense" and family.ROUTES[-1].methods is None  # the dense route takes what is left
    from mmopt.family.routes import all_methods
    from mmopt.search._methods import METHODS
    assert set(METHODS) | {"auto", "kron", "residual", "weighted_sqrt"} <= set(all_methods())
    with pytest.raises(TypeError, match="of evaluate must be a Workload or another of mmopt's workload families"):
        mmopt.evaluate(np.eye(3), np.eye(3))


def test_plots_draw_or_name_what_works(case):
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    _, fam, W, A, _, _ = case
    try:
        if fam == "stream" and _cells(W) > 4096:  # held in O(n): no n×n matrix to draw
            with pytest.raises(ValueError, match="mmopt.evaluate|dense limit|4,096"):
                mmopt.plot.error_profile(A)
            return
        assert mmopt.plot.error_profile(A) is not None
        if fam == "product" and _cells(W) > 4096 and len(A.terms) > 1:  # a union strategy: refused, naming what works
            with pytest.raises(ValueError, match="exact for product strategies"):
                mmopt.plot.per_query_error(W, A, GAUSS, by="index")
            return
        assert mmopt.plot.per_query_error(W, A, GAUSS, by="index") is not None
    finally:
        plt.close("all")


def test_the_command_line_takes_a_stream_workload(capsys):
    import json

    from mmopt.cli import main
    assert main(["evaluate", "prefix:65536", "--strategy", "identity", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    W = workload.prefix(2**16)
    own = toeplitz.evaluate(W, toeplitz.banded([1.0], 2**16), mmopt.Privacy(1.0)).total_squared_error
    assert got["total_squared_error"] == pytest.approx(own, rel=REL)
    assert main(["optimize", "prefix:65536", "--delta", "1e-6", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["strategy"]["rows"] == 2**16 and rec["objective"] >= rec["lower_bound"]


def test_a_toeplitz_strategy_on_a_small_stream_is_simulated_on_the_dense_twin():
    W, A, x = toeplitz.prefix(64), toeplitz.sqrt_strategy(64), np.arange(64.0)
    got = mmopt.matrix_mechanism(W, A, x, GAUSS, rng=3)
    twin = mmopt.matrix_mechanism(workload.prefix(64), A.to_strategy(), x, GAUSS, rng=3)
    assert np.array_equal(got.answers, twin.answers)
    with pytest.raises(ValueError, match="released, not simulated, past 4,096 cells"):
        mmopt.matrix_mechanism(toeplitz.prefix(8192), toeplitz.sqrt_strategy(8192), np.ones(8192), GAUSS, rng=0)
