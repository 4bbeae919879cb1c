"""Shared pieces of the marginal-based algorithms (iReduct, DualQuery): attribute sets, tables on the domain, and a
non-negative table fitted to noisy marginals.

A marginal on the attribute set M (a sorted tuple of attribute indices) of a count table X of shape (n₁, …, n_d)
is X summed over the attributes not in M; its cells are indexed by the values of the attributes in M, in
increasing attribute order. One record lies in exactly one cell of every marginal: under add/remove of one
record at domain cell c, the cell π_M(c) of each marginal M moves by exactly 1 and no other cell moves.

:func:`fit_marginals` is post-processing: given noisy marginals ŷ_M with precisions P_M (1/variance, per cell)
and a total t ≥ 0, it minimises the weighted least-squares misfit

    f(p) = Σ_M Σ_j P_Mj (t·p_M(j) − ŷ_Mj)²   over the probability simplex p ≥ 0, Σ p = 1,

by entropic mirror descent (multiplicative weights, as in Private-PGM's estimation step, McKenna, Sheldon &
Miklau ICML 2019; its rate is O(1/k), slow for cells that must go to zero, whose mass decays like 1/k):
p ← p·exp(−α∇f), renormalised, with a backtracking step that doubles α each step, then halves it until
f(p⁺) ≤ f(p) + ⟨∇f, p⁺ − p⟩ + KL(p⁺‖p)/α. The step α = 1/L₁ with L₁ = 2t² max_c Σ_M P_{M,π_M(c)} always
passes (that L₁ bounds every Hessian entry, so f is L₁-smooth in ‖·‖₁, and ‖q − p‖₁² ≤ 2 KL(q‖p) by Pinsker),
so every step decreases f. f is convex, so the Frank–Wolfe gap ⟨∇f, p⟩ − min_c ∇f_c bounds f(p) − min f
from above: a certificate, reported as ``gap``. The estimate is t·p: non-negative, summing to t.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

__all__ = ["by_index", "check_marginals", "domain_max", "domain_sum", "expand", "fit_marginals", "project"]


def check_marginals(marginals, d: int, ways: Sequence[int], caller: str) -> tuple[tuple[int, ...], ...]:
    """The attribute sets as sorted tuples, without duplicates; default: every set of size in ``ways``."""
    if marginals is None:
        return tuple(M for k in ways for M in itertools.combinations(range(d), k))
    if isinstance(marginals, str | bytes) or not isinstance(marginals, Sequence) or len(marginals) == 0:
        raise TypeError(f"The 'marginals' parameter of {caller} must be a non-empty tuple of attribute-index tuples "
                        f"(e.g. ((0,), (0, 1))) or None. Got {marginals!r:.60}.")
    out = []
    for M in marginals:
        if isinstance(M, str | bytes) or not isinstance(M, Sequence) or len(M) == 0:
            raise TypeError(f"The 'marginals' parameter of {caller} must hold non-empty tuples of attribute "
                            f"indices. Got {M!r:.60}.")
        if not all(isinstance(a, int | np.integer) and not isinstance(a, bool) for a in M):
            raise TypeError(f"The 'marginals' parameter of {caller} must hold integer attribute indices. "
                            f"Got {M!r:.60}.")
        A = tuple(sorted(int(a) for a in M))
        if len(set(A)) != len(A) or A[0] < 0 or A[-1] >= d:
            raise ValueError(f"The 'marginals' parameter of {caller} must hold distinct attribute indices in "
                             f"[0, {d - 1}]. Got {tuple(M)!r:.60}.")
        if A not in out:
            out.append(A)
    return tuple(out)


def by_index(marginals, domain, caller: str):
    """``marginals`` with attribute names read as the ``domain``'s indices (records), as mst, aim and marginal_counts
    read them (:func:`mmopt.records.counts.check_sets`); unchanged without a domain or a list (dual_query and
    ireduct refused names with a domain given; a helper's audit)."""
    if domain is None or marginals is None or isinstance(marginals, str | bytes) or not isinstance(marginals,
                                                                                                   Sequence):
        return marginals
    from mmopt.records.counts import check_sets
    return check_sets(marginals, domain, caller=caller, name="marginals")


def project(X: np.ndarray, M: tuple) -> np.ndarray:
    """The marginal of X on M (axes in increasing attribute order)."""
    return X.sum(axis=tuple(i for i in range(X.ndim) if i not in M))


def expand(table: np.ndarray, M: tuple, shape: tuple) -> np.ndarray:
    """A table on M as an array broadcastable to ``shape`` (singleton axes off M)."""
    return np.reshape(table, [shape[i] if i in M else 1 for i in range(len(shape))])


def domain_sum(tables: dict, shape: tuple) -> np.ndarray:
    """S(c) = Σ_M tables[M][π_M(c)] for every domain cell c (a dense array of ``shape``)."""
    acc = np.zeros(shape)
    for M, t in tables.items():
        acc += expand(t, M, shape)
    return acc


def domain_max(tables: dict, shape: tuple) -> float:
    """max_c Σ_M tables[M][π_M(c)]: e.g. the generalised sensitivity Σ_M 1/b_{M,π_M(c)} of one record."""
    return float(domain_sum(tables, shape).max())


def _objective(p, t, noisy, precision, shape):
    f, g = 0.0, np.zeros(shape)
    for M, y in noisy.items():
        r = t * project(p, M) - y
        f += float((precision[M] * r * r).sum())
        g += expand(2.0 * t * precision[M] * r, M, shape)
    return f, g


def fit_marginals(noisy: dict, precision: dict, shape: tuple, total: float, *, max_iter: int = 1000,
                  tol: float = 1e-3) -> tuple[np.ndarray, dict]:
    """A non-negative table summing to ``total`` whose marginals fit ``noisy`` in weighted least squares.

    Mirror descent (module docstring); stops when the certified gap is ≤ ``tol`` · (number of noisy cells), i.e.
    within ``tol`` of one noise variance per released cell, or after ``max_iter`` steps.

    Returns
    -------
    (ndarray, dict)
        The table t·p, and {"iterations", "objective", "gap" (≥ f − min f), "converged" (the gap test met)}.

    Examples
    --------
    >>> X = np.array([[3.0, 1.0], [2.0, 4.0]])
    >>> y = {(0,): X.sum(1), (1,): X.sum(0), (0, 1): X}
    >>> est, info = fit_marginals(y, {M: np.ones_like(v) for M, v in y.items()}, (2, 2), 10.0, tol=1e-8)
    >>> bool(np.allclose(est, X, atol=1e-6)), info["converged"]
    (True, True)
    """
    t = float(total)
    if t <= 0.0:
        return np.zeros(shape), {"iterations": 0, "objective": 0.0, "gap": 0.0, "converged": True}
    cells = sum(int(y.size) for y in noisy.values())
    # f = t²·c·f̃ with f̃ the fit of y/t at precisions w/c (c their largest domain sum): the same minimiser, solved
    # in f̃, whose L₁ is 2. In f itself L₁ = 2t²c overflowed (t = 1e120, c = 1e79 at ε = 1e40): the first step
    # was 1/inf = 0 and the line search never ended.
    c = domain_max(precision, shape)
    c = c if c > 0 else 1.0
    noisy = {M: y / t for M, y in noisy.items()}
    precision = {M: w / c for M, w in precision.items()}
    unit = t * t * c  # f = unit·f̃ (inf past float range: then only the reported objective and gap are inf)
    big_l = 2.0 * domain_max(precision, shape)  # L₁: f̃ is L₁-smooth in ‖·‖₁ (module docstring)
    logp = np.full(shape, -math.log(math.prod(shape)))
    p = np.exp(logp)
    f, g = _objective(p, 1.0, noisy, precision, shape)
    step, it, gap = 1.0 / big_l, 0, math.inf
    for it in range(max_iter + 1):
        gap = float((g * p).sum() - g.min())
        if gap * t * t * c <= tol * cells or it == max_iter:
            break
        step *= 2.0
        while True:
            lq = logp - step * g
            top = lq.max()
            lq -= top + math.log(float(np.exp(lq - top).sum()))
            q = np.exp(lq)
            fq, gq = _objective(q, 1.0, noisy, precision, shape)
            if step * big_l <= 1.0 or fq <= f + float((g * (q - p)).sum() + (q * (lq - logp)).sum() / step):
                break
            step /= 2.0
        logp, p, f, g = lq, q, fq, gq
    return t * p, {"iterations": it, "objective": f * unit, "gap": gap * unit,
                   "converged": gap * t * t * c <= tol * cells}
