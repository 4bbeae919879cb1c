"""Grouping sets over a hierarchy as an OpenDP ``Measurement``: OpenDP's map and noise, mmopt's strategy.

Notation: see README, :mod:`mmopt.opendp.measurement` and :mod:`mmopt.hierarchy.release`. The chain is that of
:func:`~mmopt.opendp.make_matrix_mechanism`,

    records ──T──▶ A x ∈ ℝᵖ ──make_gaussian(σ)──▶ y ──post──▶ GroupedRelease

with A the hierarchy strategy's measurements (coefficients in the adapted orthonormal basis, or weighted node
totals per component of the other attributes). **T**'s stability map d_in ↦ d_in·Δ₂ is exact for the same reason
(a record adds a unit vector e_c to x, ‖A e_c‖ ≤ Δ₂ with equality at the worst cell), with Δ₂ the strategy's
exact closed form rounded upwards and the float64 rounding of A x charged (:mod:`mmopt.hierarchy.charged`; a dense
strategy's by :mod:`mmopt.dense.exact_answers`: about 9.5·10⁻⁷ of Δ₂; hence the records check below). The
coarser levels are public functions of the leaf category, never read from the records, so a record moves exactly
one cell. **post** is the exact least squares of :func:`mmopt.hierarchy.release.release`, post-processing.
Gaussian noise only (zCDP output measure): the hierarchy families are optimised for L2 sensitivity. The OpenDP
features used and why they are safe here: see :mod:`mmopt.opendp.measurement`.
"""

from __future__ import annotations

import math

import numpy as np

from mmopt._base import opendp as _opendp
from mmopt.dense.exact_answers import check_histogram
from mmopt.opendp import measurement as om
from mmopt.privacy import Privacy

__all__ = ["make_grouping_sets_mechanism"]

_CALLER = "make_grouping_sets_mechanism"


def make_grouping_sets_mechanism(input_domain, input_metric, output_measure, domain, sets, scale=None, *,
                                 leaf: str, levels: dict, privacy: Privacy | None = None, strategy=None):
    """An OpenDP ``Measurement`` releasing ``GROUP BY GROUPING SETS (sets)`` over a hierarchy on ``leaf``.

    Parameters
    ----------
    input_domain, input_metric
        :func:`~mmopt.opendp.records_space` (``domain``): tables of records, records added or removed.
    output_measure : opendp Measure
        ``dp.zero_concentrated_divergence()`` (Gaussian noise; map ρ = (d_in·Δ₂)²/2σ²).
    domain, sets, leaf, levels, strategy
        As :func:`mmopt.hierarchy.release_grouping_sets`; the strategy is chosen from public facts only.
    scale : float or None
        σ of each measurement; or None with ``privacy``.
    privacy : Privacy or None
        Instead of ``scale``: the σ :func:`~mmopt.hierarchy.release_grouping_sets` draws at for this (ε, δ).

    Returns
    -------
    opendp.mod.Measurement
        Its function takes a source of records and returns a :class:`~mmopt.hierarchy.records.GroupedRelease`
        (``.table(alpha)``: estimates, standard errors, exact Gaussian intervals).

    Examples
    --------
    >>> import opendp.prelude as dp, pandas as pd
    >>> from mmopt.opendp import records_space
    >>> from mmopt.hierarchy import cross, rollup
    >>> from mmopt.records import Attribute, Domain
    >>> D = Domain((Attribute("county", categories=("a", "b", "c")), Attribute("sex", categories=("F", "M"))))
    >>> m = make_grouping_sets_mechanism(*records_space(D), dp.zero_concentrated_divergence(), D,
    ...                                  cross(rollup("state", "county"), [()]), 5.0, leaf="county",
    ...                                  levels={"state": ["X", "X", "Y"]})
    >>> m.map(2) == 4 * m.map(1)        # ρ(d_in) = (d_in·Δ₂)²/2σ²
    True
    >>> t = m(pd.DataFrame({"county": ["a", "b", "c"] * 30, "sex": ["F", "M", "F"] * 30})).table()
    >>> t[t["set"] == 1][["state", "county"]].values.tolist()     # ROLLUP's (state) level: county is NULL
    [['X', None], ['Y', None]]
    """
    T, noise, post = pieces(input_domain, input_metric, output_measure, domain, sets, scale, leaf=leaf,
                            levels=levels, privacy=privacy, strategy=strategy)
    return T >> noise >> post


def pieces(input_domain, input_metric, output_measure, domain, sets, scale=None, *, leaf: str, levels: dict,
           privacy: Privacy | None = None, strategy=None) -> tuple:
    """(T, OpenDP's Gaussian measurement, the post-processing Function) of :func:`make_grouping_sets_mechanism`,
    unchained: for tests and for callers who want A x under their own OpenDP noise."""
    from mmopt.hierarchy.records import plan_grouping_sets
    caller = _CALLER
    dp, noise = om.check_space(input_domain, input_metric, output_measure, domain, scale, privacy, caller)
    if noise != "gaussian":
        raise ValueError(f"The 'output_measure' parameter of {caller} must be dp.zero_concentrated_divergence() "
                         "(Gaussian noise): the hierarchy strategies are optimised for L2 sensitivity. Got "
                         f"{output_measure} instead. For ε-DP use make_matrix_mechanism on the leaf's marginals.")
    # only the noise steers the plan; the stand-in budget's ε, δ are not used
    plan = plan_grouping_sets(domain, sets, privacy if privacy is not None else Privacy(1.0, 1e-9), leaf=leaf,
                              levels=levels, strategy=strategy, caller=caller)
    m = plan.measurements
    if m is None:
        raise ValueError(f"The 'strategy' parameter of {caller} must be a HierarchyStrategy or NodeStrategy (its "
                         "measurements are the OpenDP transformation's output). An OrbitStrategy (mmopt.plan's, for "
                         "accuracy targets) releases through mmopt.hierarchy.release_grouping_sets.")
    n = m.size  # public: the strategy's number of measurements
    if privacy is not None:  # the σ release_grouping_sets draws at for this budget (same search, same map)
        _, scale, loss = _opendp.calibrate(n, m.sensitivity, privacy, noise_scale=None, caller=caller)
    else:
        scale, loss = om.check_scale(scale, caller), (math.nan, math.nan)

    def answers(records):
        x = plan.counts(records, caller=caller)
        check_histogram(x.ravel(), caller)  # at most MAX_RECORDS records: the domain the d_in charge is proven for
        return m.answer(x).tolist()

    def post(y):
        return plan.grouped(m.released(np.asarray(y, dtype=np.float64), scale, loss))

    out_domain = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=n)
    out_metric = dp.l2_distance(T=float)
    with om.vouched(dp):
        T = dp.t.make_user_transformation(input_domain, input_metric, out_domain, out_metric, function=answers,
                                          stability_map=lambda d_in: om.scaled(d_in, m.sensitivity))
        release = dp.new_function(post, TO="ExtrinsicObject")
    return T, dp.m.make_gaussian(out_domain, out_metric, scale), release
