"""Implicit workloads on product domains: weighted unions of Kronecker products, stored by their factors.

Notation: see README; d attributes of sizes n₁…n_d, N = ∏ nᵢ cells in C order. A :class:`Product` term
is w·(W₁ ⊗ … ⊗ W_d) with small factors Wᵢ (each an :class:`mmopt.workload.Workload` on attribute i); an
:class:`ImplicitWorkload` stacks terms, so its Gram is G = Σ_j w_j² ⊗ᵢ Gᵢ⁽ʲ⁾ and m = Σ_j ∏ᵢ mᵢ⁽ʲ⁾.
Nothing of size N×N (or m×N) is formed unless :meth:`ImplicitWorkload.dense` / :meth:`~ImplicitWorkload.gram`
is asked for, and those refuse past :data:`mmopt.structured._checks.MAX_DENSE_ENTRIES`.

Marginals (HDMM: McKenna et al., PVLDB 2018, §5): the marginal on attribute set S is ⊗ᵢ (I if i ∈ S else 1ᵀ).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from mmopt._base import validation as v
from mmopt._base.hints import factor_names
from mmopt.dense import _workload_core as wl
from mmopt.dense._workload_core import Workload
from mmopt.structured import _checks as ck
from mmopt.structured._terms import ProductTerm, ProductUnion, flatten_factors, union_of

identity, total, prefix, all_range = wl.identity, wl.total, wl.prefix, wl.all_range


def identity_total(n: int) -> Workload:
    """IT = [I; 1ᵀ]: the n unit counts plus the total (n + 1 queries); Gram I + J."""
    n = v.check_int(n, name="n", caller="identity_total")
    v.check_allocation((n + 1) * n, what=f"the ({n:,} + 1)×{n:,} matrix [I; 1ᵀ]", caller="identity_total")
    return Workload.from_matrix(np.vstack([np.eye(n), np.ones((1, n))]), name=f"IT({n})")


def predicates(matrix, *, name: str = "predicates") -> Workload:
    """An explicit per-attribute predicate matrix (rows are queries on one attribute)."""
    return Workload.from_matrix(v.check_matrix(matrix, name="matrix", caller="predicates"), name=name)


def _as_factor(f, caller: str, position: int) -> Workload:
    if isinstance(f, Workload):
        return f
    if isinstance(f, ImplicitWorkload):
        raise TypeError(f"The factor at position {position} of {caller} is an ImplicitWorkload; factors must be "
                        "one-attribute Workloads. Use union() to combine implicit workloads.")
    return Workload.from_matrix(v.check_matrix(f, name=f"factors[{position}]", caller=caller),
                                name=f"W{position}")


@dataclass(frozen=True, eq=False)
class Product(ProductTerm):
    """One term w·(W₁ ⊗ … ⊗ W_d); ``weight`` > 0 scales every query of the term."""

    factors: tuple[Workload, ...]
    weight: float = 1.0

    def __post_init__(self) -> None:
        self._check_factors(Workload, "Product")

    @property
    def n_queries(self) -> int:
        return math.prod(f.n_queries for f in self.factors)


@dataclass(frozen=True, eq=False)
class ImplicitWorkload(ProductUnion):
    """A weighted union of Kronecker products over one product domain.

    Attributes
    ----------
    terms : tuple of Product
        All with the same ``shape``; a single term is a product workload.
    name : str

    Examples
    --------
    >>> W = kron(identity_total(2), all_range(3))
    >>> W.shape, W.domain_size, W.n_queries
    ((2, 3), 6, 18)
    """

    terms: tuple[Product, ...] = field(repr=False)
    name: str = "workload"

    def __post_init__(self) -> None:
        self._check_terms(Product, "ImplicitWorkload")
        ck.check_query_weights([t.weight for t in self.terms], name="weights", caller="ImplicitWorkload")

    @property
    def n_queries(self) -> int:
        """m = Σ_j ∏ᵢ mᵢ⁽ʲ⁾, exact."""
        return sum(t.n_queries for t in self.terms)

    def dense(self, *, max_entries: int = ck.MAX_DENSE_ENTRIES) -> np.ndarray:
        """W (m×N) itself, stacking w_j ⊗ᵢ Wᵢ⁽ʲ⁾. Refuses past ``max_entries`` entries."""
        ck.check_allocation(self.n_queries * self.domain_size, what=f"the explicit W of '{self.name}'",
                            caller="ImplicitWorkload.dense", limit=max_entries,
                            remedy=" Use mmopt.structured.evaluate, which never forms W.")
        return self._stacked(lambda f: f.explicit_matrix())

    def explicit_matrix(self, *, max_entries: int = ck.MAX_DENSE_ENTRIES) -> np.ndarray:
        """W, as :meth:`dense` (the dense :class:`~mmopt.workload.Workload`'s name for it, so that code written
        for one works on the other when a domain passes the dense limit)."""
        return self.dense(max_entries=max_entries)

    # gram and mean_gram are properties, as on the dense Workload and the stream workloads: ``W.gram`` was an array
    # below 4,096 cells (kron, stack and marginals return a dense Workload there) and a bound method above
    @property
    def gram(self) -> np.ndarray:
        """G = Σ_j w_j² ⊗ᵢ Gᵢ⁽ʲ⁾ (N×N). Refuses past ``MAX_DENSE_ENTRIES`` (10⁸) entries, before allocating."""
        return self._gram(ck.MAX_DENSE_ENTRIES)

    @property
    def mean_gram(self) -> np.ndarray:
        """G/m (N×N), as :attr:`gram`."""
        return self.gram / self.n_queries

    def _gram(self, max_entries: int, caller: str = "ImplicitWorkload.gram") -> np.ndarray:
        N = self.domain_size
        ck.check_allocation(N * N, what=f"the N×N Gram of '{self.name}'", caller=caller, limit=max_entries,
                            remedy=" mmopt.evaluate, optimize and release take the implicit workload as it is; "
                                   "they never form G.")
        return self._gram_sum(lambda f: f.mean_gram * f.n_queries)

    def to_workload(self, *, max_entries: int = ck.MAX_DENSE_ENTRIES) -> Workload:
        """The dense :class:`mmopt.workload.Workload` (the reference path), for small domains.

        With W itself when m·N fits ``max_entries``; otherwise from the N×N Gram (per-query figures are then
        not listed: 2-D ranges on 64² have 4.3 million queries but a 4,096² Gram).
        """
        rows = all(f.knows_rows for t in self.terms for f in t.factors)
        if rows and self.n_queries * self.domain_size <= max_entries:  # (a Gram-only factor has no rows to list)
            return Workload.from_matrix(self.dense(max_entries=max_entries), name=self.name)
        return Workload.from_gram(self._gram(max_entries, "ImplicitWorkload.to_workload"), n_queries=self.n_queries,
                                  name=self.name)

    def __repr__(self) -> str:
        return (f"ImplicitWorkload(name={self.name!r}, shape={self.shape}, N={ck.fmt_int(self.domain_size)}, "
                f"m={ck.fmt_int(self.n_queries)}, terms={len(self.terms)})")


def kron(*factors, weight: float = 1.0, name: str | None = None) -> ImplicitWorkload:
    """The product workload w·(W₁ ⊗ … ⊗ W_d): queries ⊗ᵢ rᵢ for every choice of rows rᵢ of Wᵢ.

    Factors are one-attribute :class:`~mmopt.workload.Workload` objects (or explicit predicate matrices).
    Gram ⊗ᵢ Gᵢ and m = ∏ mᵢ; C order, so the last factor's cell varies fastest (as ``np.kron``).
    """
    caller = "kron"
    fs = tuple(_as_factor(f, caller, i) for i, f in enumerate(flatten_factors(factors, caller)))
    w = ck.check_weight(weight, name="weight", caller=caller)
    ck.check_query_weights([w], name="weight", caller=caller)
    return ImplicitWorkload((Product(fs, w),), name or factor_names(f.name for f in fs))


def union(parts, weights=None, *, name: str | None = None, caller: str = "union") -> ImplicitWorkload:
    """Weighted union [w₁W₁; w₂W₂; …] of implicit workloads on one domain: G = Σ wₖ² Gₖ, m = Σ mₖ. ``caller``
    names the public function in messages (mmopt.workload.stack reaches here)."""
    return union_of(parts, weights, union_type=ImplicitWorkload, caller=caller, build_with="kron", name=name,
                    check_weights=ck.check_query_weights)


def marginal_term(shape, attributes, *, weight: float = 1.0, factors: dict | None = None) -> Product:
    """The marginal on ``attributes`` S: ⊗ᵢ (I if i ∈ S else 1ᵀ), ∏_{i∈S} nᵢ queries.

    ``factors`` (a dict) shares one identity(n) and one total(n) between the terms of a union: workloads are
    immutable, and each holds an n×n Gram, so 2-way marginals on (10⁴,)⁵ need two of them (1.6 GB), not fifty
    (40 GB), and 3-way marginals on 100 attributes 2 factor objects, not 16 million.
    """
    shape = ck.check_shape(shape, caller="marginals")
    return _marginal_term(shape, _check_attributes(attributes, len(shape)), weight, {} if factors is None else factors)


def _marginal_term(shape: tuple[int, ...], S, weight: float, cache: dict) -> Product:
    """:func:`marginal_term` for a checked ``shape`` and attribute set ``S``: what :func:`marginals` calls per set
    (checking the shape once, not 161,700 times for the 3-way marginals on 100 attributes)."""
    def factor(kind: str, n: int):
        if (kind, n) not in cache:
            cache[kind, n] = identity(n) if kind == "I" else total(n)
        return cache[kind, n]

    if ("totals", shape) not in cache:
        cache["totals", shape] = [factor("1", n) for n in shape]
    factors = list(cache["totals", shape])  # a copy (C-level), then only the k attributes of S change
    for i in S:
        factors[i] = factor("I", shape[i])
    term = Product(tuple(factors), weight)
    term.__dict__["shape"] = shape  # the cached property, known here (frozen dataclasses allow this write)
    return term


def marginals(shape, k: int | None = None, *, attributes=None, name: str | None = None) -> ImplicitWorkload:
    """Marginals as a union of products: all k-way (``k``) or the listed attribute sets (``attributes``).

    Examples
    --------
    >>> W = marginals((2, 3, 4), 2)
    >>> len(W.terms), W.n_queries          # {0,1}: 6, {0,2}: 8, {1,2}: 12
    (3, 26)
    >>> marginals((2, 3, 4), attributes=[(0, 2), (1,)]).n_queries
    11
    """
    caller = "marginals"
    shape = ck.check_shape(shape, caller=caller)
    if (k is None) == (attributes is None):
        raise ValueError(f"{caller} needs exactly one of 'k' (all k-way marginals) or 'attributes' "
                         f"(a list of attribute tuples). Got k={k!r}, attributes={attributes!r}.")
    if k is not None:
        k = v.check_int(k, name="k", caller=caller, low=0, high=len(shape))
        sets = list(itertools.combinations(range(len(shape)), k))
    else:
        sets = list(attributes)
        if not sets:
            raise ValueError(f"The 'attributes' parameter of {caller} must list at least one attribute set.")
    factors: dict = {}
    if k is not None:  # itertools' sets are valid by construction: no per-set check
        terms = tuple(_marginal_term(shape, frozenset(S), 1.0, factors) for S in sets)
    else:
        terms = tuple(marginal_term(shape, S, factors=factors) for S in sets)
    label = name or (f"marginals({'x'.join(map(str, shape))},k={k})" if k is not None
                     else f"marginals({'x'.join(map(str, shape))},{len(sets)} sets)")
    return ImplicitWorkload(terms, label)


def lower_marginals(shape, k: int, *, name: str | None = None) -> ImplicitWorkload:
    """All marginals on at most ``k`` attributes (k = 0 is the grand total)."""
    shape = ck.check_shape(shape, caller="lower_marginals")
    k = v.check_int(k, name="k", caller="lower_marginals", low=0, high=len(shape))
    sets = [S for j in range(k + 1) for S in itertools.combinations(range(len(shape)), j)]
    return marginals(shape, attributes=sets, name=name or f"marginals({'x'.join(map(str, shape))},k<={k})")


def _check_attributes(attributes, d: int) -> frozenset[int]:
    caller = "marginals"
    try:
        S = [v.check_int(a, name="attributes", caller=caller, low=0, high=d - 1) for a in attributes]
    except TypeError:
        raise TypeError(f"The 'attributes' parameter of {caller} must hold tuples of attribute indices. "
                        f"Got {attributes!r}.") from None
    if len(set(S)) != len(S):
        raise ValueError(f"The 'attributes' parameter of {caller} repeats an attribute in {tuple(S)}.")
    return frozenset(S)
