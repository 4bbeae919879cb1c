"""Answers to a person's own queries from a released estimate x̂, with their standard errors.

Notation: see README. A query is a row q (q x̂ is its answer). It is given either

* as a **range spec** on a product domain of d attributes: a tuple with one item per attribute — an int c
  (the cell c), a pair (a, b) (cells a … b, inclusive), None or "*" (every cell), a ``slice``, or a
  vector of length nᵢ (a weighted predicate on that attribute) — so q = ⊗ᵢ rᵢ; on one attribute the item
  alone will do (``(3, 9)`` is cells 3 … 9). The domain's attributes are the strategy's (implicit or orbit),
  the output's, a shaped x̂'s or ``shape=``'s; a flat x̂ with none of these is one attribute of N cells (specs
  parsed in :mod:`mmopt.answers._specs`); or
* as **rows of a matrix**: a numpy array (k×N) or a scipy.sparse matrix, one query per row, cells in C order
  (a list is always read as range specs).

With a strategy, each answer gets √(s²·q (AᵀA)⁺ qᵀ), the exact standard deviation of the least-squares
answer at noise of standard deviation s (the caveats of :mod:`mmopt.answers.table` apply to nnls and
projection). s is read from a mechanism output; from a bare x̂ it is the noise of ``privacy`` as ``calibration``
says: by default what :func:`mmopt.release` draws (OpenDP's b = Δ/ε, or its zCDP-calibrated σ, 4–9 % above the
analytic one at usual budgets, 28 % at ε = 0.01, δ = 10⁻³), never below the σ of ``privacy``'s own calibration;
``calibration="analytic"`` for an x̂ simulated at that σ (:func:`mmopt.matrix_mechanism`).
Range specs under a product or marginals strategy use the per-factor terms (:mod:`mmopt.structured.per_query`),
rows of a matrix under a product strategy use ‖θ⁻¹(⊗ᵢAᵢ⁺ᵀ) q‖²; any pair on at most 4,096 cells is dense.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from mmopt._base import validation as v
from mmopt.answers import _stream_errors as stream
from mmopt.answers._query_errors import standard_errors as _standard_errors
from mmopt.answers._specs import contract, flat_remedy, range_rows
from mmopt.answers.grouping import is_grouping_release
from mmopt.answers.variance import (
    as_checked_strategy,
    check_output_privacy,
    check_released_with,
    noise_sd,
    release_noise_sd,
)
from mmopt.dense._strategy_core import Strategy
from mmopt.dispatch.routing import as_implicit
from mmopt.privacy import Privacy
from mmopt.structured.orbit_strategy import OrbitStrategy
from mmopt.structured.strategies import ImplicitStrategy


@dataclass(frozen=True, eq=False)
class QueryAnswers:
    """``answers`` (k,), ``standard_error`` (k,) or None, and per query one description per attribute;
    ``reconstruction``: the output's (its standard errors are least squares' whatever it is)."""

    answers: np.ndarray
    standard_error: np.ndarray | None
    labels: tuple[tuple[str, ...], ...]
    attributes: tuple[str, ...]
    reconstruction: str = "least_squares"

    def to_frame(self):
        """A pandas DataFrame: one column per attribute, then answer and standard_error (named
        least_squares_standard_error beside nnls or projection answers: :func:`mmopt.answers.table.se_column`)."""
        from mmopt.answers.table import require, se_column

        pd = require("pandas", "QueryAnswers.to_frame")
        cols = {a: [lab[i] for lab in self.labels] for i, a in enumerate(self.attributes)}
        cols["answer"] = self.answers
        if self.standard_error is not None:
            cols[se_column(self.reconstruction)] = self.standard_error
        return pd.DataFrame(cols)


def answer(queries, estimate, strategy=None, privacy: Privacy | None = None, *, shape=None, attributes=None,
           calibration: str = "release") -> QueryAnswers:
    """Answer your own queries from x̂ (module docstring), with standard errors when ``strategy`` is given.

    Parameters
    ----------
    queries : list of range specs, ndarray (k, N) or scipy.sparse matrix
    estimate : MechanismOutput, StructuredOutput or array_like
        An output of :func:`mmopt.release` / :func:`mmopt.matrix_mechanism` (its x̂ and its noise), or x̂ itself
        (flat, or shaped like the domain for range specs on several attributes). A flat x̂ with a dense Strategy
        (or none) is read as one attribute of N cells unless ``shape`` is given, so ``(2, 5)`` is the range of
        cells 2 … 5, not the cell (2, 5): pass ``shape``, or the output itself (it knows its domain).
    strategy : Strategy, ImplicitStrategy or None
        The strategy measured; None gives answers only, unchecked: a query off a rank-deficient A's row space (a
        cell it never measures) is then answered from x̂ = A⁺y, x projected on that row space, which is biased
        (0 for an unmeasured cell). Pass it to have every query checked and its standard error computed.
    privacy : Privacy or None
        Needed with a bare x̂ and a strategy: the noise is then the one ``calibration`` names.
    shape : sequence of int or None
        The domain's attribute sizes (n₁, …, n_d), product N, for a flat x̂ whose shape nothing else gives (a dense
        Strategy, or a bare x̂): x̂ is read in C order and each range spec has one item per attribute. Refused if
        it contradicts the shape of the strategy (implicit or orbit), of the output, or of a shaped x̂.
    attributes : sequence of str or None
        Names of the attributes, for :meth:`QueryAnswers.to_frame` (default "a0", "a1", …).
    calibration : {"release", "analytic"}, default "release"
        With a bare x̂: the noise it was released with. "release": what :func:`mmopt.release` (and ``mmopt release
        --estimate``) draws at ``privacy`` — OpenDP's scale, under Gaussian noise 4–9 % above the analytic σ at
        usual budgets, here at most 3.2·10⁻⁶ above the release's own (Gaussian: needs OpenDP) — or, if larger, the
        σ of ``privacy``'s own calibration (``Privacy(..., calibration="theorem_5_22")``: 16 % larger at
        (1, 10⁻⁶)), so never below either; "analytic": ``privacy``'s own b = Δ/ε or σ (the analytic Gaussian one
        unless it says otherwise), as :func:`mmopt.matrix_mechanism` simulates. Ignored for a mechanism output,
        whose own noise is used.

    Examples
    --------
    >>> import mmopt
    >>> W, H = mmopt.workload.prefix(8), mmopt.strategy.hierarchical(8)
    >>> out = mmopt.matrix_mechanism(W, H, [3, 0, 2, 5, 1, 1, 0, 4], mmopt.Privacy(1.0), rng=0)
    >>> res = answer([(2, 5), 7, None], out, H)
    >>> res.labels, [round(float(s), 4) for s in res.standard_error]    # b = 4, s² = 32
    ((('[2, 5]',), ('7',), ('*',)), [5.0596, 4.4164, 4.1312])

    A flat x̂ of a 4 × 8 table under a dense strategy: ``shape`` makes ``(2, 5)`` the cell in row 2, column 5
    (flat cell 21), not the cells 2 … 5.

    >>> A = mmopt.strategy.hierarchical(32)
    >>> xhat = mmopt.matrix_mechanism(mmopt.workload.prefix(32), A, range(32), mmopt.Privacy(1.0), rng=0).estimate
    >>> cell = answer([(2, 5), (1, None)], xhat, A, mmopt.Privacy(1.0), shape=(4, 8), calibration="analytic")
    >>> cell.labels, bool(cell.answers[0] == xhat[21]), bool(cell.answers[1] == xhat[8:16].sum())
    ((('2', '5'), ('1', '*')), True, True)
    >>> answer([(2, 5)], xhat).labels          # no shape: one attribute, the range of cells 2 … 5
    (('[2, 5]',),)
    """
    caller = "answer"
    calibration = v.check_choice(calibration, name="calibration", caller=caller, choices=("release", "analytic"))
    if isinstance(shape, str | bytes):  # check_shape read "48" as the sizes '4' and '8'
        raise TypeError(f"The 'shape' parameter of {caller} must be a sequence of ints (the attribute sizes, e.g. "
                        f"(4, 8)). Got {shape!r:.40}.")
    given = None if shape is None else v.check_shape(shape, caller=caller)
    # a residual-layer strategy (optimize's max-variance marginals, a records release's WeightedMarginals) as the
    # implicit strategy it stands for, as answers_table takes it (float() of it raised a bare TypeError here)
    strategy = as_checked_strategy(as_implicit(strategy))
    noise, domain, method = None, None, "least_squares"
    if is_grouping_release(estimate):  # float() of it raised a bare TypeError
        raise TypeError(f"The 'estimate' parameter of {caller} is a grouping-set release (mmopt.release's hierarchy "
                        "route), which holds the counts of its grouping sets, not x̂ over the cells. List them with "
                        "mmopt.answers_table(out, W, strategy); to answer other groups, put their grouping sets in W.")
    released = hasattr(estimate, "estimate") and hasattr(estimate, "noise_scale")
    stream.refuse_laplace(strategy, estimate.noise if released else getattr(privacy, "noise", None), caller)
    if released:
        if privacy is not None and (not isinstance(privacy, Privacy) or privacy.noise != estimate.noise):
            # ignored without a word: the output's noise gives the errors (answers_table refused it; a probe)
            raise ValueError(f"The 'privacy' parameter of {caller} ({privacy!r:.60}) does not match the output's "
                             f"{estimate.noise} noise. Pass the privacy of the release, or None: the output's noise "
                             "gives the standard errors.")
        check_output_privacy(privacy, estimate, caller)
        if strategy is not None:
            check_released_with(estimate, strategy, caller)
        noise = noise_sd(estimate.noise, float(estimate.noise_scale))
        domain = _one_draw(estimate, caller)
        rec = getattr(estimate, "reconstruction", None)
        method = getattr(rec, "method", None) or "least_squares"
        estimate = estimate.estimate
    if estimate is None:
        raise ValueError(f"The 'estimate' parameter of {caller} holds no x̂ (a failed post-processing).")
    x = np.asarray(estimate, dtype=float)
    if not np.all(np.isfinite(x)):
        bad = int(np.size(x) - np.count_nonzero(np.isfinite(x)))
        raise ValueError(f"The 'estimate' parameter of {caller} must be finite. Got {bad} NaN or infinite "
                         "entries: a failed reconstruction, or an estimate that was never computed.")
    if x.ndim == 2 and x.shape[0] == 1 and isinstance(strategy, Strategy):
        x = x[0]
    known = tuple(strategy.shape) if isinstance(strategy, ImplicitStrategy | OrbitStrategy) else domain
    if given is not None:
        source = "the strategy" if isinstance(strategy, ImplicitStrategy | OrbitStrategy) else "the output"
        _check_shape(given, x, known, source, caller)
    # a flat x̂ with nothing else to say the domain's shape: one attribute of N cells (the range spec (2, 5) is then
    # cells 2 … 5, not the cell (2, 5) of a 4 × 8 table; shape= says otherwise)
    flat = given is None and known is None and x.ndim == 1
    shape = given or known or x.shape
    N = math.prod(shape)
    if x.size != N:
        raise ValueError(f"The 'estimate' parameter of {caller} has {x.size} entries; the strategy's domain has {N}.")
    cells = getattr(strategy, "domain_size", None)
    if isinstance(cells, int | np.integer) and cells != N:  # a dense strategy on other cells: refused by evaluate,
        # naming evaluate, after the answers were computed (answers alone were never checked)
        raise ValueError(f"The 'strategy' parameter of {caller} acts on {int(cells):,} cells; the estimate has {N:,}. "
                         "Pass the strategy x̂ was released with.")
    if x.ndim > 1 and x.shape != shape:  # reshaped, another layout's cells would answer (a helper's probe: (0, *)
        # read 3 where the user's (2, 3) array holds 11), as x and zeros are refused elsewhere
        raise ValueError(f"The 'estimate' parameter of {caller} has shape {x.shape}; the strategy's domain is {shape}. "
                         "Pass x̂ flat or shaped like the domain (transposed?).")
    x = x.reshape(shape)
    matrix = isinstance(queries, np.ndarray) or sp.issparse(queries)
    if matrix:
        # one row given flat; any other shape is the user's, as given (a 3-D array was named with an axis added)
        Q = v.check_matrix(queries[None] if isinstance(queries, np.ndarray) and queries.ndim == 1 else queries,
                           name="queries", caller=caller)
        if Q.shape[1] != N:
            raise ValueError(f"The 'queries' parameter of {caller} must have {N} columns (one per cell). "
                             f"Got {Q.shape[1]}.")
        values, rows, labels = Q @ x.ravel(), None, tuple((f"row {i}",) for i in range(Q.shape[0]))
    else:
        rows, labels = range_rows(queries, shape, caller, flat=flat)
        values = np.array([contract(x, r) for r in rows])
    names = _attribute_names(attributes, 1 if matrix else len(shape), matrix, caller, N if flat else None)
    se = None
    if strategy is not None:
        sd = noise if noise is not None else _calibrated(strategy, privacy, calibration, caller)
        se = _standard_errors(strategy, shape, Q if matrix else None, rows, sd, caller)
    return QueryAnswers(np.asarray(values, dtype=float), se, labels, names, method)


def _one_draw(output, caller: str) -> tuple | None:
    """The domain shape of a mechanism output's x̂ (None: read it from x̂), refusing several draws (``size``): their
    stacked x̂ (size, n) would otherwise read as a domain of two attributes, and a range spec as one draw's cell."""
    est = output.estimate
    report = getattr(output, "report", None)
    if est is not None and report is not None and hasattr(report, "shape"):  # structured: x̂ shaped (…, n₁, …, n_d)
        draws = np.ndim(est) > len(report.shape)
        domain = tuple(report.shape)
    else:  # dense: x̂ (n,) and y (p,), or (size, n) and (size, p); a dense product workload's domain shape: the
        # range spec (2, 3) read as cells 2 … 3 of the flat x̂ at 16 cells, and as the cell (2, 3) from 4,097
        draws, domain = np.ndim(getattr(output, "measurements", None)) == 2, getattr(output, "shape", None)
    if draws:
        raise ValueError(f"The 'estimate' parameter of {caller} holds {np.shape(est)[0]} draws (a mechanism run with "
                         "size=...); answers are for one. Pass one draw's x̂, output.estimate[i], with the 'privacy' "
                         "it was released at.")
    return domain


def _check_shape(given: tuple[int, ...], x: np.ndarray, known: tuple | None, source: str, caller: str) -> None:
    """``shape=`` holds x̂'s cells and agrees with the domain the strategy or output gives and with a shaped x̂."""
    if math.prod(given) != x.size:
        raise ValueError(f"The 'shape' parameter of {caller} must hold as many cells as the estimate ({x.size:,}). "
                         f"Got {given} ({math.prod(given):,} cells).")
    if known is not None and tuple(known) != given:
        raise ValueError(f"The 'shape' parameter of {caller} is {given}, but {source} gives the domain "
                         f"{tuple(known)}. Leave shape=None: the domain is known.")
    if x.ndim > 1 and x.shape != given:  # reshaped, another layout's cells would answer
        raise ValueError(f"The 'shape' parameter of {caller} is {given}, but the estimate is shaped {x.shape}. Pass "
                         "x̂ flat with shape=, or shaped like the domain without it.")


def _attribute_names(attributes, d: int, matrix: bool, caller: str, flat_n: int | None = None) -> tuple[str, ...]:
    """One distinct name per attribute (a single "query" column for rows of a matrix), none of the frame's own;
    ``flat_n``: the domain was read from a flat x̂ of that many cells (several names then point to ``shape=``)."""
    if attributes is None:
        return ("query",) if matrix else tuple(f"a{i}" for i in range(d))
    if isinstance(attributes, str) or not isinstance(attributes, tuple | list) or not all(
            isinstance(a, str) for a in attributes):
        raise TypeError(f"The 'attributes' parameter of {caller} must be a tuple of str. Got {attributes!r:.80}.")
    names = tuple(attributes)
    if len(names) != d or len(set(names)) != d or {"answer", "standard_error"} & set(names):
        what = "label column" if matrix else "attribute" if d == 1 else "attributes"
        hint = flat_remedy(flat_n, caller) if flat_n is not None and len(names) > 1 else ""
        raise ValueError(f"The 'attributes' parameter of {caller} must name the {d} {what} once each, other than "
                         f"'answer' and 'standard_error'. Got {names!r:.80}.{hint}")
    return names


# -- standard errors ----------------------------------------------------------------------------------------
def _calibrated(strategy, privacy, calibration: str, caller: str) -> float:
    if not isinstance(privacy, Privacy):
        raise TypeError(f"The 'privacy' parameter of {caller} must be a Privacy when 'estimate' is a bare x̂ and a "
                        "strategy is given (the noise is then the calibrated one). Pass the mechanism's output "
                        "instead for the noise actually drawn.")
    delta = strategy.sensitivity(privacy.sensitivity_norm)
    own = noise_sd(privacy.noise, privacy.noise_scale(delta))  # privacy's own calibration: matrix_mechanism's
    if calibration == "analytic":
        return own
    # never below privacy's own σ: the release's under the analytic calibration (OpenDP's σ is larger), but a
    # simulation at Privacy(calibration="theorem_5_22") drew 16 % more than a release at (1, 10⁻⁶) (a review)
    return max(release_noise_sd(privacy, delta, caller), own)
