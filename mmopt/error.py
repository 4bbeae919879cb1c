"""Exact error analysis: evaluate, per-query / total / max error, the SVD bound, and the guards on them.

Notation: see README. Expected squared error of query w under strategy A (Prop. 4.4):

    Error_A(w) = c · Δ_A² · w M_A wᵀ,   M_A = (AᵀA)⁺,   c = Privacy.variance_factor (2/ε² for Laplace)

and the total over W is c · Δ_A² · tr(G M_A). How M_A and tr(G M_A) are computed so that they mean
something (QR/SVD profiles, one rank rule, sums of squares) is in :mod:`mmopt.dense.profile`. Three guards
stand between a computation and a user: the error is computed on A scaled by an exact power of two (it
is scale-invariant, and 10^±170 entries must not under- or overflow); a strategy that does not support
the workload raises; and a computed error that is not finite, not positive, or below the proven SVD
lower bound raises :class:`NumericalError` naming the strategy — it is never returned, ranked or printed.

:class:`ErrorReport` and the input checks live in :mod:`mmopt.dense._error_common`; the single-strategy tools
(:func:`error_profile`, :func:`supports`, :func:`query_error`, :func:`profile_equivalent`,
:func:`eigen_structure`) in :mod:`mmopt.dense._strategy_analysis`; an optimiser's score against a Gram
(:func:`unit_objective`) and the SVD bound from a Gram (:func:`gram_svd_bound`) in :mod:`mmopt.dense.objective`.
All are re-exported here.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from mmopt._base import guards as g
from mmopt._base import validation as v
from mmopt._base.guards import NumericalError, Unsupported
from mmopt.dense import _queries, _strategy_analysis
from mmopt.dense._error_common import ErrorReport, check_per_query_flag, scaled_sensitivity
from mmopt.dense._error_common import as_strategy as _as_strategy  # noqa: F401  (used by mechanism, augment)
from mmopt.dense._error_common import check_privacy as _check_privacy
from mmopt.dense._error_common import check_workload as _check_workload
from mmopt.dense._error_common import resolve_norm as _resolve_norm
from mmopt.dense._strategy_analysis import eigen_structure, error_profile, query_error, supports
from mmopt.dense._strategy_core import column_norm_parts, norm_from_parts
from mmopt.dense._workload_core import Workload
from mmopt.dense.objective import bound_of, gram_svd_bound, unit_objective
from mmopt.dense.profile import (
    QR_MAX_CONDITION as _QR_MAX_CONDITION,  # noqa: F401  (re-exported for mmopt.mechanism)
)
from mmopt.dense.profile import (
    Profile,
    Spectrum,
    effective_factor,
    effective_profile,
    numerical_rank,
    scaled_profile,
    trace_with_profile,
    workload_spectrum,
)
from mmopt.dense.support import unsupported
from mmopt.privacy import Privacy

__all__ = ["ErrorReport", "NumericalError", "Unsupported", "diagonal_bound", "evaluate", "expected_error",
           "query_error", "svd_bound", "error_profile", "supports", "unit_objective", "profile_equivalent",
           "eigen_structure", "numerical_rank", "gram_svd_bound"]

# Below this domain size the workload's spectrum is computed for the bound check even on the certified
# path (an eigh at n = 512 takes ~0.03 s and is cached per workload).
_ALWAYS_CHECK_N = 512


def evaluate(workload: Workload, strategy, privacy: Privacy | None = None, *,
             norm: str | None = None, per_query: bool | None = None) -> ErrorReport:
    """Exact expected error of the matrix mechanism (Prop. 4.4).

    Parameters
    ----------
    workload : Workload
    strategy : Strategy or array_like of shape (p, n)
    privacy : Privacy or None, default=None
        None gives unit-privacy figures (variance factor 1).
    norm : {"l1", "l2"} or None, default=None
        Sensitivity norm when ``privacy`` is None (default "l1"); must match ``privacy`` otherwise.
    per_query : bool or None, default=None
        Return every query's variance. None: when the workload has at most 10⁶ queries and its W
        or family is known. True on a Gram-only workload raises.

    Returns
    -------
    ErrorReport

    Raises
    ------
    ValueError
        When the strategy does not support the workload (including numerically singular A).
    NumericalError
        When the computed error is not finite, not positive or below the SVD lower bound: float64
        cannot represent this strategy's error (it is never returned).

    Notes
    -----
    .. math:: \\mathrm{TotalError}_A(W) = c\\,\\Delta_A^2\\,\\mathrm{tr}(W^T W (A^T A)^{+})

    References
    ----------
    Li et al., PODS 2010, Prop. 4.4 and Def. 4.6.

    Examples
    --------
    >>> import mmopt
    >>> r = evaluate(mmopt.workload.all_range(4), mmopt.strategy.identity(4), mmopt.Privacy(1.0))
    >>> r.total_squared_error, r.max_variance   # (2/ε²)·n(n+1)(n+2)/6 = 40; longest range 2n = 8
    (40.0, 8.0)
    """
    caller = "evaluate"
    _check_workload(workload, caller)
    strategy = _as_strategy(strategy, caller)
    v.check_same_domain(workload.domain_size, strategy.domain_size, caller=caller)
    _check_privacy(privacy, caller)
    norm = _resolve_norm(privacy, norm, caller)
    if per_query is not None and not isinstance(per_query, bool | np.bool_):
        raise TypeError(f"The 'per_query' parameter of {caller} must be True, False or None. "
                        f"Got {per_query!r} ({type(per_query).__name__}) instead.")
    m = workload.n_queries
    if per_query is None:
        per_query = m <= 10**6 and _queries.has_per_query(workload)
    elif per_query and not _queries.has_per_query(workload):
        raise ValueError(
            f"per_query variances need the workload matrix W, but Workload '{workload.name}' was built from "
            "its Gram matrix only. Use Workload.from_matrix(W), or evaluate(..., per_query=False)."
        )
    # Everything below is computed for A·2⁻ᵉ (exact): Δ²·M is invariant under scaling, and a strategy
    # with entries of 10^±170 must neither overflow AᵀA nor underflow Δ.
    g.check_working_set(_working_set(workload, strategy, per_query), caller=caller,
                        what=f"evaluating strategy '{strategy.name}' on workload '{workload.name}'",
                        remedy=" Use per_query=False, a smaller domain, or an implicit (product) workload and "
                               "strategy (mmopt.workload.kron, mmopt.strategy.kron), which never form n×n.")
    e, As, prof = scaled_profile(strategy)
    prof, spec, unit = _unit_error(workload, As, norm, strategy.name, caller, prof)
    d2 = scaled_sensitivity(As, norm) ** 2
    sens = _reported_sensitivity(As, e, norm, strategy.name, caller)

    mse = g.scaled(unit, privacy, workload.name)
    log10_total = math.log10(unit) + g.log10_variance_factor(privacy) + g.log10_int(m)
    total = g.times_int(mse, m, workload.name)

    # each query's variance as a sum of squares ‖w F‖² where M's entries would cancel: stored rows, and a family's
    # queries on an uncertified (QR/SVD) profile; M = F Fᵀ for the families' O(n²) prefix sums when certified
    F = effective_factor(prof, spec) if workload.matrix is not None or (per_query and not prof.certified) else None
    M = effective_profile(prof, spec) if F is None else None
    terms = g.nonnegative(_queries.per_query_terms(workload, M, F), strategy.name) if per_query else None
    mx = _queries.max_term(workload, M, terms, F)
    c_d2 = g.scaled(d2, privacy, workload.name)
    return ErrorReport(
        workload.name, strategy.name, privacy, workload.domain_size, m, sens,
        total, log10_total, mse, _rmse(mse, log10_total, m),
        # a Gram-only workload (its queries unknown): no query's variance exceeds the total (all are ≥ 0), the
        # bound the implicit routes give; None here had the two layers disagree on the same pair
        None if mx is None else c_d2 * max(mx[0], 0.0), total if mx is None else c_d2 * max(mx[1], 0.0),
        mx is not None and mx[0] == mx[1], None if terms is None else c_d2 * terms, sensitivity_norm=norm,
    )


def _rmse(mse: float, log10_total: float, m: int) -> float:
    """√mse, from the logarithm where mse itself left float64: at ε = 1e-300 the RMSE (~4·10³⁰⁰ on prefix(16))
    fits where its square does not, and was reported inf (a newcomer's audit)."""
    if math.isfinite(mse):
        return math.sqrt(mse)
    try:
        return 10.0 ** (0.5 * (log10_total - g.log10_int(m)))
    except OverflowError:
        return math.inf


def _reported_sensitivity(As: np.ndarray, e: int, norm: str, name: str, caller: str) -> float:
    """Δ of A = 2ᵉ·As, by the one scale-safe computation (:func:`mmopt.dense._strategy_core.column_norm_parts`):
    exact to rounding, or a ValueError when Δ is not a normal float64 (never 0, inf or a subnormal)."""
    c, k = column_norm_parts(As, norm)
    return norm_from_parts(float(np.max(c)), k + (e if norm == "l1" else 2 * e), norm,
                           what=f"strategy '{name}'", caller=caller)


def _working_set(workload: Workload, strategy, per_query: bool) -> dict[str, int]:
    """float64 entries :func:`evaluate` holds at its peak, by part (for :func:`mmopt._base.guards.check_working_set`).

    Measured with tracemalloc at n = 1,024 (all ranges with H₂, prefix with the wavelet, an explicit 3n×n W
    with the identity): peaks of 5.1–6.5 n² beyond W's Gram and A; the parts below give 6–8 n² there. Held
    throughout: A·2⁻ᵉ (p·n), the profile M and its factor B (2 n²), the workload's eigenbasis (n²).
    Transient, one at a time: the factorisation (A's QR copy p·n, plus 2 n² for the triangular inverse and
    BBᵀ) or the per-query terms (3.5 n² for all ranges' prefix sums, m·n for an explicit W, 3·2ⁿ for all
    predicates).
    """
    p, n = strategy.matrix.shape
    m = workload.n_queries
    fam = workload.family
    if not per_query:
        queries = 3 * n * n if fam in ("all_range", "prefix") else 0
    elif workload.matrix is not None:
        queries = m * n + 2 * m
    elif fam == "all_predicate":
        queries = 3 * 2**n
    else:
        queries = 4 * n * n
    return {f"A scaled by a power of two ({p}×{n})": p * n,
            f"the profile M = (AᵀA)⁺, its factor and the workload's eigenbasis (3 of {n}×{n})": 3 * n * n,
            "the factorisation of A or the per-query terms, whichever is larger":
                max(p * n + 2 * n * n, queries)}


def expected_error(workload: Workload, strategy, privacy: Privacy | None = None, *, norm: str | None = None) -> float:
    """Total expected squared error; shorthand for ``evaluate(...).total_squared_error``."""
    return evaluate(workload, strategy, privacy, norm=norm, per_query=False).total_squared_error


def svd_bound(workload: Workload, privacy: Privacy | None = None, *, per_query: bool = False) -> float:
    """The SVD lower bound c·(Σᵢ σᵢ(W))²/n on the total error of *every* strategy (Thm 5.26).

    Valid for both sensitivity norms (‖A‖₁ ≥ ‖A‖₂ column-wise). ``per_query=True`` divides by m.
    Eigenvalues of G below the rank rule's threshold (round-off) are zero: their square roots
    (~10⁻⁸ each) would otherwise inflate the bound past the true optimum.

    Examples
    --------
    >>> from mmopt import workload
    >>> round(svd_bound(workload.prefix(2)), 12)   # ((1+√5)/2 + (√5-1)/2)² / 2
    2.5
    """
    _check_workload(workload, "svd_bound")
    _check_privacy(privacy, "svd_bound")
    check_per_query_flag(per_query, "svd_bound")
    mean = g.scaled(_svd_bound_unit(workload), privacy, workload.name)
    return mean if per_query else g.times_int(mean, workload.n_queries, workload.name)


def diagonal_bound(workload: Workload, privacy: Privacy | None = None, *, per_query: bool = False) -> float:
    """The diagonal lower bound c·Σᵢ hᵢ², h = diag((WᵀW)^{1/2}), on the total error of *every* strategy.

    Proof (unit privacy, columns scaled so that diag X ≤ 1 for X = AᵀA, i.e. Δ₂ = 1): with Y = G^{1/2}, the
    block matrix [[X, Y], [Y, Y X⁻¹ Y]] is PSD (its Schur complement is 0), so its 2×2 principal minors are:
    (Y X⁻¹ Y)ᵢᵢ ≥ Yᵢᵢ²/Xᵢᵢ ≥ Yᵢᵢ², and tr(G X⁻¹) = Σᵢ (Y X⁻¹ Y)ᵢᵢ ≥ Σᵢ hᵢ² (a singular X supporting G is the
    limit of X + εI). By Cauchy–Schwarz, Σ hᵢ² ≥ (Σ hᵢ)²/n = (tr G^{1/2})²/n, the SVD bound (Thm 5.26), with
    equality when h is constant (identity, total). Valid for both norms (‖A‖₁ ≥ ‖A‖₂ column-wise); it is also
    the value of the L2 dual at the weights u ∝ h² (see :mod:`mmopt.toeplitz.bound`). Computed from the same
    cached eigendecomposition and rank rule as :func:`svd_bound`, so it costs O(n·rank) more.
    ``per_query=True`` divides by m.

    Examples
    --------
    >>> from mmopt import workload
    >>> W = workload.prefix(64)
    >>> bool(diagonal_bound(W) > svd_bound(W)), round(diagonal_bound(workload.identity(5)), 9)
    (True, 5.0)
    """
    _check_workload(workload, "diagonal_bound")
    _check_privacy(privacy, "diagonal_bound")
    check_per_query_flag(per_query, "diagonal_bound")
    spec = workload_spectrum(workload)
    h = (spec.basis * spec.basis) @ np.sqrt(spec.eigenvalues)  # diag(Q √λ Qᵀ) of the per-query Gram G/m
    mean = g.scaled(float(h @ h), privacy, workload.name)
    return mean if per_query else g.times_int(mean, workload.n_queries, workload.name)


def profile_equivalent(first, second, *, rtol: float = 1e-9) -> bool:
    """Whether two strategies have the same error profile, i.e. AᵀA = BᵀB (Def. 4.10), to ``rtol``.

    ``rtol`` in [0, 1): the largest entry of |AᵀA − BᵀB| relative to the largest entry of either Gram
    (both computed at a common power-of-two scale, so any finite A and B compare). A negative, non-finite
    or non-real ``rtol`` raises; rtol ≥ 1 would call unrelated strategies equivalent and is refused too.

    Examples
    --------
    >>> from mmopt import strategy
    >>> profile_equivalent(strategy.hierarchical(8), strategy.square_root(strategy.hierarchical(8)))
    True
    """
    rtol = v.check_real(rtol, name="rtol", caller="profile_equivalent", low=0.0, high=1.0, high_open=True)
    return _strategy_analysis.profile_equivalent(first, second, rtol=rtol)


# -- the guarded computation ---------------------------------------------------------------------------
def _unit_error(workload: Workload, As: np.ndarray, norm: str, name: str, caller: str, prof: Profile
                ) -> tuple[Profile, Spectrum | None, float]:
    """(profile, spectrum, Δ²·tr(G M)/m) for the scaled strategy As, checked; G is the per-query Gram."""
    G = workload.mean_gram
    refused, leak = unsupported(G, prof, workload.matrix, As)
    if refused:
        raise Unsupported(
            f"{caller}: strategy '{name}' (numerical rank {prof.rank} of n={As.shape[1]}) does "
            f"not support workload '{workload.name}': {leak:.2g} of its Gram trace (or of one query's or one Gram "
            "eigendirection's squared norm) lies outside the row space of A, so some queries have unbounded error. "
            "Add rows to A (e.g. a scaled identity, §3.3)."
        )
    need_spec = not prof.certified or workload.domain_size <= _ALWAYS_CHECK_N
    spec = workload_spectrum(workload) if need_spec else None
    value = scaled_sensitivity(As, norm) ** 2 * trace_with_profile(G, prof, spec)
    bound = _svd_bound_unit(workload) if spec is not None else None
    g.check_value(value, bound, name, f"workload '{workload.name}'", caller)
    return prof, spec, value


def _svd_bound_unit(workload: Workload) -> float:
    out = bound_of(workload_spectrum(workload), workload.domain_size)
    if out == math.inf:
        warnings.warn(f"The SVD bound of workload '{workload.name}' exceeds float64; returning inf. Rescale the "
                      "queries: every error figure scales with the square of W's entries.", RuntimeWarning,
                      stacklevel=3)
    return out
