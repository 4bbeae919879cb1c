"""The cell orbits of one attribute of a union of Kronecker products: the cells its queries cannot tell apart.

Notation: see README. Attribute j has n cells and the distinct factors F (rows × n) the workload's terms put on
it. Two cells a, b are *twins* when swapping columns a and b of every F only permutes F's rows (the transposition
(a b) maps each term's queries onto themselves). Twins are an equivalence (the transpositions of a connected graph
generate the symmetric group on its vertices), and its classes, the *orbits* O₁ … O_r of sizes k₁ … k_r, carry
the group G = S_{k₁} × … × S_{k_r}. The max-variance problem is convex and G-invariant, so averaging any strategy
Gram X over G keeps it feasible and no worse: an optimum lies in G's commutant, which splits ℝⁿ into

* the *trivial* part, spanned by uᵢ = 1_{Oᵢ}/√kᵢ, on which X acts as an r×r matrix, and
* for each orbit with kᵢ ≥ 2 its *standard* part {x supported on Oᵢ, Σx = 0} (dimension kᵢ − 1), on which X acts
  as one scalar (Schur's lemma; the standard parts of different orbits are inequivalent irreducibles).

A row f of F enters the max-variance problem only through its trivial coordinates a = Uᵀf (U = [u₁ … u_r]) and
its standard energies sᵢ = ‖Pᵢ f‖² = Σ_{x∈Oᵢ} f_x² − (Σ_{x∈Oᵢ} f_x)²/kᵢ. Source: the symmetry reduction of
semidefinite programs (Gatermann & Parrilo, J. Pure Appl. Algebra 2004; de Klerk, Math. Program. 2010), applied
to the matrix mechanism's Gram as in the ResidualPlanner's marginal algebra (Xiao et al., 2023).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from mmopt.dense.profile import power_of_two_scale

__all__ = ["Orbits", "attribute_orbits", "row_signatures"]


@dataclass(frozen=True)
class Orbits:
    """One attribute's orbits: ``labels[x]`` the orbit of cell x (orbits numbered by their first cell), ``sizes``.

    Examples
    --------
    >>> o = attribute_orbits([np.array([[1., 1., 0.], [0., 0., 1.]])])   # cells 0 and 1 are twins
    >>> o.labels.tolist(), o.sizes.tolist()
    ([0, 0, 1], [2, 1])
    """

    labels: np.ndarray = field(repr=False)
    sizes: np.ndarray

    @property
    def r(self) -> int:
        return len(self.sizes)

    @property
    def standard(self) -> np.ndarray:
        """The orbits with a standard part (kᵢ ≥ 2)."""
        return np.flatnonzero(self.sizes >= 2)

    def trivial(self, F: np.ndarray) -> np.ndarray:
        """Uᵀ f for each row f of F: (rows × r), the orbit sums over √kᵢ."""
        sums = np.zeros((F.shape[0], self.r))
        np.add.at(sums.T, self.labels, F.T)
        return sums / np.sqrt(self.sizes)

    def energies(self, F: np.ndarray) -> np.ndarray:
        """‖Pᵢ f‖² for each row f and orbit i: (rows × r); zero on singleton orbits (no standard part)."""
        sums, squares = np.zeros((F.shape[0], self.r)), np.zeros((F.shape[0], self.r))
        np.add.at(sums.T, self.labels, F.T)
        np.add.at(squares.T, self.labels, (F * F).T)
        E = np.maximum(squares - sums**2 / self.sizes, 0.0)  # ≥ 0 exactly; rounding could dip below
        # a row constant on an orbit has no standard part: its computed energy is cancellation (2.2e-16 for 0.7 on
        # three cells), which made blocks no query needs (12 rows where 4 serve; a helper's audit). Exact zero
        # where the row is constant on the orbit, read from its entries, not from a tolerance
        lo, hi = np.full_like(sums, np.inf), np.full_like(sums, -np.inf)
        np.minimum.at(lo.T, self.labels, F.T)
        np.maximum.at(hi.T, self.labels, F.T)
        E[lo == hi] = 0.0
        return E


def _permutes_rows(F: np.ndarray, a: int, b: int) -> bool:
    """Whether swapping columns a and b of F maps its rows onto themselves (as a multiset)."""
    moved = np.flatnonzero(F[:, a] != F[:, b])  # only these rows change
    R = F[moved]
    S = R.copy()
    S[:, [a, b]] = S[:, [b, a]]
    return sorted(r.tobytes() for r in R) == sorted(r.tobytes() for r in S)


def _key(F: np.ndarray, sums: np.ndarray, x: int) -> bytes:
    """A twin invariant of cell x: the sorted pairs (F_rx, Σ_y F_ry) over the rows with F_rx ≠ 0 (a swap of twins
    maps each such row to one with the same entries, so the same sum)."""
    rows = np.flatnonzero(F[:, x])
    return np.sort(np.stack([F[rows, x], sums[rows]]).T.copy().view(np.complex128).ravel()).tobytes()


def attribute_orbits(factors) -> Orbits:
    """The orbits of the cells of one attribute under the transpositions every factor in ``factors`` admits.

    Parameters
    ----------
    factors : sequence of ndarray (rows × n)
        The distinct factor matrices on this attribute (one per distinct factor object of the workload's terms).

    Returns
    -------
    Orbits
    """
    factors = [np.asarray(F, dtype=float) for F in factors]
    n = factors[0].shape[1]
    # a cheap necessary condition first (each factor's _key); the full check only within equal keys
    # exactly rounded row sums (fsum): a twin swap permutes a row's entries, and a plain sum of (0.1, 0.2, 0.3)
    # in another order rounds differently, which split true orbits (a helper's probe)
    sums = [np.array([math.fsum(row) for row in F]) for F in factors]
    keys = [tuple(_key(F, t, x) for F, t in zip(factors, sums, strict=True)) for x in range(n)]
    # twins are an equivalence, so a cell joins the orbit of the first representative it is a twin of, and
    # starts an orbit when it is a twin of none (it is then a twin of no member): n × orbits checks, not n²
    labels, representatives, count = np.empty(n, dtype=int), {}, 0
    for x in range(n):
        reps = representatives.setdefault(keys[x], [])
        for rep in reps:
            if all(_permutes_rows(F, rep, x) for F in factors):
                labels[x] = labels[rep]
                break
        else:  # orbits are numbered by their first cell
            labels[x], count = count, count + 1
            reps.append(x)
    return Orbits(labels, np.bincount(labels, minlength=count))


def row_signatures(orbits: Orbits, F: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (a, s) of F's rows: (a per class, s per class, class of each row, rows per class).

    Rows with equal trivial coordinates and standard energies have equal variance under every G-invariant X.
    """
    F = np.asarray(F, dtype=float)
    a, s = orbits.trivial(F), orbits.energies(F)
    # rounding: equal rows' float sums may differ in the last bits. Relative to F's scale (a in its units, s in its
    # square's): rounded absolutely, a factor of entries ~1e-7 had s ~1e-14 → 0, so rows of different energies
    # shared a class and one variance (the reduced program then optimised other queries than the workload's)
    e = power_of_two_scale(F)  # 2^e ≥ max|F|: exact scalings, no overflow
    key = np.round(np.hstack([np.ldexp(a, -e), np.ldexp(s, -2 * e)]), 12)
    _, first, inverse, counts = np.unique(key, axis=0, return_index=True, return_inverse=True, return_counts=True)
    return a[first], s[first], inverse.ravel(), counts
