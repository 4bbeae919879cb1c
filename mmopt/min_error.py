"""MinError for ε-DP (Problem 5.15): the SDP heuristic where it runs, local search where it scales.

Notation: see README. The rank-constrained SDP of Program 5.1 with convex iteration
(:mod:`mmopt.sdp_min_error`) is run for small n; from n ≈ 32 on it is too slow, and the direct local
search of :mod:`mmopt.local_search` carries the method. Every candidate — warm starts, the SDP
heuristic's answer, local-search restarts, and the polish of each — is scored by its *true* error
Δ₁²·tr(G(AᵀA)⁻¹), and the best is kept. None of this is a global optimum (the problem is not convex);
the L2 optimum's dual bound (Program 5.2, solved to a certified gap) is a valid lower bound, because
‖A‖₁ ≥ ‖A‖₂ column by column.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from mmopt import strategy as st
from mmopt._solution import RawSolution
from mmopt.error import unit_objective
from mmopt.workload import Workload

log = logging.getLogger("mmopt")
SDP_MAX_N = 16  # the convex-iteration SDP reached the optimum at n ≤ 16 and stalled above identity at n = 32


def _normalised(A: np.ndarray) -> np.ndarray:
    return A / np.max(np.sum(np.abs(A), axis=0))


def _starts(W: Workload, G: np.ndarray, initial, l2_gram: np.ndarray) -> list[tuple[str, np.ndarray]]:
    from mmopt.optimize import _initial_matrix

    n = W.domain_size
    out = [("identity", np.eye(n)), ("H2", st.hierarchical(n).matrix)]
    if n & (n - 1) == 0:
        out.append(("wavelet", st.wavelet(n).matrix))
    lam, V = np.linalg.eigh(l2_gram)
    out.append(("l2_approx", (V * np.sqrt(np.clip(lam, 0, None))) @ V.T))
    if initial is not None:
        out.append(("initial", _initial_matrix(initial, W)))
    return [(name, _normalised(A)) for name, A in out]


def solve(W: Workload, G: np.ndarray, opts: dict) -> RawSolution:
    """Run the MinError pipeline on the normalised Gram ``G`` and return the best strategy found."""
    from mmopt.l2_fast import solve_l2
    from mmopt.local_search import minimize_l1

    t0 = time.perf_counter()
    n = W.domain_size
    engine = opts.get("engine", "auto")
    if engine not in ("auto", "sdp", "local"):
        raise ValueError(f"The 'engine' option of optimize(method='min_error') must be 'auto', 'sdp' or 'local'. "
                         f"Got {engine!r} instead.")
    use_sdp = engine == "sdp" or (engine == "auto" and n <= SDP_MAX_N)
    l2 = solve_l2(G, tol=1e-8)
    history: list[dict] = []
    candidates: list[tuple[float, str, np.ndarray]] = []

    def consider(label: str, A: np.ndarray) -> None:
        err = unit_objective(A, G)
        candidates.append((err, label, A))
        history.append({"step": label, "objective": err, "seconds": time.perf_counter() - t0})
        log.info("min_error candidate %s: %.6g", label, err)

    for label, A in _starts(W, G, opts.get("initial"), l2.gram):
        consider(label, A)
    solver, status, message, iterations = None, "optimal", "", 0
    if use_sdp:
        from mmopt.sdp_min_error import solve_min_error_sdp

        # Convex iteration runs its own multi-start (G^{1/4}, I, √X_L2): the right start is workload-dependent.
        user = opts.get("initial")
        start = None if user is None else _starts(W, G, user, l2.gram)[-1][1]
        sdp = solve_min_error_sdp(G, initial=start, solver=opts.get("solver"), weight=opts.get("weight"),
                                  tol=opts.get("tol") or 1e-6, max_iterations=opts.get("max_iterations") or 50,
                                  verbose=opts["verbose"])
        solver, iterations = sdp.solver, sdp.iterations or 0
        history.extend(dict(h, step="sdp") for h in sdp.history)
        consider("sdp", sdp.matrix)
        if sdp.status != "optimal":
            status, message = sdp.status, f"Convex iteration: {sdp.message} "
    # Measured (benchmarks/bench_local_search.py): 8 restarts reach HDMM's OPT_0 ratios up to n = 256 in
    # ~25 s; at n = 1024 longer runs help more than more restarts.
    restarts = int(opts.get("restarts") or (8 if n <= 256 else 3))
    budget = opts.get("max_iterations") or (1000 if n <= 256 else 3000)
    local = minimize_l1(G, p=opts.get("p"), restarts=restarts, seed=opts.get("seed"), max_iterations=budget,
                        verbose=opts["verbose"])
    iterations += local.iterations or 0
    consider("local_search", local.matrix)
    # Polishing a general signed A costs O(n³) per step: worth it at small n, ~100 s at n = 256 for no gain.
    if opts.get("polish", n <= 64):
        # polish the best two distinct starting points: cheap, and it never makes a candidate worse
        for _, label, A in sorted(candidates, key=lambda c: c[0])[:2]:
            pol = minimize_l1(G, initial=A, max_iterations=budget, seed=opts.get("seed"))
            iterations += pol.iterations or 0
            consider(f"polish({label})", pol.matrix)
    err, label, A = min(candidates, key=lambda c: c[0])
    solver = f"{solver}+mmopt-lbfgs" if solver else (local.solver or "mmopt-lbfgs")
    message += (f"Best of {len(candidates)} candidates is '{label}'. MinError is not convex: this is a heuristic "
                "local optimum with no optimality certificate; lower_bound is the L2 optimum's dual bound.")
    return RawSolution(_normalised(A), None, status, message, iterations, solver, dual_bound=l2.dual_bound,
                       history=tuple(history), extra={"best_candidate": label, "seconds": time.perf_counter() - t0,
                                                      "l2_status": l2.status, "dual_bound_norm": "l2"})
