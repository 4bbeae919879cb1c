"""Each query's variance under a strategy, block by block: Kronecker products of per-factor terms, or dense.

Notation: see README. The least-squares answer q x̂ (x̂ = A⁺y, y = A x + z, z i.i.d. with variance s²) is
unbiased with Var(q x̂) = s²·q (AᵀA)⁺ qᵀ (Li et al., PODS 2010, Prop. 4.4 for one query). Two routes:

* ``"product"`` / ``"algebra"`` — a product strategy, or a union of αI + βJ factors (marginals, M(θ)), on a
  workload of products: q X⁺ qᵀ from the per-factor vectors of :mod:`mmopt.structured.per_query`, for any
  block of rows, never listing all m (2-D ranges on 128² have 68 million queries);
* ``"dense"`` — any other pair on at most 4,096 cells: :func:`mmopt.evaluate` with ``per_query=True``
  (Δ_d²·q M qᵀ, listed; Δ_d its sensitivity), in the workload's row order;
* ``"orbit"`` — an :class:`~mmopt.structured.orbit_strategy.OrbitStrategy` (optimize's max-variance strategy for
  unions of products at any size, e.g. sf1): its exact per-query variances from the orbit blocks, listed as the
  dense route's (:func:`mmopt.structured.orbit_release.evaluate`);
* ``"stream"`` — ``mmopt.toeplitz.prefix(n)`` past 4,096 cells under a tree, Toeplitz or weighted square-root
  strategy: every prefix's q (AᵀA)⁻¹ qᵀ, O(n log² n) at most, listed
  (:func:`mmopt.answers._stream_errors.prefix_units`).

A :class:`VarianceModel` holds either, with q X⁺ qᵀ = ``unit`` / (``divisor``·2^``exponent``)²; a standard
deviation s of the noise then gives √Var = √unit · :meth:`~VarianceModel.sd_factor` (s), which never forms s²
(s may be 10²⁰⁰ at a tiny ε) nor (AᵀA)⁺ at an extreme scale.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from mmopt._base import validation as v
from mmopt._base.probe import gram_probe, matrix_probe, same_gram
from mmopt.answers.layout import DEFAULT_CHUNK_ROWS, Chunk, Layout, layout_of
from mmopt.dense._strategy_core import Strategy
from mmopt.dense.exact_answers import RELATIVE_CHARGE, RELEASE_D_IN_RATIO, RELEASE_SEARCH_SLACK
from mmopt.dispatch import evaluate
from mmopt.privacy import Privacy
from mmopt.structured import _checks as ck
from mmopt.structured.mechanism import implicit_probe
from mmopt.structured.orbit_strategy import OrbitStrategy
from mmopt.structured.per_query import KronVariance, kron_variance
from mmopt.structured.strategies import ImplicitStrategy
from mmopt.workload import Workload


@dataclass(frozen=True, eq=False)
class VarianceModel:
    """q X⁺ qᵀ of every query of ``layout`` = unit / (``divisor``·2^``exponent``)² (module docstring)."""

    layout: Layout
    method: str                    # "product", "algebra", "dense", "orbit" or "stream"
    kron: KronVariance | None
    dense: np.ndarray | None       # the dense, orbit and stream routes' listed units (Δ_d²·q M qᵀ; stream: q X⁻¹ qᵀ)
    divisor: float
    exponent: int

    def unit(self, c: Chunk) -> np.ndarray:
        """The units of the rows of chunk ``c``."""
        if self.kron is not None:
            return self.kron.terms[c.term].values(c.local, c.local + c.stop - c.start)
        return self.dense[c.start:c.stop]

    def sd_factor(self, sd: float) -> float:
        """s·2⁻ᴿ/divisor: multiply √unit by it for the standard deviation at noise standard deviation s."""
        return math.ldexp(sd / self.divisor, -self.exponent)


def check_output_privacy(privacy, output, caller: str) -> None:
    """A ``privacy`` given beside an output must be the output's own (ε and δ): the standard errors come from the
    noise drawn, so another budget was ignored without a word (Privacy(0.1) beside an ε = 1 release gave the ε = 1
    errors; a helper's probe). Outputs that do not record their privacy are not checked."""
    theirs = getattr(output, "privacy", None)
    if privacy is None or not isinstance(theirs, Privacy):
        return
    if not (np.isclose(privacy.epsilon, theirs.epsilon, rtol=1e-12, atol=0.0)
            and np.isclose(privacy.delta, theirs.delta, rtol=1e-12, atol=0.0)):
        raise ValueError(f"The 'privacy' parameter of {caller} ({privacy!r}) is not the output's ({theirs!r}). The "
                         "standard errors come from the noise actually drawn: pass None (or the release's privacy).")


def check_released_with(output, strategy, caller: str) -> None:
    """The output's measurement count and Δ are ``strategy``'s: standard errors and intervals computed from
    another strategy than the one measured (identity for H₂: 5.66 where the truth is 4.42) are refused."""
    strategy = as_checked_strategy(strategy)
    # n_rows first: an OrbitStrategy's matrix is built only up to 4,096 cells (sf1's planned strategy, 29,440 cells,
    # failed here, after a CLI release's draw); a Toeplitz strategy (mmopt.toeplitz) is n×n and has no matrix
    rows = getattr(strategy, "n_rows", None)
    if not rows:
        shape = np.shape(getattr(strategy, "matrix", strategy))
        rows = shape[0] if shape else getattr(strategy, "domain_size", None)
    measured = getattr(output, "measurements", None)
    # a simulation of a product or union pair keeps no y: its count of measurements (it had none, and a strategy
    # of the same Δ passed: identity·7 for identity ⊗ H₂ gave standard errors 2.2× too small; a helper's probe)
    count = np.shape(measured)[-1] if measured is not None else getattr(output, "n_measurements", None)
    if count is not None and count != rows:
        raise ValueError(f"The 'strategy' parameter of {caller} has {rows:,} rows, but the output holds "
                         f"{count:,} measurements. Pass the strategy the output was released with.")
    check_released_delta(output, strategy, caller)
    recorded, given = getattr(output, "strategy_probe", None), _probe(strategy)
    if recorded is not None and given is not None and not same_gram(given, recorded):
        raise ValueError(f"The 'strategy' parameter of {caller} is not the strategy the output was released with: "
                         "it has as many rows and the same sensitivity, but another AᵀA (its probe "
                         f"ln uᵀAᵀAu = {given[0]:.9g}, the release's {recorded[0]:.9g}), so its standard errors "
                         "would not be the answers'. Pass the strategy the output was released with.")


def as_checked_strategy(strategy):
    """A matrix given as a list, tuple, numpy matrix or scipy sparse matrix, as the :class:`Strategy` the standard
    errors are computed from: those skipped the Δ and fingerprint checks and gave another strategy's standard
    errors (a helper's audit); anything else unchanged."""
    if hasattr(strategy, "toarray") and callable(strategy.toarray):  # scipy.sparse
        return Strategy(np.asarray(strategy.toarray(), dtype=float))
    if isinstance(strategy, list | tuple | np.matrix):
        return Strategy(np.asarray(strategy, dtype=float))
    return strategy


def _probe(strategy):
    """:func:`gram_probe` of a dense, implicit, orbit or stream strategy (None for other kinds: not checked)."""
    if isinstance(strategy, ImplicitStrategy):
        return implicit_probe(strategy)
    if isinstance(strategy, OrbitStrategy):
        from mmopt.structured.orbit_release import orbit_apply
        return gram_probe(orbit_apply(strategy), strategy.domain_size)
    from mmopt.toeplitz.release import stream_apply  # lazy: the stream layer only for its strategies
    if not isinstance(strategy, Strategy) and (apply := stream_apply(strategy)) is not None:
        return gram_probe(apply, int(strategy.n))
    A = strategy.matrix if isinstance(strategy, Strategy) else strategy if isinstance(strategy, np.ndarray) else None
    if A is None or A.ndim != 2:
        return None
    return matrix_probe(A)


def check_released_delta(output, strategy, caller: str) -> None:
    """The output's Δ (``sensitivity``, in the norm of its ``noise``) is ``strategy``'s, rounded up as a release
    rounds it (:func:`mmopt.structured.release.upper_sensitivity`: 10⁻⁷ and an ulp) and charges its answers'
    rounding (:data:`mmopt.dense.exact_answers.RELATIVE_CHARGE`, twice for the p-Identity stream strategy)."""
    delta = getattr(output, "sensitivity", None)
    if delta is not None and callable(getattr(strategy, "sensitivity", None)):
        mine = float(strategy.sensitivity("l1" if output.noise == "laplace" else "l2"))
        if not mine * (1 - 1e-9) <= float(delta) <= mine * (1 + 2 * RELATIVE_CHARGE + 1e-6):
            raise ValueError(f"The 'strategy' parameter of {caller} has sensitivity {mine:.6g}, but the output was "
                             f"released at Δ = {float(delta):.6g}. Pass the strategy the output was released with.")


def noise_sd(noise: str, noise_scale: float) -> float:
    """The standard deviation of one noise entry: √2·b (Laplace scale b) or σ (Gaussian)."""
    return math.sqrt(2.0) * noise_scale if noise == "laplace" else noise_scale


def release_noise_sd(privacy: Privacy, sensitivity: float, caller: str) -> float:
    """The standard deviation of the noise :func:`mmopt.release` draws at ``privacy`` for a strategy of this
    sensitivity, from these two alone (for an x̂ released without its output, as ``mmopt release --estimate``
    writes it): OpenDP's scale at d_in = Δ·RELEASE_D_IN_RATIO (b = d_in/ε; σ by OpenDP's zCDP calibration, 4–9 %
    above the analytic one at usual budgets, 28 % at ε = 0.01, δ = 10⁻³), so at most 3.2·10⁻⁶ above the release's
    own and never below it. The analytic σ understated a Gaussian release's standard errors by that much (a
    newcomer's audit)."""
    d_in = float(sensitivity) * RELEASE_D_IN_RATIO
    if privacy.noise == "laplace":  # OpenDP's Laplace scale is d_in/ε: no OpenDP needed here
        scale = d_in / privacy.epsilon
    else:
        from mmopt._base import opendp as _opendp  # lazy: OpenDP is an extra
        try:
            _, scale, _ = _opendp.calibrate(1, d_in, privacy, noise_scale=None, caller=caller)  # draws nothing
        except ImportError as exc:  # a simulation's x̂ needs no OpenDP: say so (only "install it" was said)
            raise ImportError(f"{exc}. For an x̂ simulated by mmopt.matrix_mechanism, pass calibration='analytic' "
                              "(its noise needs no OpenDP).") from None
    return noise_sd(privacy.noise, scale * RELEASE_SEARCH_SLACK)


#: the remedy of the refusal below where the caller cannot go without a strategy (answers tables can)
NO_VARIANCES = (" Use a product (mmopt.strategy.kron) or marginals strategy, or read mmopt.evaluate(W, A)"
                ".max_variance_upper, a proven bound on every query's variance.")


def variance_model(workload, strategy, *, norm: str = "l1", caller: str = "variance_model",
                   layout: Layout | None = None, remedy: str = NO_VARIANCES) -> VarianceModel:
    """The :class:`VarianceModel` of a pair; refuses (ValueError, with ``remedy``) a pair whose per-query
    variances have neither a Kronecker form nor a dense path (a general union strategy on more than 4,096
    cells)."""
    layout = layout or layout_of(workload, caller=caller)
    if layout.structure is None:  # a stream workload (mmopt.toeplitz.prefix(n), past 4,096 cells)
        from mmopt.answers._stream_errors import prefix_units, refuse_laplace
        refuse_laplace(strategy, "laplace" if norm == "l1" else "gaussian", caller)
        if isinstance(strategy, Strategy) and layout.shape[0] <= ck.DENSE_LIMIT:
            # a dense strategy (H2, a matrix) on prefix(n) of ≤ 4,096 cells: the prefixes' q X⁺ qᵀ from the dense
            # twin, as evaluate lists them (refused before as "past 4,096 cells" at 128; a helper's probe)
            from mmopt.toeplitz.error import StreamWorkload
            twin = StreamWorkload("prefix", layout.shape[0]).to_workload()
            report = evaluate(twin, strategy, None, norm=norm, per_query=True)  # support checked here
            units = np.asarray(report.per_query_variance, dtype=float) / float(report.sensitivity) ** 2
            return VarianceModel(layout, "stream", None, units, 1.0, 0)
        units, e = prefix_units(strategy, caller)  # refuses other strategies first
        v.check_same_domain(layout.shape[0], strategy.domain_size, caller=caller,
                            what=(f"workload '{layout.name}'", "the 'strategy' parameter"))
        return VarianceModel(layout, "stream", None, units, 1.0, e)
    if isinstance(strategy, OrbitStrategy):  # answers_table refused it as "a dense strategy" (sf1's max-variance plan)
        if norm != "l2":
            raise ValueError(f"{caller}: an OrbitStrategy is a Gaussian-noise strategy (L2 sensitivity); its answers "
                             f"have standard errors under Privacy(epsilon, delta), delta > 0. Got norm={norm!r}.")
        from mmopt.structured.orbit_release import evaluate as orbit_evaluate
        report = orbit_evaluate(layout.structure, strategy, None, caller=caller)
        return VarianceModel(layout, "orbit", None, np.asarray(report.per_query_variance, dtype=float),
                             float(report.sensitivity), 0)
    if isinstance(strategy, ImplicitStrategy):
        if tuple(layout.shape) != tuple(strategy.shape):
            raise ValueError(f"{caller}: the workload's attributes {layout.shape} and the strategy's {strategy.shape} "
                             "differ. Use the strategy built for this workload.")
        kv = kron_variance(layout.structure, strategy, caller=caller)
        if kv is not None:
            return VarianceModel(layout, kv.method, kv, None, 1.0, kv.exponent)
        if strategy.domain_size > ck.DENSE_LIMIT:
            raise ValueError(
                f"{caller}: per-query variances of '{layout.name}' under strategy '{strategy.name}' are exact for "
                "product strategies (mmopt.strategy.kron), marginals strategies (mmopt.strategy.marginals) and any "
                f"pair on at most {ck.DENSE_LIMIT:,} cells; this is another union over {strategy.domain_size:,} "
                f"cells.{remedy}")
        strategy = strategy.to_strategy()
    W = _dense_workload(workload, layout, caller)
    # named here: evaluate's own refusal named evaluate, not the caller
    v.check_same_domain(W.domain_size, getattr(strategy, "domain_size", None) or np.shape(strategy)[-1],
                        caller=caller, what=(f"workload '{W.name}'", "the 'strategy' parameter"))
    report = evaluate(W, strategy, None, norm=norm, per_query=True)
    return VarianceModel(layout, "dense", None, np.asarray(report.per_query_variance, dtype=float),
                         float(report.sensitivity), 0)


def _dense_workload(workload, layout: Layout, caller: str) -> Workload:
    """The dense workload with the layout's rows (the workload itself, or its product's explicit W)."""
    if isinstance(workload, Workload):
        return workload
    W = layout.structure
    if W.domain_size > ck.DENSE_LIMIT or W.n_queries * W.domain_size > ck.MAX_DENSE_ENTRIES:
        raise ValueError(f"{caller}: workload '{W.name}' ({W.domain_size:,} cells, {W.n_queries:,} queries) needs "
                         "a product or marginals strategy for per-query variances (mmopt.strategy.kron). Got a "
                         "dense strategy.")
    return Workload.from_matrix(W.dense(), name=W.name)


def per_query_variances(workload, strategy, privacy: Privacy | None = None, *, norm: str | None = None,
                        chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[tuple[int, int, np.ndarray]]:
    """Every query's expected squared error c·Δ²·q (AᵀA)⁺ qᵀ, as (start, stop, values) blocks in row order.

    The chunked form of ``mmopt.evaluate(W, A, privacy, per_query=True).per_query_variance`` (equal to it
    where both exist), for any number of queries: a product or marginals strategy on a workload of products
    (never more than ``chunk_rows`` values at a time), or any pair on at most 4,096 cells. Δ is evaluate's
    sensitivity (exact, or a proven upper bound for a union: then so is every value).

    Examples
    --------
    >>> import mmopt
    >>> W, A = mmopt.workload.ranges_2d(128), mmopt.strategy.kron(mmopt.strategy.hierarchical(128),
    ...                                                             mmopt.strategy.hierarchical(128))
    >>> blocks = per_query_variances(W, A, mmopt.Privacy(1.0), chunk_rows=10**6)
    >>> start, stop, values = next(blocks)
    >>> W.n_queries, stop - start, values.shape
    (68161536, 998976, (998976,))
    """
    caller = "per_query_variances"
    model, sd = expected_error_model(workload, strategy, privacy, norm=norm, caller=caller)
    f2 = model.sd_factor(sd) ** 2
    for c in model.layout.chunks(_rows(chunk_rows, caller)):
        yield c.start, c.stop, model.unit(c) * f2


def expected_error_model(workload, strategy, privacy, *, norm, caller: str) -> tuple[VarianceModel, float]:
    """(model, s) with s = √c·Δ: unit·sd_factor(s)² is each query's expected squared error (c·Δ²·q X⁺ qᵀ).

    Δ is the strategy's sensitivity in the budget's norm, as :func:`mmopt.evaluate` takes it (for a union:
    exact, or a proven upper bound)."""
    if privacy is not None and not isinstance(privacy, Privacy):
        raise TypeError(f"The 'privacy' parameter of {caller} must be a Privacy or None. Got {type(privacy).__name__}.")
    if norm is not None and norm not in ("l1", "l2"):
        raise ValueError(f"The 'norm' parameter of {caller} must be 'l1', 'l2' or None. Got {norm!r}.")
    if privacy is not None and norm is not None and norm != privacy.sensitivity_norm:
        raise ValueError(f"The 'norm' parameter of {caller} ({norm!r}) contradicts the privacy's noise "
                         f"({privacy.noise}: {privacy.sensitivity_norm}). Leave norm=None.")
    # unit privacy: a Gaussian-only strategy (an orbit's, the weighted square root) at Δ₂, as evaluate takes it (l1
    # refused the pair)
    from mmopt.toeplitz.weighted import WeightedSqrtStrategy  # lazy: the stream layer only for its strategies
    used = norm or (privacy.sensitivity_norm if privacy is not None else
                    "l2" if isinstance(strategy, OrbitStrategy | WeightedSqrtStrategy) else "l1")
    strategy = _strategy(as_checked_strategy(strategy), caller)
    model = variance_model(workload, strategy, norm=used, caller=caller)
    c = 1.0 if privacy is None else privacy.variance_factor
    delta = model.divisor if model.method in ("dense", "orbit") else float(strategy.sensitivity(used))
    return model, math.sqrt(c) * delta


def _strategy(strategy, caller: str):
    if isinstance(strategy, ImplicitStrategy | Strategy | OrbitStrategy):
        return strategy
    if callable(getattr(strategy, "stream_report", None)) or hasattr(strategy, "inverse_column"):  # mmopt.toeplitz's
        return strategy
    if strategy is None:
        raise TypeError(f"The 'strategy' parameter of {caller} must be a strategy (a Strategy, an implicit one or a "
                        "matrix). Got None: the expected errors need the strategy measured.")
    if not isinstance(strategy, np.ndarray | list | tuple) and not hasattr(strategy, "__array__"):
        # a grouping-sets strategy (HierarchyStrategy, NodeStrategy) reached float() in np.asarray: a raw TypeError
        other = (" For grouping sets, mmopt.evaluate(workload, strategy, privacy, per_query=True) lists every "
                 "query's variance." if hasattr(strategy, "layout") or hasattr(strategy, "weights") else "")
        raise TypeError(f"The 'strategy' parameter of {caller} must be a Strategy, an implicit strategy, a "
                        f"Toeplitz strategy or a matrix. Got {type(strategy).__name__}.{other}")
    return Strategy(np.asarray(strategy, dtype=float))


def _rows(chunk_rows, caller: str) -> int:
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int | np.integer) or chunk_rows < 1:
        raise ValueError(f"The 'chunk_rows' parameter of {caller} must be an int >= 1. Got {chunk_rows!r}.")
    return int(chunk_rows)


__all__ = ["VarianceModel", "expected_error_model", "noise_sd", "per_query_variances", "variance_model"]
