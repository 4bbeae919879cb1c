"""PrivBayes: budget, exact behaviour at huge ε, valid output, determinism, OpenDP path, input checks, and a
brute-force check of the mutual-information sensitivity bounds over all neighbours of tiny data sets."""

import importlib
import itertools
import math

import numpy as np
import pytest

from mmopt.adaptive import privbayes
from mmopt.adaptive.privbayes import charged_mi_sensitivity, lemma1_sensitivity, mi_score, mi_sensitivity

pb = importlib.import_module("mmopt.adaptive.privbayes")


def _data(seed=3, shape=(2, 3, 2, 2)):
    """Correlated integer counts: b depends on a, c on b, d on (a, c), plus uniform background."""
    rng = np.random.default_rng(seed)
    n = 600
    a = rng.integers(0, shape[0], n)
    b = (a + (rng.random(n) < 0.3) * rng.integers(0, shape[1], n)) % shape[1]
    c = (b + (rng.random(n) < 0.2)) % shape[2]
    d = (a + c + (rng.random(n) < 0.4)) % shape[3]
    x = np.zeros(shape)
    np.add.at(x, (a, b, c, d), 1)
    return x


def _marg(x, axes):
    """Counts on ``axes`` in that order."""
    srt = tuple(sorted(axes))
    m = x.sum(axis=tuple(i for i in range(x.ndim) if i not in srt))
    return np.moveaxis(m, [srt.index(a) for a in axes], range(len(axes)))


def test_budget_adds_to_epsilon():
    r = privbayes(_data(), 2.0, beta=0.4, count_ratio=0.1, rng=0)
    assert r.budget["count"] == pytest.approx(0.2)
    assert r.budget["network"] == pytest.approx(0.4 * 0.9 * 2.0)
    assert r.budget["conditionals"] == pytest.approx(0.6 * 0.9 * 2.0)
    assert sum(r.budget.values()) == pytest.approx(2.0, rel=1e-15)
    assert r.epsilon == 2.0 and r.method == "privbayes"
    d, k = 4, 2
    assert r.details["noise_scale"] == pytest.approx((d - k) / r.budget["conditionals"])
    assert r.details["mi_sensitivity"] == pytest.approx(mi_sensitivity(r.details["m"]))


@pytest.mark.parametrize("degree", [1, 2])
def test_huge_epsilon_network_is_greedy_exact_mi_and_conditionals_are_empirical(degree):
    x = _data()
    r = privbayes(x, 1e10, degree=degree, rng=1)
    order, parents = r.details["order"], r.details["parents"]
    # the greedy choice with exact MI, from the same (data-independent) first attribute
    chosen = [order[0]]
    while len(chosen) < x.ndim:
        size = min(degree, len(chosen))
        cands = [(a, P) for a in range(x.ndim) if a not in chosen for P in itertools.combinations(sorted(chosen), size)]
        mis = [mi_score(_marg(x, (a, *P))) for a, P in cands]
        assert sorted(mis)[-1] - sorted(mis)[-2] > 1e-6 if len(mis) > 1 else True  # no near-tie
        a, P = cands[int(np.argmax(mis))]
        assert order[len(chosen)] == a and parents[a] == P
        chosen.append(a)
    head = r.details["head"]
    emp = _marg(x, head)
    np.testing.assert_allclose(r.details["joint"], emp / emp.sum(), atol=1e-8)
    for a, cond in r.details["conditionals"].items():
        t = _marg(x, (a, *parents[a]))
        tot = t.sum(axis=0, keepdims=True)
        ref = np.where(tot > 0, t / np.where(tot > 0, tot, 1), 1.0 / t.shape[0])
        np.testing.assert_allclose(cond, ref, atol=1e-8)
    assert r.details["noisy_total"] == pytest.approx(x.sum(), abs=1e-6)


@pytest.mark.parametrize("degree", [1, 2, 5])
def test_huge_epsilon_reproduces_independent_data(degree):
    u, w, z = np.array([3, 1]), np.array([2, 0, 5]), np.array([1, 4, 2, 2])
    x = np.einsum("i,j,k->ijk", u, w, z).astype(float)  # the empirical joint factorises: any network fits
    r = privbayes(x, 1e10, degree=degree, rng=2)
    np.testing.assert_allclose(r.estimate, x, atol=1e-5)


def test_output_is_nonnegative_and_sums_to_noisy_total():
    x = _data()
    for seed in range(3):
        r = privbayes(x, 0.5, rng=seed)
        assert r.estimate.shape == x.shape and np.all(r.estimate >= 0)
        assert r.estimate.sum() == pytest.approx(max(r.details["noisy_total"], 0.0), rel=1e-9)
        assert r.details["joint"].sum() == pytest.approx(1.0)
        for cond in r.details["conditionals"].values():
            np.testing.assert_allclose(cond.sum(axis=0), 1.0)
            assert np.all(cond >= 0)
        assert r.path == "simulation" and r.details["noise"] == "numpy"
        with pytest.raises(ValueError):
            r.estimate[0, 0, 0, 0] = 1.0  # read-only


def test_seed_determinism_and_first_attribute_is_uniform():
    x = _data()
    a, b, c = privbayes(x, 1.0, rng=5), privbayes(x, 1.0, rng=5), privbayes(x, 1.0, rng=6)
    np.testing.assert_array_equal(a.estimate, b.estimate)
    assert a.details["order"] == b.details["order"]
    assert not np.array_equal(a.estimate, c.estimate)
    firsts = [privbayes(x, 1e10, rng=s).details["order"][0] for s in range(40)]
    # uniform over 4 attributes: P(some attribute never first in 40 draws) <= 4·(3/4)^40 < 1e-4
    assert set(firsts) == set(range(4))


def test_opendp_backend_runs():
    pytest.importorskip("opendp")
    x = _data()
    r = privbayes(x, 1.0, noise="opendp")
    assert r.path == "release" and r.details["noise"] == "opendp"
    assert np.all(r.estimate >= 0) and r.estimate.sum() == pytest.approx(max(r.details["noisy_total"], 0.0))
    with pytest.raises(ValueError, match="'rng' parameter of privbayes"):
        privbayes(x, 1.0, noise="opendp", rng=0)


def test_records_equal_dense_counts():
    pd = pytest.importorskip("pandas")
    from mmopt.records import Attribute, Domain
    D = Domain((Attribute("a", categories=("F", "M")), Attribute("b", categories=("x", "y", "z")),
                Attribute("c", categories=("p", "q"))))
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"a": rng.choice(["F", "M"], 150), "b": rng.choice(["x", "y", "z"], 150),
                       "c": rng.choice(["p", "q"], 150)})
    x = np.zeros((2, 3, 2))
    np.add.at(x, (df.a.map({"F": 0, "M": 1}).to_numpy(), df.b.map({"x": 0, "y": 1, "z": 2}).to_numpy(),
                  df.c.map({"p": 0, "q": 1}).to_numpy()), 1)
    r1, r2 = privbayes(df, 0.7, domain=D, rng=4), privbayes(x, 0.7, rng=4)
    np.testing.assert_allclose(r1.estimate, r2.estimate, rtol=1e-12)
    assert r1.details["order"] == r2.details["order"]
    with pytest.raises(TypeError, match="pass domain="):
        privbayes(df, 1.0)


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"data": np.ones(4)}, ValueError, "at least 2 axes"),
    ({"data": -np.ones((2, 2))}, ValueError, "whole, non-negative"),
    ({"data": np.full((2, 2), 0.5)}, ValueError, "whole, non-negative"),
    ({"data": np.array([[1, np.nan], [0, 1]])}, ValueError, "finite"),
    ({"epsilon": 0.0}, ValueError, "'epsilon' parameter of privbayes"),
    ({"degree": 0}, ValueError, "'degree' parameter of privbayes"),
    ({"beta": 1.0}, ValueError, "'beta' parameter of privbayes"),
    ({"count_ratio": 0.0}, ValueError, "'count_ratio' parameter of privbayes"),
    ({"noise": "torch"}, ValueError, "'noise' parameter of privbayes"),
    ({"domain": "abc"}, TypeError, "'domain' parameter of privbayes"),
    ({"data": "abc"}, TypeError, "'data' parameter of privbayes"),
    ({"data": [["1", "2"], ["3", "4"]]}, TypeError, "dtype <U1"),  # read as counts before (a helper's probe)
])
def test_bad_inputs_are_refused(kwargs, exc, match):
    args = {"data": np.ones((2, 2)), "epsilon": 1.0, **kwargs}
    data, eps = args.pop("data"), args.pop("epsilon")
    with pytest.raises(exc, match=match):
        privbayes(data, eps, **args)


def test_too_many_cells_is_refused_before_noise(monkeypatch):
    monkeypatch.setattr(pb, "MAX_CELLS", 7)
    with pytest.raises(ValueError, match="8 cells, more than 7"):
        privbayes(np.ones((2, 2, 2)), 1.0, rng=0)


def _tables(shape, n_max):
    """Every count table of ``shape`` with total <= n_max."""
    cells = math.prod(shape)
    for n in range(n_max + 1):
        for bars in itertools.combinations(range(n + cells - 1), cells - 1):
            cuts = (-1, *bars, n + cells - 1)
            yield np.array([cuts[i + 1] - cuts[i] - 1 for i in range(cells)], float).reshape(shape)


@pytest.mark.parametrize("shape", [(2, 2), (3, 2)])
def test_mi_sensitivity_bound_over_all_add_remove_neighbours(shape):
    worst = {m: 0.0 for m in range(1, 8)}
    for t in _tables(shape, 6):
        for i in np.ndindex(shape):
            t2 = t.copy()
            t2[i] += 1  # every add/remove pair appears once, as (t, t + e_i)
            for m in worst:
                worst[m] = max(worst[m], abs(mi_score(t2, m) - mi_score(t, m)))
    for m, w in worst.items():
        assert w <= mi_sensitivity(m) + 1e-12
    assert worst[1] > 0.5  # the search does reach large changes (log 2 at n = 1 → 2)


@pytest.mark.parametrize("shape", [(2, 2), (3, 2)])
def test_lemma1_bound_over_all_replace_one_neighbours(shape):
    for n in range(2, 7):
        tabs = [t for t in _tables(shape, n) if t.sum() == n]
        worst = 0.0
        for t in tabs:
            for i, j in itertools.permutations(list(np.ndindex(shape)), 2):
                if t[i] > 0:
                    t2 = t.copy()
                    t2[i] -= 1
                    t2[j] += 1
                    worst = max(worst, abs(mi_score(t2) - mi_score(t)))
        assert worst <= lemma1_sensitivity(n) + 1e-12


def test_every_draw_goes_through_noise_with_the_stated_epsilon_and_sensitivity():
    from mmopt.adaptive._noise import Noise

    calls = []

    class Recording(Noise):
        def exponential(self, scores, epsilon, sensitivity):
            calls.append(("exp", np.asarray(scores).copy(), epsilon, sensitivity))
            return super().exponential(scores, epsilon, sensitivity)

        def add_laplace(self, values, scale):
            calls.append(("lap", np.shape(values), scale))
            return super().add_laplace(values, scale)

    x = _data()
    d, k, eps = x.ndim, 2, 1.3
    r = privbayes(x, eps, noise=Recording("numpy", np.random.default_rng(0)))
    b = r.budget
    lap = [c for c in calls if c[0] == "lap"]
    exp = [c for c in calls if c[0] == "exp"]
    # noisy total first, then d − k marginals of k + 1 attributes
    assert lap[0][1] == () and lap[0][2] == pytest.approx(1.0 / b["count"])
    assert len(lap) == 1 + d - k and all(len(c[1]) == k + 1 for c in lap[1:])
    assert all(c[2] == pytest.approx((d - k) / b["conditionals"]) for c in lap[1:])
    # a data-independent uniform first choice, then d − 1 choices at ε_N/(d − 1) with Δ_m
    assert np.all(exp[0][1] == 0) and exp[0][1].size == d
    assert len(exp) == d and all(c[2] == pytest.approx(b["network"] / (d - 1)) for c in exp[1:])
    m = r.details["m"]
    assert m == max(1, math.floor(r.details["noisy_total"]))
    assert all(c[3] == charged_mi_sensitivity(m) for c in exp[1:])  # Δ_m plus the rounding charge
    # each Laplace draw has L1 sensitivity 1, so costs 1/scale; the uniform choice costs nothing
    spent = sum(1.0 / c[2] for c in lap) + sum(c[2] for c in exp[1:])
    assert spent == pytest.approx(eps)



@pytest.mark.parametrize("fn", ["privbayes", "ireduct", "dual_query"])
def test_records_errors_name_the_function_and_its_data_parameter(fn):
    # they named 'records' of marginal_counts, a function the user never called
    import pandas as pd

    import mmopt.adaptive as A
    from mmopt.records import Attribute, Domain
    D = Domain((Attribute("a", categories=("x", "y")), Attribute("b", categories=("u", "v"))))
    with pytest.raises(TypeError, match=f"'data' parameter of {fn} is a dense array of counts"):
        getattr(A, fn)(np.ones((2, 2)), 1.0, domain=D, rng=0)
    with pytest.raises(ValueError, match=rf"'data' parameter of {fn} has no column\(s\) \['b'\]"):
        getattr(A, fn)(pd.DataFrame({"a": ["x"] * 5}), 1.0, domain=D, rng=0)


@pytest.mark.parametrize("module, function, args, message", [
    ("privbayes", "mi_sensitivity", (0,), "'m' parameter of mi_sensitivity"),  # ZeroDivisionError
    ("privbayes", "lemma1_sensitivity", (1,), "'n' parameter of lemma1_sensitivity"),  # ZeroDivisionError
])
def test_public_helpers_refuse_bad_input_by_name(module, function, args, message):
    helper = getattr(importlib.import_module(f"mmopt.adaptive.{module}"), function)
    with pytest.raises((ValueError, TypeError), match=message):
        helper(*args)


def test_a_network_that_decides_nothing_costs_nothing():
    """An auditor's probe: at degree ≥ d − 1 the first noisy joint holds every attribute, so the network step
    (β(1 − γ)ε, 28.5 % by default) chose only the axes' order; its share now goes to the joint (scale 1.053
    where it was 1.504 at ε = 1 on (2, 3, 2))."""
    from mmopt.adaptive import privbayes
    x = np.full((2, 3, 2), 5.0)
    r = privbayes(x, 1.0, rng=0)
    assert r.budget["network"] == 0.0 and r.details["conditionals"] == {}
    assert sum(r.budget.values()) == pytest.approx(1.0, rel=1e-12)
    assert r.details["noise_scale"] == pytest.approx(1.0 / r.budget["conditionals"], rel=1e-12)
    assert r.details["noise_scale"] < 1.06
    deeper = privbayes(np.full((2, 3, 2, 2), 5.0), 1.0, degree=1, rng=0)  # a network that matters: charged
    assert deeper.budget["network"] > 0


def _exact_S(t):
    """S = Σf(c) − Σf(c_x) − Σf(c_π) + f(n) in 60-digit arithmetic (mpmath)."""
    import mpmath

    mpmath.mp.dps = 60
    c = np.asarray(t).reshape(t.shape[0], -1)

    def F(v):
        return mpmath.fsum(mpmath.mpf(int(a)) * mpmath.log(int(a)) for a in np.ravel(v) if a > 0)

    return F(c) - F(c.sum(axis=1)) - F(c.sum(axis=0)) + F(c.sum())


def test_log_is_within_one_ulp_at_counts_up_to_2_32():
    """The stated assumption (≤ 4 ulp) has room: numpy's log measured within 1 ulp (mpmath oracle)."""
    import mpmath

    mpmath.mp.dps = 40
    rng = np.random.default_rng(5)
    t = np.concatenate([rng.integers(2, 2**32, 3000), 2 ** np.arange(1, 33), 2 ** np.arange(1, 33) - 1]).astype(float)
    got = np.log(t)
    for a, g in zip(t.tolist(), got.tolist(), strict=True):
        assert abs(mpmath.mpf(g) - mpmath.log(int(a))) <= math.ulp(g)


def test_scores_within_the_written_bound_of_the_exact_score():
    """|Ŝ − S| ≤ 52u·n log n (the module's bound) on tables of 2³² − 1 records, S from a 60-digit oracle."""
    import mpmath

    rng = np.random.default_rng(6)
    n = 2**32 - 1
    for shape in [(2, 2), (3, 4), (5, 7)]:
        for _ in range(5):
            t = rng.multinomial(n, rng.dirichlet(np.full(math.prod(shape), 0.3))).astype(float).reshape(shape)
            S_hat = mi_score(t) * n  # m ≤ n: h = S/n, the division's rounding is u·h
            err = abs(mpmath.mpf(S_hat) - _exact_S(t))
            assert err <= 52 * 2.0**-53 * n * math.log(n) + 17 * 2.0**-53 * n


def test_adversarial_neighbours_at_2_32_records_stay_within_the_charged_sensitivity():
    """The audit's construction (2×2×2 tables of 2³² − 2 records, one record added), and skewed tables (nearly
    independent, nearly deterministic); m (the recorded noisy total) public: every network choice's scores move
    by at most the stated (charged) Δ_m, exactly."""
    from _float_neighbours import ratios, recorder

    rng = np.random.default_rng(0)
    N = 2**32 - 1
    tables = [rng.multinomial(N - 1, rng.dirichlet(np.full(8, 0.5))).astype(float) for _ in range(12)]
    tables += [np.array([N // 8 - 1] * 7 + [N // 8]), np.array([N - 8, 1, 1, 1, 1, 1, 1, 0]),
               np.array([N // 2 - 1, 0, 0, 0, 0, 0, 0, N // 2])]
    worst = 0
    for flat in tables:
        x = np.asarray(flat, dtype=float).reshape(2, 2, 2)
        for j in itertools.product(range(2), repeat=3):
            xp = x.copy()
            xp[j] += 1
            A, B = recorder(total=float(N)), recorder(total=float(N))
            privbayes(x, 1.0, degree=1, noise=A)
            privbayes(xp, 1.0, degree=1, noise=B)
            worst = max(worst, *ratios(A.log, B.log, kinds=("exp",)))
    assert worst <= 1


def test_release_refuses_more_than_max_records():
    from _float_neighbours import recorder

    with pytest.raises(ValueError, match="'data' parameter of privbayes must hold whole counts of at most"):
        privbayes(np.full((2, 2), 2.0**30 + 1), 1.0, noise=recorder())


def test_privbayes_sums_are_correctly_rounded():  # mutant pb-plain-sum
    from fractions import Fraction

    from mmopt.adaptive.privbayes import _sum_f
    rng = np.random.default_rng(0)
    for _ in range(20):
        t = rng.integers(1, 2**32, 5000).astype(float)
        want = float(sum(Fraction(v) for v in (t * np.log(t)).tolist()))
        assert _sum_f(t) == want
