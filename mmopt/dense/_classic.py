"""The classic strategies (§6 and Theorem 4.13/5.25): identity I, hierarchical H_b (any n, any branching b), the
Haar wavelet Y, the workload itself, the square root of a strategy, and Theorem 5.25's svd_strategy.

Notation: see README. The :class:`~mmopt.dense._strategy_core.Strategy` type and its norms are in
:mod:`mmopt.dense._strategy_core`; :mod:`mmopt.strategy` re-exports both.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from mmopt._base import validation as v
from mmopt.dense._strategy_core import Strategy, _psd_eigh, handed_over
from mmopt.dense._workload_core import Workload
from mmopt.dense._workload_type import not_a_workload
from mmopt.dense.profile import numerical_rank


def identity(n: int) -> Strategy:
    """Iₙ: measure every cell once (Δ₁ = 1)."""
    n = v.check_int(n, name="n", caller="identity")
    v.check_allocation(n * n, what=f"the {n}×{n} identity strategy", caller="identity")
    return Strategy(handed_over(np.eye(n)), "identity")  # kept, not copied: one n×n array at the peak


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
    return Strategy(handed_over(A), "H" + str(b))


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
    return Strategy(handed_over(A), "wavelet")


def from_workload(workload) -> Strategy:
    """The workload itself as strategy, A = W (needs the explicit W)."""


    if not isinstance(workload, Workload):
        raise not_a_workload(workload, name="workload", caller="from_workload")
    return Strategy(workload.explicit_matrix(), "workload")


def square_root(strategy: Strategy, *, name: str | None = None) -> Strategy:
    """A square strategy D^{1/2}Q profile-equivalent to ``strategy`` (Theorem 4.13).

    Its rows are √λᵢ times the eigenvectors of X = AᵀA, as the eigensolver returns them. Within a repeated
    eigenvalue that basis is any rotation (it may differ between LAPACK builds), and the rows' sensitivity with
    it: for H₈ and Y₁₆ it is 4.45 and 5.20, above the strategies' own 4 and 5. The §6.1 decompositions of H and
    Y, in the Haar basis, with sensitivity below log₂n + 1, are :func:`haar_decomposition`.
    """
    if not isinstance(strategy, Strategy):
        raise TypeError(f"The 'strategy' parameter of square_root must be a Strategy. Got {type(strategy).__name__}.")
    Xs, e = strategy.scaled_gram()  # X = 4ᵉ·X̂, so X^{1/2} = 2ᵉ·X̂^{1/2}: no over/underflow at any scale
    lam, V = _psd_eigh(Xs)
    A = (V * np.sqrt(lam)).T[::-1]
    kept = int(np.count_nonzero(lam))
    if kept < Xs.shape[0]:
        # X's rank rule cut a direction: eigh resolves λ only to n·eps·λ_max, and A's own SVD resolves σ = √λ to
        # eps·σ_max — diag(1, 1e-8) lost its second row, and the root no longer supported what A supports
        As = np.ldexp(strategy.matrix, -e)
        _, s, Vt = np.linalg.svd(As, full_matrices=False)
        r = numerical_rank(s, As.shape)
        if r > kept:
            A = np.zeros_like(Xs)
            A[:r] = s[:r, None] * Vt[:r]
    return Strategy(np.ldexp(A, e) if e else A, name or f"sqrt({strategy.name})")


def haar_decomposition(n: int, kind: str = "hierarchical") -> Strategy:
    """The §6.1 decomposition D^{1/2}Q of H_n (``kind="hierarchical"``) or Y_n (``"wavelet"``) in the Haar basis.

    Table 1 (Theorem F.45): 1ₙ and the Haar vectors h (±1 on the halves of a dyadic block of 2ʲ cells) are
    eigenvectors of HᵀH with eigenvalues 2n − 1 and 2ʲ − 1, and of YᵀY with n and 2ʲ. The rows are √λ times the
    normalised vectors, so the strategy is square and profile-equivalent to H_n or Y_n, with

        Δ₁ = √(2 − 1/n) + Σ_{j=1}^{k} √(1 − 2^{−j}) < k + 1      (H, k = log₂n; Fig. 4(a): 2.896 at n = 4)
        Δ₁ = log₂n − 1 + √2                                     (Y, n ≥ 2; Fig. 4(b): 2.414 at n = 4)

    For Y the eigenvalue n's eigenspace, spanned by 1ₙ and the top Haar vector, takes the basis [1_{n/2}, 0],
    [0, 1_{n/2}] instead (the paper's modification; unmodified Δ₁ is k + 1). Neither is the least sensitive
    square strategy of its profile (Program 5.3 finds lower ones), only the paper's.

    Examples
    --------
    >>> round(haar_decomposition(4).sensitivity(), 4), round(haar_decomposition(4, "wavelet").sensitivity(), 4)
    (2.896, 2.4142)
    >>> np.round(haar_decomposition(4, "wavelet").matrix ** 2, 12).tolist()[:2]
    [[2.0, 2.0, 0.0, 0.0], [0.0, 0.0, 2.0, 2.0]]
    """
    caller = "haar_decomposition"
    n = v.check_int(n, name="n", caller=caller)
    kind = v.check_choice(kind, name="kind", caller=caller, choices=("hierarchical", "wavelet"))
    if n & (n - 1):
        raise ValueError(f"The 'n' parameter of {caller} must be a power of 2 (the Haar basis). Got {n}.")
    Q = wavelet(n).matrix  # 1ᵀ, then the Haar vectors breadth-first
    sizes = np.count_nonzero(Q, axis=1).astype(float)  # n for 1ᵀ, 2ʲ for a Haar vector of block 2ʲ
    lam = sizes.copy()
    if kind == "hierarchical":
        lam = sizes - 1.0
        lam[0] = 2.0 * n - 1.0
    A = Q * np.sqrt(lam / sizes)[:, None]  # √λ × the normalised vector
    if kind == "wavelet" and n >= 2:  # rows 0 and 1 share eigenvalue n: √n × [1_{n/2}, 0]/√(n/2), and its twin
        A[0] = np.where(np.arange(n) < n // 2, math.sqrt(2.0), 0.0)
        A[1] = math.sqrt(2.0) - A[0]
    return Strategy(A, ("H" if kind == "hierarchical" else "Y") + "'")


def svd_strategy(workload) -> Strategy:
    """Theorem 5.25's closed-form strategy, in its canonical symmetric form A* = G^{1/4}.

    A strategy, not a bound: the SVD *lower bound* on every strategy's error is :func:`mmopt.svd_bound`.
    (Its old name ``singular_value_bound`` still works, with a deprecation warning.)

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
    >>> A = svd_strategy(workload.identity(3))
    >>> np.allclose(A.gram, np.eye(3))
    True
    >>> bool(np.allclose(svd_strategy(workload.total(2)).matrix, 2**-0.75))  # G = J: G^{1/4} = J/2^{3/4}
    True
    """
    if not isinstance(workload, Workload):
        raise not_a_workload(workload, name="workload", caller="svd_strategy")
    if workload.matrix is not None:
        # σᵢ from W's own SVD: accurate to eps·σ₁, where G's eigenvalues σᵢ² are accurate to eps·σ₁² only, so a
        # direction with σᵢ ≤ 10⁻⁸·σ₁ fell under G's rank rule and A* lost a direction W uses (evaluate: unsupported)
        W = workload.matrix  # from_matrix keeps WᵀW/m in float64's range: no over/underflow in LAPACK's SVD
        _, s, Vt = np.linalg.svd(W, full_matrices=False)
        r = numerical_rank(s, W.shape)
        Vr, root = Vt[:r].T, np.sqrt(s[:r])
    else:
        try:
            G = workload.gram  # σᵢ(W)² exactly, when G fits in float64
        except OverflowError:
            G = workload.mean_gram  # same strategy up to scale, which error ignores
        lam, V = _psd_eigh(G)
        keep = lam > 0
        Vr, root = V[:, keep], np.sqrt(np.sqrt(lam[keep]))
    A = (Vr * root) @ Vr.T
    return Strategy((A + A.T) / 2, "svd_strategy")  # exactly symmetric, as G^{1/4} is


def singular_value_bound(workload) -> Strategy:
    """Deprecated name of :func:`svd_strategy` (it read as the bound, which is :func:`mmopt.svd_bound`)."""
    warnings.warn("mmopt.strategy.singular_value_bound is now svd_strategy (it is Theorem 5.25's strategy, not "
                  "the SVD bound); the old name will be removed.", DeprecationWarning, stacklevel=2)
    return svd_strategy(workload)
