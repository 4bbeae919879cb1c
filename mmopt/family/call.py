"""The checked parameters of one :func:`mmopt.optimize` call, as every route receives them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from mmopt._base import runtime as _runtime
from mmopt._base import validation as v
from mmopt._base.parallel import check_n_jobs
from mmopt.search._methods import check_seed


@dataclass(frozen=True)
class Call:
    """``optimize``'s keyword arguments after the checks every route shares (the objective's norm resolved from
    ``privacy``; ``method`` mapped from old names). ``optimize`` is the entry point itself, for "auto", whose
    candidates call it back with other methods."""

    norm: str | None
    solver: str | None
    initial: Any
    tol: float | None
    max_iterations: int | None
    seed: Any
    verbose: bool | None
    blas_threads: int | str | None
    options: Mapping[str, Any] | None
    n_jobs: int | None
    budget: str | float | None
    optimize: Callable
    objective: str = "total"
    targets: Any = None
    participation: Any = None  # a schema of mmopt.participation (None: single participation)


def seed_record(seed):
    """How ``seed`` is recorded in ``extra["seed"]`` (and so in saved files): an int or None as given, a
    SeedSequence by its entropy and spawn key; a Generator's state is not a seed, so it is recorded as None."""
    if isinstance(seed, np.random.SeedSequence):
        return {"entropy": seed.entropy, "spawn_key": list(seed.spawn_key)}
    return int(seed) if seed is not None and not isinstance(seed, np.random.Generator) else None


def check_common(call: Call, caller: str) -> int | None:
    """The parameters every optimize path reads, checked the same way; returns the checked ``n_jobs``."""
    if call.tol is not None:
        v.check_real(call.tol, name="tol", caller=caller, low=0.0, high=1.0, low_open=True, high_open=True)
    if call.max_iterations is not None:
        v.check_int(call.max_iterations, name="max_iterations", caller=caller)
    check_seed(call.seed, caller)
    _runtime.check_verbose(call.verbose, caller)
    return check_n_jobs(call.n_jobs, caller=caller)
