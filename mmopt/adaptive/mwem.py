"""MWEM: multiplicative weights and the exponential mechanism (Hardt, Ligett & McSherry, NeurIPS 2012).

Algorithm 1 of the paper, for a histogram x with N = Σx records and a query matrix W (m × n):

1. h₀ = N/n in every cell.
2. For t = 1..T: choose a query qᵢ (a row of W) by the exponential mechanism with score |qᵢ·x − qᵢ·h_{t−1}|
   and budget ε_T/2; measure mᵢ = qᵢ·x + Lap(2Δ/ε_T); update h_t(j) ∝ h_{t−1}(j)·exp(qᵢ(j)(mᵢ − qᵢ·h_{t−1})/(2N)),
   renormalised to total N.
3. Output the average of h₁..h_T (``output="last"``: h_T, as DPBench's implementation does).

N is not public under add/remove neighbours, so by default it is measured first: N̂ = Σx + Lap(1/ε₀) with
ε₀ = ``total_fraction``·ε, then N = max(N̂, 1) (post-processing; the floor keeps the update defined). Passing
``total=`` declares N public instead (as DPBench's MWEM assumes: ``x.sum()`` is read directly) and spends
nothing on it — only do that when the total really is public.

Budget: ε = ε₀ + T·(ε_T/2 + ε_T/2), ε_T = (ε − ε₀)/T; sequential (adaptive) composition makes the whole output
ε-DP: each round's query choice and h_{t−1} depend on the data only through earlier private outputs.
Sensitivities: one record changes x_j by 1 in one cell j, so qᵢ·x moves by |qᵢ(j)| ≤ Δ = max|W| (1 for 0/1
queries); the score |qᵢ·x − qᵢ·h| moves by at most the same Δ (h is fixed given the earlier outputs). In float64
(:func:`charged_sensitivities`): W x is computed by :func:`mmopt.dense.exact_answers.exact_answers`, every entry
correctly rounded (a BLAS product moved a measured answer by 1 + 5·10⁻⁷ of Δ between neighbours at 2³² records for
non-integer W; a helper's audit), so each measured answer moves by at most Δ_y = Δ·(1 + u(2N + 1)) + 2(4n + 1)·2⁻¹⁰⁷⁴
(u = 2⁻⁵³, N = MAX_RECORDS: the dense release's charge, :func:`~mmopt.dense.exact_answers.charged_sensitivity`
with one row), and by exactly Δ where W is integer and N·max row sum of |W| < 2⁵³ (BLAS is then exact). The score
is |fl(ŷᵢ − cᵢ)| with cᵢ = fl(qᵢ·h) public (a function of earlier outputs): the subtraction rounds by at most
u·|ŷᵢ − cᵢ| ≤ u·(B + C), where |ŷᵢ| ≤ B = (1 + u)·Δ·N for every histogram of the release domain and
C = max_i |cᵢ| is public, so the score moves by at most Δ_s = Δ_y + 2u·(B + C) (rounded upwards; C, hence Δ_s, is
recomputed each round from public values only). The release path requires whole counts of at most N records
(:mod:`mmopt.adaptive._finish`).

``replay_passes=k > 0`` applies, after each measurement, k passes of the update over every measurement so far
(the paper's §3.3 practical improvement; DPBench uses 100 passes). Cost: W x once and W h_{t−1} each round,
O(T·m·n) time, plus O(T²·k·n) for replays; W is dense (m·n floats), so pass a few thousand queries (prefix, or a
sample of ranges via :func:`mmopt.workload.random_range`), not all 8.4M ranges of a 4,096-cell domain.
Noise: ``noise="numpy"`` (default) is seeded, for simulation and benchmarking only; ``noise="opendp"`` draws the
total, every selection (Gumbel noisy max, exactly the exponential mechanism) and every measurement with
OpenDP's vetted samplers, release-grade.
"""

from __future__ import annotations

import numpy as np

from mmopt._base import guards as g
from mmopt._base import validation as v
from mmopt.adaptive._common import (
    AdaptiveResult,
    check_epsilon,
    check_fraction,
    check_histogram,
    laplace_scale,
    log_sum_exp,
    make_result,
    query_matrix,
)
from mmopt.adaptive._finish import noise_source
from mmopt.dense.exact_answers import (
    MAX_RECORDS,
    UNIT_ROUNDOFF,
    charged_sensitivity,
    check_strategy,
    cover_roundings,
    exact_answers,
    integer_exact,
)

__all__ = ["charged_sensitivities", "mwem"]

OUTPUTS = ("average", "last")
# Loop limits (mmopt._base.guards.check_work): a round costs its Python overhead (~0.05–0.08 ms measured on
# prefix(8); mmopt._base.guards.ITERATION_OPS) plus ~3·m·n for W h and the scores; a replayed update ~0.016 ms
# measured (_UPDATE_OPS) plus ~4n. With the default budget (mmopt._base.guards.MAX_WORK, about five minutes)
# that allows ~3·10⁶ rounds on a small workload and refuses, say, rounds=10**9 (a day at least) at once.
_UPDATE_OPS = 2 * 10**4
_REMEDY_ROUNDS = ("Use fewer rounds: DPBench uses T = 10, and each round spends ε/T, so beyond a few hundred "
                  "rounds every measurement drowns in noise; or raise mmopt._base.guards.MAX_WORK.")


def mwem(x, workload, epsilon: float, *, rounds: int = 10, rng=None, total: float | None = None,
         total_fraction: float = 0.1, replay_passes: int = 0, output: str = "average",
         noise="numpy") -> AdaptiveResult:
    """Run MWEM (module docstring) and return the synthetic histogram as the estimate of x.

    Parameters
    ----------
    x : array_like, 1-D (n,) or 2-D (n1, n2)
        Non-negative counts; 2-D x is flattened row-major to match W's columns.
    workload : Workload or array_like of shape (m, n)
        The candidate queries; a Workload must have its matrix (stored, or built from its family).
    epsilon : float
        Total ε > 0.
    rounds : int, default 10
        T (DPBench's default). Refused up front when T·(10⁵ + 3·m·n) operations exceed mmopt._base.guards.MAX_WORK
        (3·10¹¹, about five minutes): about 3·10⁶ rounds on a small workload.
    rng : numpy.random.Generator, int or None
        Seed for ``noise="numpy"``; must be None with ``noise="opendp"``.
    total : float or None
        A *public* record count N > 0; None (default) measures it privately with ε₀ = total_fraction·ε.
    total_fraction : float in (0, 1), default 0.1
        Share of ε spent on the total when ``total`` is None.
    replay_passes : int >= 0, default 0
        0: Algorithm 1's single update per round; k: k passes over all measurements after each round
        (k·T(T+1)/2 updates in all, refused when they exceed mmopt._base.guards.MAX_WORK as for ``rounds``).
    output : {"average", "last"}
        The paper's average of h₁..h_T, or the last iterate h_T.
    noise : {"numpy", "opendp"} or Noise, default "numpy"
        Seeded numpy noise (simulation) or OpenDP's vetted samplers (release, ``path == "release"``).

    Returns
    -------
    AdaptiveResult
        ``budget``: "total", "select", "measure"; ``details``: "selected" (query indices), "measurements",
        "total_used" (N), "total_public", "sensitivity" (Δ), "select_epsilon"/"measure_epsilon" per round.

    Examples
    --------
    >>> import mmopt
    >>> x = np.array([0, 0, 50, 50, 0, 0, 0, 0], float)
    >>> r = mwem(x, mmopt.workload.prefix(8), 1e4, rounds=8, replay_passes=50, output="last", rng=0)
    >>> bool(np.allclose(r.answer(mmopt.workload.prefix(8)), np.cumsum(x), atol=1))
    True
    """
    caller = "mwem"
    X = check_histogram(x, caller)
    xf = X.ravel()
    n = xf.size
    eps = check_epsilon(epsilon, caller)
    W = query_matrix(workload, n, caller)
    m = W.shape[0]
    round_ops = g.ITERATION_OPS + 3 * m * n  # W h, the scores and the exponential mechanism over m queries
    T = g.check_work(rounds, name="rounds", caller=caller, per_item=round_ops, item="rounds",
                     remedy=_REMEDY_ROUNDS)
    passes = v.check_int(replay_passes, name="replay_passes", caller=caller, low=0)
    if passes:  # round t replays all t measurements `passes` times: T(T+1)/2 updates per pass in all
        updates = T * (T + 1) // 2
        g.check_work(passes, name="replay_passes", caller=caller, low=0, item="replay passes",
                     work_of=lambda k: T * round_ops + k * updates * (_UPDATE_OPS + 4 * n),
                     remedy=f"With rounds={T:,}, each pass replays {updates:,} updates. Use fewer passes (DPBench "
                            "uses 100 with 10 rounds) or fewer rounds.")
    src = noise_source(noise, rng, caller, data=X)
    output = v.check_choice(output, name="output", caller=caller, choices=OUTPUTS)
    delta = float(np.max(np.abs(W)))
    if delta == 0.0:
        raise ValueError(f"The 'workload' parameter of {caller} must have a non-zero entry. Got all zeros.")

    fraction = check_fraction(total_fraction, "total_fraction", caller)  # checked even when unused (total given):
    # total_fraction=5 with a total passed silently, a helper's probe
    # every check before any draw (from W, ε and the public total alone): exact_answers can then never refuse a
    # histogram, and no refusal comes after the noisy total was spent (a review)
    check_strategy(W, caller)
    delta_y, exact = charged_sensitivities(W, delta)
    eps0 = eps * fraction if total is None else 0.0
    eps_round = (eps - eps0) / T
    # one query: every selection has one candidate and reads nothing, so the measurements take the round's ε
    forced = W.shape[0] == 1
    eps_sel = 0.0 if forced else eps_round / 2.0
    eps_meas = eps_round - eps_sel
    b_meas = laplace_scale(delta_y, eps_meas, "each measurement", caller)
    if total is None:
        noisy_total = float(src.add_laplace(xf.sum(), laplace_scale(1.0, eps0, "the total", caller)))
        N = max(noisy_total, 1.0)
    else:
        noisy_total = None
        N = v.check_real(total, name="total", caller=caller, low=0.0, low_open=True)

    # true answers, correctly rounded: used only inside the exponential mechanism and the Laplace measurements
    Wx = exact_answers(W, xf, caller=caller, integer=exact if src.vetted else None)
    logh = np.full(n, np.log(N / n))
    h = np.full(n, N / n)
    avg = np.zeros(n)
    selected, measured = [], []
    for _ in range(T):
        i = 0 if forced else _select(src, Wx, W @ h, eps_sel, delta, delta_y)
        selected.append(i)
        measured.append(float(src.add_laplace(Wx[i], b_meas)))
        updates = [(i, measured[-1])] if passes == 0 else list(zip(selected, measured, strict=True)) * passes
        for j, m_j in updates:
            logh, h = _update(logh, h, W[j], m_j, N)
        avg += h
    estimate = avg / T if output == "average" else h
    budget = {"total": eps0, "select": eps_sel * T, "measure": eps - eps0 - eps_sel * T}
    details = {"rounds": T, "selected": tuple(selected), "measurements": tuple(measured), "total_used": N,
               "noisy_total": noisy_total, "total_public": total is not None, "sensitivity": delta,
               "measure_sensitivity": delta_y,
               "select_epsilon": eps_sel, "measure_epsilon": eps_meas, "measure_noise_scale": b_meas,
               "replay_passes": passes, "output": output}
    return make_result("mwem", estimate.reshape(X.shape), eps, budget, details, src)


def charged_sensitivities(W: np.ndarray, delta: float) -> tuple[float, bool]:
    """(Δ_y, exact): the computed answers' sensitivity Δ_y (module docstring; Δ = max|W|) and whether BLAS is
    exact for W over the release domain (:func:`~mmopt.dense.exact_answers.integer_exact`), from W alone.

    >>> charged_sensitivities(np.ones((2, 3)), 1.0), charged_sensitivities(np.full((1, 3), 0.1), 0.1)[0] > 0.1
    ((1.0, True), True)
    """
    exact = integer_exact(W)
    return charged_sensitivity(delta, "l1", 1, W.shape[1], exact=exact), exact


def score_sensitivity(delta: float, delta_y: float, public: np.ndarray) -> float:
    """Δ_s = Δ_y + 2u·(B + C), B = (1 + u)·Δ·MAX_RECORDS, C = max|c| (module docstring), rounded upwards."""
    u = UNIT_ROUNDOFF
    bound = (1.0 + u) * delta * MAX_RECORDS + float(np.max(np.abs(public), initial=0.0))
    return cover_roundings(delta_y + 2.0 * u * bound, 4)


def _select(src, Wx: np.ndarray, Wh: np.ndarray, epsilon: float, delta: float, delta_y: float) -> int:
    """The exponential mechanism on |fl(ŷ − c)|, c = W h public, at its charged sensitivity (module docstring)."""
    return src.exponential(np.abs(Wx - Wh), epsilon, score_sensitivity(delta, delta_y, Wh))


def _update(logh: np.ndarray, h: np.ndarray, q: np.ndarray, m: float, N: float) -> tuple[np.ndarray, np.ndarray]:
    """One multiplicative-weights step, in log space so that no weight overflows or underflows to zero."""
    logh = logh + q * ((m - q @ h) / (2.0 * N))
    logh -= log_sum_exp(logh) - np.log(N)  # renormalise to total N
    return logh, np.exp(logh)
