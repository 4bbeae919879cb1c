"""The container shared by implicit workloads and strategies: a weighted union of Kronecker products.

Notation: see README. Both :class:`~mmopt.structured.workloads.ImplicitWorkload` and
:class:`~mmopt.structured.strategies.ImplicitStrategy` hold ``terms``, a non-empty tuple of products
w·(M₁ ⊗ … ⊗ M_d) over one domain (n₁, …, n_d). Stacking the terms gives the matrix [w₁K₁; w₂K₂; …] and
its Gram Σ_j w_j² ⊗ᵢ Gᵢ⁽ʲ⁾, because the blocks occupy disjoint rows and (⊗ᵢMᵢ)ᵀ(⊗ᵢMᵢ) = ⊗ᵢ MᵢᵀMᵢ.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

from mmopt.dense._workload_core import weighted_label
from mmopt.structured import _checks as ck


class ProductTerm:
    """Mixin for a frozen dataclass term w·(M₁ ⊗ … ⊗ M_d) with fields ``factors`` and ``weight``."""

    def _check_factors(self, factor_type: type, caller: str) -> None:
        """``factors`` a non-empty tuple of ``factor_type`` (one per attribute); ``weight`` > 0."""
        # the distinct factor types (C-level map and set): a term over 100 attributes shares two factor objects
        if not isinstance(self.factors, tuple) or not self.factors or \
                not all(issubclass(t, factor_type) for t in set(map(type, self.factors))):
            raise TypeError(f"The 'factors' parameter of {caller} must be a non-empty tuple of "
                            f"{factor_type.__name__} objects (one per attribute).")
        object.__setattr__(self, "weight", ck.check_weight(self.weight, name="weight", caller=caller))

    @functools.cached_property
    def shape(self) -> tuple[int, ...]:
        """(n₁, …, n_d): each factor's domain size (computed once: a union of 161,700 terms over 100 attributes
        asks it of every term several times)."""
        return tuple(f.domain_size for f in self.factors)


def flatten_factors(factors: tuple, caller: str) -> tuple:
    """kron(A, B, C) and kron([A, B, C]) alike; at least one factor."""
    if len(factors) == 1 and isinstance(factors[0], list | tuple):
        factors = tuple(factors[0])
    if not factors:
        raise ValueError(f"{caller} needs at least one factor. Got none.")
    return factors


def union_of(parts, weights, *, union_type: type, caller: str, build_with: str, name: str | None,
             check_weights=None):
    """The weighted union [θ₁P₁; θ₂P₂; …] of ``union_type`` objects on one domain: every term of part k
    with its weight times θₖ (Gram Σ θₖ² Gₖ), all checked by ``check_weights`` (name, caller) when given. Shared
    by implicit workloads and strategies."""
    parts = [parts] if isinstance(parts, union_type) else list(parts)
    if not parts or not all(isinstance(p, union_type) for p in parts):
        raise TypeError(f"The 'parts' parameter of {caller} must be a non-empty list of {union_type.__name__} "
                        f"objects (build each with {build_with}(...)).")
    ws = ck.check_weights(weights, len(parts), caller=caller)
    for p in parts[1:]:
        ck.same_shape(parts[0].shape, p.shape, caller=caller, what="two of its parts")
    weighted = [(t, t.weight * w) for p, w in zip(parts, ws, strict=True) for t in p.terms]
    if check_weights is not None:
        check_weights([w for _, w in weighted], name="weights", caller=caller)
    terms = tuple(type(t)(t.factors, w) for t, w in weighted)
    # the weights are in the name, as workload.stack writes them: with other weights the union had the same name
    return union_type(terms, name or weighted_label([p.name for p in parts], ws))


class ProductUnion:
    """Mixin for a frozen dataclass with a ``terms`` field of products (each with ``factors``, ``weight``,
    ``shape``); it adds no field, only the checks and the quantities that depend on the terms alone."""

    def _check_terms(self, term_type: type, caller: str) -> None:
        """Non-empty, all of ``term_type``, all over the same attribute sizes."""
        if not self.terms or not all(isinstance(t, term_type) for t in self.terms):
            raise TypeError(f"The 'terms' parameter of {caller} must be a non-empty tuple of "
                            f"{term_type.__name__} terms.")
        for t in self.terms[1:]:
            ck.same_shape(self.terms[0].shape, t.shape, caller=caller, what="two of its terms")

    @property
    def shape(self) -> tuple[int, ...]:
        """(n₁, …, n_d), the attribute sizes."""
        return self.terms[0].shape

    @property
    def domain_size(self) -> int:
        """N = ∏ nᵢ (a Python int)."""
        return math.prod(self.shape)

    @property
    def is_product(self) -> bool:
        """True for a single term (a product workload or strategy)."""
        return len(self.terms) == 1

    def _stacked(self, matrix_of: Callable) -> np.ndarray:
        """[w₁ ⊗ᵢ Mᵢ⁽¹⁾; w₂ ⊗ᵢ Mᵢ⁽²⁾; …] with Mᵢ = ``matrix_of(factor)``; the caller checked the size."""
        blocks = []
        for t in self.terms:
            M = np.full((1, 1), float(t.weight))
            for f in t.factors:
                M = np.kron(M, matrix_of(f))
            blocks.append(M)
        return np.vstack(blocks)

    def _gram_sum(self, gram_of: Callable) -> np.ndarray:
        """Σ_j w_j² ⊗ᵢ Gᵢ⁽ʲ⁾ (N×N) with Gᵢ = ``gram_of(factor)``; the caller checked the size."""
        N = self.domain_size
        G = np.zeros((N, N))
        for t in self.terms:
            K = np.full((1, 1), float(t.weight) * float(t.weight))  # inf past float64, not ** 's bare OverflowError
            for f in t.factors:
                K = np.kron(K, gram_of(f))
            G += K
        return G
