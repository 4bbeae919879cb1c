"""The :class:`Accountant`: a privacy budget that composes across releases and refuses to go over its total."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

from mmopt._base import validation as v
from mmopt._base.kept import keeping_draws
from mmopt.accounting import _disk as dk
from mmopt.accounting import _ledger as lg
from mmopt.accounting import _pending, _persist, _report
from mmopt.accounting import _spends as entries
from mmopt.accounting._compose import Ledger
from mmopt.accounting._file import LedgerFile, ledger_path
from mmopt.accounting._ledger import Budget, Spend
from mmopt.accounting._total import check_total
from mmopt.privacy import Privacy

COMPOSITIONS = lg.COMPOSITIONS


class Accountant:
    """A privacy budget for one data set, composed across releases: records every spend, refuses to overspend.

    Every use of the data goes through the accountant: :meth:`release` (which calls :func:`mmopt.release`) or
    :meth:`spend` (for algorithms that draw their own noise). Each is checked against ``total`` **before any
    noise is drawn**, and refused with a ValueError stating the remaining budget if the composed loss would
    exceed it. The session holds an immutable :attr:`ledger` (each spend replaces it) which can live in a JSON
    file (``path=``, :meth:`load`, :meth:`open`, :meth:`save`), so that spends are tracked across runs.

    Composition (the loss of all spends together; the rules and their sources: :mod:`mmopt.accounting`):
    ``"basic"`` (ε and δ add), ``"pld"`` (privacy loss distributions, ``dp-accounting``; the tightest for many
    Gaussian releases) or ``"zcdp"`` (ρ adds, converted to (ε, δ) by OpenDP).

    Parameters
    ----------
    total : Privacy
        The whole budget for these data, (ε, δ). For ``"zcdp"``, δ must be > 0.
    composition : {"basic", "zcdp", "pld"}, default="basic"
        Basic is the default: it needs no extra package, is exact in decimals, and is what pure ε-DP budgets
        mean; choose "pld" for several Gaussian releases.
    path : str or os.PathLike, optional
        A ledger file for this new session; it must not exist yet (:meth:`load` or :meth:`open` continue an
        existing one). Every spend is written to it as it happens.

    Notes
    -----
    Only :meth:`release` draws noise through OpenDP's vetted samplers; spends recorded with :meth:`spend` are the
    caller's word. Any number of sessions, in threads or processes, may spend from one ledger file, each spend
    checked and written under an exclusive lock (:mod:`mmopt.accounting`, "Sharing a ledger").

    Examples
    --------
    >>> import mmopt
    >>> acc = Accountant(mmopt.Privacy(epsilon=1.0))
    >>> for _ in range(10):
    ...     _ = acc.spend(mmopt.Privacy(0.1), what="a count, Laplace noise")   # ten ε = 0.1: exactly ε = 1
    >>> acc
    Accountant(basic: total ε=1, δ=0; spent ε=1, δ=0 in 10 spends; remaining ε=0, δ=0)
    >>> acc.spend(mmopt.Privacy(0.01))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: Accountant.spend: spending ε=0.01, δ=0 would exceed the total budget ε=1, δ=0 (basic ...
    """

    def __init__(self, total: Privacy, composition: str = "basic", *, path=None):
        caller = "Accountant"
        check_total(total, composition, caller)
        # calibration="analytic" always: it only sets a Gaussian σ, and a total draws no noise
        self._ledger = Ledger(Privacy(total.epsilon, total.delta), composition)
        # threads of one process sharing a session: the check and the write of a spend in one step (a file's flock
        # serialises processes; without this, two threads each checked the same ledger and one spend was lost)
        self._lock = threading.RLock()
        self._file: LedgerFile | None = None  # where spends are written, and the text last seen there
        if path is not None:
            target = ledger_path(path, caller)
            if target.exists():
                raise FileExistsError(f"{caller}: the ledger file '{target}' already exists. Continue it with "
                                      "Accountant.load(path) (or Accountant.open), or choose another path: a new "
                                      "session would forget the budget it records.")
            self._file = LedgerFile.create(target, self._ledger, caller)

    # -- state ---------------------------------------------------------------------------------------------
    @property
    def ledger(self) -> Ledger:
        """The immutable record: ``total``, ``composition`` and ``spends``; with a file, as the file holds it now.

        Re-read under the file's lock, so that what this session reports (:attr:`spent`, :attr:`remaining`,
        :meth:`can_spend`, :meth:`summary`) counts every other session's spends: it had said ε = 0.5 could be spent
        when another process had spent 0.7 of 1 (a helper's probe; :meth:`spend` itself was always checked)."""
        with self._lock:
            if self._file is not None:
                self._ledger = self._file.latest(self._ledger, "Accountant")
            return self._ledger

    @property
    def total(self) -> Privacy:
        """The whole budget, (ε, δ)."""
        return self._ledger.total

    @property
    def composition(self) -> str:
        """'basic', 'zcdp' or 'pld'."""
        return self._ledger.composition

    @property
    def spends(self) -> tuple[Spend, ...]:
        """Every recorded spend, oldest first."""
        return self.ledger.spends

    @property
    def path(self) -> Path | None:
        """The ledger file every spend is written to, or None for a session kept in memory."""
        return None if self._file is None else self._file.path

    @property
    def spent(self) -> Budget:
        """The composed loss of all spends: (Σε, Σδ), or Σρ with its ε at the total's δ (zCDP)."""
        return self.ledger.spent()

    @property
    def remaining(self) -> Budget:
        """What is left: (ε, δ) under basic composition; under zCDP, ρ and the ε that one more Gaussian release at
        the total's δ may use (that of all but 10⁻⁹ of ρ, a margin for the float conversions); under PLD, the ε of
        one more *Gaussian release* at the total's δ (``release(..., privacy="remaining")``). Rounded down, so
        spending it is accepted. Under PLD a declared spend of that ε, or a Laplace release, costs more than the
        Gaussian release and may not fit: ask :meth:`can_spend` for those."""
        return self.ledger.remaining()

    def can_spend(self, privacy: Privacy | None = None, *, rho: float | None = None, release: bool = False) -> bool:
        """Whether :meth:`spend` (or, with ``release=True``, :meth:`release`) would accept this budget now."""
        release = v.check_bool(release, name="release", caller="Accountant.can_spend")
        ledger = self.ledger
        return ledger.fits(ledger.charge(privacy, rho, "Accountant.can_spend", release=release))

    # -- spending ------------------------------------------------------------------------------------------
    def spend(self, privacy: Privacy | None = None, label: str | None = None, *, rho: float | None = None,
              what: str | None = None) -> Spend:
        """Record a spend made outside :meth:`release`, after checking that it fits.

        Call it *before* running the algorithm, so that nothing runs on a refused budget.

        Parameters
        ----------
        privacy : Privacy, optional
            The (ε, δ) the algorithm spends (e.g. the ``epsilon`` given to :func:`mmopt.sparse_vector.sparse_vector`
            or :func:`mmopt.adaptive.mwem`). Under zCDP only δ = 0 is accepted, at ρ = ε²/2: an (ε, δ) mechanism
            has no ρ unless it is Gaussian, whose ρ is then passed instead.
        label : str, optional
            A name for the ledger; default "spend k".
        rho : float, optional
            zCDP sessions only: the mechanism's ρ, e.g. Δ₂²/(2σ²) for Gaussian noise σ at L2 sensitivity Δ₂.
            Exactly one of ``privacy`` and ``rho``.
        what : str, optional
            What was run, for the ledger; default "declared by the caller".

        Returns
        -------
        Spend
            The new entry, ``source="declared"``: the accountant cannot know how that noise was drawn.

        Raises
        ------
        ValueError
            If the composed loss would exceed ``total``; the message states what remains.
        """
        caller = "Accountant.spend"
        ledger = self.ledger
        charge = ledger.charge(privacy, rho, caller, release=False)
        label = self._label(label, "spend", caller)
        what = "declared by the caller" if what is None else v.check_str(what, name="what", caller=caller)
        ledger.refuse_unless_fits(charge, caller)
        eps, delta = (None, None) if privacy is None else (privacy.epsilon, privacy.delta)
        entry = Spend(label, what, eps, delta, charge if self.composition == "zcdp" else None, entries.now())
        self._commit(lambda ledger: entries.checked(ledger, charge, caller).add(entry), caller)
        return entry

    def release(self, workload, strategy, x, privacy: Privacy | str, *, label: str | None = None, **kwargs):
        """:func:`mmopt.release` (dense or implicit), its budget checked first and recorded after.

        The spend is checked before :func:`mmopt.release` is called, so a refused release draws no noise. It is
        written to the ledger (and its file) as *pending* at the requested budget before the noise is drawn,
        then replaced by what OpenDP verified: ``out.verified_loss`` (ε, or (ε, δ)), and ρ = Δ'²/(2σ²) of the
        noise actually drawn (Gaussian; Δ' ≤ (1 + 2⁻³⁰)Δ₂ the sensitivity OpenDP charges on the lattice it draws
        on, :func:`mmopt._base.opendp.charged_sensitivity`) or ε²/2 (Laplace). Under zCDP the check uses the
        largest ρ that any release verified at (ε, δ) can have (:func:`~mmopt.accounting.max_rho`); the ledger
        records the real one.
        If :func:`mmopt.release` raises before any noise is drawn the pending entry is removed; raised after the
        draw began (noisy values that overflow, a reconstruction that runs out of memory) or interrupted, the
        run leaves it, counted in full.

        Parameters
        ----------
        workload, strategy, x
            As for :func:`mmopt.release`.
        privacy : Privacy or "remaining"
            The budget of this release. ``"remaining"`` spends **everything that is left** in this one release
            (the usual last step; it must be said, never a default): ``Privacy(ε, δ)`` of :attr:`remaining` under
            basic composition (Gaussian noise if δ remains), or a Gaussian release at the total's δ using the
            remaining ρ under zCDP. Under PLD it is the largest ε at the total's δ whose check passes, and the check
            assumes the analytic σ: OpenDP's σ, which the ledger then records, is ~7 % larger, so some budget is
            left over (spent, never overspent).
        label : str, optional
            A name for the ledger; default "release k".
        **kwargs
            Passed to :func:`mmopt.release`: ``noise_scale``, ``reconstruct``, ``total``, ``zeros``,
            ``reconstruct_options``, ``verbose``.

        Returns
        -------
        MechanismOutput or StructuredOutput
            What :func:`mmopt.release` returns.

        Examples
        --------
        >>> import mmopt
        >>> acc = Accountant(mmopt.Privacy(1.0))
        >>> W, H = mmopt.workload.prefix(4), mmopt.strategy.hierarchical(4)
        >>> out = acc.release(W, H, [3, 0, 2, 5], mmopt.Privacy(0.25), label="prefixes")
        >>> out.verified_loss, acc.remaining
        (0.25, Budget(epsilon=0.75, delta=0.0, rho=None))
        >>> acc.spends[0].label, acc.spends[0].source, acc.spends[0].what  # b rounded up: OpenDP's is a hair above Δ/ε
        ('prefixes', 'release', "laplace noise on strategy 'H2' for workload 'prefix(4)', Δ=3, b=12.00000001")
        """
        from mmopt import dispatch  # looked up at call time, so that a test can prove no noise is drawn

        caller = "Accountant.release"
        rest = isinstance(privacy, str) and privacy == "remaining"
        privacy = _pending.requested(self, privacy, caller, gaussian=dispatch.gaussian_only(workload, strategy))
        what = (f"{privacy.noise} noise on strategy {entries.name_of(strategy)!r} "
                f"for workload {entries.name_of(workload)!r}")
        with _pending.rest_without_delta(self, privacy, rest), keeping_draws(caller), \
                self.pending_release(privacy, label, what, caller=caller) as outcome:
            outcome.append(dispatch.release(workload, strategy, x, privacy, **kwargs))
        return outcome[0]

    @contextlib.contextmanager
    def pending_release(self, privacy: Privacy, label: str | None, what: str, *, caller: str) -> Iterator[list]:
        """The budget side of a release that some code other than :meth:`release` draws (a records release):
        checked (refused before anything runs), written as *pending* before the block, then, if the block
        appended the release's output (anything with ``verified_loss``, ``noise``, ``sensitivity`` and
        ``noise_scale``) to the list it yields, replaced by what was verified; if the block raised with nothing
        appended and no noise drawn (:data:`mmopt._base.opendp.DRAWS`), the pending entry is removed. A crash, or
        an error once a draw began, leaves it counted in full."""
        with _pending.pending_release(self, privacy, label, what, caller=caller) as outcome:
            yield outcome

    # -- files ---------------------------------------------------------------------------------------------
    @classmethod
    def load(cls, path) -> Accountant:
        """Continue the session recorded in a ledger file; later spends are written to the same file.

        Examples
        --------
        >>> import mmopt, os, tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> ledger = os.path.join(tmp.name, "budget.json")
        >>> acc = Accountant(mmopt.Privacy(1.0, 1e-6), "zcdp", path=ledger)
        >>> _ = acc.spend(mmopt.Privacy(0.1), "svt")            # ε = 0.1 counts as ρ = ε²/2
        >>> again = Accountant.load(ledger)
        >>> again.spends == acc.spends, round(again.spent.rho, 12)
        (True, 0.005)
        >>> tmp.cleanup()
        """
        return _persist.load(cls, path)

    @classmethod
    def open(cls, path, total: Privacy, composition: str = "basic") -> Accountant:
        """The session in the ledger file ``path`` if it exists (with this total and composition), else a new one
        written there: the one call a script run many times needs.

        Examples
        --------
        >>> import mmopt, os, tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> ledger = os.path.join(tmp.name, "budget.json")
        >>> _ = Accountant.open(ledger, mmopt.Privacy(1.0)).spend(mmopt.Privacy(0.3), "first run")
        >>> Accountant.open(ledger, mmopt.Privacy(1.0)).remaining.epsilon       # the second run sees it
        0.7
        >>> tmp.cleanup()
        """
        return _persist.open_or_create(cls, path, total, composition)

    def save(self, path=None, *, overwrite: bool = False) -> Path:
        """Write the ledger as JSON, atomically (a temporary file, then ``os.replace``); later spends go there too.

        ``path=None`` rewrites this session's own file. A session kept in memory may be saved to a new path (one
        that exists only with ``overwrite=True``, and never over a ledger that records a spend: replacing it would
        erase the budget it records); a session with a file is refused another one, which would be a second ledger
        for the same data. Returns the path written.
        """
        return _persist.save(self, path, overwrite)

    # -- reading -------------------------------------------------------------------------------------------
    def summary(self) -> str:
        """The session for people: total, spent, remaining, then one line per spend.

        Examples
        --------
        >>> import mmopt
        >>> acc = Accountant(mmopt.Privacy(1.0, 1e-6))
        >>> _ = acc.spend(mmopt.Privacy(0.5), "svt", what="sparse_vector, c=3, OpenDP noise")
        >>> print(acc.summary())  # doctest: +ELLIPSIS
        Accountant, basic composition (ε and δ add)
          total      ε=1, δ=1e-06
          spent      ε=0.5, δ=0 in 1 spend
          remaining  ε=0.5, δ=1e-06
          #  label  ε    δ  ρ  source    status  what                              time (UTC)
          1  svt    0.5  0  —  declared  spent   sparse_vector, c=3, OpenDP noise  20...
        """
        return _report.summary(self.ledger)

    def __repr__(self) -> str:
        try:
            return _report.one_line(self.ledger)
        except (OSError, ValueError, TimeoutError) as exc:  # a repr never raises: the last state seen, said so
            return f"{_report.one_line(self._ledger)[:-1]}; ledger file unreadable: {exc})"

    # -- internals -----------------------------------------------------------------------------------------
    def _commit(self, update, caller: str) -> Ledger:
        """Make ``update(ledger)`` the record. With a file: under its lock, the ledger *as on disk* (other sessions'
        spends included) is updated and written, so that a spend is checked against every spend recorded before
        it, in any process; memory follows the file. ``update`` may refuse (raise): nothing is then written."""
        with self._lock:
            if self._file is None:
                self._ledger = update(self._ledger)
                return self._ledger
            with dk.locked(self._file.path, caller):
                self._ledger = self._file.current(self._ledger, caller)
                new = update(self._ledger)
                self._file.put(new)
                self._ledger = new
            return new

    def __getstate__(self) -> dict:  # a lock does not pickle: a copy gets its own
        if self._file is None:  # copy.deepcopy, or a worker process's copy, spent the whole budget again (1.8 of 1)
            raise TypeError("Accountant: a session without a ledger file cannot be copied or pickled: each copy "
                            "would hold the whole budget and spend it on its own. Pass path=... so that every copy "
                            "spends one locked file (any number of threads or processes), or Accountant.save a "
                            "snapshot.")
        return {key: value for key, value in self.__dict__.items() if key != "_lock"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()

    def _label(self, label, kind: str, caller: str) -> str:
        if label is None:
            return f"{kind} {len(self.spends) + 1}"
        return v.check_str(label, name="label", caller=caller)

