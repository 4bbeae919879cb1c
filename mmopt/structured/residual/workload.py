"""Marginal workloads held as weights on attribute sets, and their conversion from mmopt's implicit workloads.

Notation: see README and :mod:`mmopt.structured.residual.closure`. The marginal on A with weight w_A is the
N_A queries w_A·⊗_{i∈A} I ⊗_{i∉A} 1ᵀ; its Gram w_A²·⊗_{i∈A} I ⊗_{i∉A} J acts on residual subspace S as the
scalar w_A²·∏_{i∉A} nᵢ when S ⊆ A and as 0 otherwise. A weighted union of marginals therefore has

    G = N · Σ_S ν_S Q_S,    ν_S = Σ_{A ⊇ S} w_A² / N_A,

with ν_S > 0 exactly on the downward closure: its singular values are √(N ν_S) with multiplicity r_S.
Every number here is ν_S, r_S, N_S or a ratio of them — never N = ∏ nᵢ itself, which is 8¹⁰⁰ for 100
attributes of size 8.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from mmopt._base import validation as v
from mmopt._base.readonly import read_only
from mmopt.structured import algebra as alg
from mmopt.structured.residual import closure as cl

_EPS = np.finfo(float).eps


@dataclass(frozen=True, eq=False)
class MarginalWorkload:
    """A weighted union of marginals: one entry (A, w_A) per marginal, duplicates allowed.

    Attributes
    ----------
    shape : tuple of int
    sets : tuple of tuple of int
        The attribute sets A (sorted tuples).
    weights : ndarray
        w_A > 0, one per set (each of the N_A queries of the marginal is scaled by w_A).
    name : str
    literal : bool
        True when the queries are the marginal cells themselves; False for a Gram-equivalent expansion
        (e.g. of an identity-plus-total factor), where totals and bounds are exact but per-query figures are
        not those of the original rows.
    n_queries : int
        m; Σ N_A for a literal workload.

    Examples
    --------
    >>> W = marginal_workload((2, 3, 4), {(0, 1): 1.0, (2,): 2.0})
    >>> W.n_queries, W.closure.members, (6 * W.eigenvalues).round(12).tolist()   # 6ν_S = 6Σ_{A⊇S} w_A²/N_A
    (10, ((), (0,), (1,), (2,), (0, 1)), [7.0, 1.0, 1.0, 6.0, 1.0])
    """

    shape: tuple[int, ...]
    sets: tuple[tuple[int, ...], ...]
    weights: np.ndarray = field(repr=False)
    name: str = "marginals"
    literal: bool = True
    n_queries: int | None = None

    def __post_init__(self) -> None:
        caller = "MarginalWorkload"
        shape = v.check_shape(self.shape, caller=caller)
        sets = cl.check_sets(self.sets, shape, name="sets", caller=caller)
        if not sets:
            raise ValueError(f"The 'sets' parameter of {caller} must list at least one attribute set. Got none.")
        w = np.asarray(self.weights, dtype=float).ravel()
        if w.shape != (len(sets),) or not np.all(np.isfinite(w)) or np.any(w <= 0):
            raise ValueError(f"The 'weights' parameter of {caller} must hold {len(sets)} finite weights > 0 (one "
                             f"per set). Got {np.asarray(self.weights).ravel().tolist()!r:.80} instead.")
        cl.check_size(sets, caller=caller)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "sets", sets)
        object.__setattr__(self, "weights", read_only(w))  # cached conversions share it: no edit in place
        if self.n_queries is None:
            object.__setattr__(self, "n_queries", sum(cl.cells(shape, A) for A in sets))

    @property
    def domain_size(self) -> int:
        """N = ∏ nᵢ (a Python int)."""
        return math.prod(self.shape)

    @cached_property
    def closure(self) -> cl.Closure:
        """The downward closure of ``sets``."""
        return cl.downward_closure(self.shape, self.sets, caller="MarginalWorkload")

    @cached_property
    def incidence(self):
        """0/1 (sets × closure) with a 1 where member T ⊆ A."""
        return cl.incidence(self.closure, self.sets)

    @cached_property
    def set_cells(self) -> np.ndarray:
        """N_A per set (float64)."""
        return np.array([float(cl.cells(self.shape, A)) for A in self.sets])

    @cached_property
    def eigenvalues(self) -> np.ndarray:
        """ν_S = Σ_{A⊇S} w_A²/N_A per closure member: G's eigenvalue on Q_S divided by N."""
        return self.incidence.T @ (self.weights**2 / self.set_cells)

    def to_implicit(self):
        """The same workload as an :class:`mmopt.structured.ImplicitWorkload` (one marginal term per set)."""
        from mmopt.structured import workloads as sw
        terms = tuple(sw.marginal_term(self.shape, A, weight=float(w))
                      for A, w in zip(self.sets, self.weights, strict=True))
        return sw.ImplicitWorkload(terms, self.name)

    def __repr__(self) -> str:
        return (f"MarginalWorkload(name={self.name!r}, d={len(self.shape)}, marginals={len(self.sets):,}, "
                f"m={self.n_queries:,}, literal={self.literal})")


def marginal_workload(shape, marginals, *, weights=None, name: str | None = None) -> MarginalWorkload:
    """Marginals on the given attribute sets: a dict {A: w_A}, or a list of sets (with optional ``weights``).

    Any family of sets, not only all k-way ones. Example: ``marginal_workload((8,) * 100, [(0, 1), (5,)])``.
    """
    caller = "marginal_workload"
    shape = v.check_shape(shape, caller=caller)
    if isinstance(marginals, dict):
        if weights is not None:
            raise ValueError(f"The 'weights' parameter of {caller} must be None when 'marginals' is a dict "
                             f"(the dict holds the weights). Got {weights!r:.60} instead.")
        sets, weights = list(marginals), list(marginals.values())
    else:
        sets = list(cl.check_sets(marginals, shape, name="marginals", caller=caller))
        weights = [1.0] * len(sets) if weights is None else list(np.asarray(weights, dtype=object).ravel())
    sets = cl.check_sets(sets, shape, name="marginals", caller=caller)
    # checked here, in this function's name: a bool was taken as 1, and a weight whose square underflows (1e-200)
    # was refused later by ResidualStrategy, a class the caller never named
    w = v.check_vector(weights, name="weights", caller=caller, length=len(sets), meaning="one per marginal",
                       bools=False)
    with np.errstate(over="ignore", under="ignore"):
        ok = (w > 0) & (w * w >= np.finfo(float).tiny) & np.isfinite(w * w)
    if not np.all(ok):
        raise ValueError(f"The 'weights' parameter of {caller} must be > 0 with squares within float64 (w in "
                         f"[1.5e-154, 1.3e154]). Got {w.tolist()!r:.80} instead. Drop a marginal rather than weight it "
                         "0; rescale the others.")
    label = name or f"marginals({'x'.join(map(str, shape))},{len(sets)} sets)"
    return MarginalWorkload(shape, sets, w, label)


# -- conversion from mmopt's implicit workloads ----------------------------------------------------------
def _kind(f, memo: dict):
    """("I", α, literal) for a factor with Gram αI, ("J", β, literal) for βJ, ("IJ", (α, β)) for αI + βJ
    with α, β > 0 (expanded into marginals), or None (outside the marginals algebra)."""
    if f.family == "identity":
        return ("I", 1.0, True)
    if f.family == "total":
        return ("J", 1.0, True)
    key = id(f)
    if key not in memo:
        memo[key] = (f, _classify(f))  # keep f alive so that its id is not reused
    return memo[key][1]


def _classify(f):
    n, m = f.domain_size, f.n_queries
    G = f.mean_gram * m
    co = alg.ij_coefficients(G)
    if co is None:
        return None
    a, b = co
    if abs(b) <= 16 * n * _EPS * float(np.max(np.abs(G))):
        b = 0.0
    if a > 0 and b == 0:
        from mmopt.structured import factors as fc
        q2, s = fc.row_stats(f)  # a marginal cell row has ‖q‖² = (1ᵀq)² = α: its variance is that of √α·e_j
        ok = m == n and np.allclose(q2, a, rtol=1e-12, atol=0) and np.allclose(s * s, a, rtol=1e-12, atol=0)
        return ("I", a, bool(ok))
    if a == 0 and b > 0:
        return ("J", b, m == 1)
    if a > 0 and b > 0:
        return ("IJ", (a, b))
    return None


#: The last conversions, by workload object: auto's plan, the residual solver and evaluate each ask for the same
#: one (3-way marginals on 100 attributes: 161,700 terms, seconds each time). Workloads are immutable.
_CONVERTED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def as_marginal_workload(workload, *, caller: str) -> MarginalWorkload | None:
    """``workload`` as a :class:`MarginalWorkload`, or None when it is not a union of (Gram-)marginals.

    Accepts a MarginalWorkload, an :class:`~mmopt.structured.ImplicitWorkload`, or a dense Workload that
    remembers its product structure. A term w·⊗ᵢ Wᵢ converts when every factor Gram is αI (attribute in A),
    βJ (attribute not in A) or αI + βJ with α, β > 0; the last expands into 2^k Gram-equivalent marginals
    (⊗(αI + βJ) = Σ_A ∏_{i∈A} α ∏_{i∉A} β · ⊗(I or J)) and makes the result non-literal.
    """
    from mmopt.structured.workloads import ImplicitWorkload
    if isinstance(workload, MarginalWorkload):
        return workload
    if not isinstance(workload, ImplicitWorkload):
        from mmopt.workload import Workload, structure_of  # lazy: mmopt.workload imports this layer
        if not isinstance(workload, Workload):
            raise TypeError(f"The 'workload' parameter of {caller} must be a MarginalWorkload, an ImplicitWorkload "
                            f"or a Workload built from marginals. Got {type(workload).__name__} instead.")
        workload = structure_of(workload)
        if workload is None:
            return None
    if workload in _CONVERTED:
        return _CONVERTED[workload]
    _CONVERTED[workload] = converted = _convert(workload)
    return converted


def _convert(workload) -> MarginalWorkload | None:
    shape, memo = workload.shape, {}
    sets, w2, literal, budget = [], [], True, cl.MAX_INCIDENCES
    for t in workload.terms:
        inside, mixed, scale = [], [], t.weight**2
        for i, f in enumerate(t.factors):
            kind = _kind(f, memo)
            if kind is None:
                return None
            if kind[0] == "IJ":
                mixed.append((i, *kind[1]))
                continue
            literal &= kind[2]
            scale *= kind[1]
            if kind[0] == "I":
                inside.append(i)
        budget -= 2 ** len(mixed) * 2 ** (len(inside) + len(mixed))
        if budget < 0:
            return None
        literal &= not mixed
        for pick in range(2 ** len(mixed)):
            extra = [i for k, (i, _, _) in enumerate(mixed) if pick >> k & 1]
            factor = math.prod(a if pick >> k & 1 else b for k, (_, a, b) in enumerate(mixed))
            sets.append(tuple(sorted(inside + extra)))
            w2.append(scale * factor)
    return MarginalWorkload(shape, tuple(sets), np.sqrt(np.array(w2)), workload.name, literal, workload.n_queries)
