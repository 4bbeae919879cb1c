"""optimize's route into the product family: HDMM's searches (:mod:`mmopt.multidim`) and "auto" (:mod:`mmopt.auto`)."""

from __future__ import annotations

import dataclasses

from mmopt._base import runtime as _runtime
from mmopt._base import validation as v
from mmopt.family.call import Call, check_common, seed_record

CALLER = "optimize"


def run(workload, method: str, call: Call):
    """kron, union, marginals, residual, datacube on a product domain; "auto" on any workload."""
    from mmopt.dense._workload_type import Workload, not_a_workload
    from mmopt.structured.workloads import ImplicitWorkload
    from mmopt.toeplitz.error import StreamWorkload
    from mmopt.workload import structure_of

    stream = method == "auto" and isinstance(workload, StreamWorkload)
    if not stream and not isinstance(workload, Workload | ImplicitWorkload):
        raise not_a_workload(workload, name="workload", caller=CALLER, expected="a Workload or an implicit workload")
    given = [k for k, val in {"solver": call.solver, "initial": call.initial}.items() if val is not None]
    if given:
        raise ValueError(f"The {given} parameter(s) of {CALLER} do not apply to method={method!r}, which reads "
                         "['max_iterations', 'n_jobs', 'norm', 'seed', 'tol', 'verbose', options 'restarts'].")
    opts = dict(call.options or {})
    unknown = sorted(set(opts) - {"restarts"})
    if unknown:
        raise ValueError(f"Unknown options {unknown} for {CALLER}(method={method!r}). Accepted: ['restarts'].")
    restarts = opts.get("restarts")
    if restarts is not None:
        restarts = v.check_int(restarts, name="restarts", caller=CALLER)
    n_jobs = check_common(call, CALLER)
    # residual's own objective is the Gaussian (L2) one, as l2_approx's; the HDMM searches default to ε-DP
    norm = v.check_choice(call.norm or ("l2" if method == "residual" else "l1"), name="norm", caller=CALLER,
                          choices=("l1", "l2"))
    threads = _runtime.check_blas_threads(call.blas_threads, caller=CALLER, auto=1)
    with _runtime.progress(_runtime.check_verbose(call.verbose, CALLER)), _runtime.blas_threads(threads):
        if method == "auto":
            from mmopt.auto.budget import check_budget
            from mmopt.auto.plan import Context
            from mmopt.auto.run import run_auto
            ctx = Context(workload, None if stream else structure_of(workload), workload if stream else None, norm,
                          call.seed, call.tol, call.max_iterations, restarts, n_jobs, call.optimize)
            res = run_auto(ctx, check_budget(call.budget, caller=CALLER), verbose=call.verbose)
        else:
            from mmopt.multidim.search import search
            res = search(workload, method, norm=norm, seed=call.seed, restarts=restarts,
                         max_iterations=call.max_iterations, tol=call.tol, verbose=call.verbose is not False,
                         structure=structure_of(workload), n_jobs=n_jobs)
    return dataclasses.replace(res, extra=dict(res.extra) | {"seed": seed_record(call.seed)})
