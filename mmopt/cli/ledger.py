"""``--ledger``, ``--ledger-total`` and ``--composition`` of the release commands and ``mmopt synth``: the
:class:`mmopt.Accountant` a release (or a synth run, ``run=True``: one spend of its (ε, δ), charged as
:func:`mmopt.accounting._pending.charge_of` says) spends from, created only when it fits in it and removed again
when the command fails before spending (:func:`ledger_scope`)."""

from __future__ import annotations

import argparse
import contextlib
import math
import os

import mmopt
from mmopt._base.rounding import down_float
from mmopt.accounting._pending import fits
from mmopt.accounting._persist import remove_unspent
from mmopt.cli import output as out
from mmopt.cli._numbers import number

__all__ = ["ledger_scope", "no_room", "open_ledger"]


def open_ledger(args, privacy=None, *, create: bool = True, run: bool = False):
    """The :class:`mmopt.Accountant` of ``--ledger`` (None without it): the file if it exists, else a new one with
    ``--ledger-total`` (ε or ε,δ) and ``--composition`` — created only if ``privacy`` (this release's, or with
    ``run=True`` this synth run's) fits in it; ValueError naming the option otherwise. ``create=False`` is the
    commands' plan phase: every check, an existing ledger's room too (said before the data is read or a strategy
    searched for), and nothing created."""
    composition = getattr(args, "composition", None)
    if getattr(args, "ledger", None) is None:
        for option, value in (("--ledger-total", getattr(args, "ledger_total", None)), ("--composition", composition)):
            if value is not None:
                raise ValueError(f"{option} needs --ledger FILE (the ledger file to create).")
        return None
    out.check_extension(args.ledger, (".json",), "--ledger")
    if os.path.exists(args.ledger):
        if args.ledger_total is not None:
            raise ValueError(f"The --ledger file '{args.ledger}' exists: its total is recorded there. Drop "
                             "--ledger-total (a budget cannot change once spent from).")
        ledger = mmopt.Accountant.load(args.ledger)
        if composition is not None and composition != ledger.composition:  # it was ignored, silently
            raise ValueError(f"The --ledger file '{args.ledger}' composes by {ledger.composition!r}, recorded when it "
                             f"was created; --composition {composition} cannot change it. Drop --composition.")
        # the plan phase says, in options, that it cannot pay (the Accountant's own refusal, at the draw, names
        # privacy=Privacy(...) and privacy='remaining'); at the draw that check is the Accountant's, not repeated here
        if not create and privacy is not None and not _fits(ledger, privacy, run):
            raise ValueError(no_room(args.ledger, ledger, privacy, run=run))
        return ledger
    if args.ledger_total is None:
        raise ValueError(f"The --ledger file '{args.ledger}' does not exist. Give --ledger-total EPS[,DELTA] to "
                         "start it, or the path of an existing ledger.")
    # its folder must take the new file now: a missing folder was found only when the release opened the ledger,
    # after the strategy search (up to 600 s with --budget thorough) and the data read
    out.check_writable(args.ledger, "--ledger", force=False)
    try:  # as every number of the command line (1_0 was read as 10, a δ of 1e-400 as 0)
        parts = [number(t) for t in args.ledger_total.split(",")]
    except argparse.ArgumentTypeError:
        parts = []
    if len(parts) not in (1, 2):
        raise ValueError(f"--ledger-total must be EPS or EPS,DELTA (numbers). Got {args.ledger_total!r}.")
    try:
        total, composition = mmopt.Privacy(*parts), composition or "basic"
    except ValueError as exc:  # Privacy's message names its 'epsilon', which the user set by --epsilon
        raise ValueError(f"--ledger-total {args.ledger_total} is not a budget: {exc}") from None
    # checked in memory first: a refused first release left the new file behind, holding this total, and the
    # corrected command was then told "a budget cannot change once spent from" — nothing had been spent
    try:  # the Accountant's own refusals name its 'total', which the CLI maps to --total (another option)
        fresh = mmopt.Accountant(total, composition)
    except ValueError as exc:
        if total.delta == 0 and composition != "basic":
            raise ValueError(f"--ledger-total {args.ledger_total} has δ = 0, but a {composition} ledger needs δ > 0 "
                             "(it reports (ε, δ)-DP only for δ > 0): give --ledger-total EPS,DELTA (e.g. 1,1e-6), "
                             "or --composition basic for pure ε-DP.") from None
        raise ValueError(f"--ledger-total {args.ledger_total} cannot open a {composition} ledger: {exc}") from None
    if privacy is not None and not _fits(fresh, privacy, run):
        hint = (" Its δ = 0 leaves no room for this release's δ > 0 (Gaussian noise): give --ledger-total EPS,DELTA."
                if privacy.delta > 0 and total.delta == 0 else "")
        if run and composition == "pld" and privacy.delta >= total.delta > 0:
            hint = (" Under PLD a synth run is charged as a worst-case (ε, δ) mechanism, whose δ alone must stay "
                    "below the total's: give a smaller --delta.")
        raise ValueError(f"--ledger-total {args.ledger_total}: this release's {privacy} does not fit in a new ledger "
                         f"of total {total} ({composition} composition), so '{args.ledger}' was not created.{hint}")
    return mmopt.Accountant.open(args.ledger, total, composition) if create else None


def _fits(acc, privacy, run: bool) -> bool:
    """Whether ``acc`` can pay for ``privacy``: as one release, or (``run``) as a synth run."""
    return fits(acc, privacy, "mmopt synth" if run else "mmopt release", run=run)


@contextlib.contextmanager
def ledger_scope(args, privacy, *, run: bool = False):
    """:func:`open_ledger` for the block; a ledger this command created is removed again if the block fails before
    anything was spent from it (data, columns or a table refused after the file was opened left it behind, and
    the corrected command was then told its total "cannot change once spent from")."""
    new = getattr(args, "ledger", None) is not None and not os.path.exists(args.ledger)
    acc = open_ledger(args, privacy, run=run)
    try:
        yield acc
    except BaseException:
        # read back from the file, under its lock: a spend written by another process keeps the ledger too
        if new and acc is not None:
            with contextlib.suppress(OSError, ValueError):  # unreadable or locked too long: kept (the safe side),
                remove_unspent(args.ledger, "mmopt")       # and the block's own error is the one raised
        raise


def no_room(path: str, acc, privacy, *, run: bool = False) -> str:
    """Why the ledger at ``path`` cannot pay for ``privacy`` (a release's, or with ``run`` a synth run's), and the
    options that would fit (rounded down to six digits, as the Accountant's own remedy, so that they are
    accepted)."""
    left, total = acc.remaining, acc.total
    head = (f"The --ledger file '{path}' (total ε={total.epsilon:g}, δ={total.delta:g}, {acc.composition} "
            f"composition) cannot pay for this release's ε={privacy.epsilon:g}, δ={privacy.delta:g}")
    if not left.epsilon > 0:
        return head + ": its budget is used up. These data can answer nothing more; work from what was released."
    if run and acc.composition == "basic" and not left.delta > 0:
        return head + ": its δ is used up, and a synth run needs δ > 0. Work from what was released."
    if run and acc.composition == "pld":  # what remains is one more Gaussian release, which a synth run is not
        fits = ("a smaller --epsilon and a smaller --delta (under PLD a synth run is charged as a worst-case (ε, δ) "
                f"mechanism, whose δ alone must stay below the total's {total.delta:g})")
    elif acc.composition == "basic":
        fits = f"--epsilon {down_float(left.epsilon)!r} --delta {down_float(left.delta) or 0!r} or less"
    else:  # what remains is one more Gaussian release at the total's δ (zCDP also allows a Laplace one)
        fits = f"--epsilon {down_float(left.epsilon)!r} --delta {total.delta!r}" + ("" if run else " (Gaussian noise)")
        if acc.composition == "zcdp" and not run:  # a synth run is Gaussian: δ > 0
            fits += f", or --epsilon {down_float(math.sqrt(2 * left.rho))!r} --delta 0 (Laplace)"
    return f"{head}. Rerun with {fits}, or answer from what was released already."
