"""Answers to a person's own queries from a released estimate x̂, with their standard errors.

Notation: see README. A query is a row q (q x̂ is its answer). It is given either

* as a **range spec** on a product domain of d attributes: a tuple with one item per attribute — an int c
  (the cell c), a pair (a, b) (cells a … b, inclusive), None or "*" (every cell), a ``slice``, or a
  vector of length nᵢ (a weighted predicate on that attribute) — so q = ⊗ᵢ rᵢ; on one attribute the item
  alone will do (``(3, 9)`` is cells 3 … 9); or
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
from mmopt.answers.grouping import is_grouping_release
from mmopt.answers.labels import _row, _set
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


def answer(queries, estimate, strategy=None, privacy: Privacy | None = None, *, attributes=None,
           calibration: str = "release") -> QueryAnswers:
    """Answer your own queries from x̂ (module docstring), with standard errors when ``strategy`` is given.

    Parameters
    ----------
    queries : list of range specs, ndarray (k, N) or scipy.sparse matrix
    estimate : MechanismOutput, StructuredOutput or array_like
        An output of :func:`mmopt.release` / :func:`mmopt.matrix_mechanism` (its x̂ and its noise), or x̂ itself
        (flat, or shaped like the domain for range specs on several attributes). A flat x̂ with a dense Strategy
        is read as one attribute of N cells, so ``(2, 5)`` is the range of cells 2 … 5, not the cell (2, 5): from
        an output whose ``estimate`` is flat, pass the output itself or ``out.estimate.reshape(out.shape)``.
    strategy : Strategy, ImplicitStrategy or None
        The strategy measured; None gives answers only, unchecked: a query off a rank-deficient A's row space (a
        cell it never measures) is then answered from x̂ = A⁺y, x projected on that row space, which is biased
        (0 for an unmeasured cell). Pass it to have every query checked and its standard error computed.
    privacy : Privacy or None
        Needed with a bare x̂ and a strategy: the noise is then the one ``calibration`` names.
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
    """
    caller = "answer"
    calibration = v.check_choice(calibration, name="calibration", caller=caller, choices=("release", "analytic"))
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
    shape = tuple(strategy.shape) if isinstance(strategy, ImplicitStrategy | OrbitStrategy) else domain or x.shape
    N = math.prod(shape)
    if x.size != N:
        raise ValueError(f"The 'estimate' parameter of {caller} has {x.size} entries; the strategy's domain has {N}.")
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
        _refuse_bare_range(queries, len(shape), caller)
        specs = [_items(s, len(shape), caller) for s in _spec_list(queries, caller)]
        rows = [tuple(_item_row(item, n, caller) for item, n in zip(spec, shape, strict=True)) for spec in specs]
        values = np.array([_contract(x, r) for r in rows])
        labels = tuple(tuple(_describe(item, r, i) for item, r in zip(spec, rs, strict=True))
                       for i, (spec, rs) in enumerate(zip(specs, rows, strict=True)))
    names = _attribute_names(attributes, 1 if matrix else len(shape), matrix, caller)
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


def _attribute_names(attributes, d: int, matrix: bool, caller: str) -> tuple[str, ...]:
    """One distinct name per attribute (a single "query" column for rows of a matrix), none of the frame's own."""
    if attributes is None:
        return ("query",) if matrix else tuple(f"a{i}" for i in range(d))
    if isinstance(attributes, str) or not isinstance(attributes, tuple | list) or not all(
            isinstance(a, str) for a in attributes):
        raise TypeError(f"The 'attributes' parameter of {caller} must be a tuple of str. Got {attributes!r:.80}.")
    names = tuple(attributes)
    if len(names) != d or len(set(names)) != d or {"answer", "standard_error"} & set(names):
        raise ValueError(f"The 'attributes' parameter of {caller} must name the {d} "
                         f"{'label column' if matrix else 'attributes'} once each, other than 'answer' and "
                         f"'standard_error'. Got {names!r:.80}.")
    return names


# -- specs --------------------------------------------------------------------------------------------------
def _spec_list(queries, caller: str) -> list:
    if not isinstance(queries, list | tuple) or not len(queries):
        raise TypeError(f"The 'queries' parameter of {caller} must be a non-empty list of range specs, a numpy array "
                        f"(k, N) or a scipy.sparse matrix. Got {type(queries).__name__}.")
    return list(queries)


def _refuse_bare_range(queries, d: int, caller: str) -> None:
    """A bare pair of ints on one attribute: answer((0, 7), out) answered the cells 0 and 7 (two queries: the tuple
    is the list of specs), where the range 0 … 7 was meant as often; which one is not ours to guess."""
    if d == 1 and isinstance(queries, tuple) and len(queries) == 2 and \
            all(isinstance(e, int | np.integer) and not isinstance(e, bool) for e in queries):
        a, b = (int(e) for e in queries)
        raise ValueError(f"The 'queries' parameter of {caller} is a list of queries; {queries!r} reads as two (the "
                         f"cells {a} and {b}) and is refused as ambiguous. Pass [({a}, {b})] for the one range "
                         f"{a} … {b}, or [{a}, {b}] for the two cells.")


def _items(spec, d: int, caller: str) -> tuple:
    if d == 1 and not (isinstance(spec, tuple | list) and len(spec) == 1):
        return (spec,)
    if not isinstance(spec, tuple | list) or len(spec) != d:
        raise ValueError(f"The 'queries' parameter of {caller} must give one item per attribute ({d}) in every range "
                         f"spec. Got {spec!r:.80}.")
    return tuple(spec)


def _item_row(item, n: int, caller: str) -> np.ndarray:
    r = np.zeros(n)
    bad = ValueError(f"The 'queries' parameter of {caller}: {item!r:.60} is not a range item on an attribute of {n} "
                     "cells (an int c, a pair (a, b) with 0 <= a <= b < n, None/'*', a slice or a vector of length n).")
    if item is None or (isinstance(item, str) and item == "*"):
        r[:] = 1.0
    elif isinstance(item, slice):
        r[np.arange(n)[item]] = 1.0
    elif isinstance(item, int | np.integer) and not isinstance(item, bool):
        if not 0 <= item < n:
            raise bad
        r[int(item)] = 1.0
    elif n == 2 and _pair(item) and all(_integral(e) for e in item) and tuple(map(int, item)) in ((0, 1), (1, 1)):
        a, b = int(item[0]), int(item[1])  # also a 0/1 vector of length 2 (float pairs too), answering another query
        raise ValueError(f"The 'queries' parameter of {caller}: {item!r} is ambiguous on an attribute of 2 "
                         f"cells, the range [{a}, {b}] or the 0/1 vector {list(item)}. Give the range as a "
                         f"slice (slice({a}, {b + 1})) or the vector as a numpy array (np.array({list(item)})).")
    elif _range(item):
        a, b = int(item[0]), int(item[1])
        if not 0 <= a <= b < n:
            raise bad
        r[a:b + 1] = 1.0
    else:  # a vector, float pairs (1.0, 3.0) included: a range is a pair of ints
        try:
            r = v.check_vector(item, name="queries", caller=caller, length=n)
        except (TypeError, ValueError):
            if _pair(item) and all(_integral(e) for e in item):  # (2.0, 5.0): bounds read from a float column;
                # the generic message listed "a pair (a, b)", which it looks like (an auditor's probe)
                a, b = (int(e) for e in item)
                raise ValueError(f"The 'queries' parameter of {caller}: {item!r:.60} is not a range item: a range is a "
                                 f"pair of ints, and these are floats. Pass ({a}, {b}) for cells {a} … {b}.") from None
            raise bad from None
    if not np.any(r):
        raise bad
    return r


def _pair(item) -> bool:
    return isinstance(item, tuple | list) and len(item) == 2


def _range(item) -> bool:
    """A range item (a, b): a pair of ints."""
    return _pair(item) and all(isinstance(e, int | np.integer) for e in item)


def _integral(e) -> bool:
    """An int, or a real number with an integral value (a float pair on 2 cells is as ambiguous as an int pair)."""
    if isinstance(e, bool | np.bool_):
        return False
    return isinstance(e, int | np.integer) or (isinstance(e, float | np.floating) and float(e).is_integer())


def _describe(item, r: np.ndarray, index: int) -> str:
    if _range(item):
        return f"[{int(item[0])}, {int(item[1])}]"
    if isinstance(item, slice):
        return _set(np.flatnonzero(r), r.size)
    return _row(r, index) if not isinstance(item, int | np.integer) else str(int(item))


def _contract(x: np.ndarray, rows) -> float:
    y = x
    for r in rows:
        y = np.tensordot(r, y, axes=(0, 0))
    return float(y)


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
