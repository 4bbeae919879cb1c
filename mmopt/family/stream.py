"""optimize's routes into the stream family (:mod:`mmopt.toeplitz`) and the O(n) p-Identity search."""

from __future__ import annotations

import dataclasses

from mmopt.family.call import Call, check_common, seed_record

CALLER = "optimize"


def run(workload, method: str, call: Call):
    """weighted_sqrt, toeplitz, blt, banded (:func:`mmopt.toeplitz.solve.from_optimize`)."""
    from mmopt.toeplitz.solve import from_optimize

    check_common(call, CALLER)
    return from_optimize(workload, method, norm=call.norm, tol=call.tol, max_iterations=call.max_iterations,
                         options=call.options, unused={"solver": call.solver, "initial": call.initial})


def _options(call: Call) -> dict:
    from mmopt.search._methods import METHODS, check_options
    return check_options(call.options, METHODS["min_error"], "min_error")


def takes_pidentity(workload, method: str, call: Call) -> bool:
    """min_error under Laplace noise on prefix sums / all ranges from 512 cells, nothing asked of the dense
    pipeline (:func:`mmopt.search.min_error_fast.takes`)."""
    from mmopt.search import min_error_fast as fast
    return call.norm != "l2" and fast.takes(workload, _options(call), call.initial)


def run_pidentity(workload, method: str, call: Call):
    from mmopt.search import min_error_fast as fast

    n_jobs = check_common(call, CALLER)
    res = fast.from_optimize(workload, _options(call), solver=call.solver, tol=call.tol,
                             max_iterations=call.max_iterations, seed=call.seed, verbose=call.verbose,
                             n_jobs=n_jobs, blas_threads=call.blas_threads)
    return dataclasses.replace(res, extra=dict(res.extra) | {"seed": seed_record(call.seed)})
