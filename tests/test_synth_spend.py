"""A synth run spent from an Accountant (mmopt.synth.spend): one ledger entry of what the run reports, refused
before the records are read, pending from before the first draw (an error after it leaves the run charged), and
"remaining" and seeds as a records release takes them."""

import importlib
from fractions import Fraction

import pytest
from test_synth_mst import D, _records

import mmopt
from mmopt._base import opendp as _opendp
from mmopt.accounting import epsilon_of_rho, max_rho
from mmopt.accounting._zcdp import round_up
from mmopt.synth import aim, mst
from mmopt.synth import curator as cu

MST = importlib.import_module("mmopt.synth.mst")  # the modules (the package exports the functions)
AIM = importlib.import_module("mmopt.synth.aim")
W = [(0, 1), (1, 2)]


@pytest.fixture(scope="module")
def df():
    return _records(400)


def _run(method, df, privacy, acc, **kw):
    if method == "mst":
        return mst(df, D, privacy, accountant=acc, **kw)
    return aim(df, D, W, privacy, accountant=acc, rounds=5, **kw)


@pytest.mark.parametrize("composition", ["basic", "zcdp", "pld"])
@pytest.mark.parametrize("method", ["mst", "aim"])
def test_the_run_is_one_spend_of_what_it_reports(df, method, composition, tmp_path):
    path = tmp_path / "budget.json"
    acc = mmopt.Accountant(mmopt.Privacy(2.0, 1e-6), composition, path=path)
    draws = _opendp.DRAWS
    s = _run(method, df, mmopt.Privacy(0.5, 1e-8), acc, label="synthetic")
    assert _opendp.DRAWS - draws == len(s.steps)  # every paid step counted as a draw, nothing else
    # the run's own figures, recomputed from its steps: Σρ exactly, rounded up; ε by OpenDP's conversion
    rho = round_up(sum((Fraction(st.rho) for st in s.steps), Fraction(0)))
    assert s.rho == rho <= max_rho(0.5, 1e-8) and s.epsilon == epsilon_of_rho(rho, 1e-8) <= 0.5
    (entry,) = mmopt.Accountant.load(path).spends  # on disk: one entry for the whole run
    assert (entry.label, entry.source, entry.status) == ("synthetic", "release", "spent")
    assert (entry.epsilon, entry.delta, entry.rho) == (s.epsilon, s.delta, s.rho) == (s.epsilon, 1e-8, rho)
    assert entry.noise is None and entry.what.startswith(f"{method} synthetic data")
    if composition == "basic":
        assert (acc.spent.epsilon, acc.spent.delta) == (s.epsilon, 1e-8)
    elif composition == "zcdp":
        assert acc.spent.rho == s.rho
    else:  # not one Gaussian: composed as the worst (ε, δ) mechanism (a declared spend), not as a release's noise
        declared = mmopt.Accountant(mmopt.Privacy(2.0, 1e-6), "pld")
        declared.spend(mmopt.Privacy(s.epsilon, s.delta))
        assert acc.spent == declared.spent


@pytest.mark.parametrize("method", ["mst", "aim"])
def test_a_run_that_does_not_fit_is_refused_before_the_records_are_read(df, method, monkeypatch):
    acc = mmopt.Accountant(mmopt.Privacy(1.0, 1e-6), "zcdp")
    _run(method, df, mmopt.Privacy(0.8, 1e-6), acc)
    before = acc.spends

    def unread(*args, **kwargs):
        raise AssertionError("the records were read")

    monkeypatch.setattr(cu.rc, "marginal_counts", unread)
    draws = _opendp.DRAWS
    with pytest.raises(ValueError, match=f"{method}: spending ρ=.* would exceed the total budget"):
        _run(method, df, mmopt.Privacy(0.8, 1e-6), acc)
    assert _opendp.DRAWS == draws and acc.spends == before  # nothing drawn, nothing written


@pytest.mark.parametrize("composition", ["basic", "zcdp"])
def test_remaining_spends_what_was_left(df, composition):
    acc = mmopt.Accountant(mmopt.Privacy(1.0, 1e-6), composition)
    acc.spend(mmopt.Privacy(0.1))
    left = acc.remaining
    s = mst(df, D, "remaining", accountant=acc)
    # the run's budget is exactly the (ε, δ) that was left (the total's δ under zCDP, as Ledger.rest gives it)
    assert (s.budget, s.delta) == (max_rho(left.epsilon, left.delta), left.delta)
    assert s.epsilon == pytest.approx(left.epsilon, rel=1e-9) and s.epsilon <= left.epsilon
    entry = acc.spends[-1]
    assert (entry.epsilon, entry.delta, entry.rho, entry.status) == (s.epsilon, s.delta, s.rho, "spent")
    if composition == "basic":  # all of δ spent: no further run (δ > 0) can be paid for
        assert acc.remaining.delta == 0 and acc.remaining.epsilon <= 1e-9
    else:  # all but the 10⁻⁹ share Ledger.rest keeps
        assert acc.remaining.rho <= 1e-9 * left.rho
    with pytest.raises(ValueError, match="would exceed the total budget"):  # even a small run is not paid for
        mst(df, D, mmopt.Privacy(1e-3, 1e-6), accountant=acc)
    assert len(acc.spends) == 2


def test_under_pld_a_run_is_checked_as_what_it_is_recorded_as(df, monkeypatch):
    """Checked as a Gaussian release (the records release's check), the whole total (1, 10⁻⁶) fits; recorded as
    the worst (ε, δ) mechanism it is, the ledger would then be over its total. Checked as recorded: refused, where
    the budget is resolved (budget_of's run charge), before the domain is checked or a curator made."""
    acc = mmopt.Accountant(mmopt.Privacy(1.0, 1e-6), "pld")
    assert acc.can_spend(mmopt.Privacy(1.0, 1e-6), release=True)

    def unreached(*args, **kwargs):
        raise AssertionError("the run went on past the budget's check")

    with monkeypatch.context() as m:
        m.setattr(MST, "check_domain", unreached)
        with pytest.raises(ValueError, match="mst: spending ε=1, δ=1e-06 would exceed the total budget"):
            mst(df, D, mmopt.Privacy(1.0, 1e-6), accountant=acc)
    s = mst(df, D, mmopt.Privacy(0.9, 1e-7), accountant=acc)
    assert acc.spends[0].epsilon == s.epsilon and not acc.ledger.over()


def test_remaining_is_refused_under_pld_and_without_an_accountant(df):
    """Under PLD what remains is one more Gaussian release at the total's δ; a run charged as a worst-case (ε, δ)
    mechanism at that δ never fits, and the ledger's own refusal suggested 'remaining' again."""
    acc = mmopt.Accountant(mmopt.Privacy(1.0, 1e-6), "pld")
    with pytest.raises(ValueError, match="accountant composes by PLD.*delta below 1e-06"):
        mst(df, D, "remaining", accountant=acc)
    with pytest.raises(ValueError, match="'remaining', which spends what an accountant has left"):
        aim(df, D, W, "remaining")
    assert acc.spends == ()


@pytest.mark.parametrize("method", ["mst", "aim"])
def test_remaining_with_no_delta_left_says_so_before_the_records_are_read(df, method, monkeypatch, tmp_path):
    """A basic ledger whose δ is spent, with ε left: 'remaining' resolved to Privacy(0.5, 0), refused later as "must
    have delta > 0 … Got Privacy(epsilon=0.5, delta=0.0)", with no word that the ledger's δ was used up."""
    path = tmp_path / "budget.json"
    acc = mmopt.Accountant(mmopt.Privacy(1.0, 1e-6), path=path)
    acc.spend(mmopt.Privacy(0.5, 1e-6), "all of δ")
    on_disk = path.read_bytes()

    def unread(*args, **kwargs):
        raise AssertionError("the records were read")

    monkeypatch.setattr(cu.rc, "marginal_counts", unread)
    draws = _opendp.DRAWS
    with pytest.raises(ValueError) as info:
        _run(method, object(), "remaining", acc)  # not even a frame: refused before the records are looked at
    message = str(info.value)
    assert message.startswith(f"{method}: privacy='remaining'") and "its δ is spent" in message
    assert "ε=0.5, δ=0 is left of ε=1, δ=1e-06 (basic composition, after 1 spend)" in message
    assert "Laplace" in message and "a ledger with δ left" in message and "must have delta > 0" not in message
    assert _opendp.DRAWS == draws and acc.spends[-1].label == "all of δ" and path.read_bytes() == on_disk
    assert len(mmopt.Accountant.load(path).spends) == 1


def test_remaining_on_a_pure_epsilon_ledger_says_it_never_had_a_delta(df):
    """A basic ledger of total δ = 0: 'remaining' was refused as "its δ is spent … after 0 spends", though nothing
    was spent; now it says the total has no δ, with the same arithmetic (all of ε left)."""
    acc = mmopt.Accountant(mmopt.Privacy(1.0))
    with pytest.raises(ValueError) as info:
        mst(object(), D, "remaining", accountant=acc)
    message = str(info.value)
    assert "its total has no δ (pure ε-DP)" in message and "δ is spent" not in message
    assert "ε=1, δ=0 is left of ε=1, δ=0 (basic composition, after 0 spends)" in message and acc.spends == ()


@pytest.mark.parametrize("method", ["mst", "aim"])
@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_an_error_after_the_first_draw_leaves_the_run_charged(df, method, error, monkeypatch, tmp_path):
    """The first measurement is drawn, then the run fails (MST: the compression; AIM: its first choice); the ledger
    keeps the run pending at the whole (ε, δ), in memory and on disk. Without the curator counting its draws the
    entry was removed, as for a release that drew nothing: the run was charged nothing."""
    def fail(*args, **kwargs):
        raise error("injected after the first draw")

    if method == "mst":
        monkeypatch.setattr(MST.cp, "compression", fail)
    else:
        monkeypatch.setattr(cu.Curator, "select", fail)
    path = tmp_path / "budget.json"
    acc = mmopt.Accountant(mmopt.Privacy(1.0, 1e-6), "basic", path=path)
    draws = _opendp.DRAWS
    with pytest.raises(error, match="injected") as caught:
        _run(method, df, mmopt.Privacy(0.5, 1e-7), acc)
    assert _opendp.DRAWS == draws + 1  # the one-way marginals were drawn
    assert any("keeps the release" in note for note in getattr(caught.value, "__notes__", []))
    for ledger in (acc, mmopt.Accountant.load(path)):
        (entry,) = ledger.spends
        assert (entry.status, entry.epsilon, entry.delta) == ("pending", 0.5, 1e-7)
        assert ledger.spent.epsilon == 0.5


def test_an_error_before_any_draw_charges_nothing(df):
    """Records without a domain column are refused while counting, before any draw: the pending entry is removed."""
    acc = mmopt.Accountant(mmopt.Privacy(1.0, 1e-6), "zcdp")
    with pytest.raises(ValueError, match="'d'"):
        mst(df.drop(columns="d"), D, mmopt.Privacy(0.5, 1e-7), accountant=acc)
    assert acc.spends == ()


def test_a_seeded_run_or_a_stray_label_is_refused_before_anything_is_spent(df):
    """As a records release refuses a seed with an accountant (the same function, the same words)."""
    acc = mmopt.Accountant(mmopt.Privacy(1.0, 1e-6), "zcdp")
    for method in ("mst", "aim"):
        with pytest.raises(ValueError, match=f"{method}: seed=0 draws numpy's seeded noise.*Drop 'accountant'"):
            _run(method, df, mmopt.Privacy(0.5, 1e-7), acc, seed=0)
    with pytest.raises(ValueError, match="'label' parameter of mst names the run's entry"):
        mst(df, D, mmopt.Privacy(0.5, 1e-7), label="x")
    with pytest.raises(TypeError, match="'accountant' parameter of aim must be an mmopt.Accountant"):
        aim(df, D, W, mmopt.Privacy(0.5, 1e-7), accountant="budget.json")
    assert acc.spends == ()
