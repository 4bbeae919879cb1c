"""mmopt.opendp.make_matrix_mechanism: the same numbers as release_marginals, OpenDP's map (exact in d_in, tight
on the data), OpenDP's noise at that scale, and an OpenDP Context that holds the budget and refuses to overspend."""

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest

import mmopt
from mmopt.records import Attribute, Domain, mechanism, release_marginals

dp = pytest.importorskip("opendp.prelude")
pd = pytest.importorskip("pandas")

from mmopt.opendp import FEATURES, make_matrix_mechanism, records_domain, records_space  # noqa: E402
from mmopt.opendp import measurement as om  # noqa: E402

D = Domain((Attribute("state", categories=("A", "B", "C")),
            Attribute("county", categories=tuple("abcde")),
            Attribute("sex", categories=("F", "M")),
            Attribute("age", edges=(0, 18, 40, 65, 120))))
WL = [("state", "sex"), ("county", "age"), ("state",), ()]
GAUSS, LAPLACE = mmopt.Privacy(1.0, 1e-6), mmopt.Privacy(1.0)
ZCDP, PURE = dp.zero_concentrated_divergence(), dp.max_divergence()


def _records(n, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"state": rng.choice(["A", "B", "C"], n), "county": rng.choice(list("abcdef"), n),
                         "sex": rng.choice(["F", "M"], n), "age": rng.uniform(0, 110, n)})


@pytest.fixture(scope="module")
def df():
    return _records(500)


def _seeded(df, workload, privacy, seed, strategy=None):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*numpy's seeded generator", category=UserWarning)
        return release_marginals(df, D, workload, privacy, seed=seed, strategy=strategy)


@pytest.mark.parametrize("privacy,measure", [(GAUSS, ZCDP), (LAPLACE, PURE)])
def test_same_numbers_as_release_marginals(df, privacy, measure):
    """The measurement's pieces, with release_marginals's seeded noise put where OpenDP's goes, reproduce the
    seeded release bit for bit: same strategy, same A x, same scale, same marginals and variances."""
    T, noise, post = om.pieces(*records_space(D), measure, D, WL, privacy=privacy)
    r = _seeded(df, WL, privacy, seed=7)
    Ax = np.asarray(T(df), dtype=np.float64)
    gen = np.random.default_rng(7)
    y = Ax + (gen.normal if privacy.noise == "gaussian" else gen.laplace)(0.0, r.noise_scale, Ax.shape)
    got = np.concatenate([r.measurements.values[S].ravel() for S in r.strategy.subsets])
    np.testing.assert_array_equal(y, got)
    mine = post(y.tolist())
    assert mine.strategy.name == r.strategy.name and mine.message == r.message
    assert (mine.noise_scale, mine.sensitivity, mine.noise) == (r.noise_scale, r.sensitivity, r.noise)
    # release_marginals draws on OpenDP's coarser lattice and reports ρ at the sensitivity charged there (≤ 2⁻²⁸
    # more); this measurement's noise is OpenDP's default make_gaussian, its ρ Δ²/(2σ²)
    assert (mine.rho is None) == (r.rho is None)
    if r.rho is not None:
        assert mine.rho <= r.rho <= mine.rho * (1 + 2.0**-28)
    assert mine.marginals.keys() == r.marginals.keys() and mine.cell_variance == r.cell_variance
    for S in r.marginals:
        np.testing.assert_array_equal(mine.marginals[S], r.marginals[S])
    pd.testing.assert_frame_equal(mine.table(alpha=0.1), r.table(alpha=0.1))
    assert noise.output_measure == measure  # OpenDP's own noise measurement, at the release's scale
    assert noise.map(r.sensitivity) == pytest.approx(mine.rho if privacy.noise == "gaussian"
                                                     else r.sensitivity / r.noise_scale, rel=1e-12)


def test_a_strategy_given_is_the_strategy_measured(df):
    from mmopt.structured import residual
    W = residual.marginal_workload(D.shape, [(0, 2), (1, 3), (0,), ()])
    A = residual.plan(W, norm="l1").strategy  # not what Laplace noise would choose by default
    T, _, post = om.pieces(*records_space(D), PURE, D, WL, 3.0, strategy=A)
    r = _seeded(df, WL, mmopt.Privacy(2.0), seed=1, strategy=A)
    assert post(T(df)).strategy is A and r.strategy is A
    assert T(df) == mechanism.strategy_answers(mechanism.prepare(D, WL, LAPLACE, A, "t"), df, caller="t")[1].tolist()


@pytest.mark.parametrize("measure", [ZCDP, PURE])
def test_map_is_exact_in_d_in_and_tight_on_data(df, measure):
    """The stability map is k·Δ rounded up (never below the rational product), and k copies of one record added
    to the data move A x by exactly that much (the map is attained, so it is exact, not just an upper bound)."""
    T, noise, _ = om.pieces(*records_space(D), measure, D, WL, 4.0)
    m = make_matrix_mechanism(*records_space(D), measure, D, WL, 4.0)
    Delta = T.map(1)
    gaussian = measure == ZCDP
    for k in (1, 2, 3, 7):
        assert Fraction(T.map(k)) >= k * Fraction(Delta)
        assert T.map(k) <= math.nextafter(k * Delta, math.inf)
        assert m.map(k) == noise.map(T.map(k))  # OpenDP composes the two maps
        want = (k * Delta) ** 2 / (2 * 16.0) if gaussian else k * Delta / 4.0
        assert m.map(k) == pytest.approx(want, rel=1e-12)
        kept = int(np.flatnonzero(df["county"] != "f")[0])  # a record inside the domain (county "f" is dropped)
        moved = pd.concat([df, df.iloc[[kept] * k]], ignore_index=True)
        diff = np.asarray(T(moved)) - np.asarray(T(df))
        norm = np.linalg.norm(diff, 2 if gaussian else 1)
        # the counts are integers and the strategy's column norms equal Δ up to upper_sensitivity's 1e-7 slack and the
        # charged rounding of A x (9.5e-7 at 2³² records: mmopt.records.exact_answers)
        assert k * Delta * (1 - 2e-6) <= norm <= T.map(k) * (1 + 1e-12)


def test_full_measurement_adds_opendp_noise_at_its_scale():
    """y − A x of a real run has OpenDP's Gaussian law at the stated σ (p = 2,000+ entries: the sample sd is
    within 5 of its standard errors √(1/2p) of σ), and the marginals are least squares on that y."""
    big = Domain((Attribute("a", categories=tuple(range(40))), Attribute("b", categories=tuple(range(60)))))
    rng = np.random.default_rng(3)
    data = pd.DataFrame({"a": rng.integers(0, 40, 3000), "b": rng.integers(0, 60, 3000)})
    T, _, post = om.pieces(*records_space(big), ZCDP, big, [("a", "b"), ("a",), ()], 2.5)
    m = make_matrix_mechanism(*records_space(big), ZCDP, big, [("a", "b"), ("a",), ()], 2.5)
    r = m(data)
    assert r.sampler == "opendp" and r.noise_scale == 2.5 and math.isnan(r.epsilon)
    y = np.concatenate([r.measurements.values[S].ravel() for S in r.strategy.subsets])
    z = y - np.asarray(T(data))
    p = z.size
    assert p > 2000
    assert abs(z.std() / 2.5 - 1) < 5 / math.sqrt(2 * p) and abs(z.mean()) < 5 * 2.5 / math.sqrt(p)
    again = post(y.tolist())
    for S in r.marginals:
        np.testing.assert_array_equal(again.marginals[S], r.marginals[S])


@pytest.fixture
def reads(monkeypatch):
    """One entry per time the measurement reads the records."""
    calls = []
    real = mechanism.strategy_answers
    monkeypatch.setattr(mechanism, "strategy_answers", lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


def test_context_holds_the_budget_and_refuses_to_overspend(df, reads):
    """A sequential compositor (OpenDP's Context with a split) pays each query from its share: the release fits
    the first share, the second share is too small and is refused before the records are read."""
    m = make_matrix_mechanism(*records_space(D), ZCDP, D, WL, privacy=GAUSS)
    rho = m.map(1)
    ctx = dp.Context.compositor(data=df, privacy_unit=dp.unit_of(contributions=1),  # shares 1.05ρ and 0.5ρ
                                privacy_loss=dp.loss_of(rho=1.55 * rho), split_by_weights=[1.05, 0.5],
                                domain=records_domain(D))
    first = ctx(m)
    assert isinstance(first, mmopt.records.RecordsRelease) and first.sampler == "opendp" and reads == [1]
    with pytest.raises(dp.OpenDPException, match="insufficient budget"):
        ctx(m)
    assert reads == [1]
    # two records per person: OpenDP evaluates the map at d_in = 2, four times the loss
    ctx2 = dp.Context.compositor(data=df, privacy_unit=dp.unit_of(contributions=2),
                                 privacy_loss=dp.loss_of(rho=4.01 * rho), split_evenly_over=1,
                                 domain=records_domain(D))
    assert ctx2(m).marginals.keys() == first.marginals.keys() and reads == [1, 1]
    ctx3 = dp.Context.compositor(data=df, privacy_unit=dp.unit_of(contributions=2),
                                 privacy_loss=dp.loss_of(rho=3.99 * rho), split_evenly_over=1,
                                 domain=records_domain(D))
    with pytest.raises(dp.OpenDPException, match="insufficient budget"):
        ctx3(m)
    assert reads == [1, 1]


def test_opendp_s_privacy_filter_withholds_an_overspending_answer(df, reads):
    """Without a split, OpenDP's Context is a privacy filter: the second release would exceed the budget and is
    withheld (OpenDP may compute it first), and the filter stays closed."""
    m = make_matrix_mechanism(*records_space(D), ZCDP, D, WL, privacy=GAUSS)
    try:
        ctx = dp.Context.compositor(data=df, privacy_unit=dp.unit_of(contributions=1),
                                    privacy_loss=dp.loss_of(rho=1.5 * m.map(1)), domain=records_domain(D))
    except ValueError as exc:  # OpenDP 0.13 has no filter in Context: it asks for a split
        pytest.skip(f"this OpenDP's Context has no privacy filter: {exc}")
    assert ctx(m).sampler == "opendp"
    with pytest.raises(dp.OpenDPException, match="exceed privacy budget"):
        ctx(m)
    with pytest.raises(dp.OpenDPException, match="exhausted"):
        ctx(m)


def test_approximate_dp_by_opendp_s_own_conversion_meets_the_budget():
    m = make_matrix_mechanism(*records_space(D), ZCDP, D, WL, privacy=GAUSS)
    approx = dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(m), GAUSS.delta)
    eps, delta = approx.map(1)
    assert eps <= GAUSS.epsilon and delta == GAUSS.delta and approx.check(1, (GAUSS.epsilon, GAUSS.delta))
    # and calibrated no looser than needed: 1% less noise would not meet ε
    tighter = make_matrix_mechanism(*records_space(D), ZCDP, D, WL, 0.99 * _scale(m))
    assert dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(tighter), GAUSS.delta).map(1)[0] > GAUSS.epsilon


def _scale(m):
    """σ from the measurement's own map: ρ = Δ²/(2σ²)."""
    T, _, _ = om.pieces(*records_space(D), ZCDP, D, WL, 1.0)
    return T.map(1) / math.sqrt(2 * m.map(1))


def test_parquet_path_is_a_member_and_gives_the_dataframe_s_answers(df, tmp_path):
    pytest.importorskip("pyarrow")
    path = tmp_path / "people.parquet"
    df.to_parquet(path)
    T, _, _ = om.pieces(*records_space(D), ZCDP, D, WL, 1.0)
    assert T(str(path)) == T(df)
    assert om.is_records(str(path)) and om.is_records(df) and not om.is_records([1, 2])


def test_honest_but_curious_is_switched_on_only_while_building():
    from opendp.mod import GLOBAL_FEATURES
    was = "honest-but-curious" in GLOBAL_FEATURES
    dp.disable_features("honest-but-curious")
    try:
        make_matrix_mechanism(*records_space(D), ZCDP, D, WL, 1.0)
        assert "honest-but-curious" not in GLOBAL_FEATURES and "contrib" in GLOBAL_FEATURES
        dp.enable_features("honest-but-curious")
        make_matrix_mechanism(*records_space(D), ZCDP, D, WL, 1.0)
        assert "honest-but-curious" in GLOBAL_FEATURES  # the caller's own choice is kept
    finally:
        (dp.enable_features if was else dp.disable_features)("honest-but-curious")
    assert FEATURES == ("contrib", "honest-but-curious")


def test_refusals_name_the_parameter():
    space = records_space(D)
    with pytest.raises(ValueError, match="'output_measure' parameter of make_matrix_mechanism"):
        make_matrix_mechanism(*space, dp.approximate(dp.max_divergence()), D, WL, 1.0)
    with pytest.raises(ValueError, match="'input_metric' parameter of make_matrix_mechanism"):
        make_matrix_mechanism(space[0], dp.insert_delete_distance(), ZCDP, D, WL, 1.0)
    other = Domain((Attribute("state", categories=("A", "B")),))
    with pytest.raises(ValueError, match="'input_domain' parameter of make_matrix_mechanism"):
        make_matrix_mechanism(records_domain(other), space[1], ZCDP, D, WL, 1.0)
    with pytest.raises(ValueError, match="exactly one of 'scale'.*Got both"):
        make_matrix_mechanism(*space, ZCDP, D, WL, 1.0, privacy=GAUSS)
    with pytest.raises(ValueError, match="Got neither"):
        make_matrix_mechanism(*space, ZCDP, D, WL)
    with pytest.raises(ValueError, match="asks for laplace noise"):
        make_matrix_mechanism(*space, ZCDP, D, WL, privacy=LAPLACE)
    with pytest.raises(ValueError, match=r"'scale' parameter of make_matrix_mechanism must be a float in the range"):
        make_matrix_mechanism(*space, PURE, D, WL, -1.0)
    with pytest.raises(ValueError, match="names attribute 'nope'"):
        make_matrix_mechanism(*space, PURE, D, [("nope",)], 1.0)
    with pytest.raises(TypeError, match="'domain' parameter of records_domain"):
        records_domain("D")


@pytest.mark.parametrize("batch_size", [0, -5, "many", 2.5])
def test_batch_size_is_checked_when_the_measurement_is_built(batch_size):
    """It was accepted at build time and failed on invocation, as an OpenDPException wrapping the records' message."""
    with pytest.raises((ValueError, TypeError), match="'batch_size' parameter of make_matrix_mechanism"):
        make_matrix_mechanism(*records_space(D), ZCDP, D, WL, 4.0, batch_size=batch_size)


def test_a_draw_opendps_sampler_has_no_memory_for_is_refused_before_it_starts(monkeypatch):
    """The guard counted 8 bytes a measurement; OpenDP's sampler holds ~480 (a Python list in, Rust vectors, a list
    out), and 1.2·10⁷ measurements under a 3 GiB cap aborted the process (a helper's probe). 600,000 measurements
    (~300 MB) against a 256 MB limit: refused by name, nothing drawn."""
    from mmopt._base import guards
    from mmopt._base import opendp as odp
    monkeypatch.setattr(guards, "MAX_WORKING_SET_BYTES", 2**28)
    before = odp.DRAWS
    with pytest.raises(ValueError, match="caller_x: drawing 600,000 noisy measurements through OpenDP .* more than"):
        odp.measure(np.zeros(600_000), 1.0, mmopt.Privacy(1.0), noise_scale=None, caller="caller_x")
    with pytest.raises(ValueError, match="drawing 600,000 noisy measurements"):
        odp.gaussian_sampler(600_000, 1.0, "caller_x")
    assert odp.DRAWS == before


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="RLIMIT_AS and /proc: Linux")
def test_available_memory_respects_the_process_address_space_limit():
    """available_memory read the machine's MemAvailable only: under a 3 GiB RLIMIT_AS on a 22 GB machine the guards
    allowed what raised MemoryError (a helper's probe)."""
    import subprocess
    import sys
    code = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30)); "
            "from mmopt._base import guards; print(guards.available_memory())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert 0 <= int(out.stdout) <= 3 * 2**30
