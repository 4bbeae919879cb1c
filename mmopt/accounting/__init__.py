"""A privacy budget across releases: :class:`Accountant` composes every spend and refuses to exceed its total.

Notation: see README. ``Accountant(total=Privacy(ε, δ), composition="basic" | "zcdp")`` records each use of the
data (:meth:`~Accountant.release`, through :func:`mmopt.release`, or :meth:`~Accountant.spend` for algorithms
that draw their own noise) as a :class:`Spend` in an immutable :class:`Ledger`, checks each one **before any
noise is drawn**, and can keep the ledger in a JSON file across runs. Basic composition adds ε and δ; zCDP adds
ρ and converts it to (ε, δ) with OpenDP's own map (:func:`epsilon_of_rho`). Tutorial: docs/tutorials/accountant.md.

Modules: ``_session`` (the Accountant), ``_compose`` (the rules, on a frozen Ledger), ``_zcdp`` (OpenDP's maps),
``_ledger`` (entries, exact sums, the JSON file), ``_report`` (summary).
"""

from mmopt.accounting._compose import Ledger
from mmopt.accounting._ledger import Budget, Spend
from mmopt.accounting._session import COMPOSITIONS, Accountant
from mmopt.accounting._zcdp import epsilon_of_rho, gaussian_rho, max_rho, pure_rho

__all__ = ["COMPOSITIONS", "Accountant", "Budget", "Ledger", "Spend", "epsilon_of_rho", "gaussian_rho", "max_rho",
           "pure_rho"]
