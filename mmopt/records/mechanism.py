"""The records mechanism in three steps, shared by :func:`~mmopt.records.release_marginals` and the OpenDP
measurement (:mod:`mmopt.opendp`): a data-independent plan, the strategy answers A x, the release from y.

Notation: see README and :mod:`mmopt.records.release`. The steps are

1. :func:`prepare` (no data): the marginal workload W, the strategy A measurable from records
   (:mod:`mmopt.records.plans`), its exact sensitivity Δ rounded upwards and the per-cell variances per unit
   noise variance;
2. :func:`strategy_answers` (reads the records): the exact answers A x, from marginal counts only;
3. :func:`assemble` (post-processing of y = A x + noise): the least-squares marginals and their exact variance.

Splitting them lets the OpenDP measurement chain step 2 (a stable transformation: k added or removed records
move A x by at most k·Δ, the triangle inequality over their unit columns, equality when they share a cell)
into OpenDP's own noise and step 3, and still compute bit for bit what ``release_marginals`` computes.
"""

from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass

import numpy as np

from mmopt._base import opendp as _opendp
from mmopt._base import validation as v
from mmopt.privacy import Privacy
from mmopt.records import counts as rc
from mmopt.records import exact_answers as ea
from mmopt.records import plans as rp
from mmopt.records import read as rd
from mmopt.records.domain import Domain, check_domain
from mmopt.records.result import RecordsRelease
from mmopt.structured import _checks as ck
from mmopt.structured.release import upper_sensitivity
from mmopt.structured.residual import closure as cl
from mmopt.structured.residual import marginals as wm
from mmopt.structured.residual import strategy as rs
from mmopt.structured.residual.reconstruct import Measurements, reconstruct_all
from mmopt.structured.residual.workload import MarginalWorkload, marginal_workload

__all__ = ["Prepared", "assemble", "prepare", "strategy_answers"]


@dataclass(frozen=True, eq=False)
class Prepared:
    """Everything a records release fixes before it reads a record (all of it public).

    Attributes
    ----------
    domain : Domain
    workload : MarginalWorkload
    chosen : RecordsPlan
        The strategy and the message saying which it is and how far from the SVD bound.
    sets : tuple of tuple
        The distinct released marginals, in the workload's order.
    sensitivity : float
        Δ (L1 for Laplace, L2 for Gaussian noise) of A under add/remove-one-record neighbours, exact and rounded
        upwards (:func:`mmopt.structured.release.upper_sensitivity`).
    unit : dict
        {A: per-cell variance of the least-squares marginal per unit variance of each measured entry}.
    n_answers : int
        p, the number of measured entries (the length of A x).
    """

    domain: Domain
    workload: MarginalWorkload
    chosen: rp.RecordsPlan
    sets: tuple
    sensitivity: float
    unit: dict
    n_answers: int

    @property
    def strategy(self):
        return self.chosen.strategy

    @property
    def residual(self) -> bool:
        return isinstance(self.chosen.strategy, rs.ResidualStrategy)


def up_to(text: str, d: int, what: str) -> int:
    """K of "k<=K" (every marginal on 1 to K of the d attributes), or a ValueError starting with ``what``.

    Examples
    --------
    >>> up_to("k<=2", 5, "workload")
    2
    """
    body = text.replace(" ", "")
    k = int(body[3:]) if body.startswith("k<=") and body[3:].isdigit() else None
    if k is None or not 1 <= k <= d:
        raise ValueError(f"{what} must be 'k<=K' with an integer K in [1, {d}] (every marginal on 1 to K of the "
                         f"domain's {d} attributes), an integer k (all k-way marginals) or a list of attribute sets. "
                         f"Got {text!r} instead.")
    return k


def marginal_sets(workload, domain: Domain, caller: str) -> MarginalWorkload:
    """The marginal workload named by ``workload`` (see :func:`~mmopt.records.release_marginals`); ``()`` in a
    list of sets is the grand total."""
    d = len(domain.shape)
    if isinstance(workload, MarginalWorkload):
        if workload.shape != domain.shape:
            raise ValueError(f"The 'workload' parameter of {caller} is over shape {workload.shape}, but the domain "
                             f"has shape {domain.shape}. Build it over the domain's attribute sizes.")
        return workload
    if isinstance(workload, int | np.integer) and not isinstance(workload, bool):
        k = v.check_int(workload, name="workload", caller=caller, low=1, high=d)
        sets = list(itertools.combinations(range(d), k))
        return marginal_workload(domain.shape, sets, name=f"all {k}-way marginals")
    if isinstance(workload, str):  # "k<=K": every marginal on 1 to K attributes (the 1- and 2-way ones: "k<=2")
        k = up_to(workload, d, f"The 'workload' parameter of {caller}")
        sets = [S for j in range(1, k + 1) for S in itertools.combinations(range(d), j)]
        return marginal_workload(domain.shape, sets, name=f"all 1- to {k}-way marginals")
    weights = None
    if isinstance(workload, dict):  # {("sex", "age"): 2.0}: iterating it gave its keys, its weights dropped unseen
        # each weight checked in this function's name (marginal_workload's message named a function not called)
        weights = [v.check_real(w, name=f"workload[{S!r}]", caller=caller, low=1e-150, high=1e150)
                   for S, w in workload.items()]
        workload = list(workload)
    # (0, 1) and (1, 0) named one marginal twice: optimised at double weight, released once
    sets = rc.check_sets(workload, domain, caller=caller, name="workload", distinct=True)  # at least one
    return marginal_workload(domain.shape, sets, weights=weights)


def prepare(domain: Domain, workload, privacy: Privacy, strategy, caller: str) -> Prepared:
    """Step 1: validate and plan, from public inputs only (ValueError/TypeError on bad input)."""
    if not isinstance(privacy, Privacy):
        raise TypeError(f"The 'privacy' parameter of {caller} must be a Privacy, e.g. Privacy(epsilon=1.0). "
                        f"Got {type(privacy).__name__} instead.")
    check_domain(domain, caller=caller)
    W = marginal_sets(workload, domain, caller)
    chosen = rp.check_strategy(strategy, W, privacy, caller)
    A = chosen.strategy
    residual = isinstance(A, rs.ResidualStrategy)
    sets = tuple(dict.fromkeys(W.sets))
    n_y = sum(math.prod(A.rows(i) if residual else W.shape[i] for i in S) for S in A.subsets)
    ck.check_allocation(n_y, what="the measurements", caller=caller, limit=ck.MAX_VECTOR_ENTRIES)
    v.check_allocation(sum(cl.cells(W.shape, S) for S in sets), what="the released marginals", caller=caller)
    if residual:  # from the strategy alone: shapes and weights whose answers can be computed exactly
        ea.check_residual_strategy(A, caller)
    # d_in bounds the change of the *computed* answers (their float rounding charged: mmopt.records.exact_answers)
    d_in = ea.charged_records_sensitivity(upper_sensitivity(rp.sensitivity(A, privacy.sensitivity_norm),
                                                            caller=caller), privacy.sensitivity_norm, int(n_y),
                                          kappa_rounded=residual)
    return Prepared(domain, W, chosen, sets, d_in, rp.unit_variances(A, W), int(n_y))


def strategy_answers(prep: Prepared, records, *, batch_size: int = rd.BATCH_ROWS, caller: str,
                     name: str = "records") -> tuple[dict, np.ndarray]:
    """Step 2: ({S: exact measurement of subset S}, A x as one float64 vector in ``A.subsets`` order).

    Reads the records (schema checks first, so a bad source fails before any noise): only the attributes of the
    marginals the strategy measures or the workload names, so a record is set aside for a missing or out-of-domain
    value in one of those alone (:func:`read_counts`)."""
    A = prep.strategy
    counts = read_counts(records, prep.domain, rc.maximal(A.subsets), batch_size=batch_size, caller=caller,
                         name=name, also=prep.sets)
    # every answer correctly rounded, the records within the guarantee's domain (mmopt.records.exact_answers)
    exact = (ea.residual_answers(A, counts, caller=caller) if prep.residual
             else ea.weighted_answers(A, counts, caller=caller))
    Ax = _opendp.finite(np.concatenate([exact[S].ravel() for S in A.subsets]), "the strategy answers", caller)
    return exact, Ax


def read_counts(records, domain: Domain, sets, *, batch_size: int, caller: str, name: str, also=()) -> dict:
    """:func:`mmopt.records.marginal_counts` of ``sets`` on the domain's attributes that they or the sets ``also``
    (the workload's) hold (all of them when they hold none: the total alone, which then counts the records with a
    value in the domain in every column, not SQL's every row — counting rows without a column is not built; a
    helper's audit). The workload's attributes are read
    even where no measured set holds them: a residual strategy never measures an attribute of one category (its
    residual is empty), and records outside it or missing it were counted as its category (a review).

    The out-of-domain rule then sets a record aside for a value of an attribute read, as SQL's
    ``GROUP BY state`` counts a record whose ``sex`` is NULL: over the whole domain, a gap in a column the release
    never measured dropped the record from every count (a newcomer's ``domain.json`` of the agency's 40 columns and
    a query on two of them undercounted by 30 %; a helper's audit). The rule still depends on the strategy and workload
    alone, fixed before the data are read, and every measured marginal counts the same records, so Δ is unchanged.
    """
    read = sorted({i for S in (*sets, *also) for i in S})
    if not read or len(read) == len(domain.attributes):
        return rc.marginal_counts(records, domain, sets, batch_size=batch_size, caller=caller, name=name)
    at = {i: j for j, i in enumerate(read)}
    sub = Domain(tuple(domain.attributes[i] for i in read))
    counts = rc.marginal_counts(records, sub, [tuple(at[i] for i in S) for S in sets], batch_size=batch_size,
                                caller=caller, name=name)
    return {S: counts[tuple(at[i] for i in S)] for S in sets}


def assemble(prep: Prepared, y: np.ndarray, *, noise: str, scale: float, epsilon: float, delta: float,
             rho: float | None, sampler: str, caller: str) -> RecordsRelease:
    """Step 3: the release from the noisy measurements y (post-processing: never raises, warns instead)."""
    A, W = prep.strategy, prep.workload
    values, at = {}, 0
    for S in A.subsets:
        size = math.prod(A.rows(i) if prep.residual else W.shape[i] for i in S)
        shape = tuple(A.rows(i) if prep.residual else W.shape[i] for i in S)
        values[S] = np.asarray(y[at:at + size], dtype=np.float64).reshape(shape)
        at += size
    meas = Measurements(A, values, noise, float(scale))
    s2 = scale * scale * (2.0 if noise == "laplace" else 1.0)
    marginals = after_draw(caller, lambda: (reconstruct_all(meas, prep.sets) if prep.residual
                                            else wm.reconstruct_all(A, values, prep.sets)),
                           "the least-squares marginals")
    return RecordsRelease(prep.domain, W, A, meas, marginals or {}, {S: s2 * prep.unit[S] for S in prep.sets},
                          epsilon, delta, rho, noise, float(scale), prep.sensitivity, sampler, prep.chosen.message)


def after_draw(caller: str, step, what: str):
    """``step()``, or None with a warning if it fails: after the draw the budget is spent, so never raise
    (the pattern of :func:`mmopt._base.opendp.post_process`; the measurements are returned either way)."""
    try:
        return step()
    except (ValueError, ArithmeticError, MemoryError, RuntimeError, np.linalg.LinAlgError) as exc:
        warnings.warn(f"{caller}: the noise was drawn (the budget is spent), but {what} failed: {exc} The release "
                      "keeps the noisy measurements.", RuntimeWarning, stacklevel=3)
        return None
