"""optimize(prefix(n), method="toeplitz" | "banded" | "blt" | "weighted_sqrt"): strategies at any n.

Notation: see :mod:`mmopt.toeplitz.error`. The objective is the (ε,δ) error at unit privacy,
L(c) = ‖c‖²·F(b), b = cumsum(1/c), F the workload's Σ‖rows of B‖² (:func:`~mmopt.toeplitz.error.decoder_total`).
L is scale-free (L(αc) = L(c)), so c_0 = 1 is fixed. Its gradient is exact and O(n log n): with g = 1/c,
s = g² and a = ∂F/∂g (a reverse cumulative sum of ∂F/∂b), dg = −T(s) dc gives ∂F/∂c_j = −Σ_{m≥j} s_{m−j} a_m,
one FFT correlation. L-BFGS (scipy) minimises it over

* "toeplitz": all n coefficients (start: the square-root factorisation);
* "banded": the first ``bands`` coefficients (McKenna, ICLR 2025; start: the truncated square root);
* "blt": BLT parameters c_k = Σ θ_i ω_i^{k−1} with d = ``buffers`` (Dvijotham et al. 2024), as θ = e^φ,
  ω = 1 − e^τ (start: ω on timescales 2..n, θ fitted to the square root's c_k by non-negative least squares).

With ``equalize`` (the default) the strategy is D·T(c) with unit column norms and the row scaling D is
differentiated too. "sqrt" and "weighted_sqrt" are closed forms (:mod:`mmopt.toeplitz.weighted`).

None of these is convex, and none is certified by its own test: the status is "local_optimum" (L-BFGS
converged) or "user_limit" (``max_iterations`` spent), and the result carries the certified lower bound of
:mod:`mmopt.toeplitz.bound` (prefix or all ranges) and its ratio.
"""

from __future__ import annotations

import time

import numpy as np
from scipy import optimize as sopt
from scipy import signal

from mmopt._base import validation as v
from mmopt._base.result import SUCCESS, OptimizeResult, reconcile
from mmopt.toeplitz import _series, bound
from mmopt.toeplitz.error import as_stream_workload, decoder_total, decoder_total_gradient, evaluate
from mmopt.toeplitz.strategies import banded, blt, equalized, sqrt_coefficients, sqrt_strategy
from mmopt.toeplitz.weighted import WeightedSqrtStrategy

__all__ = ["METHODS", "objective_and_gradient", "optimize"]

METHODS = ("weighted_sqrt", "sqrt", "toeplitz", "banded", "blt")
_DEFAULTS = {"toeplitz": 2000, "banded": 1000, "blt": 500}
_COEFFICIENT_STEP = 0.01  # the coefficients' unit in the search (see optimize)


def _revcumsum(a: np.ndarray) -> np.ndarray:
    return np.cumsum(a[::-1])[::-1]


def objective_and_gradient(kind: str, c: np.ndarray, n: int, equalize: bool = False) -> tuple[float, np.ndarray]:
    """(L(c), ∂L/∂c) for the first column c (length k ≤ n, zero beyond) at unit privacy; inf when 1/c overflows.

    ``equalize``: the strategy is D·T(c) with the unit-column row scaling of
    :func:`~mmopt.toeplitz.strategies.equalized` (z = cumsum(1/(c∘c)) is y reversed), so Δ₂ = 1 and
    L = F(b, r = 1/z); the scaling's dependence on c is differentiated too.
    """
    g = _series.reciprocal(c, n)
    b = np.cumsum(g)
    if not np.all(np.isfinite(b)) or np.abs(b).max() > 1e150:
        return np.inf, np.zeros_like(c)
    r = None
    if equalize:
        h = _series.reciprocal(c * c, n)
        z = np.cumsum(h)
        if not np.all(np.isfinite(z)) or z.min() <= 0:
            return np.inf, np.zeros_like(c)
        r = 1.0 / z
    F = decoder_total(kind, b, r)
    a = _revcumsum(decoder_total_gradient(kind, b, r))  # ∂F/∂g_m = Σ_{t ≥ m} ∂F/∂b_t
    dF = -_series.correlate_tail(_series.convolve(g, g, n), a, len(c))  # dg = −T(g²) dc
    if not equalize:
        sens = float(c @ c)
        return sens * F, 2.0 * F * c + sens * dF
    E = np.cumsum(b * b)
    dF_dr = E if kind == "prefix" else (n + 1) * E - np.cumsum(b) ** 2
    dF_dh = _revcumsum(-dF_dr * r * r)  # z = cumsum(h), r = 1/z
    dF_dq = -_series.correlate_tail(_series.convolve(h, h, n), dF_dh, len(c))  # dh = −T(h²) dq
    return F, dF + 2.0 * c * dF_dq


def _blt_parts(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    d = len(x) // 2
    return np.exp(x[:d]), 1.0 - np.exp(x[d:])


def _blt_objective(kind: str, x: np.ndarray, n: int, equalize: bool) -> tuple[float, np.ndarray]:
    theta, omega = _blt_parts(x)
    c = _series.first_order_sum(theta, omega, n)
    L, G = objective_and_gradient(kind, c, n, equalize)
    if not np.isfinite(L):
        return L, np.zeros_like(x)
    grad = np.empty_like(x)
    d = len(theta)
    tail, tail2 = G[1:][::-1], G[2:][::-1]
    for i in range(d):
        w = omega[i]
        # Horner's rule as a recursion (lfilter): Σ_j G_j ω^{j−1} = P(ω) and Σ_j (j−1) G_j ω^{j−2} = P′(ω), the
        # latter through 1/(1 − ωx)² = Σ_m (m+1) ω^m x^m; both stable for |ω| < 1
        P = signal.lfilter([1.0], [1.0, -w], tail)[-1] if len(tail) else 0.0
        dP = signal.lfilter([1.0], [1.0, -2 * w, w * w], tail2)[-1] if len(tail2) else 0.0
        grad[i] = theta[i] * P  # ∂L/∂φ_i = θ_i P(ω_i)
        grad[d + i] = -(1.0 - w) * theta[i] * dP  # dω/dτ = −(1 − ω)
    return L, grad


def _blt_start(n: int, d: int) -> np.ndarray:
    """θ fitted (non-negative least squares, relative error) to the square root's c_k on log-spaced k, with ω on
    timescales 2..n; a feasible start for the row-equalised search (c decreasing, c_1 ≈ 1/2)."""
    omega = 1.0 - (np.geomspace(0.5, 1.0 / n, d) if d > 1 else np.array([n ** -0.5]))
    k = np.unique(np.geomspace(1, max(n - 1, 1), 8 * d).astype(int))
    target = sqrt_coefficients(n)[k]
    A = omega[None, :] ** (k[:, None] - 1.0) / target[:, None]
    theta = np.maximum(sopt.nnls(A, np.ones(len(k)))[0], 1e-12)
    return np.concatenate([np.log(theta), np.log(1.0 - omega)])


def optimize(workload, method: str = "blt", *, bands: int | None = None, buffers: int | None = None,
             equalize: bool = True, max_iterations: int | None = None, tol: float | None = None) -> OptimizeResult:
    """A Toeplitz strategy for the prefix (or all-range) workload at any n, under Gaussian noise (L2).

    Parameters
    ----------
    workload : mmopt.toeplitz.prefix(n) or all_range(n), or mmopt's dense prefix / all_range workload
    method : {"blt", "banded", "toeplitz", "sqrt", "weighted_sqrt"}, default="blt"
        "sqrt" is the square-root factorisation (a closed form, no search); "weighted_sqrt" the closed form
        G^{1/4}·diag(h)^{−1/2} of :mod:`mmopt.toeplitz.weighted` (the lowest error here, but not causal:
        offline release only), the others are lower-triangular (streaming) strategies.
    bands : int, optional
        "banded" only: the number of non-zero diagonals (default min(n, 64)).
    buffers : int, optional
        "blt" only: d (default 8).
    equalize : bool, default=True
        Search over row-scaled strategies D·T(c) with unit column norms (:func:`equalized`): same online
        structure, and 3–4 % less error than the best plain Toeplitz C at n = 2¹⁰…2¹⁶ (1.032 against 1.072
        times the bound at n = 1,024).
    max_iterations : int, optional
        L-BFGS iterations (defaults: toeplitz 2,000, banded 1,000, blt 500).
    tol : float in (0, 1), optional
        L-BFGS's relative objective test (ftol, default 1e-12).

    Returns
    -------
    OptimizeResult
        ``objective`` Δ₂²·‖W C⁻¹‖_F² at unit privacy (exact, from :func:`mmopt.toeplitz.evaluate`);
        ``lower_bound`` the certified bound of :func:`mmopt.toeplitz.prefix_bound` (or ``all_range_bound``).

    Examples
    --------
    >>> from mmopt.toeplitz import prefix
    >>> res = optimize(prefix(1024), "blt", buffers=4)
    >>> res.status, res.strategy.name, bool(res.ratio < optimize(prefix(1024), "sqrt").ratio < 1.04)
    ('local_optimum', 'blt(4)+rows', True)
    """
    t0 = time.perf_counter()
    caller = "mmopt.toeplitz.optimize"
    W = as_stream_workload(workload, caller)
    method = v.check_choice(method, name="method", caller=caller, choices=METHODS)
    n = W.n
    for name, value, used in (("bands", bands, "banded"), ("buffers", buffers, "blt")):
        if value is not None and method != used:
            raise ValueError(f"The '{name}' parameter of {caller} applies to method={used!r} only. Got "
                             f"{name}={value!r} with method={method!r}; drop it.")
    # checked before the n = 1 shortcut below, which returned "optimal" for bands=-3 or buffers=1000
    if bands is not None:
        v.check_int(bands, name="bands", caller=caller, high=n)
    if buffers is not None:
        v.check_int(buffers, name="buffers", caller=caller, high=64)
    closed = method in ("sqrt", "weighted_sqrt")
    if closed and (max_iterations is not None or tol is not None):
        raise ValueError(f"The 'max_iterations' and 'tol' parameters of {caller} do not apply to "
                         f"method={method!r} (a closed form). Drop them.")
    iters = v.check_int(max_iterations, name="max_iterations", caller=caller) if max_iterations is not None \
        else _DEFAULTS.get(method, 0)
    ftol = v.check_real(tol, name="tol", caller=caller, low=0, high=1, low_open=True, high_open=True) \
        if tol is not None else 1e-12
    history: list[dict] = []
    solver, nit, raw_status, message, extra = None, None, "optimal", "", {}
    if not isinstance(equalize, bool | np.bool_):
        raise TypeError(f"The 'equalize' parameter of {caller} must be True or False. Got {equalize!r} instead.")
    if method == "weighted_sqrt":
        C = WeightedSqrtStrategy(W)
        message = "Closed-form strategy (the weighted square root G^{1/4}·diag(h)^{−1/2}): built, not searched."
    elif method == "sqrt":
        C = equalized(sqrt_strategy(n)) if equalize else sqrt_strategy(n)
        message = "Closed-form strategy (the square-root factorisation W^{1/2}): built, not searched."
    elif n == 1:  # nothing to search: every 1×1 strategy [c₀] has the same error
        C = banded([1.0], 1)
        message = "n = 1: the strategy [1] (every non-zero 1×1 strategy has the same error)."
    elif method == "banded" and v.check_int(bands if bands is not None else min(n, 64), name="bands", caller=caller,
                                            high=n) == 1:  # nothing to search (an empty vector crashed L-BFGS-B)
        C = banded([1.0], n)
        message = "bands = 1: the identity strategy [1] (every one-band strategy c₀·I has the same error)."
    else:
        if method == "blt":
            d = v.check_int(buffers if buffers is not None else 8, name="buffers", caller=caller, high=64)
            x0, fun = _blt_start(n, d), (lambda x: _blt_objective(W.kind, x, n, equalize))
            bounds = [(-60.0, 5.0)] * d + [(-34.0, 0.0)] * d  # θ ≤ e⁵, 0 ≤ ω ≤ 1 − 1.7e−15
        else:
            k = n if method == "toeplitz" else v.check_int(bands if bands is not None else min(n, 64),
                                                           name="bands", caller=caller, high=n)
            # L-BFGS-B's first trial step has unit length; in the coefficients (c_k ≤ 0.5) that jumps to a c whose
            # 1/c or 1/(c∘c) overflows, its line search ends on the inf and it reported "converged" after one
            # iteration (with 4–64 bands at n = 1,024). It searches y = (c − c⁰)/_COEFFICIENT_STEP instead.
            c0 = sqrt_coefficients(n)[1:k]
            x0, bounds = np.zeros(k - 1), None

            def fun(x):
                L, G = objective_and_gradient(W.kind, np.concatenate([[1.0], c0 + _COEFFICIENT_STEP * x]), n,
                                              equalize)
                return L, _COEFFICIENT_STEP * G[1:]
        with np.errstate(over="ignore", invalid="ignore"):
            start = fun(x0)[0]
        if not np.isfinite(start):
            raise ValueError(f"{caller}: the starting strategy for method={method!r} is numerically singular at "
                             f"n = {n:,}; try fewer bands or buffers, or equalize=False.")
        scale = 1.0 / start  # objective ~1 at the start: L-BFGS-B's tests are relative to max(|f|, 1)

        def scaled(x):
            with np.errstate(over="ignore", invalid="ignore"):  # a step into 1/c blowing up returns inf
                L, G = fun(x)
            return L * scale, G * scale
        res = sopt.minimize(scaled, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                            options={"maxiter": iters, "ftol": ftol, "gtol": 0.0, "maxcor": 20})
        solver, nit = "L-BFGS-B", int(res.nit)
        # Converged means a small gradient relative to the objective (scale-free: |x|·|∇f|/f), whatever test
        # stopped L-BFGS-B: it also stops on a stalled line search (an abnormal end at float64's precision, or
        # a step into the region where 1/c overflows), which is a converged point only if the gradient says so.
        # (in the coefficients themselves for toeplitz and banded, not in the search's scaled steps)
        jac, xs = (res.jac, res.x) if method == "blt" else (res.jac / _COEFFICIENT_STEP, c0 + _COEFFICIENT_STEP * res.x)
        stalled = float(np.max(np.abs(jac) * np.maximum(np.abs(xs), 1.0))) / max(abs(res.fun), 1e-300)
        # L-BFGS-B's own stop on ftol (the caller's tol) is a converged search, not a failure: "local_optimum"
        raw_status = ("optimal" if stalled <= 1e-4 else "user_limit" if res.nit >= iters
                      else "local_optimum" if res.success else "solver_error")
        message = (f"L-BFGS-B on the {method} parameters: {res.message} ({res.nit} iterations, relative "
                   f"gradient {stalled:.1e}).")
        history.append({"iterations": int(res.nit), "evaluations": int(res.nfev), "objective": float(res.fun)})
        if method == "blt":
            theta, omega = _blt_parts(res.x)
            C = blt(theta, omega, n)
            C = equalized(C) if equalize else C
            extra = {"theta": theta.tolist(), "omega": omega.tolist()}
        else:
            C = banded(np.concatenate([[1.0], c0 + _COEFFICIENT_STEP * res.x]), n,
                       name=method if method == "toeplitz" else None)
            C = equalized(C) if equalize else C
    report = evaluate(W, C)  # (the weighted square root reports through evaluate_weighted, exact to 4,096 cells)
    lb = bound.lower_bound(W)
    # tol is L-BFGS's ftol, not a duality gap: it never widens the certificate (mmopt._base.result.gap_tol)
    status, message, lower = reconcile(report.total_squared_error, lb.value, raw_status, message, closed=closed)
    if status == "optimal" and raw_status == "optimal" and report.total_squared_error > lb.value * (1 + 1e-6):
        status = "local_optimum"  # L-BFGS's own test is no certificate
    m = W.n_queries
    # all ranges under a row-scaled strategy past the exact passes: max_variance is the largest prefix's (attained),
    # max_variance_upper a proven bound, and the flag says so (it was dropped here, and a bound 4–10 % above the
    # largest variance read as that variance)
    extra |= {"svd_bound": lb.svd, "diagonal_bound": lb.diagonal, "max_variance": report.max_variance,
              "max_variance_upper": report.max_variance_upper, "max_variance_exact": bool(report.max_variance_exact),
              "workload": W.kind, "n": n}
    return OptimizeResult(C, "l2", report.total_squared_error, lower, status, status in SUCCESS, message, method,
                          solver, nit, time.perf_counter() - t0, report.total_squared_error / m, lower / m,
                          tuple(history), extra)


#: The methods :func:`mmopt.optimize` hands to this module (``method="weighted_sqrt"`` etc.).
MMOPT_METHODS = ("weighted_sqrt", "toeplitz", "blt", "banded")


def from_optimize(workload, method: str, *, norm: str | None, tol, max_iterations, options, unused: dict
                  ) -> OptimizeResult:
    """:func:`mmopt.optimize`'s entry to this module: its parameters checked and mapped onto :func:`optimize`.

    ``options``: "bands" (banded), "buffers" (blt), "equalize" (toeplitz, blt, banded). These methods optimise
    the Gaussian (L2) objective; the Laplace one is refused rather than scored in the wrong norm.
    """
    caller = f"optimize(method={method!r})"
    given = sorted(k for k, val in unused.items() if val is not None)
    if given:
        raise ValueError(f"The {given} parameter(s) of optimize do not apply to method={method!r}, which reads "
                         "['max_iterations', 'tol', options 'bands', 'buffers', 'equalize'].")
    if norm not in (None, "l2"):
        raise ValueError(f"{caller} optimises the (ε,δ) objective (Gaussian noise, L2 sensitivity). Got "
                         f"norm={norm!r} (Laplace noise); use Privacy(epsilon, delta > 0) or another method.")
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"The 'options' parameter of optimize must be a dict or None. Got {type(options).__name__}.")
    accepted = {"weighted_sqrt": set(), "toeplitz": {"equalize"}, "blt": {"buffers", "equalize"},
                "banded": {"bands", "equalize"}}[method]
    opts = dict(options or {})
    unknown = sorted(set(opts) - accepted)
    if unknown:
        raise ValueError(f"Unknown options {unknown} for {caller}, which accepts only {sorted(accepted)}.")
    return optimize(workload, method, max_iterations=max_iterations, tol=tol, **opts)
