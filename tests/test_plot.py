"""mmopt.plot: each figure's drawn data equals what the library (and an independent formula) computes; ax= is drawn
on; bad input is refused with the parameter named; matplotlib stays optional."""

import math
import subprocess
import sys

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import LogNorm, Normalize, SymLogNorm  # noqa: E402

import mmopt  # noqa: E402
from mmopt import plot  # noqa: E402
from mmopt import strategy as st  # noqa: E402
from mmopt import workload as wl  # noqa: E402

EPS1 = mmopt.Privacy(1.0)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _image(ax) -> np.ndarray:
    return np.ma.filled(np.ma.asarray(ax.images[0].get_array(), dtype=float), np.nan)


def _pinv_profile(A: np.ndarray) -> np.ndarray:
    return np.linalg.pinv(A.T @ A)


def _brute_error(w, A: np.ndarray, c: float = 2.0) -> float:
    """c·Δ₁²·w (AᵀA)⁺ wᵀ, straight from Prop. 4.4 with numpy's pseudo-inverse (c = 2/ε² at ε = 1)."""
    return c * np.max(np.abs(A).sum(axis=0)) ** 2 * float(w @ _pinv_profile(A) @ w)


# ---- matplotlib is optional -------------------------------------------------------------------------------------

def test_mmopt_and_mmopt_plot_import_without_loading_matplotlib():
    code = "import sys, mmopt, mmopt.plot; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_missing_matplotlib_names_the_plots_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)  # `import matplotlib.pyplot` now fails
    with pytest.raises(ImportError, match=r"mmopt\.plot\.error_profile needs matplotlib.*mmopt\[plots\]"):
        plot.error_profile(st.identity(4))
    with pytest.raises(ImportError, match=r"mmopt\[plots\]"):
        plot.compare(wl.prefix, ["identity"], [4])


# ---- error_profile ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("make", [st.hierarchical, st.wavelet, lambda n: st.svd_strategy(wl.all_range(n))])
def test_error_profile_draws_m_and_matches_the_pseudo_inverse(make):
    A = make(8)
    ax = plot.error_profile(A)
    M = _image(ax)
    np.testing.assert_array_equal(M, mmopt.error_profile(A).matrix)
    np.testing.assert_allclose(M, _pinv_profile(A.matrix), atol=1e-10 * np.abs(M).max())
    norm = ax.images[0].norm
    assert isinstance(norm, SymLogNorm) and norm.vmax == -norm.vmin == pytest.approx(np.abs(M).max())
    assert len(ax.figure.axes) == 2  # the heat map and its colour bar


@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_error_profile_scaled_is_delta_squared_m(norm):
    A = st.hierarchical(8)
    got = _image(plot.error_profile(A, scaled=True, norm=norm))
    delta = {"l1": 4.0, "l2": 2.0}[norm]  # H₈: each cell lies in log₂8 + 1 = 4 ranges of the tree
    np.testing.assert_allclose(got, delta**2 * _pinv_profile(A.matrix), atol=1e-10)


def test_error_profile_takes_a_profile_an_array_and_an_implicit_product():
    A = st.wavelet(4)
    np.testing.assert_array_equal(_image(plot.error_profile(mmopt.error_profile(A))), mmopt.error_profile(A).matrix)
    M = np.array([[2.0, -1.0], [-1.0, 3.0]])
    ax = plot.error_profile(M, colorbar=False)
    np.testing.assert_array_equal(_image(ax), M)
    assert len(ax.figure.axes) == 1
    # a product's profile is the Kronecker product of its factors' profiles: (A⊗B)ᵀ(A⊗B) = AᵀA ⊗ BᵀB
    H, Y = st.hierarchical(4), st.wavelet(2)
    got = _image(plot.error_profile(st.kron(H, Y)))
    np.testing.assert_allclose(got, np.kron(_pinv_profile(H.matrix), _pinv_profile(Y.matrix)), atol=1e-12)


def test_error_profile_draws_on_the_given_axes():
    fig, (a, b) = plt.subplots(1, 2)
    assert plot.error_profile(st.identity(4), ax=b) is b
    assert not a.images and len(b.images) == 1


@pytest.mark.parametrize("arg, kw, err, match", [
    (wl.prefix(4), {}, TypeError, "from_workload"),
    (np.array([[1.0, 2.0], [0.0, 1.0]]), {}, ValueError, "not symmetric"),
    (np.eye(3), {"scaled": True}, ValueError, "'scaled' parameter of error_profile"),
    (st.identity(3), {"linear_fraction": 0.0}, ValueError, "'linear_fraction'"),
    (st.identity(3), {"norm": "l3"}, ValueError, "'norm'"),
    (st.identity(3), {"ax": "left"}, TypeError, "'ax' parameter of error_profile"),
    (st.identity(3), {"scaled": 1}, TypeError, "'scaled'"),
    (np.ones((2, 3)), {}, ValueError, "square"),
])
def test_error_profile_refuses_bad_input(arg, kw, err, match):
    with pytest.raises(err, match=match):
        plot.error_profile(arg, **kw)


# ---- per_query_error ----------------------------------------------------------------------------------------------

def test_per_query_error_by_start_and_length_is_every_range_error():
    n, A = 8, st.hierarchical(8)
    ax = plot.per_query_error(wl.all_range(n), A, EPS1)
    H = _image(ax)
    assert H.shape == (n, n)
    for a in range(n):
        for ell in range(1, n + 1):
            if a + ell > n:
                assert np.isnan(H[ell - 1, a])  # not a range of the domain: blank
                continue
            w = np.zeros(n)
            w[a:a + ell] = 1
            assert H[ell - 1, a] == pytest.approx(mmopt.query_error(w, A, EPS1), rel=1e-12)
            assert H[ell - 1, a] == pytest.approx(_brute_error(w, A.matrix), rel=1e-9)
    assert isinstance(ax.images[0].norm, LogNorm)


def test_per_query_error_on_random_ranges_and_prefixes_places_each_query():
    W, A = wl.random_range(12, 30, seed=1), st.hierarchical(12)
    H = _image(plot.per_query_error(W, A, log=False))
    E = mmopt.evaluate(W, A, per_query=True).per_query_variance
    a = np.argmax(W.matrix > 0, axis=1)
    ell = W.matrix.sum(axis=1).astype(int)
    # W repeats some ranges, and a cell shows one of the copies. The copies' variances wᵀX⁺w are the same number
    # computed in different rows of one matrix product, which OpenBLAS may round differently (Nehalem kernel:
    # 1.05e-15 relative). Each is within γ_2n·|w|ᵀ|X⁺||w| of the exact value, so copies differ by at most
    # 4n·eps·κ_q with κ_q = |w|ᵀ|X⁺||w| / wᵀX⁺w (14.8 here: rtol = 1.6e-13, 150× the Nehalem difference);
    # a query drawn in another query's cell would be off by O(1).
    M = _pinv_profile(A.matrix)
    kappa_q = (np.abs(W.matrix) @ np.abs(M) * np.abs(W.matrix)).sum(axis=1) / (W.matrix @ M * W.matrix).sum(axis=1)
    rtol = 4 * W.domain_size * np.finfo(float).eps * kappa_q.max()
    np.testing.assert_allclose(H[ell - 1, a], E, rtol=rtol, atol=0)
    assert np.isnan(H).sum() == H.size - len(set(zip(a.tolist(), ell.tolist(), strict=True)))
    P = _image(plot.per_query_error(wl.prefix(8), st.wavelet(8), EPS1))  # prefixes: start 0, lengths 1…8
    want = [_brute_error(np.r_[np.ones(k), np.zeros(8 - k)], st.wavelet(8).matrix) for k in range(1, 9)]
    np.testing.assert_allclose(P[:, 0], want, rtol=1e-9)
    assert np.isnan(P[:, 1:]).all()


def test_per_query_error_by_index_is_a_line_of_the_per_query_variances():
    W, A = wl.marginals((2, 3), 1), st.identity(6)
    gauss = mmopt.Privacy(1.0, 1e-6)
    ax = plot.per_query_error(W, A, gauss, by="index")
    y = ax.lines[0].get_ydata()
    np.testing.assert_array_equal(y, mmopt.evaluate(W, A, gauss, per_query=True).per_query_variance)
    c = gauss.variance_factor  # identity: Δ₂ = 1, so query w has error c·|w|
    np.testing.assert_allclose(y, c * W.matrix.sum(axis=1), rtol=1e-12)
    assert ax.get_yscale() == "log" and "δ = 1e-06" in ax.get_ylabel()


def test_per_query_error_draws_on_the_given_axes():
    fig, ax = plt.subplots()
    assert plot.per_query_error(wl.all_range(4), st.identity(4), ax=ax, colorbar=False) is ax
    assert len(fig.axes) == 1 and len(ax.images) == 1


def test_per_query_error_refuses_non_range_workloads_and_bad_options():
    gaps = mmopt.Workload.from_matrix(np.array([[1.0, 0.0, 1.0], [1.0, 1.0, 0.0]]))
    for W in (gaps, wl.marginals((2, 2), 1), wl.all_predicate(4), mmopt.Workload.from_matrix(2 * np.eye(3))):
        with pytest.raises(ValueError, match="workload of ranges.*by='index'"):
            plot.per_query_error(W, st.identity(W.domain_size))
    with pytest.raises(ValueError, match="'by' parameter of per_query_error"):
        plot.per_query_error(wl.all_range(4), st.identity(4), by="length")
    with pytest.raises(TypeError, match="'log'"):
        plot.per_query_error(wl.all_range(4), st.identity(4), log="yes")
    with pytest.raises(ValueError, match="per_query variances need the workload matrix"):
        plot.per_query_error(mmopt.Workload.from_gram(np.eye(3), n_queries=3), st.identity(3), by="index")


# ---- strategy -----------------------------------------------------------------------------------------------------

def test_strategy_dense_heat_map_is_a():
    A = st.hierarchical(8)
    ax = plot.strategy(A)
    np.testing.assert_array_equal(_image(ax), A.matrix)
    assert isinstance(ax.images[0].norm, Normalize) and ax.images[0].norm.vmin == -1.0
    np.testing.assert_array_equal(_image(plot.strategy([[1.0, -2.0], [0.5, 1.0]])), [[1.0, -2.0], [0.5, 1.0]])


def test_strategy_implicit_product_draws_each_factor():
    factors = (st.hierarchical(4), st.identity(3), st.wavelet(2))
    axes = plot.strategy(st.kron(*factors))
    assert axes.shape == (3,)
    for ax, f in zip(axes, factors, strict=True):
        np.testing.assert_array_equal(_image(ax), f.matrix)
        assert f.name in ax.get_title()


def test_strategy_union_is_a_grid_of_terms_by_factors_on_given_axes():
    A = st.stack([st.kron(st.identity(3), st.hierarchical(2)), st.kron(st.hierarchical(3), st.identity(2))],
                 weights=[1.0, 0.5])
    fig, given = plt.subplots(1, 4)
    grid = plot.strategy(A, axes=given, colorbar=False)
    assert grid.shape == (2, 2) and list(grid.flat) == list(given)
    np.testing.assert_array_equal(_image(grid[1, 0]), st.hierarchical(3).matrix)
    assert "θ = 0.5" in grid[1, 1].get_title() and len(fig.axes) == 4


def test_strategy_refuses_mismatched_axes_and_huge_unions():
    K = st.kron(st.identity(2), st.identity(2))
    with pytest.raises(TypeError, match="'ax' parameter of strategy.*axes="):
        plot.strategy(K, ax=plt.subplots()[1])
    with pytest.raises(TypeError, match="'axes' parameter of strategy"):
        plot.strategy(st.identity(3), axes=[plt.subplots()[1]])
    with pytest.raises(ValueError, match="must hold 2 matplotlib Axes"):
        plot.strategy(K, axes=plt.subplots(1, 3)[1])
    with pytest.raises(ValueError, match=r"Got 2 object\(s\), not all Axes \(also int\)"):  # not "Got 2 … 2"
        plot.strategy(K, axes=[1, 2])
    theta = np.ones(2**7)
    with pytest.raises(ValueError, match="panels"):
        plot.strategy(st.marginals((2,) * 7, theta))
    with pytest.raises(TypeError, match="from_workload"):
        plot.strategy(wl.prefix(3))


# ---- compare ------------------------------------------------------------------------------------------------------

def test_compare_lines_are_evaluate_rmses_and_the_bound_is_the_svd_bound():
    ns = [16, 4, 8]
    ax = plot.compare(wl.all_range, ["identity", "H2", "wavelet"], ns, EPS1)
    assert [ln.get_label() for ln in ax.lines] == ["identity", "H2", "wavelet", "SVD lower bound"]
    for ln, make in zip(ax.lines, (st.identity, st.hierarchical, st.wavelet), strict=False):
        np.testing.assert_array_equal(ln.get_xdata(), [4, 8, 16])
        want = [mmopt.evaluate(wl.all_range(n), make(n), EPS1).rmse for n in (4, 8, 16)]
        np.testing.assert_array_equal(ln.get_ydata(), want)
    bound = ax.lines[-1].get_ydata()
    np.testing.assert_allclose(bound, [math.sqrt(mmopt.svd_bound(wl.all_range(n), EPS1, per_query=True))
                                       for n in (4, 8, 16)], rtol=1e-12)
    for i, n in enumerate((4, 8, 16)):  # independently: c·(Σσᵢ(W))²/(n·m) from the explicit W
        W = wl.all_range(n).explicit_matrix()
        s = np.linalg.svd(W, compute_uv=False)
        assert bound[i] == pytest.approx(math.sqrt(2 * s.sum() ** 2 / (n * W.shape[0])), rel=1e-9)
        assert all(ln.get_ydata()[i] >= bound[i] for ln in ax.lines[:-1])
    assert ax.get_xscale() == "log" and ax.xaxis.get_transform().base == 2


def test_compare_callables_labels_totals_and_the_given_axes():
    fig, ax = plt.subplots()
    opt = {"Thm 5.25": lambda n: st.svd_strategy(wl.prefix(n))}
    assert plot.compare(wl.prefix, opt, [3, 5], metric="total_squared_error", lower_bound=False, ax=ax) is ax
    assert len(ax.lines) == 1 and ax.lines[0].get_label() == "Thm 5.25"
    np.testing.assert_allclose(ax.lines[0].get_ydata(), [mmopt.evaluate(wl.prefix(n), opt["Thm 5.25"](n))
                                                         .total_squared_error for n in (3, 5)])
    assert ax.xaxis.get_transform().base == 10  # 3 and 5 are not powers of two
    ax2 = plot.compare(wl.prefix, [lambda n: st.hierarchical(n, 4)], [4], legend=False)
    assert ax2.lines[0].get_label() == "H4" and ax2.get_legend() is None


def test_compare_numbers_repeated_labels_and_takes_a_matrix_from_a_callable():
    """Two unnamed strategies (both 'strategy') were refused as 'two rows for strategy ...' in the rows the
    caller never passed, and a callable returning a matrix raised an AttributeError (a helper's audit)."""
    P = mmopt.Privacy(1.0)
    ax = plot.compare(wl.prefix, [lambda n: mmopt.Strategy(np.eye(n)), lambda n: np.tril(np.ones((n, n))),
                                  "H2", "H2"], [4, 8], P, metric="total_squared_error", lower_bound=False)
    assert [line.get_label() for line in ax.lines] == ["strategy", "strategy (2)", "H2", "H2 (2)"]
    lower = np.tril(np.ones((8, 8)))
    assert ax.lines[1].get_ydata()[1] == pytest.approx(mmopt.evaluate(wl.prefix(8), lower, P).total_squared_error,
                                                       rel=1e-12)
    named = plot.compare(wl.prefix, ["H2", "H2", lambda n: mmopt.Strategy(st.hierarchical(n, 2).matrix, name="H2 (2)")],
                         [4], P, lower_bound=False)
    assert [line.get_label() for line in named.lines] == ["H2", "H2 (3)", "H2 (2)"]  # a number already taken
    with pytest.raises(TypeError, match=r"'strategies' parameter of compare holds a callable that returned str"):
        plot.compare(wl.prefix, [lambda n: "H2"], [4], P)
    plt.close("all")


def test_compare_from_rows():
    rows = [{"n": n, "strategy": s, "rmse": v, "lower_bound": n / 2} for n in (4, 8) for s, v in
            (("a", 3.0 * n), ("b", 2.0 * n))]
    ax = plot.compare(rows=rows, styles={"a": "s--"}, labels={"b": "B"})
    assert [ln.get_label() for ln in ax.lines] == ["a", "B", "SVD lower bound"]
    np.testing.assert_array_equal(ax.lines[1].get_ydata(), [8.0, 16.0])
    np.testing.assert_array_equal(ax.lines[2].get_ydata(), [2.0, 4.0])
    assert ax.lines[0].get_linestyle() == "--" and ax.lines[0].get_marker() == "s"
    ratio = plot.compare(rows=[{"n": 4, "strategy": "a", "svd_ratio": 1.5}], metric="svd_ratio", lower_bound=False)
    assert ratio.get_ylabel() == "svd_ratio" and len(ratio.lines) == 1


@pytest.mark.parametrize("args, kw, err, match", [
    ((), {"rows": [{"n": 4, "strategy": "a", "rmse": 1.0}]}, ValueError, "lower_bound=False"),
    ((), {"rows": [{"n": 4, "strategy": "a", "rmse": 1.0, "lower_bound": 1.0},
                   {"n": 4, "strategy": "b", "rmse": 1.0, "lower_bound": 2.0}]}, ValueError, "two lower bounds"),
    ((), {"rows": [{"n": 4, "strategy": "a", "rmse": 0.0}], "lower_bound": False}, ValueError, "> 0"),
    ((), {"rows": [{"n": 4, "strategy": "a", "rmse": 1.0}] * 2, "lower_bound": False}, ValueError, "two rows"),
    ((), {"rows": [{"n": 4, "rmse": 1.0}], "lower_bound": False}, ValueError, "keys 'n', 'strategy'"),
    ((), {"rows": []}, TypeError, "non-empty list"),
    ((wl.prefix, ["identity"], [4]), {"rows": [{}]}, TypeError, "not both"),
    (([{"n": 4}], ["identity"], [4]), {}, TypeError, "rows="),
    ((wl.prefix, ["H1"], [4]), {}, ValueError, "'strategies' parameter of compare"),
    ((wl.prefix, [3], [4]), {}, TypeError, "'strategies'"),
    ((wl.prefix, [], [4]), {}, ValueError, "at least one"),
    ((wl.prefix, ["identity"], [4, 4]), {}, ValueError, "repeat"),
    ((wl.prefix, ["identity"], [4.0]), {}, TypeError, "'ns'"),
    ((wl.prefix, ["identity"], 4), {}, TypeError, "'ns'"),
    ((wl.prefix, ["identity"], [4]), {"metric": "max"}, ValueError, "'metric'"),
    ((wl.prefix, ["identity"], [4]), {"labels": ["x"]}, TypeError, "'labels'"),
])
def test_compare_refuses_bad_input(args, kw, err, match):
    with pytest.raises(err, match=match):
        plot.compare(*args, **kw)


# ---- error_by_shape, error_by_term (product workloads, any number of queries) ----------------------------------

def test_error_by_shape_is_the_mean_error_of_each_range_height_and_width():
    """2-D ranges on 128² (68 million queries) under H₂ ⊗ H₂: the mean over the ranges ℓ₁ high and ℓ₂ wide is
    c·Δ²·mean_{ℓ₁}(r₁M r₁ᵀ)·mean_{ℓ₂}(r₂M r₂ᵀ), brute-forced here from one factor's explicit ranges."""
    W, H = wl.ranges_2d(128), st.hierarchical(128)
    ax = plot.error_by_shape(W, st.kron(H, H), EPS1)
    E = _image(ax)
    R = wl.all_range(128).explicit_matrix()
    q = np.einsum("ij,jk,ik->i", R, _pinv_profile(H.matrix), R)
    length = R.sum(axis=1).astype(int)
    mean = np.array([q[length == k].mean() for k in range(1, 129)])
    c = 2.0 * H.sensitivity("l1") ** 4  # c·Δ² with Δ = Δ(H)² at ε = 1
    np.testing.assert_allclose(E, c * np.outer(mean, mean), rtol=1e-9)
    assert ax.get_xlabel().startswith("range width") and isinstance(ax.images[0].norm, LogNorm)
    assert len(ax.figure.axes) == 2  # the colour bar
    with pytest.raises(ValueError, match="error_by_shape"):
        plot.per_query_error(W, st.kron(H, H))
    with pytest.raises(ValueError, match="one or two attributes"):
        plot.error_by_shape(wl.prefix_3d(8), st.kron(*[st.identity(8)] * 3))


def test_error_by_shape_on_one_attribute_is_a_line_and_draws_on_the_given_axes():
    fig, ax = plt.subplots()
    assert plot.error_by_shape(wl.all_range(8), st.identity(8), EPS1, ax=ax, log=False) is ax
    np.testing.assert_allclose(ax.lines[0].get_ydata(), 2.0 * np.arange(1, 9))  # identity: 2ℓ/ε²
    assert len(fig.axes) == 1 and ax.get_yscale() == "linear"


def test_error_by_term_bars_are_each_marginals_rmse_with_its_smallest_and_largest_query():
    W = wl.marginals((6, 7, 8), 2)
    A = st.marginals((6, 7, 8), np.arange(1.0, 9.0))
    ax = plot.error_by_term(W, A, EPS1)
    E = mmopt.evaluate(W, A, EPS1, per_query=True).per_query_variance
    bounds = np.cumsum([0, 42, 48, 56])
    heights = [p.get_height() for p in ax.patches]
    want = [math.sqrt(E[a:b].mean()) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    np.testing.assert_allclose(heights, want, rtol=1e-10)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a0×a1", "a0×a2", "a1×a2"]
    seg = np.array(ax.collections[0].get_segments())  # each term's whisker spans √min … √max
    terms = list(zip(bounds[:-1], bounds[1:], strict=True))
    np.testing.assert_allclose(seg[:, 0, 1], [math.sqrt(E[a:b].min()) for a, b in terms], rtol=1e-10)
    np.testing.assert_allclose(seg[:, 1, 1], [math.sqrt(E[a:b].max()) for a, b in terms], rtol=1e-10)
    census = plot.error_by_term(wl.sf1(), st.kron(*[st.identity(n) for n in wl.sf1().shape]), EPS1)
    assert [t.get_text() for t in census.get_xticklabels()][:3] == ["P1", "P3", "P4"]


@pytest.mark.slow  # the default run's ~10 minutes (README): run with `pytest -m slow`
def test_a_large_profile_is_pooled_and_its_small_entries_get_colour():
    """Issue 36: the 4,096-cell H₂ profile drew as a nearly blank square (the resampler averaged its thin
    structure away, and its off-diagonal entries sat inside the linear 1 % band)."""
    from mmopt.plot.heatmaps import MAX_PIXELS
    ax = plot.error_profile(mmopt.strategy.hierarchical(4096))
    P = ax.images[0].get_array()
    assert P.shape == (MAX_PIXELS, MAX_PIXELS) and "8×8 blocks" in ax.get_title()
    norm = ax.images[0].norm
    coloured = np.abs(np.asarray(P)) > norm.linthresh
    assert coloured.mean() >= 0.2  # the hierarchy's blocks; at the old 1 % band only the diagonal, 1/512
    assert np.all(np.diag(P) > 0)  # each diagonal block shows its (positive) diagonal entry
    plt.close("all")
