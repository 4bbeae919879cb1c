"""``--ledger``, ``--ledger-total`` and ``--composition`` of the release commands: the :class:`mmopt.Accountant` a
release spends from, created only when the release fits in it and removed again when the command fails before
spending (:func:`ledger_scope`)."""

from __future__ import annotations

import contextlib
import os

import mmopt
from mmopt.cli import output as out

__all__ = ["ledger_scope", "open_ledger"]


def open_ledger(args, privacy=None):
    """The :class:`mmopt.Accountant` of ``--ledger`` (None without it): the file if it exists, else a new one with
    ``--ledger-total`` (ε or ε,δ) and ``--composition`` — created only if ``privacy`` (this release's) fits in it;
    ValueError naming the option otherwise."""
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
        return ledger
    if args.ledger_total is None:
        raise ValueError(f"The --ledger file '{args.ledger}' does not exist. Give --ledger-total EPS[,DELTA] to "
                         "start it, or the path of an existing ledger.")
    try:
        parts = [float(t) for t in args.ledger_total.split(",")]
    except ValueError:
        parts = []
    if len(parts) not in (1, 2):
        raise ValueError(f"--ledger-total must be EPS or EPS,DELTA (numbers). Got {args.ledger_total!r}.")
    try:
        total, composition = mmopt.Privacy(*parts), composition or "basic"
    except ValueError as exc:  # Privacy's message names its 'epsilon', which the user set by --epsilon
        raise ValueError(f"--ledger-total {args.ledger_total} is not a budget: {exc}") from None
    # checked in memory first: a refused first release left the new file behind, holding this total, and the
    # corrected command was then told "a budget cannot change once spent from" — nothing had been spent
    if privacy is not None and not mmopt.Accountant(total, composition).can_spend(privacy, release=True):
        hint = (" Its δ = 0 leaves no room for this release's δ > 0 (Gaussian noise): give --ledger-total EPS,DELTA."
                if privacy.delta > 0 and total.delta == 0 else "")
        raise ValueError(f"--ledger-total {args.ledger_total}: this release's {privacy} does not fit in a new ledger "
                         f"of total {total} ({composition} composition), so '{args.ledger}' was not created.{hint}")
    return mmopt.Accountant.open(args.ledger, total, composition)


@contextlib.contextmanager
def ledger_scope(args, privacy):
    """:func:`open_ledger` for the block; a ledger this command created is removed again if the block fails before
    anything was spent from it (data, columns or a table refused after the file was opened left it behind, and
    the corrected command was then told its total "cannot change once spent from")."""
    new = getattr(args, "ledger", None) is not None and not os.path.exists(args.ledger)
    acc = open_ledger(args, privacy)
    try:
        yield acc
    except BaseException:
        # read back from the file: a spend written by another process keeps the ledger too
        if new and acc is not None and os.path.exists(args.ledger) and not mmopt.Accountant.load(args.ledger).spends:
            os.remove(args.ledger)
        raise
