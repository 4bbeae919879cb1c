"""One block of OPT_⊗'s block-coordinate descent: the best factor Aᵢ for a fixed combined Gram Ĝᵢ.

Notation: see README. With the other factors fixed (each Δ = 1), the product's unit error is
Δ(Aᵢ)²·tr(Ĝᵢ Xᵢ⁺) with Ĝᵢ = Σ_j w_j² (∏_{i'≠i} tr(G_{i'}⁽ʲ⁾ X_{i'}⁺)) Gᵢ⁽ʲ⁾, a one-attribute MinError problem
(McKenna et al., PVLDB 2018, §4.2). It is solved with mmopt's one-attribute machinery and every candidate is
scored by the exact :func:`mmopt.error.unit_objective` (candidates it cannot score are skipped):

* ``"l1"`` (ε-DP): :func:`mmopt.search.local_search.minimize_l1` over p-Identity strategies, then a polish of the
  best candidate (signed entries, any shape); non-convex, so a local optimum.
* ``"l2"`` ((ε,δ)): :func:`mmopt.search.l2_fast.solve_l2`, the certified optimum of Program 5.2 for Ĝᵢ, and
  A = X^{1/2} (:meth:`Strategy.from_gram`).

Both also keep the incumbent (so a sweep never increases the objective) and, when Ĝᵢ is rank-deficient,
the row-space candidates: the SVD-bound strategy diag(λ^{1/4})Vᵀ of Ĝᵢ (Thm 5.25) and the projection
rows Vᵀ onto range(Ĝᵢ). A full-rank factor wastes budget on directions no query uses: for Ĝ = J (an
attribute that is T in every term) A = 1ᵀ has tr(J X⁺) = 1, the identity n.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mmopt._base.solution import worst_status
from mmopt.dense import _strategy_core as sc
from mmopt.error import NumericalError, unit_objective
from mmopt.multidim._common import normalised
from mmopt.search.l2_fast import solve_l2
from mmopt.search.local_search import minimize_l1

# A Ĝ eigenvalue below this share of the largest is a zero: the candidate set then adds row-space strategies.
_RANK_RTOL = 1e-10
# Inner L-BFGS-B settings for the p-Identity search and the polish (per factor solve). 3,000 steps: at 1,000 the
# prefix(50) factor of prefix(50)⊗identity(100) stopped short of L-BFGS-B's test (the README's command-line
# example ended 'user_limit'); 3,000 converges there at the same objective in 0.9 s, and the census workloads
# (whose factor solves converge sooner) take the same time.
INNER_ITERATIONS = 3000
INNER_TOL = 1e-9
# ... but at most INNER_WORK / (n²p) steps on a factor of n cells (p = max(4, n/16) extra rows; a step is O(n²p)),
# never fewer than INNER_MIN: every factor of the census and benchmark workloads (n ≤ 115) keeps its 3,000, while
# all_range(1,000)^⊗3 under ε-DP, which ran past 120 s with max_iterations=2, now takes 100-step solves (a spent
# step budget is reported: 'user_limit').
INNER_WORK, INNER_MIN = 2e9, 100
# The polish searches a general signed A, O(n³) a step: run it on factors of at most POLISH_MAX_N cells (min_error
# polishes at n ≤ 64: "~100 s at n = 256 for no gain"); every census factor is within it.
POLISH_MAX_N = 128


def inner_iterations(n: int) -> int:
    """L-BFGS-B steps of a factor solve on n cells (see INNER_WORK)."""
    p = max(4, n // 16)
    return int(min(INNER_ITERATIONS, max(INNER_MIN, INNER_WORK // (n * n * p))))
_TRIM_RTOL = 1e-6  # rows shorter than this share of the longest are dropped in the "+trim" candidates


@dataclass(frozen=True)
class FactorResult:
    """The chosen factor (Δ = 1), its exact score Δ²·tr(Ĝ X⁺), which candidate won, the solves' status."""

    matrix: np.ndarray
    score: float
    source: str
    status: str
    solver_statuses: tuple[str, ...]
    traces: np.ndarray


def _score(A: np.ndarray, G: np.ndarray, norm: str) -> float:
    try:
        return unit_objective(A, G, norm)
    except NumericalError:
        return np.inf


def _range_candidates(G: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """SVD-bound strategy and projection rows of a rank-deficient Ĝ (none when Ĝ is invertible)."""
    lam, V = np.linalg.eigh(G)
    keep = lam > _RANK_RTOL * max(lam[-1], 0.0)
    if keep.all() or not keep.any():
        return []
    # Thm 5.25's diag(σ^{1/2})·P_W, built here with the rank rule above: round-off eigenvalues get no row.
    svdb = (V[:, keep] * lam[keep] ** 0.25).T
    return [("svd_strategy", svdb), ("range_projection", V[:, keep].T.copy())]


def _trimmed(A: np.ndarray) -> np.ndarray | None:
    """A without rows that are round-off small (a polish shrinks null-space rows towards, not to, zero)."""
    norms = np.sqrt((A * A).sum(axis=1))
    keep = norms > _TRIM_RTOL * norms.max()
    return None if keep.all() else A[keep]


def solve_factor(G: np.ndarray, incumbent: np.ndarray, norm: str, rng: np.random.Generator, check, *,
                 inner_restarts: int = 1, polish: bool = True) -> FactorResult:
    """Best of the candidates above for Ĝ; ``incumbent`` is the current factor (Δ = 1).

    ``check(A)`` returns the per-term traces of a candidate as :func:`mmopt.structured.evaluate` computes
    them, or None when they cannot be trusted; the best-scoring candidate that passes it wins.
    """
    n = G.shape[0]
    G = G / float(np.trace(G))  # scale-free subproblem: tolerances mean the same in every sweep
    cands: list[tuple[str, np.ndarray]] = [("incumbent", incumbent)]
    statuses: list[str] = []
    if n > 1:
        if norm == "l1":
            # n_jobs=1: the parallelism is over the outer restarts; a nested pool would oversubscribe the cores
            sol = minimize_l1(G, restarts=inner_restarts, seed=rng, max_iterations=inner_iterations(n), tol=INNER_TOL,
                              n_jobs=1)
            cands.append(("p-identity", sol.matrix))
            statuses.append(sol.status)
        else:
            sol = solve_l2(G)
            cands.append(("l2-optimum", sc.Strategy.from_gram(sol.gram).matrix))
            statuses.append(sol.status)
        cands += _range_candidates(G)
    if norm == "l1" and polish and 1 < n <= POLISH_MAX_N:
        first = min(((_score(normalised(A, norm), G, norm), k) for k, (_, A) in enumerate(cands)))
        if np.isfinite(first[0]):
            name, A = cands[first[1]]
            sol = minimize_l1(G, initial=A, seed=rng, max_iterations=inner_iterations(n), tol=INNER_TOL, n_jobs=1)
            statuses.append(sol.status)
            cands.append((f"{name}+polish", sol.matrix))
    cands += [(f"{name}+trim", T) for name, A in cands[1:] if (T := _trimmed(A)) is not None]
    scored = sorted((_score(normalised(A, norm), G, norm), k) for k, (_, A) in enumerate(cands))
    for score, k in scored:
        if not np.isfinite(score):
            break
        A = normalised(cands[k][1], norm)
        traces = check(A)
        if traces is not None:
            return FactorResult(A, score, cands[k][0], worst_status(statuses), tuple(statuses), traces)
    raise NumericalError(f"solve_kron: no candidate factor on an attribute of size {n} could be scored exactly, "
                         "not even the incumbent; the subproblem Gram is numerically degenerate.")
