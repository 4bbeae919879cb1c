"""A strategy invariant under a workload's cell symmetries, held by its Gram's blocks (see
:mod:`mmopt.structured.orbit_maxvar`).

Notation: see README. X = AᵀA is ⊕_c X_c ⊗ I on the symmetry blocks of :mod:`mmopt.structured.orbits`; in the
cell basis X = Σ_c K_c (X_c ⊗ I) K_cᵀ with K_c = ⊗ⱼ (Uⱼ for a trivial attribute, an orthonormal basis of the
orbit's zero-sum vectors for a standard one). Any A with AᵀA = X has the same errors; :meth:`OrbitStrategy.matrix`
returns the rows (X_c^{1/2} ⊗ I) K_cᵀ where the domain is small enough to hold them.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from mmopt._base.readonly import read_only
from mmopt.structured.orbits import Orbits

__all__ = ["OrbitStrategy"]

#: cells up to which the dense Gram / matrix is built
DENSE_CELLS = 4_096


def _standard_basis(labels: np.ndarray, orbit: int) -> np.ndarray:
    """Orthonormal basis (n × (k − 1)) of the vectors supported on ``orbit`` that sum to 0 (Helmert's)."""
    cells = np.flatnonzero(labels == orbit)
    k = len(cells)
    H = np.zeros((len(labels), k - 1))
    for i in range(1, k):  # column i: 1 on the first i cells, −i on cell i, normalised
        H[cells[:i], i - 1] = 1.0
        H[cells[i], i - 1] = -float(i)
        H[:, i - 1] /= math.sqrt(i * (i + 1))
    return H


def _trivial_basis(o: Orbits) -> np.ndarray:
    U = np.zeros((len(o.labels), o.r))
    U[np.arange(len(o.labels)), o.labels] = 1.0
    return U / np.sqrt(o.sizes)


@dataclass(frozen=True)
class OrbitStrategy:
    """The blocks X_c of a G-invariant strategy Gram with max_x X_xx ≤ 1 (so Δ₂ ≤ 1).

    Attributes
    ----------
    orbits : tuple of Orbits
        Each attribute's cell orbits.
    combinations : tuple of tuple of int
        Per block, per attribute: −1 (the trivial part) or the orbit of a standard part.
    blocks : tuple of ndarray or None
        X_c (None: nothing measured in that block).
    name : str
    """

    orbits: tuple[Orbits, ...]
    combinations: tuple[tuple[int, ...], ...] = field(repr=False)
    blocks: tuple = field(repr=False)
    name: str = "max_variance"

    def __post_init__(self):
        # optimize builds these; a block built by hand that is not symmetric PSD of its size was read three ways
        # (its gram raw, its matrix from one triangle, its variances from (X + Xᵀ)/2; a helper's probe)
        caller = "OrbitStrategy"
        # the structure first, as a saved file's is checked (mmopt.persist._orbit): an orbit index past the orbits
        # raised IndexError at sensitivity(), a one-cell orbit built a block of no rows, blocks=None a len() error
        # (a helper's audit)
        for what, value in (("blocks", self.blocks), ("combinations", self.combinations)):
            if not isinstance(value, tuple | list):
                raise TypeError(f"The '{what}' parameter of {caller} must be a tuple (one entry per combination). "
                                f"Got {type(value).__name__}.")
        for c in self.combinations:
            if not (isinstance(c, tuple | list) and len(c) == len(self.orbits)
                    and all(isinstance(k, int | np.integer) and not isinstance(k, bool) for k in c)
                    and all(k == -1 or (0 <= k < o.r and o.sizes[k] >= 2) for k, o in zip(c, self.orbits,
                                                                                       strict=True))):
                raise ValueError(f"The 'combinations' parameter of {caller} must hold, per attribute, −1 or the "
                                 f"index of an orbit of two or more cells ({len(self.orbits)} entries). Got "
                                 f"{c!r:.60}.")
        if len(self.blocks) != len(self.combinations):
            raise ValueError(f"The 'blocks' parameter of {caller} must hold one block per combination "
                             f"({len(self.combinations)}). Got {len(self.blocks)}.")
        for c, X in zip(self.combinations, self.blocks, strict=True):
            if X is None:
                continue
            p = math.prod(o.r for o, cj in zip(self.orbits, c, strict=True) if cj < 0)
            X = np.asarray(X)
            if np.iscomplexobj(X) or X.dtype == object:  # a complex block lost its imaginary part silently
                raise TypeError(f"The 'blocks' parameter of {caller} must hold real matrices. Got {X.dtype} for "
                                f"combination {c}.")
            if X.shape != (p, p) or not np.all(np.isfinite(X)):
                raise ValueError(f"The 'blocks' parameter of {caller} must hold finite {p}×{p} matrices for "
                                 f"combination {c}. Got shape {X.shape}.")
            scale = float(np.abs(X).max(initial=0.0))
            if np.abs(X - X.T).max(initial=0.0) > 1e-12 * scale or (
                    p and np.linalg.eigvalsh((X + X.T) / 2)[0] < -1e-9 * scale):
                raise ValueError(f"The 'blocks' parameter of {caller} must hold symmetric positive semidefinite "
                                 f"matrices (strategy Grams). Combination {c} holds one that is not.")
        # read-only copies: Δ and every variance are read from them (an edit in place raised the error 70 % and Δ
        # 41 % with the report unchanged; a helper's probe)
        object.__setattr__(self, "blocks", tuple(None if X is None else read_only(X) for X in self.blocks))

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(o.labels) for o in self.orbits)

    @property
    def orbit_shape(self) -> tuple[int, ...]:
        return tuple(o.r for o in self.orbits)

    @property
    def domain_size(self) -> int:
        return math.prod(self.shape)

    @property
    def n_rows(self) -> int:
        """The number of measurements :func:`mmopt.release` takes: one per coordinate of every measured block,
        ∏ⱼ (rⱼ for a trivial part, |orbit cⱼ| − 1 for a standard one) each (module orbit_release)."""
        return sum(math.prod(o.r if cj < 0 else int(o.sizes[cj]) - 1 for o, cj in zip(self.orbits, c, strict=True))
                   for c, Xc in zip(self.combinations, self.blocks, strict=True) if Xc is not None)

    def sensitivity(self, norm: str = "l2") -> float:
        """Δ₂ = √(max_x X_xx), as the other strategies' ``sensitivity(norm)``; a Gaussian-noise strategy, so
        ``norm`` must be "l2"."""
        if norm != "l2":
            raise ValueError(f"The 'norm' parameter of OrbitStrategy.sensitivity must be 'l2' (an OrbitStrategy is a "
                             f"Gaussian-noise strategy: its L1 sensitivity has no closed form here). Got {norm!r}.")
        return math.sqrt(self.sensitivity_squared())

    def sensitivity_squared(self) -> float:
        """Δ₂² = max_x X_xx (every cell of an orbit has the same diagonal)."""
        from mmopt.structured.orbit_maxvar import cell_diagonal
        return float(cell_diagonal(self, self.blocks).max())

    def block_bases(self, c: tuple[int, ...]) -> list[np.ndarray]:
        """Bⱼ per attribute for block c (K_c = ⊗ⱼ Bⱼ): the orbit-indicator basis U for a trivial part (cⱼ < 0), else
        the Helmert basis of orbit cⱼ's zero-sum vectors."""
        return [self._trivial[j] if cj < 0 else _standard_basis(o.labels, cj)
                for j, (o, cj) in enumerate(zip(self.orbits, c, strict=True))]

    @functools.cached_property
    def _trivial(self) -> list[np.ndarray]:
        """U per attribute, built once and shared by every block (n × r each: the tree's can be large)."""
        return [_trivial_basis(o) for o in self.orbits]

    def _cell_blocks(self, root: bool):
        """(Y, K) per measured block c, K = K_c (N × p_c) and Y = X_c ⊗ I (``root``: X_c^{1/2} ⊗ I) in the order of
        K's columns, so that X = Σ_c K Y Kᵀ; ``ValueError`` past :data:`DENSE_CELLS` cells."""
        N = self.domain_size
        if N > DENSE_CELLS:
            raise ValueError(f"OrbitStrategy: the domain has {N:,} cells, more than the {DENSE_CELLS:,} a dense Gram "
                             "or matrix is built for; use the blocks (OrbitStrategy.blocks).")
        for c, Xc in zip(self.combinations, self.blocks, strict=True):
            if Xc is None:
                continue
            if root:  # the block's own PSD root: p_c² work where X^{1/2} of the whole cost an N×N eigh
                lam, V = np.linalg.eigh(Xc)
                Xc = (V * np.sqrt(np.maximum(lam, 0.0))) @ V.T
            bases = self.block_bases(c)
            dims = [B.shape[1] for B in bases]
            trivial = [j for j, cj in enumerate(c) if cj < 0]
            standard = [j for j, cj in enumerate(c) if cj >= 0]
            m = math.prod(dims[j] for j in standard)
            # X_c ⊗ I in the order (trivial attributes, standard attributes), then in attribute order
            Y = np.kron(Xc, np.eye(m)).reshape([dims[j] for j in trivial + standard] * 2)
            order = [(trivial + standard).index(j) for j in range(len(c))]
            Y = Y.transpose(order + [len(c) + i for i in order]).reshape(math.prod(dims), -1)
            K = bases[0]
            for B in bases[1:]:
                K = np.kron(K, B)
            yield Y, K

    @property
    def gram(self) -> np.ndarray:
        """X = AᵀA in the cell basis (C order), a property as on the dense Strategy; ``ValueError`` past
        :data:`DENSE_CELLS` cells."""
        N = self.domain_size
        X = np.zeros((N, N))
        for Y, K in self._cell_blocks(root=False):
            X += K @ Y @ K.T
        return X

    @property
    def matrix(self) -> np.ndarray:
        """A (:attr:`n_rows` × N) with AᵀA = X, for domains of ≤ :data:`DENSE_CELLS` cells; a property, as the dense
        Strategy's. Row block c is (X_c^{1/2} ⊗ I) K_cᵀ: one row per coordinate of every measured block, as
        :func:`mmopt.release` measures (at 4,032 cells X^{1/2} by an N×N eigh took ~20 s)."""
        rows = [Y @ K.T for Y, K in self._cell_blocks(root=True)]
        return np.vstack(rows) if rows else np.zeros((0, self.domain_size))
