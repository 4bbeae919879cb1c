"""The routing table of :func:`mmopt.optimize`: which family's code runs which method, looked up in one place.

Notation: see README. A :class:`Route` names the methods it serves, an optional condition on the workload and
the call (the O(n) p-Identity route takes "min_error" only on prefix sums / all ranges from 512 cells and
only when nothing asks for the dense pipeline), and the function that runs it, imported when it runs (so this
table sits above every family without importing them). The first route that takes a call runs it; the dense
route takes every call left, and refuses by name what it cannot run.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the routes' own modules import the layers; this table imports none of them
    from mmopt.family.call import Call

#: optimize's methods that run HDMM's product searches, ResidualPlanner, the data cube, or "auto"
PRODUCT_METHODS = ("kron", "union", "marginals", "residual", "datacube", "coupled", "auto")
#: the Toeplitz / weighted square-root searches on prefix sums and all ranges (= mmopt.toeplitz.solve.MMOPT_METHODS)
STREAM_METHODS = ("weighted_sqrt", "toeplitz", "blt", "banded")


@dataclass(frozen=True)
class Family:
    """One representation of a workload: its name, the class that holds it, the layer that computes with it."""

    name: str
    type_path: str  # "module:Class"
    layer: str  # the package that evaluates, bounds and releases it
    size: str  # what it costs

    @property
    def type(self) -> type:
        module, name = self.type_path.split(":")
        return getattr(importlib.import_module(module), name)


FAMILIES = (
    Family("dense", "mmopt.dense._workload_type:Workload", "mmopt.dense, mmopt.error, mmopt.mechanism",
           "n×n Gram; n ≤ 4,096 for searches"),
    Family("stream", "mmopt.toeplitz.error:StreamWorkload", "mmopt.toeplitz",
           "O(n) (prefix sums / all ranges at any n)"),
    Family("product", "mmopt.structured.workloads:ImplicitWorkload", "mmopt.structured, mmopt.multidim",
           "Σ factor sizes (Kronecker products and unions)"),
    Family("residual", "mmopt.structured.residual.workload:MarginalWorkload", "mmopt.structured.residual",
           "the downward closure (unions of marginals, any d)"),
    Family("hierarchy", "mmopt.hierarchy.workload:HierarchyWorkload", "mmopt.hierarchy",
           "the trees' nodes (grouping sets over hierarchies: ROLLUP, CUBE; Gaussian noise)"),
)


def family_of(workload, caller: str = "family_of") -> Family:
    """The family ``workload`` belongs to; a TypeError naming the four for anything else.

    >>> import mmopt
    >>> family_of(mmopt.workload.prefix(2**16)).name, family_of(mmopt.workload.prefix(64)).name
    ('stream', 'dense')
    """
    for f in FAMILIES:
        if isinstance(workload, f.type):
            return f
    from mmopt.dense._workload_type import not_a_workload  # its remedy for a bare matrix (optimize's already)
    others = ", ".join(f"{f.type.__name__} ({f.name})" for f in FAMILIES[1:])
    raise not_a_workload(workload, name="workload", caller=caller,
                         expected=f"a Workload or another of mmopt's workload families: {others}; build one with "
                                  "mmopt.workload")


@dataclass(frozen=True)
class Route:
    """Methods one family's code runs: ``run(workload, method, call)`` returns an OptimizeResult."""

    name: str
    methods: tuple[str, ...] | None  # None: every method (and callable) no earlier route took
    run_path: str  # "module:function"
    takes_path: str | None = None  # "module:function"(workload, method, call) -> bool; None: always
    summary: str = ""

    def _get(self, path: str) -> Callable:
        module, name = path.split(":")
        return getattr(importlib.import_module(module), name)

    def takes(self, workload, method, call: Call) -> bool:
        if self.methods is not None and not (isinstance(method, str) and method in self.methods):
            return False
        return self.takes_path is None or bool(self._get(self.takes_path)(workload, method, call))

    def run(self, workload, method, call: Call):
        return self._get(self.run_path)(workload, method, call)


ROUTES = (
    Route("participation", None, "mmopt.family.training:run", "mmopt.family.training:takes",
          summary="participation=fixed_epochs(k) / min_separation(b, k): private training's prefix sums and "
                  "momentum / learning-rate workloads, the certified optimum under fixed epochs (≤ 4,096 steps) and "
                  "under min_separation(n/k, k) by cutting planes (≤ 2,048 steps; prefix sums to 4,096 by "
                  "the chain dual and free / 2b-band strategies), "
                  "banded strategies with exact sensitivity (any n); objective='max_variance' / 'last_iterate' "
                  "under a schema"),
    Route("objectives", None, "mmopt.family.objectives:run", "mmopt.family.objectives:takes",
          summary="objective='max_variance' (with per-query targets): the largest variance, minimised by the "
                  "minimax over query weights with a certified L2 dual bound"),
    Route("stream", STREAM_METHODS, "mmopt.family.stream:run",
          summary="Toeplitz, BLT, banded and weighted square-root strategies of prefix sums / all ranges, "
                  "O(n log n) at any n (Gaussian noise)"),
    Route("hierarchy", None, "mmopt.family.hierarchy:run", "mmopt.family.hierarchy:takes",
          summary="grouping sets over hierarchies (and unions of Kronecker products of level matrices): the "
                  "hierarchical residual family's optimum under Gaussian noise, bounded by a tree recursion"),
    Route("product", PRODUCT_METHODS, "mmopt.family.product:run",
          summary="HDMM's OPT_⊗ / OPT_+ / OPT_M, ResidualPlanner, data cubes, coupled split strategies, and "
                  "auto's planned candidates"),
    Route("pidentity", ("min_error",), "mmopt.family.stream:run_pidentity", "mmopt.family.stream:takes_pidentity",
          summary="min_error on prefix sums / all ranges from 512 cells: the p-Identity search on an O(n) Gram "
                  "operator, nothing n×n"),
    Route("dense", None, "mmopt.family.dense:run",
          summary="every other method on the dense Gram (implicit and stream workloads of ≤ 4,096 cells "
                  "as their dense twin)"),
)


def find(workload, method, call: Call) -> Route:
    """The first route of :data:`ROUTES` that takes this call (the dense route takes every call left)."""
    return next(r for r in ROUTES if r.takes(workload, method, call))


def all_methods() -> tuple[str, ...]:
    """Every method name optimize accepts, "auto" first (for messages and the command line)."""
    from mmopt.search._methods import METHODS
    names = ["auto", *METHODS, *PRODUCT_METHODS, *STREAM_METHODS, "hierarchy"]
    return tuple(dict.fromkeys(names))
