"""Release on a product domain: OpenDP noise on the exact strategy answers, then implicit least squares.

Notation: see README. The dense :func:`mmopt.release` carried over to implicit W and A: y = A x + z with z
from OpenDP's vetted samplers at a sensitivity that is exact or a proven upper bound (never an
underestimate), privacy checked by OpenDP's own map before the data are touched; x̂ = A⁺y by
:func:`~mmopt.structured.mechanism.least_squares` and W x̂ by :func:`~mmopt.structured.mechanism.answer`
are post-processing and keep the guarantee.
"""

from __future__ import annotations

import math

import numpy as np

from mmopt._base import validation as v
from mmopt._base.opendp import finite, measure, post_process
from mmopt.dense.exact_answers import check_histogram
from mmopt.privacy import Privacy
from mmopt.reconstruct import check_reconstruction
from mmopt.structured import analysis
from mmopt.structured import charged_answers as charged
from mmopt.structured.mechanism import (
    DEFAULT_TOL,
    MAX_ANSWERS,
    StructuredOutput,
    answer,
    check_counts,
    expected_at,
    implicit_probe,
    reconstruct_estimate,
)
from mmopt.structured.strategies import ImplicitStrategy
from mmopt.structured.workloads import ImplicitWorkload

_TINY = np.finfo(float).tiny

# Δ is a product of ≤ d factors' column norms (and, for unions, a sum over terms), each a float sum of
# at most 10⁶ non-negative entries taken at an exact power-of-two scale
# (:func:`~mmopt.structured.strategies.sensitivity_parts`): relative rounding below (Σ counts)·eps ≈
# 2·10⁷·1.1e-16 ≈ 2.2e-9 for d ≤ 20, plus terms and cells that underflow in the scaled sum (each below
# 2⁻¹⁰⁷⁴ while the scaled Δ is at least 1/4: relative K·2⁻¹⁰⁷² for K terms). Inflating by 1e-7 covers it
# with room to spare and adds 1e-7 relative noise.
_ROUNDING_SLACK = 1e-7


def upper_sensitivity(value: float, *, caller: str = "release") -> float:
    """Δ rounded upwards past any float rounding of its factor-wise computation (see _ROUNDING_SLACK).

    ``value`` is a normal float (the structured sensitivity raises otherwise); an inflated value past
    float64's largest number is refused rather than returned as inf.
    """
    if not (math.isfinite(value) and value >= _TINY):
        raise ValueError(f"{caller}: the sensitivity {value!r} is not a normal positive float64, so no noise can be "
                         "calibrated to it. Rescale the strategy (A and cA have the same error).")
    with np.errstate(over="ignore"):
        up = math.nextafter(value * (1.0 + _ROUNDING_SLACK), math.inf)
    if not math.isfinite(up):
        raise ValueError(f"{caller}: the sensitivity {value:.6g}, rounded upwards for the privacy proof, exceeds "
                         "float64. Rescale the strategy (A and cA have the same error).")
    return up


def release(workload: ImplicitWorkload, strategy: ImplicitStrategy, x, privacy: Privacy, *,
            noise_scale: float | None = None, tol: float = DEFAULT_TOL, max_answers: int = MAX_ANSWERS,
            reconstruct: str = "least_squares", total: float | None = None, zeros=None,
            reconstruct_options: dict | None = None) -> StructuredOutput:
    """Release W x̂ for real data on a product domain, with OpenDP noise and a verified (ε, δ) guarantee.

    The guarantee and its conditions are those of :func:`mmopt.mechanism.release`: (ε, δ)-DP for adding
    or removing one record of the data whose histogram is ``x`` (true counts), with A and W fixed
    independently of the data. Δ is :func:`~mmopt.structured.strategies.sensitivity` — exact, or a proven
    upper bound when ``sensitivity_exact`` is False — rounded upwards. Noise cannot be seeded. Unlike the dense
    release (:mod:`mmopt.dense.exact_answers`), A x is computed factor by factor: exactly by BLAS for integer and
    selection factors, by compensated mode products for the others, and the proven bound on its rounding is
    charged in d_in (:mod:`mmopt.structured.charged_answers`: Δ·(1 + c·(2N + 1)), about 9.5·10⁻⁷ of Δ; nothing
    for integer factors at a power-of-two weight). So ``x`` must hold whole counts of at most
    :data:`mmopt.dense.exact_answers.MAX_RECORDS` records, checked before any draw.
    ``reconstruct``, ``total`` and ``zeros`` are those of :func:`mmopt.matrix_mechanism`; they only
    post-process y with public facts, so the guarantee is unchanged.

    Examples
    --------
    >>> import mmopt
    >>> from mmopt import workload as wl, strategy as st
    >>> W = wl.kron(wl.prefix(80), wl.identity_total(60))             # 4,800 cells: implicit
    >>> A = st.kron(st.hierarchical(80), st.identity(60))
    >>> import numpy as np
    >>> out = release(W, A, np.ones((80, 60)), mmopt.Privacy(1.0))
    >>> out.path, out.answers.shape, out.estimate.shape, out.sensitivity_exact
    ('release', (4880,), (80, 60), True)
    """
    caller = "release"
    if not isinstance(workload, ImplicitWorkload) or not isinstance(strategy, ImplicitStrategy):
        raise TypeError(f"{caller}: this path needs an implicit workload and strategy. Got "
                        f"{type(workload).__name__} and {type(strategy).__name__}.")
    if not isinstance(privacy, Privacy):
        raise TypeError(f"The 'privacy' parameter of {caller} must be a Privacy, e.g. Privacy(epsilon=1.0). "
                        f"Got {type(privacy).__name__}.")
    report = analysis.evaluate(workload, strategy, privacy, caller=caller)  # shapes, support, Δ
    reconstruct, total, zeros, options = check_reconstruction(reconstruct, total, zeros, reconstruct_options,
                                                              strategy.domain_size, caller, strategy.shape)
    x = check_counts(x, strategy, caller)
    # before the draw: nan, -1 or 2.5 gave no answers after the budget was spent (a helper's probe)
    max_answers = v.check_int(max_answers, name="max_answers", caller=caller, low=0)
    check_histogram(x.ravel(), caller)  # whole counts, at most MAX_RECORDS records: what Δ and the charge assume
    answer_plan = charged.plan(strategy)  # from the strategy alone: the charge never sees the data
    d_in = charged.charged_sensitivity(upper_sensitivity(report.sensitivity, caller=caller), answer_plan.relative,
                                       answer_plan.absolute, privacy.sensitivity_norm, strategy.n_rows)
    Ax = finite(charged.answers(strategy, x, answer_plan), "the strategy answers A x", caller)  # before any noise
    y, scale, loss = measure(Ax, d_in, privacy, noise_scale=noise_scale, caller=caller)

    def finish(method: str):
        xhat, info, how = reconstruct_estimate(workload, strategy, y, method, total=total, zeros=zeros, tol=tol,
                                               options=options if method != "least_squares" else None)
        xhat = finite(xhat, "x̂", caller)
        return xhat, (answer(workload, xhat) if workload.n_queries <= max_answers else None), info, how

    done = post_process(caller, lambda: finish(reconstruct), lambda: finish("least_squares"),
                        f"reconstruct={reconstruct!r}")
    xhat, ans, info, how = done if done is not None else (None, None, None, None)
    return StructuredOutput(ans, xhat, scale, privacy.noise, d_in, report.sensitivity_exact,
                            expected_at(report, privacy, scale), report, info, path="release", reconstruction=how,
                            verified_loss=loss, measurements=y, strategy_probe=implicit_probe(strategy))
