"""iReduct (fresh-measurement variant): budget and generalised sensitivity per round, every draw through the Noise,
the allocation rule, exact marginals at huge ε, the certified fit, OpenDP path, records input, input checks, and a
deterministic privacy-loss bound over every neighbour (tests/_replay.py)."""

import math

import numpy as np
import pytest
from _recording_noise import Recording
from _replay import worst_loss

from mmopt.adaptive import ireduct
from mmopt.adaptive._marginals import project
from mmopt.adaptive._noise import Noise


def _data(seed=3, shape=(2, 3, 4)):
    """Correlated whole counts with some small and empty cells."""
    rng = np.random.default_rng(seed)
    n = 400
    a = rng.integers(0, shape[0], n)
    b = (a + (rng.random(n) < 0.2)) % shape[1]
    c = (2 * b + (rng.random(n) < 0.1) * rng.integers(0, shape[2], n)) % shape[2]
    x = np.zeros(shape)
    np.add.at(x, (a, b, c), 1)
    return x


class _Exact(Noise):
    """Zero noise: every 'noisy' value is the true one (to test what the algorithm computes from its inputs)."""

    def add_laplace(self, values, scale):
        return np.array(values, dtype=float) if np.ndim(values) else float(values)


def _objective(est, noisy, variances):
    return sum(float(((project(est, M) - y) ** 2).sum() / variances[M]) for M, y in noisy.items())


def test_budget_and_generalised_sensitivity_of_every_round():
    x = _data()
    r = ireduct(x, 2.0, rounds=3, first_share=0.2, rng=0)
    assert r.method == "ireduct" and r.epsilon == 2.0
    assert r.budget == pytest.approx({"round_1": 0.4, "round_2": 0.8, "round_3": 0.8})
    assert math.fsum(r.budget.values()) == pytest.approx(2.0, rel=1e-15)
    Ms = r.details["marginals"]
    assert Ms == ((0,), (1,), (2,), (0, 1), (0, 2), (1, 2))
    for k, rnd in enumerate(r.details["rounds"]):
        # one record lies in one cell of each marginal: any neighbour's loss is Σ_M 1/b_M (every neighbour is
        # checked in test_replayed_privacy_loss_over_every_neighbour)
        loss = sum(1.0 / rnd["scales"][M] for M in Ms)
        eps_r = r.budget[f"round_{k + 1}"]
        assert eps_r * (1 - 1e-12) <= loss <= eps_r
    assert all(b == pytest.approx(len(Ms) / 0.4) for b in r.details["rounds"][0]["scales"].values())


def test_every_draw_goes_through_the_noise_and_the_spend_is_epsilon():
    x = _data()
    rec = Recording("numpy", np.random.default_rng(1))
    r = ireduct(x, 1.3, rounds=2, noise=rec)
    Ms = r.details["marginals"]
    assert len(rec.calls) == 2 * len(Ms)  # one Laplace draw per marginal and round, nothing else
    assert all(kind == "laplace" for kind, *_ in rec.calls)
    for k in range(2):
        calls = rec.calls[k * len(Ms):(k + 1) * len(Ms)]
        assert [shape for _, _, shape in calls] == [tuple(x.shape[a] for a in M) for M in Ms]
        assert [b for _, b, _ in calls] == [r.details["rounds"][k]["scales"][M] for M in Ms]
    # each draw has L1 sensitivity 1 (one cell of the marginal moves by 1): the spend is Σ 1/b
    assert sum(1.0 / b for _, b, _ in rec.calls) == pytest.approx(1.3, rel=1e-12)


def test_second_round_allocation_follows_the_stated_rule():
    x = _data()
    r = ireduct(x, 1.0, rounds=2, first_share=0.25, sanity=0.01, noise=_Exact("numpy", np.random.default_rng(0)))
    Ms = r.details["marginals"]
    n = x.sum()
    delta = max(1.0, 0.01 * n)  # t̂ = n exactly with zero noise
    assert r.details["sanity_bound"] == pytest.approx(delta)
    sigma = math.sqrt(2.0) * len(Ms) / 0.25  # the round-1 noise standard deviation, the same for every marginal
    w = {M: math.sqrt((1.0 / np.maximum(project(x, M), max(delta, sigma))).sum()) for M in Ms}
    inv_b = {M: 1.0 / r.details["rounds"][1]["scales"][M] for M in Ms}
    for M in Ms:  # 1/b_M = c·√S_M with Σ_M 1/b_M = ε₂
        assert inv_b[M] == pytest.approx(0.75 * w[M] / sum(w.values()), rel=1e-12)
    # the sparse 2-way marginals get smaller scales than the 1-way ones
    assert max(inv_b[M] for M in Ms if len(M) == 1) < min(inv_b[M] for M in Ms if len(M) == 2)


def test_combination_is_inverse_variance():
    x = _data()
    r = ireduct(x, 0.7, rounds=3, rng=4)
    for M in r.details["marginals"]:
        ys = [rnd["noisy"][M] for rnd in r.details["rounds"]]
        ws = [rnd["scales"][M] ** -2.0 for rnd in r.details["rounds"]]
        combined = sum(w * y for w, y in zip(ws, ys, strict=True)) / sum(ws)
        np.testing.assert_allclose(r.details["noisy_marginals"][M], combined)
        assert r.details["variances"][M] == pytest.approx(2.0 / sum(ws))


def test_huge_epsilon_releases_the_exact_marginals():
    x = _data()
    r = ireduct(x, 1e10, rng=2)
    for M, y in r.details["noisy_marginals"].items():
        np.testing.assert_allclose(y, project(x, M), atol=1e-5)  # noise scale ≤ 6/(0.1·1e10)
    assert r.details["noisy_total"] == pytest.approx(x.sum(), abs=1e-5)
    assert r.estimate.shape == x.shape and np.all(r.estimate >= 0)


def test_fit_is_certified_on_exact_inputs():
    """With zero noise the true table is feasible (f* = 0), so f(estimate) ≤ the reported gap is a certificate."""
    x = _data()
    r = ireduct(x, 1.0, noise=_Exact("numpy", np.random.default_rng(0)))
    fit = r.details["fit"]
    f = _objective(r.estimate, r.details["noisy_marginals"], r.details["variances"])
    assert f == pytest.approx(fit["objective"], rel=1e-9, abs=1e-12)
    assert f <= fit["gap"] + 1e-9  # f − f* ≤ gap, f* = 0
    assert r.estimate.sum() == pytest.approx(x.sum(), rel=1e-12) and np.all(r.estimate >= 0)
    # the misfit is far below the noise: Σ err²/variance over the 35 released cells (the noise alone gives ~35);
    # empty cells make the certificate loose (their mass decays like 1/k), so the gap test need not be met
    assert f <= 0.01
    assert fit["converged"] == (fit["gap"] <= 1e-3 * sum(y.size for y in r.details["noisy_marginals"].values()))


def test_one_round_is_the_laplace_mechanism():
    x = _data()
    r = ireduct(x, 0.5, rounds=1, rng=0)
    K = len(r.details["marginals"])
    assert list(r.budget) == ["round_1"] and r.budget["round_1"] == 0.5
    assert all(b == pytest.approx(K / 0.5) for b in r.details["rounds"][0]["scales"].values())
    assert r.details["sanity_bound"] is None


def test_output_and_determinism():
    x = _data()
    a, b, c = ireduct(x, 1.0, rng=5), ireduct(x, 1.0, rng=5), ireduct(x, 1.0, rng=6)
    np.testing.assert_array_equal(a.estimate, b.estimate)
    assert not np.array_equal(a.estimate, c.estimate)
    assert a.path == "simulation" and a.details["noise"] == "numpy"
    assert a.estimate.sum() == pytest.approx(max(a.details["noisy_total"], 0.0), rel=1e-9)
    with pytest.raises(ValueError):
        a.estimate[0, 0, 0] = 1.0  # read-only


def test_custom_marginals_are_sorted_and_deduplicated():
    r = ireduct(_data(), 1.0, marginals=((2, 0), (0, 2), (1,)), rng=0)
    assert r.details["marginals"] == ((0, 2), (1,))


def test_replayed_privacy_loss_over_every_neighbour():
    """Every neighbour x ± e_c of a tiny table, on the recorded path: the loss is exactly Σ_r Σ_M 1/b_Mr = ε."""
    x = np.array([[2.0, 0.0, 1.0], [0.0, 3.0, 1.0]])
    loss = worst_loss(lambda z, noise: ireduct(z, 0.9, rounds=3, noise=noise), x)
    assert 0.9 * (1 - 1e-9) <= loss <= 0.9 * (1 + 1e-12)


def test_opendp_backend_runs():
    pytest.importorskip("opendp")
    x = _data()
    r = ireduct(x, 1.0, noise="opendp")
    assert r.path == "release" and r.details["noise"] == "opendp"
    assert np.all(r.estimate >= 0)
    with pytest.raises(ValueError, match="'rng' parameter of ireduct"):
        ireduct(x, 1.0, noise="opendp", rng=0)


def test_records_equal_dense_counts():
    pd = pytest.importorskip("pandas")
    from mmopt.records import Attribute, Domain
    D = Domain((Attribute("a", categories=("F", "M")), Attribute("b", categories=("x", "y", "z"))))
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"a": rng.choice(["F", "M"], 90), "b": rng.choice(["x", "y", "z"], 90)})
    x = np.zeros((2, 3))
    np.add.at(x, (df.a.map({"F": 0, "M": 1}).to_numpy(), df.b.map({"x": 0, "y": 1, "z": 2}).to_numpy()), 1)
    r1, r2 = ireduct(df, 0.7, domain=D, rng=4), ireduct(x, 0.7, rng=4)
    np.testing.assert_allclose(r1.estimate, r2.estimate, rtol=1e-12)
    with pytest.raises(TypeError, match="pass domain="):
        ireduct(df, 1.0)


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"data": np.ones(4)}, ValueError, "'data' parameter of ireduct"),
    ({"data": -np.ones((2, 2))}, ValueError, "whole, non-negative"),
    ({"data": np.full((2, 2), 0.5)}, ValueError, "whole, non-negative"),
    ({"epsilon": 0.0}, ValueError, "'epsilon' parameter of ireduct"),
    ({"epsilon": "1"}, TypeError, "'epsilon' parameter of ireduct"),
    ({"rounds": 0}, ValueError, "'rounds' parameter of ireduct"),
    ({"rounds": 2.0}, TypeError, "'rounds' parameter of ireduct"),
    ({"first_share": 1.0}, ValueError, "'first_share' parameter of ireduct"),
    ({"sanity": 0.0}, ValueError, "'sanity' parameter of ireduct"),
    ({"marginals": ((0, 2),)}, ValueError, "'marginals' parameter of ireduct"),
    ({"marginals": ((0, 0),)}, ValueError, "'marginals' parameter of ireduct"),
    ({"marginals": ()}, TypeError, "'marginals' parameter of ireduct"),
    ({"marginals": "01"}, TypeError, "'marginals' parameter of ireduct"),
    ({"marginals": ((0, 1.0),)}, TypeError, "'marginals' parameter of ireduct"),
    ({"noise": "torch"}, ValueError, "'noise' parameter of ireduct"),
    ({"domain": "abc"}, TypeError, "'domain' parameter of ireduct"),
    ({"epsilon": 1e-310}, ValueError, "'epsilon' parameter of ireduct"),
])
def test_bad_inputs_are_refused(kwargs, exc, match):
    args = {"data": np.ones((2, 2)), "epsilon": 1.0, **kwargs}
    data, eps = args.pop("data"), args.pop("epsilon")
    rec = Recording("numpy", np.random.default_rng(0))
    with pytest.raises(exc, match=match):
        ireduct(data, eps, **({"noise": rec} | args))
    assert rec.calls == []  # refused before any noise


@pytest.mark.parametrize("count, epsilon", [(2.0**52, 1e40), (2.0**52, 1e25), (2.0**52, 1e15), (1e3, 1e40)])
def test_the_marginal_fit_ends_on_counts_and_budgets_inside_the_accepted_ranges(count, epsilon):
    """L₁ = 2t²·max precision overflowed (t = 1e120, precisions 1e79 at ε = 1e40): the first step was 1/inf = 0 and
    the line search never ended. The fit is solved on y/t and the precisions over their largest sum (L₁ = 2).
    Totals past 2^52 are refused now (their float sums are not exact: mmopt.adaptive._common.MAX_TOTAL), so the
    extremes are the largest total accepted at the largest budgets."""
    with pytest.raises(ValueError, match=r"totalling at most 2\^52"):
        ireduct(np.array([[1e120, 0.0], [0.0, 0.0]]), epsilon, rng=0)
    x = np.array([[count, 0.0], [0.0, 0.0]])
    r = ireduct(x, epsilon, rng=0)
    assert r.estimate.sum() == pytest.approx(count, rel=1e-6) and r.estimate[0, 0] == pytest.approx(count, rel=1e-6)
