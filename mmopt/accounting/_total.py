"""The checks of an :class:`~mmopt.accounting.Accountant`'s total and composition, in the caller's name (the
constructor's, or :meth:`~mmopt.accounting.Accountant.open`'s, whose refusals said "Accountant")."""

from __future__ import annotations

from mmopt._base import validation as v
from mmopt.accounting import _ledger as lg
from mmopt.accounting import _zcdp as z
from mmopt.privacy import Privacy


def check_total(total, composition: str, caller: str) -> None:
    """Refuse a total and composition no session can run: not a Privacy, an unknown rule, δ = 0 under zCDP or PLD,
    a zCDP total past OpenDP's conversion, a PLD δ below its round-off allowance; a missing OpenDP or dp-accounting
    now rather than at the first spend."""
    if not isinstance(total, Privacy):
        raise TypeError(f"The 'total' parameter of {caller} must be a Privacy, e.g. Privacy(epsilon=1.0) or "
                        f"Privacy(1.0, 1e-6). Got {total!r:.60} ({type(total).__name__}) instead.")
    v.check_choice(composition, name="composition", caller=caller, choices=lg.COMPOSITIONS)
    if composition == "zcdp" and total.delta == 0:
        raise ValueError(f"The 'total' parameter of {caller} must have delta > 0 with composition='zcdp' "
                         f"(ρ-zCDP gives (ε, δ)-DP only for δ > 0). Got {total!r} instead. Give a δ, e.g. "
                         f"Privacy({total.epsilon!r}, 1e-6), or use composition='basic' for pure ε-DP.")
    if composition == "pld" and total.delta == 0:  # dp-accounting's ε at δ = 0 is inf past any rounding
        raise ValueError(f"The 'total' parameter of {caller} must have delta > 0 with composition='pld' (a "
                         f"privacy loss distribution's ε at δ = 0 is infinite once any δ, even round-off, is "
                         f"left). Got {total!r} instead. For pure ε-DP use composition='basic': ε adds exactly.")
    if composition == "zcdp":
        z.opendp(caller)  # fail now, not at the first spend, when OpenDP is missing
        try:  # the ρ the total allows: past ε ~ 10⁴ OpenDP's conversion overflows: refused now, not at repr
            z.max_rho(total.epsilon, total.delta)
        except ValueError as exc:
            raise ValueError(f"The 'total' parameter of {caller} is out of range for composition='zcdp': "
                             f"{exc}") from None
    if composition == "pld":
        from mmopt.accounting._pld import FFT_DELTA_PER_TERM, MIN_DELTA, dp_accounting
        dp_accounting(caller)
        if total.delta < MIN_DELTA:  # each composed term sets 2⁻⁵³ of δ aside: δ = 1e-17 refused every spend
            raise ValueError(f"The 'total' parameter of {caller} must have delta ≥ {MIN_DELTA:g} with "
                             f"composition='pld': each composed term sets {FFT_DELTA_PER_TERM:.2g} of δ aside "
                             f"for the FFT's round-off, so a smaller δ leaves room for fewer than "
                             f"{int(MIN_DELTA / FFT_DELTA_PER_TERM):,} spends (at δ = 1e-17, for none). Got "
                             f"{total!r} instead. Use composition='zcdp', which takes any δ > 0.")
