"""Strategies with 2b bands under minimum separation: the pattern sum becomes a chain, prefix sums.

Notation: see README and :mod:`mmopt.participation.free_banded`. With C lower-triangular and C_ts = 0 for
t − s ≥ 2b, X = CᵀC has X_st = 0 for |s − t| ≥ 2b. A pattern of ``min_separation(b, k)`` has its consecutive steps
at least b apart, so two steps that are not consecutive in it are at least 2b apart and only consecutive pairs
meet in X_π:

    Δ² ≤ max_π [ Σ_{t∈π} X_tt + 2 Σ_{consecutive s<t in π} |X_st| ]   (= Δ² when X ≥ 0 on the patterns' pairs),

the maximum of a chain over (i-th step, t): a dynamic programme in O(k·n·b)
(:func:`mmopt.participation.sensitivity.chain_pattern_max`). It is an upper bound for gradients of any sign and
dimension (⟨X_π, Y⟩ ≤ Σ|X_π| when Y ⪰ 0 has diag Y ≤ 1) and is exact when the maximising pattern's entries are
≥ 0 (Y = 11ᵀ attains it); its signed twin, max_π 1ᵀX_π1, is a lower bound (Y = 11ᵀ is always allowed), and both
are reported.

Why 2b and not b bands: the certified optimum of the whole schema is not banded. At n = 64, k = 8 (b = 8) the
program with every one of the C(15, 8) = 6,435 patterns of k steps as a constraint and X ≥ 0 (an SDP, Clarabel,
a development run, not kept) has the optimum 3,252.4, and its X is feasible for the whole schema (Δ² = 1 + 5·10⁻⁶
by branch and bound); its correlations at lags b…2b − 1 reach 0.08, past 2b 0.02. The best strategy with b bands
(:mod:`mmopt.participation.free_banded`) is 3,296.6 there (1.36 % more), and this family's 3,255.6.

The program min tr(G X⁻¹) s.t. X has bandwidth 2b and every pattern's Σ|X_π| ≤ 1 is convex in X, and
C ↦ CᵀC (C lower-triangular with a positive diagonal, 2b bands) maps onto the positive definite X of bandwidth 2b.
L-BFGS runs over C's band with the pattern maximum replaced by its log-sum-exp at temperature τ (every pattern, by
the chain in the log semiring, and its forward-backward marginals for the gradient), |x| by √(x² + η²) − η (η
relative to the diagonal's scale), both scaled to be homogeneous in X as in :mod:`~.free_banded`. It starts from
a strategy with b bands (the row-weighted one by default; the route passes the free banded one) and keeps only
an exact improvement: the error is recomputed from C (triangular inverse) and Δ² by the exact chain maximum
(the proven upper bound on |X|, which is what the result is scaled by).

The temperatures (:data:`TEMPERATURES`, 3·10³ then 3·10⁴) share one budget: the first runs until L-BFGS stops or
the budget is spent, the second takes what is left (in the 4,096-step route's levels, 1,024 and 2,048 steps, the
first took it all: τ = 3·10⁴ did not run). They once split it in halves, and the second half restarted L-BFGS from
a first stage cut off mid-descent. In optimize's route (prefix sums, min_separation(n/k, k), one core each,
benchmarks/results/bench_participation_minsep*.txt) the shared budget brought the gaps to the chain dual's bound at
4,096 steps, k = 4 / 8 / 16, from 1.0065 / 1.0109 / 1.0224 to 1.0057 / 1.0095 / 1.0207 (k = 8: 1.00953–1.00971 in
seven runs), at 2,048 steps, k = 4 / 8, from 1.0051 / 1.0086 to 1.0035 / 1.0075, and left 1,024 steps as they were
(1.0018 / 1.0042). The "from" figures are one benchmark run each; runs of the halved budget at 2,048 steps, k = 8
ranged over 1.0086–1.0127 on other machines and loads, so there the gain is within their spread. τ = 10⁴ for the
first stage did better than 3·10³ at 2,048 steps (k = 8: 1.0060) but worse at 4,096 (1.0096–1.0108 in eight runs):
not kept.

Cost per step: as :mod:`~.free_banded` with 2b bands (n³/6 + n³/6 + b·n²), X's band and C·Γ on the band block
by block (9·n·b², where the dense products took 2n³) and the chain (O(k·n·b)).
"""

from __future__ import annotations

import math
import time

import numpy as np

from mmopt._base import validation as v
from mmopt.participation.free_banded import (
    SINGLE_FROM,
    FreeBanded,
    _check_arguments,
    _error,
    _stages,
    check_band,
)
from mmopt.participation.schemas import MinSeparation
from mmopt.participation.sensitivity import (
    MAX_ENUMERATED,
    Sensitivity,
    _pair_edges,
    chain_result,
    gram_sensitivity_squared,
)

__all__ = ["TEMPERATURES", "chain_banded", "chain_sensitivity", "chain_soft_max", "check_start_band",
           "scaled_error"]

TEMPERATURES = (3e3, 3e4)
_ETA = 1e-4  # the smoothing of |x|, relative to m = k·mean diag X (3e-4 … 1e-3 were slower at n = 256, k = 8)


def _lse(A, axis):
    top = np.max(A, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return np.squeeze(top, axis) + np.log(np.sum(np.exp(A - top), axis=axis))


def chain_soft_max(diagonal, pairs, separation: int, participations: int, temperature: float):
    """(log Σ_π exp(τ v_π) / τ, ∂/∂diagonal, ∂/∂pairs) over every pattern of ≤ k steps b apart (the empty one
    too), v_π = Σ_{t∈π} diagonal_t + 2 Σ_{consecutive s<t, t − s < 2b} pairs[s, t − s − b]. O(k·n·b).

    >>> import itertools
    >>> rng = np.random.default_rng(1)
    >>> dg, pr = rng.random(9), rng.random((9, 2))
    >>> value = chain_soft_max(dg, pr, 2, 3, 2.0)[0]
    >>> def v(p):
    ...     return dg[list(p)].sum() + 2 * sum(pr[s, t - s - 2] for s, t in zip(p, p[1:]) if t - s < 4)
    >>> pats = [p for m in range(4) for p in itertools.combinations(range(9), m)
    ...         if all(t - s >= 2 for s, t in zip(p, p[1:]))]
    >>> bool(np.isclose(value, np.log(sum(np.exp(2.0 * v(p)) for p in pats)) / 2.0))
    True
    """
    a = temperature * np.asarray(diagonal, dtype=float)
    n, b, k = a.size, separation, participations
    w = 2.0 * temperature * np.asarray(pairs, dtype=float)  # w[s, d]: the pair (s, s + b + d)
    d, has_src, src, has_tgt, tgt = _pair_edges(n, b)
    w_in = np.where(has_src, w[src, d[None, :]], -np.inf)
    F = np.full((k + 1, n), -np.inf)  # F[m, t]: log Σ over patterns whose m-th and last step is t
    F[1] = a
    for m in range(2, k + 1):
        before = np.logaddexp.accumulate(F[m - 1])
        far = np.concatenate([np.full(min(2 * b, n), -np.inf), before[:max(n - 2 * b, 0)]])
        F[m] = a + np.logaddexp(far, _lse(F[m - 1][src] + w_in, axis=1))
    Z = float(_lse(np.concatenate([[0.0], F[1:].ravel()]), axis=0))
    B = np.zeros((k + 1, n))  # B[m, t]: log Σ over the continuations after the m-th step at t (stopping too)
    for m in range(k - 1, 0, -1):
        nxt = a + B[m + 1]
        after = np.logaddexp.accumulate(nxt[::-1])[::-1]
        far = np.concatenate([after[2 * b:], np.full(min(2 * b, n), -np.inf)])
        near = _lse(np.where(has_tgt, nxt[tgt] + w, -np.inf), axis=1)
        B[m] = np.logaddexp(0.0, np.logaddexp(far, near))
    g_diag = np.exp(F[1:] + B[1:] - Z).sum(axis=0)
    g_pairs = np.zeros((n, b))
    for m in range(1, k):
        g_pairs += np.exp(np.where(has_tgt, F[m][:, None] + w + (a + B[m + 1])[tgt] - Z, -np.inf))
    return Z / temperature, g_diag, 2.0 * g_pairs


def chain_sensitivity(C: np.ndarray, separation: int, participations: int) -> Sensitivity:
    """Δ² of C (2b bands) under ``min_separation(b, k)``: the chain on |X| (upper) and on X (lower)
    (:func:`mmopt.participation.sensitivity.chain_result`) from X's diagonal and lags b … 2b − 1 (:func:`_gram_band`:
    0.14 CPU s at 4,096 steps, k = 8, where CᵀC and the dense path took 5.6 s). A C off its 2b bands, or with
    negative pairs and few enough patterns to enumerate each one's bracket, takes
    :func:`mmopt.participation.sensitivity.gram_sensitivity_squared` on CᵀC."""
    b, k = separation, participations
    schema = MinSeparation(b, k)
    n = C.shape[0]
    # _gram_band reads the 2b bands below the diagonal only: an entry above it was dropped (an identity with
    # C[0, 5] = 3: Δ² 12 said exact where it is 18; an audit), so any other C takes the dense path
    if n == b * k and not np.any(np.tril(C, -2 * b)) and not _above_diagonal(C):
        dg, P = _gram_band(C, b, k)
        if np.all(P >= 0) or schema.count(n) > MAX_ENUMERATED:
            return chain_result(dg, P, b, k)
    return gram_sensitivity_squared(C.T @ C, schema)


def chain_banded(n: int, participations: int, *, start=None, max_iterations: int = 300, seconds: float | None = None,
                 temperatures=TEMPERATURES) -> FreeBanded:
    """The strategy with 2b bands for prefix sums of n steps under ``min_separation(n/k, k)`` (module docstring).

    Parameters
    ----------
    n : int
        Steps, a multiple of k, at most :data:`mmopt.participation.free_banded.MAX_N`.
    participations : int
        k; the separation is b = n/k and the strategy has 2b bands.
    start : array_like (n, n), optional
        A lower-triangular start with at most 2b bands (default: the row-weighted strategy of
        :mod:`mmopt.participation.weighted`; the free banded one is a better start for a short budget). The
        result is never worse than it.
    max_iterations : int
        L-BFGS iterations per temperature.
    seconds : float, optional
        A CPU budget for all stages: each runs until L-BFGS stops (its tolerances or ``max_iterations``) or the
        budget is spent (status "user_limit"), the next taking what is left.
    temperatures : tuple of float
        τ of the successive stages.

    Examples
    --------
    >>> from mmopt.participation.free_banded import free_banded
    >>> from mmopt.participation.patterns import pattern_upper_bound
    >>> band = free_banded(64, 8, max_iterations=200)
    >>> r = chain_banded(64, 8, start=band.matrix, max_iterations=200)
    >>> upper = pattern_upper_bound(np.abs(r.matrix.T @ r.matrix), 8, 8)[0]   # another code path: branch and bound
    >>> bool(np.isclose(upper, 1.0)), bool(r.sensitivity.lower > 1 - 1e-6), bool(r.error < 0.995 * band.error)
    (True, True, True)
    """
    from mmopt.participation.weighted import weighted_banded
    caller = "chain_banded"
    n, k, max_iterations, seconds = _check_arguments(n, participations, max_iterations, seconds, caller)
    t0 = time.process_time()
    b = n // k
    C0 = np.asarray(weighted_banded(n, k).to_dense(), dtype=float) if start is None else v.check_matrix(
        start, name="start", caller=caller, square=True)
    if C0.shape != (n, n):
        raise ValueError(f"The 'start' parameter of {caller} must be {n}×{n}. Got shape {C0.shape} instead.")
    rows, cols = np.nonzero(check_start_band(C0, b, caller))

    def build(x):
        C = np.zeros((n, n))
        C[rows, cols] = x
        return C

    def objective(x, tau):
        value, g = _objective(build(x), b, k, tau, single=n >= SINGLE_FROM)
        return value, (g[rows, cols] if g is not None else np.zeros_like(x))

    # one deadline for both stages (module docstring): halving it cut the τ = 3·10³ stage off mid-descent on the
    # 4,096-step route's levels (≤ 2,048 steps) and restarted L-BFGS at τ = 3·10⁴
    deadline = None if seconds is None else t0 + seconds
    (error, C, sens), status, iterations = _stages(objective, lambda x: scaled_error(build(x), b, k),
                                                    C0[rows, cols].copy(), scaled_error(C0, b, k), temperatures,
                                                    max_iterations, deadline)
    return FreeBanded(C, float(error), sens, status, iterations, time.process_time() - t0)


def check_start_band(C: np.ndarray, separation: int, caller: str) -> np.ndarray:
    """The mask of the 2b bands (lower-triangular, t − s < 2b) of C's shape, after checking that a ``start`` C lies
    on them with a positive diagonal (a ValueError naming ``caller`` else)."""
    return check_band(C, 2 * separation, caller, what="2b")


def _above_diagonal(C: np.ndarray) -> int:
    """The nonzero entries of C above its diagonal, row by row (np.triu's copy is 134 MB at 4,096 steps, and the
    route checks every strategy it scores)."""
    return sum(int(np.count_nonzero(C[i, i + 1:])) for i in range(C.shape[0] - 1))


def scaled_error(C: np.ndarray, separation: int, participations: int):
    """(Δ²·‖W C⁻¹‖²_F, C/Δ, its Sensitivity) with Δ² the chain's upper bound under ``min_separation(b, k)``: the
    error of C scaled to Δ = 1 (the chain is homogeneous in X: C/Δ scales its bracket by 1/Δ²)."""
    if above := _above_diagonal(C):  # _error reads one triangle: 702 for 1,242 with C[0, 5] = 3 (a review)
        raise ValueError("The 'C' parameter of scaled_error must be lower-triangular (a causal factor): the error "
                         f"‖W C⁻¹‖²_F is computed from its lower triangle. Got {above} nonzero entries above the "
                         "diagonal.")
    s = chain_sensitivity(C, separation, participations)
    scaled = Sensitivity(1.0, s.lower / s.squared, s.exact, s.method)
    return _error(C)[0] * s.squared, C / math.sqrt(s.squared), scaled


def _objective(C: np.ndarray, b: int, k: int, tau: float, single: bool = False):
    """(log ‖W C⁻¹‖²_F + log of the smoothed Δ², its gradient in C on the 2b bands), or (inf, None) if C is
    singular (so that the line search steps back); ``single``: the products in float32 (free_banded._error), the
    soft maximum and the sums in float64."""
    n = C.shape[0]
    E, gC = _error(C, 2 * b, gradient=True, single=single)
    if gC is None:
        return math.inf, None
    if single:
        C = C.astype(np.float32)
    dg, P = _gram_band(C, b, k)
    dg, P = dg.astype(float), P.astype(float)
    m = k * dg.mean()
    h = np.sqrt((P / m) ** 2 + _ETA ** 2)  # the smoothed |P/m| is h − η, its derivative P/(m h)
    S, g_dg, g_P = chain_soft_max(dg / m, h - _ETA, b, k, tau)
    g_abs = g_P * P / (m * h)
    # S_m = m·S(X/m): ∂/∂X is ∇S, ∂/∂m is S − ⟨∇S, X/m⟩, and m = k·mean diag X
    g_m = S - float(g_dg @ dg) / m - float((g_abs * P).sum()) / m
    # Γ = ∂/∂X: the diagonal, and lags b … 2b − 1 where X_st and X_ts each carry half of ∂/∂X_st
    CG = _times_gram_gradient(C, (g_dg + g_m * k / n).astype(C.dtype), (g_abs / 2).astype(C.dtype), b, k)
    return math.log(E) + math.log(m * S), gC.astype(float) / E + 2.0 * CG.astype(float) / (m * S)


def _gram_band(C: np.ndarray, b: int, k: int):
    """diag X and P[s, d] = X[s, s + b + d] (d < b) of X = CᵀC, C with 2b bands, block by block (blocks of b
    columns; column block j has its rows in blocks j … j + 2): 3·n·b² multiply-adds where CᵀC takes n³."""
    n = C.shape[0]
    P = np.zeros((n, b), dtype=C.dtype)
    sigma, d = np.arange(b)[:, None], np.arange(b)[None, :]
    near = sigma + d < b  # t = s + b + d in block j + 1, else in block j + 2
    for j in range(k - 1):
        # column block i of C is zero outside rows ib … (i + 3)b: the products take the rows both blocks share
        near_rows, far_rows = slice((j + 1) * b, min((j + 3) * b, n)), slice((j + 2) * b, min((j + 3) * b, n))
        X1 = C[near_rows, j * b:(j + 1) * b].T @ C[near_rows, (j + 1) * b:(j + 2) * b]
        X2 = (C[far_rows, j * b:(j + 1) * b].T @ C[far_rows, (j + 2) * b:(j + 3) * b] if j + 2 < k
              else np.zeros((b, b), dtype=C.dtype))
        P[j * b:(j + 1) * b] = np.where(near, X1[sigma, np.minimum(sigma + d, b - 1)],
                                        X2[sigma, np.maximum(sigma + d - b, 0)])
    return np.einsum("ij,ij->j", C, C), P


def _times_gram_gradient(C: np.ndarray, diagonal: np.ndarray, half: np.ndarray, b: int, k: int) -> np.ndarray:
    """C·Γ on C's 2b bands (other entries unspecified), Γ symmetric with ``diagonal`` and Γ[s, s + b + d] =
    ``half``[s, d]: block by block, column block m from C's column blocks j = m ± 1, m ± 2 on the rows they share
    (6·n·b² multiply-adds)."""
    n = C.shape[0]
    out = C * diagonal[None, :]
    sigma, tau = np.arange(b)[:, None], np.arange(b)[None, :]  # Γ[jb + σ, mb + τ]
    for m in range(k):
        rows = slice(m * b, min((m + 3) * b, n))
        cols = slice(m * b, (m + 1) * b)
        acc = out[rows, cols]
        for shift in (-2, -1, 1, 2):
            j = m + shift  # Γ's row block
            if not 0 <= j < k:
                continue
            if shift == 1:  # s − t = b + σ − τ: a lag of the band when σ ≥ τ, Γ = half[t, σ − τ]
                block = np.where(sigma >= tau, half[m * b + tau, np.maximum(sigma - tau, 0)], 0.0)
            elif shift == 2:  # s − t = 2b + σ − τ < 2b when σ < τ, Γ = half[t, b + σ − τ]
                block = np.where(sigma < tau, half[m * b + tau, np.minimum(b + sigma - tau, b - 1)], 0.0)
            elif shift == -1:  # t − s = b + τ − σ when τ ≥ σ, Γ = half[s, τ − σ]
                block = np.where(tau >= sigma, half[j * b + sigma, np.maximum(tau - sigma, 0)], 0.0)
            else:  # t − s = 2b + τ − σ < 2b when τ < σ, Γ = half[s, b + τ − σ]
                block = np.where(tau < sigma, half[j * b + sigma, np.minimum(b + tau - sigma, b - 1)], 0.0)
            lo, hi = max(m, j) * b, min(min(m, j) + 3, k) * b  # the rows C's column blocks m and j share
            acc[lo - m * b:hi - m * b] += C[lo:hi, j * b:(j + 1) * b] @ block
    return out
