"""optimize(workload, method=...): one entry point for choosing a strategy, one result type.

Notation: see README. This module checks what every method shares (the objective's norm from ``privacy``, the
budget) and looks the method up in one table, :data:`mmopt.family.routes.ROUTES`, which says whose code runs it:
the stream family's Toeplitz searches, the product family's HDMM searches and "auto", the O(n) p-Identity search,
or the dense registry (:mod:`mmopt.family.dense`, which re-evaluates every strategy exactly and attaches the best
certified lower bound). Each method lives in its own module and hands back a ``RawSolution`` or a result.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from mmopt._base import validation as v
from mmopt._base.result import OptimizeResult
from mmopt.family import routes
from mmopt.family.call import Call, seed_record
from mmopt.privacy import Privacy
from mmopt.search._methods import DEFAULT_NORM, METHODS, OPTIONS  # noqa: F401 (OPTIONS: API)
from mmopt.workload import Workload

MULTIDIM_METHODS = routes.PRODUCT_METHODS  # the names before the family table (mmopt.cli reads them)
TOEPLITZ_METHODS = routes.STREAM_METHODS


def optimize(workload: Workload, *, privacy: Privacy | None = None, method: str | Callable | None = None,
             solver: str | None = None, norm: str | None = None, initial=None, tol: float | None = None,
             max_iterations: int | None = None, seed=None, verbose: bool | None = None,
             blas_threads: int | str | None = "auto", options: Mapping[str, Any] | None = None,
             n_jobs: int | None = None, budget: str | float | None = None, objective: str | None = None,
             targets=None, participation=None) -> OptimizeResult:
    """Find a strategy for ``workload`` with one of the paper's methods.

    The noise the strategy will be released with chooses what is optimised: pass ``privacy`` and the objective
    is the error under that noise — Δ₁ (Laplace, ε-DP) when δ = 0, Δ₂ (Gaussian, (ε,δ)-DP) when δ > 0 — and the
    default method is "auto". A strategy optimised for one noise can be far from optimal under the other (prefix
    sums on 1,024 cells: l2_approx's (ε,δ)-optimal strategy has 13.6× the Laplace error of H₂, 3.7× its RMSE).

    Parameters
    ----------
    workload : Workload or mmopt.structured.ImplicitWorkload
    privacy : Privacy or None, default=None
        The budget the strategy is for. It sets the objective's sensitivity norm (δ = 0 → "l1", δ > 0 → "l2");
        the objective itself stays at unit privacy (scale-free), so one result serves every ε.
    method : str, callable or None, default=None
        None: "auto" when ``privacy`` or ``norm`` is given, else "l2_approx" (the paper's convex program). By the
        route that runs them (:data:`mmopt.family.routes.ROUTES`; the architecture page prints the table):

        * "auto" — every method below that applies, within ``budget``, cheapest first; keeps the lowest exact
          error; ``extra["candidates"]`` lists those run and ``extra["skipped"]`` those skipped, with the reason
          (:mod:`mmopt.auto`).
        * dense (any workload of ≤ 4,096 cells): "l2_approx" (Program 5.2, (ε,δ)-optimal, convex),
          "min_error" (Program 5.1, ε-DP, heuristic), "min_sensitivity" (Program 5.3, needs ``initial``),
          "svd_strategy" (Theorem 5.25's closed form A = G^{1/4}; "svd_bound" is its old name), the baselines
          "identity", "hierarchical", "wavelet", "lrm" (Yuan et al. 2012's low-rank mechanism, a heuristic;
          options ``rank``, ``init``) and "eigen_design" (Li & Miklau 2012: optimal among eigen-designs only);
          or a callable ``f(workload, G, opts) -> RawSolution`` (``options`` passed unchecked).
        * p-Identity: "min_error" on prefix sums / all ranges from 512 cells (dense or ``mmopt.toeplitz``'s, any
          n) runs HDMM's p-Identity search on an O(n) Gram operator, never n×n (:mod:`mmopt.search.min_error_fast`).
        * product (``mmopt.workload.kron/stack/marginals``, census workloads): HDMM's "kron" (OPT_⊗),
          "union" (OPT_+, one product per term), "marginals" (OPT_M); "residual" (ResidualPlanner: closed form,
          any d, optimal under Gaussian noise on unions of marginals); "datacube" (Ding et al. 2011, a greedy
          heuristic); "coupled" (Gaussian noise, 1- and 2-way unions on one attribute size: the split strategy
          with its factors freed from B1 = 0, fitted on the exact error; :mod:`mmopt.structured.residual.coupled`).
          lrm, eigen_design and datacube are never candidates of "auto".
        * stream (prefix sums / all ranges at any n, Gaussian noise): "weighted_sqrt", "toeplitz", "blt",
          "banded" (:mod:`mmopt.toeplitz`; options ``bands``, ``buffers``, ``equalize``).
    solver : str or None, default=None
        SDP solver ("CLARABEL", "SCS", "MOSEK"); None picks one (see :mod:`mmopt.solvers`).
    norm : {"l1", "l2"} or None
        The expert override of the objective's sensitivity norm. Default: ``privacy``'s, else "l2" for
        l2_approx and "l1" for the other methods. A norm that contradicts ``privacy``, or a method whose own
        objective is in the other norm (l2_approx under Laplace noise), gives a warning: the strategy is then
        optimised for one noise and scored in the other.
    initial : Strategy, array_like, or str, optional
        Warm start (min_error: a Strategy, a matrix, or "identity", "hierarchical", "wavelet",
        "svd_strategy", "l2_approx"); the strategy to re-profile for min_sensitivity.
    tol : float in (0, 1), optional
        The method's convergence tolerance (duality gap, rank gap, or L-BFGS-B's test).
    max_iterations : int, optional
        The method's budget: Newton steps (l2_approx fast), solver iterations (l2_approx SDP), P1 solves
        (convex iterations) and L-BFGS-B iterations per restart and per polish (min_error).
    seed : int, numpy.random.Generator or None
        Seeds the random restarts; accepted (and unused) by the deterministic methods too. Restart k draws
        only from ``numpy.random.SeedSequence(seed).spawn(restarts)[k]``, so a seed gives the same strategy
        whatever ``n_jobs``. None draws fresh entropy (``SeedSequence().entropy``) and records it in
        ``extra["seed"]``, so ``optimize(..., seed=res.extra["seed"])`` repeats a run; a Generator's state is
        not recorded.
    verbose : bool or None, default=None
        Print progress (stage, restart k of K, objective, seconds) to stderr. None ("auto"): only if the call
        is still running after 10 s, so quick calls stay quiet and long ones say what they do; False: never.
        If logging is already configured to show the "mmopt" logger's INFO records, they go there instead;
        with tqdm installed, also a progress bar over the restarts.
    blas_threads : "auto", int or None, default="auto"
        Cap on BLAS threads during the call (threadpoolctl; restored afterwards); None leaves BLAS as
        configured. "auto": mmopt's one policy (:mod:`mmopt._base.runtime`), one thread unless the environment
        variable ``MMOPT_BLAS_THREADS`` says otherwise: on 2 cores a second thread gains at most 1.5× when the
        machine is idle (l2_approx, n = 2048: 6.1 s against 9.2 s) and loses 4–100× under any other load
        (the same: 130 s against 33 s beside one busy process; min_error, n = 256: 205 s against 2.8 s).
    options : dict, optional
        Method-specific; each method accepts only its own (:data:`OPTIONS`) and checks their values.
        l2_approx: ``engine`` ("auto", "sdp", "fast"). min_error: ``engine`` ("auto", "sdp", "local"),
        ``restarts`` and ``p`` (positive ints: local-search restarts and extra rows), ``weight`` (> 0:
        penalty form of the SDP stage), ``polish`` (bool; default n ≤ 64), ``start`` (prefix sums and all
        ranges from 512 cells: "auto" coarse to fine past 1,024 cells (:mod:`mmopt.search.pidentity_ladder`),
        "random" HDMM's random start, "ladder").
    n_jobs : int or None, default=None
        Restarts run at once, joblib's convention: None or 1 one after the other, 2 two workers, -1 every
        core. None follows an enclosing ``joblib.parallel_config``: inside ``with
        joblib.parallel_config(backend="dask"):`` (a ``dask.distributed.Client`` open) the restarts run on
        the cluster's workers. Used by min_error's local search, min_sensitivity's random rotations and
        the restarts of kron, union (its factor searches) and marginals; the other methods have no
        restarts and accept it unused, like ``seed``. Each worker process runs with one BLAS thread. The
        result is the same for any value (:mod:`mmopt._base.parallel`); for min_error, kron, union and
        marginals ``extra`` records the workers and backend used.
    budget : {"fast", "default", "thorough"}, float or None, default=None ("default")
        CPU seconds (one BLAS thread) that "auto" may plan to spend: 5, 60 and 600 for the names, or a number.
        Each candidate's cost is estimated before it runs; one that does not fit what is left, or that cannot beat
        an incumbent already at the proven lower bound, is skipped, and ``extra["skipped"]`` says why (so does
        ``"dual_bound"`` there when the certified dual bound did not fit what was left: the SVD bound stays). The
        estimates, not the clock, are charged, so the result does not depend on the machine's load
        (:mod:`mmopt.auto`); ``extra["budget"]`` holds the budget, the estimates charged ("planned") and the CPU
        seconds of the proven lower bound computed first ("bound_seconds", not charged: on a dense workload of
        thousands of cells it can exceed a 'fast' budget by itself). Only "auto" reads it.
    objective : {"total", "max_variance", "last_iterate"} or None, default=None
        What is minimised (None: "total", or "max_variance" when ``targets`` is given): the total squared error
        over all queries, or the largest single-query variance (divided by its target when ``targets`` is given;
        with ``targets``, "total" is refused). "max_variance" runs a certified minimax search on dense
        workloads (≤ 4,096 cells; :mod:`mmopt.search.max_variance`), factor by factor on one Kronecker product, and
        the residual planner on unions of marginals at any size: ``objective`` in the result is then that largest
        variance (or variance/target) at unit privacy and ``lower_bound`` a proven bound on it. With
        ``participation``, "max_variance" is the largest per-step variance under the schema and "last_iterate" the
        final step's error (any schema; a closed form), both certified (:mod:`mmopt.participation.objectives`).
    targets : float or array_like of shape (m,), optional
        Per-query variance targets τ (one number for every query): minimise max_i variance_i / τ_i. Implies
        ``objective="max_variance"``. On a union of marginals under Gaussian noise (the residual route) also a
        dict {attribute tuple: τ} (one per marginal), and targets per query must be equal within each marginal
        (there every cell of a marginal has the same variance). On grouping sets (a HierarchyWorkload: one target
        per set) the variances are those of what a release gives, each group's total, unweighted: a set's weight
        scales its rows in the total objective only (``evaluate`` reads the weighted rows).
    participation : mmopt.participation schema or None, default=None
        Private training: a record contributes to several steps, as ``mmopt.participation.fixed_epochs(k)`` or
        ``min_separation(b, k)`` allow (None or ``single()``: once). The objective is then the total error at
        unit σ with the sensitivity under that schema; methods "auto", "l2_approx" (the certified optimum under
        fixed epochs, n ≤ 4,096, a causal factor) and "banded" (prefix sums at any n, and Toeplitz workloads such
        as ``mmopt.participation.momentum``); Gaussian noise only, under every schema, ``single()`` included (L2
        objective; Laplace noise or ``norm="l1"`` refused; :mod:`mmopt.family.training`). With ``single()`` a dense
        strategy is returned as the causal (lower-triangular) factor C of its AᵀA: the same error.

    Returns
    -------
    OptimizeResult
        ``status`` is "optimal" only when the method's own convergence test passed (for a heuristic: a
        local optimum), "user_limit" when an iteration or CPU budget ended it — ``max_iterations`` or a stage's
        own default (min_error's SDP stage: 50 solves) —; the message says which part did.

    Raises
    ------
    ValueError, TypeError
        On an invalid parameter or option, or one the chosen method does not read (``seed`` and
        ``n_jobs`` are accepted by every method).

    Examples
    --------
    >>> import mmopt
    >>> res = optimize(mmopt.workload.prefix(2), method="l2_approx")
    >>> round(res.objective, 6), res.success   # (3 + √5)/2
    (2.618034, True)
    >>> res.lower_bound >= round(mmopt.svd_bound(mmopt.workload.prefix(2)), 12) == 2.5   # dual bound ≥ SVD bound
    True
    """
    caller = "optimize"
    # a number was a ValueError naming choose(), the solver's internal helper (a helper's audit)
    if method is not None and not isinstance(method, str) and not callable(method):
        raise TypeError(f"The 'method' parameter of {caller} must be a str, a callable or None. Got {method!r} "
                        f"({type(method).__name__}) instead.")
    if solver is not None and not isinstance(solver, str):
        raise TypeError(f"The 'solver' parameter of {caller} must be a str or None. Got {solver!r} "
                        f"({type(solver).__name__}) instead.")
    from mmopt.dispatch import as_implicit  # a marginal workload from the residual layer (RecordsRelease.workload)
    workload = as_implicit(workload)
    given_norm = norm
    if participation is not None:
        norm = _training_norm(participation, privacy, norm, caller)
    if method is None and participation is not None:
        method = "auto"  # the participation route picks the certified optimum or a banded strategy by size
    if objective is None:
        objective = "total" if targets is None else "max_variance"
    elif isinstance(objective, str) and objective == "total" and targets is not None:
        # the default could not be told from this request, which ran the max-variance search without a word
        raise ValueError(f"The 'targets' parameter of {caller} sets per-query variance targets, which the total error "
                         "has none of (it implies objective='max_variance'). Got objective='total' with targets: "
                         "drop one of them.")
    if isinstance(objective, str) and objective == "last_iterate" and participation is None:
        # it ran the training route on any workload, returned its last row as an "optimal" strategy no release
        # could use, and under Laplace noise in the L2 norm (a helper's probe)
        raise ValueError(f"The 'objective' parameter of {caller}: 'last_iterate' is the final training step's error "
                         "under a participation schema. Got no 'participation'; pass one (e.g. "
                         "participation=mmopt.participation.single() for one participation per record).")
    if method is None and (objective != "total" or targets is not None):
        method = "max_variance"  # its own search; "auto" and the dense default minimise the total
    if method is not None:  # refused before _objective's warnings, which then read as the answer's preamble
        _check_budget(budget, method, caller)
    method, norm = _objective(privacy, method, norm, caller, warn_norm=given_norm is not None)
    _check_budget(budget, method, caller)
    if seed is None:  # fresh entropy, as numpy draws it, but recorded: seed=res.extra["seed"] repeats the run
        seed = int(np.random.SeedSequence().entropy)
    call = Call(norm, solver, initial, tol, max_iterations, seed, verbose, blas_threads, options, n_jobs, budget,
                optimize, objective, targets, participation)
    # which family's code runs this method: one table (mmopt.family.routes.ROUTES), no branch here
    res = routes.find(workload, method, call).run(workload, method, call)
    if participation is not None:  # single(): the ordinary routes' strategy as its causal factor
        from mmopt._base.intent import PARTICIPATION, marked
        from mmopt.family.training import causal_single
        from mmopt.participation.schemas import Single, as_schema
        res = causal_single(res, participation)
        schema = as_schema(participation, caller)
        steps = workload.n if hasattr(workload, "n") else workload.domain_size  # stream or dense workload
        if not isinstance(schema, Single) and schema.participations(steps) > 1:  # evaluate and release
            # say so; fixed_epochs(1) or b ≥ n is one step per record: evaluate's figures are the run's (a review)
            res = dataclasses.replace(res, strategy=marked(res.strategy, repr(schema), attribute=PARTICIPATION))
    if "seed" not in res.extra:  # the routes that draw nothing record it too: every result says how to repeat it
        res = dataclasses.replace(res, extra=dict(res.extra) | {"seed": seed_record(seed)})
    if privacy is None and given_norm is None and participation is None and res.norm in ("l1", "l2"):
        from mmopt._base.intent import marked  # the noise no budget stated: evaluate and release say a mismatch
        res = dataclasses.replace(res, strategy=marked(res.strategy, res.norm))
    return res


def _check_budget(budget, method, caller: str) -> None:
    if budget is not None and not (isinstance(method, str) and method == "auto"):
        raise ValueError(f"The 'budget' parameter of {caller} applies to method='auto' only (it chooses which "
                         f"candidates run). Got budget={budget!r} with method={method!r}; drop it, or use "
                         "method='auto'.")


def _training_norm(participation, privacy, norm, caller: str) -> str:
    """"l2": a schema, single() included, means Gaussian noise, so with neither ``privacy`` nor ``norm`` the objective
    is L2 (as "auto" would otherwise take "l1"); Laplace noise or norm="l1" refused, naming the schema."""
    from mmopt.participation.schemas import as_schema
    schema = as_schema(participation, caller)
    wanted = privacy.sensitivity_norm if isinstance(privacy, Privacy) else None
    if "l1" in (norm, wanted):
        raise ValueError(f"{caller}(participation={schema!r}) optimises the error under Gaussian noise (L2 "
                         "sensitivity): use Privacy(epsilon, delta > 0) or privacy=None, and no norm='l1'.")
    return "l2"


def _objective(privacy, method, norm, caller: str, warn_norm: bool = True):
    """(method, norm) from the budget: ``privacy`` picks the norm, None picks the method; mismatches warn."""
    if privacy is not None and not isinstance(privacy, Privacy):
        raise TypeError(f"The 'privacy' parameter of {caller} must be a Privacy, e.g. Privacy(epsilon=1.0) for ε-DP "
                        f"or Privacy(1.0, delta=1e-6) for (ε,δ)-DP, or None. Got {type(privacy).__name__} instead.")
    if norm is not None:
        norm = v.check_choice(norm, name="norm", caller=caller, choices=("l1", "l2"))
    if method is None:
        method = "auto" if (privacy is not None or norm is not None) else "l2_approx"
    if isinstance(method, str) and method == "svd_bound":
        warnings.warn(f"{caller}: method='svd_bound' is now 'svd_strategy' (Theorem 5.25's strategy, not the bound); "
                      "the old name will be removed.", DeprecationWarning, stacklevel=3)
        method = "svd_strategy"
    if privacy is None:
        searched = isinstance(method, str) and method in METHODS and METHODS[method].reads
        native = DEFAULT_NORM.get(method, "l1") if searched else norm
        if warn_norm and norm is not None and native != norm:  # the search ignores norm (min_error always
            # minimises the L1 objective); it was silent here, while the same mismatch through privacy= warned
            warnings.warn(f"{caller}: method={method!r} optimises the {native} objective; norm={norm!r} only scores "
                          f"its strategy in {norm}, where it can be far from the best. Use "
                          f"method={'l2_approx' if norm == 'l2' else 'min_error'!r} to optimise in {norm}.",
                          UserWarning, stacklevel=3)
        return method, norm
    wanted = privacy.sensitivity_norm
    noise = "Laplace (δ = 0)" if wanted == "l1" else "Gaussian (δ > 0)"
    if norm is not None and norm != wanted:
        warnings.warn(f"{caller}: norm={norm!r} overrides the {noise} noise of {privacy}, whose sensitivity norm is "
                      f"{wanted!r}: the strategy is optimised for the other noise than the one it will be released "
                      "with. Drop 'norm' to optimise for the budget.", UserWarning, stacklevel=3)
        return method, norm
    # a construction (identity, hierarchical, wavelet, the SVD strategy) optimises nothing, so there is no objective
    # to mismatch: it had been said to "optimise the l1 objective" under Gaussian noise
    searched = isinstance(method, str) and method in METHODS and bool(METHODS[method].reads)
    native = DEFAULT_NORM.get(method, "l1") if searched else wanted
    if native != wanted:
        other = "'l2_approx' for Gaussian noise" if wanted == "l2" else "'min_error' for Laplace noise"
        warnings.warn(f"{caller}: method={method!r} optimises the {native} objective, but {privacy} releases with "
                      f"{noise} noise: its strategy is scored in {wanted} and can be far from the best there. Use "
                      f"method='auto' (or {other}).", UserWarning, stacklevel=3)
    return method, wanted
