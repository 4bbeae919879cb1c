"""Which strategy a records release measures, its exact per-cell error, and the law of that error.

Notation: see README, :mod:`mmopt.structured.residual` and :mod:`mmopt.structured.residual.marginals`. A
strategy is *measurable from records* when its answers need only marginal counts: residual strategies
(ResidualPlanner) and weighted marginals (HDMM's M(θ)). Both keep every cell of a marginal A at the same
variance, s²·Δ²·v_A per unit, with (X = N Σ_T ℓ_T Q_T on the workload's closure)

    v_A = Σ_{T⊆A} r_T / (N_A² ℓ_T),

and the same law of error (permuting an attribute's categories leaves the strategy unchanged), so one
quantile per marginal gives exact intervals.

**The default** (``choose``): under Gaussian noise the residual plan, whose total equals the SVD lower bound
(optimal among all matrix mechanisms). Under Laplace noise no closed form is optimal; the candidates — the
best weighted marginals found by :func:`mmopt.structured.residual.marginals.solve` (a seeded heuristic
search), every maximal marginal measured once, the Hölder-allocated residual strategy and optimize's OPT_M
strategy (HDMM's weighted marginals over every subset, when priced under 10 s) — are compared by their exact
expected total squared error and the smallest is measured. On CPS 1988's 2-way marginals at ε = 1 these are
81,751, 206,388, 820,611 and 83,084 (benchmarks/bench_intervals.py).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from mmopt._base.guards import Unsupported
from mmopt.privacy import Privacy
from mmopt.structured.residual import closure as cl
from mmopt.structured.residual import error as er
from mmopt.structured.residual import marginals as wm
from mmopt.structured.residual import strategy as rs
from mmopt.structured.residual.planner import Plan, plan
from mmopt.structured.residual.workload import MarginalWorkload

__all__ = ["RecordsPlan", "check_strategy", "choose", "error_law", "sensitivity", "spectrum", "unit_total",
           "unit_variances"]

#: Seeded restarts of the weighted-marginals search (~5 ms each on CPS 1988's marginals). The landscape is rugged:
#: on CPS 1988's 2-way marginals 50 / 200 / 500 restarts reach 1.017 / 0.984 / 0.878× the error of optimize's
#: OPT_M (seed 0; 1.051 / 0.999 / 0.989× with seed 1), so 200 (about 1 CPU s) is the default.
RESTARTS = 200


@dataclass(frozen=True)
class RecordsPlan:
    """The measured strategy, its expected total squared error per unit noise variance (c = 1, Δ included),
    the SVD bound on the same scale, and every candidate compared (name → unit total)."""

    strategy: object
    unit_total: float
    unit_bound: float
    candidates: dict = field(default_factory=dict)

    @property
    def message(self) -> str:
        name = getattr(self.strategy, "name", type(self.strategy).__name__)
        others = ", ".join(f"{k} {v / self.unit_bound:.3g}×" for k, v in self.candidates.items())
        return (f"measured '{name}': expected total squared error {self.unit_total / self.unit_bound:.4g}× the SVD "
                f"lower bound" + (f" (candidates: {others})" if others else ""))


def spectrum(strategy, W: MarginalWorkload) -> np.ndarray:
    """ℓ_T over W's closure: X = N Σ_T ℓ_T Q_T (:func:`mmopt.structured.residual.error.spectrum_of`)."""
    return er.spectrum_of(strategy, W, caller="release_marginals")[0]


def sensitivity(strategy, norm: str) -> float:
    """Exact Δ of a records strategy under add/remove-one-record neighbours."""
    if isinstance(strategy, wm.WeightedMarginals):
        return strategy.sensitivity(norm)
    return rs.sensitivity(strategy, norm).value


def unit_total(strategy, W: MarginalWorkload, norm: str) -> float:
    """Δ²·Σ_T r_T ν_T/ℓ_T: the total squared error at unit noise variance per Δ (ValueError if W unsupported)."""
    total, _ = er.unit_errors(W, spectrum(strategy, W), caller="release_marginals")
    return sensitivity(strategy, norm) ** 2 * total


def unit_variances(strategy, W: MarginalWorkload) -> dict:
    """{A: v_A = Σ_{T⊆A} r_T/(N_A² ℓ_T)} for every marginal A of W: the per-cell variance of the (unweighted)
    least-squares marginal on A per unit noise variance of each measured entry — the algebra's per-marginal
    variance (:func:`~mmopt.structured.residual.error.unit_errors`) without W's weight w_A²."""
    _, per = er.unit_errors(W, spectrum(strategy, W), caller="release_marginals")
    return {A: float(v) / float(w) ** 2 for A, v, w in zip(W.sets, per, W.weights, strict=True)}


def error_law(strategy, W: MarginalWorkload, A: tuple) -> tuple[np.ndarray, np.ndarray]:
    """(values, counts): the weights a cell of the least-squares marginal on A puts on the measured entries, each
    distinct value once with its multiplicity; the error is Σ weights·z for the noise z of the measurements."""
    shape = W.shape
    if isinstance(strategy, wm.WeightedMarginals):
        ell = spectrum(strategy, W)
        return wm.cell_weights(strategy, A, {T: ell[k] for k, T in enumerate(W.closure.members)})
    NA = float(cl.cells(shape, A))
    live = tuple(i for i in A if shape[i] > 1)
    values, counts = [], []
    for k in range(len(live) + 1):
        for S in itertools.combinations(live, k):
            coef = cl.cells(shape, S) / (NA * float(strategy.weights[strategy.index[S]]))
            # Bᵢ = [1, −1]/√2 for nᵢ = 2 (one row: |weight| 1/√2); else I − J/nᵢ, whose column c has 1 − 1/nᵢ at
            # row c and −1/nᵢ at the nᵢ − 1 others
            options = [[(1.0 / math.sqrt(2.0), 1)] if shape[i] == 2 else
                       [(1.0 - 1.0 / shape[i], 1), (1.0 / shape[i], shape[i] - 1)] for i in S]
            for pick in itertools.product(*options):
                values.append(coef * math.prod(w for w, _ in pick))
                counts.append(math.prod(c for _, c in pick))
    return np.array(values), np.array(counts, dtype=np.float64)


def choose(W: MarginalWorkload, privacy: Privacy) -> RecordsPlan:
    """The default records strategy for the noise of ``privacy`` (module docstring)."""
    norm = privacy.sensitivity_norm
    bound = er.unit_bound(W)
    if privacy.noise == "gaussian":
        A = plan(W, norm=norm).strategy
        return RecordsPlan(A, unit_total(A, W, norm), bound)
    found = {}
    best, _ = wm.solve(W, restarts=RESTARTS, seed=0)
    for A in (best, wm.each_once(W), plan(W, norm=norm).strategy):
        found[A.name] = (unit_total(A, W, norm), A)
    found.update({A.name: (total, A) for A, total in _opt_m(W, norm)})
    name = min(found, key=lambda k: found[k][0])
    return RecordsPlan(found[name][1], found[name][0], bound, {k: t for k, (t, _) in found.items()})


#: OPT_M's restarts as a records candidate: optimize's own (mmopt.multidim.scoring.DEFAULT_RESTARTS, the same
#: strategy as mmopt.optimize's marginals search at seed 0; with 8 the candidate was another, worse one: CPS 1988's
#: 2-way marginals 86,397 where optimize reached 83,084, a helper's read of the records tutorial), and the most
#: seconds its price (mmopt.auto.costs.marginals) may reach to be run.
OPT_M_RESTARTS = 50
OPT_M_SECONDS = 10.0


def _opt_m(W: MarginalWorkload, norm: str) -> list:
    """[(optimize's OPT_M strategy (HDMM's weighted marginals over all 2^d subsets) as weighted marginals, its unit
    total)], or [] when priced over :data:`OPT_M_SECONDS`. The closure search alone depended on the BLAS kernel: on
    CPS 1988's 1- to 3-way marginals 949,209 under OpenBLAS's Haswell kernel, 989,505 under SkylakeX, where OPT_M
    gives 949,737 under both (a helper's audit): with it the release is never above optimize's strategy."""
    from mmopt.auto.costs import marginals as price  # lazy: the optimiser layers stay out of a records import
    from mmopt.multidim.marginals import solve_marginals
    from mmopt.multidim.marginals_objective import MAX_ATTRIBUTES
    implicit = W.to_implicit()
    if len(W.shape) > MAX_ATTRIBUTES or price(implicit, OPT_M_RESTARTS) > OPT_M_SECONDS:
        return []
    sol = solve_marginals(implicit, norm=norm, restarts=OPT_M_RESTARTS, seed=0)
    try:
        A = wm.from_implicit(sol.strategy)
        return [(A, unit_total(A, W, norm))]  # Unsupported is a ValueError
    except ValueError:  # not weighted marginals after all, or a weight pruned to zero: the other candidates stand
        return []


def check_strategy(strategy, W: MarginalWorkload, privacy: Privacy, caller: str) -> RecordsPlan:
    """``strategy`` (None: :func:`choose`) checked to be measurable from records and to support W."""
    if strategy is None:
        return choose(W, privacy)
    from mmopt.structured.strategies import ImplicitStrategy
    if isinstance(strategy, Plan):
        strategy = strategy.strategy
    if isinstance(strategy, ImplicitStrategy):
        if strategy.shape != W.shape:
            raise ValueError(f"The 'strategy' parameter of {caller} is over shape {strategy.shape}, but the domain "
                             f"has shape {W.shape}.")
        try:
            strategy = wm.from_implicit(strategy)
        except ValueError as exc:
            raise ValueError(f"The 'strategy' parameter of {caller}: {exc} Records releases measure residual "
                             "strategies or weighted marginals (omit 'strategy' for the best one found).") from None
    if not isinstance(strategy, rs.ResidualStrategy | wm.WeightedMarginals):
        from mmopt.dense._strategy_core import Strategy
        # a Laplace plan on ≤ 4,096 cells returns a dense matrix (its weighted marginals too): the way to release it
        # from records was not said, and without strategy= the records release missed the plan's targets (an audit)
        dense = (" A dense Strategy (what mmopt.plan and optimize return on small domains, e.g. under Laplace "
                 "noise) is released on the histogram: x = mmopt.records.marginal_counts(records, domain, "
                 "[tuple(range(len(domain.attributes)))]) gives it as its one marginal, then mmopt.release(workload, "
                 "strategy, x, privacy)." if isinstance(strategy, Strategy) else "")
        raise TypeError(f"The 'strategy' parameter of {caller} must be measurable from records: a ResidualStrategy, "
                        "a residual Plan, WeightedMarginals, an ImplicitStrategy of weighted marginals (e.g. from "
                        f"optimize), or None (the best strategy found for the noise). Got {type(strategy).__name__} "
                        f"instead.{dense}")
    if strategy.shape != W.shape:
        raise ValueError(f"The 'strategy' parameter of {caller} is over shape {strategy.shape}, but the domain has "
                         f"shape {W.shape}.")
    try:
        total = unit_total(strategy, W, privacy.sensitivity_norm)
    except Unsupported as exc:  # only this: another ValueError (a numerical one) keeps its own message
        detail = str(exc).split(": ", 1)[-1]
        raise Unsupported(f"The 'strategy' parameter of {caller} does not support the workload, so some marginal is "
                         f"not estimable: {detail}") from None
    return RecordsPlan(strategy, total, er.unit_bound(W))
