"""The largest query variance (over its target) of a union of Kronecker products, minimised in the commutant of
its cell symmetries and certified by the γ₂ dual: sf1 (29,440 cells) in blocks of at most 416.

Notation: see README and :mod:`mmopt.structured.orbits`. Attribute j has orbits of sizes k (r_j of them); a
*combination* c picks, per attribute, the trivial part or the standard part of one orbit with k ≥ 2. A G-invariant
Gram X is a block X_c (on ⊗ of the trivial coordinates of c's trivial attributes, identity on its standard
parts) per c. Query q, a row w = ⊗ⱼ fⱼ of a term with weight ω, has in block c the vector b = ⊗_{trivial j} Uⱼᵀfⱼ
and the energy s = ω² ∏_{standard j} ‖P fⱼ‖², so

    v_q(X) = Σ_c s_c b_cᵀ X_c⁺ b_c,       X_xx = Σ_c tr(X_c E_{o(x),c})  (constant on cell orbits o),

with E_{o,c} = ⊗_{trivial j} e_{oⱼ}e_{oⱼ}ᵀ/k_{oⱼ} · ∏_{standard j} [oⱼ = c_j](1 − 1/k_{oⱼ}).

**Dual.** min_X max_q v_q/τ_q s.t. diag X ≤ 1 is γ₂(diag(τ)^{-1/2}W)², whose dual is the maximum over query
weights λ ∈ Δ and cell weights μ ∈ Δ of ‖Λ^{1/2} W̃ M^{1/2}‖²_* (Lee, Shraibman & Špalek, CCC 2008; the
factorisation-norm bound of the matrix mechanism, Edmonds, Nikolov & Ullman, STOC 2020). Any (λ, μ) is a lower
bound; with λ, μ constant on query classes and cell orbits the nuclear norm splits over the blocks:

    T(λ, μ) = Σ_c tr (D_c^{1/2} Ĝ_c D_c^{1/2})^{1/2},   Ĝ_c = Σ_q (λ_q/τ_q) s_q b_q b_qᵀ,  D_c = Σ_o μ_o E_{o,c},

and T² ≤ the optimum. T is concave and ½-homogeneous in each of λ, μ; its gradients are v_q(X)/(2τ_q) and
X_oo/2 at X_c = D_c^{-1/2}(D_c^{1/2}Ĝ_cD_c^{1/2})^{1/2}D_c^{-1/2} (Danskin), whose max_q v_q/τ_q · max_o X_oo is
an upper bound. Multiplicative weight updates (:func:`solve`, through :func:`mmopt.structured.gamma2.ascend`) raise T
until the two meet within ``tol``.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from mmopt._base.validation import check_allocation, check_int, check_real, check_vector
from mmopt.structured.gamma2 import RIDGE, ascend
from mmopt.structured.orbits import Orbits, attribute_orbits, row_signatures

__all__ = ["OrbitSolution", "Reduction", "reduce", "solve"]

#: the largest block X_c and the most combinations a reduction builds (else the caller falls back or refuses)
MAX_BLOCK, MAX_COMBINATIONS, MAX_QUERIES = 3_000, 20_000, 10_000_000

#: :func:`mmopt.structured.gamma2.ascend`'s stall test: a step gaining less than this share of the open gap halves η
#: (the floored weight of a query that does not bind crept past the plain test: 5 of 24 small random grouping sets
#: ended at 1.04–1.73× the SDP's optimum, 20,000 iterations no better than 1,000; a helper's audit)
STALL = 1e-3


@dataclass(frozen=True)
class Reduction:
    """A union of Kronecker products seen through its cell symmetries (module docstring)."""

    orbits: tuple[Orbits, ...]
    combinations: tuple[tuple[int, ...], ...]  # per attribute −1 (trivial part) or the orbit of a standard part
    rows: tuple[np.ndarray, ...] = field(repr=False)  # the query classes with a component in block c
    B: tuple[np.ndarray, ...] = field(repr=False)  # their √s·b (rows × r_c)
    query_class: np.ndarray = field(repr=False)  # the class of each query (workload row order)
    class_size: np.ndarray = field(repr=False)

    @property
    def n_classes(self) -> int:
        return len(self.class_size)

    @property
    def orbit_shape(self) -> tuple[int, ...]:
        return tuple(o.r for o in self.orbits)

    def block_size(self, c: tuple[int, ...]) -> int:
        return math.prod(o.r for o, cj in zip(self.orbits, c, strict=True) if cj < 0)


def _factor_matrix(F) -> np.ndarray:
    return np.asarray(F.explicit_matrix(), dtype=float)


def reduce(workload, caller: str = "optimize") -> Reduction:
    """The :class:`Reduction` of an :class:`~mmopt.structured.workloads.ImplicitWorkload`; ``ValueError`` before its
    blocks are allocated when they or its classes would be too many (the message says how many). The cell orbits it
    counts them by need each distinct factor's matrix (refused past the allocation limit by ``explicit_matrix``):
    prefix(9,000) ⊗ total(3) is refused after 1.3 GB and ~7 s; the query count is checked first."""
    if workload.n_queries > MAX_QUERIES:
        raise ValueError(f"{caller}: '{workload.name}' has {workload.n_queries:,} queries; the max-variance search in "
                         f"the commutant handles at most {MAX_QUERIES:,}.{_remedy(workload, caller, ())}")
    d = len(workload.shape)
    distinct = [{id(t.factors[j]): t.factors[j] for t in workload.terms} for j in range(d)]
    matrices = [{key: _factor_matrix(F) for key, F in dj.items()} for dj in distinct]
    orbits = tuple(attribute_orbits(list(mj.values())) for mj in matrices)
    combos = list(itertools.product(*[[-1, *o.standard.tolist()] for o in orbits]))
    largest = math.prod(o.r for o in orbits)
    if len(combos) > MAX_COMBINATIONS or largest > MAX_BLOCK or workload.n_queries > MAX_QUERIES:
        raise ValueError(f"{caller}: '{workload.name}' has {len(combos):,} symmetry blocks, the largest of "
                         f"{largest:,} (cell orbits per attribute {[o.r for o in orbits]}); the max-variance search "
                         f"in the commutant handles at most {MAX_COMBINATIONS:,} blocks of ≤ {MAX_BLOCK:,} and "
                         f"{MAX_QUERIES:,} queries.{_remedy(workload, caller, orbits, len(combos), largest)}")
    sig = [{key: row_signatures(orbits[j], F) for key, F in mj.items()} for j, mj in enumerate(matrices)]
    # the largest block's rows × columns, refused before it is built (with its scaled copy): all ranges of 64 ⊗ 32
    # cells in a union passed the counts above and asked numpy for 16.8 GiB (a review of plan's routes)
    peak = max(sum(math.prod(x[0].shape[0] if cj < 0 else x[1].shape[0] for x, cj in
                             zip((sig[j][id(F)] for j, F in enumerate(t.factors)), c, strict=True))
                   for t in workload.terms) * math.prod(o.r for o, cj in zip(orbits, c, strict=True) if cj < 0)
               for c in combos)
    check_allocation(2 * peak, what=f"the largest symmetry block of '{workload.name}'", caller=caller)
    per_term, query_class, sizes, start = [], [], [], 0
    for t in workload.terms:
        s = [sig[j][id(F)] for j, F in enumerate(t.factors)]
        dims = [len(x[3]) for x in s]
        per_term.append((t.weight, s, start))
        grid = np.ix_(*[x[2] for x in s])  # each row's class: its factors' classes, raveled in the term's grid
        query_class.append((np.ravel_multi_index(grid, dims) + start).ravel())
        sizes.append(functools.reduce(np.multiply.outer, [x[3] for x in s]).ravel())
        start += math.prod(dims)
    rows, B = [], []
    for c in combos:
        idx, blocks = [], []
        for weight, s, offset in per_term:
            b, scale = np.ones((1, 1)), np.full(1, weight)
            for (a, energy, _, _), cj in zip(s, c, strict=True):
                if cj < 0:
                    b = (b[:, None, :, None] * a[None, :, None, :]).reshape(b.shape[0] * a.shape[0], -1)
                    scale = np.repeat(scale, a.shape[0])
                else:
                    b = np.repeat(b, energy.shape[0], axis=0)
                    scale = (scale[:, None] * np.sqrt(energy[:, cj])[None, :]).ravel()
            vec = b * scale[:, None]
            keep = np.flatnonzero(np.einsum("ij,ij->i", vec, vec) > 0)
            idx.append(keep + offset)
            blocks.append(vec[keep])
        rows.append(np.concatenate(idx))
        B.append(np.vstack(blocks))
    return Reduction(orbits, tuple(combos), tuple(rows), tuple(B), np.concatenate(query_class),
                     np.concatenate(sizes).astype(float))


def _remedy(workload, caller: str, orbits, blocks: int = 0, largest: int = 0) -> str:
    """What the caller of a refused reduction can do instead (" …", or "" for a caller that cannot choose): the
    limits the reduction passed, the dense minimax of ≤ 4,096 cells, one target on one product, the total error."""
    from mmopt.structured._checks import DENSE_LIMIT
    if caller not in ("optimize", "plan"):  # (a release of a strategy planned for another workload: its own refusal)
        return ""
    out = []
    if largest > MAX_BLOCK:  # r₁·…·r_d, each attribute's cell orbits (cells no factor of it tells apart are one)
        many = sorted((j for j, o in enumerate(orbits) if o.r > 1), key=lambda j: -orbits[j].r)[:3]
        out.append(f"coarsen attribute(s) {', '.join(f'{j} ({orbits[j].r:,} cell orbits)' for j in many)} — fewer "
                   f"cells, or factors that tell fewer apart — until the product of the orbit counts, the largest "
                   f"block, is ≤ {MAX_BLOCK:,} (each step of the search costs about its cube)")
    if blocks > MAX_COMBINATIONS:  # ∏ⱼ (1 + attribute j's orbits of ≥ 2 cells)
        out.append("use fewer attributes with orbits of two cells or more (each multiplies the blocks by one plus "
                   "their number)")
    out.append(f"coarsen the domain to ≤ {DENSE_LIMIT:,} cells, where the dense minimax takes any workload")
    if len(workload.terms) == 1:  # orbit_union took it for its per-query targets (maxvar_routes.product_route)
        out.append("give every query one target: one Kronecker product with one target is solved factor by factor "
                   "at any size")
    if caller == "optimize":  # (plan has no objective: a budget for targets is a max-variance question)
        out.append("minimise the total squared error instead (objective='total')")
    return " Instead, " + "; or ".join(out) + "."


def _weights(red: Reduction, c: tuple[int, ...]) -> tuple[tuple, np.ndarray]:
    """(index of block c's slice of the cell-orbit tensor, E_{·,c}'s weights on that slice)."""
    index, w = [], np.ones(())
    for o, cj in zip(red.orbits, c, strict=True):
        if cj < 0:
            index.append(slice(None))
            w = np.multiply.outer(w, 1.0 / o.sizes)
        else:
            index.append(cj)
            w = w * (1.0 - 1.0 / o.sizes[cj])
    return tuple(index), np.asarray(w)


def cell_diagonal(red: Reduction, blocks) -> np.ndarray:
    """X_oo on the cell-orbit tensor (shape r₁ × … × r_d) of the blocks X_c."""
    out = np.zeros(red.orbit_shape)
    for c, X in zip(red.combinations, blocks, strict=True):
        if X is not None:
            index, w = _weights(red, c)
            out[index] += np.diag(X).reshape(w.shape) * w
    return out


def variances(red: Reduction, blocks) -> np.ndarray:
    """v_q(X) per query class, exactly from the blocks (+inf outside X's range; :func:`_variances`'s checks)."""
    from mmopt.search.max_variance import _variances
    v = np.zeros(red.n_classes)
    for rows, B, X in zip(red.rows, red.B, blocks, strict=True):
        if rows.size:
            v[rows] += np.inf if X is None else _variances(B, X)
    return v


@dataclass(frozen=True)
class OrbitSolution:
    """The blocks X_c (diag X ≤ 1), max_q v_q/τ_q, the certified lower bound T², status, weights, v per class."""

    blocks: tuple = field(repr=False)
    objective: float
    lower_bound: float
    status: str
    iterations: int
    class_variance: np.ndarray = field(repr=False)
    query_weights: np.ndarray = field(repr=False)
    cell_weights: np.ndarray = field(repr=False)
    history: tuple = field(default=(), repr=False)


def _evaluate(red: Reduction, lam: np.ndarray, mu: np.ndarray, inv_tau: np.ndarray):
    """T(λ, μ), X_c (unnormalised), v/τ per class and X_oo per cell orbit at normalised λ, μ."""
    T, blocks = 0.0, []
    v = np.zeros(red.n_classes)
    for c, rows, B in zip(red.combinations, red.rows, red.B, strict=True):
        if rows.size == 0:
            blocks.append(None)
            continue
        index, w = _weights(red, c)
        dc = (mu[index] * w).ravel()
        Y = B * np.sqrt(dc)[None, :]
        # H = D^{1/2} Ĝ D^{1/2} = MᵀM with M = (λ/τ)^{1/2} Y: M's singular values σ = √h resolve to eps·σ_max,
        # where eigh of H loses every h below eps·h_max, and with it the variance of the queries along them
        _, sigma, Vt = np.linalg.svd(Y * np.sqrt(lam[rows] * inv_tau[rows])[:, None], full_matrices=False)
        keep = sigma > sigma[0] * max(Y.shape) * np.finfo(float).eps
        sigma, Vt = sigma[keep], Vt[keep]
        T += float(np.sum(sigma))
        Z = (Y @ Vt.T) / np.sqrt(sigma)[None, :]
        v[rows] += np.einsum("ij,ij->i", Z, Z)
        blocks.append((Vt.T * sigma) @ Vt / np.sqrt(np.outer(dc, dc)))
    return T, blocks, v * inv_tau, cell_diagonal(red, blocks)


def solve(red: Reduction, targets: np.ndarray, *, tol: float = 1e-4, max_iterations: int = 1_000) -> OrbitSolution:
    """min over G-invariant X of max_q v_q/τ_q (``targets`` τ per query class), certified (module docstring).

    The weights move multiplicatively, λ_q ← λ_q (v_q/(τ_q T))^η and μ_o ← μ_o (X_oo/T)^η, renormalised: at the
    saddle point v_q/τ_q = T on λ's support and X_oo = T on μ's (Σλv/τ = Σμ X_oo = T by ½-homogeneity), so the
    ratios are 1 there. Measured on sf1: η = 2 reaches a 10⁻⁴ gap in about 130 steps (η = 1: 300; L-BFGS-B on
    log T: 5 % after 300). A step that lowers T halves η. Every step's T² and max v/τ · max X_oo are valid bounds,
    so the certificate holds whatever the iteration does.
    """
    caller = "orbit_maxvar.solve"
    tau = check_vector(targets, name="targets", caller=caller, length=red.class_size.size,
                         meaning="the workload's query classes")
    if not np.all(tau > 0):  # (finite already) 0 or a negative τ divided by 0, then failed inside the SVD
        raise ValueError(f"The 'targets' parameter of {caller} must be > 0 for every query class. Got a smallest "
                         f"of {tau.min():.3g}.")
    max_iterations = check_int(max_iterations, name="max_iterations", caller=caller)
    tol = check_real(tol, name="tol", caller=caller, low=0.0, low_open=True)
    inv_tau = 1.0 / tau
    cells = functools.reduce(np.multiply.outer, [o.sizes.astype(float) for o in red.orbits])
    lam, mu = red.class_size / red.class_size.sum(), cells / cells.sum()  # uniform over queries and cells

    def evaluate(lam, mu):
        T, blocks, v, diag = _evaluate(red, lam, mu, inv_tau)
        return T * T, T, v, diag, blocks  # λ, μ ∈ Δ: T² is a lower bound

    status, k, lower, best_weights, best, history = ascend(evaluate, lam, mu, eta=2.0, tol=tol,
                                                           max_iterations=max_iterations, stall=STALL)
    _, blocks, top = best
    # (1 − ε)X/max X_oo + εI on the measured blocks: diag ≤ 1 still, every variance at most 1/(1 − ε) times
    # X's, and no eigenvalue below ε, so the exact re-evaluation never meets a query outside X's range
    blocks = tuple(None if X is None else (1 - RIDGE) * X / top + RIDGE * np.eye(len(X)) for X in blocks)
    v = variances(red, blocks)  # re-evaluated exactly from the returned blocks
    objective = float(np.max(v * inv_tau)) * float(np.max(cell_diagonal(red, blocks)))  # Δ₂² = max X_xx
    return OrbitSolution(blocks, objective, lower, status, k, v, best_weights[0], best_weights[1], history)
