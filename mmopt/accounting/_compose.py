"""The composition rules, on an immutable :class:`Ledger`: what a spend costs, whether it fits, what remains.

Notation: see README. ``charge`` is what one spend costs in the session's currency: the pair (ε, δ) of exact
decimals (:func:`mmopt.accounting._ledger.exact`) under basic composition, a float ρ under zCDP.

* basic: the spends are (Σε, Σδ)-DP (Dwork & Roth 2014, Thm 3.16); a spend fits when both sums stay within the
  total. With budgets chosen after seeing earlier outputs this check is a privacy filter (Rogers, Roth, Ullman &
  Vadhan 2016, arXiv:1605.08294), so the guarantee still holds.
* zcdp: the spends are (Σρ)-zCDP (Bun & Steinke 2016, Lemma 1.7; with adaptively chosen ρ, Whitehouse, Ramdas,
  Rogers & Wu 2023, the theorem behind OpenDP's ``make_fully_adaptive_composition``), hence (ε, δ)-DP with ε from
  OpenDP's conversion (:func:`~mmopt.accounting._zcdp.epsilon_of_rho`); a spend fits when that ε at the total's
  δ is at most the total's ε.
* pld: the spends' privacy loss distributions compose by convolution (:mod:`mmopt.accounting._pld`, Google's
  dp-accounting, pessimistic discretisation); a spend fits when the composition's ε at the total's δ is at most
  the total's ε. The charge of a spend is its PLD term: the mechanism's own noise for releases, the worst
  (ε, δ)-DP mechanism for declared and pending spends. As a filter (budgets chosen after seeing outputs) this
  check is proven only for Gaussian releases alone (Smith & Thakurta 2022); see :mod:`mmopt.accounting`.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from dataclasses import dataclass
from fractions import Fraction

from mmopt._base import validation as v
from mmopt._base.rounding import down_float
from mmopt.accounting import _ledger as lg
from mmopt.accounting import _pld as pl
from mmopt.accounting import _zcdp as z
from mmopt.accounting._ledger import Budget, Spend, fmt
from mmopt.privacy import Privacy, gaussian_is_private

# Under zCDP the remaining ε is that of this share of the remaining ρ: a release at that ε is charged
# max_rho(ε, δ), the last float whose ε is within it, which may pass the remaining ρ by the few ulps over which
# OpenDP's ε stays at the same float; 1e-9 of it is far more than that.
_REST_SHARE = 1.0 - 1e-9
_OVER_ULPS = 4  # over(): a zCDP ledger's total ρ may pass max_rho(ε, δ) by this many ulps (σ's rounding)


@dataclass(frozen=True)
class Ledger:
    """A total budget, a composition rule and the spends so far. Never modified: :meth:`add` returns a new one."""

    total: Privacy
    composition: str
    spends: tuple[Spend, ...] = ()

    def __post_init__(self):  # an unknown rule (e.g. "PLD") fell through to zCDP's arithmetic
        if not isinstance(self.total, Privacy):
            raise TypeError(f"The 'total' parameter of Ledger must be a Privacy. Got {type(self.total).__name__} "
                            "instead.")
        if self.composition not in lg.COMPOSITIONS:
            raise ValueError(f"The 'composition' parameter of Ledger must be one of "
                             f"{', '.join(map(repr, lg.COMPOSITIONS))}. Got {self.composition!r} instead.")

    def add(self, spend: Spend) -> Ledger:
        new = dataclasses.replace(self, spends=self.spends + (spend,))
        # the exact sums carried forward (not fields: equality and the file ignore them): each spend re-read
        # every earlier one, 1,000 spends took 2.9 CPU s and 2,000 13.6 s
        cached = self.__dict__.get("_sums")
        if cached:
            new.__dict__["_sums"] = {key: total + lg.total_of([getattr(spend, key)]) for key, total in cached.items()}
        return new

    def settle(self, pending: Spend, outcome: Spend | None) -> Ledger:
        """``pending`` replaced by ``outcome`` in place (None: removed); ``outcome`` appended if ``pending`` is not
        there (another session rewrote the file meanwhile: the spend is counted all the same)."""
        spends, found = [], False
        for s in self.spends:
            if not found and s == pending:
                found = True
                if outcome is not None:
                    spends.append(outcome)
            else:
                spends.append(s)
        if not found and outcome is not None:
            spends.append(outcome)
        return dataclasses.replace(self, spends=tuple(spends))

    # -- sums ----------------------------------------------------------------------------------------------
    def _sum(self, key: str) -> Fraction:
        cached = self.__dict__.setdefault("_sums", {})  # the ledger never changes: its sums are computed once
        if key not in cached:
            cached[key] = lg.total_of(getattr(s, key) for s in self.spends)
        return cached[key]

    def rho_cap(self) -> float:
        """The largest total ρ whose ε at the total's δ is within the total's ε (zCDP)."""
        return z.max_rho(self.total.epsilon, self.total.delta)

    def _pld_epsilon(self, extra=()) -> float:
        return pl.epsilon([pl.term(s) for s in self.spends], self.total.delta, extra, pl.grid(self.total.epsilon))

    def _pld_remaining(self) -> float:
        """The largest ε (6 significant digits, rounded down) of one more release at the total's δ that fits."""
        # the smallest ε tried: 1e-9 of the total, kept a normal float (Privacy refuses a subnormal ε, and repr of a
        # session whose total ε was below 2.2e-299 raised)
        lo, hi = max(self.total.epsilon * 1e-9, sys.float_info.min), self.total.epsilon
        if not self.fits(release_term(Privacy(lo, self.total.delta))):
            return 0.0
        if self.fits(release_term(Privacy(hi, self.total.delta))):
            return hi
        while hi - lo > 1e-7 * hi:
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if self.fits(release_term(Privacy(mid, self.total.delta))) else (lo, mid)
        # the bisection assumes fits() flips once as ε grows; the pessimistic discretisation can make a little more
        # noise compose to a little more ε, so down_float(lo) itself was refused (remaining ε 0.000436691 of 10⁻³, whose
        # own hint then failed; a helper's audit): step down until the value offered fits
        left = down_float(lo)
        for _ in range(64):
            if left <= 0 or self.fits(release_term(Privacy(left, self.total.delta))):
                return max(left, 0.0)
            left = down_float(left * (1 - 2e-6))
        return 0.0

    def spent(self) -> Budget:
        if self.composition == "pld":
            return Budget(self._pld_epsilon(), self.total.delta) if self.spends else Budget(0.0, 0.0)
        if self.composition == "basic":  # rounded upwards: a spent total is never shown below what is counted
            return Budget(lg.float_up(self._sum("epsilon")), lg.float_up(self._sum("delta")))
        rho = self._sum("rho")
        if rho == 0:
            return Budget(0.0, 0.0, 0.0)
        eps = z.epsilon_of_rho(lg.float_up(rho), self.total.delta)
        if eps > self.total.epsilon and not self.over():
            # every spend was accepted, but a Gaussian release records the ρ of the σ OpenDP drew, which can leave
            # Σρ up to _OVER_ULPS ulps above max_rho(ε, δ) (over() explains why that is not an excess): read back
            # through the stand-in map its ε came out an ulp above the total ("spent 1.0000000000000002 of 1.0";
            # 5 of 20 budgets released whole, 4 of 20 in two releases ending at the largest ε that fits), so the
            # total is shown; anything past those ulps is over() and still shows
            eps = self.total.epsilon
        return Budget(eps, self.total.delta, lg.float_up(rho))

    def remaining(self) -> Budget:
        if self.composition == "pld":
            return Budget(self._pld_remaining(), self.total.delta)
        if self.composition == "basic":
            return Budget(*(lg.float_down(max(lg.exact(t) - self._sum(k), Fraction(0)))
                            for t, k in ((self.total.epsilon, "epsilon"), (self.total.delta, "delta"))))
        rho = lg.float_down(max(lg.exact(self.rho_cap()) - self._sum("rho"), Fraction(0)))
        return Budget(z.epsilon_of_rho(rho * _REST_SHARE, self.total.delta), self.total.delta, rho)

    def over(self) -> bool:
        """True when the recorded spends already exceed the total (a hand-edited ledger)."""
        if self.composition == "basic":
            return not self.fits((Fraction(0), Fraction(0)))
        if self.composition == "zcdp":
            # a release accepted at the whole total records the ρ of the σ OpenDP drew, which may lie an ulp above
            # max_rho(ε, δ) (6 of 21 such releases on a grid; a helper's audit): "OVER BUDGET (edited by hand?)"
            # was a false alarm. Past _OVER_ULPS ulps the total is passed
            return self._sum("rho") > lg.exact(self.rho_cap()) * (1 + Fraction(_OVER_ULPS, 2**52))
        sigma = pl.one_gaussian([pl.term(s) for s in self.spends])
        if sigma is not None and self.total.delta > 0:  # the predicate fits() accepted them by, not ε read back
            return not gaussian_is_private(sigma, self.total.epsilon, self.total.delta)
        return self.spent().epsilon > self.total.epsilon  # PLD

    # -- one more spend ------------------------------------------------------------------------------------
    def charge(self, privacy, rho, caller: str, *, release: bool):
        """The cost of spending ``privacy`` or ``rho`` (exactly one); for a Gaussian release under zCDP, the
        largest ρ any release verified at (ε, δ) can have (:func:`~mmopt.accounting._zcdp.max_rho`)."""
        if privacy is not None and not isinstance(privacy, Privacy):
            raise TypeError(f"The 'privacy' parameter of {caller} must be a Privacy, e.g. Privacy(epsilon=0.5). "
                            f"Got {privacy!r:.60} ({type(privacy).__name__}) instead.")
        if (privacy is None) == (rho is None):
            raise ValueError(f"{caller} needs exactly one of 'privacy' (a Privacy) and 'rho' (zCDP). Got "
                             f"{'both' if privacy is not None else 'neither'}.")
        if rho is not None:
            if self.composition != "zcdp":
                raise ValueError(f"The 'rho' parameter of {caller} needs composition='zcdp'. Got rho={rho!r} in a "
                                 f"{self.composition} session. Pass privacy=Privacy(ε, δ) with the (ε, δ) it "
                                 "guarantees instead.")
            rho = v.check_real(rho, name="rho", caller=caller, low=0.0, low_open=True)
            if rho < sys.float_info.min:  # ε of a subnormal ρ is inf: it was refused as "would exceed" the budget
                raise ValueError(f"The 'rho' parameter of {caller} must be at least {sys.float_info.min:.4g} (a normal "
                                 f"float, whose ε is computable). Got {rho!r} instead; a spend that small may be "
                                 "rounded up to it.")
            return rho
        if self.composition == "pld":  # a release is checked at its own noise; a declared spend as any (ε, δ)-DP
            return release_term(privacy) if release else ("generic", privacy.epsilon, privacy.delta)
        if self.composition == "basic":
            return lg.exact(privacy.epsilon), lg.exact(privacy.delta)
        if privacy.delta == 0:
            return z.pure_rho(privacy.epsilon)
        if not release:
            raise ValueError(f"The 'privacy' parameter of {caller} has delta > 0 in a zCDP session, which needs ρ. "
                             f"Got {privacy!r} instead. Pass rho= (Gaussian noise σ at L2 sensitivity Δ₂: "
                             "ρ = Δ₂²/(2σ²)), or use composition='basic'.")
        return z.max_rho(privacy.epsilon, privacy.delta)

    def fits(self, charge) -> bool:
        if self.composition == "pld":
            if charge[0] != "generic" and pl.alone_exceeds(charge, self.total.epsilon, self.total.delta):
                return False
            sigma = pl.one_gaussian([*(pl.term(s) for s in self.spends), charge])
            if sigma is not None and self.total.delta > 0:  # exactly one Gaussian: its own curve, no grid
                return gaussian_is_private(sigma, self.total.epsilon, self.total.delta)
            try:
                return self._pld_epsilon([charge]) <= self.total.epsilon
            except OverflowError:  # dp-accounting's e^loss past a loss of ~709 (a spend of ε = 1e200): refused, as
                return False  # such a spend is (its loss is ε with probability ≥ ½ for Laplace, ~1 for (ε, δ))
        if self.composition == "basic":
            eps, delta = charge
            return (self._sum("epsilon") + eps <= lg.exact(self.total.epsilon)
                    and self._sum("delta") + delta <= lg.exact(self.total.delta))
        if math.isinf(charge):  # pure_rho past the largest float (ε ≳ 1.9e154): Fraction(inf) raised
            return False
        rho = lg.float_up(self._sum("rho") + lg.exact(charge))
        return z.epsilon_of_rho(rho, self.total.delta) <= self.total.epsilon

    def refuse_unless_fits(self, charge, caller: str) -> None:
        """ValueError stating what was asked, what is used, what remains and what to do, unless it fits."""
        if self.fits(charge):
            return
        n, left, spent = len(self.spends), self.remaining(), self.spent()
        total = f"ε={fmt(self.total.epsilon)}, δ={fmt(self.total.delta)}"
        if self.composition == "basic":
            ask = f"ε={fmt(float(charge[0]))}, δ={fmt(float(charge[1]))}"
            # spent rounded up, what remains down (to the nearest the remainder printed was refused: an audit)
            rule, usable = "basic composition", left.epsilon > 0
            used = f"ε={lg.fmt_up(spent.epsilon)}, δ={lg.fmt_up(spent.delta)}"
            delta = "" if left.delta == 0 else f", {down_float(left.delta)!r}"
            hint = (f"Spend at most the remaining ε={lg.fmt_down(left.epsilon)}, δ={lg.fmt_down(left.delta)} (e.g. "
                    f"privacy=Privacy({down_float(left.epsilon)!r}{delta}), or privacy='remaining' in release)")
            # which part binds, to every digit: three spends of δ/3 were refused on the third with the request
            # and the remainder printed alike, 3.33333e-08 (exact sums: 3 × float(1e-7/3) > 1e-7; a probe)
            binding = [f"the {name} asked, {float(asked)!r}, is above the {name} left, {float(rest)!r}"
                       for name, asked, rest in (("ε", charge[0], left.epsilon), ("δ", charge[1], left.delta))
                       if asked > lg.exact(rest) and fmt(float(asked)) == fmt(rest)]  # (else the figures say it)
            ask += f" ({'; '.join(binding)})" if binding else ""
        elif self.composition == "pld":
            kind, a, b = charge
            ask = (f"ε={fmt(a)}, δ={fmt(b)}" if kind == "generic" else
                   f"a {kind} release at noise multiplier {fmt(a)}")
            rule, used = "PLD composition", f"ε={lg.fmt_up(spent.epsilon)} at δ={fmt(self.total.delta)}"
            usable = left.epsilon > 0
            hint = (f"Spend at most one release at Privacy({left.epsilon!r}, {left.delta!r}) (or "
                    "privacy='remaining' in release)")
            if kind == "generic" and usable:
                # a declared spend composes as a worst-case (ε, δ) mechanism, looser than the release the hint
                # names: following it word for word was refused again, with the same hint (an auditor's probe)
                hint = (f"{self._declared_hint(a, b)}, or one release at Privacy({left.epsilon!r}, {left.delta!r}) "
                        "(Gaussian noise, which composes more tightly; or privacy='remaining' in release)")
        else:
            ask, usable = f"ρ={fmt(charge)}", left.rho > 0
            rule, used = f"zCDP, ρ ≤ {lg.fmt_down(self.rho_cap())}", f"ρ={lg.fmt_up(spent.rho)}"
            hint = (f"Spend at most the remaining ρ={lg.fmt_down(left.rho)}: one Gaussian release at Privacy("
                    f"{down_float(left.epsilon)!r}, {left.delta!r}) (or privacy='remaining' in release), or Laplace at "
                    f"ε={down_float(math.sqrt(2 * left.rho))!r}")
        end = (f"{hint}, or answer from what was released already." if usable else
               "The budget is used up: these data can answer nothing more. Work from what was released already "
               "(post-processing is free).")
        raise ValueError(f"{caller}: spending {ask} would exceed the total budget {total} ({rule}): {n} "
                         f"{'spend has' if n == 1 else 'spends have'} used {used}. {end}")

    def _declared_hint(self, epsilon: float, delta: float) -> str:
        """The largest declared spend at this δ that fits (bisection on ε, rounded down), as a sentence."""
        lo, hi = 0.0, float(epsilon)
        for _ in range(48):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if self.fits(("generic", mid, delta)) else (lo, mid)
        if lo <= 0 or not self.fits(("generic", down_float(lo), delta)):
            return f"No declared spend at δ={fmt(delta)} fits (its δ alone is too much)"
        return (f"Spend at most ε={down_float(lo)!r} at δ={fmt(delta)} as a declared spend (composed as a worst-case "
                "mechanism)")

    def rest(self, caller: str) -> Privacy:
        """privacy="remaining": everything that is left, as one release's Privacy; refused when nothing is left."""
        left = self.remaining()
        if self.composition == "basic" and left.epsilon > 0:
            return Privacy(left.epsilon, left.delta)
        if self.composition in ("zcdp", "pld") and left.epsilon > 0:
            return Privacy(left.epsilon, left.delta)
        raise ValueError(f"{caller}: privacy='remaining' asks for the rest of the budget, but it is used up "
                         f"({left} left of ε={fmt(self.total.epsilon)}, δ={fmt(self.total.delta)} after "
                         f"{len(self.spends)} spends). These data can answer nothing more; work from what was "
                         "released already (post-processing is free).")


def release_term(privacy: Privacy) -> tuple[str, float, float]:
    """The PLD term checked before a release at ``privacy`` draws: Gaussian at the analytic σ/Δ₂ (OpenDP's σ is
    never smaller), or Laplace at b/Δ₁ = 1/ε."""
    if privacy.noise == "gaussian":
        return "gaussian", Privacy(privacy.epsilon, privacy.delta).noise_scale(1.0), 0.0
    return "laplace", 1.0 / privacy.epsilon, 0.0


