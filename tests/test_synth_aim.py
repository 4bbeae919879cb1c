"""AIM (mmopt.synth.aim) and its estimator (mmopt.synth.estimate): the ledger adds up exactly, every draw is
charged before it is made, the estimate is exact as the noise vanishes, and the rows follow the model."""

import importlib
import itertools
import warnings
from fractions import Fraction

import numpy as np
import pytest
from test_synth_mst import D, _records

import mmopt
from mmopt.accounting import epsilon_of_rho, gaussian_rho, max_rho
from mmopt.records import marginal_counts
from mmopt.synth import aim, workload_error
from mmopt.synth import curator as cu
from mmopt.synth.aim import candidates
from mmopt.synth.estimate import elimination, junction_tree_mb

AIM = importlib.import_module("mmopt.synth.aim")  # the module (the package exports the function aim)
W3 = list(itertools.combinations(range(4), 3))


def _run(df, epsilon, workload=W3, seed=0, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return aim(df, D, workload, mmopt.Privacy(epsilon, 1e-9), seed=seed, **kw)


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 10.0])
def test_the_ledger_adds_up_exactly_to_the_budget(epsilon):
    s = _run(_records(), epsilon)
    budget = max_rho(epsilon, 1e-9)
    total = sum(Fraction(st.rho) for st in s.steps)
    assert s.budget == budget and Fraction(budget) * (1 - Fraction(1, 10**9)) <= total <= Fraction(budget)
    assert s.epsilon == epsilon_of_rho(s.rho, 1e-9) <= epsilon
    kinds = [st.kind for st in s.steps]
    assert kinds[0] == "gaussian" and kinds[1:] == ["exponential", "gaussian"] * ((len(kinds) - 1) // 2)
    weights = candidates(W3)
    for sel, meas in zip(s.steps[1::2], s.steps[2::2], strict=True):
        assert Fraction(sel.rho) >= Fraction(sel.scale) ** 2 / 8                   # ε²/8, as charged
        assert sel.sensitivity == cu.score_sensitivity(max(weights[C] for C in sel.sets))  # Δ = max w_C (float-safe)
        assert meas.sets[0] in sel.sets and meas.rho == gaussian_rho(meas.sensitivity, meas.scale)
    assert s.details["selected"] == tuple(st.sets[0] for st in s.steps[2::2])


def test_every_draw_is_charged_before_it_is_made(monkeypatch):
    events = []
    charge = cu.Curator._charge

    def charged(self, step):
        charge(self, step)
        events.append(("charge", step.kind))

    monkeypatch.setattr(cu.Curator, "_charge", charged)
    real = AIM.noise_for

    def recording(seed, caller):
        noise = real(seed, caller)

        class Rec(type(noise)):
            def add_gaussian(self, values, scale):
                events.append(("draw", "gaussian"))
                return super().add_gaussian(values, scale)

            def exponential(self, scores, epsilon, sensitivity):
                events.append(("draw", "exponential"))
                return super().exponential(scores, epsilon, sensitivity)
        return Rec(noise.backend, noise.rng)

    monkeypatch.setattr(AIM, "noise_for", recording)
    s = _run(_records(), 1.0)
    assert len(events) == 2 * len(s.steps)
    for (c, k1), (dr, k2) in zip(events[::2], events[1::2], strict=True):
        assert (c, dr) == ("charge", "draw") and k1 == k2


def test_the_estimate_is_exact_as_the_noise_vanishes():
    df = _records()
    s = _run(df, 2e4, workload=[(0, 1, 2), (1, 3)])
    est = s.details["estimates"]
    true = marginal_counts(df, D, [(0, 1, 2), (1, 3), (0,), (3,)])
    for S, m in true.items():
        assert est.covers(S)                                     # every workload marginal was measured
        # non-negative least squares: the projection keeps it; within 6 standard deviations per cell (p < 2e-9)
        assert np.abs(s.marginal(S) - m).max() <= 6 * np.sqrt(est.cell_variance(S))


def test_the_rows_follow_the_model_and_are_labelled_by_the_domain():
    df = _records()
    s = _run(df, 10.0)
    rows = s.records(len(df), seed=1)
    assert rows.columns.tolist() == list(D.names) and list(rows["a"].cat.categories) == ["x", "y", "z"]
    model, got = workload_error(df, s, D, W3), workload_error(df, rows, D, W3)
    # the network's families hold the workload's cliques here (d = 4: the triangulated graph is complete), so the
    # rows differ from the model only by sampling, stratified: well under √(cells/n) ≈ 0.06 of L1 per marginal
    assert model < 0.05 and abs(got - model) < 0.03


def test_candidates_and_the_size_filter():
    assert candidates([(0, 1, 2)]) == {(0,): 1, (1,): 1, (2,): 1, (0, 1): 2, (0, 2): 2, (1, 2): 2, (0, 1, 2): 3}
    g = np.random.default_rng(0)   # the paper's w_C = Σ_r |C ∩ r|, against its definition on random workloads
    for _ in range(20):
        W = [tuple(sorted(g.choice(7, size=g.integers(1, 4), replace=False).tolist())) for _ in range(5)]
        got = candidates(W)
        assert set(got) == {C for r in W for k in range(1, len(r) + 1) for C in itertools.combinations(r, k)}
        assert all(w == sum(len(set(C) & set(r)) for r in W) for C, w in got.items())
    shape = (3, 4, 5, 6)
    # a path 0–1–2–3 is chordal: its cliques are its edges; a 4-cycle needs one chord (two triangles)
    assert junction_tree_mb(shape, [(0, 1), (1, 2), (2, 3)]) * 2**20 / 8 == 12 + 20 + 30
    assert junction_tree_mb(shape, [(0, 1), (1, 2), (2, 3), (0, 3)]) * 2**20 / 8 in (3 * 4 * 6 + 4 * 5 * 6,
                                                                                    3 * 4 * 5 + 3 * 5 * 6)
    for v, nb in elimination(shape, [(0, 1), (1, 2), (2, 3), (0, 3)]):
        assert v not in nb


def test_bad_input_is_refused():
    df = _records(100)
    s = _run(df, 1.0)
    with pytest.raises(ValueError, match="'attrs' parameter of Synthetic.marginal"):
        s.marginal(("a", "nope"))
    with pytest.raises(ValueError, match="'workload' parameter of aim"):
        aim(df, D, [], mmopt.Privacy(1.0, 1e-9))
    with pytest.raises(ValueError, match="'rounds' parameter of aim"):
        aim(df, D, W3, mmopt.Privacy(1.0, 1e-9), rounds=0)
    with pytest.raises(ValueError, match="delta > 0"):
        aim(df, D, W3, mmopt.Privacy(1.0))
    with pytest.raises(ValueError, match="'initial_share' parameter of aim leaves the one-way marginals ρ = 0"):
        aim(df, D, W3, mmopt.Privacy(1.0, 1e-9), initial_share=5e-324)  # a ZeroDivisionError before
    # rounds ≤ 0.9·d: the paper's one-way share d·0.9/T is the whole budget, and nothing of use was selected, unsaid
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        few = aim(df, D, W3, mmopt.Privacy(1.0, 1e-9), seed=0, rounds=3)  # (and the seeded-noise warning)
    assert any("rounds=3 is at most 0.9·d = 3.6, so the paper's split gives" in str(w.message) for w in said)
    assert float(few.steps[0].rho) >= 0.999 * few.rho  # the one-way marginals took (all but a sliver of) ρ


def test_a_seeded_junction_run_does_not_depend_on_the_machine_speed(monkeypatch):
    # The in-loop fits are budgeted in iterations, not CPU seconds: a machine so slow that every fit would outrun
    # any time budget (each process_time call jumps an hour here) releases the same records.
    df = _records()
    fast = _run(df, 1.0, estimator="junction")
    ticks = itertools.count()
    monkeypatch.setattr(importlib.import_module("mmopt.synth.junction").time, "process_time",
                        lambda: 3600.0 * next(ticks))
    slow = _run(df, 1.0, estimator="junction")
    assert slow.details["selected"] == fast.details["selected"]
    assert slow.details["estimator"]["iterations"] == fast.details["estimator"]["iterations"] > 0
    assert slow.records(500).equals(fast.records(500))


def test_a_weighted_or_repeated_workload_is_refused():
    """A dict's weights were dropped (iterating it gives its keys), and (0, 1) with (1, 0) counted one marginal
    twice, doubling its weight (a helper's probe)."""
    df = _records(100)
    with pytest.raises(TypeError, match="'workload' parameter of aim must be a list of attribute tuples.*Got a dict"):
        aim(df, D, {(0, 1): 5.0}, mmopt.Privacy(1.0, 1e-9))
    with pytest.raises(ValueError, match=r"'workload' parameter of aim names the marginal \(0, 1\) twice "
                                         r"\(also as \(1, 0\)\)"):
        aim(df, D, [(0, 1), (1, 0)], mmopt.Privacy(1.0, 1e-9))


def test_marginal_axes_follow_the_order_asked():
    """("b", "a") gave the ("a", "b") table: a transpose unseen when the two sizes agree (a helper's probe)."""
    s = _run(_records(300), 1.0)
    ab, ba = s.marginal(("a", "b")), s.marginal(("b", "a"))
    np.testing.assert_array_equal(ba, ab.T)
    np.testing.assert_array_equal(s.marginal((1, 0)), ab.T)
    np.testing.assert_array_equal(s.marginal("a"), s.marginal(("a",)))
    # an iterator: the check used it up, and the table came back in the domain's order (a helper's probe)
    np.testing.assert_array_equal(s.marginal(iter(("b", "a"))), ab.T)
    # a set's order follows PYTHONHASHSEED: {"b", "d"} came back transposed in some processes (a helper's audit)
    for unordered in ({"a", "b"}, frozenset({"a", "b"}), {"a": 1, "b": 2}):
        with pytest.raises(TypeError, match="'attrs' parameter of Synthetic.marginal must be a tuple"):
            s.marginal(unordered)


@pytest.mark.parametrize("estimator", ["residual", "joint"])
def test_a_marginal_returned_is_the_callers_to_change(estimator):
    """The residual model handed out its cached table: setting a cell of s.marginal("a") to 0 changed every later
    marginal and the sampled records (a helper's probe)."""
    s = _run(_records(300), 1.0, estimator=estimator)
    before, one = s.marginal(("a", "b")).copy(), s.marginal("a")
    one[:] = 0.0
    np.testing.assert_array_equal(s.marginal(("a", "b")), before)
    assert s.marginal("a").sum() > 0


def test_a_choice_of_one_candidate_is_free_and_its_budget_measures():
    """With one candidate marginal every round's exponential mechanism read no data and still cost 9.4 % of ρ (a
    helper's probe): no selection is drawn, ρ is all spent on measurements, and it still adds up to the budget."""
    from mmopt.synth import aim
    s = aim(_records(300), D, [(1,)], mmopt.Privacy(1.0, 1e-6), seed=0)
    assert s.steps and all(st.kind == "gaussian" for st in s.steps)
    assert sum(st.rho for st in s.steps) == pytest.approx(s.budget, rel=1e-12) and s.rho <= s.budget
    two = aim(_records(300), D, [(1,), (2,)], mmopt.Privacy(1.0, 1e-6), seed=0)
    assert any(st.kind == "exponential" for st in two.steps)  # a real choice is still drawn and paid for
