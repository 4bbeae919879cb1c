"""What each candidate of ``optimize(method="auto")`` is expected to cost, in CPU seconds, before it runs.

Notation: see README. Every figure is a fit to runs measured on mmopt's reference machine (2 cores, one BLAS thread,
``benchmarks/results/bench_auto.txt`` and the benchmarks named beside each constant). They are estimates, not
limits: ``auto`` uses them to decide what fits the budget (:mod:`mmopt.auto.budget`) and reports each candidate's
measured seconds beside its estimate, so a wrong constant shows in the benchmark table. They err on the high side
for the searches (a candidate skipped for a high estimate costs quality; one run for a low one costs time).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["closed_dense", "coupled", "datacube_start", "dual_floor", "identity_product", "kron", "l2_dense",
           "l2_tridiagonal_step", "local_setup", "marginals", "marginals_iteration", "marginals_once",
           "min_error_dense", "min_error_fast", "pidentity_step", "residual", "stream_closed", "svd_strategy",
           "tree_evaluation", "tree_levels", "tree_stream", "tree_weights", "union", "union_scoring"]


def closed_dense(n: int) -> float:
    """A dense closed form (identity, H₂, Haar, G^{1/4}) built and scored exactly: one O(n³) factorisation.
    Measured with the workload's spectrum cached (auto computes the bound first), the slowest of the first three
    on random ranges and prefix sums: 0.27 s at n = 1,024, 1.27 s at 2,048, 7.2 s at 4,096; 3·10⁻¹⁰·n³ said 2.6 s
    at 2,048, so a 'fast' budget ran the identity alone there (54× the bound on 2,048 random ranges, where the Haar
    wavelet is 21×). G^{1/4} through optimize took within 15 % of the Haar's (0.70 against 0.63 s on all ranges
    of 1,024 cells, 4.3 against 4.4 s on prefix sums of 2,048, one core)."""
    return 0.05 + 1.5e-10 * n**3


def svd_strategy(workload) -> float:
    """G^{1/4} (:func:`mmopt.strategy.svd_strategy`) from W's own SVD when W is held (m×n: ≈ 1.2·10⁻⁹·m·n·min(m, n),
    the rest as :func:`closed_dense`); measured 1.30–1.45 CPU s on 1,024 random ranges of 1,024 cells and 12.0 s
    at 2,048, where closed_dense alone said 0.21 and 1.34 (a helper's probe)."""
    n = workload.domain_size
    W = getattr(workload, "matrix", None)
    svd = 0.0 if W is None else 1.2e-9 * W.shape[0] * n * min(W.shape[0], n)
    return closed_dense(n) + svd


def tree_stream(n: int) -> float:
    """One branching of H_b on a stream workload, its tree built and its exact total scored in O(n)
    (:mod:`mmopt.toeplitz.trees`); auto scores each of :func:`mmopt.toeplitz.trees.branchings`. Measured, all of them:
    0.20 CPU s at n = 10⁵ (8 branchings), 1.8 s at 10⁶ (7), 32 s at 10⁷ (8), prefix sums, one core."""
    return 0.02 + 3.5e-7 * n


def stream_closed(n: int, name: str) -> float:
    """The weighted square root (``name="weighted_sqrt"``) or the square root ("sqrt") of a stream workload, built
    and scored exactly (:func:`mmopt.toeplitz.solve.optimize`): O(n log² n) and O(n log n) work, but past ~10⁶
    cells bound by memory (arrays of 10⁷ doubles; a third of the CPU is the system's, page faults), so fitted as
    a·n + b·n². Measured, CPU s at 10⁵ / 10⁶ / 10⁷ cells, prefix sums and all ranges, one core: weighted 0.11–0.16 /
    1.2 / 30–35, sqrt 0.03–0.04 / 0.32–0.38 / 13–14 (0.05 + 10⁻⁶·n said 10 s at 10⁷)."""
    a, b = (1.2e-6, 2.5e-13) if name == "weighted_sqrt" else (3.5e-7, 1.1e-13)
    return 0.01 + a * n + b * n * n


def tree_levels(n: int) -> int:
    """The levels of a b = 10 tree on n cells, the pricing's stand-in for the branching auto picks."""
    return max(2, math.ceil(math.log(max(n, 2), 10)) + 1)


def tree_evaluation(n: int) -> float:
    """One evaluation of a level-weighted H_b's exact error (one O(n) pass)."""
    return 0.002 + 1.1e-7 * n


def tree_weights(n: int, evaluations: int | None = None) -> float:
    """H_b's level weights searched by L-BFGS-B on the exact error (:func:`mmopt.toeplitz.trees.weighted`), one O(n)
    pass an evaluation: all ranges (the longer search) took 114 evaluations and 1.5 CPU s at 10⁵ cells, 126 and
    12.3 s at 10⁶ (b = 10); priced at 20 per level of a b = 10 tree, or ``evaluations`` plus one finite-difference
    gradient (L-BFGS-B ends the gradient it started: 8 asked for took 14 at 10⁶ cells), at
    :func:`tree_evaluation` each."""
    levels = tree_levels(n)
    count = 20 * levels if evaluations is None else evaluations + levels
    return count * tree_evaluation(n)


def identity_product(structure) -> float:
    """The identity on every attribute, its error tr(G) in closed form (one pass over the terms' factors, each
    distinct factor's spectrum once) and its implicit strategy built."""
    terms, d = len(structure.terms), len(structure.shape)
    return 0.02 + 3e-6 * terms * d  # measured 1.5 s on the 4,950 terms × 100 factors of (8,)¹⁰⁰, 0.012 s on (2,)¹³


def l2_dense(n: int, family: str | None = None) -> float:
    """l2_approx's dense Newton solver to a certified gap, and the exact re-evaluation. Its Newton steps depend on
    the workload (one BLAS thread, bounds cached): prefix sums 1.0 s at 1,024 cells and 4.2 s at 2,048 (46 s at
    4,096, ``benchmarks/results/bench_l2_fast.txt``), all ranges 0.4 / 2.0 s — priced 0.05 + 1.2·10⁻⁹·n³ —; other
    workloads at the slower kind measured, random and width-32 ranges: 0.6–1.1 s at 512 cells, 4.0–4.5 s at 1,024,
    29–30 s at 2,048 — priced 0.3 + 3.5·10⁻⁹·n³ (the first price was 3× low on them)."""
    if family in ("prefix", "all_range"):
        return 0.05 + 1.2e-9 * n**3
    return 0.3 + 3.5e-9 * n**3


def l2_tridiagonal_step(n: int) -> float:
    """One iteration of :func:`mmopt.toeplitz.dual.solve_dual` (a tridiagonal eigendecomposition and O(n²)
    quadratic forms): about 1.35 s at n = 4,096 (``benchmarks/results/bench_prefix.txt``)."""
    return 0.005 + 8e-8 * n**2


#: The convex-iteration SDP stage that the dense MinError pipeline adds at n ≤ SDP_MAX_N (2 starts of up to 50 P1
#: solves): measured CPU s, rounded up, the largest over prefix sums, all ranges and random 0/1 queries
#: (2n × n): 1.1 s at n ≤ 4, 2.9 s at 8, 13.7 s at 12, 10.0 s at 16 (the bisection closes sooner there), with a
#: third start (I) that the stage no longer runs: 0.7–2.9 s less on this session's faster machine (8.1–11.6 s at
#: 12 and 16), so the figures err high.
_SDP_STAGE = {4: 1.5, 8: 3.5, 16: 15.0}


def min_error_dense(n: int, *, sdp: bool = True) -> float:
    """The dense MinError pipeline (L2 start, closed-form starts, 8 or 3 p-Identity restarts): 3 s at n = 256,
    19 s at 512 on random ranges, 160–290 s at 1,024 (``benchmarks/results/bench_optimize_n1024.txt``); at
    n ≤ 16 with ``sdp`` also its SDP stage (:data:`_SDP_STAGE`: 14 s at n = 12, where the rest takes 0.3 s). On a
    slower machine (AMD EPYC, one BLAS thread), where every restart spent its 1,000 steps: 3.5 s at n = 192, 8.0 s at
    256 (prefix sums and random ranges), 17 s at 384; 1.4·10⁻⁷·n³ was 2.1–2.4× low there and 2.2·10⁻⁷ is within
    1.7× of both machines (a helper's probe).

    >>> min_error_dense(12) > 15 > min_error_dense(17), min_error_dense(12, sdp=False) < 2
    (True, True)
    """
    from mmopt.search.min_error import SDP_MAX_N
    stage = next((t for m, t in sorted(_SDP_STAGE.items()) if n <= m), 0.0) if sdp and n <= SDP_MAX_N else 0.0
    return 1.0 + 2.2e-7 * n**3 + stage


def local_setup(n: int) -> float:
    """What ``min_error`` with the local engine spends before its first L-BFGS-B step: the L2 optimum (its warm start
    and dual bound), the closed-form starts and their exact scores, O(n³) each — 7.5 s at n = 1,024, 1.0 s at 512
    (measured, one BLAS thread; :func:`pidentity_step` prices the steps). Left out before, it let the search
    overrun a "fast" budget 2–2.9× at 1,024 cells.

    >>> round(local_setup(1024), 1), round(local_setup(512), 1)
    (8.6, 1.5)
    """
    return 0.5 + 7.5e-9 * n**3


def pidentity_step(n: int, p: int) -> float:
    """One L-BFGS-B step of the dense p-Identity search (objective and gradient O(n²p)): 300 steps at n = 1,024,
    p = 64 took about 7 s."""
    return 3.5e-10 * n * n * p


def min_error_fast(n: int, max_iterations: int | None = None) -> float:
    """The O(n) p-Identity search on prefix sums or all ranges, by default or capped at ``max_iterations`` steps a
    size (:func:`mmopt.search.min_error_fast.expected_seconds`, whose tables of measured points it interpolates)."""
    from mmopt.search.min_error_fast import expected_seconds
    return expected_seconds(n, max_iterations)


def _attribute_work(structure) -> float:
    """Σᵢ nᵢ³ over the attributes: what one pass of a per-attribute (factor) search costs."""
    return float(sum(n**3 for n in structure.shape))


def residual(structure) -> float:
    """The residual plan (closed form over the downward closure of the terms): 0.0–0.4 s on the census workloads,
    2–6 s on the 166,751 subsets of 3-way marginals over (8,)¹⁰⁰. A union that is not of marginals takes the split
    strategy, whose fitted bases cost ≈ 2.5·10⁻⁷·Σnᵢ³ more (prefix 256 × 256 8.2 s, 256 × identity 16 4.0 s,
    all ranges 256 × 256 4.2 s, prefix 128 × 64 0.7 s: estimated at 0.07–0.39 s before, a helper's probe)."""
    from mmopt.structured.residual.solve import marginal_form
    split = 0.0 if marginal_form(structure) else 2.5e-7 * _attribute_work(structure)
    return 0.05 + 2e-5 * len(structure.terms) + 1e-8 * _attribute_work(structure) + split


def _factor_solve(n: int) -> float:
    """One factor solve of OPT_⊗ on a union under Laplace noise (two L-BFGS-B runs of up to 3,000 steps, overhead-
    bound at these sizes): the upper envelope of the measured 0.012–0.11 s on factors of 8–64 cells."""
    return 0.012 * n**0.55 if n > 1 else 0.0


def kron(structure, norm: str, restarts: int) -> float:
    """OPT_⊗ (block-coordinate descent, one 1-D search per attribute and sweep): 0.1–0.4 s under Gaussian noise,
    0.2–14 s under Laplace noise.

    On a single product under Laplace noise one sweep converges and each 1-D search costs ≈ 0.03 + 2.4·10⁻⁷·n³
    (3 restarts, measured: prefix 128 × 64 1.7 s, 64 × 64 0.4 s, 256 × identity 16 5.7 s, all ranges 16 × 16
    0.2 s, prefix 32 × 32 × 8 0.6 s). On a union under Laplace noise a sweep costs Σᵢ :func:`_factor_solve` (nᵢ)
    and a restart takes up to ~12 sweeps (1–5 on two terms): restarts·min(12, 2.5·terms)·Σᵢ _factor_solve(nᵢ),
    measured 0.6–2.6× the CPU s of 1–2-way prefix marginals on (32,)⁴, (16,)⁶, (8,)⁸, 2-way marginals on (8,)¹⁰,
    sf1 and adult_w2 (14.2, 13.4, 9.4, 8.1, 4.4, 2.8 s), 1.8× on P⊗T ∪ T⊗R (64²; 6.4 s) and 5–36× on two-term
    unions that converge in a sweep (0.1–0.9 s). The Σnᵢ³ rate it replaces, 2.5·10⁻⁶·Σnᵢ³, was 30–70× low on
    the marginal unions: a 'fast' budget (5 s) ran 9–21 CPU s. Under Gaussian noise a single product takes one
    sweep of L2 solves, restarts·Σ(0.005 + 6·10⁻⁹·nᵢ³) (measured prefix 256 × 256 0.59 s, all ranges 256 × 256
    0.52 s, prefix 512 × 8 1.6 s, prefix 1,024 × identity 4 13.7 s, where 10⁻⁷·Σnᵢ³ said 10–322 s and a 'fast'
    budget skipped the certified optimum of prefix 256 × 256 for OPT_M's, 62× worse); unions keep that rate
    (sf1 0.4 s)."""
    terms = len(getattr(structure, "terms", ()))
    if norm != "l2":
        if terms == 1:
            return restarts * (0.1 + sum(0.03 + 2.4e-7 * n**3 for n in structure.shape))
        sweeps = min(12.0, 2.5 * terms)
        return 0.1 + restarts * sweeps * sum(_factor_solve(n) for n in structure.shape)
    if terms == 1:  # one sweep of certified L2 solves, ≈ 6·10⁻⁹·n³ each
        return 0.05 + restarts * sum(0.005 + 6e-9 * n**3 for n in structure.shape)
    return 0.1 + restarts * 1e-7 * _attribute_work(structure)


def union(structure, norm: str, restarts: int) -> float:
    """OPT_+: one OPT_⊗ per group of terms, each a product that converges in a sweep: 0.1 + 2·restarts·r·Σnᵢ³
    with r = 10⁻⁷ (Gaussian) or 2.5·10⁻⁶ (Laplace) (sf1: 1.0 s Gaussian, 8.3 s Laplace; 0.6–1.2 s on the
    marginal unions above), and its exact score (:func:`union_scoring`)."""
    return 0.1 + 2.0 * restarts * (1e-7 if norm == "l2" else 2.5e-6) * _attribute_work(structure) + \
        union_scoring(structure, norm)


def union_scoring(structure, norm: str) -> float:
    """OPT_+ scores its union strategy exactly (:func:`mmopt.structured.evaluate`): past 1,024 cells without N×N work
    where it has two groups and one is a product of full-rank factors (``two_term``) or, under Gaussian noise, where
    the workload has the coupled form (≤ 2 non-total factors a term); else densely up to 4,096 cells, O(N³) — 12–23
    CPU s at 4,096 (P⊗T ∪ T⊗P on 64²: 14–16 s of a 'fast' call under Gaussian noise before the coupled path scored
    it, 12–15 s under Laplace noise, on an estimate of 0.4; a helper's probe); at most 1,024 cells densely, by the
    queries (in the body); past 4,096 a bracket, term by term: 0.012 s a term (OPT_+ under Laplace on 2-way
    marginals, all in: (2,)¹³ 78 terms 1.4 s, (2,)¹⁴ 91 terms 1.6 s, (2,)¹⁶ 120 terms 0.8 s, (3,)⁹ 0.47 s, 3-way
    (4,)⁸ 0.43 s, 2-way (8,)⁵ 0.29 s, where 0 left 0.1: 15× low on (2,)¹⁴; a helper's probe)."""
    from mmopt.structured import factors as fc
    from mmopt.structured._checks import DENSE_LIMIT
    from mmopt.structured.analysis import TWO_TERM_MIN_N
    from mmopt.structured.residual.coupled import in_form
    N = math.prod(structure.shape)
    if N <= TWO_TERM_MIN_N:
        # the dense path: W written out (m×N) and every query's variance, 10⁻¹⁰·m·N² + 10⁻⁸·m·N — measured 3.4 s
        # for R⊗I ∪ I⊗R on 32² (m = 33,792), 6 s on 8 × 128 (m = 70,656), 0.3 s for P⊗I ∪ I⊗P on 32² (m = 2,048)
        # and 0.03–0.1 s on 16² (m = 4,352); priced 0 before, a 1.5-s budget ran 5.6 s (a helper's probe)
        m = float(structure.n_queries)
        return 0.01 + 1e-10 * m * N * N + 1e-8 * m * N
    if norm == "l2" and in_form(structure):
        return 0.0
    if N > DENSE_LIMIT:
        return 0.012 * len(structure.terms)
    full = [all(int(np.count_nonzero(fc.singular_values(f))) == f.domain_size for f in t.factors)
            for t in structure.terms]
    if len(full) == 2 and any(full):
        return 0.0
    return 0.01 + 3e-10 * N**3


def marginals(structure, restarts: int, norm: str = "l2") -> float:
    """OPT_M (:mod:`mmopt.multidim.marginals`): restarts of L-BFGS-B over the 2^d weights, a step O(d·2^d) (the
    zeta transforms) plus L-BFGS-B's own O(2^d), up to ~80 steps (fewer with few weights), and one exact score of
    the chosen run (eigendecompositions of every attribute's n×n factor). Measured, 50 restarts, one BLAS thread:
    2-way marginals of (2,)¹⁴ 8.6 s, of (2,)¹² 3.1 s, of (8,)¹⁰ 0.45 s, 3-way of (4,)⁸ 0.27 s, 2-way of (16,)⁶
    0.24 s, prefix 512 × identity 8 0.52 s, 1-way marginals of (100,)⁴ 0.07 s; this price is 1.1, 0.75, 1.7,
    1.6, 1.4, 0.75 and 2.4× those, where 5·10⁻⁷·4^d per restart was 785, 136, 58, 6.4, 0.8, 0.2 and 1.5×."""
    shape = structure.shape
    d = len(shape)
    steps = min(80, 10 + 2**d)
    return marginals_once(structure, norm) + restarts * (0.001 + steps * (7e-5 + 1e-8 * d * 2**d))


def marginals_once(structure, norm: str = "l2") -> float:
    """OPT_M's work outside its runs: the projection traces and the chosen run's exact score, and under Laplace
    noise the data cubes' warm start (:func:`datacube_start`)."""
    once = 0.02 + 2e-9 * sum(float(n) ** 3 for n in structure.shape)
    return once + (datacube_start(structure) if norm == "l1" else 0.0)


def datacube_start(structure) -> float:
    """The data cubes' greedy search that starts OPT_M under Laplace noise (:func:`mmopt.multidim.marginals.
    _datacube_start`, a union of marginals on at most WARM_MAX_ATTRIBUTES attributes, else none): a cover per
    threshold, each scanning the 2^d cuboids against the |L| marginals, the thresholds and covers growing with the
    marginals' largest order k and with d. Measured, one BLAS thread: 2-way marginals of (2,)¹² 0.029 s, (2,)¹³
    0.065, (2,)¹⁴ 0.19; 3-way of (2,)¹² 0.20, (2,)¹³ 0.60, (2,)¹⁴ 1.9; 1- to 4-way of (2,)¹² 1.8; and (the review)
    4-way of (2,)¹⁴ 23.4, 1- to 5-way of (2,)¹² 7.35, 2- and 3-way of (2,)¹⁴ 3.54, 1- to 5-way of (2,)¹³ > 60.
    Priced 10⁻⁷·2.4^(k−2)·1.2^(d−12) per cuboid-marginal pair: 0.032, 0.082, 0.22, 0.22, 0.68, 2.1, 1.9, 13.6, 9.0,
    2.6, 32 (unpriced before, a 'fast' run of 1–4-way marginals of (2,)¹² spent its 1.8 s beyond the budget; a
    price without the k and d factors was 3.6× low at order 4)."""
    from mmopt.multidim.marginals import datacube_start_marginals
    L = datacube_start_marginals(structure)
    if L is None or not L.sets:
        return 0.0
    d = len(structure.shape)
    k = max(len(A) for A in L.sets)
    return 0.005 + 1e-7 * 2.4 ** (k - 2) * 1.2 ** (d - 12) * 2**d * len(L.sets)


def marginals_iteration(structure) -> float:
    """One L-BFGS-B iteration of an OPT_M run (~1.6 evaluations of the O(d·2^d) objective), for the iteration
    budget auto gives it (:func:`mmopt.multidim.marginals.solve_marginals`): the runs' length is not known before
    they run (3-way marginals under Laplace noise, median iterations a run: 32 on (2,)⁶, 234 on (2,)¹⁰, 736 on
    (2,)¹², 1,532 on (2,)¹³, where :func:`marginals` assumes ≤ 80, and a 'fast' budget ran 23–28 CPU s).
    Measured, one BLAS thread: 0.74 ms at d = 12, ≤ 2.0 ms at d = 13."""
    d = len(structure.shape)
    return 1e-4 + 1.4e-8 * d * 2**d


def coupled(structure) -> float:
    """The coupled split fit (:mod:`mmopt.structured.residual.coupled_fit`): about 170 evaluations of (1) and its
    gradient, each ≈ 0.5 ms + 0.1 ms per pair of attributes + L³ (L = 1 + d(n−1), the Schur complement) + n⁵ (a
    pair's contractions) flops (fit 0.9 s on (16,)¹⁰, 2.1 s on (32,)⁴, 0.1–0.3 s on (8,)³–(16,)⁴), plus the dual
    bound it attaches (:func:`mmopt.structured.dual_bound.optimum_floor`, capped at FLOOR_WORK flops: ~6 s at n = 32,
    0.1 s at n = 16); measured 1.4 s and 8.5 s in all (``benchmarks/results/bench_auto.txt``)."""
    d, n = len(structure.shape), max(structure.shape)
    L = 1 + d * (n - 1)
    fit = 0.05 + 200 * (5e-4 + 1e-4 * math.comb(d, 2) + 1e-9 * L**3 + 3e-10 * n**5)
    return fit + dual_floor(structure)


def dual_floor(structure) -> float:
    """The certified dual bound :func:`mmopt.structured.dual_bound.optimum_floor` (its weight search, capped at
    FLOOR_WORK flops): ≈ 6·10⁻¹¹ per flop of its larger eigenproblem, ((n − 1) + (n − 1)²)³ per evaluation —
    measured 6.2 s on 2-way marginals of (32,)³ (7.2 estimated), 2.8 s on prefix 32 × 32, 0.4 s on (16,)⁴ (0.16)."""
    from mmopt.structured.dual_bound import _SHAPES, FLOOR_WORK
    n = max(structure.shape)
    per = float(n - 1 + (n - 1) ** 2) ** 3  # the dual bound's larger eigenproblem, per evaluation
    return 0.05 + 6e-11 * min(FLOOR_WORK, (25 + 100 + _SHAPES) * per)
