"""A ledger file as one session sees it: where it is and the text the session last read or wrote there.

The :class:`~mmopt.accounting.Accountant` keeps its budget logic; this module keeps what makes a file safe to
share between sessions: reads that notice another writer, writes that never go over a state the session has not
seen, and new files that never replace a ledger another run has just created.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from mmopt.accounting import _disk as dk
from mmopt.accounting import _ledger as lg
from mmopt.accounting._compose import Ledger
from mmopt.accounting._ledger import Spend, fmt
from mmopt.persist._files import check_path


@dataclass
class LedgerFile:
    """``path`` and ``seen``, the ledger text this session last read or wrote there (None: not read yet).

    Mutable on purpose: ``seen`` follows every read and write, which is how another writer is detected.
    """

    path: Path
    seen: str | None = None

    @classmethod
    def read(cls, path, caller: str) -> tuple[LedgerFile, float, float, str, tuple[Spend, ...]]:
        """The file at ``path`` and what it records: (file, ε_total, δ_total, composition, spends)."""
        source = real_path(ledger_path(path, caller))
        _check_one_name(source, caller)
        try:
            text = source.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise FileNotFoundError(f"{caller}: there is no ledger file '{source}'. Check the path, or start a "
                                    "session with Accountant(total, path=...).") from None
        except UnicodeDecodeError as exc:
            raise ValueError(f"{caller}: the file '{source}' is not UTF-8 text ({exc}).") from None
        eps, delta, composition, spends = _loads(text, source, caller)
        return cls(source, text), eps, delta, composition, spends

    @classmethod
    def create(cls, target: Path, ledger: Ledger, caller: str, *, replace: bool = False) -> LedgerFile:
        """A file this session did not read, holding ``ledger``: created exclusively (it must not appear
        meanwhile) unless ``replace``."""
        target = real_path(target)
        _check_target(target, caller)
        made = cls(target)
        made.put(ledger, exclusive=not replace)
        return made

    def current(self, ledger: Ledger, caller: str) -> Ledger:
        """The ledger in the file (the caller holds its lock): ``ledger``, this session's own, if the file is as
        the session left it, else the file's, which must record the same total and composition."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ValueError(f"{caller}: the ledger file '{self.path}' is gone (moved or deleted) since this session "
                             "used it. Restore it, or load the ledger where it is now: this session did not "
                             "write.") from None
        _check_one_name(self.path, caller)
        if text == self.seen:
            return ledger
        # checked as read() checks: another session's spend without the ε or ρ this composition counts was added
        # as 0 (1.8 of a total 1 spent after a hand edit; a helper's audit)
        eps, delta, composition, spends = _loads(text, self.path, caller)
        total = ledger.total
        if (eps, delta, composition) != (total.epsilon, total.delta, ledger.composition):
            raise ValueError(f"{caller}: the ledger file '{self.path}' now records total ε={fmt(eps)}, δ={fmt(delta)} "
                             f"with {composition!r} composition, not this session's: it was replaced by another "
                             "ledger. Load it again with Accountant.load: this session did not write to it.")
        lost = [s.label for s in ledger.spends if s.status == "spent" and s not in spends]
        if lost:  # spent entries are final: a file without them is another ledger (deleted and re-created)
            raise ValueError(f"{caller}: the ledger file '{self.path}' no longer records {len(lost)} spend(s) this "
                             f"session made ({', '.join(map(repr, lost[:3]))}): it was replaced by another ledger "
                             "with the same total. Restore the ledger from a copy; this session did not write to it.")
        self.seen = text
        return Ledger(total, composition, spends)

    def latest(self, ledger: Ledger, caller: str) -> Ledger:
        """:meth:`current`, read under the file's lock (a read while another session writes)."""
        with dk.locked(self.path, caller):
            return self.current(ledger, caller)

    def save(self, ledger: Ledger, caller: str) -> None:
        """Write ``ledger`` over this session's own file, only if the file is still the state it last saw."""
        _check_target(self.path, caller)
        with dk.locked(self.path, caller):
            _check_one_name(self.path, caller)
            try:
                now = self.path.read_text(encoding="utf-8")
            except FileNotFoundError:
                now = None
            if self.seen is not None and now != self.seen:
                raise ValueError(f"{caller}: the ledger file '{self.path}' changed since this session read it "
                                 "(another run spent from it, or it was moved). Load it again with "
                                 "Accountant.load: this session did not write to it.")
            self.put(ledger)

    def put(self, ledger: Ledger, *, exclusive: bool = False) -> None:
        """Write ``ledger`` atomically; the caller holds the lock (or ``exclusive``: the file is new)."""
        text = lg.dumps(ledger.total.epsilon, ledger.total.delta, ledger.composition, ledger.spends)
        dk.write_atomically(self.path, text, exclusive=exclusive)
        self.seen = text


def real_path(path: Path) -> Path:
    """The ledger's own path, symlinks resolved: a write through a link replaced the link by a new file (os.replace)
    and locked the link's folder, so the real ledger was left behind and a second one began — each allowing the
    whole budget (0.9 spent through the link and 0.9 more through the file, of a total 1)."""
    return Path(os.path.realpath(path))


def _check_one_name(path: Path, caller: str) -> None:
    """A ledger with a second hard link splits on the next write (os.replace gives this name a new inode, the other
    keeps the old ledger): refused, naming both remedies."""
    for wait in (0.0, 0.01, 0.05, 0.2):  # a new ledger has two names for an instant (its temporary file is linked
        time.sleep(wait)               # into place, then removed): only a lasting second name is refused
        try:
            links = os.stat(path).st_nlink
        except FileNotFoundError:
            return
        if links == 1:
            return
    raise ValueError(f"{caller}: the ledger file '{path}' has {links} names (hard links). A write through one "
                     "leaves the others holding the old ledger, so the budget could be spent twice. Keep one name "
                     "(remove the other links); use a symbolic link to reach it from elsewhere.")


def ledger_path(path, caller: str) -> Path:
    """``path`` as a Path (:func:`~mmopt.persist._files.check_path`), refused when it names a directory: a
    directory's link count (≥ 2) read as a hard-linked ledger, and its existence as a ledger to continue."""
    target = check_path(path, caller)
    _refuse_directory(target, caller)
    return target


def _refuse_directory(target: Path, caller: str) -> None:
    if target.is_dir():
        raise ValueError(f"The 'path' parameter of {caller} names a directory, '{target}'. Give a file name, e.g. "
                         f"'{target / 'budget.json'}'.")


def _check_target(target: Path, caller: str) -> None:
    _refuse_directory(target, caller)  # again at the write: the resolved path, or a directory made since
    if not target.parent.is_dir():
        raise FileNotFoundError(f"{caller}: the directory '{target.parent}' does not exist. Create it first.")


def _loads(text: str, source, caller: str):
    """``lg.loads``, with every spend holding what the composition counts: ε and δ (basic, pld) or ρ (zcdp); a
    pld spend without δ loaded, and every later spend or report raised a bare TypeError."""
    eps, delta, composition, spends = lg.loads(text, source)
    keys = ("rho",) if composition == "zcdp" else ("epsilon", "delta")
    for k, s in enumerate(spends, 1):
        for key in keys:
            if getattr(s, key) is None:
                raise ValueError(f"{caller}: the file '{source}' has spend #{k} without {key}, which a "
                                 f"{composition!r} ledger needs. Restore the ledger from a copy.")
    return eps, delta, composition, spends
