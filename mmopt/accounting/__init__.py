"""A privacy budget across releases: :class:`Accountant` composes every spend and refuses to exceed its total.

Notation: see README. ``Accountant(total=Privacy(ε, δ), composition="basic" | "pld" | "zcdp")`` records each use of the
data (:meth:`~Accountant.release`, through :func:`mmopt.release`, or :meth:`~Accountant.spend` for algorithms
that draw their own noise) as a :class:`Spend` in an immutable :class:`Ledger`, checks each one **before any
noise is drawn**, and can keep the ledger in a JSON file across runs. Basic composition adds ε and δ; zCDP adds
ρ and converts it to (ε, δ) with OpenDP's own map (:func:`epsilon_of_rho`). Tutorial: docs/tutorials/accountant.md.

**Composition** (the loss of all spends together):

* ``"basic"``: ε adds and δ adds (Dwork & Roth 2014, Thm 3.16); with budgets chosen after seeing earlier
  outputs the check is a privacy filter (Rogers, Roth, Ullman & Vadhan 2016). A spend is accepted when
  Σε ≤ ε_total and Σδ ≤ δ_total, added exactly as the decimals they are written as.
* ``"pld"``: privacy loss distributions compose (Google's ``dp-accounting``, :mod:`mmopt.accounting._pld`):
  each release at the noise it actually drew, each declared spend as the worst (ε, δ)-DP mechanism; a spend
  is accepted when the composition's ε at δ_total is at most ε_total. The tightest of the three for many
  Gaussian releases (ten at σ/Δ₂ = 5 use ε = 2.92 at δ = 10⁻⁶, zCDP 3.13; ten releases in (ε, δ) =
  (1, 10⁻⁶) need 6.8 % less σ than under zCDP); needs ``mmopt[accounting]``. **Adaptivity:** PLD composition
  holds for mechanisms chosen after seeing earlier outputs when their budgets are fixed in advance; with budgets
  chosen after seeing outputs (a privacy filter) it is proven only for a ledger of Gaussian releases alone (then
  the check is Gaussian DP's filter, Smith & Thakurta 2022, arXiv:2210.17520). The natural PLD filter is not
  valid in general (Honkela, Koskela, Tran & Räisä 2026, arXiv:2602.06756; free only for families of mechanisms
  totally ordered under composition, arXiv:2602.15815): for fully adaptive budgets over Laplace, declared or
  pending spends use ``"basic"`` or ``"zcdp"``.
* ``"zcdp"``: ρ adds (Bun & Steinke 2016, Lemma 1.7; adaptively, Whitehouse et al. 2023). A Gaussian release
  costs ρ = Δ₂²/(2σ²) of the noise it drew, an ε-DP spend ε²/2 (Bun & Steinke, Prop. 1.4). The total is
  (ε, δ) with δ > 0: a spend is accepted when OpenDP's conversion of Σρ at δ_total
  (``make_fix_delta(make_zCDP_to_approxDP(·))``, Canonne, Kamath & Steinke 2020) is at most ε_total. Many
  Gaussian releases compose far better this way (ten at Privacy(0.5, 1e-7) use ε = 1.54 at δ = 10⁻⁶,
  against ε = 5, δ = 10⁻⁶ under basic composition); a few Laplace releases compose worse (ε = 0.5 alone is
  ρ = 0.125, ε = 2.42 at δ = 10⁻⁶).

**Sharing a ledger, and what is covered.** Only :meth:`Accountant.release` draws noise through OpenDP's vetted
samplers with an OpenDP-verified guarantee. Spends recorded with :meth:`Accountant.spend` are the caller's word:
:mod:`mmopt.adaptive` draws numpy noise by default (**simulation only**, never for real data) and OpenDP's vetted
samplers with ``noise="opendp"`` (the release path); :mod:`mmopt.sparse_vector` is release-grade only with
``rng=None`` (OpenDP's Laplace sampler). The accountant covers one data set under one
neighbouring relation (add/remove one record). Any number of sessions, in threads or processes, may spend from one
ledger file: each spend is checked and written under an exclusive OS lock on the file's folder, against the file as it
is then (other sessions' spends included), so together they never go over the total. What a session reports
(``spent``, ``remaining``, ``can_spend``, ``summary``) is read from the file too. A save of a session that has not
seen the file's latest spends (:meth:`Accountant.save`) is refused, and so is saving a session with a file to a
second one (two ledgers for one data set).

OpenDP's own interactive compositors (``make_adaptive_composition``, ``make_privacy_filter``) are not used:
they hold the data inside an in-process queryable and accept only OpenDP measurements, whereas a release here
is a new mmopt call per strategy, and a ledger must survive the process. OpenDP's maps are used for
everything they can answer: each release's verified loss, each Gaussian release's ρ, and the ρ → (ε, δ)
conversion (:mod:`mmopt.accounting._zcdp`).

Modules: ``_session`` (the Accountant), ``_pending`` (the pending entry of a release, or of a synth run of
mmopt.synth, charged once for all its draws), ``_persist`` (sessions in files),
``_compose`` (the rules, on a frozen Ledger), ``_zcdp`` (OpenDP's maps), ``_pld`` (dp-accounting), ``_ledger``
(entries, exact sums, the JSON file), ``_file`` (a file shared by sessions), ``_report`` (summary).
"""

from mmopt.accounting._compose import Ledger
from mmopt.accounting._ledger import Budget, Spend
from mmopt.accounting._session import COMPOSITIONS, Accountant
from mmopt.accounting._zcdp import epsilon_of_rho, gaussian_rho, max_rho, pure_rho

__all__ = ["COMPOSITIONS", "Accountant", "Budget", "Ledger", "Spend", "epsilon_of_rho", "gaussian_rho", "max_rho",
           "pure_rho"]
