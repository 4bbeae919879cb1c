"""Workloads W (m×n) of linear counting queries, held as their Gram matrix G = WᵀW and query count m.

Notation: see README. Error depends on W only through G (and on m for per-query figures), so a
:class:`Workload` *is* a Gram matrix plus m; the explicit W is optional. Internally the Gram is stored
per query, G/m, with m an exact Python int: all 2ⁿ−1 predicate queries have G = 2ⁿ⁻²(I+J), which
overflows float64 past n≈1000, while G/m ≈ (I+J)/4 stays finite for every n.

Query families with a closed form (``identity``, ``total``, ``prefix``, ``all_range``,
``all_predicate``) keep their family name, so that :mod:`mmopt.error` computes per-query variances and
the maximum over all queries from the error profile alone, never materialising W. Every constructor
refuses, before allocating, a Gram or W beyond :data:`mmopt._base.validation.MAX_ALLOCATION_ENTRIES`.

The :class:`Workload` type itself (its invariants and derived quantities) lives in
:mod:`mmopt.dense._workload_type`; this module holds its constructors and re-exports it.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np

from mmopt._base import validation as v
from mmopt._base.hints import factor_names
from mmopt.dense import _gram_forms as gf
from mmopt.dense._workload_type import CLOSED_FORMS, FAMILIES, MAX_EXPLICIT_ENTRIES, Workload, not_a_workload

__all__ = ["CLOSED_FORMS", "FAMILIES", "MAX_EXPLICIT_ENTRIES", "Workload", "all_predicate", "all_range", "identity",
           "kron", "marginals", "prefix", "random_range", "stack", "total"]


def _closed(family: str, n, label: str) -> Workload:
    n = v.check_int(n, name="n", caller=family)
    return Workload._make(gf.family_mean_gram(family, n, family), gf.family_count(family, n), f"{label}({n})", None,
                          family)


# -- family constructors -----------------------------------------------------------------------------
def identity(n: int) -> Workload:
    """All n unit counts, W = Iₙ (G = I, m = n)."""
    return _closed("identity", n, "identity")


def total(n: int) -> Workload:
    """The single query summing all cells, W = 1ᵀ (G = J, m = 1)."""
    return _closed("total", n, "total")


def prefix(n: int) -> Workload:
    """The n prefix sums x₁+…+x_k; G_ij = n − max(i, j) + 1 (1-indexed)."""
    return _closed("prefix", n, "prefix")


def all_range(n: int) -> Workload:
    """All n(n+1)/2 interval queries W_R (§6.2); G_ij = min(i, j)·(n − max(i, j) + 1), 1-indexed.

    Examples
    --------
    >>> W = all_range(3)
    >>> W.n_queries, W.gram.tolist()
    (6, [[3.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 3.0]])
    """
    return _closed("all_range", n, "all_range")


def all_predicate(n: int) -> Workload:
    """All 2ⁿ−1 non-empty 0/1 predicate queries W_{0/1} (§6.2); G = 2ⁿ⁻²(I + J).

    Stored per query, G/m = (I + J)/(4(1 − 2⁻ⁿ)), finite for every n; m = 2ⁿ − 1 exactly.
    (The paper counts 2ⁿ queries including the empty one, which adds nothing to G.)
    """
    return _closed("all_predicate", n, "all_predicate")


def random_range(n: int, m: int, *, seed=None) -> Workload:
    """m interval queries [a, b]: two endpoints drawn independently and uniformly, then sorted; reproducible.

    So a range with a < b has probability 2/n² and a single cell 1/n²: not uniform over the n(n+1)/2 ranges
    (``experiments._dpbench_errors.sample_ranges`` samples those uniformly). ``seed``: None, an int >= 0, a
    SeedSequence or a numpy Generator.
    """
    caller = "random_range"
    n = v.check_int(n, name="n", caller=caller)
    m = v.check_int(m, name="m", caller=caller)
    rng = v.check_rng(seed, name="seed", caller=caller)
    v.check_allocation(m * n + n * n, what=f"W ({m}×{n}) and its Gram ({n}×{n})", caller=caller)
    ends = np.sort(rng.integers(0, n, size=(m, 2)), axis=1)
    cells = np.arange(n)
    W = ((cells >= ends[:, :1]) & (cells <= ends[:, 1:])).astype(np.float64)
    return Workload.from_matrix(W, name=f"random_range({n},{m})")


def marginals(shape, k: int) -> Workload:
    """All k-way marginals over a domain of the given shape (cells in C order, n = ∏ shape).

    The marginal on attributes S is W_S = ⊗ᵢ (I if i ∈ S else 1ᵀ), so G_S = ⊗ᵢ (I or J) and
    (G_S)_{c,c'} = 1 iff cells c and c' agree on every attribute of S. Summed over the C(d, k) sets S,
    G_{c,c'} = C(a(c, c'), k) where a counts the attributes on which c and c' agree: one n×n pass per
    attribute, whatever C(d, k) is. m = Σ_S ∏_{i∈S} nᵢ (the k-th elementary symmetric polynomial).
    """
    caller = "marginals"
    dims = v.check_shape(shape, caller=caller)
    k = v.check_int(k, name="k", caller=caller, low=0, high=len(dims))
    n = math.prod(dims)
    v.check_allocation(2 * n * n, what=f"the {n}×{n} Gram matrix of the marginals and one temporary",
                       caller=caller, remedy=" Marginal workloads on large domains will become implicit; for now "
                                             "use a smaller shape.")
    m, G = gf.marginals_mean_gram(dims, k)
    W = None
    if m * n <= MAX_EXPLICIT_ENTRIES:
        rows = []
        for S in itertools.combinations(range(len(dims)), k):
            block = np.ones((1, 1))
            for i, d in enumerate(dims):
                block = np.kron(block, np.eye(d) if i in S else np.ones((1, d)))
            rows.append(block)
        W = np.vstack(rows)
    return Workload._make(G, m, f"marginals({'x'.join(map(str, dims))},k={k})", W,
                          "matrix" if W is not None else "gram")


def kron(first: Workload, second: Workload, *, name: str | None = None) -> Workload:
    """Kronecker product W₁ ⊗ W₂ (queries on a product domain): G = G₁ ⊗ G₂, m = m₁·m₂."""
    caller = "kron"
    for label, w in (("first", first), ("second", second)):
        if not isinstance(w, Workload):
            raise not_a_workload(w, name=label, caller=caller)
    label = (v.check_str(name, name="name", caller=caller) if name is not None
             else factor_names([first.name, second.name]))
    n = first.domain_size * second.domain_size
    v.check_allocation(2 * n * n, what=f"the {n}×{n} Gram matrix of {label} and one temporary", caller=caller,
                       remedy=" Kronecker workloads on large domains will become implicit; for now use smaller "
                              "factors.")
    m = first.n_queries * second.n_queries
    W = None
    if m * n <= MAX_EXPLICIT_ENTRIES and first.knows_rows and second.knows_rows:
        W = np.kron(first.explicit_matrix(), second.explicit_matrix())
    G = np.kron(first.mean_gram, second.mean_gram)
    gf.check_range(G, "the product of the factors' G/m", caller)
    return Workload._make(G, m, label, W, "matrix" if W is not None else "gram")


def weighted_label(names, weights) -> str:
    """The default name of a weighted union, "W1+2*W2": its weights in it (dense stacks and implicit unions alike),
    since two unions of the same parts with other weights are other workloads."""
    return "+".join(n if w == 1 else f"{w:g}*{n}" for n, w in zip(names, weights, strict=True))


def stack(workloads, weights=None, *, name: str | None = None) -> Workload:
    """Weighted union [w₁W₁; w₂W₂; …]: G = Σ wᵢ² Gᵢ, m = Σ mᵢ (queries of all parts, weighted)."""
    caller = "stack"
    try:
        workloads = list(workloads)
    except TypeError:
        workloads = []
    if not workloads or not all(isinstance(w, Workload) for w in workloads):
        raise TypeError(f"The 'workloads' parameter of {caller} must be a non-empty list of Workload objects.")
    n = workloads[0].domain_size
    for k, w in enumerate(workloads[1:], start=1):
        v.check_same_domain(n, w.domain_size, caller=caller, what=("the first workload", f"workload {k}"))
    weights = np.ones(len(workloads)) if weights is None else v.check_vector(
        weights, name="weights", caller=caller, length=len(workloads), meaning="one per workload",
        bools=False)  # as the implicit union refuses them
    with np.errstate(over="ignore", under="ignore"):
        squares = weights * weights
    if not np.all((squares >= gf.TINY) & np.isfinite(squares)):
        raise ValueError(f"The 'weights' parameter of {caller} must be non-zero, with squares within float64 "
                         f"(|w| in [1.5e-154, 1.3e154]). Got {weights.tolist()!r:.80}. Drop a zero-weight workload; "
                         "rescale the others.")
    # the weights in the default name: stack([prefix(4)], weights=[-2]) was labelled prefix(4), error 4× prefix's
    label = v.check_str(name, name="name", caller=caller) if name is not None else weighted_label(
        [w.name for w in workloads], weights.tolist())
    v.check_allocation(2 * n * n, what=f"the {n}×{n} Gram matrix of the union and one temporary", caller=caller)
    m = sum(w.n_queries for w in workloads)
    # Exact rational shares mᵢ/m, so that 2ⁿ-sized parts mix correctly with small ones.
    G = np.zeros((n, n))
    with np.errstate(over="ignore"):
        for w, c2 in zip(workloads, squares, strict=True):
            G += (float(Fraction(w.n_queries, m)) * c2) * w.mean_gram
    gf.check_range(G, "the weighted sum of G/m", caller)
    W = None
    if m * n <= MAX_EXPLICIT_ENTRIES and all(w.knows_rows for w in workloads):
        W = np.vstack([c * w.explicit_matrix() for w, c in zip(workloads, weights, strict=True)])
    return Workload._make(G, m, label, W, "matrix" if W is not None else "gram")

