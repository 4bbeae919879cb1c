"""DualQuery: synthetic records from a zero-sum game between a private query player and a data player.

Gaboardi, Gallego Arias, Hsu, Roth & Wu, *Dual Query: Practical Private Query Release for High Dimensional Data*
(ICML 2014). Input: counts x on a product domain n₁ × … × n_d (a dense array) or records (a pandas DataFrame)
with a :class:`mmopt.records.Domain`. Workload: the counting queries of the marginals 𝓜 (every cell of every
attribute set in ``marginals``, default all 2-way) and their negations (a cell's complement), |Q| queries.

Algorithm (budget ε; every draw through ``resolve_noise``):

0. Count (ε_c = γε, γ = ``count_ratio`` = 0.05): ñ = n + Lap(1/ε_c); m = max(1, ⌊ñ⌋) is public from here on.
   The paper normalises answers by the record count n and treats n as public (neighbours replace a record);
   under this library's add/remove relation n is private, so it is estimated, and m takes n's place below.
1. T rounds (T = ``rounds``; s = ``samples``). The query player keeps the multiplicative-weights distribution

       Q_t(q) ∝ exp(η·u_t(q)),   u_t(q) = Σ_{j<t} (q(x)/m − q(r_j)),

   over Q, where q(x) is the count of records satisfying q and q(r_j) ∈ {0, 1} its value on the synthetic
   record r_j: queries that the synthetic records under-count gain weight (Q₁ is uniform). It draws s queries
   from Q_t, each through ``Noise.exponential_monotone`` (``noise="opendp"``: OpenDP's Gumbel noisy max on a
   monotonic L∞ metric, exactly this softmax). The data player best-responds with the record r_t maximising
   Σ_i q_i(r) over the sampled queries, by enumerating the domain (the paper uses an integer program; here
   N ≤ ``MAX_CELLS`` = 10⁶ cells, refused above); ties are broken uniformly at random (``Noise.gumbel_max``,
   data-independent given the sample).
2. Output: the T records r_1..r_T; the estimate is their histogram scaled to max(ñ, 0)/T.

Privacy (half the pure-ε bound ε = ηsT(T − 1)/n that Private-PGM's reimplementation reports for the paper's
algorithm, with n → m, because the scores are monotone; the paper also gives an (ε, δ) form by advanced
composition as we recall it, not checked against its text here and not used). With the synthetic records r_j
held fixed, u_t(q) depends on x only through t·q(x)/m. Adding a record raises each count q(x) by 0 or 1 (a cell's
count when the record is in it, its negation's n − q(x) when it is not) and removing one lowers each by 0 or 1,
so between neighbours every u_t(q) moves by at most Δ_t = t/m (0-based round t) **and all of them the same way**.
A draw from Q_t is then the *monotone* exponential mechanism with score u_t, sensitivity Δ_t and ε_t = ηΔ_t =
ηt/m (logits ε_t u_t/Δ_t = η u_t): numerator and normaliser move together, so the choice is ε_t-DP, not only
2ε_t-DP as the general exponential mechanism's bound (McSherry & Talwar 2007) would charge it (as this module
did until 2026-12: its η was half this one). r_t is post-processing of the draws. By adaptive sequential composition
the s draws of T rounds cost Σ_t s·ηt/m = ηsT(T − 1)/(2m).

The scores in float64 (:func:`scores`). With H_t(q) = Σ_{j<t} q(r_j) (an integer ≤ t), u_t(q) = I_t(q)/m with
the integer I_t(q) = t·q(x) − m·H_t(q) (m is a whole number). Each score handed to the sampler is the correctly
rounded fl(I_t(q)/m): one IEEE division of two integers exact in float64 when t·max(q(x), m) < 2⁵³, else Python's
correctly rounded integer division — never a sum of rounded terms (accumulating fl(q(x)/m) over the rounds moved
a score by 1 + 3·10⁻⁵ of Δ_t between neighbours at 2³² records; a helper's audit). Then
|fl(a) − a| ≤ u|a| (u = 2⁻⁵³), and |I_t(q)/m| = |t·q(x)/m − H_t(q)| ≤ t·max(N/m, 1) for every histogram of at most
N = MAX_RECORDS records (the release domain, :mod:`mmopt.adaptive._finish`), so between neighbours

    |fl(u_t(q)) − fl(u'_t(q))| ≤ t/m + 2u·t·max(N/m, 1) = Δ_t·κ_m,   κ_m = 1 + 2u·max(N, m)   (:func:`score_charge`),

and fl is non-decreasing, so the computed scores still all move the same way. Each draw is made with sensitivity
Δ_t·κ_m (rounded upwards) and ε_t = η·Δ_t·κ_m: the same logits η·u_t, and Σ ε_t = κ_m·ηsT(T − 1)/(2m) (κ_m − 1 ≤
9.5·10⁻⁷ for m ≤ N). Setting this to ε_q = ε − ε_c gives

    η = 2·ε_q·m / (κ_m·s·T·(T − 1)),   T ≥ 2   (times 1 − 4·2⁻⁵² twice, so float sums never overspend),

and the whole output is ε-DP. η is then capped at 8·√(ln|Q|/T), eight times the rate that minimises the worst-case
regret bound below for T rounds (a heuristic: of caps 1 … 64 times that rate, 8 had the lowest or near-lowest
marginal error at ε = 10⁷ on three random tables of 24, 60 and 360 cells, T = 20 … 1,000). Past it (a large ε, or
T fixed or clipped at 1,000) a faster rate only makes the weights overshoot: the error *grew* with ε, 3.5 at
ε = 10⁵ and 105 at 10⁷ on the 24-cell table (a helper's audit; 4.3 and 4.3 capped). A capped η spends less than
ε_q, which is still ε-DP; the ledger is charged the ε asked for (a charge that moved with the noisy count m
would be data-dependent), and ``details["eta_budget"]`` keeps the rate the budget allowed. When ``rounds`` is None, T
balances the two terms of the multiplicative-weights regret bound η + ln|Q|/(ηT) under this η (C = ε_q m/s, η ≈
2C/T²): T = round((8C²/ln|Q|)^(1/3)), clipped to [2, 1000] — a heuristic of this module, not the paper's parameter
choice. Counts must be whole numbers; for records, out-of-domain rows are dropped (:mod:`mmopt.records.domain`), so
neighbours still differ by at most one record.
"""

from __future__ import annotations

import math

import numpy as np

from mmopt._base import guards as g
from mmopt._base import validation as v
from mmopt.adaptive._common import AdaptiveResult, check_epsilon, check_fraction, laplace_scale
from mmopt.adaptive._finish import check_release_histogram, finish, noise_source
from mmopt.adaptive._marginals import by_index, check_marginals, domain_sum
from mmopt.adaptive.privbayes import _check_data
from mmopt.dense.exact_answers import MAX_RECORDS, UNIT_ROUNDOFF, cover_roundings

__all__ = ["MAX_CELLS", "dual_query", "score_charge", "scores"]

MAX_CELLS = 10**6  # the data player enumerates the domain every round
MAX_DEFAULT_ROUNDS = 1000
_CAP = 8.0  # × the worst-case optimum √(ln|Q|/T): measured best of 1…64 on three tables (module docstring)
_SAFE = 1.0 - 4.0 * np.finfo(float).eps  # η rounded down a few ulps: float sums never overspend
_CHUNK = 1024  # uniform tie-breaks draw a chunk, then a cell in it: two small draws, never one of size N


def score_charge(m: int) -> float:
    """κ_m = 1 + 2u·max(MAX_RECORDS, m), rounded upwards: the computed scores' sensitivity is Δ_t·κ_m (module
    docstring).

    >>> 0 < score_charge(1000) - 1 < 1e-6
    True
    """
    return cover_roundings(1.0 + 2.0 * UNIT_ROUNDOFF * max(float(MAX_RECORDS), float(m)), 2)


def scores(answers: np.ndarray, hits: np.ndarray, t: int, m: int) -> np.ndarray:
    """u_t(q) = fl((t·q(x) − m·H_t(q))/m), each correctly rounded (module docstring): ``answers`` the whole
    counts q(x), ``hits`` the integer H_t(q), ``m`` the whole public count.

    >>> scores(np.array([5.0, 0.0]), np.array([1, 2]), 3, 7).tolist() == [15 / 7 - 1, -2.0]
    True
    """
    top = float(np.max(answers, initial=0.0))
    if t * max(top, float(m)) < 2.0**53:  # t·q(x), m·H (H ≤ t) and their difference: integers below 2⁵³, exact
        return (t * answers - float(m) * hits) / float(m)  # one IEEE division: correctly rounded
    return np.array([(t * int(a) - m * int(h)) / m for a, h in zip(answers.tolist(), hits.tolist(), strict=True)])


class _Layout:
    """Query indices: the cells of each marginal (row-major, marginals in order), then their negations."""

    def __init__(self, Ms, shape):
        self.Ms, self.shape = Ms, shape
        sizes = [math.prod(shape[a] for a in M) for M in Ms]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.positive = int(self.offsets[-1])

    def indicator(self, record) -> np.ndarray:
        """q(r) for every query q (1 for the record's cell of each marginal, its complement for negations)."""
        hit = np.zeros(self.positive)
        for k, M in enumerate(self.Ms):
            hit[self.offsets[k] + np.ravel_multi_index(tuple(record[a] for a in M), [self.shape[a] for a in M])] = 1
        return np.concatenate([hit, 1.0 - hit])

    def score_tables(self, picks) -> tuple[float, dict]:
        """(constant, {M: table}) with Σ_i q_i(r) = constant + Σ_M table_M[π_M(r)] for the picked queries."""
        tables = {M: np.zeros(int(self.offsets[k + 1] - self.offsets[k])) for k, M in enumerate(self.Ms)}
        const = 0.0
        for p in picks:
            sign = 1.0
            if p >= self.positive:  # a negation: 1 − [r in the cell]
                p, sign, const = p - self.positive, -1.0, const + 1.0
            k = int(np.searchsorted(self.offsets, p, side="right")) - 1
            tables[self.Ms[k]][p - self.offsets[k]] += sign
        return const, {M: t.reshape([self.shape[a] for a in M]) for M, t in tables.items()}


def _uniform(k: int, src) -> int:
    """A uniform index in range(k): a chunk with probability ∝ its size, then a cell of it (two Gibbs draws)."""
    if k == 1:
        return 0
    sizes = np.minimum(_CHUNK, k - _CHUNK * np.arange(-(-k // _CHUNK)))
    c = src.gumbel_max(np.log(sizes)) if sizes.size > 1 else 0
    return c * _CHUNK + src.gumbel_max(np.zeros(int(sizes[c])))


def best_response(layout: _Layout, picks, src) -> tuple[int, ...]:
    """argmax_r Σ_i q_i(r) over the domain (enumerated), ties uniformly at random."""
    const, tables = layout.score_tables(picks)
    S = domain_sum(tables, layout.shape).ravel()
    ties = np.flatnonzero(S >= S.max() - 0.5)  # integer scores: exact
    return tuple(int(i) for i in np.unravel_index(ties[_uniform(ties.size, src)], layout.shape))


def default_rounds(eps_q: float, m: float, samples: int, queries: int) -> int:
    """T = round((8C²/ln|Q|)^(1/3)), C = ε_q m/s, clipped to [2, 1000] (module docstring; a heuristic)."""
    C = eps_q * m / samples
    T = round((8.0 * C * C / math.log(queries)) ** (1.0 / 3.0))
    return int(min(max(T, 2), MAX_DEFAULT_ROUNDS))


def dual_query(data, epsilon: float, *, domain=None, marginals=None, samples: int = 50, rounds: int | None = None,
               count_ratio: float = 0.05, noise="numpy", rng=None) -> AdaptiveResult:
    """Run DualQuery (module docstring: algorithm, budget split, privacy argument).

    Parameters
    ----------
    data : array_like with d ≥ 2 axes, or pandas.DataFrame
        Whole non-negative counts, one axis per attribute; or records, with ``domain``.
    epsilon : float
        Total ε > 0 (add/remove one record).
    domain : mmopt.records.Domain or None
        The public schema of ``data`` when it is a table of records.
    marginals : tuple of tuples of int (or of attribute names, with ``domain``), or None
        The attribute sets of the workload's counting queries (each sorted; duplicates dropped); default every
        2-way set.
    samples : int >= 1, default 50
        s, the queries drawn from the query player's distribution per round (s and η trade off one for one in
        the privacy cost; 50 is Private-PGM's DualQuery example's value, not a value from the paper;
        ``benchmarks/bench_adaptive_marginals.py`` compares s = 5).
    rounds : int >= 2 or None
        T, the number of synthetic records; None: the regret-balancing choice of :func:`default_rounds`.
    count_ratio : float in (0, 1), default 0.05
        γ, the share of ε spent on the record count.
    noise : {"numpy", "opendp"} or Noise
        Where every sample comes from (seeded numpy for simulation, OpenDP for release).
    rng : numpy.random.Generator, int or None
        Seed for ``noise="numpy"``.

    Returns
    -------
    AdaptiveResult
        ``estimate``: the records' histogram times max(ñ, 0)/T, shape (n₁, …, n_d). ``budget``: "count",
        "queries". ``details``: "records" (T × d cell indices), "sampled" (T × s query indices: cell j of
        marginal k is ``offsets[k] + j``, its negation that plus ``positive``), "offsets", "positive",
        "marginals", "eta" (the rate used), "eta_budget" (the rate ε allowed; η = min(it, 8√(ln|Q|/T))), "rounds",
        "samples", "noisy_total", "m".

    Examples
    --------
    >>> x = np.zeros((2, 2)); x[1, 1] = 500
    >>> r = dual_query(x, 50.0, rounds=5, rng=0)
    >>> r.details["records"][-1], r.details["rounds"], round(sum(r.budget.values()), 12)
    ((1, 1), 5, 50.0)
    """
    caller = "dual_query"
    eps = check_epsilon(epsilon, caller)
    s = v.check_int(samples, name="samples", caller=caller, low=1)
    gam = check_fraction(count_ratio, "count_ratio", caller)
    if rounds is not None:
        rounds = v.check_int(rounds, name="rounds", caller=caller, low=2)
    shape, marg = _check_data(data, domain, caller)
    N = math.prod(shape)
    if N > MAX_CELLS:
        raise ValueError(f"{caller}: the domain has {N:,} cells, more than {MAX_CELLS:,}; the data player "
                         "enumerates the domain every round (the paper solves an integer program instead). Use "
                         "fewer or coarser attributes.")
    Ms = check_marginals(by_index(marginals, domain, caller), len(shape), (2,), caller)
    layout = _Layout(Ms, shape)
    Q = 2 * layout.positive
    round_ops = g.ITERATION_OPS + (len(Ms) + 2) * N + 4 * s * Q
    if rounds is not None:
        g.check_work(rounds, name="rounds", caller=caller, per_item=round_ops, item="rounds", low=2,
                     remedy="Use fewer rounds, fewer marginals or a smaller domain.")
    src = noise_source(noise, rng, caller)
    eps_c = gam * eps
    eps_q = eps - eps_c
    laplace_scale(1.0, eps_c, "the record count", caller)

    marg.prefetch([(), *Ms])
    n = float(np.asarray(marg(())).sum())
    check_release_histogram(src, n, caller, "data")  # whole counts (_check_data): the total decides
    counts = np.concatenate([np.asarray(marg(M), dtype=np.float64).ravel() for M in Ms])
    n_noisy = float(src.add_laplace(n, 1.0 / eps_c))
    m_int = max(1, math.floor(n_noisy))  # whole: the scores' exact numerators (module docstring)
    m = float(m_int)
    T = default_rounds(eps_q, m, s, Q) if rounds is None else rounds
    kappa = score_charge(m_int)
    # the monotone charge, at the computed scores' sensitivity κ_m·t/m (module docstring)
    eta_budget = 2.0 * eps_q * m / (s * T * (T - 1)) / kappa * _SAFE * _SAFE
    eta = min(eta_budget, _CAP * math.sqrt(math.log(Q) / T))  # past it more budget only hurts (module docstring)
    answers = np.concatenate([counts, n - counts])  # q(x): whole counts, exact (sensitivity 1 each)
    hits = np.zeros(Q, dtype=np.int64)  # H_t(q)
    records = []
    sampled = np.empty((T, s), dtype=np.int64)
    for t in range(T):
        if t == 0:  # Q₁ is uniform: data-independent, free
            picks = [src.exponential(np.zeros(Q), 1.0, 1.0) for _ in range(s)]
        else:
            u = scores(answers, hits, t, m_int)  # a new array: a Noise may keep the scores it was given
            delta_t = cover_roundings(t / m * kappa, 2)
            picks = [src.exponential_monotone(u, eta * delta_t, delta_t) for _ in range(s)]
        sampled[t] = picks
        r = best_response(layout, picks, src)
        records.append(r)
        hits += layout.indicator(r).astype(np.int64)
    hist = np.zeros(shape)
    for r in records:
        hist[r] += 1.0
    estimate = hist * (max(n_noisy, 0.0) / T)
    details = {"records": tuple(records), "sampled": sampled, "offsets": layout.offsets, "positive": layout.positive,
               "marginals": Ms, "eta": eta, "eta_budget": eta_budget, "rounds": T, "samples": s,
               "noisy_total": n_noisy, "m": m, "score_charge": kappa}
    return finish("dual_query", estimate, eps, {"count": eps_c, "queries": eps_q}, details, src)
