"""How the chain dual's Markov chain is carried from b offsets to 2b: the next level's start between solved
levels and the lifted chains past the finest one (:mod:`mmopt.participation.chain_dual`, whose variables these are:
the first marginal's logits, the k − 1 transition logits and R's factor L, :func:`split_variables`).

Any weights give a certified bound (the chain dual's argument), so nothing here bears on correctness: the carry only
starts the finer level nearer its optimum (what it gains is measured in :mod:`mmopt.family.training_separation`).
"""

from __future__ import annotations

import numpy as np

from mmopt.participation._chain_weights import marginals

__all__ = ["LIFT_GAMMA", "fit_columns", "prolong", "split_first", "split_rows", "split_variables"]


LIFT_GAMMA = 0.5  # the marginals' extrapolation per level past the finest solved one (0.25 … 1 within 0.01 %)


def prolong(x, b: int, k: int, r: int, rng, anchors, ahead: int = 1) -> np.ndarray:
    """b → 2b offsets, between solved levels (the next level's start) and at the lifted ones (``ahead`` = 1, 2, …
    levels past the finest solved one).

    Rows: each Q_i row's cells split self-similarly (:func:`split_rows`), p_0's first cell too (:func:`split_first`).
    Marginals: the solved levels' marginals p_i drift with the level (prefix sums, k = 8: E[o_0]/b 0.24, 0.26, 0.28 at
    256, 512 and 1,024 steps), so the fine chain is fitted to the last solved level's marginals plus
    :data:`LIFT_GAMMA`·``ahead`` times their change from the level before, at that level's resolution and shared
    within its cells as the split marginals: p_0 is set to it, then each Q_i ← Q_i diag(v_i) row-normalised with v_i
    by iterative proportional fitting (:func:`fit_columns`), i = 0 … k − 2 in turn. Any weights give a bound: the
    fit only moves the carried chain nearer the finer optimum. R's rows repeated and perturbed (R stays definite)."""
    a0, A, L = split_variables(x, b, k, r)
    L2 = np.repeat(L, 2, axis=0)
    L2 += 1e-2 * float(np.abs(L).mean()) * rng.standard_normal(L2.shape)
    Q2 = split_rows(A, b)
    p_now = marginals(a0, A, b, k)
    shape = np.repeat(p_now, 2, axis=1) / 2
    shape[0] = split_first(p_now[0])
    bf, xf = anchors[-1]
    pf = marginals(*split_variables(xf, bf, k, r)[:2], bf, k)
    if len(anchors) == 2:
        bc, xc = anchors[0]
        pc = marginals(*split_variables(xc, bc, k, r)[:2], bc, k)
        Pf = pf.reshape(k, bc, bf // bc).sum(axis=-1)
        T = Pf + LIFT_GAMMA * ahead * (Pf - pc)
    else:
        bc, T = bf, pf
    T = np.maximum(T, 1e-12 * T.max(axis=1, keepdims=True))
    T /= T.sum(axis=1, keepdims=True)
    cells = shape.reshape(k, bc, -1)
    target = (cells / np.maximum(cells.sum(axis=-1, keepdims=True), 1e-300) * T[:, :, None]).reshape(k, 2 * b)
    p = target[0]
    for i in range(k - 1):
        Q2[i] = fit_columns(Q2[i], p, target[i + 1])
        p = p @ Q2[i]
    return np.concatenate([np.log(np.maximum(target[0], 1e-300)), np.log(np.maximum(Q2, 1e-300)).ravel(),
                           L2.ravel()])


def _power_beta(first, second):
    """β = log₂((q_0 + q_1)/q_0) of the power law (cumulative ∝ j^β) through a row's first two cells q_0, q_1, in
    [0.05, 1] (1 where q_0 = 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        beta = np.log2(np.where(first > 0, (first + second) / first, 2.0))
    return np.clip(np.nan_to_num(beta, nan=1.0), 0.05, 1.0)


def _power_split(beta, j):
    """The share of cell j = [j, j + 1) in its left half under a cumulative mass ∝ t^β."""
    return ((j + 0.5) ** beta - j ** beta) / ((j + 1.0) ** beta - j ** beta)


def split_rows(A, b: int) -> np.ndarray:
    """Q_i's fine rows (probabilities, 2b × 2b) from the logits at b offsets. Near o_{i+1} = o_i a row's mass q_j at
    o_{i+1} = o_i + j follows a power law (cumulative ∝ j^β: from 512 to 1,024 steps the optimum put 0.68–0.8 of a
    coarse row's first cell in its first fine cell, 0.55–0.6 of the second's), β = log₂((q_0 + q_1)/q_0) per row in
    [0.05, 1]; cell j's mass goes to fine cells 2j and 2j + 1 in that law's shares, and fine rows 2o and 2o + 1 both
    take the profile (cut at their end, renormalised)."""
    m = A.shape[0]
    rows, cols = np.triu_indices(b)
    Z = np.full((m, b, b), -np.inf)
    Z[:, rows, cols] = A[:, rows, cols]
    E = np.exp(Z - Z.max(axis=-1, keepdims=True))
    q = E / E.sum(axis=-1, keepdims=True)
    D = np.zeros((m, b, b))  # D[:, o, j] = q[:, o, o + j]
    D[:, rows, cols - rows] = q[:, rows, cols]
    beta = _power_beta(D[:, :, 0], D[:, :, 1]) if b > 1 else np.ones((m, b))
    S = _power_split(beta[:, :, None], np.arange(b)[None, None, :])
    fine = np.zeros((m, b, 2 * b))
    fine[:, :, 0::2] = S * D
    fine[:, :, 1::2] = (1 - S) * D
    fine = np.repeat(fine, 2, axis=1)
    rows2, cols2 = np.triu_indices(2 * b)
    Q2 = np.zeros((m, 2 * b, 2 * b))
    Q2[:, rows2, cols2] = fine[:, rows2, cols2 - rows2]
    return Q2 / Q2.sum(axis=-1, keepdims=True)


def split_first(p) -> np.ndarray:
    """p_0 at 2b offsets: each cell halved, but the first split by the power law of the first two."""
    f = np.repeat(p, 2) / 2
    if len(p) > 1:
        s = _power_split(float(_power_beta(p[0], p[1])), 0)
        f[0], f[1] = s * p[0], (1 - s) * p[0]
    return f


def fit_columns(Q, p, t, iterations: int = 100) -> np.ndarray:
    """Q diag(v) row-normalised, v fitted (iterative proportional fitting) so that p times it ≈ t; a target out of
    reach (t must not put mass left of p's) is approached as far as the iterations go."""
    v = np.ones(Q.shape[1])
    for _ in range(iterations):
        got = ((p / (Q @ v)) @ Q) * v
        if np.abs(got - t).sum() <= 1e-12:
            break
        # each step's ratio capped, v kept within float64: a target far out of reach overflowed v to inf (a review)
        v *= np.clip(np.where(got > 0, t / np.maximum(got, 1e-300), 1.0), 1e-3, 1e3)
        v /= v.max()
        v = np.maximum(v, 1e-250)
    F = Q * v[None, :]
    F /= F.sum(axis=1, keepdims=True)
    return F if np.all(np.isfinite(F)) else Q


def split_variables(x, b: int, k: int, r: int):
    """The chain dual's variable vector as (p_0's logits (b), the transitions' logits (k − 1, b, b), L (k·b, r))."""
    m = b + (k - 1) * b * b
    return x[:b], x[b:m].reshape(k - 1, b, b), x[m:].reshape(k * b, r)
