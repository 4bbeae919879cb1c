"""A certified lower bound under ``min_separation(n/k, k)`` from one Markov chain over all patterns: the chain dual.

Notation: see :mod:`mmopt.participation.working_set`, whose dual gives, for weights λ_π on patterns and a
correlation matrix R_π on each (the gradients' correlations), every X of sensitivity ≤ 1 under the schema

    tr(G X⁻¹) ≥ S(M)² / Σ_π λ_π,   M = Σ_π λ_π E_π R_π E_πᵀ,   S(M) = tr (A M Aᵀ)^{1/2}.

The cutting planes (:mod:`mmopt.participation.cutting`) grow a working set of patterns; at n = 1,024 they need
hundreds of CPU seconds to come within 1 % because the optimal weights spread over millions of patterns. Here every
pattern is weighted at once. With n = k·b a pattern of k steps has one step in each block [ib, (i + 1)b); with o_i
its offset in block i the separation t_{i+1} − t_i = b + o_{i+1} − o_i ≥ b says o_1 ≤ o_2 ≤ … ≤ o_k. Weight the
patterns by a Markov chain over offsets, λ(o) = p(o_1) Π_i Q_i(o_i, o_{i+1}) (Σλ = 1, Q_i upper-triangular and
row-stochastic), and give every pattern the principal submatrix R[π, π] of one correlation matrix R on the n steps
(itself a correlation matrix). Then M = P ∘ R with P_st = Pr(s, t ∈ π): P's block (i, i) is diag(p_i), block
(i, j) is diag(p_i) Q_i ⋯ Q_{j−1}, O(k² b³) to form and to differentiate, and a step costs one eigendecomposition
of A M Aᵀ, as one of the working set's. Patterns of fewer steps get no weight (a relaxation: the bound still holds).

Parameters: softmax logits for p and each Q_i's rows, floored at ε = 10⁻⁴ of the uniform distribution (so no
step's weight vanishes and the gradient, ½ X(M) with X(M) = Aᵀ (A M Aᵀ)^{−1/2} A, stays finite), and
R = (1 − ε) N L Lᵀ N + ε I with L n×r (r = ``rank``). L-BFGS on log S² with the exact gradient; for prefix sums
coarse to fine (n/2 → n, the chain carried by ``chain_lift.prolong``), the finest level getting half the budget. The
bound is then certified at the best iterate as the working set's
(:func:`mmopt.participation.working_set.certified_trace_sqrt`): M's entries, products of at most k nonnegative
b-term sums times R's, carry a relative error of at most (k(b + 2) + r + 8)·u, and Σλ ≤ Σp Π_i max row sum of
Q_i, computed with its own allowance.

Measured (prefix sums, one core): n = 1,024, k = 8, 91,400 in 30 CPU s (91,449 in 240 s: the family's limit
is near), against the cutting planes' 90,311 in 50 s and 91,286 in 900 s; n = 2,048, k = 8, 206,063 in 30 s and
206,864 in 90 s against 203,192 in 50 s; n = 64, k = 8: 3,249.2 against the optimum 3,252.4 (an SDP over all
6,435 patterns), the family's limit there.

The lifted bound (prefix sums, ``solve_steps``). Past 2,048 steps a step costs ~35 CPU s (M in O(k²b³) and an
eigendecomposition of n×n); but any weights give a bound, and the optimum's weights at n/2 carried to n (each offset
repeated, as between levels) are near the optimum's at n. So L-BFGS runs up to ``solve_steps`` and the carried
iterate is certified once at n. Measured (4,096 steps, one core, solved to 1,024 in 15 CPU s, certified in 15–18 s):
201,814 / 461,466 / 1,142,057 at k = 4 / 8 / 16 against the diagonal bound's 193,912 / 430,004 / 1,058,804; solved
to 2,048 in 34 s, 202,273 at k = 4 (0.2 % more for twice the time). Each lifted level keeps the solved chains'
atom on the fixed epochs' patterns whole (repetition halves it at each level): 202,650 / 465,189 / 1,168,348 in the
same time (a diagonal logit shift of 0.5 gave 202,158 / 463,388 / 1,160,536). Every level is now carried by
``chain_lift.prolong`` (rows split by their power law near o_{i+1} = o_i, the marginals fitted to the solved levels'
extrapolated drift), the solved levels' starts too: 202,793 / 465,761–465,769 / 1,171,765 in 22–23 s (465,822 with
seconds=25, 33.5 s); at 2,048 steps 89,254 / 207,061 (k = 4 / 8) against 89,219 / 206,925. What is left is the
family's: L-BFGS at 4,096 steps from that iterate for 282 s more reached 465,855 (k = 8).

A start for the primal (prefix sums): the Lagrangian's minimiser at the chain's weights, X(M) = Aᵀ K^{−1/2} A, is
the optimum itself when the weights are optimal (tr(G X⁻¹) is strictly convex), so at a near-optimal M it is a
near-optimal X up to its scale. :func:`lagrangian_start` returns its causal factor C (X = CᵀC) cut to 2b bands, at
any level's best iterate, for :func:`mmopt.participation.chain_banded.chain_banded` to refine. Measured (prefix
sums, one core, 30 CPU s of the chain dual): at n = 1,024, k = 4 the start is 39,884 (2.4 % above the bound) and
the 2b-band strategy from it 39,039 after 60 s more, where from the free band optimize reached 39,078 in 110 s.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from mmopt._base import validation as v
from mmopt.participation._chain_weights import FLOOR as _FLOOR
from mmopt.participation._chain_weights import chain as chain_weights
from mmopt.participation._chain_weights import chain_gradient
from mmopt.participation.chain_lift import prolong as _prolong
from mmopt.participation.chain_lift import split_variables as _split
from mmopt.participation.free_banded import _lbfgs
from mmopt.participation.working_set import _Factor, certified_trace_sqrt, trace_sqrt

__all__ = ["ChainDual", "chain_dual", "lagrangian_start"]

_EPS = np.finfo(float).eps
_COARSEST = 64


@dataclass(frozen=True)
class ChainDual:
    """A certified lower bound on Δ²·tr(G X⁻¹) under ``min_separation(n/k, k)``.

    Attributes
    ----------
    bound : float
        Certified (round-off allowed for) at the best iterate of the finest level.
    converged : bool
        L-BFGS met its tolerance at the finest level (the family's maximum, not the problem's optimum).
    iterations : int
        L-BFGS iterations over all levels.
    seconds : float
        CPU seconds.
    levels : tuple of dict
        n, the bound's estimate and the iterations of each level, coarse to fine; on prefix sums also the level's
        best iterate (for :func:`lagrangian_start`).
    """

    bound: float
    converged: bool
    iterations: int
    seconds: float
    levels: tuple = field(repr=False)

    @property
    def start_steps(self) -> tuple[int, ...]:
        """The levels (steps) whose best iterate is kept: :func:`lagrangian_start` takes any of them."""
        return tuple(level["n"] for level in self.levels if "x" in level)


def chain_dual(gram, participations: int, *, rank: int = 32, seconds: float | None = None,
               max_iterations: int = 2000, solve_steps: int | None = None) -> ChainDual:
    """The chain dual's certified bound under ``min_separation(n/k, k)`` (module docstring).

    Parameters
    ----------
    gram : int or array_like (n, n)
        n for prefix sums (coarse to fine), or G itself (positive definite, one level).
    participations : int
        k; n must be a multiple of k (b = n/k).
    rank : int, default 32
        r, the columns of R's factor.
    seconds : float, optional
        A CPU budget (``time.process_time``), the finest level getting half of it.
    max_iterations : int, default 2000
        L-BFGS iterations per level.
    solve_steps : int, optional
        Prefix sums only: L-BFGS runs on the levels of at most this many steps (the coarsest always), and the best
        iterate is carried to n (``chain_lift.prolong``) and certified there without steps, one eigendecomposition at n
        (module docstring: the lifted bound). Default n: every level is solved.

    Examples
    --------
    >>> lower = chain_dual(64, 8, max_iterations=300).bound
    >>> bool(3_240 < lower <= 3_252.4)  # the optimum, by an SDP over all 6,435 patterns of 8 steps: 3,252.4
    True
    """
    caller = "chain_dual"
    t0 = time.process_time()
    prefix = isinstance(gram, (int, np.integer)) and not isinstance(gram, bool)
    if prefix:
        n = v.check_int(gram, name="gram", caller=caller, low=2)
    else:
        G = v.check_symmetric(gram, name="gram", caller=caller, remedy=" Pass the workload's Gram W.T @ W, not W, "
                              "or the number of steps n for prefix sums.")
        n = G.shape[0]
    k = v.check_int(participations, name="participations", caller=caller, low=2)
    rank = v.check_int(rank, name="rank", caller=caller)
    max_iterations = v.check_int(max_iterations, name="max_iterations", caller=caller)
    if seconds is not None:  # -5, nan and "3" were taken (a helper's probe)
        seconds = v.check_real(seconds, name="seconds", caller=caller, low=0.0, low_open=True)
    if n % k:
        raise ValueError(f"The 'participations' parameter of {caller} must divide n (b = n/k). Got "
                         f"participations={k} with n={n} instead.")
    if solve_steps is not None:
        if not prefix:
            raise TypeError(f"The 'solve_steps' parameter of {caller} applies to prefix sums (gram given as the "
                            "number of steps n), whose levels it chooses. Got it with a dense Gram instead; leave it "
                            "out.")
        solve_steps = v.check_int(solve_steps, name="solve_steps", caller=caller, low=1)
    b = n // k
    sizes = [b]
    while prefix and sizes[0] % 2 == 0 and k * sizes[0] // 2 >= _COARSEST:
        sizes.insert(0, sizes[0] // 2)
    solved = [bj for bj in sizes if solve_steps is None or k * bj <= solve_steps] or sizes[:1]
    lifted = len(solved) < len(sizes)  # the finest levels carried without steps, certified at n
    m = k * solved[-1]  # L-BFGS's finest level: twelve m×m arrays; the certificate at n about six
    v.check_allocation(max(12 * m * m, 6 * n * n), what=f"twelve {m:,}×{m:,} arrays or six {n:,}×{n:,}",
                       caller=caller)
    shares = [2.0 ** -(len(solved) - j) for j in range(len(solved))]  # finest solved ½, then ¼, …
    rng = np.random.default_rng(0)
    x = _start(sizes[0], k, rank, rng)
    levels, iterations, converged = [], 0, False
    anchors = []  # the last two solved levels' (b, x), whose marginals the next level's are extrapolated from
    for j, bj in enumerate(sizes):
        if j:
            x = _prolong(x, sizes[j - 1], k, rank, rng, anchors, max(1, j - len(solved) + 1))
        if j >= len(solved):
            continue
        factor = _Factor(k * bj if prefix else G, prefix)
        deadline = None if seconds is None else t0 + seconds * sum(shares[:j + 1]) / sum(shares)
        x, estimate, its, converged = _level(factor, x, bj, k, rank, max_iterations, deadline)
        anchors = (anchors + [(bj, x)])[-2:]
        iterations += its
        level = {"n": k * bj, "bound": estimate, "iterations": its}
        levels.append(level | ({"x": x, "rank": rank, "participations": k} if prefix else {}))
    if lifted:  # L-BFGS did not run at n: not converged there
        factor, converged = _Factor(n, prefix), False
    bound = _certify(factor, x, b, k, rank)
    if lifted:
        levels.append({"n": n, "bound": bound, "iterations": 0})  # no iterate kept: not a start
    return ChainDual(bound, converged, iterations, time.process_time() - t0, tuple(levels))


def lagrangian_start(dual: ChainDual, n: int) -> np.ndarray:
    """The causal factor of X(M), the Lagrangian's minimiser at the best iterate of the chain dual's level of n
    steps (prefix sums), cut to 2b bands: lower-triangular, a positive diagonal, C_ts = 0 for t − s ≥ 2b (module
    docstring). Its scale is arbitrary (the 2b-band strategy is scaled to Δ = 1 by its chain).

    >>> C = lagrangian_start(chain_dual(64, 4, max_iterations=50), 64)
    >>> bool(np.all(np.diag(C) > 0)), bool(np.all(np.triu(C, 1) == 0)), bool(np.all(np.tril(C, -32) == 0))
    (True, True, True)
    """
    caller = "lagrangian_start"
    if not isinstance(dual, ChainDual):
        raise TypeError(f"The 'dual' parameter of {caller} must be a ChainDual (the result of chain_dual). Got "
                        f"{type(dual).__name__} instead.")
    n = v.check_int(n, name="n", caller=caller, low=1)
    kept = dual.start_steps
    if not kept:
        raise ValueError(f"The 'dual' parameter of {caller} must come from chain_dual on prefix sums (gram given as "
                         "the number of steps n), whose levels keep their iterates. Got a chain dual of a dense Gram "
                         "instead.")
    if n not in kept:
        raise ValueError(f"The 'n' parameter of {caller} must be a level of the chain dual (one of {list(kept)}). Got "
                         f"{n} instead.")
    level = next(lv for lv in dual.levels if lv["n"] == n and "x" in lv)
    k = level["participations"]
    b = n // k
    chain, L, C, N, R = _assemble(level["x"], b, k, level["rank"])
    _, Z = trace_sqrt(_Factor(n, True), chain[5] * R)
    X = Z @ Z.T
    # X = CᵀC with C lower-triangular: the Cholesky factor of X with its steps reversed, reversed back
    C = np.linalg.cholesky(X[::-1, ::-1]).T[::-1, ::-1]
    return np.tril(C) - np.tril(C, -2 * b)


def _start(b: int, k: int, r: int, rng) -> np.ndarray:
    """p uniform, each offset kept with odds e² (the fixed epochs' patterns weigh most), R ≈ a random one."""
    n = k * b
    L = np.eye(n, r) + 1e-3 * rng.standard_normal((n, r))
    return np.concatenate([np.zeros(b), np.tile(2.0 * np.eye(b), (k - 1, 1, 1)).ravel(), L.ravel()])


def _assemble(x, b: int, k: int, r: int):
    a0, A, L = _split(x, b, k, r)
    chain = chain_weights(a0, A, b, k)
    C = L @ L.T
    N = 1.0 / np.sqrt(np.diag(C))
    R = (1 - _FLOOR) * (C * N[:, None] * N[None, :])
    R[np.diag_indices(k * b)] += _FLOOR
    return chain, L, C, N, R


def _objective(x, factor: _Factor, b: int, k: int, r: int, best: list):
    """(−log S², gradient)."""
    chain, L, C, N, R = _assemble(x, b, k, r)
    s0, Qs, Q, p, F, P, mask = chain
    S, Z = trace_sqrt(factor, P * R)
    if S * S > best[0]:
        best[:] = [S * S, x.copy()]
    Y = (Z @ Z.T) / S  # d log S² = tr(Y dM)
    a0bar, Abar = chain_gradient(Y * R, s0, Qs, Q, p, F, mask, b, k)
    Gam = (1 - _FLOOR) * Y * P  # R's gradient, then through R = N C N, C = L Lᵀ
    Psi = N[:, None] * Gam * N[None, :]
    Psi[np.diag_indices(k * b)] -= N ** 3 * np.einsum("ab,ab,b->a", Gam, C, N)
    return -2 * np.log(S), -np.concatenate([a0bar, Abar.ravel(), (2 * Psi @ L).ravel()])


def _level(factor, x, b: int, k: int, r: int, max_iterations: int, deadline):
    """(best x, its S², iterations, converged) of L-BFGS from x (free_banded._lbfgs: past the deadline the next
    evaluation stops the level, inside a line search too; the first is always made, so every level reports an
    estimate)."""
    best = [0.0, x]
    _, iterations, _, converged = _lbfgs(lambda y: _objective(y, factor, b, k, r, best), x, max_iterations, deadline,
                                         ftol=1e-13, gtol=1e-10)
    return best[1], best[0], iterations, converged


def _certify(factor, x, b: int, k: int, r: int) -> float:
    chain, L, C, N, R = _assemble(x, b, k, r)
    s0, Qs, Q, p, F, P, mask = chain
    del C, chain, F  # n×n arrays held no longer: at 4,096 steps (the lifted bound) memory is what limits
    M = P * R
    np.abs(R, out=R)
    R *= P  # P ∘ |R|
    del P
    u = _EPS
    S_low, _, _ = certified_trace_sqrt(factor, M, R, (k * (b + 2) + r + 8) * u, vectors=False)
    # Σλ over the exact chain of the stored p_0, Q: at most Σp_0 Π max row sum, each sum within b ulps
    total = float(p[0].sum()) * np.prod(Q.sum(axis=-1).max(axis=-1)) * (1 + 2 * (k + 1) * b * u)
    return S_low ** 2 / float(total)
