"""Synthetic records from private marginals: MST and AIM on mmopt's optimal residual measurements.

Notation: see README and :mod:`mmopt.structured.residual`. :func:`mst` (McKenna, Miklau & Sheldon 2021) and
:func:`aim` (McKenna, Mullins, Sheldon & Miklau 2022) read the records only through a :class:`Curator`
(:mod:`mmopt.synth.curator`), which answers two kinds of paid question in ρ-zCDP — a Gaussian measurement of
marginals with mmopt's certified-optimal residual strategy, and an exponential-mechanism choice — and keeps the
ledger. Estimation is least squares in the residual basis (:mod:`mmopt.synth.residuals`) with stated projections
(:mod:`mmopt.synth.projection`); MST's tree is sampled exactly (:mod:`mmopt.synth.tree`). Both return a
:class:`Synthetic`: ``.records(n)``, ``.marginal(attrs)``, ``.epsilon``, ``.delta``, ``.rho``. With
``accountant=`` a run spends its whole (ε, δ) from an :class:`mmopt.Accountant` as one release
(:mod:`mmopt.synth.spend`).
:func:`workload_error` is the papers' error measure. :meth:`Synthetic.save` writes the fitted model to a file and
:func:`load` reads it back exactly (:mod:`mmopt.synth.saved`), to draw more rows later at no privacy cost.
"""

from mmopt.synth.aim import aim
from mmopt.synth.error import workload_error
from mmopt.synth.mst import mst
from mmopt.synth.result import Synthetic, load

__all__ = ["Synthetic", "aim", "load", "mst", "workload_error"]
