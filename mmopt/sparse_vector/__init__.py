"""The sparse vector technique (SVT): answer "is q_i(D) ≥ T_i?" for many queries, pay only for the positives.

Sources: the lecture notes on the sparse vector technique (Machanavajjhala, CompSci 590.03), and M. Lyu,
D. Su, N. Li, *Understanding the Sparse Vector Technique for Differential Privacy*, PVLDB 10(6), 2017.

Notation: query values q_i = q_i(D), each of sensitivity Δ; thresholds T_i (one scalar T or one per query);
at most c positive answers; budget ε = ε₁ + ε₂ (+ ε₃ for numeric answers).

Algorithms (Lyu et al.'s Alg. 1, and Alg. 7 for numeric answers)::

    ρ ~ Lap(Δ/ε₁)                                  # once; not redrawn after a positive
    for each query i:   ν_i ~ Lap(2cΔ/ε₂)           # Lap(cΔ/ε₂) if the queries are monotone
        if q_i + ν_i ≥ T_i + ρ:  answer ⊤           # numeric_sparse: answer q_i + η_i, η_i ~ Lap(cΔ/ε₃)
                                 stop after the c-th ⊤
        else:                    answer ⊥

- :func:`above_threshold`: c = 1, stops at the first ⊤ (ε-DP).
- :func:`sparse_vector`: at most c ⊤ (ε-DP, ε = ε₁ + ε₂).
- :func:`numeric_sparse`: the positives are released as q_i + η_i with FRESH noise from a separate share
  ε₃ (a Laplace mechanism on ≤ c answers, (ε₃/c)-DP each; ε = ε₁ + ε₂ + ε₃ by composition).

Monotone queries (``monotone=True``): for every pair of neighbours all q_i move in the same direction (e.g.
counts under adding or removing one person). Then ν_i ~ Lap(cΔ/ε₂) suffices (Lyu et al., Alg. 1 and its proof).

Budget split: Var(ν_i − ρ) = 2(Δ/ε₁)² + 2(2cΔ/ε₂)² is smallest at ε₁:ε₂ = 1:(2c)^{2/3} (1:c^{2/3} if
monotone; Lyu et al. §4.2), the default; ``threshold_fraction`` = ε₁/(ε₁ + ε₂) overrides it. The numeric
share ``numeric_fraction`` = ε₃/ε defaults to 1/2, a convention, not an optimum (Dwork & Roth's NumericSparse
gives ε/9 to the answers).

Noise (two paths):

- ``rng=None`` (default): release-grade. Every ρ, ν_i, η_i comes from OpenDP's vetted Laplace measurement
  (``opendp.measurements.make_laplace``) whose scale OpenDP verifies for the shift the proof applies to that
  noise (Δ, 2Δ or Δ, Δ). The SVT composition itself is Lyu et al.'s proof, not OpenDP's; comparisons are in
  float64.
- ``rng=<seed or numpy Generator>``: seeded numpy Laplace, for simulation, research and tests only.
  Floating-point Laplace is attackable (Mironov, CCS 2012): never release its output from real data.

The lecture notes' variant is not private. It releases, for each positive, the value q_i + ν_i that was
compared with the noisy threshold (Lyu et al.'s Alg. 3, from Roth's 2011 notes; here only as the private
function ``mmopt.sparse_vector._core._lecture_numeric_variant``, for the leak test). The notes' proof shifts the
threshold noise ρ by Δ to make the ⊥ answers free, and treats the positive answers separately. But a released value
a_i = q_i + ν_i caps the threshold: ρ ≤ a_i − T_i. Under that cap ρ cannot be shifted, so each ⊥ answer
costs up to Δ/b_ν = ε/(2c) (Lyu et al. §3). Take T = 0, c = 1, m queries at 0 in D and at Δ in D′,
followed by one query at 0 in both. The event "m ⊥, then a value ≤ 0" has probability ratio exactly
e^{mε/2}, unbounded in m. ``tests/test_sparse_vector.py`` checks this and ``docs/sparse_vector.md`` reports
the numbers. ``numeric_sparse`` avoids the leak: its released value uses fresh noise η_i, independent of ρ.

Accuracy (the notes' theorem, generalised to the scales used):
:meth:`SparseVectorResult.accuracy_alpha` gives the α for which, with probability ≥ 1 − β, every ⊤ has
q_i > T_i − α and every ⊥ has q_i < T_i + α.
"""

from __future__ import annotations

from mmopt.sparse_vector._core import SparseVectorResult, run, svt_split

__all__ = ["SparseVectorResult", "above_threshold", "numeric_sparse", "sparse_vector", "svt_split"]


def above_threshold(queries, threshold, epsilon, *, sensitivity=1.0, monotone=False, threshold_fraction=None,
                    rng=None) -> SparseVectorResult:
    """AboveThreshold: ⊥ until the first query whose noisy value reaches the noisy threshold, then ⊤ and stop.

    ε-differentially private: the c = 1 case of :func:`sparse_vector` (Lyu et al., Alg. 1), with ρ ~ Lap(Δ/ε₁),
    ν_i ~ Lap(2Δ/ε₂) (Lap(Δ/ε₂) if monotone) and ε₁:ε₂ = 1:2^{2/3} (1:1 if monotone) by default.

    Parameters
    ----------
    queries : sequence or iterator of float
        The query values q_i(D), each of sensitivity ``sensitivity``. An iterator is read lazily, only up to
        the first ⊤.
    threshold : float or sequence of float
        T, or one T_i per query.
    epsilon : float
        ε > 0, all of it spent (ε₁ + ε₂).
    sensitivity : float
        Δ > 0: an exact sensitivity or a proven upper bound, the same for every query.
    monotone : bool
        True only if, between any two neighbours, all queries change in the same direction.
    threshold_fraction : float in (0, 1), optional
        ε₁/ε. Default: the optimal 1/(1 + 2^{2/3}) (1/2 if monotone).
    rng : None, int, SeedSequence or numpy Generator
        None: OpenDP's release-grade noise. Otherwise seeded numpy noise, for simulation only (attackable
        floating-point Laplace, Mironov 2012).

    Returns
    -------
    SparseVectorResult
        ``answers`` are False (⊥) and at most one True (⊤, the last one).

    Examples
    --------
    >>> res = above_threshold([3, 8, 95, 7], threshold=50, epsilon=1.0, rng=0)
    >>> res.answers, res.n_read, res.halted
    ((False, False, True), 3, True)
    """
    return run("above_threshold", queries, threshold, epsilon, c=1, sensitivity=sensitivity, monotone=monotone,
               threshold_fraction=threshold_fraction, numeric_fraction=None, rng=rng)


def sparse_vector(queries, threshold, epsilon, *, c, sensitivity=1.0, monotone=False, threshold_fraction=None,
                  rng=None) -> SparseVectorResult:
    """Sparse vector (Lyu et al., Alg. 1): ⊤/⊥ answers, stopping after the c-th ⊤. ε-differentially private.

    ρ ~ Lap(Δ/ε₁) once; ν_i ~ Lap(2cΔ/ε₂) per query (Lap(cΔ/ε₂) if monotone); answer ⊤ iff
    q_i + ν_i ≥ T_i + ρ. Default split ε₁:ε₂ = 1:(2c)^{2/3} (1:c^{2/3} if monotone), Lyu et al. §4.2.

    Parameters
    ----------
    queries, threshold, epsilon, sensitivity, monotone, rng
        As in :func:`above_threshold`; an iterator is read only up to the c-th ⊤.
    c : int
        c ≥ 1, the largest number of ⊤ answers.
    threshold_fraction : float in (0, 1), optional
        ε₁/ε, overriding the optimal split (e.g. 1/2 for the lecture notes' equal split).

    Returns
    -------
    SparseVectorResult
        ``answers`` are False (⊥) or True (⊤); ``above`` lists the ⊤ indices.

    Examples
    --------
    >>> res = sparse_vector([1, 90, 2, 85, 70, 3], threshold=40, epsilon=2.0, c=2, rng=1)
    >>> res.answers, res.above, res.halted
    ((False, True, False, True), (1, 3), True)
    >>> round(res.epsilon_threshold / res.epsilon_queries, 4) == round(4 ** (-2 / 3), 4)
    True
    """
    return run("sparse_vector", queries, threshold, epsilon, c=c, sensitivity=sensitivity, monotone=monotone,
               threshold_fraction=threshold_fraction, numeric_fraction=None, rng=rng)


def numeric_sparse(queries, threshold, epsilon, *, c, sensitivity=1.0, monotone=False, numeric_fraction=0.5,
                   threshold_fraction=None, rng=None) -> SparseVectorResult:
    """Numeric sparse vector (Lyu et al., Alg. 7): each positive is answered with q_i + η_i, η_i FRESH.

    The selection is :func:`sparse_vector` with ε₁ + ε₂ = (1 − numeric_fraction)·ε. Each of the ≤ c
    positives is then released by a Laplace mechanism, η_i ~ Lap(cΔ/ε₃) with ε₃ = numeric_fraction·ε,
    independent of the comparison noise ν_i. That noise is never released: releasing q_i + ν_i is the
    lecture notes' non-private variant (module docstring). ε-DP by composition.

    Parameters
    ----------
    queries, threshold, epsilon, c, sensitivity, monotone, threshold_fraction, rng
        As in :func:`sparse_vector` (``threshold_fraction`` splits the selection share ε₁ + ε₂).
    numeric_fraction : float in (0, 1)
        ε₃/ε. Default 1/2, a convention, not an optimum.

    Returns
    -------
    SparseVectorResult
        ``answers`` are None (⊥) or floats (the noisy answers of the positives).

    Examples
    --------
    >>> res = numeric_sparse([1, 900, 2, 700], threshold=400, epsilon=4.0, c=2, rng=2)
    >>> [None if a is None else round(a, -1) for a in res.answers]
    [None, 900.0, None, 700.0]
    >>> [round(e, 3) for e in res.split]   # ε₁ : ε₂ = 1 : 4^{2/3} on the selection half; ε₃ = ε/2
    [0.568, 1.432, 2.0]
    """
    return run("numeric_sparse", queries, threshold, epsilon, c=c, sensitivity=sensitivity, monotone=monotone,
               threshold_fraction=threshold_fraction, numeric_fraction=numeric_fraction, rng=rng, numeric=True)
