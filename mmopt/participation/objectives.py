"""Objectives beyond the total under a participation schema: the largest per-step variance, the last iterate.

Notation: see :mod:`mmopt.participation.optimum`. X = CᵀC with Δ² ≤ 1 under the schema (the feasible set 𝒳,
convex: Δ² is a maximum of linear functions of X), W (m×n) the workload, vᵢ(X) = wᵢ X⁻¹ wᵢᵀ the variance of
query i at unit σ.

**Largest variance** (fixed epochs, n ≤ 4,096). min_{X∈𝒳} maxᵢ vᵢ(X) is convex and equals, by Sion's minimax
theorem (𝒳 ∩ {X ⪰ εI} and the simplex are convex, one compact),

    max_{q ∈ Δ_m} f(q),   f(q) = min_{X∈𝒳} tr(W̃ᵀ diag(q) W̃ X⁻¹),

the total-error problem of the weighted workload diag(√q)W, which :func:`mmopt.participation.optimum.
solve_fixed_epochs` solves with a dual certificate g(q) ≤ f(q): every g(q) is a certified lower bound, every
returned X an upper bound maxᵢ vᵢ(X) (its sensitivity exact, or a proven bound it is scaled by). f is concave
with supergradient v(X_q) (Danskin), so the weights are updated as in :mod:`mmopt.search.max_variance` (L-BFGS-B on
f(p) − (Σp)²/2 over p ≥ 0, restarted from the best weights), with q = (1 − μ)p/Σp + μ/m (μ = :data:`MIX`: G_q
stays conditioned, which the total-error solver's causal factor needs, at a cost of at most a factor 1 − μ on
the bound); the average of the X's is feasible too (convexity) and often better where X_q is not unique. It stops
when the best of each meet within ``tol``. Measured: prefix sums, 16 steps, 2 epochs: 10⁻⁴ in 26 solves; 32 steps,
4 epochs: 6·10⁻⁴ after 300; momentum β = 0.9 (ill-conditioned G): 0.4 % (16 steps) and 4 % (32 steps), where the
solver's factor fails and the search stops early ("optimal_inaccurate").

**Last iterate**: one query, w = W's last row (the final model's error). For any pattern π and sign vector
s = sign(w) on π, B_π = s sᵀ (a unit-diagonal PSD block) in the dual of :mod:`mmopt.participation.optimum`
gives S(M)² = (wᵀ B_π w) = (Σ_{t∈π} |w_t|)² at unit weight, so every strategy has error ≥ max_π (Σ_{t∈π}|w_t|)²;
the one-row strategy A = w (measure the final iterate once, Δ² = that maximum: the block of X = wᵀw on π is
w_π w_πᵀ, whose largest ⟨·, Y⟩ is (Σ|w_t|)²) attains it: the optimum, in closed form. A causal factor that
releases every iterate cannot beat it; the value is the yardstick for such factors'
:func:`last_iterate_error`.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from mmopt._base import validation as v
from mmopt.dense.profile import power_of_two_scale
from mmopt.participation.schemas import FixedEpochs, MinSeparation, Schema, Single, as_schema
from mmopt.participation.sensitivity import best_pattern_sum, gram_sensitivity_squared
from mmopt.search.max_variance import Done, ascend

__all__ = ["last_iterate_bound", "last_iterate_error", "solve_max_variance"]

#: the uniform weights' share in every q: keeps G_q's condition within m/MIX of WᵀW's (the causal factor of the
#: total-error solver fails on a near-singular G_q) and costs the bound at most a factor 1 − MIX (concavity of f)
MIX = 1e-3


def _row_variances(W: np.ndarray, C: np.ndarray) -> np.ndarray:
    """vᵢ = ‖C⁻ᵀwᵢ‖² for lower-triangular C (X = CᵀC): one triangular solve, no inverse of X."""
    B = scipy.linalg.solve_triangular(C, W.T, lower=True, trans="T", check_finite=False)
    return np.einsum("ij,ij->j", B, B)


def solve_max_variance(W: np.ndarray, epochs: int, *, tol: float = 1e-4, max_iterations: int = 300) -> dict:
    """min over X = CᵀC with Δ² ≤ 1 under ``fixed_epochs(epochs)`` of maxᵢ wᵢX⁻¹wᵢᵀ, certified (module docstring).

    Returns a dict: ``matrix`` C (lower-triangular, unit sensitivity), ``objective`` its largest variance,
    ``lower_bound``, ``status`` ("optimal" when within ``tol``, "user_limit" when ``max_iterations`` total solves
    were spent, else "optimal_inaccurate"), ``iterations`` (total solves), ``weights`` (q of the best bound),
    ``variances``, ``sensitivity`` (of the returned C) and ``history``.

    Examples
    --------
    >>> import mmopt
    >>> sol = solve_max_variance(np.tril(np.ones((8, 8))), 2)
    >>> sol["status"], bool(sol["lower_bound"] <= sol["objective"] <= sol["lower_bound"] * 1.0001)
    ('optimal', True)
    """
    from mmopt.participation.optimum import causal_factor

    caller = "solve_max_variance"  # its inputs were unchecked: a 1-D W, tol=nan or max_iterations=0 failed deep
    W = v.check_matrix(W, name="W", caller=caller)
    m, n = W.shape
    FixedEpochs(v.check_int(epochs, name="epochs", caller=caller)).check_n(n, caller, "W")
    tol = v.check_real(tol, name="tol", caller=caller, low=0.0, low_open=True)
    max_iterations = v.check_int(max_iterations, name="max_iterations", caller=caller)
    # solved at a power-of-two scale (exact), as mmopt.search.max_variance is: the weights' floor below is absolute,
    # and W·0.01 (a constant learning rate of 0.01) pinned every weight to it, stopping after 2 solves 26 % above
    # the optimum it certifies at W (a helper's probe); variances scale back by 2ᵉ
    k = power_of_two_scale(W)
    W, e = np.ldexp(W, -k), 2 * k
    schema = FixedEpochs(epochs)
    st = {"lower": 0.0, "p": np.full(m, 1.0 / m), "best": None, "k": 0, "mean": np.zeros((n, n))}
    history: list[dict] = []

    def consider(C, sens):
        vi = _row_variances(W, C)
        if st["best"] is None or float(vi.max()) < st["best"][0]:
            st["best"] = (float(vi.max()), C, vi, sens)

    def negative_F(p):
        if st["k"] >= max_iterations:
            raise Done("user_limit")
        st["k"] += 1
        total = float(p.sum())
        q = (1 - MIX) * p / total + MIX / m  # G_q ⪰ (MIX/m)·WᵀW: conditioned, whatever p
        sol = _solve_total(W.T @ (q[:, None] * W), epochs)
        if sol is None:  # X_q too ill-conditioned for a causal factor at every accuracy: these weights are unusable
            raise Done("optimal_inaccurate")
        if sol.dual > st["lower"]:  # q ∈ Δ: g(q) ≤ f(q) ≤ the minimax value
            st["lower"], st["p"] = float(sol.dual), q
        X = sol.matrix.T @ sol.matrix  # unit sensitivity (a proven bound when not exact)
        st["mean"] += (X - st["mean"]) / st["k"]
        consider(sol.matrix, sol.sensitivity)
        mean_sens = gram_sensitivity_squared(st["mean"], schema)
        try:
            consider(causal_factor(st["mean"] / mean_sens.squared), mean_sens)
        except np.linalg.LinAlgError:  # the average lost definiteness to round-off: skip it
            pass
        v = _row_variances(W, sol.matrix)
        history.append({"iteration": st["k"], "objective": st["best"][0], "lower_bound": st["lower"]})
        if st["best"][0] - st["lower"] <= tol * st["best"][0]:
            raise Done("optimal")
        # f̃(p) = f((1 − MIX)p + MIX·(Σp)u) is concave and 1-homogeneous, with supergradient (1 − MIX)v + MIX·mean(v)
        return -(total * float(q @ v) - total * total / 2), -((1 - MIX) * v + MIX * float(v.mean()) - total)

    floor = 1e-3 / m  # every qᵢ > 0 keeps G_q definite (W of full column rank) and X_q's factor computable
    first = _solve_total(W.T @ W / m, epochs)  # F's maximiser is f(q*)·q*: start at the scale f(uniform)
    start = np.full(m, max(first.dual / m if first is not None else 1.0, floor))
    status = ascend(negative_F, start, st, floor=floor, max_iterations=max_iterations)
    top, C, vi, sens = st["best"]
    history = [h | {key: float(np.ldexp(h[key], e)) for key in ("objective", "lower_bound")} for h in history]
    return {"matrix": C, "objective": float(np.ldexp(top, e)), "lower_bound": float(np.ldexp(min(st["lower"], top), e)),
            "status": status, "iterations": st["k"], "weights": st["p"], "variances": np.ldexp(vi, e),
            "sensitivity": sens, "history": tuple(history)}


def _solve_total(G: np.ndarray, epochs: int):
    """The certified total-error optimum for G, as accurate as its causal factor allows (None if never).

    Far into the dual ascent X(M) can lose definiteness to round-off (ill-conditioned G, e.g. momentum near
    β = 1), and its Cholesky factor fails: a looser tolerance stops the ascent earlier, at a factorable X."""
    from mmopt.participation.optimum import solve_fixed_epochs
    for tol in (1e-7, 1e-5, 1e-3):
        try:
            return solve_fixed_epochs(G, epochs, tol=tol, max_iterations=500)
        except np.linalg.LinAlgError:
            continue
    return None


def last_iterate_bound(row: np.ndarray, schema: Schema) -> tuple[float, tuple[int, ...]]:
    """(max_π (Σ_{t∈π} |w_t|)², a maximising pattern): the optimum of the last-iterate error (module docstring).

    >>> import mmopt
    >>> last_iterate_bound(np.ones(8), mmopt.participation.fixed_epochs(4))   # k = 4 copies of one gradient
    (16.0, (0, 2, 4, 6))
    """
    w = np.abs(v.check_vector(row, name="row", caller="last_iterate_bound", meaning="one weight per step"))
    schema = as_schema(schema, "last_iterate_bound")
    n = schema.check_n(len(w), "last_iterate_bound", "row")  # in the caller's words (it named FixedEpochs.separation)
    if isinstance(schema, Single):
        t = int(np.argmax(w))
        return float(w[t] ** 2), (t,)
    if isinstance(schema, FixedEpochs):
        b = schema.separation(n)
        sums = w.reshape(-1, b).sum(axis=0)
        j = int(np.argmax(sums))
        return float(sums[j] ** 2), tuple(range(j, n, b))
    if isinstance(schema, MinSeparation):
        value, pattern = best_pattern_sum(w, schema.separation_steps, schema.participations(n))
        return value ** 2, pattern
    raise TypeError(f"last_iterate_bound: no bound for the schema {schema!r}")


def last_iterate_error(workload_matrix: np.ndarray, strategy, schema: Schema) -> tuple[float, object]:
    """(Δ²·‖w C⁻¹‖², Δ²): the last iterate's error at unit σ of the invertible strategy C, w = W's last row.

    ``strategy`` is an array C, a :class:`~mmopt.Strategy` or a :class:`~mmopt.toeplitz.ToeplitzStrategy` (what
    ``optimize(..., participation=...)`` returns; the latter held in O(n): w C⁻¹ is one correlation with C⁻¹'s
    first column).

    >>> import mmopt
    >>> W = np.tril(np.ones((4, 4)))
    >>> err, sens = last_iterate_error(W, np.eye(4), mmopt.participation.fixed_epochs(2))   # DP-SGD's noise
    >>> err, sens.squared            # n = 4 independent draws in the last sum, Δ² = 2
    (8.0, 2.0)
    """
    from mmopt.participation.strategies import sensitivity_for
    from mmopt.toeplitz.strategies import ToeplitzStrategy
    caller = "last_iterate_error"
    schema = as_schema(schema, caller, none=False)  # a Δ² reported: None is no schema here (a review)
    toeplitz = isinstance(strategy, ToeplitzStrategy)
    sens = sensitivity_for(strategy, schema, caller)  # first: it names the strategies it takes
    C = None if toeplitz else v.check_matrix(getattr(strategy, "matrix", strategy), name="strategy", caller=caller,
                                             square=True)
    n = strategy.n if toeplitz else C.shape[0]
    W = v.check_matrix(workload_matrix, name="workload_matrix", caller=caller)
    if W.shape[1] != n:
        raise ValueError(f"The 'workload_matrix' parameter of {caller} must have {n} columns (the "
                         f"strategy's steps). Got shape {W.shape}.")
    w = W[-1]
    if toeplitz:  # C = 2ᵉ·D·T(c): w C⁻¹ = 2⁻ᵉ (T(g)ᵀ wᵀ)ᵀ D⁻¹, g = C′⁻¹'s first column
        from mmopt.toeplitz._series import correlate_tail
        unit, e = strategy.normalised()
        z = correlate_tail(unit.inverse_column(), w, n)
        z = z if unit.row_scale is None else z / np.sqrt(unit.row_scale)
        return float(np.ldexp(z @ z, -2 * e)) * sens.squared, sens
    try:
        z = np.linalg.solve(C.T, w)  # w C⁻¹ = (C⁻ᵀ wᵀ)ᵀ
    except np.linalg.LinAlgError:
        raise ValueError(f"The 'strategy' parameter of {caller} must be invertible (its noise is C⁻¹z). Got a "
                         "singular C.") from None
    return float(z @ z) * sens.squared, sens
