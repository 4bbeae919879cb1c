"""The L2 sensitivity of a strategy C under a participation schema: exact, or a proven upper bound, named.

Notation: see README and :mod:`mmopt.participation.schemas`. X = CᵀC. A record with pattern π sends gradients
g_t, ‖g_t‖ ≤ 1, of any dimension, so (Denisov et al., "Improved differential privacy for SGD via optimal private
linear operators on adaptive streams", NeurIPS 2022, Thm 2.1; Choquette-Choo et al., ICML 2023, §2)

    Δ² = max_π max_{‖g_t‖ ≤ 1} ‖Σ_{t∈π} C e_t g_tᵀ‖²_F = max_π max { ⟨X_π, Y⟩ : Y ⪰ 0, diag Y ≤ 1 },

the inner maximum an SDP over the Gram matrices Y_st = g_s·g_t (any such Y is one, the dimension being free).
Per pattern, with A = X_π (k×k):

* A ≥ 0 entrywise: Y_st ≤ √(Y_ss Y_tt) ≤ 1 gives ⟨A, Y⟩ ≤ 1ᵀA1, attained at Y = 11ᵀ: exact, "1ᵀX1".
* otherwise: any sign vector s gives the lower bound sᵀAs (all 2^{k−1} tried for k ≤ 12), and weak duality
  ⟨A, Y⟩ ≤ Σ d_i for any d with Diag(d) ⪰ A gives the upper bounds Σ|A_st| (d_i = Σ_t |A_it|, Gershgorin; the
  absolute-value bound of Choquette-Choo et al., "(Amplified) banded matrix factorization", NeurIPS 2023,
  Eq. 5), tr A + k·λ_max(A − Diag A) (Weyl) and sᵀAs + k·max(0, −λ_min(Diag(s∘As) − A)) at the best sign
  vector s (its dual point, exact when s solves the SDP). Signed blocks of k ≤ 64 steps whose bounds do not meet
  are refined: the generalised power method on Y = VVᵀ (unit rows, r(r+1)/2 > k) gives the lower bound ⟨A, VVᵀ⟩
  (attained by g_t = v_t) and the dual point d_i = (AVVᵀ)_ii, shifted to feasibility and certified by a floating-
  point Cholesky factor of Diag(d) − A with its backward error bounded. Exact when the best lower and upper
  bounds meet.

Schemas:

* fixed epochs: the b disjoint patterns, each k×k block of X: O(nk) per block.
* minimum separation b, at most k steps: for X with X_st = 0 whenever |s − t| ≥ b (a strategy with at most b
  bands) the cross terms vanish and Δ² = max_π Σ_{t∈π} X_tt, a dynamic programme over t: exact, any sign.
  Toeplitz C = T(c) with c ≥ 0 non-increasing: X_st = Σ_{m ≤ n−1−max(s,t)} c_m c_{m+|s−t|} ≥ 0 is
  non-increasing in max(s, t) and in |s − t|, so moving pattern p_1 < … < p_k to q_i = (i − 1)b (q_j ≤ p_j,
  |q_i − q_j| ≤ |p_i − p_j|) raises every entry: the worst pattern is {0, b, …, (k − 1)b}, exact. Otherwise,
  with patterns few enough, every one is enumerated (exact for X ≥ 0); else the upper bound 1ᵀX_π1 ≤ Σ_{i∈π} R_i,
  R_i = max_{π ∋ i} Σ_{j∈π} X_ij (both maxima dynamic programmes, O(n²k)): "row bound", applied to |X| when X
  has negative entries (triangle inequality); with few patterns and negative entries, each pattern's bracket.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

import numpy as np

from mmopt._base import validation as v
from mmopt.participation._sdp_bounds import REFINED_UP_TO, flip_search, refine_blocks
from mmopt.participation.schemas import FixedEpochs, MinSeparation, Single, as_schema

__all__ = ["Sensitivity", "best_pattern_sum", "block_bounds", "chain_ends", "chain_pattern_max",
           "gram_sensitivity_squared", "pair_band"]

#: patterns enumerated one by one at most before the row bound is used (min separation, X ≥ 0, no structure)
MAX_ENUMERATED = 200_000
_SIGNS_UP_TO = 12  # sign vectors tried exhaustively for a block with negative entries up to this size


@dataclass(frozen=True)
class Sensitivity:
    """Δ² of a strategy under a schema.

    Attributes
    ----------
    squared : float
        Δ², a proven upper bound on the sensitivity squared (equal to it when ``exact``).
    lower : float
        A value attained by some allowed gradients (≤ the true Δ² ≤ ``squared``).
    exact : bool
        ``squared`` is the sensitivity (``lower`` equals it within 10⁻¹² relative).
    method : str
        How ``squared`` was found (module docstring).
    """

    squared: float
    lower: float
    exact: bool
    method: str

    @property
    def value(self) -> float:
        """Δ = √``squared``."""
        return float(np.sqrt(self.squared))

    def of_scaled(self) -> Sensitivity:
        """The sensitivity of C/Δ (X/Δ²): Δ² is homogeneous of degree 1 in X, so both bounds divide by Δ²."""
        return Sensitivity(1.0, self.lower / self.squared, self.exact, self.method)


def _signs(k: int) -> np.ndarray:
    return np.array([(1.0, *s) for s in product((1.0, -1.0), repeat=k - 1)])


def block_bounds(blocks: np.ndarray, *, top: bool = False, refine: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) of max{⟨A, Y⟩ : Y ⪰ 0, diag Y ≤ 1} for each k×k block A of ``blocks`` (shape (p, k, k)).

    Signed blocks of up to ``REFINED_UP_TO`` steps whose sign-vector bounds do not meet are refined by
    :func:`~mmopt.participation._sdp_bounds.low_rank` (lower: ⟨A, VVᵀ⟩; upper: its dual point, certified by
    :func:`~mmopt.participation._sdp_bounds.certified`), the blocks with
    the largest upper bounds first, within ``_REFINE_BUDGET`` floating-point operations. With ``top`` only the
    largest upper bound over the blocks is wanted: refinement stops once no block left can exceed it. Without
    ``refine`` (an optimiser's per-iteration monitor) only the sign vectors' bounds, as before the refinement.

    Examples
    --------
    >>> lo, hi = block_bounds(np.array([[[2.0, 1.0], [1.0, 2.0]], [[2.0, -1.0], [-1.0, 2.0]]]))
    >>> lo.tolist(), hi.tolist()
    ([6.0, 6.0], [6.0, 6.0])
    """
    blocks = np.asarray(blocks, dtype=float)
    p, k, _ = blocks.shape
    total = blocks.sum(axis=(1, 2))
    absolute = np.abs(blocks).sum(axis=(1, 2))
    lower, upper = total.copy(), absolute.copy()
    negative = np.any(blocks < 0, axis=(1, 2))
    if negative.any():
        B = blocks[negative]
        if k <= _SIGNS_UP_TO:
            S = _signs(k)
            values = np.einsum("pij,si,sj->ps", B, S, S)
            s = S[values.argmax(axis=1)]
        else:  # the sign vector of the top eigenvector, or all ones, then 1-flip local search
            s = np.sign(np.linalg.eigh(B)[1][:, :, -1])
            s[s == 0] = 1.0
            s[np.einsum("pij,pi,pj->p", B, s, s) < B.sum(axis=(1, 2))] = 1.0
            s = flip_search(B, s)
        lower[negative] = np.einsum("pij,pi,pj->p", B, s, s)
        # eigvalsh is backward stable: allow k·‖A‖·n·u for its round-off so that each bound stays an upper bound
        slack = k * 16 * k * np.finfo(float).eps * np.abs(B).sum(axis=(1, 2))
        off = B - np.einsum("pii->pi", B)[:, :, None] * np.eye(k)
        weyl = np.einsum("pii->p", B) + k * np.linalg.eigvalsh(off)[:, -1] + slack
        # the dual point of the best sign vector: d = s∘(As) + μ with μ = max(0, −λ_min(Diag(s∘As) − A)) makes
        # Diag(d) ⪰ A, so Σd = sᵀAs + kμ bounds Δ² above, and equals the lower bound when s is optimal for the
        # SDP (then μ = 0). Σ|A| and Weyl were 2 % loose on momentum's signed blocks (a helper's audit).
        M = np.einsum("pi,pi->pi", s, np.einsum("pij,pj->pi", B, s))[:, :, None] * np.eye(k) - B
        certificate = lower[negative] + k * np.maximum(0.0, -np.linalg.eigvalsh(M)[:, 0]) + slack
        upper[negative] = np.minimum(np.minimum(absolute[negative], weyl), certificate)
        if refine and k <= REFINED_UP_TO:
            refine_blocks(blocks, lower, upper, np.flatnonzero(negative), top)
    return lower, np.maximum(upper, lower)


def _pair_edges(n: int, b: int):
    """Index arrays of the pair band: pair (s, s + b + d) for d < b, its source for each target and validity."""
    d = np.arange(b)
    src = np.arange(n)[:, None] - b - d[None, :]  # for target t: s = t − b − d
    tgt = np.arange(n)[:, None] + b + d[None, :]  # for source s: t = s + b + d
    return d, src >= 0, np.maximum(src, 0), tgt < n, np.minimum(tgt, n - 1)


def chain_pattern_max(diagonal, pairs, separation: int, participations: int) -> float:
    """max over the patterns π of ``min_separation(b, k)`` (the empty one counts 0) of
    v_π = Σ_{t∈π} diagonal_t + 2 Σ_{consecutive s<t in π, t − s < 2b} pairs[s, t − s − b]: a max-plus chain over
    (i-th step, t), O(k·n·b). With diagonal = diag X, pairs = :func:`pair_band` of |X| it is max_π Σ|X_π| when X
    has bandwidth 2b (non-consecutive steps of a pattern are ≥ 2b apart).

    >>> pairs = np.zeros((4, 2))
    >>> pairs[0, 0] = 0.5                                  # the pair (0, 2)
    >>> chain_pattern_max(np.array([1.0, 0.0, 1.0, 1.0]), pairs, 2, 2)   # (0, 2): 1 + 1 + 2·0.5 beats (0, 3)
    3.0
    """
    return max(0.0, float(chain_ends(diagonal, pairs, separation, participations).max()))


def chain_ends(diagonal, pairs, separation: int, participations: int) -> np.ndarray:
    """F[m − 1, t]: the largest v_π (:func:`chain_pattern_max`) over the patterns of exactly m steps whose last is
    t, for m = 1 … k (−inf where there is none)."""
    dg = np.asarray(diagonal, dtype=float)
    n, b, k = dg.size, separation, participations
    d, has_src, src, _, _ = _pair_edges(n, b)
    w_in = np.where(has_src, 2.0 * np.asarray(pairs, dtype=float)[src, d[None, :]], -np.inf)
    F = np.empty((k, n))
    F[0] = dg
    for m in range(1, k):
        before = np.maximum.accumulate(F[m - 1])
        far = np.concatenate([np.full(min(2 * b, n), -np.inf), before[:max(n - 2 * b, 0)]])
        F[m] = dg + np.maximum(far, np.max(F[m - 1][src] + w_in, axis=1))
    return F


def pair_band(X: np.ndarray, separation: int) -> np.ndarray:
    """P[s, d] = X[s, s + b + d] for d < b (0 past the end)."""
    n, b = X.shape[0], separation
    P = np.zeros((n, b))
    for d in range(min(b, max(n - b, 0))):
        P[:n - b - d, d] = np.diagonal(X, b + d)
    return P


def chain_result(diagonal: np.ndarray, pairs: np.ndarray, separation: int, participations: int) -> Sensitivity:
    """Δ² of an X with no entry 2b or more off its diagonal from its diagonal and ``pairs`` = :func:`pair_band`:
    the chain on X (lower: Y = 11ᵀ) and on |X| (upper: ⟨X_π, Y⟩ ≤ Σ|X_π|), exact when they meet (X ≥ 0)."""
    upper = chain_pattern_max(diagonal, np.abs(pairs), separation, participations)
    lower = chain_pattern_max(diagonal, pairs, separation, participations)
    return _result(lower, upper, "min separation: the chain over consecutive steps (no entry ≥ 2b off the "
                   "diagonal), dynamic programme" + ("" if upper <= lower * (1 + 1e-12) else " on |X|"))


def _result(lower: float, upper: float, method: str, always_exact: bool = False) -> Sensitivity:
    exact = always_exact or upper <= lower * (1 + 1e-12)
    return Sensitivity(float(upper), float(min(lower, upper)), bool(exact), method)


def _fixed_epochs(X: np.ndarray, k: int) -> Sensitivity:
    n = X.shape[0]
    idx = np.arange(n).reshape(k, n // k).T  # row j: pattern j, j + b, …
    lo, hi = block_bounds(X[idx[:, :, None], idx[:, None, :]], top=True)
    return _result(lo.max(), hi.max(), "fixed epochs: 1ᵀX1 per block" if np.all(X >= 0) else
                   "fixed epochs: per block, sign vectors, low-rank Y ≤ Δ² ≤ min(Σ|X|, Weyl, dual points)")


def best_pattern_sum(values: np.ndarray, b: int, k: int) -> tuple[float, tuple[int, ...]]:
    """max over patterns π (≤ k steps, b apart) of Σ_{t∈π} values_t, and a maximiser: dynamic programme O(nk).

    >>> best_pattern_sum(np.array([3.0, 1.0, 1.0, 3.0]), 2, 2)
    (6.0, (0, 3))
    """
    n = len(values)
    F = np.zeros((k + 1, n + 1))  # F[m, t]: best over patterns of ≤ m steps in [0, t)
    take = np.zeros((k + 1, n + 1), dtype=bool)
    for t in range(1, n + 1):
        prev = F[:-1, max(t - b, 0)] + values[t - 1]
        F[1:, t] = np.maximum(F[1:, t - 1], prev)
        take[1:, t] = prev > F[1:, t - 1]
    pattern, m, t = [], k, n
    while m > 0 and t > 0:
        if take[m, t]:
            pattern.append(t - 1)
            t, m = max(t - b, 0), m - 1
        else:
            t -= 1
    return float(F[k, n]), tuple(sorted(pattern))


def _row_bound(X: np.ndarray, b: int, k: int) -> tuple[float, float, tuple[int, ...]]:
    """(upper, attained, pattern) for X ≥ 0: the row bound of the module docstring."""
    n = X.shape[0]
    # left[m][i]: best sum of ≤ m entries of row i among steps ≤ i − b, b apart; right[m][i] the same ≥ i + b.
    left, right = np.zeros((k, n)), np.zeros((k, n))
    for side, out in ((X, left), (X[::-1, ::-1], right)):
        F = np.zeros((k, n))  # F[m, i] for the current prefix [0, t], all rows at once
        hist = [np.zeros((k, n)) for _ in range(b)]  # F after step t − b … t − 1, for the b-apart recursion
        for t in range(n):
            before = hist[0]  # F over [0, t − b]
            F = np.maximum(F, np.vstack([np.zeros(n), before[:-1] + side[:, t]]))
            hist.append(F.copy())
            del hist[0]
            if t + b < n:
                out[:, t + b] = F[:, t + b]
        if side is not X:
            out[:] = out[:, ::-1]
    best = np.zeros(n)
    for ml in range(k):
        for mr in range(k - ml):
            best = np.maximum(best, left[ml] + right[mr])
    R = np.diag(X) + best
    upper, pattern = best_pattern_sum(R, b, k)
    idx = list(pattern)
    return upper, float(X[np.ix_(idx, idx)].sum()), pattern


def _min_separation(X: np.ndarray, b: int, k: int) -> Sensitivity:
    n = X.shape[0]
    offsets = np.abs(np.subtract.outer(np.arange(n), np.arange(n)))
    if not np.any(X[offsets >= b]):  # cross terms of every pattern vanish
        value, _ = best_pattern_sum(np.diag(X).copy(), b, k)
        return _result(value, value, "min separation: Σ X_tt (no entry ≥ b off the diagonal), dynamic programme",
                       always_exact=True)
    nonnegative = bool(np.all(X >= 0))
    schema = MinSeparation(b, k)
    few = schema.count(n) <= MAX_ENUMERATED
    if not np.any(X[offsets >= 2 * b]) and (nonnegative or not few):
        # only consecutive steps of a pattern meet in X_π: the chain (with negative entries and few patterns the
        # enumeration below brackets each pattern more tightly)
        return chain_result(np.diag(X).copy(), pair_band(X, b), b, k)
    if few:
        if nonnegative:
            best = max(X[np.ix_(p, p)].sum() for p in schema.patterns(n))
            return _result(best, best, "min separation: every pattern enumerated, 1ᵀX1", always_exact=True)
        patterns = schema.patterns(n)
        lower = upper = 0.0
        for m in range(1, k + 1):  # the patterns of m steps as one (count, m, m) stack of blocks
            P = np.array([p for p in patterns if len(p) == m], dtype=int).reshape(-1, m)
            if len(P):
                lo, hi = block_bounds(X[P[:, :, None], P[:, None, :]], top=True)
                lower, upper = max(lower, float(lo.max())), max(upper, float(hi.max()))
        return _result(lower, upper, "min separation: every pattern enumerated, sign vectors, low-rank Y ≤ Δ² ≤ "
                       "min(Σ|X|, Weyl, dual points) per pattern")
    upper, attained, pattern = _row_bound(np.abs(X), b, k)
    if not nonnegative:
        attained = float(block_bounds(X[np.ix_(pattern, pattern)][None])[0][0])
    return _result(attained, upper, "min separation: row bound (dynamic programmes)"
                   + ("" if nonnegative else " on |X|"))


def _check_gram_shape(X: np.ndarray, caller: str) -> None:
    """What every Gram X = CᵀC satisfies, in O(n²): symmetric, a non-negative diagonal, |X_st| ≤ √(X_ss X_tt)
    (each to round-off). A C passed in its place (lower-triangular: not symmetric) or a negative X gave a Δ² below
    the truth, marked exact; a full PSD test would cost an eigendecomposition per call."""
    top = float(np.abs(X).max(initial=0.0))
    d = np.diag(X)
    r = np.sqrt(np.maximum(d, 0.0))
    for bad, what in ((float(np.abs(X - X.T).max(initial=0.0)) > 1e-9 * top, "not symmetric"),
                      (float(d.min(initial=0.0)) < -1e-12 * top, "negative on its diagonal"),
                      (bool(np.any(np.abs(X) > (1 + 1e-9) * np.outer(r, r) + 1e-12 * top)),
                       "larger off its diagonal than √(X_ss X_tt)")):
        if bad:
            raise ValueError(f"The 'gram' parameter of {caller} must be CᵀC (symmetric positive semidefinite). Got "
                             f"a matrix that is {what}. Pass C.T @ C, or the strategy itself to "
                             "mmopt.participation.sensitivity_squared.")


def gram_sensitivity_squared(gram, participation) -> Sensitivity:
    """Δ² under ``participation`` of any strategy C with CᵀC = ``gram`` (n×n, X).

    Examples
    --------
    >>> import mmopt
    >>> X = np.ones((4, 4))   # C = the first row of ones: every step's column is the same
    >>> gram_sensitivity_squared(X, mmopt.participation.fixed_epochs(2)).squared
    4.0
    """
    caller = "gram_sensitivity_squared"
    X = v.check_matrix(gram, name="gram", caller=caller, square=True)
    schema = as_schema(participation, caller, none=False)
    n = X.shape[0]
    _check_gram_shape(X, caller)
    X = (X + X.T) / 2
    if isinstance(schema, Single):
        d = float(np.diag(X).max())
        return _result(d, d, "single: max X_tt", always_exact=True)
    if isinstance(schema, FixedEpochs):
        schema.check_n(n, caller, name="gram")  # the steps are X's size: the function has no 'n'
        return _fixed_epochs(X, schema.epochs)
    if isinstance(schema, MinSeparation):
        return _min_separation(X, schema.separation_steps, schema.participations(n))
    raise TypeError(f"{caller}: no sensitivity for the schema {schema!r}")
