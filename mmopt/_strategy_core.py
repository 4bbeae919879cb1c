"""Strategies A (p×n): the queries the matrix mechanism actually measures, and the classic baselines.

Notation: see README. A :class:`Strategy` holds A itself (sensitivity depends on A, not only on
X = AᵀA). Baselines: identity I, hierarchical H_b (any n, any branching b), Haar wavelet Y (§6), the
workload itself, and the canonical square strategy of a Gram matrix (Theorem 4.13).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from mmopt import _validation as v
from mmopt._workload_core import Workload

NORMS = ("l1", "l2")
_TINY = np.finfo(float).tiny


def _exponent(A: np.ndarray) -> tuple[float, int]:
    """(max|A|, e) with max|A|·2⁻ᵉ in [0.5, 1): scaling by 2⁻ᵉ is exact (a power of two)."""
    top = float(max(A.max(), -A.min()))
    return top, int(np.frexp(top)[1])


def max_column_norm(A: np.ndarray, norm: str) -> float:
    """Largest column L1 or L2 norm of A (p×n), without overflow or underflow in the intermediate sums.

    When max|A|²·p nears either end of float64's range, A is first scaled by 2⁻ᵉ (exact) so that its
    largest entry is in [0.5, 1); the norm is scaled back by 2ᵉ. Squaring 1e-170 entries directly gives 0
    and squaring 1e200 entries gives inf; this gives 1e-170·‖·‖ and 1e200·‖·‖. Returns inf only when
    the norm itself exceeds float64.
    """
    top, e = _exponent(A)
    p = A.shape[0]
    safe = -450 < e and p * top * top < 2.0**1000
    As = A if safe else np.ldexp(A, -e)
    s = np.max(np.sum(np.abs(As), axis=0)) if norm == "l1" else np.sqrt(np.max(np.sum(As * As, axis=0)))
    with np.errstate(over="ignore"):
        return float(s if safe else np.ldexp(s, e))


def _psd_eigh(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """eigh of a PSD matrix with round-off eigenvalues (≤ n·eps·λ_max) set to exact zeros.

    Eigenvalues of X are accurate only to ~n·eps·λ_max; below that their square roots (~1e-8) would
    pose as real singular values of a factor A, and the error computed from A has come out *below*
    the proven lower bound.
    """
    lam, V = np.linalg.eigh(X)
    lam[lam <= X.shape[0] * np.finfo(float).eps * max(lam[-1], 0.0)] = 0.0
    return lam, V


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
        if A is original or A.base is not None:
            A = A.copy()  # never freeze the caller's own array (or a view of it, e.g. a DataFrame's block)
        top, _ = _exponent(A)
        if top == 0:
            raise ValueError("The 'matrix' parameter of Strategy must have a non-zero entry. Got all zeros.")
        if top * A.shape[0] > 2.0**1020 and not math.isfinite(max_column_norm(A, "l1")):
            raise ValueError(
                f"The 'matrix' parameter of Strategy has a column whose L1 norm exceeds float64 (max |A| = "
                f"{top:.3g}), so its sensitivity is not representable. Rescale A: A and cA have the same error."
            )
        A.setflags(write=False)
        object.__setattr__(self, "matrix", A)

    @classmethod
    def from_gram(cls, gram, *, name: str = "strategy") -> Strategy:
        """The canonical square strategy A = X^{1/2} with AᵀA = X (Theorem 4.13, Q = I).

        Any other strategy with the same Gram has the same error profile; only its sensitivity
        differs (see :func:`mmopt.min_sensitivity`).
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
            return A.T @ A, 0
        As = np.ldexp(A, -e)
        return As.T @ As, e

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
            top = float(np.max(np.diagonal(X)))  # a Gram's largest entry is on its diagonal
            if not math.isfinite(top) or top < _TINY:
                big = not math.isfinite(top)
                kind, what = (OverflowError, "exceeds") if big else (FloatingPointError, "underflows")
                raise kind(f"Strategy '{self.name}': AᵀA {what} float64 (max |A| = {_exponent(self.matrix)[0]:.3g}). "
                           "Rescale A (A and cA have the same error), or use Strategy.scaled_gram().")
        else:
            X = Xs
        X.setflags(write=False)
        return X

    def sensitivity(self, norm: str = "l1") -> float:
        """Largest column norm of A: L1 for ε-DP (Prop. 1), L2 for (ε,δ)-DP (Thm 5.22).

        Computed at a power-of-two scale (:func:`max_column_norm`): exact to rounding for any finite A.
        """
        v.check_choice(norm, name="norm", caller="Strategy.sensitivity", choices=NORMS)
        return max_column_norm(self.matrix, norm)

    def __repr__(self) -> str:
        p, n = self.matrix.shape
        return f"Strategy(name={self.name!r}, shape=({p}, {n}))"


def identity(n: int) -> Strategy:
    """Iₙ: measure every cell once (Δ₁ = 1)."""
    n = v.check_int(n, name="n", caller="identity")
    v.check_allocation(n * n, what=f"the {n}×{n} identity strategy", caller="identity")
    return Strategy(np.eye(n), "identity")


def hierarchical(n: int, branching: int = 2) -> Strategy:
    """The hierarchical strategy H_b (Hay et al.; §6 of the paper) for any n.

    The root counts all cells; each node's interval is split into ``branching`` near-equal
    children (sizes differ by at most one) down to single cells. Rows are listed breadth-first,
    root first, so ``hierarchical(4)`` is H₄ of Fig. 1. For n = bᵏ, Δ₁ = k + 1.

    Examples
    --------
    >>> hierarchical(4).matrix.astype(int).tolist()[:3]
    [[1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 1, 1]]
    >>> hierarchical(9, branching=3).sensitivity()
    3.0
    """
    caller = "hierarchical"
    n = v.check_int(n, name="n", caller=caller)
    b = v.check_int(branching, name="branching", caller=caller, low=2)
    what = f"the hierarchical strategy H{b} on n={n}"
    v.check_allocation(n * n, what=what + " (at least n×n)", caller=caller)  # p >= n leaves
    p = _tree_size(n, b)
    v.check_allocation(p * n, what=f"{what} ({p}×{n})", caller=caller)
    A = np.zeros((p, n))
    row, level = 0, [(0, n)]
    while level:
        nxt = []
        for lo, hi in level:
            A[row, lo:hi] = 1.0
            row += 1
            nxt.extend(_split(lo, hi, b))
        level = nxt
    return Strategy(A, "H" + str(b))


def _split(lo: int, hi: int, b: int) -> list[tuple[int, int]]:
    """The children of [lo, hi): min(b, size) near-equal parts (sizes differ by <= 1); none for a leaf."""
    if hi - lo <= 1:
        return []
    k = min(b, hi - lo)
    cuts = [lo + (j * (hi - lo)) // k for j in range(k + 1)]
    return list(zip(cuts[:-1], cuts[1:], strict=True))


def _tree_size(n: int, b: int) -> int:
    """Number of nodes of the H_b tree on n cells, counted by interval size (sizes, not intervals, per level)."""
    p, sizes = 0, {n: 1}
    while sizes:
        p += sum(sizes.values())
        nxt: dict[int, int] = {}
        for size, count in sizes.items():
            for lo, hi in _split(0, size, b):
                nxt[hi - lo] = nxt.get(hi - lo, 0) + count
        sizes = nxt
    return p


def wavelet(n: int) -> Strategy:
    """The Haar wavelet strategy Yₙ (Privelet, §6; Appendix E), n a power of two.

    Row 0 is 1ᵀ; then, breadth-first over the dyadic tree, each node has +1 on its left half
    and −1 on its right half (unnormalised, as in the paper), so Δ₁ = log₂n + 1.

    Examples
    --------
    >>> wavelet(4).matrix.astype(int).tolist()
    [[1, 1, 1, 1], [1, 1, -1, -1], [1, -1, 0, 0], [0, 0, 1, -1]]
    """
    n = v.check_int(n, name="n", caller="wavelet")
    if n & (n - 1):
        raise ValueError(
            f"wavelet(n={n}) requires n to be a power of 2. Got n={n}. Pad the domain to "
            f"n={1 << n.bit_length()} with empty cells, or use hierarchical(n), which takes any n."
        )
    v.check_allocation(n * n, what=f"the {n}×{n} wavelet strategy", caller="wavelet")
    A = np.zeros((n, n))
    A[0] = 1.0
    row, size = 1, n
    while size > 1:
        for start in range(0, n, size):
            A[row, start:start + size // 2] = 1.0
            A[row, start + size // 2:start + size] = -1.0
            row += 1
        size //= 2
    return Strategy(A, "wavelet")


def from_workload(workload) -> Strategy:
    """The workload itself as strategy, A = W (needs the explicit W)."""


    if not isinstance(workload, Workload):
        raise TypeError(f"The 'workload' parameter of from_workload must be a Workload. Got {type(workload).__name__}.")
    return Strategy(workload.explicit_matrix(), "workload")


def square_root(strategy: Strategy, *, name: str | None = None) -> Strategy:
    """The canonical square strategy D^{1/2}Q profile-equivalent to ``strategy`` (Theorem 4.13).

    Its rows are √λᵢ times the eigenvectors of X = AᵀA; for H and Y this is the "decomposition"
    of §6.1 whose sensitivity is below log₂n + 1.
    """
    if not isinstance(strategy, Strategy):
        raise TypeError(f"The 'strategy' parameter of square_root must be a Strategy. Got {type(strategy).__name__}.")
    Xs, e = strategy.scaled_gram()  # X = 4ᵉ·X̂, so X^{1/2} = 2ᵉ·X̂^{1/2}: no over/underflow at any scale
    lam, V = _psd_eigh(Xs)
    A = (V * np.sqrt(lam)).T[::-1]
    return Strategy(np.ldexp(A, e) if e else A, name or f"sqrt({strategy.name})")


def singular_value_bound(workload) -> Strategy:
    """Theorem 5.25's closed-form strategy, in its canonical symmetric form A* = G^{1/4}.

    Theorem 5.25 gives A = diag(√σᵢ(W)) P_W, optimal for ‖A‖_F²·‖W A⁺‖_F², with G = WᵀW =
    P_Wᵀ diag(σᵢ²) P_W. When W has repeated singular values P_W is not unique, and the rows of that A
    (hence its L1 sensitivity and every error figure) would depend on the eigensolver and its thread
    count. Both factors of the objective depend on A only through AᵀA (‖A‖_F² = tr AᵀA and
    ‖W A⁺‖_F² = tr(G (AᵀA)⁺)), so every A with the same Gram G^{1/2} is equally optimal; this returns the
    unique symmetric one, the matrix function

        A* = G^{1/4} = P_Wᵀ diag(√σᵢ) P_W = Σ_{σᵢ > 0} √σᵢ vᵢ vᵢᵀ,

    which is P_Wᵀ times Theorem 5.25's A and does not depend on the choice of basis inside an
    eigenspace. Directions W does not use (σᵢ = 0, by the rank rule) are left out, so every row lies in
    the row space of W and A* still supports W. Its error is within a factor n of optimal (Thm 5.26).

    Examples
    --------
    >>> from mmopt import workload, evaluate
    >>> A = singular_value_bound(workload.identity(3))
    >>> np.allclose(A.gram, np.eye(3))
    True
    >>> bool(np.allclose(singular_value_bound(workload.total(2)).matrix, 2**-0.75))  # G = J: G^{1/4} = J/2^{3/4}
    True
    """
    if not isinstance(workload, Workload):
        raise TypeError("The 'workload' parameter of singular_value_bound must be a Workload. "
                        f"Got {type(workload).__name__}.")
    try:
        G = workload.gram  # σᵢ(W)² exactly, when G fits in float64
    except OverflowError:
        G = workload.mean_gram  # same strategy up to scale, which error ignores
    lam, V = _psd_eigh(G)
    keep = lam > 0
    Vr = V[:, keep]
    A = (Vr * np.sqrt(np.sqrt(lam[keep]))) @ Vr.T
    return Strategy((A + A.T) / 2, "svd_bound")  # exactly symmetric, as G^{1/4} is
