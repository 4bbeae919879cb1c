"""The worst participation patterns of a Gram under minimum separation: a local search for cutting planes and a
branch and bound for the exact maximum (a proven upper bound when stopped early).

Notation: see :mod:`mmopt.participation.sensitivity`. For Y ≥ 0 (n×n) and ``min_separation(b, k)`` the problem is

    Q* = max_π Σ_{s,t∈π} Y_st   over patterns π of ≤ k steps, consecutive steps ≥ b apart,

a quadratic selection, so no dynamic programme is exact. It is the sensitivity squared of X when X = Y ≥ 0, and
an upper bound of it for any X with Y = |X| (Σ_st |X_st| ≥ ⟨X_π, Y⟩ for diag Y ≤ 1, Y ⪰ 0;
:mod:`mmopt.participation.sensitivity`).

* :func:`worst_patterns`: a coordinate ascent (move one step of a pattern to the best place its neighbours allow,
  all patterns at once) from seeds with equal spacings: high patterns, no claim of optimality — the cutting planes
  only need violated ones.
* :func:`pattern_upper_bound`: depth-first branch and bound over the steps in increasing order. A node holds the
  chosen steps C, their value V = Σ_{s,t∈C} Y_st and each later step's gain g_u = Y_uu + 2Σ_{s∈C} Y_su. Adding
  step t and then a set π' = {u_1 < … < u_m} (m ≤ q − 1) in [t + b, n) is worth at most

      V + g_t + 2 r⁺_{q−1}(t) + max_{π'} Σ_i (g_{u_i} + 2 r⁺_{m−i}(u_i)),

  with r⁺_m(u) the best sum of ≤ m entries of row u to its right, b apart (each pair counted once, at its earlier
  step, which has m − i partners after it; the row dynamic programme of :mod:`mmopt.participation.sensitivity`,
  O(n²k) once), the last maximum a dynamic programme over the suffix (O(nk) per node, vectorised). Children
  whose bound does not exceed the incumbent by more than ``rtol`` are pruned; the result's upper value is the
  incumbent or the largest bound left unexplored (pruned, or past ``max_nodes``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["pattern_upper_bound", "worst_patterns"]


def _row_parts(Y: np.ndarray, b: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(left, right), (k, n): left[m, i] the best sum of ≤ m entries of row i among steps ≤ i − b, b apart (the
    dynamic programme of :func:`mmopt.participation.sensitivity._row_bound`); right the same ≥ i + b."""
    n = Y.shape[0]
    left, right = np.zeros((k, n)), np.zeros((k, n))
    for side, out in ((Y, left), (Y[::-1, ::-1], right)):
        F = np.zeros((k, n))
        hist = [np.zeros((k, n)) for _ in range(b)]
        for t in range(n):
            before = hist[0]
            F = np.maximum(F, np.vstack([np.zeros(n), before[:-1] + side[:, t]]))
            hist.append(F.copy())
            del hist[0]
            if t + b < n:
                out[:, t + b] = F[:, t + b]
        if side is not Y:
            out[:] = out[:, ::-1]
    return left, right


def _suffix_best(g: np.ndarray, right: np.ndarray, b: int, q: int) -> np.ndarray:
    """F[m, t] ≥ max over patterns π' of ≤ m steps in [t, n), b apart, of Σ_{u∈π'} g_u + Σ_{u≠u'∈π'} Y_uu'
    (m = 0 … q; F[:, n] = 0): each pair counted at its earlier step, which has at most m − 1 partners after it
    when m steps are left, so F_m[t] = max_{t' ≥ t} (g_t' + 2 r⁺_{m−1}(t') + F_{m−1}[t' + b]), a reversed running
    maximum per m."""
    n = len(g)
    F = np.zeros((q + 1, n + 1))
    for m in range(1, q + 1):
        later = np.zeros(n)
        later[:max(n - b, 0)] = F[m - 1, b:n]
        worth = np.maximum(g + 2 * right[m - 1] + later, 0.0)  # a step of negative worth is left out
        F[m, :n] = np.maximum.accumulate(worth[::-1])[::-1]
    return F


def worst_patterns(X: np.ndarray, b: int, k: int, *, seeds: int = 1000, sweeps: int = 20,
                   rng: np.random.Generator | None = None) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """(values 1ᵀX_π1, patterns) of high patterns of ``min_separation(b, k)``, best first (module docstring).

    Examples
    --------
    >>> X = np.eye(6) + np.diag([0.5] * 3, 3) + np.diag([0.5] * 3, -3)
    >>> values, patterns = worst_patterns(X, 3, 2)
    >>> float(values[0]), patterns[0]
    (3.0, (0, 3))
    """
    X = np.asarray(X, dtype=float)
    n = X.shape[0]
    rng = np.random.default_rng(0) if rng is None else rng
    kmax = min(k, -(-n // b))
    found: dict[tuple[int, ...], float] = {}
    for m in range(1, kmax + 1):
        # seeds: m steps of equal spacing s ≥ b from start j
        if m == 1:
            P = np.arange(n)[:, None]
        else:
            top = (n - 1) // (m - 1)
            pairs = [(j, s) for s in range(b, top + 1) for j in range(0, n - (m - 1) * s)]
            if len(pairs) > seeds:
                pairs = [pairs[i] for i in rng.choice(len(pairs), seeds, replace=False)]
            P = np.array([[j + i * s for i in range(m)] for j, s in pairs], dtype=int)
        d = np.diag(X)
        for _ in range(sweeps):
            moved = False
            for i in range(m):
                lo = P[:, i - 1] + b if i > 0 else np.zeros(len(P), dtype=int)
                hi = P[:, i + 1] - b if i < m - 1 else np.full(len(P), n - 1)
                others = np.delete(P, i, axis=1)
                score = d[None, :] + 2 * X[others].sum(axis=1)  # (p, n): step i moved to t
                t = np.arange(n)
                score[(t[None, :] < lo[:, None]) | (t[None, :] > hi[:, None])] = -np.inf
                best = score.argmax(axis=1)
                moved |= bool(np.any(best != P[:, i]))
                P[:, i] = best
            if not moved:
                break
        P = np.unique(P, axis=0)
        values = np.einsum("pij->p", X[P[:, :, None], P[:, None, :]])
        for p, val in zip(P, values, strict=True):
            found[tuple(int(s) for s in p)] = float(val)
    order = sorted(found, key=found.get, reverse=True)
    return np.array([found[p] for p in order]), order


def pattern_upper_bound(Y: np.ndarray, b: int, k: int, *, incumbent: tuple[int, ...] = (), rtol: float = 1e-9,
                        max_nodes: int = 400_000) -> tuple[float, float, tuple[int, ...], int]:
    """(upper, attained, pattern, nodes): max_π 1ᵀY_π1 over ``min_separation(b, k)`` for Y ≥ 0 lies in
    [attained, upper], ``pattern`` attains ``attained`` (module docstring); ``incumbent`` a pattern to start from.

    Examples
    --------
    >>> Y = np.array([[1.0, 0, 2], [0, 1, 0], [2, 0, 1]])
    >>> upper, attained, pattern, _ = pattern_upper_bound(Y, 2, 2)
    >>> upper, attained, pattern
    (6.0, 6.0, (0, 2))
    """
    Y = np.asarray(Y, dtype=float)
    if np.any(Y < 0):
        raise ValueError("pattern_upper_bound: Y must be entrywise non-negative (pass |X|).")
    n = Y.shape[0]
    k = min(k, -(-n // b))
    right = _row_parts(Y, b, k)[1]
    best_pattern = tuple(int(s) for s in incumbent)
    best_value = float(Y[np.ix_(best_pattern, best_pattern)].sum()) if best_pattern else 0.0
    left_open = 0.0  # the largest bound of a node pruned or left unexplored
    stack = [((), 0.0, np.diag(Y).copy(), k, 0)]
    nodes = 0
    while stack:
        chosen, V, g, q, lo = stack.pop()
        nodes += 1
        if V > best_value:
            best_value, best_pattern = V, chosen
        if q == 0 or lo >= n:
            continue
        if nodes > max_nodes:
            left_open = max(left_open, V + float(_suffix_best(g, right, b, q)[q, lo]))
            continue
        F = _suffix_best(g, right, b, q - 1)
        t = np.arange(lo, n)
        U = V + g[t] + 2 * right[q - 1, t] + F[q - 1, np.minimum(t + b, n)]
        keep = U > best_value * (1 + rtol)
        if np.any(~keep):
            left_open = max(left_open, float(U[~keep].max(initial=0.0)))
        for i in np.argsort(U[keep]):  # best child last: popped first
            s = int(t[keep][i])
            stack.append((chosen + (s,), V + g[s], g + 2 * Y[s], q - 1, s + b))
    attained = float(Y[np.ix_(best_pattern, best_pattern)].sum()) if best_pattern else 0.0
    return float(max(best_value, left_open, attained)), attained, best_pattern, nodes
