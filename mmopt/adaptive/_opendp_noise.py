"""The release back-end of :class:`mmopt.adaptive._noise.Noise`: every sample from OpenDP's vetted samplers.

OpenDP (``opendp>=0.13``) samples in exact arithmetic and rounds once, so its outputs do not leak through
floating-point low-order bits (Mironov, CCS 2012); numpy's samplers do. Each function builds one OpenDP
measurement (cached by scale) and runs it:

* :func:`add_laplace` / :func:`laplace`: ``make_laplace`` on ``vector_domain(atom_domain(T=float, nan=False))``
  with ``l1_distance`` at the given scale b. The noisy value v + Lap(b) is OpenDP's own output (the data
  value v goes *into* the measurement), so a release that adds noise to data should call :func:`add_laplace`;
  :func:`laplace` returns the noise alone (OpenDP run on zeros).
* :func:`add_gaussian` / :func:`gaussian`: ``make_gaussian`` with ``l2_distance`` at standard deviation σ.
* :func:`add_discrete_laplace`: ``make_laplace`` on ``vector_domain(atom_domain(T="i64"))``: integers plus
  discrete Laplace noise, Pr[Z = z] ∝ e^{−|z|/b} on the integers, sampled exactly (Canonne, Kamath & Steinke 2020).
* :func:`gumbel_max` / :func:`exponential` / :func:`exponential_monotone`: OpenDP's noisy-max with Gumbel noise
  (see below).

**The exponential mechanism.** OpenDP ≥ 0.14 offers ``make_noisy_max(domain, linf_distance, measure, scale)``:
with ``max_divergence()`` it adds *exponential* noise (report-noisy-max with exponential noise, i.e.
permute-and-flip, McKenna & Sheldon 2020 — a different distribution), with ``zero_concentrated_divergence()``
it adds *Gumbel* noise (measured here on OpenDP 0.16: scores (0, 1) at scale 1 pick index 1 with frequency
0.729 ≈ e/(1+e) over 2·10⁴ draws, against 0.813 with max_divergence). OpenDP 0.13 has only
``make_report_noisy_max_gumbel`` (Gumbel noise, ``MaxDivergence``). This module takes the Gumbel sampler in
both versions, because the Gumbel-max identity makes its output *exactly* the exponential mechanism's
distribution, the same distribution as the numpy back-end, so the statistical privacy tests of the numpy path
test this one too.

Claim: with scores s and sensitivity Δ (|s_x(r) − s_x'(r)| ≤ Δ for every r, neighbours x, x'), running
OpenDP's Gumbel noisy max on s at scale β = 2Δ/ε is ε-DP. Proof: argmax_r (s_r + β·G_r), G_r i.i.d. standard
Gumbel, equals r with probability exp(s_r/β)/Σ exp(s_r'/β) (Gumbel 1954) = exp(ε s_r/(2Δ))/Σ exp(ε s_r'/(2Δ)),
the exponential mechanism, which is ε-DP (McSherry & Talwar 2007: numerator and normaliser each move by at
most e^{ε/2}). OpenDP samples the Gumbel variables and compares the noisy scores exactly (no float rounding),
so the sampled index has exactly this distribution. Its own privacy maps agree: 0.13's ``MaxDivergence`` map
is 2Δ/β = ε, checked here before sampling; 0.16's zCDP map is (2Δ/β)²/8 = ε²/8 (the exponential mechanism's
zCDP bound, Cesar & Rogers 2021), also checked. Scores are fed as the float64 values given (the input
domain is ``atom_domain(T=float, nan=False)``; OpenDP then treats each float exactly), so no rescaling
rounds them. :func:`gumbel_max` is the same sampler at β = 1 on given logits (an exact Gibbs draw; its privacy
is the caller's proof about the whole distribution).
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np

__all__ = ["MAX_DISCRETE_SCALE", "RELEASE_MARGIN", "add_discrete_laplace", "add_gaussian", "add_laplace",
           "check_discrete_scale", "exponential", "exponential_monotone", "gaussian", "gumbel_max", "laplace"]

#: Every scale this back-end draws at is the one asked for widened by the factor 1 + 2⁻³⁰, and every ε of its
#: exponential mechanism narrowed by it (a caller building its own Gibbs logits from ε narrows them with
#: :meth:`mmopt.adaptive._noise.Noise.draw_epsilon`). Why: an algorithm's budget split ε₁ = ρε, ε₂ = ε − ε₁ and
#: each scale b = Δ/εᵢ are rounded to the nearest float, so the losses Δ/bᵢ the draws really have can sum to
#: ε(1 + k·2⁻⁵³) after k roundings — above ε (ahp: at 26 of 56 pairs (ε, ratio) tried, by up to 1.3·10⁻¹⁶
#: relative). The margin covers k ≤ 2²² roundings and OpenDP's own upward-rounded maps; its cost in error is
#: 2⁻²⁹ relative. (The numpy back-end, a simulation that is never private, draws at the scales given.)
RELEASE_MARGIN = 2.0 ** -30


def _widened(scale: float) -> float:
    return scale * (1.0 + RELEASE_MARGIN)  # 1 + 2⁻³⁰ is exact; the product rounds by ≤ 2⁻⁵³ relative


def _dp():
    try:
        import opendp.prelude as dp
    except ImportError:
        raise ImportError("noise='opendp' draws release-grade noise from OpenDP. Install it with: pip install "
                          "opendp (from a checkout: pip install -e '.[release]'), or pass noise='numpy' for a "
                          "simulation.") from None
    dp.enable_features("contrib")
    return dp


#: The ε the exponential mechanisms take (see :func:`_noisy_max`).
_EPS_RANGE = (1e-150, 1e150)


def _check_scale(scale, what: str) -> float:
    s = float(scale)
    if not math.isfinite(s) or s < np.finfo(float).tiny:
        raise ValueError(f"The {what} of the OpenDP noise must be a positive normal float. Got {scale!r} instead.")
    return s


@functools.lru_cache(maxsize=256)
def _vector_measurement(kind: str, scale: float):
    dp = _dp()
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False))
    if kind == "laplace":
        return dp.m.make_laplace(domain, dp.l1_distance(T=float), scale)
    return dp.m.make_gaussian(domain, dp.l2_distance(T=float), scale)


def _add(kind: str, values, scale: float):
    b = _widened(_check_scale(scale, "scale"))
    arr = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"The values given to OpenDP's {kind} mechanism must be finite.")
    out = np.asarray(_vector_measurement(kind, b)(arr.ravel().tolist()), dtype=np.float64).reshape(arr.shape)
    return float(out) if out.ndim == 0 else out


def add_laplace(values, scale: float):
    """values + i.i.d. Laplace(0, scale·(1 + 2⁻³⁰)), computed by OpenDP (a float for a scalar input, else an array).

    Examples
    --------
    >>> add_laplace(np.zeros(3), 1.0).shape
    (3,)
    """
    return _add("laplace", values, scale)


def add_gaussian(values, scale: float):
    """values + i.i.d. N(0, (scale·(1 + 2⁻³⁰))²), computed by OpenDP."""
    return _add("gaussian", values, scale)


#: The largest scale :func:`add_discrete_laplace` (and the numpy back-end's) draws at: with |values| ≤ 2⁵³ a
#: 64-bit sum then saturates only past |Z| > 2⁶², probability below e^{−2¹⁷}; numpy's geometric draws stay in int64.
MAX_DISCRETE_SCALE = 2.0**45


@functools.lru_cache(maxsize=256)
def _integer_laplace(scale: float):
    dp = _dp()
    return dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T="i64")), dp.l1_distance(T="i64"), scale)


def check_discrete_scale(scale) -> float:
    """``scale`` as a float in [tiny, :data:`MAX_DISCRETE_SCALE`], or a ValueError."""
    s = _check_scale(scale, "scale")
    if s > MAX_DISCRETE_SCALE:
        raise ValueError(f"The scale of the discrete Laplace noise must be at most 2^45 (64-bit sums). Got {scale!r}.")
    return s


def add_discrete_laplace(values, scale: float) -> np.ndarray:
    """values + i.i.d. discrete Laplace noise, Pr[Z = z] ∝ exp(−|z|/b) on the integers, b = scale·(1 + 2⁻³⁰),
    computed by OpenDP on 64-bit integers (an int64 array).

    The sampler is exact and nothing is rounded. OpenDP's 64-bit sums saturate, so a caller keeps
    |values| ≤ 2⁵³ and b ≤ 2⁴⁵: saturating then needs |Z| > 2⁶², an event of probability below e^{−2¹⁷} per draw.

    Examples
    --------
    >>> out = add_discrete_laplace(np.array([3, -7]), 1e-3)
    >>> out.dtype, out.tolist()
    (dtype('int64'), [3, -7])
    """
    b = _widened(check_discrete_scale(scale))
    arr = np.asarray(values)
    if arr.dtype.kind not in "iu" or (arr.size and int(np.max(np.abs(arr))) > 2**53):
        raise ValueError("The values given to OpenDP's discrete Laplace mechanism must be integers of magnitude at "
                         f"most 2^53. Got dtype {arr.dtype}.")
    out = _integer_laplace(b)([int(t) for t in arr.ravel().tolist()])
    return np.asarray(out, dtype=np.int64).reshape(arr.shape)


def laplace(scale: float, size=None):
    """i.i.d. Laplace(0, scale) of shape ``size`` (a float when size is None), OpenDP run on zeros."""
    return add_laplace(np.zeros(() if size is None else size), scale)


def gaussian(scale: float, size=None):
    """i.i.d. N(0, scale²) of shape ``size``, OpenDP run on zeros."""
    return add_gaussian(np.zeros(() if size is None else size), scale)


@functools.lru_cache(maxsize=256)
def _gumbel_measurement(scale: float, monotone: bool = False):
    dp = _dp()
    # monotonic: OpenDP's map then takes scores that move one way only (d_in = Δ, not 2Δ: see exponential_monotone)
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float, monotonic=monotone)
    if hasattr(dp.m, "make_noisy_max"):  # OpenDP >= 0.14: Gumbel noise is the zCDP variant
        return dp.m.make_noisy_max(*space, dp.zero_concentrated_divergence(), scale), "zCDP"
    with warnings.catch_warnings():  # 0.13: Gumbel noise, pure-DP map
        warnings.simplefilter("ignore", DeprecationWarning)
        return dp.m.make_report_noisy_max_gumbel(*space, scale), "pure"


def _scores(scores, caller: str) -> np.ndarray:
    s = np.asarray(scores, dtype=np.float64).ravel()
    if s.size == 0 or not np.all(np.isfinite(s)):
        raise ValueError(f"The 'scores' parameter of {caller} must be a non-empty vector of finite floats.")
    return s


def gumbel_max(logits) -> int:
    """argmax_r (logit_r + G_r), G i.i.d. standard Gumbel: index r with probability ∝ exp(logit_r), via OpenDP.

    Examples
    --------
    >>> gumbel_max([0.0, 0.0, 1e6])
    2
    """
    meas, _ = _gumbel_measurement(1.0)
    return int(meas(_scores(logits, "gumbel_max").tolist()))


def exponential(scores, epsilon: float, sensitivity: float) -> int:
    """The exponential mechanism at ε/(1 + 2⁻³⁰): r with probability ∝ exp(ε' s_r/(2Δ)), ε-DP (module docstring).

    OpenDP's own privacy map is checked at d_in = Δ before sampling: ε (0.13's pure-DP map) or ε²/8 (0.16's
    zCDP map of the Gumbel sampler).

    Examples
    --------
    >>> exponential([0.0, 5.0, 1e6], epsilon=1.0, sensitivity=1.0)
    2
    """
    return _noisy_max(scores, epsilon, sensitivity, monotone=False)


def _noisy_max(scores, epsilon: float, sensitivity: float, *, monotone: bool) -> int:
    """OpenDP's Gumbel noisy max at β = Δ/ε' (monotone) or 2Δ/ε', after checking its own map at d_in = Δ."""
    caller = "exponential_monotone" if monotone else "exponential"
    s = _scores(scores, caller)
    eps = _check_scale(epsilon, "epsilon")
    if not _EPS_RANGE[0] <= eps <= _EPS_RANGE[1]:
        # ε²/8 (OpenDP 0.16's zCDP charge) is subnormal below ~4·10⁻¹⁵⁴, where the map's upward rounding exceeded it
        # by one step and read as a privacy failure; past ~10¹⁵⁴ the map overflowed with a raw OpenDPException
        raise ValueError(f"The 'epsilon' parameter of {caller} must be in [{_EPS_RANGE[0]:g}, {_EPS_RANGE[1]:g}] (its "
                         f"zCDP charge ε²/8 a normal float, OpenDP's map finite). Got {epsilon!r} instead.")
    delta = _check_scale(sensitivity, "sensitivity")
    beta = _check_scale(_widened((1.0 if monotone else 2.0) * delta / eps), "scale Δ/ε" if monotone else "scale 2Δ/ε")
    meas, kind = _gumbel_measurement(beta, monotone)
    bound = eps if kind == "pure" else eps * eps / 8.0
    # OpenDP's maps round upwards by a few ulps; the margin covers them, so the check has no slack
    if not float(meas.map(delta)) <= bound:
        raise ValueError(f"{caller}: OpenDP's privacy map gives {meas.map(delta)!r} at Δ = {delta!r}, more than the "
                         f"{bound!r} ({kind}) of an ε = {eps!r} {'monotone ' if monotone else ''}exponential "
                         "mechanism.")
    return int(meas(s.tolist()))


def exponential_monotone(scores, epsilon: float, sensitivity: float) -> int:
    """The monotone exponential mechanism at ε/(1 + 2⁻³⁰): r with probability ∝ exp(ε' s_r/Δ).

    ε-DP when, between any two neighbours x, x', every score moves the same way (all s_r(x') − s_r(x) in [0, Δ],
    or all in [−Δ, 0]): then the numerator exp(ε s_r/Δ) and the normaliser move by factors in [1, e^ε] together
    (or in [e^−ε, 1] together), so their ratio moves by at most e^ε (McSherry & Talwar 2007, the monotone case).
    The caller proves monotonicity. OpenDP states the same claim for a ``monotonic`` L∞ input metric: its map is
    checked at d_in = Δ before sampling (Gumbel noise at β = Δ/ε': ε, or ε²/8 under zCDP).

    Examples
    --------
    >>> exponential_monotone([0.0, 5.0, 1e6], epsilon=1.0, sensitivity=1.0)
    2
    """
    return _noisy_max(scores, epsilon, sensitivity, monotone=True)
