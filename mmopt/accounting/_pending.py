"""A release's budget as a pending entry: checked, on the ledger before the noise, settled after.

Why pending: a run killed between the draw and the write must not leave a release the ledger does not count. So
the entry is written at the requested budget *before* anything is drawn (a crash overcounts, never undercounts),
then replaced by what OpenDP verified, or removed if the release raised before any noise was drawn
(:data:`mmopt._base.opendp.DRAWS` unchanged). Once a draw has started the entry stays, counted in full, whatever
is raised: a MemoryError or a solver's RuntimeError in the reconstruction removed it (only ValueError,
ArithmeticError and SolverError fall back to least squares), the noisy y stayed reachable from the traceback's
frames, and the same call could be repeated for free, three draws at ε = 0.9 against a total of 1 (a helper's
probe). :func:`pending_run` does the same for a synthetic-data run (MST, AIM: many draws, one spend).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

from mmopt._base import opendp as _opendp
from mmopt._base import validation as v
from mmopt._base.rounding import up
from mmopt.accounting import _spends as entries
from mmopt.accounting._ledger import Spend, fmt
from mmopt.privacy import Privacy


@contextlib.contextmanager
def pending_release(acc, privacy: Privacy, label: str | None, what: str, *, caller: str) -> Iterator[list]:
    """:meth:`mmopt.accounting.Accountant.pending_release` for the session ``acc`` (its docstring)."""
    v.check_str(caller, name="caller", caller="Accountant.pending_release")
    # checked before anything is written: a ledger with a non-string 'what' no longer loads
    v.check_str(what, name="what", caller=caller)
    ledger = acc.ledger  # with a file, read once (under its lock) for the check; the commit reads it again
    charge = charge_of(ledger, privacy, caller)
    with _pending(acc, ledger, charge, privacy, acc._label(label, "release", caller), what, caller,
                  lambda pending, out: entries.verified(pending, privacy, out, acc.composition)) as outcome:
        yield outcome


def charge_of(ledger, privacy: Privacy, caller: str, *, run: bool = False):
    """What ``privacy`` costs the ledger as one release (:func:`pending_release`), or with ``run`` as one composed
    run (MST, AIM: Gaussian measurements and exponential-mechanism choices, ρ-zCDP at ρ = max_rho(ε, δ),
    :func:`pending_run`): its (ε, δ) (basic), that ρ (zCDP, the release's charge), or under PLD the worst (ε, δ)-DP
    mechanism (the run is not one Gaussian, whose loss distribution would undercount its exponential-mechanism
    choices)."""
    return ledger.charge(privacy, None, caller, release=not run or ledger.composition != "pld")


def refuse_unless_fits(acc, privacy: Privacy, caller: str, *, run: bool = False) -> None:
    """The refusal of :func:`pending_release` (``run``: of :func:`pending_run`), said early, before a strategy
    search or a read; nothing is written (the pending entry checks again, against the file under its lock)."""
    ledger = acc.ledger
    ledger.refuse_unless_fits(charge_of(ledger, privacy, caller, run=run), caller)


def fits(acc, privacy: Privacy, caller: str, *, run: bool = False) -> bool:
    """Whether :func:`pending_release` (``run``: :func:`pending_run`) would accept ``privacy`` now (the command
    line's plan phase asks first)."""
    ledger = acc.ledger
    return ledger.fits(charge_of(ledger, privacy, caller, run=run))


@contextlib.contextmanager
def pending_run(acc, privacy: Privacy, label: str | None, what: str, *, caller: str) -> Iterator[list]:
    """:func:`pending_release` for a run that draws many times (MST, AIM), charged as one spend of ``privacy``
    (:func:`charge_of`): checked (refused before anything runs), pending before the block, so that an error or a
    Ctrl-C once a draw has started (:data:`mmopt._base.opendp.DRAWS`) leaves it counted in full. If the block
    appends the run's result (``epsilon``, ``delta`` and ``rho``: what it spent, within ``privacy``), the entry
    becomes those figures; the label defaults to "``caller`` k"."""
    v.check_str(caller, name="caller", caller="pending_run")
    v.check_str(what, name="what", caller=caller)
    ledger = acc.ledger
    charge = charge_of(ledger, privacy, caller, run=True)

    def spent(pending: Spend, out) -> Spend:
        rho = float(out.rho)
        return Spend(pending.label, f"{pending.what}; spent ρ={up(rho)}", float(out.epsilon), float(out.delta), rho,
                     pending.time, "release", "spent")

    with _pending(acc, ledger, charge, privacy, acc._label(label, caller, caller), what, caller, spent) as outcome:
        yield outcome


@contextlib.contextmanager
def _pending(acc, ledger, charge, privacy: Privacy, label: str, what: str, caller: str, settled) -> Iterator[list]:
    """The pending entry of ``charge`` around the block; ``settled(pending, outcome)`` the entry that replaces it."""
    ledger.refuse_unless_fits(charge, caller)
    pending = Spend(label, what, privacy.epsilon, privacy.delta,
                    charge if acc.composition == "zcdp" else None, entries.now(), "release", "pending")
    # on disk before the noise (checked again against the file, under its lock): a crash leaves it counted
    acc._commit(lambda ledger: entries.checked(ledger, charge, caller).add(pending), caller)
    outcome: list = []
    draws = _opendp.DRAWS  # another thread's draw meanwhile keeps the entry too: an overcount, never an undercount
    try:
        yield outcome
    except BaseException as exc:  # Ctrl-C in the calibration too: it left a release that drew nothing charged
        if not outcome and _opendp.DRAWS == draws:  # nothing was drawn; the original error is what matters
            settle(acc, pending, None, caller, "the release failed and spent nothing, but the file still counts it")
        elif not outcome:
            exc.add_note(f"{caller}: the noise had been drawn when this was raised, so the ledger keeps the release "
                         f"'{pending.label}' counted in full (status 'pending').")
        raise
    finally:
        if outcome:
            settle(acc, pending, settled(pending, outcome[0]), caller,
                   "the release is done, but the file still counts it at the requested budget")


def settle(acc, pending: Spend, outcome: Spend | None, caller: str, consequence: str) -> None:
    """Replace a pending entry after the release returned or raised: memory always takes the outcome; a file that
    cannot be written keeps the pending entry (an overcount, never an undercount) and warns."""
    try:
        acc._commit(lambda ledger: ledger.settle(pending, outcome), caller)
    except (OSError, ValueError, TimeoutError) as exc:
        acc._ledger = acc._ledger.settle(pending, outcome)
        warnings.warn(f"{caller}: the ledger file '{acc.path}' could not be updated ({exc}): {consequence} "
                      "as pending, in full. Call acc.save() once the file is writable.", RuntimeWarning,
                      stacklevel=4)


def requested(acc, privacy, caller: str, *, gaussian: bool = False) -> Privacy:
    """The budget a release asks for: a :class:`Privacy`, or ``"remaining"`` (:meth:`Ledger.rest`), said outright.

    ``gaussian``: the caller adds Gaussian noise only (δ > 0), so a rest with no δ left is refused here, saying so
    (it was refused later as "must have delta > 0 … Got Privacy(0.5, 0)", with no word that the ledger's δ was spent).
    """
    if isinstance(privacy, str) and privacy == "remaining":
        rest = acc.ledger.rest(caller)
        if gaussian and rest.delta == 0:  # only a basic ledger: zCDP and PLD leave the total's δ
            n = len(acc.spends)
            # a pure ε-DP total (δ = 0) never had a δ to spend: "its δ is spent … after 0 spends" said otherwise
            why = "its total has no δ (pure ε-DP)" if acc.total.delta == 0 else "its δ is spent"
            raise ValueError(f"{caller}: privacy='remaining' asks for the rest of the budget, but {why}: "
                             f"{acc.remaining} is left of ε={fmt(acc.total.epsilon)}, δ={fmt(acc.total.delta)} "
                             f"({acc.composition} composition, after {n} {'spend' if n == 1 else 'spends'}), and "
                             f"{caller} adds Gaussian noise, which needs δ > 0. Spend the ε left on a pure ε-DP "
                             "(Laplace) release, e.g. Accountant.release or mmopt.records.release_marginals with "
                             "privacy='remaining'; a Gaussian method needs a ledger with δ left (a new ledger only "
                             "for other data: these records' budget is the one recorded here). Nothing was read or "
                             "drawn.")
        return rest
    if isinstance(privacy, str):  # "remainder", "rest": said "Got str" with no word of the spelling
        raise ValueError(f"The 'privacy' parameter of {caller} must be a Privacy, or the string \"remaining\" to "
                         f"spend what is left. Got {privacy!r:.40} instead.")
    if not isinstance(privacy, Privacy):
        raise TypeError(f"The 'privacy' parameter of {caller} must be a Privacy, or \"remaining\" to spend "
                        f"what is left. Got {type(privacy).__name__} instead.")
    return privacy


@contextlib.contextmanager
def rest_without_delta(acc, privacy: Privacy, rest: bool) -> Iterator[None]:
    """A refusal before any draw of a release at ``"remaining"`` (``rest``) that came to δ = 0 because the ledger's δ
    is spent gets that said: a Gaussian-only strategy :func:`mmopt.dispatch.gaussian_only` does not know (a
    factorisation, …) said "pass a δ > 0" with no word of the ledger (a review)."""
    draws = _opendp.DRAWS
    try:
        yield
    except ValueError as exc:
        if rest and privacy.delta == 0 < acc.total.delta and _opendp.DRAWS == draws:
            raise ValueError(f"{exc} (privacy='remaining' gave δ = 0: this ledger's δ is spent, {acc.remaining} left. "
                             "A Gaussian release needs a ledger with δ left; the ε left can go to a Laplace "
                             "release.)") from exc
        raise
