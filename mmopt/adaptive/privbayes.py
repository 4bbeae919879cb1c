"""PrivBayes: a private Bayesian network over d attributes, then its joint as synthetic counts.

Zhang, Cormode, Procopiuc, Srivastava & Xiao, *PrivBayes: Private Data Release via Bayesian Networks*
(SIGMOD 2014; TODS 2017). Input: counts x on a product domain n₁ × … × n_d (a dense array, one axis per
attribute) or records (a pandas DataFrame) with a :class:`mmopt.records.Domain`. Neighbours: one record added
or removed (x' = x ± e_i), the library's relation — **not** the paper's replace-one relation with a public n.

Algorithm (budget ε, split as stated; every draw goes through ``resolve_noise``):

0. Count (ε_c = γ·ε, γ = ``count_ratio`` = 0.05): ñ = n + Lap(1/ε_c) (sensitivity 1). m = max(1, ⌊ñ⌋) is then
   public (post-processing) and is the only size the network step's sensitivity uses — the true n never is.
1. Network (ε_N = β(1 − γ)ε, β = 0.3): the paper's GreedyBayes with degree k (``degree``, default 2).
   The first attribute is uniform (data-independent; drawn as an exponential-mechanism choice over equal
   scores). Then, d − 1 times, one exponential-mechanism choice (ε_N/(d − 1) each) over the pairs (X, Π) with X
   not yet chosen and Π a set of min(k, |V|) chosen attributes V, scored by

       h_m(D) = S(D) / max(|D|, m),   S(D) = |D|·I(X; Π) = Σ f(c_{xπ}) − Σ f(c_x) − Σ f(c_π) + f(|D|),

   f(t) = t log t, I the empirical mutual information (nats). When |D| ≥ m, h_m is exactly I; when ñ
   overestimates n the scores shrink by the common factor n/m (it only flattens the choice).
   Sensitivity (proved here, since Lemma 1 of the paper is for replace-one with a public n): adding one
   record at (x, π) changes S by g(c) − g(a) − g(b) + g(|D|) with g(t) = f(t + 1) − f(t) increasing and
   c ≤ a, b ≤ |D| (c, a, b the counts of the record's cell, x and π); as 0 = g(0) ≤ g(c) ≤ g(a), and
   g(b), g(a) ≤ g(|D|), |ΔS| ≤ g(|D|) ≤ log(|D| + 1) + 1. If |D| + 1 ≤ m both scores divide by m:
   |Δh| ≤ (log m + 1)/m. If |D| ≥ m, ΔI = ΔS/(|D| + 1) − I(D)/(|D| + 1) with 0 ≤ I(D) ≤ log|D|, so
   |Δh| ≤ (2 log(|D| + 1) + 1)/(|D| + 1), decreasing in |D| ≥ 1. Both are ≤ Δ_m = (2 log(m + 1) + 1)/m
   (:func:`mi_sensitivity`), a bound for every pair of neighbours whatever their size. Each choice is
   (ε_N/(d − 1))-DP; d − 1 choices compose to ε_N. (The paper's replace-one bound, :func:`lemma1_sensitivity`,
   is (1/n) log n + ((n − 1)/n) log(n/(n − 1)); with the true n it would be a privacy bug here. Δ_m is
   conservative: over all neighbours of 2×2 and 3×2 tables with ≤ 7 records the largest change is 0.29–0.56 Δ_m.)
   In float64 (:func:`mi_score`, :func:`charged_mi_sensitivity`): each f̂(t) = fl(t·loĝ t), with the assumption
   (not a proof: libm's and numpy's log are not correctly rounded) that loĝ is within k = 4 ulp of log (measured:
   within 1 ulp at counts up to 2³², tests) and loĝ 1 = 0, so |f̂(t) − f(t)| ≤ ρ·f(t), ρ = (2k + 1)u(1 + 2u)
   (u = 2⁻⁵³). Each of the four sums is ``math.fsum`` (correctly rounded) and S from them is one more fsum, so with
   T = Σf(c) + Σf(c_x) + Σf(c_π) + f(|D|) ≤ 4|D| log|D| (each sum of counts totalling |D|),
   |Ŝ − S| ≤ (ρ + 3u)·T ≤ 52u·|D| log|D|; max(·, 0) is 1-Lipschitz, and the division rounds by u·ĥ ≤ u·17
   (h ≤ I ≤ log 10⁷). As |D| log|D| / max(|D|, m) ≤ min(1, N/m)·log N for |D| ≤ N = MAX_RECORDS (the release domain,
   :mod:`mmopt.adaptive._finish`), the computed scores move between neighbours by at most
   Δ_m·(1 + 16u) + 2·(52u·min(1, N/m)·log N + 17u) (the first factor: Δ_m's own rounding), rounded upwards, and that
   is the sensitivity each choice is charged (2.5·10⁻⁵ of Δ_m at m = 2³²). Unbounded before (the audit measured no
   excess, but had no proof).
2. Noisy conditionals (ε_C = (1 − β)(1 − γ)ε): with k' = min(k, d − 1), the d − k' marginals of counts on
   {X_i} ∪ Π_i, i = k', …, d − 1 (the first covers the first k' + 1 attributes, whose joint it gives). Each
   has L1 sensitivity 1 under add/remove, so Lap((d − k')/ε_C) per cell makes the d − k' marginals ε_C-DP
   together (sequential composition). The paper works with replace-one neighbours and normalised
   distributions (L1 sensitivity 2/n each; its Algorithm states the scale as 4(d − k)/(n ε₂) as we recall it —
   not checked against the text here); on counts under add/remove the scale is (d − k')/ε_C, used here.
   Negative cells are clamped to 0 and each conditional is normalised (a parent configuration with no mass
   gets the uniform conditional): post-processing.
3. Output (post-processing): the network's joint P (product of the conditionals, formed densely, so the
   domain must have at most 10⁷ cells) times max(ñ, 0): the expected synthetic table, non-negative, summing to
   the noisy total. No sampling is needed for the estimate (sampling records from P would only add noise).

Total ε_c + ε_N + ε_C = ε. Counts must be whole numbers (the sensitivity proof counts records). For records,
out-of-domain rows are dropped (:mod:`mmopt.records.domain`), so neighbours still differ by at most one kept
record. Cost: the network step scores about (d − |V|)·C(|V|, k) candidates per step, each a (k + 1)-way
marginal (cached; O(N) each for a dense array, one pass over the records per step for a DataFrame).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from mmopt._base import validation as v
from mmopt.adaptive._common import MAX_COUNT, AdaptiveResult, check_epsilon, check_fraction, check_total, laplace_scale
from mmopt.adaptive._finish import check_release_histogram, finish, noise_source
from mmopt.dense.exact_answers import MAX_RECORDS, UNIT_ROUNDOFF, cover_roundings

__all__ = ["charged_mi_sensitivity", "lemma1_sensitivity", "mi_sensitivity", "mi_score", "privbayes"]

MAX_CELLS = 10**7  # the estimate is the dense N-cell table


def _sum_f(t) -> float:
    """Σ f(t), f(t) = t log t (f(0) = 0), each term rounded once after the log, summed correctly rounded."""
    t = np.asarray(t, dtype=np.float64).ravel()
    t = t[t > 0]
    return math.fsum((t * np.log(t)).tolist())


def mi_score(joint: np.ndarray, m: float = 1.0) -> float:
    """h_m = S / max(n, m) for the count table ``joint`` of (X, Π) with X on axis 0 (S = n·I, nats).

    With m ≤ n this is the empirical mutual information I(X; Π).

    Examples
    --------
    >>> round(mi_score(np.array([[5.0, 0.0], [0.0, 5.0]])), 6) == round(math.log(2), 6)
    True
    """
    c = np.asarray(joint, dtype=np.float64)
    c2 = c.reshape(c.shape[0], -1)
    n = float(c2.sum())
    if n <= 0:
        return 0.0
    S = math.fsum([_sum_f(c2), -_sum_f(c2.sum(axis=1)), -_sum_f(c2.sum(axis=0)), _sum_f(n)])
    return max(S, 0.0) / max(n, float(m))


def mi_sensitivity(m: float) -> float:
    """Δ_m = (2 log(m + 1) + 1)/m: a bound on |h_m(D) − h_m(D')| for all add/remove neighbours (module docs)."""
    m = v.check_real(m, name="m", caller="mi_sensitivity", low=0.0, low_open=True)
    return (2.0 * math.log(m + 1.0) + 1.0) / m


def charged_mi_sensitivity(m: float) -> float:
    """Δ_m·(1 + 16u) + 2·(52u·min(1, N/m)·log N + 17u), N = MAX_RECORDS, rounded upwards: the computed scores'
    sensitivity (module docstring; it assumes a log within 4 ulp).

    >>> d = charged_mi_sensitivity(2.0**32); 0 < d / mi_sensitivity(2.0**32) - 1 < 3e-5
    True
    """
    m = v.check_real(m, name="m", caller="charged_mi_sensitivity", low=0.0, low_open=True)
    u = UNIT_ROUNDOFF
    rounding = 52.0 * u * min(1.0, MAX_RECORDS / m) * math.log(MAX_RECORDS) + 17.0 * u
    return cover_roundings(mi_sensitivity(m) * (1.0 + 16.0 * u) + 2.0 * rounding, 4)


def lemma1_sensitivity(n: int) -> float:
    """The paper's Lemma 1 (replace-one, n public): (1/n) log n + ((n − 1)/n) log(n/(n − 1)), n ≥ 2."""
    n = v.check_int(n, name="n", caller="lemma1_sensitivity", low=2)
    return math.log(n) / n + (n - 1) / n * math.log(n / (n - 1))


class _Marginals:
    """Cached counts on sorted attribute sets, from a dense array or (one pass per ``prefetch``) from records."""

    def __init__(self, X=None, records=None, domain=None, caller: str = "marginal_counts"):
        self.X, self.records, self.domain, self.cache, self.caller = X, records, domain, {}, caller

    def prefetch(self, sets) -> None:
        todo = sorted({A for A in sets if A not in self.cache})
        if todo and self.X is None:  # one map-reduce over the records for all of a step's candidates
            from mmopt.records import marginal_counts
            got = marginal_counts(self.records, self.domain, todo, caller=self.caller, name="data")
            self.cache.update({A: np.asarray(c, dtype=np.float64) for A, c in got.items()})

    def __call__(self, A: tuple) -> np.ndarray:
        if A not in self.cache:
            if self.X is None:
                self.prefetch([A])
            else:
                self.cache[A] = self.X.sum(axis=tuple(i for i in range(self.X.ndim) if i not in A))
        return self.cache[A]


def _check_data(data, domain, caller: str):
    """(shape, marginal oracle) for a dense count array or records + Domain; refuses before any noise."""
    if domain is not None:
        from mmopt.records.domain import check_domain
        check_domain(domain, caller=caller)  # None is the dense-array form, handled below
        if isinstance(data, np.ndarray | list | tuple):  # the records layer named its own 'records' of marginal_counts
            raise TypeError(f"The 'data' parameter of {caller} is a dense array of counts, and 'domain' is for a table "
                            "of records. Drop domain= (the array's axes are the attributes), or pass the records.")
        eager = hasattr(data, "columns") and type(data).__name__ != "LazyFrame"  # (a LazyFrame resolves its schema)
        missing = [a for a in domain.names if a not in list(data.columns)] if eager else []
        if missing:
            raise ValueError(f"The 'data' parameter of {caller} has no column(s) {missing} of the domain. Its columns "
                             f"are {list(data.columns)!r:.200}.")
        shape = domain.shape
        marg = _Marginals(records=data, domain=domain, caller=caller)
    else:
        if hasattr(data, "columns"):
            raise TypeError(f"The 'data' parameter of {caller} is a table of records: pass domain=Domain(...) "
                            "as well (the public schema).")
        if np.iscomplexobj(data):  # np.asarray(..., float64) dropped the imaginary part with a warning only
            raise TypeError(f"The 'data' parameter of {caller} must hold real counts. Got a complex array.")
        kind = np.asarray(data).dtype.kind
        if kind not in "biuf":  # text such as "1" was read as a count (the 1-D histograms refused it)
            raise TypeError(f"The 'data' parameter of {caller} must be a dense array of counts (one axis per "
                            f"attribute). Got an array of dtype {np.asarray(data).dtype} instead.")
        try:
            X = np.asarray(data, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"The 'data' parameter of {caller} must be a dense array of counts (one axis per "
                            f"attribute). Got {type(data).__name__}.") from None
        if X.ndim < 2 or X.size == 0:
            raise ValueError(f"The 'data' parameter of {caller} must be a count array with at least 2 axes (one "
                             f"per attribute) and at least one cell. Got shape {X.shape}.")
        if not np.all(np.isfinite(X)) or np.any(X < 0) or np.any(X != np.round(X)):
            raise ValueError(f"The 'data' parameter of {caller} must hold whole, non-negative, finite counts "
                             "(the sensitivity proof counts records).")
        if X.max() > MAX_COUNT:  # the marginal fit's step size overflowed and its line search never ended
            raise ValueError(f"The 'data' parameter of {caller} must hold counts <= {MAX_COUNT:g} (their squares "
                             f"must stay finite). Got a largest count of {float(X.max()):g}; rescale the data.")
        check_total(float(X.sum()), "data", caller)
        shape = X.shape
        marg = _Marginals(X=X)
    if len(shape) < 2:
        raise ValueError(f"The 'domain' parameter of {caller} must have at least 2 attributes. Got {len(shape)}.")
    N = math.prod(shape)
    if N > MAX_CELLS:
        raise ValueError(f"{caller}: the domain has {N} cells, more than {MAX_CELLS}; the estimate is the dense "
                         "synthetic table. Use fewer or coarser attributes.")
    return tuple(shape), marg


def _oriented(marg, x: int, parents: tuple) -> np.ndarray:
    """Counts on (x, *parents) with axes in that order (the oracle returns sorted axes)."""
    A = tuple(sorted((x, *parents)))
    return np.moveaxis(marg(A), [A.index(a) for a in (x, *parents)], range(len(A)))


def _network(marg, d: int, k: int, m: float, eps_step: float, src) -> tuple:
    """GreedyBayes: the order and each attribute's parents (step 1 of the module docs)."""
    first = src.exponential(np.zeros(d), 1.0, 1.0)  # uniform: every score equal
    order, parents = [first], {first: ()}
    sens = charged_mi_sensitivity(m)
    while len(order) < d:
        size = min(k, len(order))
        cands = [(x, P) for x in range(d) if x not in parents
                 for P in itertools.combinations(sorted(order), size)]
        marg.prefetch([tuple(sorted((x, *P))) for x, P in cands])
        scores = np.array([mi_score(_oriented(marg, x, P), m) for x, P in cands])
        x, P = cands[src.exponential(scores, eps_step, sens)]
        order.append(x)
        parents[x] = P
    return tuple(order), parents


def _normalise(t: np.ndarray, axis) -> np.ndarray:
    """Conditional of the clamped table along ``axis`` (uniform where the parents have no mass)."""
    t = np.maximum(t, 0.0)
    tot = t.sum(axis=axis, keepdims=True)
    size = math.prod(t.shape[a] for a in np.atleast_1d(axis))
    return np.where(tot > 0, t / np.where(tot > 0, tot, 1.0), 1.0 / size)


def _broadcast(table: np.ndarray, axes: tuple, d: int) -> np.ndarray:
    """``table`` (axes in the order ``axes``) as a d-dimensional array with singleton axes elsewhere."""
    srt = tuple(sorted(axes))
    t = np.moveaxis(table, range(len(axes)), [srt.index(a) for a in axes])
    return t.reshape([table.shape[axes.index(i)] if i in axes else 1 for i in range(d)])


def privbayes(data, epsilon: float, *, domain=None, degree: int = 2, beta: float = 0.3,
              count_ratio: float = 0.05, noise="numpy", rng=None) -> AdaptiveResult:
    """Run PrivBayes (module docstring: algorithm, budget split, privacy argument).

    Parameters
    ----------
    data : array_like with d ≥ 2 axes, or pandas.DataFrame
        Whole non-negative counts, one axis per attribute; or records, with ``domain``.
    epsilon : float
        Total ε > 0 (add/remove one record).
    domain : mmopt.records.Domain or None
        The public schema of ``data`` when it is a table of records.
    degree : int >= 1, default 2
        k, the maximum number of parents.
    beta, count_ratio : float in (0, 1)
        β (network share of the non-count budget) and γ (share of ε for the noisy total).
    noise : {"numpy", "opendp"} or Noise
        Where every sample comes from (seeded numpy for simulation, OpenDP for release).
    rng : numpy.random.Generator, int or None
        Seed for ``noise="numpy"``.

    Returns
    -------
    AdaptiveResult
        ``estimate``: the synthetic table, shape (n₁, …, n_d). ``budget``: "count", "network", "conditionals".
        ``details``: "order", "parents" ({attribute: parent tuple}), "conditionals" ({attribute: array with
        axes ``(attribute, *parents)``} for attributes after the first k'; "joint" for the first k' + 1, axes
        "head"),
        "noisy_total", "m", "mi_sensitivity", "noise_scale".

    Examples
    --------
    >>> x = np.zeros((2, 2, 2)); x[0, 0, 0] = x[1, 1, 1] = 50
    >>> r = privbayes(x, 1e9, rng=0)
    >>> bool(np.allclose(r.estimate, x, atol=1e-3)), round(sum(r.budget.values()), 12)
    (True, 1000000000.0)
    """
    caller = "privbayes"
    eps = check_epsilon(epsilon, caller)
    k = v.check_int(degree, name="degree", caller=caller, low=1)
    b = check_fraction(beta, "beta", caller)
    g = check_fraction(count_ratio, "count_ratio", caller)
    shape, marg = _check_data(data, domain, caller)
    src = noise_source(noise, rng, caller)
    d = len(shape)
    kk = min(k, d - 1)
    # degree ≥ d − 1: the first joint holds every attribute, so the network would choose only its axes' order
    # (every order gives one joint); its share β(1 − γ)ε went to nothing (an auditor's probe) and now goes to the
    # joint
    full = kk == d - 1
    eps_c, eps_n = g * eps, 0.0 if full else b * (1.0 - g) * eps
    eps_cond = eps - eps_c - eps_n
    scale = laplace_scale(float(d - kk), eps_cond, "the conditionals", caller)
    laplace_scale(1.0, eps_c, "the total", caller)
    if not full:
        laplace_scale(charged_mi_sensitivity(1.0), eps_n / (d - 1), "a network choice", caller)

    n = float(marg(()).sum())
    check_release_histogram(src, n, caller, "data")  # whole counts (_check_data): the total decides
    n_noisy = float(src.add_laplace(n, 1.0 / eps_c))
    m = float(max(1, math.floor(n_noisy)))
    order, parents = ((tuple(range(d)), {x: tuple(range(x)) for x in range(d)}) if full else
                      _network(marg, d, kk, m, eps_n / (d - 1), src))

    marg.prefetch([tuple(sorted(order[:kk + 1]))] + [tuple(sorted((x, *parents[x]))) for x in order[kk + 1:]])
    head = (order[kk], *order[:kk])  # the first k' + 1 attributes, axes of their noisy joint
    joint = _normalise(src.add_laplace(_oriented(marg, head[0], head[1:]), scale), tuple(range(kk + 1)))
    P = _broadcast(joint, head, d)
    conds = {}
    for x in order[kk + 1:]:
        c = _normalise(src.add_laplace(_oriented(marg, x, parents[x]), scale), 0)
        conds[x] = c
        P = P * _broadcast(c, (x, *parents[x]), d)
    estimate = max(n_noisy, 0.0) * P
    details = {"order": order, "parents": parents, "conditionals": conds, "joint": joint, "head": head,
               "noisy_total": n_noisy, "m": m, "mi_sensitivity": charged_mi_sensitivity(m), "noise_scale": scale,
               "degree": kk}
    return finish("privbayes", estimate, eps, {"count": eps_c, "network": eps_n, "conditionals": eps_cond},
                  details, src)
