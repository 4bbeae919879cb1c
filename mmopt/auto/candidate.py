"""What ``optimize(method="auto")`` plans: a :class:`Candidate` method with its expected cost, and the
:class:`Context` every candidate is built from (:mod:`mmopt.auto.plan` lists them, :mod:`mmopt.auto.run` runs them).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LOW_PRIOR_SHARE", "Candidate", "Context"]

#: The largest share of the budget a candidate that rarely wins may take: OPT_M under Gaussian noise lost to the
#: residual or product strategy on every workload of bench_auto (by 3–1,150 %); l2_approx under Laplace noise
#: is kept for its dual bound (valid for both noises), its strategy 5–45× the ε-DP candidates'.
LOW_PRIOR_SHARE = 0.05


@dataclass(frozen=True)
class Candidate:
    """One method ``auto`` may run: ``run()`` returns what the method returns (an OptimizeResult or an
    ImplicitSolution), to be scored by :func:`mmopt.multidim.scoring.score`.

    ``estimate``: expected CPU seconds; ``share``: the largest fraction of the budget it may take; ``unless``: the
    incumbent's ratio to the bound at or below which it is not worth running (None: always worth it);
    ``requires``: a reason it cannot run, decided at plan time (None if it can); ``fit``: for a search whose
    length is chosen when it runs, the candidate sized to the seconds left (None when too few are left), and then
    ``estimate`` is that of its shortest useful run; ``charge``: for a search sized by a work budget rather than
    its estimate, the cost of what it ran by the same model (the runner charges it in place of ``estimate``).
    """

    name: str
    estimate: float
    run: Callable[[], Any] = field(repr=False)
    share: float = 1.0
    unless: float | None = None
    requires: str | None = None
    fit: Callable[[float], Candidate | None] | None = field(default=None, repr=False)  # sized to the seconds left
    charge: Callable[[Any], float] | None = field(default=None, repr=False)  # the modeled cost of what it ran


@dataclass(frozen=True)
class Context:
    """What every candidate needs: the user's workload and its shapes, the noise, and the common parameters."""

    workload: Any
    structure: Any  # mmopt.structured.ImplicitWorkload, or None for a plain dense workload
    stream: Any     # mmopt.toeplitz.StreamWorkload, or None
    norm: str
    seed: Any
    tol: float | None
    max_iterations: int | None
    restarts: int | None
    n_jobs: int | None
    dense_optimize: Callable = field(repr=False)  # mmopt.optimize

    @property
    def n(self) -> int:
        return self.workload.domain_size

    @property
    def family(self) -> str | None:
        if self.stream is not None:
            return self.stream.kind
        return getattr(self.workload, "family", None) if self.structure is None else None

    @functools.cached_property
    def dense(self):
        """The workload as a dense Workload, built once on first use (n×n) and shared by every dense candidate,
        so that the caches keyed by the workload object (its Gram's eigendecomposition) serve them all."""
        from mmopt.structured.workloads import ImplicitWorkload
        if self.stream is not None:
            return self.stream.to_workload()
        return self.structure.to_workload() if isinstance(self.workload, ImplicitWorkload) else self.workload

    def optimize(self, workload, method: str, **kw):
        if method in ("l2_approx", "min_error"):  # the iterative candidates take the user's limit and tolerance
            # (auto dropped them on dense workloads: max_iterations=1 still ran 1,350 iterations)
            kw = {"max_iterations": self.max_iterations, "tol": self.tol} | kw
        kw = {"norm": self.norm, "seed": self.seed, "verbose": False, "n_jobs": self.n_jobs} | kw
        with warnings.catch_warnings():  # a candidate in the other norm is auto's own choice (it is scored in
            # the budget's norm and kept only if best there), not the user's mismatch
            warnings.filterwarnings("ignore", message=".* only scores its strategy in", category=UserWarning)
            return self.dense_optimize(workload, method=method, **kw)
