"""A synthetic-data run spent from an :class:`mmopt.Accountant`: the whole (ε, δ) of MST or AIM as one release.

Notation: see README. However many measurements and choices it makes, a run is ρ-zCDP with ρ the budget's
(:func:`mmopt.synth.result.budget_rho`), so the accountant is charged once, as for a records release
(:func:`mmopt.records.release.release_marginals`): checked before the records are read (a refusal reads and draws
nothing), written to its ledger as pending before the first draw, and replaced by what the run spent (its
``epsilon``, ``delta`` and ``rho``) once it returns. An error or a Ctrl-C after the first draw (the curator counts
its draws, :data:`mmopt._base.opendp.DRAWS`) leaves the entry pending, counted in full: an overcount, never an
undercount. Under PLD composition the run is charged as the worst (ε, δ)-DP mechanism, not as one Gaussian release
(:func:`mmopt.accounting._pending.charge_of`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from mmopt.records.rows import check_seed

__all__ = ["charged", "requested"]


def requested(privacy, seed, accountant, label, caller: str):
    """(privacy, seed) of a run, before anything is read or spent: ``privacy`` as a records release resolves it
    (``"remaining"`` with an accountant: all it has left, :func:`mmopt.records.release.budget_of`), the seed
    checked, and a seed with an accountant refused as a records release refuses it
    (:func:`mmopt.records.release.refuse_seeded`: a simulation is not a release), as is a label without one
    (:func:`mmopt.records.release.refuse_label`)."""
    from mmopt.records.release import _check_accountant, budget_of, refuse_label, refuse_seeded
    _check_accountant(accountant, caller)
    seed = check_seed(seed, caller)
    refuse_seeded(seed, accountant, caller)
    refuse_label(label, accountant, caller)
    if accountant is not None and accountant.composition == "pld" and isinstance(privacy, str) \
            and privacy == "remaining":
        # the PLD ledger's "remaining" is one more Gaussian release at the total's δ: a worst-case (ε, δ) mechanism
        # at that δ never fits (its δ alone is the total's), and the refusal would suggest 'remaining' again
        raise ValueError(f"The 'privacy' parameter of {caller} is 'remaining', but the accountant composes by PLD, "
                         f"where what remains is the ε of one more Gaussian release at the total's δ; {caller} is "
                         "charged as a worst-case (ε, δ) mechanism (it is not one Gaussian), whose δ must be below "
                         f"what is left. Give a Privacy(epsilon, delta) with delta below {accountant.total.delta!r}.")
    return budget_of(privacy, accountant, caller, run=True, gaussian=True), seed  # a run is ρ-zCDP: δ > 0


@contextlib.contextmanager
def charged(accountant, privacy, label, what: str, caller: str) -> Iterator[list]:
    """The run's spend around the block (module docstring); the block appends its result to the list it is given.
    Without an accountant, nothing."""
    if accountant is None:
        yield []
        return
    from mmopt.accounting._pending import pending_run  # lazy, as the records release's
    with pending_run(accountant, privacy, label, what, caller=caller) as outcome:
        yield outcome
