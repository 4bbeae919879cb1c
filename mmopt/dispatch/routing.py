"""Routing: a (workload, strategy) pair to its family and the forms that family's layer takes (:func:`route`);
residual-layer objects as the implicit ones they stand for (:func:`as_implicit`). The operations themselves:
:mod:`mmopt.dispatch.operations`."""

from __future__ import annotations

from mmopt._base.hints import holder_name
from mmopt.structured import _checks as ck
from mmopt.structured.strategies import ImplicitStrategy
from mmopt.structured.workloads import ImplicitWorkload


def as_implicit(obj):
    """A residual-layer object (:class:`~mmopt.structured.residual.MarginalWorkload`, e.g.
    ``RecordsRelease.workload``, or a :class:`~mmopt.structured.residual.ResidualStrategy`) as the implicit
    workload or strategy it stands for, so that every public entry point takes it as it is; anything else
    unchanged."""
    from mmopt.structured.residual.marginals import WeightedMarginals  # lazy: that subpackage imports this layer
    from mmopt.structured.residual.strategy import ResidualStrategy
    from mmopt.structured.residual.workload import MarginalWorkload
    return obj.to_implicit() if isinstance(obj, MarginalWorkload | ResidualStrategy | WeightedMarginals) else obj


def _kinds(workload, strategy, caller: str):
    """(workload, strategy, implicit?) with a mixed pair densified where that is allowed."""
    workload, strategy = as_implicit(workload), as_implicit(strategy)
    iw, ia = isinstance(workload, ImplicitWorkload), isinstance(strategy, ImplicitStrategy)
    if iw and ia:
        return workload, strategy, True
    if iw:
        if workload.domain_size > ck.DENSE_LIMIT:
            raise ValueError(
                f"{caller}: workload '{workload.name}' is implicit over {workload.domain_size:,} cells but the "
                "strategy is a dense matrix. Build the strategy implicitly too: mmopt.strategy.kron(A1, ..., Ad) "
                "(one factor per attribute) or mmopt.strategy.marginals(shape, theta).")
        return workload.to_workload(), strategy, False
    if ia:
        if strategy.domain_size > ck.DENSE_LIMIT:
            raise ValueError(
                f"{caller}: strategy '{strategy.name}' is implicit over {strategy.domain_size:,} cells but the "
                "workload is dense. Build the workload with mmopt.workload.kron/stack/marginals instead.")
        from mmopt.workload import structure_of
        # a dense product workload remembers its attributes: cell i must mean the same values in both
        twin = structure_of(workload)
        if twin is not None and len(strategy.shape) > 1 and tuple(twin.shape) != tuple(strategy.shape):
            # (1, 4) against (2, 2) is not a reordering: say which it is
            same = sorted(n for n in twin.shape if n > 1) == sorted(n for n in strategy.shape if n > 1)
            how = ("in another attribute order. Build the strategy's factors in the workload's attribute order."
                   if same else "split into other attributes. Build the strategy over the workload's attributes.")
            raise ValueError(
                f"{caller}: workload '{workload.name}' is over the domain {tuple(twin.shape)} and strategy "
                f"'{strategy.name}' over {tuple(strategy.shape)}: the same {strategy.domain_size:,} cells {how}")
        return workload, strategy.to_strategy(), False
    return workload, strategy, False


class StrategyMismatch(TypeError, ValueError):
    """A strategy of a type this workload's family cannot take at its size (a TypeError by kind, a ValueError by
    size: ``except`` either catches it)."""


def stream_native(strategy) -> bool:
    """A strategy the stream family takes as itself: Toeplitz, weighted square root, tree; and the p-Identity one
    past the dense size (:mod:`mmopt.search.pidentity_stream`; up to it, its dense matrix, whose route reports the
    exact largest variance on all ranges where the stream path bounds it)."""
    from mmopt.search.pidentity import PIdentityStrategy
    from mmopt.toeplitz.strategies import ToeplitzStrategy
    from mmopt.toeplitz.trees import TreeStrategy
    from mmopt.toeplitz.weighted import WeightedSqrtStrategy
    if isinstance(strategy, PIdentityStrategy):
        return strategy.domain_size > ck.DENSE_LIMIT
    return isinstance(strategy, ToeplitzStrategy | WeightedSqrtStrategy | TreeStrategy)


def gaussian_only(workload, strategy) -> bool:
    """A release :func:`mmopt.release` makes with Gaussian noise only: grouping sets over hierarchies (whatever the
    strategy), an orbit strategy, the weighted square root (its Δ₁ is not computed). The accountant refuses
    "remaining" with a basic ledger's δ spent on it saying so (:func:`mmopt.accounting._pending.requested`)."""
    from mmopt.hierarchy.workload import HierarchyWorkload
    from mmopt.toeplitz.weighted import WeightedSqrtStrategy
    return isinstance(workload, HierarchyWorkload) or isinstance(strategy, WeightedSqrtStrategy) or \
        _orbit(strategy) or _hierarchical(strategy)


def _refuse_misplaced(workload, strategy, caller: str) -> None:
    """The two slips a newcomer makes, named (they were refused as "must be a 2-D array of real numbers" and as
    "must be a Workload … Got Strategy"): a result for its strategy, and the arguments swapped."""
    from mmopt._base.result import OptimizeResult
    from mmopt.dense._strategy_core import Strategy
    from mmopt.dense._workload_type import Workload
    for name, value in (("strategy", strategy), ("workload", workload)):
        if isinstance(value, OptimizeResult):
            raise TypeError(f"The '{name}' parameter of {caller} is an OptimizeResult: pass the strategy it holds, "
                            f"{caller}(W, res.strategy, …).")
        # a Plan or a loaded SavedStrategy holds one too (it met "must be a 2-D array … Got an entry Plan(…")
        held = getattr(value, "strategy", None) if not isinstance(value, Strategy | ImplicitStrategy) else None
        if isinstance(held, Strategy | ImplicitStrategy):
            raise TypeError(f"The '{name}' parameter of {caller} is a {type(value).__name__}: pass the strategy it "
                            f"holds, {caller}(W, {holder_name(value)}.strategy, …).")
    if isinstance(workload, Strategy | ImplicitStrategy) and isinstance(strategy, Workload | ImplicitWorkload):
        raise TypeError(f"{caller} takes the workload first, then the strategy: {caller}(W, A, …). Got "
                        f"{caller}({type(workload).__name__}, {type(strategy).__name__}, …).")


def route(workload, strategy, caller: str):
    """(family, W, A) for a (workload, strategy) pair, with W and A as that family's layer takes them.

    ``mmopt.toeplitz.prefix(n)`` / ``all_range(n)`` (and ``workload.prefix(n)`` past 10,000 cells) keep Toeplitz and
    weighted square-root strategies (exact, O(n log n), any n); any other strategy (dense, or the p-Identity
    strategy ``optimize(..., method="min_error")`` returns) goes with the dense twin of the workload up to the dense
    limit. ``strategy`` None: the workload alone (:func:`svd_bound`).
    """
    from mmopt.family import family_of
    from mmopt.search.pidentity import PIdentityStrategy

    _refuse_misplaced(workload, strategy, caller)
    if _orbit(strategy):  # a max-variance plan past the dense limit: held by its symmetry blocks
        return "orbit", workload, strategy
    workload, strategy = as_implicit(workload), as_implicit(strategy)
    family = family_of(workload, caller).name
    if family == "hierarchy" or _hierarchical(strategy):
        return _route_hierarchy(workload, strategy, caller)
    if family == "stream":
        if strategy is None or stream_native(strategy):
            return "stream", workload, strategy
        if workload.n > ck.DENSE_LIMIT:
            # "the dense path stops at 4,096 cells" was not true of workload.prefix(n), dense up to 10,000 cells
            from mmopt.workload import STREAM_FROM  # lazy: the public workload module imports this layer's peers
            dense = (f"up to {ck.DENSE_LIMIT:,} cells from a stream workload; mmopt.workload.{workload.kind}"
                     f"({workload.n:,}) is the dense workload itself (O(n³) to evaluate)" if workload.n < STREAM_FROM
                     else f"which no workload of more than {STREAM_FROM - 1:,} cells takes")
            raise StrategyMismatch(
                f"The 'strategy' parameter of {caller} must be a ToeplitzStrategy for a workload of "
                f"{workload.kind}({workload.n:,}) cells, a weighted square root or a tree (mmopt.toeplitz; "
                f"optimize(W, privacy=Privacy(ε, δ)) returns one), or the p-Identity strategy "
                f"optimize(W, method='min_error') returns: a {type(strategy).__name__} needs the dense path, "
                f"{dense}.")
        workload = workload.to_workload()
        if isinstance(strategy, PIdentityStrategy):
            strategy = strategy.to_strategy()
    if strategy is None:
        return ("product" if isinstance(workload, ImplicitWorkload) else "dense"), workload, None
    if family == "dense" and isinstance(strategy, PIdentityStrategy) and not stream_native(strategy):
        # the p-Identity strategy min_error returns on toeplitz.prefix(n), saved and used on workload.prefix(n): it
        # was refused as "must be a 2-D array ... Got an entry PIdentityStrategy" (a helper's probe)
        strategy = strategy.to_strategy()
    if family == "dense" and stream_native(strategy):
        # what optimize(workload.prefix(n), method="toeplitz" | "weighted_sqrt") returns: with its dense workload it
        # was refused as "must be a 2-D array". Prefix sums or all ranges (rows checked) take the stream path, any
        # other workload of n cells the strategy's matrix.
        from mmopt.toeplitz.error import as_stream_workload
        try:
            return "stream", as_stream_workload(workload, caller), strategy
        except TypeError:
            strategy = strategy.to_strategy()
    W, A, implicit = _kinds(workload, strategy, caller)
    return ("product" if implicit else "dense"), W, A


def _orbit(strategy) -> bool:
    from mmopt.structured.orbit_strategy import OrbitStrategy
    return isinstance(strategy, OrbitStrategy)


def _hierarchical(strategy) -> bool:
    from mmopt.hierarchy.nodes import NodeStrategy
    from mmopt.hierarchy.strategy import HierarchyStrategy
    return isinstance(strategy, HierarchyStrategy | NodeStrategy)


def _route_hierarchy(workload, strategy, caller: str):
    """A grouping-sets workload with its own strategy (or none) stays in its family; any other pairing goes
    through the union of Kronecker products the workload stands for."""
    from mmopt.hierarchy.detect import from_implicit
    from mmopt.hierarchy.workload import HierarchyWorkload
    if isinstance(workload, HierarchyWorkload) and (strategy is None or _hierarchical(strategy)):
        return "hierarchy", workload, strategy
    if _hierarchical(strategy):
        W = from_implicit(workload)
        if W is not None:
            return "hierarchy", W, strategy
    if _hierarchical(strategy):
        raise StrategyMismatch(f"The 'strategy' parameter of {caller}: a HierarchyStrategy pairs with the grouping "
                               f"sets it was optimised for (a HierarchyWorkload, or the union of Kronecker products "
                               f"of level matrices it stands for). Got {type(workload).__name__}.")
    return route(workload.to_implicit(), strategy, caller)
