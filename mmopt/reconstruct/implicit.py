"""Non-negative reconstruction on product domains (implicit unions of Kronecker products), never forming N×N.

Notation: see README. Both choices minimise ½ hᵀQh − cᵀh over C = {h ≥ 0, h_Z = 0 [, Σh = total]} by
:func:`~mmopt.reconstruct.first_order.fista`:

* ``"nnls"``: Q = AᵀA = Σₖ θₖ² ⊗ᵢ Aᵢᵀ Aᵢ, c = Aᵀy, applied axis by axis (a sparse factor as Aᵢ then Aᵢᵀ, a
  dense one through its Gram), L = Σₖ θₖ² ∏ᵢ ‖Aᵢ‖₂² ≥ λ_max(AᵀA) (equal for a product strategy, since the
  eigenvalues of a Kronecker product are the products of the factors'; the triangle inequality for a union).
* ``"projection"``: Q = G = Σₖ wₖ² ⊗ᵢ Gᵢ (the workload's implicit Gram), c = G x̂, L = Σₖ wₖ² ∏ᵢ λ_max(Gᵢ).

When Q is a single Kronecker product (a product strategy; a product workload) and every factor has at most
:data:`mmopt.reconstruct.admm.MAX_FACTOR` cells, :func:`mmopt.reconstruct.admm.solve` replaces FISTA: ADMM with the
exact (Q + ρI)⁻¹ from the factors' eigendecompositions, a few hundred steps where FISTA needs thousands
(NNLS after H₂ ⊗ H₂ on 10⁶ cells: benchmarks/bench_reconstruct.py). Both stop on the same relative KKT residual.

Memory is O(N + Σ factor sizes²). The strategy and workload are read through their ``terms`` (``weight`` and
``factors``) only, so this module does not import :mod:`mmopt.structured` (which calls it).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import linalg, sparse

from mmopt.reconstruct import admm
from mmopt.reconstruct._common import Reconstruction, kkt_residual, kkt_scale, round_off_floor, safe_norm, unit_size
from mmopt.reconstruct.first_order import DEFAULT_MAX_ITERATIONS, ITERATIVE_TOL, fista, not_converged

ADMM_FIRST_BUDGET = 2000  # ADMM steps before handing NNLS over to FISTA (it converged in ≤ 650 at 10⁶ cells)
REFINE_TOL = 1e-6  # the KKT test at the metric correction (bench_reconstruct: 10⁻⁶ and 10⁻⁸ give the same error)
FLAT = 1e3 * np.finfo(float).eps  # a metric correction d ≤ FLAT·‖h‖ is round-off: no refinement (_solve)
_SPARSE_DENSITY = 0.25  # a factor with fewer non-zeros than this fraction is applied as a sparse matrix


def _along(op, x: np.ndarray, axis: int) -> np.ndarray:
    """Apply ``op`` (a matrix, dense or sparse, or a callable on 2-D arrays) along one axis of x."""
    xm = np.moveaxis(x, axis, 0)
    flat = xm.reshape(xm.shape[0], -1)
    out = op(flat) if callable(op) else op @ flat
    return np.moveaxis(np.asarray(out).reshape((out.shape[0],) + xm.shape[1:]), 0, axis)


def _kron(ops, x: np.ndarray) -> np.ndarray:
    for i, op in enumerate(ops):
        x = _along(op, x, i)
    return x


def _normal_op(M: np.ndarray):
    """v ↦ MᵀM v: sparse M then Mᵀ when M is sparse enough to beat its n×n Gram, else the Gram itself."""
    p, n = M.shape
    nnz = int(np.count_nonzero(M))
    if nnz < _SPARSE_DENSITY * M.size and 2 * nnz < n * n:
        S = sparse.csr_matrix(M)
        St = S.T.tocsr()
        return lambda v: St @ (S @ v)
    return M.T @ M


def _transpose_op(M: np.ndarray):
    return sparse.csr_matrix(M.T) if np.count_nonzero(M) < _SPARSE_DENSITY * M.size else M.T


def _lambda_max_sq(M: np.ndarray) -> float:
    return float(linalg.svdvals(M, check_finite=False)[0]) ** 2


def nnls(strategy, y: np.ndarray, start: np.ndarray, *, total=None, zeros=None, tol: float = ITERATIVE_TOL,
         max_iterations: int = DEFAULT_MAX_ITERATIONS) -> tuple[np.ndarray, Reconstruction]:
    """argmin ‖A h − y‖₂ over C for an implicit A (``strategy.terms``); h shaped like the domain.

    ``start`` is the least-squares x̂ (the unconstrained minimiser), projected onto C for the first iterate.
    """
    shape = tuple(strategy.shape)
    terms = [(float(t.weight) ** 2, [_normal_op(f.matrix) for f in t.factors]) for t in strategy.terms]
    c, pos = np.zeros(shape), 0
    for t in strategy.terms:
        rows = tuple(f.matrix.shape[0] for f in t.factors)
        block = y[pos:pos + math.prod(rows)].reshape(rows)
        c += float(t.weight) * _kron([_transpose_op(f.matrix) for f in t.factors], block)
        pos += math.prod(rows)

    def Q(h: np.ndarray) -> np.ndarray:
        x = h.reshape(shape)
        return sum(w * _kron(ops, x) for w, ops in terms).ravel()

    start = np.asarray(start, float).ravel()
    grams = None
    if len(strategy.terms) == 1 and admm.usable(shape):
        t = strategy.terms[0]
        grams = [f.matrix.T @ f.matrix for f in t.factors]
        grams[0] = grams[0] * float(t.weight) ** 2
    L = sum(float(t.weight) ** 2 * math.prod(_lambda_max_sq(f.matrix) for f in t.factors) for t in strategy.terms)
    h, solver, it, res = _solve(Q, c.ravel(), L, start, grams, "admm", total, zeros, tol, max_iterations, "nnls")
    return h.reshape(shape), Reconstruction("nnls", solver, it, res, tol, total, _count(zeros))


def projection(workload, xhat: np.ndarray, *, total=None, zeros=None, tol: float = ITERATIVE_TOL,
               max_iterations: int = DEFAULT_MAX_ITERATIONS) -> tuple[np.ndarray, Reconstruction]:
    """argmin (h − x̂)ᵀG(h − x̂) over C for an implicit workload (``workload.terms``); h shaped like the domain."""
    shape = tuple(workload.shape)
    terms = [(float(t.weight) ** 2, [f.mean_gram * float(f.n_queries) for f in t.factors]) for t in workload.terms]

    def Q(h: np.ndarray) -> np.ndarray:
        x = h.reshape(shape)
        return sum(w * _kron(Gs, x) for w, Gs in terms).ravel()

    x0 = np.asarray(xhat, float).ravel()
    grams = None
    if len(terms) == 1 and admm.usable(shape):
        w, Gs = terms[0]
        grams = [Gs[0] * w, *Gs[1:]]
    L = sum(w * math.prod(float(linalg.eigvalsh(G, check_finite=False, driver="evd")[-1]) for G in Gs)
            for w, Gs in terms)
    h, solver, it, res = _solve(Q, Q(x0), L, x0, grams, "fista", total, zeros, tol, max_iterations, "projection")
    return h.reshape(shape), Reconstruction("projection", solver, it, res, tol, total, _count(zeros))


def _solve(Q, c: np.ndarray, L: float, start: np.ndarray, grams, first: str, total, zeros, tol: float,
           max_iterations: int, what: str) -> tuple[np.ndarray, str, int, float]:
    """(h, solver, iterations, residual): stages at ever smaller KKT scales until h is certified at the metric
    correction it reached.

    The first scale is :func:`~mmopt.reconstruct._common.kkt_scale`'s, relative to the correction
    ‖x̂ − P_C(x̂)‖ in cell units. When the strategy is rank-deficient, the minimum-norm x̂ carries a count-sized
    null-space component that the constraints must undo, so that scale is count-sized although the correction
    the data need is noise-sized: at 10⁷ counts with known zeros, NNLS after a rank-36 marginals strategy on
    (3, 4, 5) stopped with 3.1× the workload error of the exact optimum (tests/test_reconstruct.py). So after
    each stage the scale becomes the metric correction d = ‖h − x̂‖_Q / √L reached (noise-sized), if that is
    less than half the last one, and h's own KKT residual there (one product with Q) decides: a stage follows
    only when h fails it. That test asks ``REFINE_TOL`` (tol if looser), and never lets the first test
    (tol·scale) go: at 10⁻⁸ relative to d, NNLS after H₂ ⊗ H₂ on 90,000 cells took 1.8× the steps for the same
    workload error. A 10-step probe that had to shrink d by 10⁻³ decided before, and passed points short of the
    optimum (d barely moves near it: f(h) − f(x̂) = L·d²/2 is mostly the noise's): 3–15 % of draws at 60 cells
    with up to 2.2 % more workload error (a helper's probe), and after H₂ ⊗ H₂ on 10⁶ cells at tol 10⁻⁵ 8.3× the
    workload error of least squares, where it is 0.70× now (benchmarks/results/bench_reconstruct.txt). A stage
    that runs out of iterations does not raise: the last certificate stands, the closer point is kept if it
    meets the first test, and a RuntimeWarning says the answer may be short of the optimum — as it does when the
    budget is spent before h could be certified.
    """
    if zeros is not None and zeros.all():
        return np.zeros_like(start), "closed_form", 0, 0.0  # C = {0}: the exact minimiser, no iterations
    # the minimiser is positively homogeneous in (c, x̂, total): solve at unit size and scale back, so that the
    # scales' absolute floors (an ulp of 1) and Q's products neither pass everything at once (counts of 1e-30
    # returned x̂ clamped after one step) nor overflow (1e200: a NaN metric, 100,000 steps and a warning)
    if (size := unit_size(start, total)) is not None:
        h, solver, it, res = _solve(Q, c / size, L, start / size, grams, first, None if total is None else
                                    total / size, zeros, tol, max_iterations, what)
        return h * size, solver, it, res
    scale = outer = kkt_scale(start, c, L, total, zeros, tol)
    h, solver, it, res = _stage(Q, c, L, start, grams, first, total, zeros, tol, max_iterations, what, scale, True)
    while True:
        # d at round-off: h is the minimiser to float64's accuracy (ADMM's moves along the null space leave d ≈
        # 10ε‖h‖ where x̂ is feasible, and stages after it ran out their iterations; a helper's probe)
        d, size = _metric_distance(Q, L, h, start), safe_norm(h)
        tighter = max(d, round_off_floor(size, tol))  # a scale whose test a float64 step can pass
        if d <= FLAT * size or tighter > 0.5 * scale:
            break
        # at the tighter scale REFINE_TOL is enough (and tol·outer, the first test, still holds)
        refine = min(max(tol, REFINE_TOL), tol * outer / tighter)
        tight = kkt_residual(h, Q(h) - c, L, tighter, total, zeros)  # one product: h's own certificate there
        if tight <= refine:
            res = tight * tighter / outer
            break
        short = (f"{what}: the solution met tol = {tol:g} relative to a coarser KKT scale ({outer:.3g}) but not "
                 f"{refine:.3g} relative to the metric correction ({tighter:.3g}) in {max_iterations:,} iterations, "
                 "so it may be short of the optimum (a rank-deficient or ill-conditioned strategy at large counts). "
                 "Raise max_iterations (reconstruct_options), or use a dense workload of ≤ 4,096 cells, whose "
                 "solvers are exact.")
        if it >= max_iterations:
            warnings.warn(short, RuntimeWarning, stacklevel=2)
            break
        h2, more, steps, res2 = _stage(Q, c, L, h, grams, first, total, zeros, refine, max_iterations - it, what,
                                       tighter, False)
        it, solver = it + steps, solver if more == solver else f"{solver}+{more}"
        if res2 <= refine:
            h, res, scale = h2, res2 * tighter / outer, tighter
            continue
        # the budget ran out at the tighter scale: keep the closer point if it still meets the first test
        if res2 * tighter / outer <= tol and _metric_distance(Q, L, h2, start) < d:
            h, res = h2, res2 * tighter / outer
        warnings.warn(short, RuntimeWarning, stacklevel=2)
        break
    return h, solver, it, res


def _metric_distance(Q, L: float, h: np.ndarray, start: np.ndarray) -> float:
    """‖h − x̂‖_Q / √L, in cell units: √(2(f(h) − f(x̂))/L) when x̂ is the unconstrained minimiser of f."""
    e = h - start
    return math.sqrt(max(float(np.vdot(e, Q(e))), 0.0) / L)


def _stage(Q, c: np.ndarray, L: float, start: np.ndarray, grams, first: str, total, zeros, tol: float,
           max_iterations: int, what: str, scale: float, strict: bool) -> tuple[np.ndarray, str, int, float]:
    """(h, solver, iterations, residual) at one KKT scale: ``first`` with half the budget, then the other solver
    from its iterate.

    ADMM needs the factors' Grams (one Kronecker product, ``grams``); without them FISTA runs alone. Measured
    (benchmarks/bench_reconstruct.py, experiments.postprocess): ADMM wins on NNLS after H₂ ⊗ H₂ (60–125 steps at
    10⁶ cells, where FISTA needs thousands), FISTA on the projection in a 2-D range workload's metric (200–2,000
    steps where ADMM can stall above tol), so each choice starts with its winner and hands over to the other.
    """
    def run(name: str, x0: np.ndarray, budget: int, strict: bool):
        if name == "admm":
            return admm.solve(grams, Q, c, x0, total=total, zeros=zeros, tol=tol, max_iterations=budget, what=what,
                              scale=scale, strict=strict)
        return fista(Q, c, L, x0, total=total, zeros=zeros, tol=tol, max_iterations=budget, what=what, scale=scale,
                     strict=strict)

    if grams is None:
        h, it, res = run("fista", start, max_iterations, strict)
        return h, "fista", it, res
    second = "fista" if first == "admm" else "admm"
    # ADMM's step costs a few FISTA steps and, when it stalls, stalls for good: a short first try for it
    budget = max(1, max_iterations // 2) if first == "fista" else max(1, min(max_iterations // 2, ADMM_FIRST_BUDGET))
    h, it, res = run(first, start, budget, False)
    if res <= tol:
        return h, first, it, res
    names = {"admm": "ADMM", "fista": "projected gradient (FISTA)"}
    if it >= max_iterations:  # no budget left for the second (it ran max(1, …) steps past max_iterations = 1)
        if not strict:
            return h, first, it, res
        raise not_converged(what, names[first], it, res, tol)
    h, it2, res = run(second, h, max_iterations - it, False)
    if not res <= tol and strict:  # a NaN residual (an overflowed or NaN iterate) is not converged either
        raise not_converged(what, f"{names[first]} then {names[second]}", it + it2, res, tol)
    return h, f"{first}+{second}", it + it2, res


def _count(zeros) -> int:
    return 0 if zeros is None else int(np.sum(zeros))
