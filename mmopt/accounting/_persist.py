"""Accountant sessions in ledger files: continue one, open-or-create one, save one (the methods' bodies).

Why these rules: a ledger file *is* the budget of its data, so nothing here may forget a spend — a new session
never replaces an existing file, a session continued from a file keeps its total, and a save to another path
never overwrites a ledger unless told to.
"""

from __future__ import annotations

import os
from pathlib import Path

from mmopt._base import validation as v
from mmopt.accounting import _disk as dk
from mmopt.accounting._compose import Ledger
from mmopt.accounting._file import LedgerFile, ledger_path, real_path
from mmopt.accounting._ledger import FORMAT, fmt
from mmopt.accounting._total import check_total
from mmopt.privacy import Privacy


def load(cls, path):
    """:meth:`mmopt.accounting.Accountant.load` (its docstring)."""
    caller = "Accountant.load"
    file, eps, delta, composition, spends = LedgerFile.read(path, caller)
    try:
        acc = cls(Privacy(eps, delta), composition)
    except ValueError as exc:
        raise ValueError(f"{caller}: the file '{file.path}' records a total that is not valid: {exc}") from None
    acc._ledger = Ledger(acc.total, composition, spends)
    acc._file = file
    return acc


def open_or_create(cls, path, total: Privacy, composition: str):
    """:meth:`mmopt.accounting.Accountant.open` (its docstring)."""
    caller = "Accountant.open"
    target = ledger_path(path, caller)
    check_total(total, composition, caller)  # in open's name (the constructor's refusals said Accountant's)
    fresh = cls(total, composition)
    if not target.exists():
        try:
            fresh._file = LedgerFile.create(target, fresh._ledger, caller)
            return fresh
        except FileExistsError:  # another run created it meanwhile (six at once: five raised): continue that one
            pass
    acc = load(cls, target)
    if (acc.total.epsilon, acc.total.delta, acc.composition) != (total.epsilon, total.delta, composition):
        raise ValueError(f"{caller}: the ledger file '{target}' records total ε={fmt(acc.total.epsilon)}, "
                         f"δ={fmt(acc.total.delta)} with {acc.composition!r} composition, not "
                         f"ε={fmt(total.epsilon)}, δ={fmt(total.delta)} with {composition!r}. A budget cannot "
                         "change once spent from: pass the recorded total, or use another file for other data.")
    return acc


def save(acc, path, overwrite: bool) -> Path:
    """:meth:`mmopt.accounting.Accountant.save` (its docstring)."""
    caller = "Accountant.save"
    overwrite = v.check_bool(overwrite, name="overwrite", caller=caller)  # "no" is truthy: it replaced a ledger
    if path is None and acc._file is None:
        raise ValueError(f"The 'path' parameter of {caller} is needed: this session has no ledger file yet. "
                         "Give one, e.g. acc.save('budget.json').")
    target = acc.path if path is None else real_path(ledger_path(path, caller))  # a link to its own file is it
    if target == acc.path:
        acc._file.save(acc._ledger, caller)
        return target
    if acc.path is not None:  # a second file for one data set: each allowed the rest (0.7 + 0.2 + 0.3 of 1 spent)
        raise ValueError(f"{caller}: this session's spends are recorded in '{acc.path}'; writing them to "
                         f"'{target}' as well would leave two ledgers for one data set, each allowing what remains. "
                         "To move the ledger, move its file and continue it with Accountant.load(new_path); "
                         "acc.save() rewrites its own file.")
    if target.exists() and not overwrite:
        raise FileExistsError(f"{caller}: the file '{target}' already exists. Pass overwrite=True to replace "
                              "it, or choose another path.")
    if not overwrite:
        acc._file = LedgerFile.create(target, acc._ledger, caller)
        return target
    with dk.locked(target, caller):  # the check and the write as one, as every spend
        _refuse_spent(target, caller)
        acc._file = LedgerFile.create(target, acc._ledger, caller, replace=True)
    return target


def _refuse_spent(target: Path, caller: str) -> None:
    """overwrite=True replaced a ledger that recorded ε = 0.9 spent of 1, and the next run was offered the whole
    budget (an audit): a ledger's spends are final, so one that records any is never replaced. A file that is not a
    ledger (or records none) may be. A ledger that cannot be read (truncated, hand-edited, re-encoded, or written by
    a newer mmopt) may record spends: it was taken for "not a ledger" and replaced, and the whole budget offered
    again (a helper's audit; then, with a byte search for the format's name, a UTF-16 copy, an empty file and one cut
    to 10 bytes still were: the review). So only a file that reads as UTF-8 JSON without the ledger format is
    replaced; anything else unreadable is kept."""
    try:
        spends = _spends(target, caller)
    except ValueError as exc:  # not a ledger, or one that cannot be read
        if _plainly_not_a_ledger(target):
            return
        raise ValueError(f"{caller}: '{target}' cannot be read as an mmopt privacy ledger ({exc}), and may be a "
                         "damaged one recording spends, which are final, so overwrite=True does not replace it. "
                         "Restore it from a backup (or repair it), remove it yourself if it is not a ledger, or save "
                         "to another path.") from None
    if spends:
        raise ValueError(f"{caller}: '{target}' is a ledger that records {len(spends)} spend(s); its spends are "
                         "final, so overwrite=True does not replace it (the next run would be offered the whole "
                         "budget again). Continue it with Accountant.load(path), or save to another path.")


def _plainly_not_a_ledger(target: Path) -> bool:
    """Whether ``target`` reads as UTF-8 JSON that does not name the ledger format (so replacing it loses no spend)."""
    import json
    try:
        with open(target, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return not (isinstance(doc, dict) and FORMAT in json.dumps(doc))


def remove_unspent(path, caller: str) -> bool:
    """Remove the ledger file at ``path`` if it records no spend, pending or final; True if it did.

    The check and the removal hold the ledger's lock, as every spend does: unlocked, a spend another process wrote
    between them was deleted with the file, and the next run was offered the whole budget again (a helper's probe:
    ε = 0.9 spent from a total of 1, then 1 offered)."""
    target = real_path(ledger_path(path, caller))
    with dk.locked(target, caller):
        spends = _spends(target, caller)
        if spends is None or spends:
            return False
        os.remove(target)
        return True


def _spends(target: Path, caller: str):
    """The spends the ledger at ``target`` records, or None where there is no file (the caller holds its lock)."""
    try:
        return LedgerFile.read(target, caller)[4]
    except FileNotFoundError:
        return None
