"""The Laplace mechanism L(W, x) = W x + (Δ_W/ε)·b̃ (Li et al., PODS 2010, Prop. 2) for a workload of any family.

Notation: see README. The baseline every strategy is measured against: W's own answers, each with noise scaled to
W's largest column norm Δ_W (L1 for Laplace noise, L2 for Gaussian). :func:`mmopt.mechanism.laplace_mechanism` needs
W as a matrix; here a product or union of products (``mmopt.workload.kron``, marginals past 4,096 cells) answers by
its factors (:func:`mmopt.structured.mechanism.answer`) and a stream workload (``mmopt.toeplitz.prefix(n)`` /
``all_range(n)``) by prefix sums, with Δ_W from the factors' column norms, which are counts for the closed-form
families: prefix(n)'s column j lies in n − j sums, all_range(n)'s in (j + 1)(n − j) ranges, all_predicate(n)'s in
2ⁿ⁻¹ predicates. Nothing N×N is formed. **Simulation only** (numpy noise), as the dense function.
"""

from __future__ import annotations

import functools

import numpy as np

from mmopt._base import validation as v
from mmopt.structured import _checks as ck
from mmopt.structured.workloads import ImplicitWorkload


def column_norms(factor, norm: str) -> np.ndarray:
    """‖W[:, j]‖ (L1 or L2) of a one-attribute workload, from its family's counts or its matrix.

    >>> import mmopt
    >>> column_norms(mmopt.workload.all_range(4), "l1").tolist(), column_norms(mmopt.workload.prefix(4), "l2").tolist()
    ([4.0, 6.0, 6.0, 4.0], [2.0, 1.7320508075688772, 1.4142135623730951, 1.0])
    """
    n, family = factor.domain_size, factor.family if factor.matrix is None else "matrix"
    j = np.arange(n, dtype=float)
    counts = {"identity": lambda: np.ones(n), "total": lambda: np.ones(n), "prefix": lambda: n - j,
              "all_range": lambda: (j + 1) * (n - j), "all_predicate": lambda: np.full(n, 2.0 ** (n - 1))}
    if family in counts:  # 0/1 rows: the L1 norm is the count, the L2 norm its root
        c = counts[family]()
        return c if norm == "l1" else np.sqrt(c)
    M = factor.explicit_matrix()
    return np.abs(M).sum(axis=0) if norm == "l1" else np.sqrt(np.einsum("ij,ij->j", M, M))


def implicit_sensitivity(workload: ImplicitWorkload, norm: str) -> float:
    """max_j ‖W[:, j]‖ of a union of weighted products, over the N cells: Σ_t |w_t|·⊗ᵢ c_ti (L1), or the root of
    Σ_t w_t²·⊗ᵢ c_ti² (L2). Exact to rounding; O(N) memory, as x itself."""
    p = 1 if norm == "l1" else 2
    total = np.zeros(workload.shape)
    for t in workload.terms:
        cols = [column_norms(f, norm) ** p for f in t.factors]
        total += abs(t.weight) ** p * functools.reduce(np.multiply.outer, cols)
    return float(total.max() ** (1.0 / p))


def stream_sensitivity(kind: str, n: int, norm: str) -> float:
    """Δ of prefix sums (column 0 is in all n sums) or all ranges (the middle cell is in ⌈n/2⌉·⌊n/2 + 1⌋ ranges)."""
    count = float(n) if kind == "prefix" else float(max((j + 1) * (n - j) for j in ((n - 1) // 2, n // 2)))
    return count if norm == "l1" else float(np.sqrt(count))


def stream_answers(kind: str, x: np.ndarray, caller: str) -> np.ndarray:
    """W x of prefix sums, or of all ranges in np.triu_indices order (as the stream release answers them)."""
    from mmopt.toeplitz.release import _all_ranges
    if kind == "prefix":
        return np.cumsum(x)
    n = x.size
    ck.check_allocation(n * (n + 1) // 2, what=f"the {ck.fmt_int(n * (n + 1) // 2)} answers of all_range({n:,})",
                        caller=caller, limit=ck.MAX_VECTOR_ENTRIES)
    return _all_ranges(np.concatenate([[0.0], np.cumsum(x)]))


def laplace_mechanism(workload, x, privacy, *, rng=None, size: int | None = None):
    """Simulate L(W, x) = W x + noise at W's sensitivity for an implicit or stream workload (module docstring).

    Returns a :class:`mmopt.mechanism.MechanismOutput` as the dense function does (``answers`` and
    ``measurements`` W x + z, no estimate); ``shape`` is the product domain's.
    """
    from mmopt._base.opendp import calibrated_scale
    from mmopt.dense._error_common import check_privacy
    from mmopt.dense._mechanism_inputs import check_size, noisy
    from mmopt.mechanism import MechanismOutput
    from mmopt.structured.mechanism import answer
    from mmopt.toeplitz.error import StreamWorkload
    caller = "laplace_mechanism"
    check_privacy(privacy, caller, optional=False)  # a mechanism needs a real budget
    gen = v.check_rng(rng, name="rng", caller=caller)
    norm = privacy.sensitivity_norm
    if isinstance(workload, StreamWorkload):
        x = v.check_vector(x, name="x", caller=caller)
        if x.size != workload.n:
            raise ValueError(f"The 'x' parameter of {caller} must hold one count per cell of '{workload.name}': "
                             f"{workload.n:,}. Got {x.size:,}.")
        clean, sens, shape = stream_answers(workload.kind, x, caller), stream_sensitivity(
            workload.kind, workload.n, norm), None
    else:
        clean = answer(workload, ck.check_data(x, workload.shape, caller=caller))
        sens, shape = implicit_sensitivity(workload, norm), tuple(workload.shape)
    draws = check_size(size, (clean.size,), caller)
    scale = calibrated_scale(privacy, sens, caller)
    y = noisy(clean, privacy.noise, scale, gen, draws, caller)
    return MechanismOutput(y, None, y, scale, privacy.noise, privacy, "simulation", sens, shape=shape)
