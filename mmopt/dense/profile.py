"""The error profile M = (AᵀA)⁺ of a strategy, the spectrum of a workload's Gram, and the one rank rule.

Notation: see README. Every error figure is c·Δ²·tr(G M) or c·Δ²·w M wᵀ. Two things decide whether the
computed number means anything, and both are decided here, the same way for every caller:

* **Rank.** A direction counts only when its singular value (of A) or eigenvalue (of G) exceeds
  max(shape)·eps times the largest one (LAPACK's rule, :func:`numerical_rank`): each object is judged
  against its *own* scale, never against an absolute threshold.
* **Cancellation.** With M = B Bᵀ and G = F Fᵀ, tr(G M) = ‖Fᵀ B‖²_F is a sum of squares: it cannot come
  out negative, and directions of A that the workload does not use (Fᵀb ≈ 0) contribute ≈ 0 however small
  their singular value. The elementwise sum Σ G_ij M_ij is used only on the Cholesky path, where
  n·eps·κ(AᵀA) ≤ 1e-8 is certified and it is accurate; on the QR/SVD paths it once returned a *negative*
  total (−1,032 on 2-way marginals over 4⁴: round-off directions with 1/s² ≈ 10²⁸).

The profile is computed from a QR factorisation of A (or its SVD when A is ill-conditioned or
rank-deficient); a Cholesky of AᵀA squares the condition number and is only a certified fast path.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np
from scipy import linalg, sparse
from scipy.linalg import blas, lapack

from mmopt.dense import sine_spectra

# Above this condition number of A the QR path hands over to the SVD (relative error ≈ κ·2⁻⁵²).
QR_MAX_CONDITION = 1e8
# The Cholesky fast path is taken only when n·eps·κ₁(AᵀA) is below this: a first-order bound on the
# relative error of every query's variance. Past it, squaring κ could matter, and QR/SVD take over.
CHOLESKY_MAX_RELATIVE_ERROR = 1e-8
_EPS = np.finfo(float).eps


def numerical_rank(values: np.ndarray, shape: tuple[int, int]) -> int:
    """How many of ``values`` (descending, ≥ 0) exceed max(shape)·eps·values[0] (LAPACK's rule).

    The one rank rule of mmopt: singular values of a strategy, eigenvalues of a Gram, the mechanisms'
    least squares. Relative to the object's own largest value, so a strategy scaled by 10¹⁰⁰ has the
    same rank as the unscaled one.
    """
    if values.size == 0 or not values[0] > 0:
        return 0
    return int(np.sum(values > max(shape) * _EPS * values[0]))


def power_of_two_scale(A: np.ndarray) -> int:
    """e with max|A|·2⁻ᵉ in [0.5, 1): scaling by 2⁻ᵉ is exact, and keeps AᵀA far from over/underflow."""
    top = float(np.max(np.abs(A)))
    return int(np.frexp(top)[1]) if top > 0 else 0


#: Entries within 2^±SAFE_EXPONENT (~1e±77) are squared as they are — their squares, and sums of 10⁷ of them, stay
#: within float64 — and beyond it rescaled by :func:`power_of_two_scale` first (Toeplitz coefficients, a training
#: strategy's CᵀC), so that a usual strategy keeps its own numbers.
SAFE_EXPONENT = 256


@dataclass(frozen=True, eq=False)
class Profile:
    """The error profile M = (AᵀA)⁺ = B Bᵀ of a strategy, with its null space.

    Attributes
    ----------
    matrix : ndarray (n, n)
        M.
    factor : ndarray (n, r)
        B with M = B Bᵀ: R⁻¹ (QR), C⁻¹ (Cholesky of AᵀA = CᵀC) or V_r S_r⁻¹ (SVD).
    rank : int
        r, the numerical rank of A (:func:`numerical_rank`).
    null_basis : ndarray (n, n − r)
        Orthonormal basis of A's numerical null space.
    method : {"cholesky", "qr", "svd"}
        "cholesky" only when certified accurate (n·eps·κ(AᵀA) ≤ 1e-8).
    """

    matrix: np.ndarray = field(repr=False)
    factor: np.ndarray = field(repr=False)
    rank: int
    null_basis: np.ndarray = field(repr=False)
    method: str

    @property
    def certified(self) -> bool:
        """Whether Σ G_ij M_ij is accurate for every PSD G (the well-conditioned Cholesky path)."""
        return self.method == "cholesky"


def profile_of_matrix(A: np.ndarray) -> Profile:
    """The profile of a finite float matrix A (p×n), by Cholesky (certified), QR or SVD."""
    p, n = A.shape
    if p >= n:
        fast = _cholesky_inverse_factor(A)
        if fast is not None:
            B, anorm = fast
            M = _outer(B)
            # the certificate with κ₁ itself: LAPACK's dpocon estimates ‖X⁻¹‖₁ from below (a cheap early refusal),
            # M = X⁻¹ is formed here anyway, and its column sums give ‖X⁻¹‖₁ (O(n²))
            if n * _EPS * anorm * float(np.max(np.sum(np.abs(M), axis=0))) <= CHOLESKY_MAX_RELATIVE_ERROR:
                return Profile(M, B, n, np.zeros((n, 0)), "cholesky")
        R = linalg.qr(A, mode="r", check_finite=False)[0][:n]
        rcond, info = lapack.dtrcon(R, norm="1", uplo="U", diag="N")
        if info == 0 and rcond * QR_MAX_CONDITION > 1.0:
            # R⁻¹ from the triangular factor of A's QR: as accurate as κ(A) allows (AᵀA would give κ(A)²).
            B, info = lapack.dtrtri(R, lower=0)
            if info == 0:
                return Profile(_outer(B), B, n, np.zeros((n, 0)), "qr")
    _, s, Vt = linalg.svd(A, full_matrices=True, check_finite=False)
    r = numerical_rank(s, A.shape)
    B = Vt[:r].T / s[:r]
    return Profile(_outer(B), B, r, Vt[r:].T.copy(), "svd")


_SCALED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def scaled_profile(strategy) -> tuple[int, np.ndarray, Profile]:
    """(e, A·2⁻ᵉ, its profile) for a Strategy, computed once per Strategy object.

    A Strategy's matrix is read-only, so the O(n³) profile can be shared by evaluate, supports and the
    mechanisms (a Monte-Carlo study asks for it on every call). Weak keys: never keeps a strategy alive.
    """
    cached = _SCALED.get(strategy)
    if cached is None:
        e = power_of_two_scale(strategy.matrix)
        As = np.ldexp(strategy.matrix, -e)
        As.setflags(write=False)
        prof = profile_of_matrix(As)
        for M in (prof.matrix, prof.factor, prof.null_basis):
            M.setflags(write=False)  # shared by every later caller
        cached = _SCALED[strategy] = (e, As, prof)
    return cached


def _outer(B: np.ndarray) -> np.ndarray:
    """B Bᵀ, symmetric to the last bit (one triangle from BLAS syrk, mirrored)."""
    if B.shape[1] == 0:
        return np.zeros((B.shape[0], B.shape[0]))
    M = blas.dsyrk(1.0, B, lower=0)
    return np.triu(M) + np.triu(M, 1).T


def _cholesky_inverse_factor(A: np.ndarray) -> tuple[np.ndarray, float] | None:
    """(C⁻¹ with AᵀA = CᵀC, ‖AᵀA‖₁) when LAPACK's estimate of κ₁ passes the test below, else None
    (:func:`profile_of_matrix` then checks κ₁ itself).

    Squaring the condition number is what makes Cholesky of AᵀA dangerous; for well-conditioned A
    (κ₁(AᵀA) ≤ 1e-8/(n·eps), e.g. ≈ 1e4 at n = 4096: I, H, Y, optimised strategies) the error bound
    n·eps·κ(X) stays below 1e-8 relative and the path is 3–4× cheaper than QR; a sparse A (H, Y, I)
    also gets its Gram in O(nnz) time.
    """
    p, n = A.shape
    if np.count_nonzero(A) < 0.05 * p * n:
        As = sparse.csc_matrix(A)
        X = (As.T @ As).toarray()
    else:
        X = A.T @ A
    anorm = float(np.max(np.sum(np.abs(X), axis=0)))
    C, info = lapack.dpotrf(X, lower=0, clean=1, overwrite_a=1)
    if info != 0:
        return None
    rcond, info = lapack.dpocon(C, anorm, uplo="U")
    if info != 0 or rcond == 0 or n * _EPS / rcond > CHOLESKY_MAX_RELATIVE_ERROR:
        return None
    B, info = lapack.dtrtri(C, lower=0)
    return (B, anorm) if info == 0 else None


# -- the workload side: G = F Fᵀ with the rank rule applied ---------------------------------------------
@dataclass(frozen=True, eq=False)
class Spectrum:
    """Eigen-decomposition of a PSD Gram with round-off eigenvalues cut: G ≈ Q diag(λ) Qᵀ, λ > 0.

    ``factor`` = Q √λ (n×r) is the F of G = F Fᵀ; ``svd_sum`` = Σ √λᵢ, which gives the SVD bound.
    """

    eigenvalues: np.ndarray = field(repr=False)
    basis: np.ndarray = field(repr=False)
    rank: int

    @property
    def factor(self) -> np.ndarray:
        return self.basis * np.sqrt(self.eigenvalues)

    @property
    def svd_sum(self) -> float:
        return float(np.sum(np.sqrt(self.eigenvalues)))


def spectrum(G: np.ndarray) -> Spectrum:
    """Eigen-decomposition of the PSD matrix G with the rank rule (eigenvalues ≤ n·eps·λ_max are zero)."""
    # divide and conquer (dsyevd): the default dsyevr raised "LinAlgError: Internal Error." on Grams with large
    # clusters of equal eigenvalues, e.g. kron(identity_total(35), identity(31)) (scipy#17880; a helper's audit)
    lam, Q = linalg.eigh(G, check_finite=False, driver="evd")
    lam, Q = lam[::-1], Q[:, ::-1]
    r = numerical_rank(np.clip(lam, 0.0, None), G.shape)
    return Spectrum(lam[:r].copy(), Q[:, :r].copy(), r)


_SPECTRA: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def workload_spectrum(workload) -> Spectrum:
    """:func:`spectrum` of ``workload.mean_gram``, computed once per Workload object (O(n³); prefix sums and all
    ranges in closed form, :mod:`mmopt.dense.sine_spectra`).

    When the rank rule cuts some of G's eigenvalues and the rows W are stored, the spectrum is taken from W's SVD
    instead (:func:`row_spectrum`): G = WᵀW squares W's dynamic range, so a direction whose singular value is
    below √(n·eps) of the largest was cut from G although W resolves it — a 10⁷ : 1 stack of the total and the
    identity lost n − 1 of its directions, and evaluate reported 1.0·10¹⁴ for a total of 8.0·10¹⁴.
    """
    cached = _SPECTRA.get(workload)
    if cached is None and getattr(workload, "family", None) in sine_spectra.FAMILIES:
        # prefix sums and all ranges: sine bases in closed form, every eigenvalue to a few ulps relative (eigh
        # resolves eps·λ_max only) in O(n²) instead of O(n³)
        lam, Q = sine_spectra.sine_spectrum(workload.family, workload.domain_size)
        lam = lam / workload.n_queries
        r = numerical_rank(lam, Q.shape)
        cached = _SPECTRA[workload] = Spectrum(lam[:r], Q[:, :r], r)
    if cached is None:
        cached = spectrum(workload.mean_gram)
        W = getattr(workload, "matrix", None)
        # eigh resolves λ to eps·λ_max: a cut, or a smallest λ within 10⁸ of that, is better read from W itself
        poor = cached.rank < workload.domain_size or cached.eigenvalues[-1] < 1e8 * _EPS * cached.eigenvalues[0]
        if poor and W is not None and not sparse.issparse(W):
            cached = row_spectrum(np.asarray(W, dtype=float), workload.n_queries)
        _SPECTRA[workload] = cached
    return cached


def row_spectrum(W: np.ndarray, m: int) -> Spectrum:
    """The spectrum of G/m = WᵀW/m from the SVD of W, the rank rule applied to W's singular values (accurate to
    eps·σ_max, where G's eigenvalues are accurate to eps·σ_max² only)."""
    _, s, Vt = linalg.svd(W, full_matrices=False, check_finite=False)
    r = numerical_rank(s, W.shape)
    return Spectrum((s[:r] / np.sqrt(m)) ** 2, Vt[:r].T.copy(), r)


def trace_with_profile(G: np.ndarray, prof: Profile, spec: Spectrum | None) -> float:
    """tr(G M), never negative: Σ G_ij M_ij on the certified path, ‖Fᵀ B‖²_F otherwise (``spec`` needed)."""
    if prof.certified:
        return float(np.sum(G * prof.matrix))
    if spec is None:
        raise ValueError("trace_with_profile needs the Gram's spectrum on the QR/SVD paths.")
    return float(np.sum((spec.factor.T @ prof.factor) ** 2))


def effective_profile(prof: Profile, spec: Spectrum | None) -> np.ndarray:
    """M restricted to the workload's row space, P M P with P = Q Qᵀ: what every query w = wP sees.

    Equal to M in exact arithmetic for every query of the workload. On the QR/SVD paths it removes the
    huge entries (1/s² of round-off directions of A) that per-query sums would otherwise cancel.
    """
    if _unprojected(prof, spec):
        return prof.matrix
    return _outer(effective_factor(prof, spec))


def effective_factor(prof: Profile, spec: Spectrum | None) -> np.ndarray:
    """F with :func:`effective_profile` = F Fᵀ: each query's variance is then the sum of squares ‖w F‖², where
    w M wᵀ with M's entries formed first cancels (a 10⁹-weighted total beside the identity: 5.6·10¹⁹× off)."""
    if _unprojected(prof, spec):
        return prof.factor
    Q = spec.basis
    return Q @ (Q.T @ prof.factor)


def _unprojected(prof: Profile, spec: Spectrum | None) -> bool:
    """The profile needs no projection on the workload's row space: certified, no spectrum, or G of full rank."""
    return prof.certified or spec is None or spec.rank == prof.matrix.shape[0]
