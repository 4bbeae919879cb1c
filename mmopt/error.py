"""Exact error analysis: sensitivity, error profile (AᵀA)⁺, per-query / total / max error, SVD bound.

Notation: see README. Expected squared error of query w under strategy A (Prop. 4.4):

    Error_A(w) = c · Δ_A² · w M_A wᵀ,   M_A = (AᵀA)⁺,   c = Privacy.variance_factor (2/ε² for Laplace)

and the total over W is c · Δ_A² · tr(G M_A). The profile M_A is computed from a QR factorisation
of A (or its SVD when A is ill-conditioned or rank-deficient). A Cholesky of AᵀA squares the condition
number and has produced errors *below* the proven lower bound on near-singular strategies, so it is used
only as a fast path when a condition estimate certifies n·eps·κ(AᵀA) ≤ 1e-8 (relative error of every
query's variance), which holds for I, H, Y and optimised strategies up to large n. A rank-deficient A is
fine when it supports the workload (the workload's Gram has no weight on A's null space); otherwise
:func:`evaluate` raises.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy import linalg
from scipy.linalg import lapack

from mmopt import _queries
from mmopt import _validation as v
from mmopt.privacy import Privacy
from mmopt.strategy import NORMS, Strategy
from mmopt.workload import Workload

# Above this condition number of A the QR path hands over to the SVD (relative error ≈ κ·2⁻⁵²).
_QR_MAX_CONDITION = 1e8
# The Cholesky fast path is taken only when n·eps·κ₁(AᵀA) is below this: a first-order bound on the
# relative error of every query's variance. Past it, squaring κ could matter, and QR/SVD take over.
_CHOLESKY_MAX_RELATIVE_ERROR = 1e-8
# A workload is unsupported when more than this share of its Gram's trace lies on A's null space.
_SUPPORT_TOL = 1e-9


@dataclass(frozen=True, eq=False)
class Profile:
    """The error profile M = (AᵀA)⁺ of a strategy, with the null space used for support checks."""

    matrix: np.ndarray = field(repr=False)
    rank: int
    null_basis: np.ndarray = field(repr=False)  # n×(n−rank), orthonormal
    method: str  # "cholesky" (certified well-conditioned), "qr" or "svd"


def error_profile(strategy) -> Profile:
    """The error profile M_A = (AᵀA)⁺ (Def. 4.6), computed stably from A.

    Examples
    --------
    >>> from mmopt import strategy
    >>> M = error_profile(strategy.wavelet(4)).matrix
    >>> np.round(8 * M, 10)[0].tolist() == [3, -1, 0, 0]   # Fig. 3: M_Y = (1/8)[[3,-1,0,0],...]
    True
    """
    A = _as_strategy(strategy, "error_profile").matrix
    p, n = A.shape
    if p >= n:
        M = _cholesky_profile(A)
        if M is not None:
            return Profile(M, n, np.zeros((n, 0)), "cholesky")
        R = linalg.qr(A, mode="r", check_finite=False)[0][:n]
        rcond, info = lapack.dtrcon(R, norm="1", uplo="U", diag="N")
        if info == 0 and rcond * _QR_MAX_CONDITION > 1.0:
            # dpotri forms (RᵀR)⁻¹ = R⁻¹R⁻ᵀ from the triangular factor in (2/3)n³ flops; R comes from
            # the QR of A, so this is as accurate as κ(A) allows (a Cholesky of AᵀA would give κ(A)²).
            M, info = lapack.dpotri(R, lower=0, overwrite_c=1)
            if info == 0:
                M = np.triu(M) + np.triu(M, 1).T
                return Profile(M, n, np.zeros((n, 0)), "qr")
    _, s, Vt = linalg.svd(A, full_matrices=True, check_finite=False)
    r = numerical_rank(s, A.shape)
    Vr = Vt[:r]
    M = (Vr.T / s[:r] ** 2) @ Vr
    return Profile(M, r, Vt[r:].T.copy(), "svd")


def numerical_rank(s: np.ndarray, shape: tuple[int, int]) -> int:
    """Singular values above max(p, n)·eps·s_max count (LAPACK's rule); shared with the mechanisms."""
    return int(np.sum(s > max(shape) * np.finfo(float).eps * s[0]))


def _cholesky_profile(A: np.ndarray) -> np.ndarray | None:
    """(AᵀA)⁻¹ from a Cholesky factor when that is provably as good as QR here, else None.

    Squaring the condition number is what makes Cholesky of AᵀA dangerous; for well-conditioned A
    (κ₁(AᵀA) ≤ 1e-8/(n·eps), e.g. ≈ 1e4 at n = 4096: I, H, Y, optimised strategies) the error bound
    n·eps·κ(X) stays below 1e-8 relative and the path is 3–4× cheaper than QR; a sparse A (H, Y, I)
    also gets its Gram in O(nnz) time.
    """
    from scipy import sparse

    p, n = A.shape
    nnz = np.count_nonzero(A)
    if nnz < 0.05 * p * n:
        As = sparse.csc_matrix(A)
        X = (As.T @ As).toarray()
    else:
        X = A.T @ A
    anorm = float(np.max(np.sum(np.abs(X), axis=0)))
    C, info = lapack.dpotrf(X, lower=0, clean=1, overwrite_a=1)
    if info != 0:
        return None
    rcond, info = lapack.dpocon(C, anorm, uplo="U")
    if info != 0 or rcond == 0 or n * np.finfo(float).eps / rcond > _CHOLESKY_MAX_RELATIVE_ERROR:
        return None
    M, info = lapack.dpotri(C, lower=0, overwrite_c=1)
    if info != 0:
        return None
    return np.triu(M) + np.triu(M, 1).T


def supports(workload: Workload, strategy) -> bool:
    """Whether every query of the workload lies (numerically) in the row space of A (Def. 3.1)."""
    return _support_leak(workload.mean_gram, error_profile(strategy)) <= _SUPPORT_TOL


@dataclass(frozen=True, eq=False)
class ErrorReport:
    """Expected squared errors of answering ``workload`` with ``strategy`` under ``privacy``.

    ``privacy=None`` means unit privacy: variance factor 1 (the paper's Δ²·tr(G M) units).
    ``max_variance`` is the largest error of a single query; ``max_variance_upper`` a proven upper
    bound on it, equal to ``max_variance`` when ``max_variance_exact`` (it is not exact only for
    all-predicate workloads beyond n = 22, where the maximum is an NP-hard binary quadratic program).
    ``total_squared_error`` is ``inf`` (with a warning) when it exceeds float64; ``log10_total`` is
    always finite.
    """

    workload: str
    strategy: str
    privacy: Privacy | None
    domain_size: int
    n_queries: int
    sensitivity: float
    total_squared_error: float
    log10_total: float
    mean_squared_error: float
    rmse: float
    max_variance: float | None
    max_variance_upper: float | None
    max_variance_exact: bool
    per_query_variance: np.ndarray | None = field(default=None, repr=False)

    def to_row(self) -> dict:
        """A flat dict for one CSV row (no arrays)."""
        p = self.privacy
        return {
            "workload": self.workload, "strategy": self.strategy, "n": self.domain_size,
            # beyond float64 (all predicates past n ≈ 1023) m is written as a power of ten, never inf
            "m": self.n_queries if self.n_queries < 2**53 else f"~1e{math.log10(self.n_queries):.2f}",
            "noise": p.noise if p else "unit", "epsilon": p.epsilon if p else "", "delta": p.delta if p else "",
            "sensitivity": self.sensitivity, "total_squared_error": self.total_squared_error,
            "log10_total": self.log10_total, "mean_squared_error": self.mean_squared_error, "rmse": self.rmse,
            "max_variance": self.max_variance, "max_variance_upper": self.max_variance_upper,
            "max_variance_exact": self.max_variance_exact,
        }


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
    if not isinstance(workload, Workload):
        raise TypeError(f"The 'workload' parameter of {caller} must be a Workload. Got {type(workload).__name__}.")
    strategy = _as_strategy(strategy, caller)
    v.check_same_domain(workload.domain_size, strategy.domain_size, caller=caller)
    if privacy is not None and not isinstance(privacy, Privacy):
        raise TypeError(f"The 'privacy' parameter of {caller} must be a Privacy or None. Got {type(privacy).__name__}.")
    norm = _resolve_norm(privacy, norm, caller)
    prof = error_profile(strategy)
    _require_support(workload, strategy, prof, caller)
    c = 1.0 if privacy is None else privacy.variance_factor
    scale = c * strategy.sensitivity(norm) ** 2
    mse = scale * float(np.sum(workload.mean_gram * prof.matrix))
    m = workload.n_queries
    log10_total = math.log10(mse) + math.log10(m) if mse > 0 else -math.inf
    total = _times_int(mse, m, workload.name)

    if per_query is None:
        per_query = m <= 10**6 and _queries.has_per_query(workload)
    elif per_query and not _queries.has_per_query(workload):
        raise ValueError(
            f"per_query variances need the workload matrix W, but Workload '{workload.name}' was built from "
            "its Gram matrix only. Use Workload.from_matrix(W), or evaluate(..., per_query=False)."
        )
    variances = scale * _queries.per_query_terms(workload, prof.matrix) if per_query else None
    mx = _queries.max_term(workload, prof.matrix, variances / scale if variances is not None else None)
    return ErrorReport(
        workload.name, strategy.name, privacy, workload.domain_size, m, strategy.sensitivity(norm),
        total, log10_total, mse, math.sqrt(mse),
        None if mx is None else scale * mx[0], None if mx is None else scale * mx[1],
        mx is not None and mx[0] == mx[1], variances,
    )


def expected_error(workload: Workload, strategy, privacy: Privacy | None = None, *, norm: str | None = None) -> float:
    """Total expected squared error; shorthand for ``evaluate(...).total_squared_error``."""
    return evaluate(workload, strategy, privacy, norm=norm, per_query=False).total_squared_error


def query_error(query, strategy, privacy: Privacy | None = None, *, norm: str | None = None) -> float:
    """Expected squared error c·Δ²·w M wᵀ of one query w (Prop. 4.4 (1)).

    Examples
    --------
    >>> from mmopt import strategy
    >>> round(query_error([1, 0, 0, 0], strategy.hierarchical(4)), 3)   # Ex. 4.7: 9·13/21
    5.571
    """
    caller = "query_error"
    strategy = _as_strategy(strategy, caller)
    w = v.check_vector(query, name="query", caller=caller, length=strategy.domain_size)
    norm = _resolve_norm(privacy, norm, caller)
    prof = error_profile(strategy)
    if prof.rank < strategy.domain_size and np.sum((w @ prof.null_basis) ** 2) > _SUPPORT_TOL * max(w @ w, 1e-300):
        raise ValueError(f"{caller}: strategy '{strategy.name}' does not support this query (it is not in "
                         "the row space of A). Add rows to A, e.g. augment it with a scaled identity.")
    c = 1.0 if privacy is None else privacy.variance_factor
    return c * strategy.sensitivity(norm) ** 2 * float(w @ prof.matrix @ w)


def svd_bound(workload: Workload, privacy: Privacy | None = None, *, per_query: bool = False) -> float:
    """The SVD lower bound c·(Σᵢ σᵢ(W))²/n on the total error of *every* strategy (Thm 5.26).

    Valid for both sensitivity norms (‖A‖₁ ≥ ‖A‖₂ column-wise). ``per_query=True`` divides by m.

    Examples
    --------
    >>> from mmopt import workload
    >>> round(svd_bound(workload.prefix(2)), 12)   # ((1+√5)/2 + (√5-1)/2)² / 2
    2.5
    """
    if not isinstance(workload, Workload):
        raise TypeError(f"The 'workload' parameter of svd_bound must be a Workload. Got {type(workload).__name__}.")
    c = 1.0 if privacy is None else privacy.variance_factor
    mean = c * gram_svd_bound(workload.mean_gram)
    return mean if per_query else _times_int(mean, workload.n_queries, workload.name)


def gram_svd_bound(G: np.ndarray) -> float:
    """(Σᵢ √λᵢ(G))² / n for a PSD Gram G: the SVD bound at unit privacy, in G's own scale."""
    lam = np.clip(linalg.eigvalsh(G, check_finite=False), 0.0, None)
    return float(np.sum(np.sqrt(lam))) ** 2 / G.shape[0]


def unit_objective(A: np.ndarray, G: np.ndarray, norm: str = "l1") -> float:
    """Δ_norm(A)² · tr(G (AᵀA)⁺) for a Gram G; inf when A does not support G (an optimiser's score)."""
    strategy = _as_strategy(A, "unit_objective")
    prof = error_profile(strategy)
    if _support_leak(G, prof) > _SUPPORT_TOL:
        return np.inf
    return strategy.sensitivity(norm) ** 2 * float(np.sum(G * prof.matrix))


def profile_equivalent(first, second, *, rtol: float = 1e-9) -> bool:
    """Whether two strategies have the same error profile, i.e. AᵀA = BᵀB (Def. 4.10)."""
    A, B = _as_strategy(first, "profile_equivalent"), _as_strategy(second, "profile_equivalent")
    if A.domain_size != B.domain_size:
        return False
    scale = max(float(np.max(np.abs(A.gram))), 1e-300)
    return bool(np.max(np.abs(A.gram - B.gram)) <= rtol * scale)


def eigen_structure(strategy) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (descending) and eigenvectors (columns) of X = AᵀA; the profile's are their inverses."""
    lam, V = np.linalg.eigh(_as_strategy(strategy, "eigen_structure").gram)
    return lam[::-1], V[:, ::-1]


# -- helpers ------------------------------------------------------------------------------------------
def _as_strategy(strategy, caller: str) -> Strategy:
    if isinstance(strategy, Strategy):
        return strategy
    if isinstance(strategy, Workload):
        raise TypeError(f"The 'strategy' parameter of {caller} must be a Strategy or a matrix. Got a Workload; "
                        "use mmopt.strategy.from_workload(W) to use the workload as strategy.")
    return Strategy(v.check_matrix(strategy, name="strategy", caller=caller), "strategy")


def _resolve_norm(privacy: Privacy | None, norm: str | None, caller: str) -> str:
    if norm is not None:
        v.check_choice(norm, name="norm", caller=caller, choices=NORMS)
    if privacy is None:
        return norm or "l1"
    if norm is not None and norm != privacy.sensitivity_norm:
        raise ValueError(f"The 'norm' parameter of {caller} is {norm!r} but {privacy.noise} noise uses "
                         f"{privacy.sensitivity_norm!r}. Drop 'norm' when passing privacy.")
    return privacy.sensitivity_norm


def _support_leak(mean_gram: np.ndarray, prof: Profile) -> float:
    if prof.null_basis.shape[1] == 0:
        return 0.0
    N = prof.null_basis
    return float(np.sum(N * (mean_gram @ N))) / max(float(np.trace(mean_gram)), 1e-300)


def _require_support(workload: Workload, strategy: Strategy, prof: Profile, caller: str) -> None:
    leak = _support_leak(workload.mean_gram, prof)
    if leak > _SUPPORT_TOL:
        raise ValueError(
            f"{caller}: strategy '{strategy.name}' (numerical rank {prof.rank} of n={strategy.domain_size}) does "
            f"not support workload '{workload.name}': {leak:.2g} of its Gram trace lies outside the row space "
            "of A, so some queries have unbounded error. Add rows to A (e.g. a scaled identity, §3.3)."
        )


def _times_int(x: float, m: int, name: str) -> float:
    try:
        out = x * float(m)
    except OverflowError:
        out = math.inf
    if math.isinf(out) and math.isfinite(x):
        warnings.warn(f"The total error of workload '{name}' exceeds float64 (m = 2^{m.bit_length() - 1}…); "
                      "returning inf. Use the per-query figures or log10_total.", RuntimeWarning, stacklevel=3)
    return out
