"""mmopt.opendp.make_grouping_sets_mechanism: noiseless post-processing gives pandas' group-by exactly, OpenDP's
map uses the brute-force largest column norm of A, the calibrated σ is release_grouping_sets', OpenDP's
(ε, δ) conversion meets the budget, and the noise is OpenDP's at that σ."""

import math

import numpy as np
import pytest

import mmopt
from mmopt.dense.exact_answers import RELATIVE_CHARGE
from mmopt.hierarchy import cross, cube, release_grouping_sets, rollup, solve
from mmopt.hierarchy.records import plan_grouping_sets
from mmopt.records.domain import Attribute, Domain

dp = pytest.importorskip("opendp.prelude")
pd = pytest.importorskip("pandas")

from mmopt.opendp import grouping as og  # noqa: E402
from mmopt.opendp import make_grouping_sets_mechanism, records_space  # noqa: E402

COUNTIES = [f"c{i}" for i in range(7)]
STATE_OF = ["A", "A", "B", "B", "B", "C", "C"]
D = Domain((Attribute("county", categories=tuple(COUNTIES)), Attribute("sex", categories=("F", "M")),
            Attribute("age", categories=("young", "old"))))
SETS = cross(rollup("state", "county"), cube("sex", "age"))
GAUSS = mmopt.Privacy(1.0, 1e-6)
ZCDP = dp.zero_concentrated_divergence()


def _records(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"county": rng.choice(COUNTIES, n, p=np.linspace(1, 3, 7) / 14),
                         "sex": rng.choice(["F", "M"], n), "age": rng.choice(["young", "old"], n)})


def _pieces(**kw):
    kw.setdefault("privacy", GAUSS)
    return og.pieces(*records_space(D), ZCDP, D, SETS, leaf="county", levels={"state": STATE_OF}, **kw)


@pytest.fixture(scope="module")
def df():
    return _records()


def test_noiseless_post_processing_is_the_group_by(df):
    """Least squares on the exact measurements A x answers every grouping set exactly (A supports W)."""
    T, _, post = _pieces()
    table = post(T(df)).table(alpha=None)
    df = df.assign(state=[STATE_OF[COUNTIES.index(c)] for c in df["county"]])
    sets = [s for s in SETS]
    for k, s in enumerate(sets):
        rows = table[table["set"] == k]
        cols = [c for c in ("state", "county", "sex", "age") if c in s or (c == "state" and "county" in s)]
        if not cols:
            assert rows["estimate"].item() == pytest.approx(len(df), rel=1e-9)
            continue
        truth = df.groupby(cols).size()
        got = rows.set_index(cols)["estimate"].reindex(truth.index)
        np.testing.assert_allclose(got.to_numpy(), truth.to_numpy(), rtol=1e-9, atol=1e-7)
        assert len(rows) == len(truth)  # every group is in the data, and one row each


@pytest.mark.parametrize("family", ["chosen", "residual"])
def test_map_is_exact_in_d_in_at_the_brute_force_sensitivity(family):
    """ρ(d_in) = (d_in·Δ₂)²/2σ² with Δ₂ ≥ max_c ‖A e_c‖ (every cell's column, computed one by one), equal to it
    up to the upward rounding; for both strategy families."""
    plan = plan_grouping_sets(D, SETS, GAUSS, leaf="county", levels={"state": STATE_OF})
    if family == "residual":
        plan = plan_grouping_sets(D, SETS, GAUSS, leaf="county", levels={"state": STATE_OF},
                                  strategy=solve(plan.workload).strategy)
    m = plan.measurements
    assert m.family in (("residual",) if family == "residual" else ("nodes", "dense"))  # dense: auto's, 24 cells
    cols = []
    for c in range(int(np.prod(plan.workload.shape))):
        e = np.zeros(int(np.prod(plan.workload.shape)))
        e[c] = 1.0
        col = m.answer(e.reshape(plan.workload.shape))
        assert col.size == m.size  # the measurement count the OpenDP output domain is built with
        cols.append(np.linalg.norm(col))
    brute = max(cols)
    # the closed form is the brute-force maximum to round-off; d_in is it rounded up by the 1e-7 relative slack
    # of mmopt.structured.release.upper_sensitivity (a proven margin over the closed form's float rounding), and for
    # every family the measurements' own rounding charged (hierarchy.charged, dense.exact_answers: about 9.5e-7)
    assert m.exact == pytest.approx(brute, rel=1e-12)
    charge = RELATIVE_CHARGE  # every family charges the rounding of A x now (dense: exact_answers)
    assert brute <= m.sensitivity <= brute * (1 + 2e-7) * (1 + 1.01 * charge)
    T, noise, _ = _pieces(scale=3.0, privacy=None, strategy=plan.strategy)
    meas = T >> noise
    for d_in in (1, 2, 5):
        assert meas.map(d_in) == pytest.approx((d_in * m.sensitivity) ** 2 / (2 * 9.0), rel=1e-12)
        assert meas.map(d_in) >= (d_in * brute) ** 2 / 18.0


def test_budget_calibration_matches_release_grouping_sets_and_meets_the_budget(df):
    T, noise, post = _pieces()
    meas = T >> noise >> post
    approx = dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(meas), GAUSS.delta)
    eps, delta = approx.map(1)
    assert eps <= GAUSS.epsilon and delta <= GAUSS.delta
    r = release_grouping_sets(df, D, SETS, GAUSS, leaf="county", levels={"state": STATE_OF})
    mine = meas(df)
    assert mine.release.noise_scale == r.release.noise_scale and mine.release.sensitivity == r.release.sensitivity
    for a, b in zip(mine.release.variances, r.release.variances, strict=True):
        np.testing.assert_array_equal(a, b)


def test_full_measurement_adds_opendp_noise_at_its_scale(df):
    """y − A x over many measurements: mean 0 and variance σ² within 5 standard errors of each."""
    T, noise, post = _pieces(scale=2.0, privacy=None)
    Ax = np.asarray(T(df))
    draws = np.concatenate([np.asarray(noise(Ax.tolist())) - Ax for _ in range(40)])
    n = draws.size
    assert abs(draws.mean()) <= 5 * 2.0 / math.sqrt(n)
    assert abs(draws.var() / 4.0 - 1) <= 5 * math.sqrt(2 / n)
    out = make_grouping_sets_mechanism(*records_space(D), ZCDP, D, SETS, 2.0, leaf="county",
                                       levels={"state": STATE_OF})(df)
    t = out.table()
    assert abs(t[t["set"] == len(SETS) - 1]["estimate"].item() - len(df)) <= 8 * t["std_error"].iloc[-1]


def test_refusals_name_the_parameter(df):
    space = records_space(D)
    with pytest.raises(ValueError, match="'output_measure' parameter of make_grouping_sets_mechanism"):
        make_grouping_sets_mechanism(*space, dp.max_divergence(), D, SETS, 1.0, leaf="county",
                                     levels={"state": STATE_OF})
    with pytest.raises(ValueError, match="exactly one of 'scale'"):
        make_grouping_sets_mechanism(*space, ZCDP, D, SETS, 1.0, leaf="county", levels={"state": STATE_OF},
                                     privacy=GAUSS)
    with pytest.raises(ValueError, match="'leaf' parameter of make_grouping_sets_mechanism"):
        make_grouping_sets_mechanism(*space, ZCDP, D, SETS, 1.0, leaf="tract", levels={"state": STATE_OF})
    other = Domain((Attribute("county", categories=tuple(COUNTIES)),))
    with pytest.raises(ValueError, match="'input_domain' parameter"):
        make_grouping_sets_mechanism(*records_space(other), ZCDP, D, SETS, 1.0, leaf="county",
                                     levels={"state": STATE_OF})
