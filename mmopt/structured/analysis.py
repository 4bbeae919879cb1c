"""Exact (or flagged-bounded) expected error of an implicit strategy on an implicit workload.

Notation: see README; c = Privacy.variance_factor, Δ the strategy's sensitivity. Paths, in order:

* ``"product"`` — A = θ⊗ᵢAᵢ on G = Σ_j w_j² ⊗ᵢ Gᵢ⁽ʲ⁾: X⁺ = θ⁻² ⊗ᵢ Xᵢ⁺, so (Li et al., Prop. 4.4)
  total = c·Δ²·θ⁻²·Σ_j w_j² ∏ᵢ tr(Gᵢ⁽ʲ⁾Xᵢ⁺) and, a query's variance being a product of non-negative
  per-factor terms, max variance = c·Δ²·θ⁻²·max_j w_j² ∏ᵢ maxᵢ. Exact.
* ``"algebra"`` — every strategy factor is αI + βJ (marginals, M(θ)): X⁺ = Σ_T Q_T/λ_T
  (:mod:`~mmopt.structured.algebra`), total = c·Δ²·Σ_T tr(G Q_T)/λ_T for any workload. Exact.
* ``"closure"`` — tried first when d > 16 or (terms of W and A)·2^d > 2²²: W a union of marginals, every
  strategy factor αI + βJ with equal column norms (residual strategies, M(θ)): the same spectra over W's
  downward closure only (:mod:`~mmopt.structured.residual`), polynomial in its size. Exact.
* ``"dense"`` — N ≤ ``dense_limit``: :func:`mmopt.error.evaluate` on the densified pair. Exact.
* ``"coupled"`` — past :data:`TWO_TERM_MIN_N` cells or ``dense_limit`` (before the dense path), under L2
  sensitivity, a union whose terms have at most two non-total factors (workload and strategy), one strategy term
  per pair and equal column norms: tr(G X⁺) by a Schur complement on the ∅ and 1-way blocks
  (:mod:`~mmopt.structured.residual.coupled`). Exact.
* ``"eigenbasis"`` — past the dense limit, or past :data:`TWO_TERM_MIN_N` cells where the dense path would not
  list the queries: the strategy's factor Grams commute per attribute (quad-tree, trees, Privelet): tr(G X⁺) in
  their shared eigenbasis (:mod:`~mmopt.structured.eigenbasis`), the largest variance's ends from the bracket
  below. Exact.
* ``"loewner_bound"`` — otherwise a certified two-sided bracket, term by term of W
  (:mod:`~mmopt.structured._bracket`): for X ⪰ Y ⪰ 0 and v ∈ range(Y), vᵀX⁺v = sup_z (2zᵀv − zᵀXz) ≤
  sup_z (2zᵀv − zᵀYz) = vᵀY⁺v, and X ⪰ θₗ²X⁽ˡ⁾ for every block l (and ⪰ the sum of its algebra blocks), so
  each workload term takes the smallest error of a block (or the algebra sub-union) that supports it, and
  these add up to the reported total (an upper bound: the least-squares estimate from all blocks is at least
  as good as from any one). ``total_lower`` is the largest of the SVD bound and Σ_k of a dual point's value
  2⟨Z, F_k⟩ − ⟨Z, XZ⟩ ≤ tr(G_k X⁺) at a product Z; ``total_width`` is the relative gap. The attained max
  variance is (zᵀq)²/(zᵀXz) ≤ qᵀX⁺q at z = the best block's X_l⁺q, computed factor-wise.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from mmopt import error as dense_error
from mmopt._base import guards as g
from mmopt._base import validation as v
from mmopt._base.guards import Unsupported
from mmopt.dense._error_common import check_privacy, check_type, resolve_norm
from mmopt.dense._queries import has_per_query
from mmopt.dense._strategy_core import NORMS, Strategy, max_column_norm
from mmopt.privacy import Privacy
from mmopt.structured import _bracket as br
from mmopt.structured import _checks as ck
from mmopt.structured import _rows as rw
from mmopt.structured import algebra as alg
from mmopt.structured import bounds, eigenbasis
from mmopt.structured import factors as fc
from mmopt.structured._normalised import normalised
from mmopt.structured._report import ImplicitErrorReport
from mmopt.structured.strategies import ImplicitStrategy, Sensitivity, sensitivity, sensitivity_parts
from mmopt.structured.two_term import two_term
from mmopt.structured.workloads import ImplicitWorkload

_TINY = np.finfo(float).tiny


#: From this many cells a two-term strategy is scored by :mod:`mmopt.structured.two_term` (exact total, O(Σnᵢ³ +
#: N·K); the largest variance as a Löwner upper bound) instead of the dense path (exact maximum, O(N³): 30 s at
#: 4,096 cells).
TWO_TERM_MIN_N = 1024


def evaluate(workload: ImplicitWorkload, strategy: ImplicitStrategy, privacy: Privacy | None = None, *,
             norm: str | None = None, dense_limit: int = ck.DENSE_LIMIT,
             caller: str = "evaluate") -> ImplicitErrorReport:
    """Expected error c·Δ²·tr(G X⁺) of the matrix mechanism for implicit W and A (see module docstring).

    Raises ValueError when A does not support W, or when a factor's error is negative, non-finite or
    below its SVD bound (numerical failure rather than a wrong answer); ``caller`` names the function in those
    messages (the mechanism and the release check support through this one).

    Examples
    --------
    >>> from mmopt.structured import workloads as sw, strategies as ss
    >>> W = sw.kron(sw.identity_total(2), sw.all_range(3))
    >>> A = ss.kron_strategy(np.eye(2), np.eye(3))
    >>> evaluate(W, A).total_squared_error          # identity: Σ incidences = tr(G) = 4·10
    40.0
    """
    check_type(workload, ImplicitWorkload, name="workload", caller=caller)
    check_type(strategy, ImplicitStrategy, name="strategy", caller=caller)
    ck.same_shape(workload.shape, strategy.shape, caller=caller, what="the workload and the strategy")
    check_privacy(privacy, caller)
    norm = resolve_norm(privacy, norm, caller)
    dense_limit = v.check_int(dense_limit, name="dense_limit", caller=caller, low=0)
    d = len(workload.shape)  # past the 2^d algebra below (or where its terms·2^d tables get large): the closure
    if not strategy.is_product and (d > 16 or (len(workload.terms) + len(strategy.terms)) << d > 1 << 22):
        from mmopt.structured.residual.solve import closure_report  # lazy: that subpackage imports this layer
        if (report := closure_report(workload, strategy, privacy, norm, caller=caller)) is not None:
            return report
    if not strategy.is_product:
        # a split strategy (a fitted basis of 1^⊥ per attribute): exact on any union of products, at any N
        # (None for other strategies, and for isotropic ones, which the algebra below scores with exact maxima)
        from mmopt.structured.residual.solve import split_report  # lazy: that subpackage imports this layer
        def floor() -> float:
            return bounds.svd_bound(workload, dense_limit=0, root_limit=0).value
        if (report := split_report(workload, strategy, privacy, norm, floor=floor, caller=caller)) is not None:
            return report
    cache = fc.Cache()
    # Δ of the strategy as given (scale-safe; a ValueError if it is not a normal float64), then every figure
    # on the same strategy at a moderate scale (A = 2^shift·Â): error is invariant under A → cA, and Â's
    # Grams, pseudo-inverses and Δ² neither over- nor underflow (weights of 1e±200, factors of 1e±170).
    parts = sensitivity_parts(strategy, norm)
    reported = parts.value(what=f"strategy '{strategy.name}'", caller=caller)
    scaled = normalised(strategy)
    original, strategy = strategy, scaled.strategy
    sens = Sensitivity(parts.rescaled(scaled.shift), parts.exact, parts.method)  # Δ of Â
    ck.check_evaluation_memory(workload, strategy, caller, inverses=strategy.is_product, grams=not strategy.is_product)
    low = None  # the bracket's lower unit value (only where the total is a bound)
    shared = None  # tr(G X⁺) through a shared eigenbasis of the factor Grams (mmopt.structured.eigenbasis)
    try:
        if strategy.is_product:
            unit, mx, up, method, exact = (*_product(workload, strategy.terms[0], cache, caller), "product", True)
        elif (co := _algebra_coefficients(strategy.terms, cache)) is not None and len(workload.shape) <= 16:
            unit, mx, up, method, exact = (*_algebra(workload, strategy.terms, co, cache, caller), "algebra", True)
        elif len(strategy.terms) == 2 and strategy.domain_size > TWO_TERM_MIN_N and \
                (pair := two_term(workload, strategy.terms, cache)) is not None:
            (unit, up), mx, method, exact = pair, None, "two_term", True  # OPT_+ on two terms: nothing N×N
        elif strategy.domain_size > min(TWO_TERM_MIN_N, dense_limit) and \
                (coupled := _coupled(workload, strategy, privacy, norm)) is not None:
            # exact without N×N work, as two_term: scoring auto's coupled candidate densely took 40 CPU s at 4,096
            return dataclasses.replace(coupled, strategy=original.name, sensitivity=reported)  # Δ as given
        elif strategy.domain_size <= dense_limit and (strategy.domain_size <= TWO_TERM_MIN_N or
                                                      _lists_queries(workload) or
                                                      (shared := eigenbasis.unit(workload, strategy, caller)) is None):
            ck.check_evaluation_memory(workload, strategy, caller, inverses=False, grams=True, dense=True)
            return _dense(workload, strategy, privacy, norm, sens, reported, _delta_lower(strategy, norm, sens))
        else:
            ck.check_evaluation_memory(workload, strategy, caller, inverses=True, grams=True)
            # commuting factor Grams: the total exact at any N (the bracket keeps the largest variance's ends);
            # 2-D ranges on 128² against the quad-tree had a bracket 29× wide, and 64² took 10 CPU s densely
            if shared is None and strategy.domain_size > dense_limit:
                shared = eigenbasis.unit(workload, strategy, caller)
            try:
                unit, mx, up, low = br.bracket(workload, strategy, cache, caller, algebra_co=[
                    (c or [None])[0] for c in (_algebra_coefficients([t], cache) for t in strategy.terms)])
                method, exact = "loewner_bound", False
            except ValueError:
                if shared is None:
                    raise
                # no block supports a term alone (halves of an attribute's cells, each in its own block): the
                # exact total stands, and no query's variance exceeds the total
                mx, up = None, shared
            if shared is not None:
                unit, low, method, exact = shared, None, "eigenbasis", True
    except ValueError as exc:
        if scaled.dropped and isinstance(exc, Unsupported):
            raise ValueError(f"{caller}: the weights of strategy '{strategy.name}' span more than float64 can resolve: "
                             f"term(s) {list(scaled.dropped)} are over 2^400 times smaller than the largest, so their "
                             "share of AᵀA is below round-off, and without them the strategy does not support the "
                             f"workload ({exc}). Its error is not computable in float64: raise those weights.") from exc
        raise
    floor = _check_against_bound(workload, strategy, unit, cache, caller)
    d2 = sens.value**2
    m = workload.n_queries
    total = _figure(d2, unit, privacy, workload.name)
    lower = None
    if not (exact and sens.exact):  # the certified lower end: a valid bound at Δ's lower value, or the SVD bound
        lower = min(total, max(_figure(_delta_lower(strategy, norm, sens) ** 2, unit if low is None else low,
                                       privacy, workload.name), _figure(1.0, floor, privacy, workload.name)))
    return ImplicitErrorReport(
        workload.name, strategy.name, privacy, workload.shape, workload.domain_size, m, reported, sens.exact,
        total, exact and sens.exact, total / m, math.sqrt(total / m),
        None if mx is None else _figure(d2, mx, privacy, workload.name), _figure(d2, up, privacy, workload.name),
        mx is not None and mx == up and sens.exact, method, total_lower=lower, sensitivity_norm=norm)


def _coupled(workload, strategy, privacy, norm: str):
    """The exact report of a coupled split strategy (:mod:`mmopt.structured.residual.coupled`), or None; called on
    the normalised strategy (the total is scale invariant), the caller puts back Δ of the strategy as given."""
    from mmopt.structured.residual.coupled import report  # lazy: that subpackage imports this layer
    return report(workload, strategy, privacy, norm,
                  floor=lambda: bounds.svd_bound(workload, dense_limit=0, root_limit=0).value)


def _delta_lower(strategy, norm: str, sens) -> float:
    """Δ itself when exact, else max_l θ_l ∏ᵢ Δ(Aᵢ⁽ˡ⁾) ≤ Δ (a union's column norm is at least any block's)."""
    if sens.exact:
        return sens.value
    return max(t.weight * math.prod(max_column_norm(f.matrix, norm) for f in t.factors) for t in strategy.terms)


def _figure(d2: float, x: float, privacy: Privacy | None, name: str) -> float:
    """c·Δ²·x, as (c·Δ²)·x like the dense path when that is a normal float, else from logarithms with a
    warning when it over- or underflows (:func:`mmopt._base.guards.scaled`)."""
    c = 1.0 if privacy is None else privacy.variance_factor
    if _TINY <= c < math.inf:
        with np.errstate(over="ignore", under="ignore"):
            out = (c * d2) * x
        if math.isfinite(out) and (out >= _TINY or x == 0.0):
            return out
    return g.scaled(d2 * x, privacy, name)


def _lists_queries(workload) -> bool:
    """Whether the dense path would list W's queries (so give the exact largest variance): rows within its
    limits (:meth:`~mmopt.structured.workloads.ImplicitWorkload.to_workload`, :func:`mmopt.error.evaluate`)."""
    rows = all(f.knows_rows for t in workload.terms for f in t.factors)
    return rows and workload.n_queries <= 10**6 and workload.n_queries * workload.domain_size <= ck.MAX_DENSE_ENTRIES


def _product(workload, term, cache, caller):
    theta2 = term.weight**2
    unit, mx, up = 0.0, 0.0, 0.0
    for t in workload.terms:
        traces = [br.factor_trace(Wf, Af, cache, caller) for Wf, Af in zip(t.factors, term.factors, strict=True)]
        unit += t.weight**2 * math.prod(traces)
        # a Gram-only factor (its rows unknown) has no largest term to find, but its largest is at most their sum
        # tr(G M): the total holds, with a proven upper bound on the largest variance (it raised, though the dense
        # route reported the same pair's total)
        found = [fc.query_terms_max(Wf, cache.get(fc.strategy_inverse, Af).profile)[:2]
                 if has_per_query(Wf) else (None, tr) for Wf, Af, tr in zip(t.factors, term.factors, traces,
                                                                             strict=True)]
        mx = None if mx is None or any(f[0] is None for f in found) else \
            max(mx, t.weight**2 * math.prod(f[0] for f in found))
        up = max(up, t.weight**2 * math.prod(f[1] for f in found))
    with np.errstate(over="ignore"):  # θ² ≥ 2⁻¹⁰⁰² after normalised(); a ratio past float64 is inf, never ranked
        return (float(np.divide(unit, theta2)), None if mx is None else float(np.divide(mx, theta2)),
                float(np.divide(up, theta2)))


def _coefficients(Af):
    return alg.ij_coefficients(Af.gram)


def _algebra_coefficients(terms, cache):
    co = [[cache.get(_coefficients, f) for f in t.factors] for t in terms]
    return None if any(c is None for cs in co for c in cs) else co


def _algebra(workload, terms, co, cache, caller):
    per_term, inv, pos = br.algebra_terms(workload, terms, co, cache)
    traces = sum(per_term)
    # each term by itself, as the bracket judges them: summed first, a 10⁻³-weighted term wholly off A's row space
    # beside a 10⁴-weighted one passed as round-off and got an "exact" total (a helper's audit)
    if any(rw.term_off_range(t, tr, pos, workload.shape, cache) for t, tr in zip(workload.terms, per_term,
                                                                                  strict=True)):
        raise Unsupported(f"{caller}: the strategy does not support workload '{workload.name}': its Gram has "
                         "weight on eigenspaces where AᵀA is zero. Add marginals covering those attributes.")
    unit = float(traces[pos] @ inv[pos])
    rows = [rw.algebra_row_upper(t, inv, workload.shape, cache, float(tr[pos] @ inv[pos]))
            for t, tr in zip(workload.terms, per_term, strict=True)]
    mx = None if any(r[0] is None for r in rows) else max(r[0] for r in rows)  # a Gram-only factor: None
    return unit, mx, max(r[1] for r in rows)


def _dense(workload, strategy, privacy, norm, sens, reported, delta_lower) -> ImplicitErrorReport:
    """Exact, through the dense path (N ≤ dense_limit): error depends on A only through X = AᵀA and Δ.

    A union of at most 2N rows is evaluated from its rows; a taller one (e.g. 81,920 × 1,024 rows) is replaced by
    the profile-equivalent square root of X (Theorem 4.13; its accuracy is X's, eps·κ(A)²), and the figures
    rescaled from its Δ to A's own (exact, or a proven upper bound);
    ``sens`` is Δ of this (moderately scaled) strategy, ``reported`` the given strategy's Δ, ``delta_lower``
    a lower value of that Δ (the bracket's lower end when Δ is only an upper bound).
    """
    if strategy.n_rows <= 2 * strategy.domain_size:
        # A's own rows (at most twice the Gram's memory): the dense path's QR/SVD then sees A itself, where forming
        # X = AᵀA squares its condition number — a union with a 1e-7-weighted term was 1 % off, reported exact
        base = Strategy(strategy.dense(), name=strategy.name)
    else:
        base = Strategy.from_gram(strategy.gram, name=strategy.name)
    r = dense_error.evaluate(workload.to_workload(), base, None, norm=norm, per_query=False)
    k2 = (sens.value / r.sensitivity) ** 2
    total = _figure(k2, r.total_squared_error, privacy, workload.name)
    m = workload.n_queries
    return ImplicitErrorReport(
        workload.name, strategy.name, privacy, workload.shape, workload.domain_size, m,
        reported, sens.exact, total, sens.exact, total / m, math.sqrt(total / m),
        None if r.max_variance is None else _figure(k2, r.max_variance, privacy, workload.name),
        None if r.max_variance_upper is None else _figure(k2, r.max_variance_upper, privacy, workload.name),
        r.max_variance_exact and sens.exact, "dense",
        total_lower=None if sens.exact else _figure((delta_lower / r.sensitivity) ** 2, r.total_squared_error,
                                                    privacy, workload.name), sensitivity_norm=norm)


def _check_against_bound(workload, strategy, unit, cache, caller) -> float:
    """Δ₂²·tr(G X⁺) must not fall below a proven lower bound of the SVD bound (Thm 5.26); returns that bound
    (unit privacy), a lower bound on every strategy's Δ²·tr(G X⁺) for Δ₁ ≥ Δ₂ too."""
    floor = bounds.svd_bound(workload, None, dense_limit=0, cache=cache, root_limit=0).value
    s2 = sensitivity(strategy, "l2")
    if unit == math.inf and floor == math.inf:
        raise ValueError(f"{caller}: the error of '{strategy.name}' on '{workload.name}' exceeds float64 (so does "
                         "its SVD lower bound). Rescale the queries: every error figure scales with the square of "
                         "the workload's weights and entries.")
    if s2.exact and (not math.isfinite(unit) or unit < 0 or s2.value**2 * unit < floor * (1 - 1e-9)):
        raise ValueError(f"{caller}: the computed error {unit!r} of '{strategy.name}' is below the SVD lower bound "
                         f"{floor / s2.value**2:.6g} or not finite: numerical failure. Check the strategy's "
                         "conditioning.")
    return floor


__all__ = ["ImplicitErrorReport", "evaluate", "NORMS"]
