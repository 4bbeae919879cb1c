"""The streamed correlated noise C⁻¹z: the recursion against the dense solve for seeded draws, OpenDP's draws
whitened back, the covariance by Monte-Carlo (slow), and the run's privacy against its formulas."""

import math

import numpy as np
import pytest

import mmopt
from mmopt import toeplitz
from mmopt.participation import fixed_epochs, min_separation
from mmopt.participation.noise import correlate, run_privacy, stream_noise
from mmopt.participation.sensitivity import gram_sensitivity_squared
from mmopt.privacy import gaussian_delta

STRATEGIES = {
    "banded": lambda n: toeplitz.banded([1.0, 0.45, 0.3, 0.2], n),
    "banded+rows": lambda n: toeplitz.equalized(toeplitz.banded([1.0, 0.45, 0.3, 0.2], n)),
    "blt": lambda n: toeplitz.blt([0.3, 0.1], [0.9, 0.5], n),
    "blt+rows": lambda n: toeplitz.equalized(toeplitz.blt([0.3, 0.1], [0.9, 0.5], n)),
    "sqrt": lambda n: toeplitz.sqrt_strategy(n),
}


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_the_stream_is_the_dense_solve_for_seeded_draws(name):
    n, p = 48, 3
    C = STRATEGIES[name](n)
    Z = np.random.default_rng(5).standard_normal((n, p))
    X = np.array(list(correlate(C, Z)))
    dense = np.linalg.solve(C.to_dense(), Z)
    # forward substitution vs LU: both backward stable, the difference is κ(C)·n·u relative to |x|
    kappa = np.linalg.cond(C.to_dense())
    np.testing.assert_allclose(X, dense, rtol=0, atol=kappa * n * 1e-16 * np.abs(dense).max())
    assert X.shape == (n, p)


def test_the_state_is_o_of_bands():
    C = toeplitz.banded([1.0, 0.5, 0.25], 10_000)
    gen = correlate(C, iter(np.ones((10_000, 2))))
    for _ in range(100):
        next(gen)
    state = gen.gi_frame.f_locals["past"]
    assert state.maxlen == 2 and len(state) == 2  # B − 1 = 2 past vectors, whatever n


def test_opendp_draws_whitened_back_are_white_at_the_scale():
    n, p, sigma, clip = 8, 500, 1.3, 0.5
    C = STRATEGIES["blt+rows"](n)
    X = np.array(list(stream_noise(C, sigma, dimension=p, clip_norm=clip)))
    Z = C.to_dense() @ X  # z = C x: the draws themselves
    s2 = np.mean(Z**2) / (sigma * clip) ** 2
    # the variance estimate of n·p = 4,000 standard normals has relative sd √(2/4000) = 2.2 %: 5 sd
    assert abs(s2 - 1) < 5 * math.sqrt(2 / (n * p))
    assert abs(np.corrcoef(Z[:-1].ravel(), Z[1:].ravel())[0, 1]) < 5 / math.sqrt(n * p)  # independent steps


@pytest.mark.slow
@pytest.mark.parametrize("name", ["banded+rows", "blt"])
def test_monte_carlo_covariance_is_sigma_squared_x_inverse(name):
    n, p, sigma = 12, 20_000, 0.8  # p coordinates = p independent paths of the n steps (OpenDP, 240,000 draws)
    C = STRATEGIES[name](n)
    X = np.array(list(stream_noise(C, sigma, dimension=p)))
    emp = X @ X.T / p  # mean zero is known: no centring
    Ct = C.to_dense()
    Sigma = sigma**2 * np.linalg.inv(Ct.T @ Ct)
    # each entry's sd for known-mean Gaussian samples: √((Σ_ii Σ_jj + Σ_ij²)/p); 78 entries, two-sided 5.5 sd is a
    # false alarm probability ≈ 3e-6
    sd = np.sqrt((np.outer(np.diag(Sigma), np.diag(Sigma)) + Sigma**2) / p)
    assert np.max(np.abs(emp - Sigma) / sd) < 5.5


@pytest.mark.parametrize("schema", [fixed_epochs(4), min_separation(3, 3)])
@pytest.mark.parametrize("name", ["banded", "blt+rows"])
def test_run_privacy_is_the_gaussian_mechanism_at_the_schema_sensitivity(schema, name):
    n, sigma, delta = 24, 1.7, 1e-6
    C = STRATEGIES[name](n)
    A = C.to_dense()
    brute = max(A[:, list(p)].sum(axis=1) @ A[:, list(p)].sum(axis=1) for p in schema.patterns(n))  # X ≥ 0: 1ᵀX_π1
    assert np.all(A.T @ A >= 0)
    priv = run_privacy(C, schema, sigma, delta=delta)
    assert priv.sensitivity.squared == pytest.approx(brute, rel=1e-12)
    assert priv.sensitivity.squared == pytest.approx(gram_sensitivity_squared(A.T @ A, schema).squared, rel=1e-12)
    # Δ rounded upwards by the release paths' slack of 10⁻⁷ (structured.release.upper_sensitivity): ρ at or above
    assert brute / (2 * sigma**2) <= priv.rho <= brute / (2 * sigma**2) * (1 + 3e-7)
    # ε is the Gaussian mechanism's exact one (Balle & Wang): δ(ε) ≤ δ, and a hair less ε is not private (up to
    # Δ's upward rounding of 10⁻⁷); OpenDP's conversion of ρ is valid but looser
    from mmopt.accounting._zcdp import epsilon_of_rho
    assert gaussian_delta(sigma / math.sqrt(brute), priv.epsilon) <= delta * (1 + 1e-9)
    assert gaussian_delta(sigma / math.sqrt(brute), priv.epsilon * (1 - 1e-6)) > delta
    assert priv.epsilon < epsilon_of_rho(priv.rho, delta) <= priv.rho + 2 * math.sqrt(priv.rho * math.log(1 / delta))
    assert run_privacy(C, schema, sigma).epsilon is None


def test_more_participations_cost_more_privacy():
    C = toeplitz.banded([1.0, 0.5], 64)
    rhos = [run_privacy(C, fixed_epochs(k), 1.0).rho for k in (1, 2, 4, 8)]
    assert np.all(np.diff(rhos) > 0) and rhos[2] == pytest.approx(4 * rhos[0], rel=1e-12)  # ≤ b bands: Δ² = k‖c‖²


@pytest.mark.parametrize("call,error,match", [
    (lambda: list(stream_noise(np.eye(4), 1.0)), TypeError, "ToeplitzStrategy"),
    (lambda: stream_noise(toeplitz.banded([1.0], 4), 0.0), ValueError, "noise_multiplier"),
    (lambda: stream_noise(toeplitz.banded([1.0], 4), 1.0, steps=5), ValueError, "steps"),
    (lambda: stream_noise(toeplitz.banded([1.0], 4), 1e200, clip_norm=1e200), ValueError,
     r"noise_multiplier × clip_norm = 1e\+200 × 1e\+200 overflows"),
    (lambda: stream_noise(toeplitz.banded([1.0], 4), 1e-200, clip_norm=1e-200), ValueError,
     r"noise_multiplier × clip_norm = 1e-200 × 1e-200 underflows"),  # named noise_multiplier "Got 0.0" before
    (lambda: list(correlate(toeplitz.banded([1.0], 4), iter(np.ones((2, 1))))), ValueError, "draws ended"),
    (lambda: correlate(toeplitz.banded([1.0], 4), np.ones((2, 1))), ValueError, "array of 2 rows"),
    (lambda: list(correlate(toeplitz.banded([1.0], 4), [np.nan] * 4)), ValueError, "not finite"),
    (lambda: run_privacy(toeplitz.banded([1.0], 4), fixed_epochs(2), 1.0, delta=0.0), ValueError, "delta"),
    (lambda: run_privacy(toeplitz.banded([1.0], 4), "epochs", 1.0), TypeError, "participation"),
    # found by probing (each passed before): a scalar among vector draws broadcast to every coordinate; a C whose
    # inverse overflows streamed NaN and inf noise from step ~1,000; a non-causal or singular C was accounted
    (lambda: list(correlate(toeplitz.banded([1.0, 0.5], 3), [np.zeros(3), 1.0, np.ones(3)])), ValueError,
     r"one shape. Step 0 had \(3,\), step 1 has \(\)"),
    (lambda: stream_noise(toeplitz.banded([1.0, 2.0], 2000), 1.0), ValueError, "stream_noise: .* overflow"),
    (lambda: correlate(toeplitz.banded([1.0, 2.0], 2000), np.zeros((2000, 1))), ValueError, "correlate: .* overflow"),
    (lambda: run_privacy(np.triu(np.ones((6, 6))), fixed_epochs(2), 1.0), ValueError, "must be lower-triangular"),
    (lambda: run_privacy(np.zeros((6, 6)), fixed_epochs(2), 1.0), ValueError, "must be invertible"),
    # a product strategy (what optimize(kron(…), participation=single()) returns) was "not a 2-D array"
    (lambda: run_privacy(mmopt.strategy.kron(np.eye(3), np.eye(2)), fixed_epochs(2), 1.0), TypeError,
     "is an implicit product strategy .* which has no step order"),
    # a run whose length the schema does not divide was refused as "the 'n' parameter of sensitivity_squared"
    (lambda: run_privacy(toeplitz.banded([1.0, 0.5], 8), fixed_epochs(3), 1.0), ValueError,
     r"'strategy' parameter of run_privacy must have a number of steps n that is a multiple of the 3 epochs"),
    (lambda: run_privacy(np.tril(np.ones((8, 8))), fixed_epochs(3), 1.0), ValueError,
     r"'strategy' parameter of run_privacy must have a number of steps n .* Got n=8"),
    (lambda: gram_sensitivity_squared(-np.eye(4), fixed_epochs(2)), ValueError, "negative on its diagonal"),
    (lambda: gram_sensitivity_squared(np.tril(np.ones((4, 4))), fixed_epochs(2)), ValueError, "not symmetric"),
    (lambda: gram_sensitivity_squared(np.array([[1.0, 2.0], [2.0, 1.0]]), fixed_epochs(2)), ValueError,
     "larger off its diagonal"),
])
def test_bad_input_is_refused(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_optimized_banded_strategy_streams_and_accounts():
    res = mmopt.optimize(toeplitz.prefix(64), participation=fixed_epochs(4), method="banded")
    priv = run_privacy(res.strategy, fixed_epochs(4), 1.0, delta=1e-5)
    assert priv.sensitivity.exact and priv.rho == pytest.approx(res.extra["sensitivity_squared"] / 2, rel=3e-7)
    X = np.array(list(correlate(res.strategy, np.eye(64))))  # unit draws: the columns of C⁻¹
    np.testing.assert_allclose(X, np.linalg.inv(res.strategy.to_dense()), atol=1e-10)


def test_run_privacy_refuses_a_non_square_strategy():
    """The causality check returned early for a non-square C: an anti-causal C with a zero row appended got a ρ
    certificate for adaptive training (the square one was refused)."""
    U = np.triu(np.ones((4, 4)))
    with pytest.raises(ValueError, match="must be lower-triangular"):
        run_privacy(U, fixed_epochs(2), 1.0)
    with pytest.raises(ValueError, match=r"must be square \(n×n, one row per step"):
        run_privacy(np.vstack([U, np.zeros((1, 4))]), fixed_epochs(2), 1.0, delta=1e-6)


def test_correlate_names_bad_draws():
    # None failed only at the first next() with "'NoneType' object is not iterable", text with numpy's own
    # message, and complex draws were silently truncated to their real parts
    C = toeplitz.banded([1.0, 0.5], 4)
    with pytest.raises(TypeError, match="'draws' parameter of correlate must be an iterable of arrays"):
        correlate(C, None)
    for bad in (["a"] * 4, np.array([[1 + 5j], [0], [0], [0]]), [True] * 4):
        with pytest.raises(TypeError, match="'draws' parameter of correlate must give real numbers"):
            list(correlate(C, bad))
    # an array of more rows than steps was read up to the steps, silently: a (p, n) array passed for (n, p) was used
    # with its first rows as steps (an auditor's probe)
    with pytest.raises(ValueError, match="array of 20 rows .* for 4 steps. Pass 4 rows"):
        correlate(C, np.ones((20, 2)))
    assert len(list(correlate(C, np.ones((20, 2))[:4]))) == 4
    # a NaN counted as non-zero above the diagonal: "must be lower-triangular" (a helper's probe)
    with pytest.raises(ValueError, match="'strategy' parameter of run_privacy must be finite. Got 16 NaN"):
        run_privacy(np.full((4, 4), np.nan), fixed_epochs(1), 1.0)


def test_run_privacy_at_extreme_noise_multipliers():
    """σ = 10⁻²⁰⁰: ρ = Δ²/(2σ²) overflows to inf and ε is inf (epsilon_of_rho refused ρ = inf by its own name);
    σ = 10²⁰⁰: ρ underflows to the smallest subnormal (rounded up) and ε is finite (it was inf)."""
    C = toeplitz.banded([1.0, 0.5], 64)
    loud = run_privacy(C, fixed_epochs(4), 1e-200, delta=1e-6)
    assert loud.rho == math.inf and loud.epsilon == math.inf
    quiet = run_privacy(C, fixed_epochs(4), 1e200, delta=1e-6)
    assert 0 < quiet.rho and quiet.epsilon == 0.0


def test_a_run_at_extreme_scales_is_accounted_or_refused_never_reported_private():
    """CᵀC (and the Toeplitz c∘c) underflowed: C and σ both scaled by 1e-170 reported ε = 0 (marked exact) for a run
    whose privacy is that of the unscaled one (ρ = 0.625), and at 1e-160 a Δ² of 5e-320 with lost digits; past
    1e154 the Gram overflowed inside the accounting. Within float64's range the ratio C/σ decides, exactly."""
    pytest.importorskip("opendp")
    schema = fixed_epochs(4)
    reference = run_privacy(toeplitz.banded([1.0, 0.5], 64), schema, 2.0, delta=1e-6)
    assert reference.rho == pytest.approx(0.625)
    for s in (1e-100, 1e100, 2.0**-400):
        p = run_privacy(toeplitz.banded([s, 0.5 * s], 64), schema, 2.0 * s, delta=1e-6)
        assert p.rho == pytest.approx(reference.rho, rel=1e-12) and p.epsilon == pytest.approx(reference.epsilon)
        dense = run_privacy(np.array([[1.0, 0.0], [0.5, 1.0]]) * s, mmopt.participation.single(), s, delta=1e-6)
        assert dense.rho == pytest.approx(0.625, rel=3e-7)
    for s in (1e-160, 1e-170, 1e160):
        for C, sch in ((toeplitz.banded([s, 0.5 * s], 64), schema),
                       (np.array([[1.0, 0.0], [0.5, 1.0]]) * s, mmopt.participation.single())):
            with pytest.raises(ValueError, match="Δ² of this strategy is (below|above) float64's normal range"):
                run_privacy(C, sch, 2.0 * s, delta=1e-6)


def test_run_privacy_rho_is_at_least_the_exact_rational_one():
    """An auditor's probe: Δ rounded up by one ulp left a BLT's Δ² 6–8·10⁻¹⁶ below its exact value from the
    stored coefficients (the sums' rounding), so ρ was a hair below the truth. Here Δ² is computed in rationals."""
    from fractions import Fraction
    n, k, sigma = 256, 4, 1.3
    C = toeplitz.blt([0.4, 0.2], [0.9, 0.3], n)
    c = [Fraction(float(x)) for x in C.coefficients]
    b = n // k
    exact = max(sum(sum(c[i - t] for t in range(j, i + 1, b)) ** 2 for i in range(j, n)) for j in range(b))
    priv = run_privacy(C, fixed_epochs(k), sigma)
    assert Fraction(priv.rho) * 2 * Fraction(sigma) ** 2 >= exact
    assert priv.rho <= float(exact) / (2 * sigma**2) * (1 + 3e-7)


def test_a_stopped_solve_is_not_called_a_certified_optimum():
    """A fixed-epochs run stopped by its iteration budget said "certified optimum under …" beside user_limit (an
    auditor's probe)."""
    import mmopt
    r = mmopt.optimize(mmopt.workload.prefix(16), participation=fixed_epochs(2), max_iterations=1)
    assert r.status == "user_limit" and "certified optimum" not in r.message and "stopped" in r.message
    done = mmopt.optimize(mmopt.workload.prefix(16), participation=fixed_epochs(2))
    assert done.status == "optimal" and done.message.startswith("certified optimum")


def test_evaluate_and_release_say_a_training_strategy_is_taken_once_per_record():
    """evaluate took each record once: its error for optimize(..., participation=fixed_epochs(4))'s strategy was
    ~3× below the run's (the result's objective), without a word (an auditor's trap)."""
    import warnings

    import mmopt
    W, P = mmopt.workload.prefix(16), mmopt.Privacy(1.0, 1e-6)
    r = mmopt.optimize(W, participation=fixed_epochs(4))
    with pytest.warns(UserWarning, match=r"optimised for private training under FixedEpochs\(epochs=4\).*run_privacy"):
        e = mmopt.evaluate(W, r.strategy, P)
    assert e.total_squared_error < r.objective * P.variance_factor  # the single-participation figure: lower
    with pytest.warns(UserWarning, match="private training"):
        mmopt.release(W, r.strategy, np.arange(16.0), P)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        one = mmopt.optimize(W, participation=mmopt.participation.single())
        mmopt.evaluate(W, one.strategy, P)


def test_the_advice_for_a_last_iterate_strategy_is_one_that_takes_it():
    """objective='last_iterate' returns the one sum (1×n): the warning sent it to run_privacy, which refuses a
    non-square strategy and said every participation strategy is square (a helper's audit)."""
    import mmopt
    from mmopt.participation import sensitivity_squared
    W, P, schema = mmopt.workload.prefix(8), mmopt.Privacy(1.0, 1e-6), fixed_epochs(2)
    r = mmopt.optimize(W, privacy=P, objective="last_iterate", participation=schema)
    assert r.strategy.matrix.shape == (1, 8)
    with pytest.warns(UserWarning, match=r"private training.*sensitivity_squared\(strategy, schema\)") as caught:
        mmopt.evaluate(mmopt.workload.total(8), r.strategy, P)  # the one query it answers
    assert "run_privacy" not in str(caught[0].message)
    assert sensitivity_squared(r.strategy, schema).exact  # the advice runs
    with pytest.raises(ValueError, match="must be square.*one row for objective='last_iterate'"):
        run_privacy(r.strategy, schema, 1.0)


def test_the_training_mark_is_kept_by_save_and_load_and_absent_for_one_step_per_record(tmp_path):
    """fixed_epochs(1) takes each record once, and evaluate's figures are the run's: it warned (a review); a saved
    and loaded strategy lost the mark, and warned no more."""
    import warnings

    import mmopt
    W, P = mmopt.workload.prefix(16), mmopt.Privacy(1.0, 1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for schema in (fixed_epochs(1), mmopt.participation.min_separation(16, 4)):
            mmopt.evaluate(W, mmopt.optimize(W, participation=schema).strategy, P)
    r = mmopt.optimize(W, participation=fixed_epochs(4))
    mmopt.save(tmp_path / "run.npz", r)
    with pytest.warns(UserWarning, match=r"private training under FixedEpochs\(epochs=4\)"):
        mmopt.evaluate(W, mmopt.load(tmp_path / "run.npz").strategy, P)
