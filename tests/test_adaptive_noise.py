"""The adaptive algorithms' noise sources: the OpenDP back-end's distributions, the switch, and its refusals.

Oracles: moments of Laplace(b) (mean 0, variance 2b², Var(X²) = 20b⁴) and N(0, σ²) (Var(X²) = 2σ⁴) with
tolerances of 5 standard errors at the sample size; the exponential mechanism's closed-form probabilities
(:func:`mmopt.adaptive.exponential_probabilities`) against OpenDP's draws; and seeded numpy runs that must be
bit-identical to the numpy draws the algorithms made before the switch existed.
"""

import math

import numpy as np
import pytest

import mmopt
from mmopt.adaptive import ahp, dawa, exponential_probabilities, mwem, private_partition, uniform
from mmopt.adaptive._noise import Noise, resolve_noise

pytest.importorskip("opendp")
from mmopt.adaptive import _opendp_noise as odp  # noqa: E402

N = 20_000


def _moments_ok(draws: np.ndarray, var: float, fourth: float) -> None:
    n = draws.size
    assert abs(draws.mean()) <= 5 * math.sqrt(var / n)
    assert abs((draws**2).mean() - var) <= 5 * math.sqrt((fourth - var**2) / n)


@pytest.mark.parametrize("b", [0.5, 3.0])
def test_opendp_laplace_moments(b):
    d = odp.laplace(b, N)
    assert d.shape == (N,) and d.dtype == np.float64
    _moments_ok(d, 2 * b**2, 24 * b**4)
    assert np.isclose(np.median(np.abs(d)), b * math.log(2), rtol=0.05)  # |X| ~ Exp(b): median b ln 2


@pytest.mark.parametrize("backend", ["opendp", "numpy"])
def test_discrete_laplace_has_its_law_on_the_integers(backend):
    """Pr[Z = z] ∝ e^{−|z|/b}: Pr[Z = 0] = tanh(1/(2b)), Var Z = 2q/(1 − q)² with q = e^{−1/b}; ints in, ints out."""
    b = 2.0
    noise = Noise("opendp") if backend == "opendp" else resolve_noise("numpy", 0, caller="test")
    n = 40_000 if backend == "opendp" else N
    d = noise.add_discrete_laplace(np.full(n, 7, dtype=np.int64), b) - 7
    assert d.dtype == np.int64 and d.shape == (n,)
    p0 = math.tanh(1 / (2 * b))
    assert abs(np.mean(d == 0) - p0) <= 5 * math.sqrt(p0 * (1 - p0) / n)
    q = math.exp(-1 / b)
    var = 2 * q / (1 - q) ** 2
    assert abs(np.mean(d) ** 2 + np.var(d) - var) <= 5 * math.sqrt(4 * var**2 / n)  # (fourth moment < 5 var²)
    with pytest.raises(ValueError, match="must be integers"):
        odp.add_discrete_laplace(np.zeros(2), 1.0)
    with pytest.raises(ValueError, match="at most 2\\^45"):  # numpy's geometric overflowed int64 near 1e18
        noise.add_discrete_laplace(np.zeros(2, dtype=np.int64), 1e20)
    with pytest.raises(ValueError, match="at most 2\\^53"):  # OpenDP's i64 sums saturate past 2^63: keep headroom
        odp.add_discrete_laplace(np.array([0, -(2**53) - 1]), 1.0)
    assert odp.add_discrete_laplace(np.array([2**53]), 1e-3).tolist() == [2**53]


def test_opendp_gaussian_moments():
    s = 2.0
    d = odp.gaussian(s, (100, N // 100))
    assert d.shape == (100, N // 100)
    _moments_ok(d.ravel(), s**2, 3 * s**4)


def test_opendp_add_laplace_shapes_and_centre():
    assert isinstance(odp.laplace(1.0), float)
    assert isinstance(odp.add_laplace(5.0, 1.0), float)
    v = odp.add_laplace(np.full((4, 5), 1e3), 0.1)
    assert v.shape == (4, 5) and np.all(np.abs(v - 1e3) < 10)  # P(|Lap(0.1)| ≥ 10) = e^{-100}
    with pytest.raises(ValueError, match="finite"):
        odp.add_laplace([1.0, np.nan], 1.0)
    with pytest.raises(ValueError, match="scale"):
        odp.laplace(0.0, 3)


@pytest.mark.parametrize("eps,delta", [(1.0, 1.0), (0.4, 2.0)])
def test_opendp_exponential_matches_the_formula(eps, delta):
    s = np.array([0.0, 1.0, 2.5, -1.0])
    p = exponential_probabilities(s, eps, delta)
    n = 4000
    freq = np.bincount([odp.exponential(s, eps, delta) for _ in range(n)], minlength=s.size) / n
    assert np.all(np.abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / n))


def test_opendp_gumbel_max_samples_the_gibbs_distribution():
    logits = np.array([0.3, -1.0, 1.2])
    p = np.exp(logits) / np.exp(logits).sum()
    n = 4000
    freq = np.bincount([odp.gumbel_max(logits) for _ in range(n)], minlength=3) / n
    assert np.all(np.abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / n))
    assert odp.gumbel_max([0.0, 1e9, 0.0]) == 1


def test_opendp_exponential_refuses_bad_input():
    with pytest.raises(ValueError, match="scores"):
        odp.exponential([], 1.0, 1.0)
    with pytest.raises(ValueError, match="epsilon"):
        odp.exponential([1.0, 2.0], -1.0, 1.0)


def test_resolve_noise_switch_and_refusals():
    assert resolve_noise("opendp", None, caller="f").vetted
    n = resolve_noise("numpy", 3, caller="f")
    assert n.backend == "numpy" and not n.vetted
    assert n.laplace(1.0, 3).tolist() == np.random.default_rng(3).laplace(0.0, 1.0, 3).tolist()
    assert resolve_noise(n, None, caller="f") is n
    with pytest.raises(ValueError, match="'rng' parameter of f must be None with noise='opendp'"):
        resolve_noise("opendp", 0, caller="f")
    with pytest.raises(ValueError, match="'noise' parameter of f must be one of"):
        resolve_noise("laplace", None, caller="f")
    with pytest.raises(ValueError, match="'rng' parameter of f"):
        resolve_noise("numpy", -1, caller="f")
    # found by probing: rng beside a Noise was ignored (its own generator drew); Noise("numpy") without a
    # generator failed at its first draw, Noise("bogus") ran on OpenDP and was reported as a simulation
    with pytest.raises(ValueError, match="'rng' parameter of f must be None when 'noise' is a Noise"):
        resolve_noise(n, 1, caller="f")
    with pytest.raises(ValueError, match="'rng' parameter of Noise must be a numpy Generator"):
        Noise("numpy")
    with pytest.raises(ValueError, match="'backend' parameter of Noise must be one of"):
        Noise("bogus")
    with pytest.raises(ValueError, match="'rng' parameter of Noise"):
        Noise("opendp", np.random.default_rng(0))


def test_dense_counts_past_the_limit_or_complex_are_refused():
    """ireduct ran forever on counts of 1e155 (the marginal fit's step overflowed to 0, its line search never
    ended); dual_query raised OverflowError at 1e300; privbayes dropped the imaginary part of complex counts."""
    from mmopt import adaptive
    with pytest.raises(ValueError, match="'data' parameter of ireduct must hold counts <= 1e\\+140"):
        adaptive.ireduct(np.array([[1.0, 0], [3, 4]]) * 1e155, 1.0, rng=0)
    with pytest.raises(ValueError, match="'data' parameter of dual_query must hold counts"):
        adaptive.dual_query(np.arange(8.0).reshape(2, 2, 2) * 1e300, 1.0, rng=0)
    with pytest.raises(TypeError, match="'data' parameter of privbayes must hold real counts"):
        adaptive.privbayes(np.ones((2, 2)) + 7j, 1.0, rng=0)
    with pytest.raises(TypeError, match="'keep_option' parameter of php must be True or False"):
        adaptive.php(np.ones(8), 1.0, rng=0, keep_option="no")
    from mmopt.sparse_vector import above_threshold
    for queries in ({"a": 1.0, "b": 2.0}, {1.0, 2.0}):
        with pytest.raises(TypeError, match="must be an ordered sequence"):
            above_threshold(queries, 1.0, 1.0, rng=0)


def test_numpy_noise_methods_are_the_generator_draws():
    n, g = Noise("numpy", np.random.default_rng(7)), np.random.default_rng(7)
    x = np.arange(3.0)
    assert n.add_laplace(x, 2.0).tolist() == (x + g.laplace(0.0, 2.0, size=3)).tolist()
    assert n.add_gaussian(1.5, 2.0) == 1.5 + g.normal(0.0, 2.0)
    assert n.gumbel_max([0.0, 1.0]) == int(np.argmax(np.array([0.0, 1.0]) + g.gumbel(size=2)))


X = np.repeat([5.0, 40.0, 0.0, 3.0], 8)
RUNS = {
    "uniform": lambda **kw: uniform(X, **kw),
    "mwem": lambda **kw: mwem(X, mmopt.workload.prefix(X.size), rounds=4, **kw),
    "dawa": lambda **kw: dawa(X, **kw),
    "dawa_noisy_cost_identity": lambda **kw: dawa(X, selection="noisy_cost", strategy="identity", **kw),
    "dawa_strategy": lambda **kw: dawa(X, strategy=lambda k: mmopt.strategy.hierarchical(k), **kw),
    "ahp": lambda **kw: ahp(X, **kw),
}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_every_algorithm_runs_on_opendp(name):
    r = RUNS[name](epsilon=1e6, noise="opendp")
    assert r.path == "release" and r.details["noise"] == "opendp"
    # at ε = 10⁶ the noise is ~1e-5: the estimate is what the algorithm defines on the exact data
    target = np.full(X.size, X.mean()) if name == "uniform" else X
    if name != "mwem":  # MWEM's multiplicative weights converge only over many rounds
        np.testing.assert_allclose(r.estimate, target, atol=0.01)
    assert abs(r.estimate.sum() - X.sum()) < 0.01 * X.sum()
    s = RUNS[name](epsilon=1.0, rng=0)
    assert s.path == "simulation" and s.details["noise"] == "numpy"
    with pytest.raises(ValueError, match="must be None with noise='opendp'"):
        RUNS[name](epsilon=1.0, noise="opendp", rng=0)


def test_private_partition_runs_on_opendp():
    for selection in ("exponential", "noisy_cost"):
        p = private_partition(X, 1e5, bucket_penalty=1.0, selection=selection, noise="opendp")
        assert set(p.bounds[:, 0].tolist()) >= {8, 16, 24}  # the steps are found at a huge ε
        assert p.noise == "opendp"


def test_seeded_numpy_runs_unchanged_by_a_noise_object():
    """noise=Noise('numpy', Generator(s)) is the same run as rng=s: the switch adds no draw."""
    for f in RUNS.values():
        a = f(epsilon=0.5, rng=11)
        b = f(epsilon=0.5, noise=Noise("numpy", np.random.default_rng(11)))
        assert np.array_equal(a.estimate, b.estimate)


def _recorded_scales(monkeypatch) -> list:
    """The scales OpenDP's Laplace/Gaussian measurements are built at (they add no noise here: values returned)."""
    seen = []

    def fake(kind, scale):
        seen.append((kind, scale))
        return lambda values: values

    monkeypatch.setattr(odp, "_vector_measurement", fake)
    monkeypatch.setattr(odp, "_integer_laplace", lambda scale: fake("discrete laplace", scale))
    return seen


def test_release_scales_are_widened_by_the_margin(monkeypatch):
    seen = _recorded_scales(monkeypatch)
    for b in (0.1, 1.0, 3.0 / 7.0):
        Noise("opendp").add_laplace(np.zeros(2), b)
        Noise("opendp").add_gaussian(0.0, b)
        Noise("opendp").add_discrete_laplace(np.zeros(2, dtype=np.int64), b)
    from fractions import Fraction
    assert len(seen) == 9
    for (_, got), b in zip(seen, np.repeat([0.1, 1.0, 3.0 / 7.0], 3), strict=True):  # exact: ≥ b·(1 + 2⁻³¹)
        assert Fraction(got) >= Fraction(float(b)) * (1 + Fraction(1, 2**31))


@pytest.mark.parametrize(("eps", "ratio"), [(0.3, 0.1), (0.7, 0.1), (0.1, 0.9)])
def test_ahp_release_spends_at_most_epsilon_in_exact_arithmetic(monkeypatch, eps, ratio):
    # ε₁ = ρε and ε₂ = ε − ε₁ round, and so do b = 1/εᵢ: without the margin the losses 1/b₁ + 1/b₂ the draws
    # have sum to ε(1 + 1.3·10⁻¹⁶) at (0.3, 0.1) — above ε. Each count and each cluster total has L1 sensitivity 1
    # (the clusters are disjoint: parallel composition), so the loss is 1/b₁ + 1/min b₂.
    from fractions import Fraction
    seen = _recorded_scales(monkeypatch)
    ahp(np.arange(40.0), eps, ratio=ratio, noise="opendp")
    first, rest = seen[0][1], min(s for _, s in seen[1:])
    assert Fraction(1) / Fraction(first) + Fraction(1) / Fraction(rest) <= Fraction(eps)


def test_opendp_exponential_map_is_within_epsilon_without_slack():
    # the check before sampling is strict now; it must pass across scales (OpenDP's maps round upwards)
    for eps in (1e-3, 0.1, 0.3, 1.0, 7.0):
        for delta in (1.0, 0.5, 3.0):
            assert odp.exponential([0.0, 1e9], eps, delta) == 1
    assert Noise("opendp").draw_epsilon(0.3) < 0.3 == Noise("numpy", np.random.default_rng(0)).draw_epsilon(0.3)


def test_unseeded_numpy_noise_says_it_is_a_simulation():
    """An auditor's probe: mwem(x, W, ε) with the defaults drew unseeded floating-point numpy noise on the data and
    said nothing (only result.path read 'simulation'); a seeded study and OpenDP's noise stay silent."""
    import warnings

    from mmopt import workload as wl
    from mmopt.adaptive import mwem
    x = np.arange(8.0)
    with pytest.warns(UserWarning, match="mwem: noise='numpy' .* a simulation, not a release"):
        r = mwem(x, wl.prefix(8), 1.0)
    assert r.path == "simulation"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mwem(x, wl.prefix(8), 1.0, rng=0)
        resolve_noise("opendp", None, caller="f")


@pytest.mark.parametrize("name", ["efpa", "php", "ugrid", "agrid", "kd_tree", "noise_first", "structure_first",
                                  "privbayes", "dual_query", "ireduct"])
def test_every_algorithm_says_unseeded_numpy_noise_is_a_simulation(name):
    """Ten algorithms validated rng=None into a fresh Generator before resolve_noise saw it, and said nothing (a
    helper's audit); the same call seeded stays silent."""
    import warnings

    import mmopt.adaptive as adaptive
    f = getattr(adaptive, name)
    if name in ("privbayes", "dual_query", "ireduct"):  # records over a small domain
        args, kw = (np.random.default_rng(0).integers(0, 2, (40, 3)), 1.0), {}
    elif name in ("ugrid", "agrid", "kd_tree"):
        args, kw = (np.arange(16.0).reshape(4, 4), 1.0), {}
    else:
        args, kw = (np.arange(16.0), 1.0), {"count_bound": 20.0} if name == "structure_first" else {}
    with pytest.warns(UserWarning, match=f"{name}: noise='numpy' .* a simulation, not a release"):
        f(*args, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f(*args, **kw, rng=0)


@pytest.mark.parametrize("eps, delta", [(1.0, 1.0), (0.7, 2.0)])
def test_monotone_exponential_is_the_softmax_at_epsilon_over_delta(eps, delta):
    """p ∝ exp(ε·s/Δ) on both back-ends: twice the general mechanism's sharpness (monotone scores only)."""
    s = np.array([0.0, 1.0, 2.5, -1.0])
    p = np.exp(eps * s / delta) / np.exp(eps * s / delta).sum()
    np.testing.assert_allclose(exponential_probabilities(s, 2 * eps, delta), p, rtol=1e-12)
    n = 4000
    g = Noise("numpy", np.random.default_rng(4))
    for draw in (lambda: g.exponential_monotone(s, eps, delta), lambda: odp.exponential_monotone(s, eps, delta)):
        freq = np.bincount([draw() for _ in range(n)], minlength=s.size) / n
        assert np.all(np.abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / n))


def test_opendp_monotone_map_is_half_the_general_one():
    """OpenDP's own map on a monotonic L∞ metric: the same ε at half the scale (checked before every draw)."""
    for eps in (1e-3, 0.3, 1.0, 7.0):
        for delta in (1.0, 0.5, 3.0):
            assert odp.exponential_monotone([0.0, 1e9], eps, delta) == 1
    beta = 2.0
    general, kind = odp._gumbel_measurement(beta)
    monotone, _ = odp._gumbel_measurement(beta, True)
    ratio = 4.0 if kind == "zCDP" else 2.0  # zCDP maps (Δ/β)²/8: a factor 2 in ε is 4 in ρ
    assert float(general.map(1.0)) == pytest.approx(ratio * float(monotone.map(1.0)), rel=1e-9)
    with pytest.raises(ValueError, match="epsilon"):
        odp.exponential_monotone([1.0, 2.0], 0.0, 1.0)


@pytest.mark.parametrize("epsilon", [1e-160, 1e155])
def test_an_exponential_mechanism_outside_its_epsilon_range_is_refused_by_name(epsilon):
    """ε = 10⁻¹⁶⁰ read as a privacy failure (ε²/8 is subnormal, OpenDP's map one rounding step above it) and
    ε = 10¹⁵⁵ escaped as a raw OpenDPException (the map overflowed); both ends of the range work."""
    pytest.importorskip("opendp")
    from mmopt.adaptive._opendp_noise import exponential, exponential_monotone
    for draw in (exponential, exponential_monotone):
        with pytest.raises(ValueError, match=f"'epsilon' parameter of {draw.__name__} must be in"):
            draw([0.0, 1.0], epsilon, 1.0)
        assert draw([0.0, 1.0], 1e-150, 1.0) in (0, 1) and draw([0.0, 1.0], 1e150, 1.0) == 1
