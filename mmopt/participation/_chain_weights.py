"""The chain dual's pattern weights: a Markov chain over the offsets of a pattern's steps, P_st = Pr(s, t ∈ π), and
the gradient of tr(Y P) in the chain's logits (:mod:`mmopt.participation.chain_dual`, whose notation this is).

p_0 and each Q_i's rows are softmaxes of logits floored at ε = :data:`FLOOR` of the uniform distribution (so no
step's weight vanishes); Q_i is upper-triangular (o_i ≤ o_{i+1}: the separation). P's block (i, i) is diag(p_i),
block (i, j) diag(p_i) Q_i ⋯ Q_{j−1}: O(k² b³) to form and to differentiate.
"""

from __future__ import annotations

import numpy as np

__all__ = ["FLOOR", "chain", "chain_gradient", "marginals"]

FLOOR = 1e-4  # ε of the chain dual's module docstring


def _softmaxes(a0, A, b: int, k: int):
    """s0, Qs (the softmaxes), Q (floored), the marginals p_i and the mask: O(k b²)."""
    mask = np.triu(np.ones((b, b), dtype=bool))
    share = mask / mask.sum(axis=1, keepdims=True)
    e = np.exp(a0 - a0.max())
    s0 = e / e.sum()
    p0 = (1 - FLOOR) * s0 + FLOOR / b
    Z = np.where(mask, A, -np.inf)
    E = np.exp(Z - Z.max(axis=-1, keepdims=True))
    Qs = E / E.sum(axis=-1, keepdims=True)
    Q = (1 - FLOOR) * Qs + FLOOR * share
    p = [p0]
    for i in range(k - 1):
        p.append(p[-1] @ Q[i])
    return s0, Qs, Q, p, mask


def marginals(a0, A, b: int, k: int) -> np.ndarray:
    """The marginals p_i (k × b) of the chain with logits a0, A, without P's O(k² b³) products (as :func:`chain`)."""
    return np.array(_softmaxes(a0, A, b, k)[3])


def chain(a0, A, b: int, k: int):
    """p_0, Q (floored softmaxes), the marginals p_i, the products F_ij = Q_i ⋯ Q_{j−1} and P."""
    s0, Qs, Q, p, mask = _softmaxes(a0, A, b, k)
    F = {}
    for i in range(k):
        cur = None
        for j in range(i + 1, k):
            cur = Q[j - 1] if cur is None else cur @ Q[j - 1]
            F[i, j] = cur
    P = np.zeros((k * b, k * b))
    for i in range(k):
        rows = slice(i * b, (i + 1) * b)
        P[rows, rows] = np.diag(p[i])
        for j in range(i + 1, k):
            B = p[i][:, None] * F[i, j]
            P[rows, j * b:(j + 1) * b] = B
            P[j * b:(j + 1) * b, rows] = B.T
    return s0, Qs, Q, p, F, P, mask


def chain_gradient(Y, s0, Qs, Q, p, F, mask, b: int, k: int):
    """The gradient of tr(Y P) in the logits (reverse mode through P's blocks, then the marginals)."""
    def block(i, j):
        return Y[i * b:(i + 1) * b, j * b:(j + 1) * b]
    pbar = [np.diag(block(i, i)).copy() for i in range(k)]
    Qbar = np.zeros_like(Q)
    for i in range(k):
        Fbar = {}
        for j in range(i + 1, k):
            Yij = block(i, j)
            pbar[i] += 2 * (Yij * F[i, j]).sum(axis=1)
            Fbar[j] = 2 * p[i][:, None] * Yij
        for j in range(k - 1, i, -1):
            if j - 1 > i:  # F_ij = F_{i,j−1} Q_{j−1}
                Qbar[j - 1] += F[i, j - 1].T @ Fbar[j]
                Fbar[j - 1] += Fbar[j] @ Q[j - 1].T
            else:
                Qbar[j - 1] += Fbar[j]
    for i in range(k - 2, -1, -1):  # p_{i+1} = p_i Q_i
        pbar[i] = pbar[i] + Q[i] @ pbar[i + 1]
        Qbar[i] += np.outer(p[i], pbar[i + 1])
    a0bar = (1 - FLOOR) * s0 * (pbar[0] - s0 @ pbar[0])
    Abar = (1 - FLOOR) * Qs * (Qbar - (Qs * Qbar).sum(axis=-1, keepdims=True))
    return a0bar, np.where(mask, Abar, 0.0)
