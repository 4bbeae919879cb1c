"""A grouping-set release's answers as a table: :func:`mmopt.release` of grouping sets under the hierarchy family.

Notation: see :mod:`mmopt.answers.table`. On grouping sets over hierarchies (a union of Kronecker products of level
matrices) with the strategy :func:`mmopt.optimize` returns for them, :func:`mmopt.release` takes the hierarchy
family's route and returns a ``HierarchyRelease`` (:mod:`mmopt.hierarchy.release`): per grouping set s, the
least-squares counts over its groups and their exact variances at the noise drawn, with no x̂ of the N cells. Its
table has the rows, labels and columns of any other release of the same workload: ``answer`` is the workload's row
w_s·count (as W x̂ is elsewhere, the ``weight`` column beside it) and ``standard_error`` w_s·√variance, so the table
of a pair does not depend on the route its strategy takes (a release under a dense strategy lists the same
columns). This module reads the release by its fields (answers and variances per set, no estimate): the hierarchy
layer imports the answers layer, not the other way.
"""

from __future__ import annotations

import math

import numpy as np

from mmopt._base.probe import matches, probe_histogram
from mmopt.answers.values import iter_values
from mmopt.answers.variance import check_released_delta
from mmopt.answers.widths import Widths, allowance, warn_roundoff
from mmopt.answers.widths import preflight as check_alpha
from mmopt.privacy import Privacy

__all__ = ["GivenVariances", "grouping_plan", "hierarchy_union", "is_grouping_release"]

#: dense level-matrix entries up to which a HierarchyWorkload is listed through its union of Kronecker products
#: (160 MB, as :data:`mmopt.family.hierarchy.LEVEL_ENTRIES`)
LEVEL_ENTRIES = 20_000_000


def is_grouping_release(output) -> bool:
    """Whether ``output`` is a grouping-set release: per-set answers and variances, no estimate x̂."""
    return (not hasattr(output, "estimate") and isinstance(getattr(output, "answers", None), list)
            and isinstance(getattr(output, "variances", None), list) and hasattr(output, "verified_loss"))


def hierarchy_union(workload, attributes, terms, caller: str):
    """(union, attributes, terms): a :class:`~mmopt.hierarchy.workload.HierarchyWorkload` (``grouping_sets``) as the
    union of Kronecker products of its level matrices, rows in the same order as its release's groups, with its
    hierarchies' names for the attributes and its sets' levels for the terms ("state×sex", "total") unless given;
    any other workload as it is."""
    if not (callable(getattr(workload, "to_implicit", None)) and hasattr(workload, "sets")
            and callable(getattr(workload, "level_entries", None))):
        return workload, attributes, terms
    if workload.level_entries() > LEVEL_ENTRIES:
        raise ValueError(f"{caller}: grouping sets '{workload.name}' have {workload.level_entries():,} level-matrix "
                         f"entries, more than the {LEVEL_ENTRIES:,} their table is listed from. Release records with "
                         "mmopt.groupby (or mmopt.hierarchy.records), whose tables are labelled by the groups.")
    names = tuple(h.name for h in workload.attributes) if attributes is None else attributes
    if terms is None:
        terms = tuple("×".join(h.level_names[a] for h, a in zip(workload.attributes, s, strict=True) if a) or "total"
                      for s in workload.sets)
    return workload.to_implicit(), names, terms


class GivenVariances:
    """The variance model of a release that lists its own variances: ``unit(c)`` the rows' variances at the noise
    drawn (so ``sd_factor`` is 1), in the workload's row order."""

    method = "given"

    def __init__(self, layout, variances: np.ndarray):
        self.layout, self.variances = layout, variances

    def unit(self, c) -> np.ndarray:
        return self.variances[c.start:c.stop]

    def sd_factor(self, sd) -> float:
        return 1.0


def _check_probe(output, layout, caller: str) -> None:
    """The release's queries are the workload's, rows in the same order: their answers on the probe histogram agree
    (:mod:`mmopt._base.probe`). Sizes alone let reordered groups, or another tree of the same sizes, label the
    answers."""
    probe = getattr(output, "probe", None)
    if probe is None:
        return
    weights = [t.weight for t in layout.terms]
    theirs = np.concatenate([w * np.ravel(p) for w, p in zip(weights, probe, strict=True)])
    x = probe_histogram(math.prod(layout.shape))
    mine = np.concatenate([values for _, values in iter_values(layout, x, layout.chunks(4096))])
    if not matches(mine, theirs):
        raise ValueError(f"The 'output' parameter of {caller} was released for other queries than workload "
                         f"'{layout.name}' asks (the same numbers of groups, but other groups or in another "
                         "order). Pass the workload the output was released for.")


def grouping_plan(output, spec, strategy, privacy, caller: str, alpha, plan_type):
    """The :class:`~mmopt.answers.table.TablePlan` of a grouping-set release (module docstring) on the layout of
    ``spec`` (:func:`~mmopt.answers.table.prepare_table` of the workload without the strategy), refused when the
    release's sets do not match the workload's terms, or ``strategy`` or ``privacy`` are not the release's."""
    layout = spec.layout
    sizes = [math.prod(t.grid) for t in layout.terms]
    got = [int(np.size(a)) for a in output.answers]
    if got != sizes:
        raise ValueError(f"The 'output' parameter of {caller} holds grouping sets of {got} groups; workload "
                         f"'{layout.name}' has terms of {sizes} queries. Pass the workload the output was released "
                         "for.")
    _check_probe(output, layout, caller)
    if strategy is not None:  # its Δ only: the release's own variances give the standard errors, not the strategy
        check_released_delta(output, strategy, caller)
    if privacy is not None:
        if not isinstance(privacy, Privacy):
            raise TypeError(f"The 'privacy' parameter of {caller} must be a Privacy or None. Got "
                            f"{type(privacy).__name__}.")
        loss = np.atleast_1d(np.asarray(output.verified_loss, dtype=float))
        if privacy.noise != "gaussian" or not np.allclose(loss[:2], (privacy.epsilon, privacy.delta), rtol=1e-9,
                                                          atol=0.0):
            raise ValueError(f"The 'privacy' parameter of {caller} ({privacy!r}) is not the release's (verified "
                             f"{tuple(loss.tolist())}, Gaussian noise). Pass the release's privacy (or None).")
    weights = np.array([t.weight for t in layout.terms], dtype=float)
    answers = np.concatenate([w * np.ravel(a) for w, a in zip(weights, output.answers, strict=True)])
    variances = np.concatenate([w * w * np.ravel(s) for w, s in zip(weights, output.variances, strict=True)])
    model = None if strategy is None else GivenVariances(layout, variances)
    scale = float(output.noise_scale)
    meta = {"workload": layout.name, "strategy": spec.strategy if strategy is None else
            getattr(strategy, "name", "strategy"), "n_queries": layout.n_queries, "reconstruction": "least_squares",
            "noise": "gaussian", "noise_scale": scale, "path": f"hierarchy ({getattr(output, 'family', '')})",
            "standard_error": None if model is None else
            "least squares (unbiased), the release's own variances; see mmopt.answers.grouping"}
    bands = None
    if alpha is not None:
        alpha = check_alpha(alpha, model, "gaussian", "least_squares", layout.name, caller, strategy)
        # the heuristic of roundoff_allowance, 16·u·max|q|·‖x̂‖₁, with ‖x̂‖₁ read from each set's groups
        extra = allowance(max(abs(w) * float(np.abs(a).sum()) for w, a in zip(weights, output.answers, strict=True)))
        meta["roundoff_allowance"] = extra
        warn_roundoff(extra, scale, caller)
        bands = Widths(alpha, "gaussian", scale, allowance=extra)
        meta["interval"] = (f"exact {1 - bands.alpha:.6g} interval of the least-squares answer at the noise drawn "
                            "(gaussian); see mmopt.answers.widths")
    return plan_type(layout, None, answers, model, scale, meta, bands)
