"""Fitting a symmetric coupled split strategy (:mod:`.coupled`) to a union of ≤ 2-way products on (n,)ᵈ.

Notation: see README and :mod:`.coupled`. The strategy is

    A = stack( √c₀·(1ᵀ)^{⊗d},  A₁(i) ⊗ 1ᵀ elsewhere (each i),  A₂(i) ⊗ A₂(j) ⊗ 1ᵀ elsewhere (each i < j) ),

with Δ₂² ≤ c₀ + d·max diag(A₁ᵀA₁) + (d choose 2)·(max diag(A₂ᵀA₂))², equal when both diagonals are constant.
L-BFGS minimises log tr(G X⁻¹) + log of that bound with each max replaced by a power mean of order ρ (ρ = 50,
300, 2000 in turn: a large order at once stalls the search), starting from the split plan (:mod:`.split`, the
point β = 0 of the family). The gradient of tr(G X⁻¹) is −⟨Z, dX⟩, Z = X⁻¹GX⁻¹: on the low blocks Z = S⁻¹QS⁻¹
(:mod:`.coupled` (1)); on a pair's cells Z = K_pRK_pᵀ + K_pS⁻¹M̃_p + M̃_pᵀS⁻¹K_pᵀ + D_p⁻¹G_ppD_p⁻¹ (M̃_p =
(G_{Lp} − Y_pᵀG_pp)D_p⁻¹), contracted with A₂ᵀA₂ on one attribute without forming Z (O(n³·|L_p|) per pair).
Finally each factor gets the rows diag((max d − d)^{1/2}) (d its column norms²), so its columns have equal norm:
X only grows (the error falls) and the bound on Δ₂ becomes its value.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import linalg

from mmopt.structured.residual import coupled as cp
from mmopt.structured.strategies import kron_strategy, union_strategy

ORDERS = (50, 300, 2000)


def _pieces(W_terms, n, d, A1, A2, c0):
    H = cp._basis(n)
    X1, X2 = H.T @ (A1.T @ A1) @ H, H.T @ (A2.T @ A2) @ H
    a = [cp._Term(c0 * n**d, {})] + [cp._Term(float(n ** (d - 1)), {i: X1}) for i in range(d)]
    a += [cp._Term(float(n ** (d - 2)), {i: X2, j: X2}) for i, j in cp.pair_list(d)]
    return H, X1, X2, cp.unit_error_terms((n,) * d, a, W_terms)


def _contract(P, Q, M, n):
    """(Σ_{l,l'} Z[(k,l),(k',l')] M[l,l'], Σ_{k,k'} Z[(k,l),(k',l')] M[k,k']) for Z = P Qᵀ on the n×n grid."""
    P3, Q3 = P.reshape(n, n, -1), Q.reshape(n, n, -1)
    return np.einsum("klr,lm,jmr->kj", P3, M, Q3, optimize=True), np.einsum("klr,kj,jmr->lm", P3, M, Q3,
                                                                              optimize=True)


def _gradient(p, W_terms, n, d, X2):
    """(dE/dc₀·n^{-d}, dE/dX₁ᴴ, dE/dX₂ᴴ) in the H basis, E = tr(G X⁻¹)."""
    m = n - 1
    Sinv = linalg.inv(p.S)
    Sinv = (Sinv + Sinv.T) / 2
    R = Sinv @ p.Q @ Sinv
    idx = cp._low_index((n,) * d)
    g0 = -R[0, 0]
    g1 = -(n ** (d - 1)) * sum(R[np.ix_(ix, ix)] for ix in idx)
    g2 = np.zeros((n, n))
    wpairs = {}
    for t in W_terms:
        if len(t.active) == 2:
            wpairs.setdefault(tuple(sorted(t.active)), []).append(t)
    # K_p's rows on the grid cells (k, l): low cells select L_p, pair cells are −Y_p
    lowpos = np.concatenate([[0], np.arange(1, n) * n, np.arange(1, n)])
    pairpos = (np.arange(1, n)[:, None] * n + np.arange(1, n)[None, :]).ravel()
    groups = {}  # pairs sharing their pieces (the same Y_p object): Z's pair terms are linear in R and S⁻¹
    for (i, j), (ix, Y, GpL, GY, inv, scale) in p.pairs.items():
        g = groups.setdefault(id(Y), [Y, GpL, GY, inv, scale, 0.0, 0.0, []])
        g[5] = g[5] + R[ix[:, None], ix[None, :]]
        g[6] = g[6] + Sinv[ix[:, None], ix[None, :]]
        g[7].append((i, j))
    for Y, GpL, GY, inv, scale, Rsum, Ssum, members in groups.values():
        Lp = Y.shape[1]
        K = np.zeros((n * n, Lp))
        K[lowpos, np.arange(Lp)] = 1.0
        K[pairpos] = -Y
        Mt = np.zeros((n * n, Lp))
        Mt[pairpos] = cp.sandwich(inv[0], (GpL - GY).reshape(m, m, Lp), inv[1]).reshape(m * m, Lp) / scale
        KR, KS = K @ Rsum, K @ Ssum
        for P, Q in ((KR, K), (KS, Mt), (Mt, KS)):
            cj, ci = _contract(P, Q, X2, n)
            g2 -= cj + ci
        for i, j in members:
            for w in wpairs.get((i, j), []):
                Pi = inv[0] @ w.active[i][1:, 1:] @ inv[0]
                Pj = inv[1] @ w.active[j][1:, 1:] @ inv[1]
                c = w.scale / scale**2
                g2[1:, 1:] -= c * (Pi * float(np.sum(Pj * X2[1:, 1:])) + Pj * float(np.sum(Pi * X2[1:, 1:])))
    return g0, g1, g2 * n ** (d - 2)


def _power_mean(x, rho):
    top = float(x.max())
    r = x / top
    s = float(np.mean(r**rho))
    return top * s ** (1 / rho), r ** (rho - 1) / (x.size * s ** (1 - 1 / rho) * 1.0)


def objective(z, W_terms, n, d, rho, *, gradient=True):
    """log tr(G X⁻¹) + log(c₀ + d·pm_ρ(diag X₁) + (d choose 2)·pm_ρ(diag X₂)²), and its gradient in z."""
    A1, A2, c0 = z[: n * n].reshape(n, n), z[n * n: 2 * n * n].reshape(n, n), math.exp(z[-1])
    H, X1, X2, p = _pieces(W_terms, n, d, A1, A2, c0)
    if p is None or not p.unit > 0:
        return (math.inf, np.zeros_like(z)) if gradient else math.inf
    C = math.comb(d, 2)
    q1, q2 = np.einsum("ij,ij->j", A1, A1), np.einsum("ij,ij->j", A2, A2)
    m1, dm1 = _power_mean(q1, rho)
    m2, dm2 = _power_mean(q2, rho)
    delta = c0 + d * m1 + C * m2**2
    val = math.log(p.unit) + math.log(delta)
    if not gradient:
        return val
    g0, g1, g2 = _gradient(p, W_terms, n, d, X2)
    gX1, gX2 = H @ g1 @ H.T / p.unit, H @ g2 @ H.T / p.unit
    gA1 = A1 @ (gX1 + gX1.T) + 2 * A1 * (d * dm1 / delta)[None, :]
    gA2 = A2 @ (gX2 + gX2.T) + 2 * A2 * (2 * C * m2 * dm2 / delta)[None, :]
    gc = c0 * (g0 * n**d / p.unit + 1 / delta)
    return val, np.concatenate([gA1.ravel(), gA2.ravel(), [gc]])


def start(plan, n: int) -> np.ndarray:
    """The split plan as a point of the family, with a small total row on A₁ and A₂ so that β can grow."""
    B = plan.bases[0]
    weight = {sum(f.matrix.shape[0] > 1 for f in t.factors): t.weight for t in plan.strategy.terms}
    A1, A2 = weight.get(1, 1.0) * B, math.sqrt(weight.get(2, 1.0)) * B
    rows = [np.vstack([A, np.full((1, n), 0.05 * float(np.abs(A).max()) / n)]) for A in (A1, A2)]
    return np.concatenate([rows[0].ravel(), rows[1].ravel(), [math.log(weight.get(0, 1e-3) ** 2 + 1e-6)]])


def _equalised(A):
    q = np.einsum("ij,ij->j", A, A)
    return np.vstack([A, np.diag(np.sqrt(np.clip(q.max() - q, 0.0, None)))])


def strategy(z, n: int, d: int, name: str = "coupled_split"):
    """The union of products of the module docstring at z, each factor padded to equal column norms."""
    A1, A2 = _equalised(z[: n * n].reshape(n, n)), _equalised(z[n * n: 2 * n * n].reshape(n, n))
    T = np.ones((1, n))
    parts = [kron_strategy(*[T] * d, weight=math.sqrt(math.exp(z[-1])))]
    parts += [kron_strategy(*[A1 if m == i else T for m in range(d)]) for i in range(d)]
    parts += [kron_strategy(*[A2 if m in (i, j) else T for m in range(d)]) for i, j in cp.pair_list(d)]
    return union_strategy(parts, name=name)


def fit(workload, plan, *, max_iterations: int = 300, orders=ORDERS):
    """(strategy, z, converged) fitted from the split ``plan`` (module docstring); None when W is not of the form.
    ``converged``: L-BFGS-B's test passed at the last order (else it stopped at ``max_iterations``)."""
    from scipy import optimize  # lazy: auto imports this module to ask applies(), on every product workload

    shape = tuple(workload.shape)
    n, d = shape[0], len(shape)
    if d < 2 or any(s != n for s in shape) or not 2 < n <= cp.MAX_SIZE:
        return None
    W_terms = cp._workload_terms(workload, {})
    if W_terms is None:
        return None
    z = start(plan, n)
    if not math.isfinite(objective(z, W_terms, n, d, orders[0], gradient=False)):
        return None
    converged = False
    for rho in orders:
        res = optimize.minimize(objective, z, args=(W_terms, n, d, rho), jac=True, method="L-BFGS-B",
                                options={"maxiter": max_iterations})
        if np.all(np.isfinite(res.x)) and math.isfinite(res.fun):
            z, converged = res.x, bool(res.success)
    return strategy(z, n, d), z, converged




def applies(workload, norm: str = "l2") -> bool:
    """True for a workload :func:`fit` takes: Gaussian noise, d ≥ 2 attributes of one size 3 ≤ n ≤ MAX_SIZE, every
    term with at most two non-total factors and at least one with two."""
    return why_not(workload, norm) is None


def why_not(workload, norm: str = "l2") -> str | None:
    """The first condition of :func:`applies` that ``workload`` fails, in words (None when it applies): the
    refusal named every condition, so a Gaussian run on sizes (4, 3) read as if the noise were wrong."""
    shape = tuple(getattr(workload, "shape", ()))
    if norm != "l2":
        return f"it fits Δ₂ (Gaussian noise, norm 'l2'); got norm {norm!r}"
    if len(shape) < 2:
        return f"it needs d ≥ 2 attributes; got the domain {shape}"
    if len(set(shape)) != 1:
        return f"its attributes must share one size; got the sizes {shape}"
    if not 2 < shape[0] <= cp.MAX_SIZE:
        return f"the attribute size must lie in [3, {cp.MAX_SIZE}]; got {shape[0]}"
    terms = cp._workload_terms(workload, {})
    if terms is None:
        return "some term has more than two non-total factors"
    if not any(len(t.active) == 2 for t in terms):
        return "no term has two non-total factors (a 2-way query)"
    return None


def solve_coupled(workload, *, norm: str = "l2", restarts=None, seed=None, max_iterations=None, tol=None,
                  verbose: bool = False, n_jobs=None):
    """``optimize(W, method="coupled")``: the coupled split strategy fitted from the split plan (module docstring).

    Gaussian noise only (the fit targets Δ₂). ``restarts``, ``seed``, ``tol`` and ``n_jobs`` are accepted (the
    search passes them to every method) and unused; ``max_iterations`` caps the L-BFGS-B steps per order. The
    status is "local_optimum": a local search of a non-convex family, never "optimal" (the search reconciles it
    with the bound).
    """
    from mmopt._base.solution import ImplicitSolution
    from mmopt.structured.residual import split as sp
    caller = "optimize(method='coupled')"
    if (reason := why_not(workload, norm)) is not None:
        raise ValueError(f"{caller} needs Gaussian noise (norm 'l2') and a union of products on d ≥ 2 attributes of "
                         f"one size in [3, {cp.MAX_SIZE}] whose terms have at most two non-total factors (1- and "
                         f"2-way prefix, range or marginal queries); for '{workload.name}' {reason}.")
    plan = sp.split_plan(workload, "l2")
    found = None if plan is None else fit(workload, plan, max_iterations=max_iterations or 300)
    if found is None:
        raise ValueError(f"{caller}: the split plan that the fit starts from does not cover '{workload.name}'.")
    A, _, converged = found
    from mmopt.structured.analysis import evaluate
    from mmopt.structured.dual_bound import optimum_floor  # the certified bound, so auto can skip what cannot win
    message = ("Coupled split strategy: the split plan's factors freed from B1 = 0 and fitted by L-BFGS-B on the "
               "exact error and an upper bound of Δ₂ (attained: every factor has equal column norms); "
               + ("converged to a local optimum." if converged else "stopped at max_iterations."))
    # the family shares one A₁ and one A₂ over the attributes: on a workload that is not symmetric in them its
    # start is not the split plan and the fit ended above it (98.2 against 65.7 on (P,P,T) + (P,T,T); a helper's
    # probe), so the better of the two is returned
    fitted = evaluate(workload, A, None, norm="l2", caller=caller).total_squared_error
    fit_status = "local_optimum" if converged else "user_limit"
    status, solver = fit_status, "L-BFGS-B"
    if plan.objective < fitted:
        # the status describes the strategy returned: the split plan's closed form, not the fit that lost to it
        A, status, solver = plan.strategy, "closed_form", None
        message = (f"The split plan ({plan.objective:.6g}) is below the coupled fit ({fitted:.6g}, "
                   f"{fit_status}) on this workload (the coupled family shares one factor per order across the "
                   "attributes): returned the split plan's strategy.")
    floor = optimum_floor(workload)
    return ImplicitSolution(A, status, message, None, solver, lower_bound=floor if floor > 0 else None,
                            extra={"split_objective": plan.objective, "fit_status": fit_status})


__all__ = ["applies", "fit", "objective", "solve_coupled", "start", "strategy"]
