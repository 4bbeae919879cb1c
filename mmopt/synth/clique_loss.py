"""The estimators' loss on one measured clique in an orthonormal residual basis: one transform, not 2^|M| marginals.

Notation: see README and :mod:`mmopt.synth.joint`. The junction and joint fits minimise, per measured clique M,

    f_M(μ_M) = ½ Σ_{∅ ≠ S ⊆ M measured} ‖C_S A_S μ_M − r̂_S‖² / v_S,

A_S the marginal onto S, C_S = ⊗_{i∈S} C_i the residual projection (C_i = I − 11ᵀ/n_i), r̂_S the measured residual
(in the range of C_S). Why a basis: Q_i, orthonormal with first column 1/√n_i, diagonalises both C_i (0 on the
first column, 1 on the rest) and 11ᵀ (n_i on the first). In Z = (⊗_i Q_iᵀ) μ_M every entry lies in exactly one
block U (the axes whose index is ≥ 1, the others at index 0), and (⊗_{i∈S} Q_iᵀ) C_S A_S μ_M is block S of Z
scaled by s_S = Π_{i∈M∖S} √n_i (summing an axis is √n_i times its first coefficient). So

    f_M = ½ Σ_U w_U ‖s_U Z_U − ẑ_U‖²,      ∇f_M = (⊗_i Q_i)(w ⊙ s ⊙ (s ⊙ Z − ẑ)),

with ẑ_U = (⊗_{i∈U} Q_iᵀ) r̂_U on block U and w_U = 1/v_U (0 where U is not measured): |M| mode products per
evaluation instead of a marginal and a centring per subset, the same numbers to round-off (the test checks them
against the definition).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

__all__ = ["CliqueLoss", "clique_loss"]

#: Cliques of at most this many cells are transformed by one dense product (⊗ Q_a is then at most 2 MB, and one
#: matrix product costs less than a mode product per axis on AIM's small cliques).
DENSE_CELLS = 512


@dataclass(frozen=True, eq=False)
class CliqueLoss:
    """Σ_M f_M and its gradients (module docstring) for the measured cliques: call it on [μ_M] (counts).

    Cliques of one shape share their bases and scale and are transformed as one stacked array (why: AIM's cliques
    are many and small, e.g. 116 binary pairs at d = 100, where a mode product per clique is all overhead)."""

    count: int
    groups: tuple   # (indices of the cliques, their shape, scale, target (stacked), weight (stacked))

    def __call__(self, mus) -> tuple:
        loss, grads = 0.0, [None] * self.count
        for index, n, scale, target, weight in self.groups:
            X = np.stack([mus[j] for j in index])
            bases = tuple(_basis(k) for k in n)
            dense = _dense(n) if X[0].size <= DENSE_CELLS else None
            Z = _transform(X, bases, transpose=True, dense=dense)
            D = scale * Z - target
            WD = weight * D
            loss += 0.5 * float(np.vdot(WD, D))
            G = _transform(WD * scale, bases, transpose=False, dense=dense)
            for b, j in enumerate(index):
                grads[j] = G[b]
        return loss, grads


def clique_loss(cliques, shape, values: dict, variances: dict, sets) -> CliqueLoss:
    """The loss of clique ``cliques[j]``'s measured sets ``sets[j]`` (non-empty, each inside it) with residuals
    ``values`` and variances ``variances`` (:class:`mmopt.synth.residuals.ResidualEstimates`' fields)."""
    by_shape: dict = {}
    for j, M in enumerate(cliques):
        by_shape.setdefault(tuple(int(shape[i]) for i in M), []).append(j)
    groups = []
    for n, index in by_shape.items():
        bases = tuple(_basis(k) for k in n)
        scale = np.zeros(n)
        for U_mask in np.ndindex(*(2,) * len(n)):  # s_U on every block, measured or not (w = 0 there)
            block = tuple(slice(1, None) if b else 0 for b in U_mask)
            scale[block] = math.sqrt(math.prod(k for k, b in zip(n, U_mask, strict=True) if not b))
        target, weight = np.zeros((len(index),) + n), np.zeros((len(index),) + n)
        for b, j in enumerate(index):
            M = tuple(cliques[j])
            for U in map(tuple, sets[j]):
                block = (b,) + tuple(slice(1, None) if i in U else 0 for i in M)
                z = _transform(np.asarray(values[U], dtype=float)[None], tuple(bases[M.index(i)] for i in U),
                               transpose=True)[0]
                target[block] = z[(slice(1, None),) * len(U)]
                weight[block] = 1.0 / variances[U]
        groups.append((tuple(index), n, scale, target, weight))
    return CliqueLoss(len(cliques), tuple(groups))


@functools.lru_cache(maxsize=64)
def _basis(n: int) -> np.ndarray:
    """An orthonormal n × n basis whose first column is 1/√n (QR of [1, e_1, …, e_{n−1}], signs fixed)."""
    Q, R = np.linalg.qr(np.column_stack([np.ones(n), np.eye(n)[:, : n - 1]]))
    Q = Q * np.sign(np.diag(R))
    Q.setflags(write=False)
    return Q


@functools.lru_cache(maxsize=256)
def _dense(n: tuple) -> np.ndarray:
    """⊗_a Q_a (Q_a = :func:`_basis` (n_a)) as one matrix (row-major cells): vec(X) ↦ vec(X)·(⊗ Q_a) is
    (⊗ Q_aᵀ) X."""
    K = np.ones((1, 1))
    for k in n:
        K = np.kron(K, _basis(k))
    K.setflags(write=False)
    return K


def _transform(X: np.ndarray, bases: tuple, *, transpose: bool, dense=None) -> np.ndarray:
    """(⊗_a Q_aᵀ) X (``transpose``) or (⊗_a Q_a) X on axes 1, 2, … of a stack X (axis 0 the clique): one
    product with ``dense`` (:func:`_dense`) if given, else one mode product per axis."""
    if dense is not None:
        flat = X.reshape(X.shape[0], -1)
        return (flat @ dense if transpose else flat @ dense.T).reshape(X.shape)
    for a, Q in enumerate(bases, start=1):
        X = np.moveaxis(np.tensordot(Q.T if transpose else Q, X, axes=(1, a)), 0, a)
    return X
