"""The sparse vector technique's loop, budget split, input checks and result (see :mod:`mmopt.sparse_vector`).

Notation: queries q_i (values q_i(D)), thresholds T_i, sensitivity Δ, at most c positive answers, budget
ε = ε₁ (threshold) + ε₂ (comparisons) + ε₃ (numeric answers, 0 unless numeric). Noise: ρ ~ Lap(Δ/ε₁) once,
ν_i ~ Lap(2cΔ/ε₂) (Lap(cΔ/ε₂) for monotone queries) per query, η_i ~ Lap(cΔ/ε₃) per numeric answer.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from mmopt._base import validation as v
from mmopt.accounting._zcdp import round_down
from mmopt.privacy import pure_epsilon
from mmopt.sparse_vector._noise import Sampler, laplace_sampler


@dataclass(frozen=True)
class SparseVectorResult:
    """What :func:`~mmopt.sparse_vector.above_threshold`, ``sparse_vector`` and ``numeric_sparse`` return.

    Attributes
    ----------
    answers : tuple
        One answer per query read, in order. ``False`` is ⊥ and ``True`` is ⊤ (above_threshold,
        sparse_vector); numeric_sparse gives ``None`` for ⊥ and a float (q_i + η_i) for each positive.
    above : tuple of int
        The 0-based indices of the positive answers.
    n_positive : int
        Positive answers used (≤ c).
    n_read : int
        Queries read from the input (a generator is consumed no further).
    halted : bool
        True when the run stopped at the c-th positive; False when the queries ran out first.
    epsilon : float
        Privacy spent: ε = ε₁ + ε₂ + ε₃, whether or not the run halted (Lyu et al. account for all of it).
    epsilon_threshold, epsilon_queries, epsilon_numeric : float
        The split ε₁ (threshold noise), ε₂ (query noise), ε₃ (numeric answers; 0.0 unless numeric).
    threshold_scale, query_scale : float
        The Laplace scales of ρ and of each ν_i actually used.
    numeric_scale : float or None
        The Laplace scale of each numeric answer's fresh noise η_i.
    c : int
    sensitivity : float
    monotone : bool
    noise : {"opendp", "numpy"}
        "opendp": OpenDP's vetted sampler (release-grade). "numpy": seeded floating-point Laplace, for
        simulation and tests only (attackable, Mironov 2012).
    method : str
    """

    answers: tuple
    above: tuple[int, ...]
    n_positive: int
    n_read: int
    halted: bool
    epsilon: float
    epsilon_threshold: float
    epsilon_queries: float
    epsilon_numeric: float
    threshold_scale: float
    query_scale: float
    numeric_scale: float | None
    c: int
    sensitivity: float
    monotone: bool
    noise: str
    method: str

    @property
    def split(self) -> tuple[float, float, float]:
        """(ε₁, ε₂, ε₃)."""
        return self.epsilon_threshold, self.epsilon_queries, self.epsilon_numeric

    @property
    def release_grade(self) -> bool:
        return self.noise == "opendp"

    def accuracy_alpha(self, beta: float, n_queries: int | None = None) -> float:
        """The α for which this run's noise is (α, β)-accurate over ``n_queries`` queries (default: n_read).

        The lecture notes' theorem (after Dwork & Roth §3.6): if |ρ| < α/2 and every |ν_i| < α/2, each ⊤
        has q_i > T_i − α and each ⊥ has q_i < T_i + α. Laplace tails, P(|Lap(b)| ≥ t) = e^{−t/b}, and a union
        bound over k queries give α = 2·max(b_ρ ln(2/β), b_ν ln(2k/β)), which at the notes' scales
        b_ρ = 2/ε, b_ν = 2c/ε is their α = (4c/ε)(ln k + ln(2/β)). With numeric answers β is halved between
        the comparisons and the ≤ c answers, whose |η_i| < α needs α ≥ b_η ln(2c/β).
        """
        caller = "SparseVectorResult.accuracy_alpha"
        beta = v.check_real(beta, name="beta", caller=caller, low=0.0, high=1.0, low_open=True, high_open=True)
        k = self.n_read if n_queries is None else v.check_int(n_queries, name="n_queries", caller=caller, low=1)
        k = max(k, 1)
        b_share = beta / 2 if self.numeric_scale is not None else beta
        alpha = 2 * max(self.threshold_scale * math.log(2 / b_share), self.query_scale * math.log(2 * k / b_share))
        if self.numeric_scale is not None:
            alpha = max(alpha, self.numeric_scale * math.log(2 * self.c / beta))
        return alpha


#: the largest c: 2c (the query noise's shift, in the default split) must be a finite float64
MAX_C = int(np.finfo(float).max) // 2


def svt_split(epsilon: float, c: int, monotone: bool, threshold_fraction: float | None) -> tuple[float, float]:
    """(ε₁, ε₂) with ε₁ + ε₂ = epsilon (each rounded down: never above it in exact arithmetic); by default Lyu
    et al.'s ε₁:ε₂ = 1:(2c)^{2/3} (1:c^{2/3} if monotone).

    The default minimises Var(ν_i − ρ) = 2(Δ/ε₁)² + 2(kcΔ/ε₂)² (k = 2, or 1 if monotone) over ε₁ + ε₂ = ε.

    >>> e1, e2 = svt_split(1.0, 1, False, None)
    >>> round(e1, 3), round(e1 + e2, 12)
    (0.386, 1.0)
    """
    # a public helper: (1.0, 2, False, 3.0) gave ε₂ = −2 and a negative ε two negative budgets
    epsilon, c, _, monotone, threshold_fraction, _ = check_common("svt_split", epsilon, c, 1.0, monotone,
                                                                  threshold_fraction, None)
    if threshold_fraction is None:
        threshold_fraction = 1.0 / (1.0 + float(c if monotone else 2 * c) ** (2.0 / 3.0))
    e1 = round_down(Fraction(threshold_fraction) * Fraction(epsilon))
    return e1, round_down(Fraction(epsilon) - Fraction(e1))  # (exactly, ε₁ + ε₂ ≤ ε: floats summed may exceed it)


def check_common(caller: str, epsilon, c, sensitivity, monotone, threshold_fraction, rng):
    """Validated (ε, c, Δ, monotone, threshold_fraction, rng Generator or None); ε a float or a pure-ε Privacy, as
    mmopt.adaptive takes it (Privacy(1.0) was refused as "must be a real number")."""
    epsilon = v.check_real(pure_epsilon(epsilon, caller), name="epsilon", caller=caller, low=0.0, low_open=True)
    c = v.check_int(c, name="c", caller=caller, low=1)
    if c > MAX_C:  # the default split computes (2c)^(2/3) in float64: c = 10**400 raised a bare OverflowError
        raise ValueError(f"The 'c' parameter of {caller} must be an integer in [1, {v.scientific(MAX_C)}] (2c must "
                         f"be a float64 for the budget split). Got {v.fmt_count(c)} instead.")
    sensitivity = v.check_real(sensitivity, name="sensitivity", caller=caller, low=0.0, low_open=True)
    monotone = v.check_bool(monotone, name="monotone", caller=caller)
    if threshold_fraction is not None:
        threshold_fraction = v.check_real(threshold_fraction, name="threshold_fraction", caller=caller,
                                          low=0.0, high=1.0, low_open=True, high_open=True)
    gen = None if rng is None else v.check_rng(rng, name="rng", caller=caller)
    return epsilon, c, sensitivity, bool(monotone), threshold_fraction, gen


def _thresholds(threshold, n_known: int | None, caller: str) -> tuple[float | None, np.ndarray | None]:
    """(scalar T, None) or (None, per-query T_i), checked against the number of queries when it is known."""
    if isinstance(threshold, np.ndarray) and threshold.ndim == 0:
        threshold = threshold.item()
    if isinstance(threshold, numbers.Real) and not isinstance(threshold, bool | np.bool_):
        return v.check_real(threshold, name="threshold", caller=caller), None
    if isinstance(threshold, bool | np.bool_ | str | bytes) or not isinstance(threshold, Iterable):
        raise TypeError(f"The 'threshold' parameter of {caller} must be a real number or a sequence of real "
                        f"numbers (one per query). Got {threshold!r:.60} ({type(threshold).__name__}) instead.")
    T = v.check_vector(list(threshold), name="threshold", caller=caller)
    if n_known is not None and T.shape[0] != n_known:
        raise ValueError(f"The 'threshold' parameter of {caller} must have one entry per query ({n_known}). "
                         f"Got {T.shape[0]} thresholds instead.")
    return None, T


def _query_values(queries, caller: str) -> tuple[Iterable, int | None]:
    if isinstance(queries, dict | set | frozenset):  # a dict iterates its keys, a set in no order: the answers'
        # indices would name nothing
        raise TypeError(f"The 'queries' parameter of {caller} must be an ordered sequence or an iterator of real "
                        f"numbers (the answers are indices into it). Got a {type(queries).__name__}; pass "
                        "list(d.values()) in the order you mean.")
    if isinstance(queries, str | bytes) or not isinstance(queries, Iterable):
        raise TypeError(f"The 'queries' parameter of {caller} must be a sequence or an iterator of real numbers "
                        f"(query values q_i(D)). Got {type(queries).__name__} instead.")
    if isinstance(queries, np.ndarray) and queries.ndim != 1:
        raise ValueError(f"The 'queries' parameter of {caller} must be 1-D. Got shape {queries.shape} instead.")
    n_known = len(queries) if hasattr(queries, "__len__") and not hasattr(queries, "__next__") else None
    return queries, n_known


def _finite(x, i: int, caller: str) -> float:
    try:  # an int past float64 (10⁴⁰⁰) raised OverflowError from float() before the check could name it
        value = float(x)
    except OverflowError:
        value = math.inf
    except (TypeError, ValueError):
        value = math.nan
    if isinstance(x, bool | np.bool_) or not isinstance(x, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"The 'queries' parameter of {caller} must yield finite real numbers. Got {x!r:.60} "
                         f"({type(x).__name__}) at index {i} instead.")
    return value


def loop(queries, threshold, *, c: int, noisy_threshold: Sampler, noisy_query: Sampler,
         release: Callable[[float, float], float] | None, caller: str) -> tuple[list, list[int], bool]:
    """Lyu et al.'s Alg. 1 (Alg. 7 when ``release`` maps (q_i, q_i + ν_i) to a numeric answer).

    ρ is drawn once and never redrawn after a positive; the run halts after the c-th positive without reading
    further. Comparisons are q_i + ν_i ≥ T_i + ρ in float64.
    """
    queries, n_known = _query_values(queries, caller)
    T, Ts = _thresholds(threshold, n_known, caller)
    rho = noisy_threshold(0.0)
    answers: list = []
    above: list[int] = []
    # An iterator's length is known only as it runs. A mismatch found then was a ValueError, after the noise was
    # drawn: the budget was spent on a result nobody saw, and a retry spent it again (a helper's probe). The run
    # read so far is a whole SVT run, as if the queries had ended there: it is returned, with a warning.
    for i, x in enumerate(queries):
        if Ts is not None and i >= Ts.shape[0]:
            _mismatch(caller, f"the queries yielded more than its {Ts.shape[0]} thresholds; the run stopped before "
                              f"query {i}, as if the queries had ended there")
            break
        q = _finite(x, i, caller)
        noisy = noisy_query(q)
        if noisy >= (T if Ts is None else float(Ts[i])) + rho:
            answers.append(True if release is None else release(q, noisy))
            above.append(i)
            if len(above) >= c:
                return answers, above, True
        else:
            answers.append(False if release is None else None)
    if Ts is not None and len(answers) < Ts.shape[0]:
        _mismatch(caller, f"it has {Ts.shape[0]} thresholds for {len(answers)} queries; the last were not used")
    return answers, above, False


def _mismatch(caller: str, what: str) -> None:
    warnings.warn(f"The 'threshold' parameter of {caller} must have one entry per query: {what}. The budget is "
                  "spent on this run: use its result rather than running again.", UserWarning, stacklevel=5)


def run(method: str, queries, threshold, epsilon, *, c, sensitivity, monotone, threshold_fraction,
        numeric_fraction, rng, numeric: bool = False) -> SparseVectorResult:
    """Validate, split the budget, build the samplers and run :func:`loop` (the three public functions)."""
    epsilon, c, sensitivity, monotone, threshold_fraction, gen = check_common(
        method, epsilon, c, sensitivity, monotone, threshold_fraction, rng)
    # every share rounded down in exact arithmetic, so that the cost Δ/b₁ + c·kΔ/b₂ + c·Δ/b₃ of the scales drawn
    # (each rounded up) is at most ε itself: ε − ε₃ − ε₁ in floats exceeded it by an ulp in ~40 % of runs
    e3 = 0.0
    if numeric:
        frac = v.check_real(numeric_fraction, name="numeric_fraction", caller=method, low=0.0, high=1.0,
                            low_open=True, high_open=True)
        e3 = round_down(Fraction(frac) * Fraction(epsilon))
    e1, e2 = svt_split(round_down(Fraction(epsilon) - Fraction(e3)), c, monotone, threshold_fraction)
    noisy_threshold, b1 = laplace_sampler(sensitivity, e1, rng=gen, caller=method)
    noisy_query, b2 = laplace_sampler((1.0 if monotone else 2.0) * sensitivity, round_down(Fraction(e2) / c),
                                      rng=gen, caller=method)
    release, b3 = None, None
    if numeric:
        noisy_answer, b3 = laplace_sampler(sensitivity, round_down(Fraction(e3) / c), rng=gen, caller=method)

        def release(q: float, _compared: float) -> float:
            return noisy_answer(q)  # fresh η_i: the compared value q_i + ν_i is never released

    answers, above, halted = loop(queries, threshold, c=c, noisy_threshold=noisy_threshold,
                                  noisy_query=noisy_query, release=release, caller=method)
    return SparseVectorResult(
        answers=tuple(answers), above=tuple(above), n_positive=len(above), n_read=len(answers), halted=halted,
        epsilon=epsilon, epsilon_threshold=e1, epsilon_queries=e2, epsilon_numeric=e3, threshold_scale=b1,
        query_scale=b2, numeric_scale=b3, c=c, sensitivity=sensitivity, monotone=monotone,
        noise="numpy" if gen is not None else "opendp", method=method)


def _lecture_numeric_variant(queries, threshold, epsilon, *, c, sensitivity=1.0, rng) -> SparseVectorResult:
    """NOT differentially private; for the leak test only.

    The lecture notes' numeric sparse vector (Lyu et al.'s Alg. 3, from Roth's 2011 notes): ρ ~ Lap(2Δ/ε),
    ν_i ~ Lap(2cΔ/ε), and each positive releases the very value q_i + ν_i that was compared with T_i + ρ.
    That value caps ρ ≤ q_i + ν_i − T_i, so the ⊥ answers before it are no longer free: each costs up to
    ε/(2c) and no finite ε bounds the total (see :mod:`mmopt.sparse_vector`), so the result reports
    ``epsilon = inf`` (the split is the notes' nominal ε/2 + ε/2). Numpy noise only (``rng`` required); it
    halts after the c-th positive like the private functions (the notes' pseudo-code instead keeps answering ⊥
    and aborts at a (c+1)-th positive; the leak happens before any of that, already for c = 1).
    """
    caller = "_lecture_numeric_variant"
    epsilon, c, sensitivity, _, _, gen = check_common(caller, epsilon, c, sensitivity, False, None, rng)
    if gen is None:
        raise ValueError(f"The 'rng' parameter of {caller} must be a seed or a Generator: this non-private "
                         "demonstration has no release path.")
    noisy_threshold, b1 = laplace_sampler(2 * sensitivity, epsilon, rng=gen, caller=caller)
    noisy_query, b2 = laplace_sampler(2 * c * sensitivity, epsilon, rng=gen, caller=caller)
    answers, above, halted = loop(queries, threshold, c=c, noisy_threshold=noisy_threshold,
                                  noisy_query=noisy_query, release=lambda _q, noisy: noisy, caller=caller)
    return SparseVectorResult(
        answers=tuple(answers), above=tuple(above), n_positive=len(above), n_read=len(answers), halted=halted,
        epsilon=math.inf, epsilon_threshold=epsilon / 2, epsilon_queries=epsilon / 2, epsilon_numeric=0.0,
        threshold_scale=b1, query_scale=b2, numeric_scale=None, c=c, sensitivity=sensitivity, monotone=False,
        noise="numpy", method="lecture numeric variant (NOT differentially private)")
