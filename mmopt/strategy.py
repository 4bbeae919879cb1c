"""Strategies A (p×n): the queries the matrix mechanism measures — dense baselines, and products of them.

Notation: see README. A dense :class:`Strategy` holds A itself (sensitivity depends on A, not only on
X = AᵀA): identity I, hierarchical H_b, Haar wavelet Y, the workload itself, square roots of Grams
(:mod:`mmopt.dense._strategy_core`); HB, GreedyH and the quad-tree (:mod:`mmopt.baselines.hierarchies`), Privelet on
several attributes and the Fourier basis for marginals (:mod:`mmopt.baselines.transforms`). On a product domain,
:func:`kron` builds A₁ ⊗ … ⊗ A_d, :func:`stack` a weighted union of such products, and :func:`marginals`
HDMM's weighted marginals M(θ): these are implicit (:class:`~mmopt.structured.ImplicitStrategy`), store only
their factors, and give their sensitivity factor-wise — exact, or a proven upper bound flagged as such (never an
underestimate).
"""

from __future__ import annotations

import numpy as np

from mmopt._base import validation as v
from mmopt.baselines.hierarchies import greedy_h, hb, hb_branching, quadtree  # HB, GreedyH, quad-tree (issue 20)
from mmopt.baselines.transforms import fourier, privelet  # Privelet-nD, Fourier basis (issue 20)
from mmopt.dense._classic import (
    from_workload,
    haar_decomposition,
    hierarchical,
    identity,
    singular_value_bound,
    square_root,
    svd_strategy,
    wavelet,
)
from mmopt.dense._strategy_core import NORMS, Strategy, max_column_norm
from mmopt.structured.strategies import (
    ImplicitStrategy,
    kron_strategy,
    marginals_strategy,
    sensitivity,
    union_strategy,
)

__all__ = [
    "NORMS", "ImplicitStrategy", "Strategy", "fourier", "from_workload", "greedy_h", "haar_decomposition", "hb",
    "hb_branching", "hierarchical", "identity", "kron", "marginals", "max_column_norm", "privelet", "quadtree",
    "sensitivity", "singular_value_bound", "square_root", "stack", "svd_strategy", "wavelet",
]


def kron(*factors, weight: float = 1.0, name: str | None = None) -> ImplicitStrategy:
    """The product strategy θ·(A₁ ⊗ … ⊗ A_d), one factor per attribute (Strategies or matrices).

    Its error on a union of products is exact factor-wise: Σ_j w_j² ∏ᵢ tr(Gᵢ⁽ʲ⁾ (AᵢᵀAᵢ)⁺) (HDMM, §4);
    Δ is the product of the factors' largest column norms (exact).

    Examples
    --------
    >>> A = kron(hierarchical(4), identity(3))
    >>> A.shape, A.sensitivity("l1")
    ((4, 3), 3.0)
    """
    return kron_strategy(*factors, weight=weight, name=name)


def stack(strategies, weights=None, *, name: str | None = None):
    """The union [θ₁A₁; θ₂A₂; …]: implicit when its parts are (X = Σ θₖ² Xₖ), else a dense Strategy.

    For an implicit union, Δ₁ is the largest over cells of the summed column norms, computed factor-wise:
    exact when the column norms are uniform or N is small enough to scan, otherwise a proven upper bound
    (see :func:`sensitivity`, whose ``exact`` flag says which).

    Examples
    --------
    >>> stack([identity(4), hierarchical(4)], weights=[1.0, 0.5]).sensitivity("l1")
    2.5
    """
    parts = [strategies] if isinstance(strategies, Strategy | ImplicitStrategy) else list(strategies)
    if parts and all(isinstance(p, ImplicitStrategy) for p in parts):
        return union_strategy(parts, weights, name=name, caller="stack")
    if not parts or not all(isinstance(p, Strategy) for p in parts):
        raise TypeError("The 'strategies' parameter of stack must be a non-empty list of Strategy objects, or of "
                        "implicit strategies built with kron(...) — not a mix.")
    w = np.ones(len(parts)) if weights is None else v.check_vector(weights, name="weights", caller="stack",
                                                                    length=len(parts), meaning="one per part")
    if np.any(w <= 0):
        raise ValueError(f"The 'weights' parameter of stack must hold weights > 0. Got {w.tolist()!r:.80}.")
    for k, p in enumerate(parts[1:], start=1):
        v.check_same_domain(parts[0].domain_size, p.domain_size, caller="stack", what=("the first part", f"part {k}"))
    return Strategy(np.vstack([c * p.matrix for p, c in zip(parts, w, strict=True)]),
                    name or "+".join(p.name for p in parts))


def marginals(shape, theta, *, name: str = "marginals") -> ImplicitStrategy:
    """HDMM's marginals strategy M(θ): θ_S·⊗ᵢ(I if i ∈ S else 1ᵀ) for each attribute subset S.

    ``theta`` is a dict {attribute tuple: weight ≥ 0}, a list of attribute tuples (each at weight 1), or a
    length-2^d array indexed by the bitmask of S.
    Δ₁ = Σ θ_S and Δ₂ = (Σ θ_S²)^{1/2}, exactly (McKenna et al., PVLDB 2018, §5).
    """
    return marginals_strategy(shape, theta, name=name)
