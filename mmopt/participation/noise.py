"""Streaming release for private training: the correlated noise C⁻¹z step by step, and the privacy of the run.

Notation: see :mod:`mmopt.participation.schemas` and :mod:`mmopt.toeplitz.strategies`. The matrix mechanism
releases C G + Z for the n×p matrix G of clipped gradients (‖g_t‖ ≤ 1 per record and step) and Z of
independent N(0, σ²) entries; the optimiser uses G + C⁻¹Z (post-processing), so at step t it adds the noise
x_t = (C⁻¹Z)_t to the gradient sum and every linear function W of the gradients (prefix sums, momentum,
learning-rate schedules) carries W C⁻¹ Z (DP-MF; Choquette-Choo et al., ICML 2023; Denisov et al., NeurIPS 2022,
whose Thm 2.1 makes this private for adaptively chosen gradients too, C being lower-triangular). Cov(x) per
coordinate is σ²(CᵀC)⁻¹.

:func:`correlate` is that linear map, one step at a time: for C = D·T(c) with B bands, C x = z is the recursion
x_t = (z_t/d_t − Σ_{m=1}^{B−1} c_m x_{t−m}) / c_0, a state of B − 1 past vectors; for a BLT, C⁻¹ = T(1/c) is a
BLT again (1/c = 1 − Σ θ̂_i x/(1 − ω̂_i x), :mod:`mmopt.toeplitz.streaming`), so x_t = u_t − Σ_i θ̂_i S_i,
S_i ← ω̂_i S_i + u_t (u_t = z_t/d_t), a state of d buffers. Memory O(B·p) or O(d·p): O(n·p) only for a full
Toeplitz strategy (B = n: the square root's, a dense one's), for which a BLT approximation streams in O(d·p).
:func:`stream_noise` feeds it OpenDP's Gaussian draws (:func:`mmopt._base.opendp.gaussian_sampler`), and
:func:`run_privacy` reports the privacy of the whole run under a schema: one Gaussian mechanism on C G with L2
sensitivity Δ (exact, or a proven upper bound, :mod:`mmopt.participation.toeplitz`), so ρ = Δ²/(2σ²)-zCDP, and
(ε, δ) exactly, as one Gaussian mechanism at noise σ/Δ (:func:`mmopt.privacy.gaussian_epsilon`; Denisov et al.
2022, Thm 2.1, give the adaptive stream the guarantee of the non-adaptive mechanism). OpenDP's conversion of ρ is
looser: at the analytic σ of Privacy(1, 10⁻⁶) it says ε = 1.0779 where the mechanism is (1, 10⁻⁶)-DP. σ is the
*noise multiplier* (noise standard deviation over the clip norm).

Amplification by subsampling (Poisson or shuffled batches) is out of scope: the accounting here assumes every
record's participation pattern is one the schema allows, and gives no credit for the randomness of batches.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from mmopt._base import validation as v
from mmopt.participation.schemas import as_schema
from mmopt.participation.sensitivity import Sensitivity

__all__ = ["RunPrivacy", "correlate", "run_privacy", "stream_noise"]


def _check_strategy(strategy, caller: str):
    from mmopt.toeplitz.strategies import ToeplitzStrategy
    if not isinstance(strategy, ToeplitzStrategy):
        raise TypeError(f"The 'strategy' parameter of {caller} must be a banded, Toeplitz or BLT ToeplitzStrategy "
                        "(mmopt.toeplitz.banded / blt, or optimize(..., participation=..., method='banded')). "
                        f"Got {type(strategy).__name__} instead.")
    return strategy


def correlate(strategy, draws: Iterable, *, steps: int | None = None) -> Iterator[np.ndarray]:
    """x_t = (C⁻¹z)_t for t < ``steps`` from the stream of z_t (arrays of one shape), O(bands) state. An array of
    draws is one step per row: it must hold ``steps`` rows (more were ignored, which hid a transposed (p, n) array).

    Post-processing only: the privacy is that of the draws (:func:`stream_noise` takes them from OpenDP).

    Examples
    --------
    >>> from mmopt import toeplitz
    >>> C = toeplitz.banded([1.0, 0.5], 4)
    >>> z = np.eye(4)[:, :2]                      # two coordinates, z_0 = (1, 0), z_1 = (0, 1)
    >>> np.array(list(correlate(C, z))).T.tolist()   # C⁻¹'s first two columns: (−0.5)^k
    [[1.0, -0.5, 0.25, -0.125], [0.0, 1.0, -0.5, 0.25]]
    """
    from mmopt.toeplitz.error import check_decodable
    caller = "correlate"
    C = _check_strategy(strategy, caller)
    if isinstance(draws, str | bytes) or not hasattr(draws, "__iter__"):  # checked now, not at the first next()
        raise TypeError(f"The 'draws' parameter of {caller} must be an iterable of arrays (one per step). Got "
                        f"{type(draws).__name__} instead.")
    check_decodable(C, caller)  # else C⁻¹z overflows part-way through the stream (NaN and inf noise, no error)
    n = C.n
    steps = n if steps is None else v.check_int(steps, name="steps", caller=caller, high=n)
    if isinstance(draws, np.ndarray) and draws.ndim >= 1 and draws.shape[0] != steps:
        raise ValueError(f"The 'draws' parameter of {caller} is an array of {draws.shape[0]} rows (one per step) for "
                         f"{steps} steps. Pass {steps} rows (draws[:{steps}] for its first ones), or its transpose "
                         "if its columns are the steps.")
    d = None if C.row_scale is None else np.sqrt(C.row_scale)
    if C.kind == "blt":
        from mmopt.toeplitz import _series
        theta, omega = _series.blt_inverse(C.params["theta"], C.params["omega"])
        return _blt(draws, steps, d, theta, omega, caller)
    c = C.coefficients
    return _banded(draws, steps, d, c[:int(np.flatnonzero(c)[-1]) + 1], caller)


def _next(it, t: int, caller: str, shape: list) -> np.ndarray:
    """The draw z_t, checked: finite, and of the first draw's shape (``shape`` holds it once seen)."""
    try:
        raw = np.asarray(next(it))
    except StopIteration:
        raise ValueError(f"{caller}: the draw at step {t:,} is missing: the draws ended before it.") from None
    if raw.dtype.kind not in "iuf":  # text raised numpy's own message; complex lost its imaginary part; booleans
        # are no noise draws
        raise TypeError(f"The 'draws' parameter of {caller} must give real numbers. The draw at step {t:,} has "
                        f"dtype {raw.dtype} instead.")
    z = raw.astype(float)
    if not np.all(np.isfinite(z)):
        raise ValueError(f"{caller}: the draw at step {t:,} is not finite.")
    if not shape:
        shape.append(z.shape)
    elif z.shape != shape[0]:  # a scalar among vectors broadcast silently to every coordinate
        raise ValueError(f"{caller}: the draws must all have one shape. Step 0 had {shape[0]}, step {t:,} has "
                         f"{z.shape}.")
    return z


def _banded(draws, steps, d, c, caller):
    it, shape = iter(draws), []
    past: deque = deque(maxlen=max(len(c) - 1, 1))  # x_{t−1}, x_{t−2}, …: the B − 1 the recursion reads
    tail = c[1:]
    for t in range(steps):
        u = _next(it, t, caller, shape)
        u = u / d[t] if d is not None else u
        for cm, x_past in zip(tail, past, strict=False):
            u = u - cm * x_past
        x = u / c[0]
        if len(tail):
            past.appendleft(x)
        yield x


def _blt(draws, steps, d, theta, omega, caller):
    it, shape = iter(draws), []
    S = None
    for t in range(steps):
        u = _next(it, t, caller, shape)
        u = u / d[t] if d is not None else u
        if S is None:
            S = np.zeros((len(theta),) + u.shape, dtype=np.result_type(theta, omega, u))
        x = u - np.real(np.tensordot(theta, S, axes=1))
        S = omega.reshape((-1,) + (1,) * u.ndim) * S + u
        yield x


def stream_noise(strategy, noise_multiplier: float, *, dimension: int = 1, steps: int | None = None,
                 clip_norm: float = 1.0) -> Iterator[np.ndarray]:
    """The correlated noise to add to each step's clipped gradient sum, one step at a time (module docstring).

    Parameters
    ----------
    strategy : ToeplitzStrategy
        C, banded, Toeplitz or BLT, row-scaled or not (its sensitivity under the schema: :func:`run_privacy`).
    noise_multiplier : float
        σ: the draws z_t are N(0, (σ·clip_norm)²) per coordinate, from OpenDP's sampler.
    dimension : int, default 1
        p, the number of model parameters (each step yields an array of shape (p,)).
    steps : int, optional
        At most n = ``strategy.n`` (the horizon its sensitivity was computed for); default n.
    clip_norm : float, default 1
        The L2 norm each record's gradient is clipped to at each step.

    Yields
    ------
    ndarray (p,)
        x_t = (C⁻¹z)_t, with memory O(bands·p) (O(d·p) for a BLT with d buffers).

    Examples
    --------
    >>> from mmopt import toeplitz
    >>> noise = stream_noise(toeplitz.banded([1.0, 0.3], 8), 1.1, dimension=3)
    >>> [x.shape for x in noise][:2]
    [(3,), (3,)]
    """
    from mmopt._base.opendp import gaussian_sampler
    from mmopt.toeplitz.error import check_decodable
    caller = "stream_noise"
    C = _check_strategy(strategy, caller)
    check_decodable(C, caller)
    sigma = v.check_real(noise_multiplier, name="noise_multiplier", caller=caller, low=0.0, low_open=True)
    clip = v.check_real(clip_norm, name="clip_norm", caller=caller, low=0.0, low_open=True)
    steps = C.n if steps is None else v.check_int(steps, name="steps", caller=caller, high=C.n)
    if not np.isfinite(sigma * clip):  # the sampler named noise_multiplier and "Got inf": the user gave neither
        raise ValueError(f"{caller}: the noise scale noise_multiplier × clip_norm = {sigma!r} × {clip!r} overflows "
                         "float64. Give a smaller noise_multiplier or clip_norm.")
    if sigma * clip < np.finfo(float).tiny:  # and "Got 0.0" when it underflowed (a helper's probe)
        raise ValueError(f"{caller}: the noise scale noise_multiplier × clip_norm = {sigma!r} × {clip!r} underflows "
                         "float64's normal range; no noise would be added. Give a larger noise_multiplier or "
                         "clip_norm.")
    draw = gaussian_sampler(dimension, sigma * clip, caller)
    return correlate(C, (draw() for _ in range(steps)), steps=steps)


@dataclass(frozen=True)
class RunPrivacy:
    """The privacy of a training run with correlated noise under a participation schema.

    Attributes
    ----------
    rho : float
        ρ of ρ-zCDP, Δ²/(2σ²), by OpenDP's Gaussian map.
    epsilon, delta : float or None
        (ε, δ)-DP at the given δ, exact for the Gaussian mechanism at noise σ/Δ (module docstring; tighter than
        the zCDP conversion of ρ); None without a δ.
    noise_multiplier : float
        σ.
    sensitivity : Sensitivity
        Δ² of C under the schema (exact, or a proven upper bound; ``sensitivity.method`` names how).
    schema : str
    """

    rho: float
    epsilon: float | None
    delta: float | None
    noise_multiplier: float
    sensitivity: Sensitivity
    schema: str


def _check_causal(strategy, caller: str) -> None:
    """C lower-triangular with a non-zero diagonal: the noise C⁻¹z is then released online, each step's before the
    next gradient, which the adaptive guarantee (Denisov et al. 2022, Thm 2.1) needs. A ToeplitzStrategy always is."""
    from mmopt.toeplitz.strategies import ToeplitzStrategy
    if isinstance(strategy, ToeplitzStrategy):
        return
    if hasattr(strategy, "terms") and hasattr(strategy, "shape"):  # "must be a 2-D array … Got an entry
        # ImplicitStrategy(…)" (what optimize(kron(…), participation=single()) returns; an auditor's probe)
        raise TypeError(f"The 'strategy' parameter of {caller} is an implicit product strategy "
                        f"({type(strategy).__name__}), which has no step order: training needs one square "
                        "lower-triangular C over the steps (a dense Strategy or a ToeplitzStrategy), as "
                        "optimize(workload.prefix(n) or a Toeplitz workload, participation=...) returns.")
    C = np.asarray(getattr(strategy, "matrix", strategy))
    if C.ndim != 2:
        return  # sensitivity_squared names the shape
    if C.dtype.kind in "fc" and not np.all(np.isfinite(C)):  # a NaN is non-zero: it read as "not lower-triangular"
        raise ValueError(f"The 'strategy' parameter of {caller} must be finite. Got {int(np.sum(~np.isfinite(C)))} "
                         "NaN or infinite entries.")
    if C.shape[0] != C.shape[1]:  # rows are not steps: no causal order (an anti-causal C with a zero row passed)
        raise ValueError(f"The 'strategy' parameter of {caller} must be square (n×n, one row per step: its noise "
                         f"C⁻¹z is released step by step). Got shape {C.shape}. optimize(..., participation=...) "
                         "returns square lower-triangular strategies, but one row for objective='last_iterate' (the "
                         "one sum, measured directly: its sensitivity² under the schema is "
                         "mmopt.participation.sensitivity_squared(strategy, schema)).")
    if np.any(np.triu(C, 1)):
        raise ValueError(f"The 'strategy' parameter of {caller} must be lower-triangular (causal: each step's noise "
                         "drawn before the next gradient). Got non-zero entries above the diagonal. The strategies "
                         "of optimize(..., participation=...) are lower-triangular.")
    if not np.all(np.diag(C)):
        raise ValueError(f"The 'strategy' parameter of {caller} must be invertible (a non-zero diagonal): its noise "
                         f"is C⁻¹z. Got {int(np.sum(np.diag(C) == 0))} zero diagonal entries.")


def run_privacy(strategy, participation, noise_multiplier: float, *, delta: float | None = None) -> RunPrivacy:
    """ρ-zCDP (and (ε, δ) at ``delta``) of training with C = ``strategy`` under ``participation`` (module docstring).

    ``strategy`` may be a ToeplitzStrategy, a dense Strategy or an array (any C mmopt computes Δ² for).

    Examples
    --------
    >>> import mmopt
    >>> from mmopt import toeplitz
    >>> C = toeplitz.banded([1.0, 0.5], 64)        # 2 bands ≤ b = 16: Δ² = k·‖c‖² = 4 · 1.25 = 5, exact
    >>> p = run_privacy(C, mmopt.participation.fixed_epochs(4), 2.0, delta=1e-6)
    >>> round(p.rho, 6), p.sensitivity.exact     # 5 / (2 · 2²)
    (0.625, True)
    >>> round(p.epsilon, 2)                       # exact; OpenDP's zCDP conversion of ρ says 5.93
    5.55
    """
    from mmopt._base.opendp import prelude
    from mmopt.accounting._zcdp import gaussian_rho
    from mmopt.participation.strategies import sensitivity_for
    from mmopt.privacy import gaussian_epsilon
    from mmopt.structured.release import upper_sensitivity
    caller = "run_privacy"
    schema = as_schema(participation, caller, none=False)
    sigma = v.check_real(noise_multiplier, name="noise_multiplier", caller=caller, low=0.0, low_open=True)
    if delta is not None:
        delta = v.check_real(delta, name="delta", caller=caller, low=0.0, high=1.0, low_open=True, high_open=True)
    _check_causal(strategy, caller)
    sens = sensitivity_for(strategy, schema, caller)  # its refusals in run_privacy's name (a helper's probe)
    # Δ rounded upwards past the rounding of its sums (as every release path, structured.release's slack): one ulp
    # left a BLT's Δ² 6–8·10⁻¹⁶ below its exact value from the stored coefficients, and a hand-built BLT's
    # coefficients may differ from its (θ, ω), which the stream draws from, by the constructor's 10⁻⁹ (an
    # auditor's probes)
    d_in = upper_sensitivity(math.sqrt(sens.squared), caller=caller)
    prelude(caller)  # OpenDP's maps give ρ and the (ε, δ) conversion: refused here, by name, when it is missing
    rho = gaussian_rho(d_in, sigma)
    # ρ = inf (a noise multiplier so small that Δ²/(2σ²) overflows) proves no finite ε
    scale = sigma / d_in  # the noise at unit sensitivity; 0 (underflow) where ρ overflowed: no finite ε
    epsilon = None if delta is None else math.inf if rho == math.inf or scale == 0 else gaussian_epsilon(scale, delta)
    return RunPrivacy(rho, epsilon, delta, sigma, sens, repr(schema))
