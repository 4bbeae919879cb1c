"""Strategies A (p×n): the queries the matrix mechanism actually measures, and their sensitivity norms.

Notation: see README. A :class:`Strategy` holds A itself (sensitivity depends on A, not only on
X = AᵀA); column norms are taken at a power-of-two scale so they are exact to rounding for any finite A. The
classic strategies (I, H_b, the wavelet, Theorem 5.25's) are in :mod:`mmopt.dense._classic`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from scipy import sparse

from mmopt._base import validation as v

NORMS = ("l1", "l2")
_TINY = np.finfo(float).tiny
_EPS = np.finfo(float).eps
_BLOCK_ENTRIES = 2**22  # column norms are taken over blocks of about this many entries (32 MB of float64)
_LOG10_2 = math.log10(2.0)


def _gram_of(A: np.ndarray) -> np.ndarray:
    """AᵀA; through a sparse product when A is mostly zeros (the identity factor of a marginal on 10⁴ values: a
    dense product is 2·10¹² flops, the sparse one 10⁴). The sum over the non-zero products is the same sum."""
    p, n = A.shape
    if n >= 512 and np.count_nonzero(A) <= 0.01 * A.size:
        S = sparse.csr_matrix(A)
        return np.asarray((S.T @ S).toarray())
    return A.T @ A


def check_gram_range(X: np.ndarray, who: str, why: str, remedy: str) -> None:
    """OverflowError (FloatingPointError) when a Gram X = AᵀA exceeds (falls below) float64's normal range, judged
    by its largest entry, which is on its diagonal: an all-zero X would say "measures nothing"."""
    top = float(np.max(np.diagonal(X)))
    if not math.isfinite(top) or top < _TINY:
        kind, what = (OverflowError, "exceeds") if not math.isfinite(top) else (FloatingPointError, "underflows")
        raise kind(f"{who}: AᵀA {what} float64 ({why}). {remedy}")


def _exponent(A: np.ndarray) -> tuple[float, int]:
    """(max|A|, e) with max|A|·2⁻ᵉ in [0.5, 1): scaling by 2⁻ᵉ is exact (a power of two)."""
    top = float(max(A.max(), -A.min()))
    return top, int(np.frexp(top)[1])


# -- sensitivity: the one scale-safe computation of Δ, for dense and implicit strategies -----------------
#
# A sensitivity is held as a pair (s, k) with Δ (L1) or Δ² (L2) = s·2ᵏ. Each factor's column norms are
# taken of A·2⁻ᵉ, e from frexp(max|A|) (exact: a power of two), so that the column holding max|A| has
# s ≥ 1/2 (L1) or ≥ 1/4 (L2) and no sum that can be the maximum over- or underflows; products and sums
# over the factors and terms of an implicit strategy combine the exponents as integers. Only the final
# conversion to a float can fail, and then it raises (ValueError) instead of returning 0, a subnormal
# with lost digits, inf or nan: :func:`norm_from_parts`.

def column_norm_parts(A: np.ndarray, norm: str) -> tuple[np.ndarray, int]:
    """(c, k): the column L1 norms (``"l1"``) or *squared* L2 norms (``"l2"``) of A are c·2ᵏ.

    c is computed from A·2⁻ᵉ (e from frexp(max|A|), an exact scaling), whose entries are at most 1 in
    absolute value: max(c) lies in [1/2, p] (L1) or [1/4, p] (L2) for a non-zero A, and k = e or 2e. Columns
    far below the largest may lose digits to underflow (below 2⁻¹⁰⁷⁴ of max(c) each), never the largest.
    Works over blocks of columns, so the only temporaries are about 2²² entries. A zero A gives (0, 0).
    """
    p, n = A.shape
    top, e = _exponent(A)
    out = np.zeros(n)
    if top == 0:
        return out, 0
    step = max(1, _BLOCK_ENTRIES // max(p, 1))
    for j in range(0, n, step):
        B = A[:, j:j + step] if e == 0 else np.ldexp(A[:, j:j + step], -e)
        out[j:j + step] = np.sum(np.abs(B), axis=0) if norm == "l1" else np.einsum("ij,ij->j", B, B)
    return out, e if norm == "l1" else 2 * e


def norm_from_parts(s: float, k: int, norm: str, *, what: str = "the strategy", caller: str = "sensitivity",
                    round_up: bool = False) -> float:
    """Δ from its parts: Δ = s·2ᵏ (``"l1"``) or Δ = (s·2ᵏ)^{1/2} (``"l2"``), as a *normal* float64.

    ``round_up``: return a float ≥ the exact value of that formula (the square root rounded upwards);
    otherwise the correctly rounded-to-nearest result (up to one rounding of the square root). The scaling
    by 2ᵏ is exact for a normal result. Raises ValueError, naming ``what`` and ``caller``, when Δ is zero,
    below float64's smallest normal number 2⁻¹⁰²² ≈ 2.2e-308 (it would round to 0 or lose digits as a
    subnormal) or above its largest ≈ 1.8e308: never returns 0, a subnormal, inf or nan for a non-zero A.
    """
    s, k = float(s), int(k)
    if not (math.isfinite(s) and s > 0.0):
        raise ValueError(f"{caller}: the {norm} sensitivity of {what} came out as {s!r}·2^{k}, which cannot "
                         "be right for a non-zero strategy (every column norm is finite and one is positive).")
    if norm == "l2":
        if k % 2:
            s, k = 2.0 * s, k - 1  # exact
        root = math.sqrt(s)
        s, k = (math.nextafter(root, math.inf) if round_up else root), k // 2
    m, e = math.frexp(s)  # s = m·2ᵉ, m in [0.5, 1)
    e += k
    if e > 1024 or e < -1021:  # Δ ≥ 2¹⁰²⁴ (beyond float64) or Δ < 2⁻¹⁰²² (not a normal float64)
        log10 = math.log10(m) + e * _LOG10_2
        side = ("above its largest number, about 1.8e308" if e > 1024
                else "below its smallest normal number, about 2.2e-308, so it would come out as 0.0 or as a "
                     "subnormal with lost digits")
        raise ValueError(
            f"{caller}: the {norm} sensitivity of {what} (about 1e{log10:.1f}) is outside float64's normal range: "
            f"{side}. The strategy's scale is outside float64's range: rescale it (multiply its entries, or a "
            "term's weight, by a power of ten; A and cA have the same error, and noise is calibrated to the "
            "rescaled A).")
    return math.ldexp(m, e)


def max_column_norm(A: np.ndarray, norm: str, *, what: str = "the matrix", caller: str = "max_column_norm") -> float:
    """Largest column L1 or L2 norm of A (p×n), exact to rounding at any scale (:func:`column_norm_parts`).

    Squaring 1e-170 entries directly gives 0 and squaring 1e200 entries gives inf; this gives 1e-170·‖·‖ and
    1e200·‖·‖. Raises ValueError (:func:`norm_from_parts`) when the norm itself is not a normal float64.
    """
    v.check_choice(norm, name="norm", caller=caller, choices=("l1", "l2"))  # 'linf' was read as a squared L2
    if not isinstance(A, np.ndarray) or A.dtype.kind != "f" or A.ndim != 2 or A.size == 0:  # a list
        # (AttributeError), booleans (numpy's "boolean negative" TypeError), int8 (−(−128) overflows), 1-D or
        # empty: checked, as float64; the library's own float matrices skip it
        A = v.check_matrix(A, name="A", caller=caller)
    c, k = column_norm_parts(A, norm)
    top = float(np.max(c))
    if not math.isfinite(top):  # NaN or inf entries: the input's fault, named as such
        v.check_matrix(A, name="A", caller=caller)
    return norm_from_parts(top, k, norm, what=what, caller=caller)


def max_column_norm_upper(A: np.ndarray, norm: str, *, what: str = "the strategy",
                          caller: str = "max_column_norm_upper") -> float:
    """A proven upper bound on the largest column L1/L2 norm of A, for a privacy proof (OpenDP's d_in).

    From :func:`column_norm_parts`: A·2⁻ᵉ is exact; each sum of p non-negative terms, in any order, is within
    γ_{p−1}·s of its true value s (γ_k = k·u/(1 − k·u), u = 2⁻⁵³); each square adds ≤ u relative, plus at
    most 2⁻¹⁰⁷⁵ absolute if it underflows (≤ p·2⁻¹⁰⁷³ relative to the largest column, whose sum is ≥ 1/4).
    Inflating the computed maximum by (1 + 4(p + 2)u) covers all of this and the rounding of the inflation
    itself; the square root is rounded upwards and the scaling by 2ᵏ is exact; a final ``nextafter`` adds
    one more ulp of margin. Raises ValueError when the bound is not a normal float64.
    """
    c, k = column_norm_parts(A, norm)
    s = float(np.max(c)) * (1.0 + 4.0 * (A.shape[0] + 2) * _EPS / 2)
    d = norm_from_parts(math.nextafter(s, math.inf), k, norm, what=what, caller=caller, round_up=True)
    d = math.nextafter(d, math.inf)
    if not math.isfinite(d):
        raise ValueError(f"{caller}: the {norm} sensitivity of {what} is within one ulp of float64's "
                         "largest number, so no upper bound is representable. Rescale the strategy.")
    return d


def _psd_eigh(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """eigh of a PSD matrix with round-off eigenvalues (≤ n·eps·λ_max) set to exact zeros.

    Eigenvalues of X are accurate only to ~n·eps·λ_max; below that their square roots (~1e-8) would
    pose as real singular values of a factor A, and the error computed from A has come out *below*
    the proven lower bound.
    """
    lam, V = np.linalg.eigh(X)
    lam[lam <= X.shape[0] * np.finfo(float).eps * max(lam[-1], 0.0)] = 0.0
    return lam, V


def handed_over(A: np.ndarray) -> np.ndarray:
    """``A`` (built by mmopt, owning its memory) made read-only, so that :class:`Strategy` keeps it without a copy:
    the copy doubled the peak of the closed forms (identity(14,100) passed a one-array check and raised
    MemoryError; a helper's probe)."""
    A.flags.writeable = False
    return A


def _handed_over(A: np.ndarray) -> bool:
    return A.base is None and not A.flags.writeable  # nobody holds a writable view of it


@dataclass(frozen=True, eq=False)
class Strategy:
    """A strategy matrix A (p×n).

    Attributes
    ----------
    matrix : ndarray of shape (p, n)
    name : str
        A short label for tables ("H2", "wavelet", "identity", ...).

    Examples
    --------
    >>> from mmopt.dense._classic import hierarchical
    >>> H = hierarchical(4)
    >>> H.matrix.shape, H.sensitivity("l1"), round(H.sensitivity("l2") ** 2, 12)
    ((7, 4), 3.0, 3.0)
    """

    matrix: np.ndarray = field(repr=False)
    name: str = "strategy"

    def __post_init__(self) -> None:
        original = self.matrix
        A = v.check_matrix(original, name="matrix", caller="Strategy")
        v.check_str(self.name, name="name", caller="Strategy")
        if (A is original or A.base is not None) and not _handed_over(A):
            A = A.copy()  # never freeze the caller's own array (or a view of it, e.g. a DataFrame's block)
        top, _ = _exponent(A)
        if top == 0:
            raise ValueError("The 'matrix' parameter of Strategy must have a non-zero entry. Got all zeros.")
        if top * A.shape[0] > 2.0**1020 and _l1_overflows(A):
            raise ValueError(
                f"The 'matrix' parameter of Strategy has a column whose L1 norm exceeds float64 (max |A| = "
                f"{top:.3g}), so its sensitivity is not representable. Rescale A: A and cA have the same error."
            )
        A.setflags(write=False)
        object.__setattr__(self, "matrix", A)

    def __getattr__(self, name: str):
        # only reached for a missing attribute: .shape is an implicit strategy's (its domain's attribute sizes),
        # and the multidim tutorial's A.shape on a 1-D result was a bare AttributeError
        if name == "shape":
            raise AttributeError(f"A Strategy has no 'shape': its matrix is A.matrix.shape = {self.matrix.shape} "
                                 f"and its domain A.domain_size = {self.matrix.shape[1]} cells (an implicit "
                                 "strategy's .shape is its domain's attribute sizes).")
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    @classmethod
    def from_gram(cls, gram, *, name: str = "strategy") -> Strategy:
        """The canonical square strategy A = X^{1/2} with AᵀA = X (Theorem 4.13, Q = I).

        Any other strategy with the same Gram has the same error profile; only its sensitivity
        differs (see :func:`mmopt.search.min_sensitivity`).
        """
        X = v.check_gram(gram, caller="Strategy.from_gram")
        lam, V = _psd_eigh(X)
        return cls((V * np.sqrt(lam)) @ V.T, name)

    @property
    def domain_size(self) -> int:
        """n, the number of columns of A."""
        return self.matrix.shape[1]

    def scaled_gram(self) -> tuple[np.ndarray, int]:
        """(X̂, e) with X = AᵀA = 4ᵉ·X̂, X̂ computed from A·2⁻ᵉ: never over- or underflows (e = 0 when A's
        scale is harmless). Error profiles and square roots are scale-covariant, so they can use X̂."""
        A = self.matrix
        n = A.shape[1]
        v.check_allocation(n * n, what=f"the {n}×{n} Gram matrix AᵀA of '{self.name}'", caller="Strategy.gram")
        top, e = _exponent(A)
        if -450 < e and A.shape[0] * top * top < 2.0**1000:
            return _gram_of(A), 0
        As = np.ldexp(A, -e)
        return _gram_of(As), e

    @cached_property
    def gram(self) -> np.ndarray:
        """X = AᵀA (read-only).

        Raises OverflowError (FloatingPointError) when X itself exceeds (falls below) float64's normal
        range, e.g. for A = 10²⁰⁰·I (10⁻¹⁷⁰·I): rescale A, which changes no error figure, or use
        :meth:`scaled_gram`.
        """
        Xs, e = self.scaled_gram()
        if e:
            with np.errstate(over="ignore", under="ignore"):
                X = np.ldexp(Xs, 2 * e)
            check_gram_range(X, f"Strategy '{self.name}'", f"max |A| = {_exponent(self.matrix)[0]:.3g}",
                             "Rescale A (A and cA have the same error), or use Strategy.scaled_gram().")
        else:
            X = Xs
        X.setflags(write=False)
        return X

    def sensitivity(self, norm: str = "l1") -> float:
        """Largest column norm of A: L1 for ε-DP (Prop. 1), L2 for (ε,δ)-DP (Thm 5.22).

        Computed at a power-of-two scale (:func:`max_column_norm`): exact to rounding for any finite A, and
        never 0, inf or nan. An L2 sensitivity below float64's smallest normal number (entries below about
        1e-308) raises ValueError: rescale A.
        """
        v.check_choice(norm, name="norm", caller="Strategy.sensitivity", choices=NORMS)
        return max_column_norm(self.matrix, norm, what=f"strategy '{self.name}'", caller="Strategy.sensitivity")

    def __repr__(self) -> str:
        p, n = self.matrix.shape
        return f"Strategy(name={self.name!r}, shape=({p}, {n}))"


def _l1_overflows(A: np.ndarray) -> bool:
    """Whether the largest column L1 norm of A exceeds float64."""
    c, k = column_norm_parts(A, "l1")
    return math.frexp(float(np.max(c)))[1] + k > 1024
