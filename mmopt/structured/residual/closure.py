"""The downward closure of a family of attribute sets: the residual subspaces a marginal workload lives on.

Notation: see README and :mod:`mmopt.structured.residual`. On attribute i (size nᵢ) let Pᵢ = J/nᵢ and
Rᵢ = I − Pᵢ. For a subset S of the d attributes, Q_S = ⊗_{i∈S} Rᵢ ⊗_{i∉S} Pᵢ is the orthogonal projector on
the *residual subspace* of S, of dimension (multiplicity)

    r_S = ∏_{i∈S} (nᵢ − 1),

and the Q_S of all 2ᵈ subsets are mutually orthogonal and sum to the identity. A marginal on A touches only
the subspaces S ⊆ A, so a workload of marginals on A₁, A₂, … needs only its *downward closure*
{S : S ⊆ Aⱼ for some j}: 1 + d + d(d−1)/2 members for all 2-way marginals, never the 2ᵈ subsets. Members
that contain an attribute of size 1 have r_S = 0 (an empty subspace) and are left out.

Members are sorted tuples of attribute indices, ordered by size and then lexicographically. The cost of a
closure is its number of (set, subset) incidences Σⱼ 2^|Aⱼ|; :data:`MAX_INCIDENCES` caps it before anything
is enumerated.
"""

from __future__ import annotations

import itertools
import math
import numbers
from dataclasses import dataclass, field

import numpy as np
from scipy import sparse

from mmopt._base import validation as v

# Σⱼ 2^|Aⱼ| above this is refused before enumeration: each incidence costs a Python tuple (~100 bytes).
MAX_INCIDENCES = 5_000_000


def check_sets(sets, shape: tuple[int, ...], *, name: str, caller: str,
               distinct: bool = False) -> tuple[tuple[int, ...], ...]:
    """Attribute sets as sorted tuples of distinct indices in [0, d); an int is a one-attribute set.

    ``distinct``: the sets key a dict (weights, targets, counts), so two entries naming one set — (0, 1) and
    (1, 0) — are refused: after sorting, the later silently replaced the earlier.
    """
    d = len(shape)
    if isinstance(sets, str | bytes) or not hasattr(sets, "__iter__"):
        raise TypeError(f"The '{name}' parameter of {caller} must be a list of attribute tuples such as "
                        f"[(0, 1), (2,)]. Got {type(sets).__name__} instead.")
    sets = list(sets) if distinct else sets
    out = _already_sorted_sets(sets, d)
    out = _sorted_sets(sets, d, name, caller) if out is None else out
    if distinct and (twice := first_repeat(sets, out)):
        raise ValueError(f"The '{name}' parameter of {caller} names one attribute set twice, {twice[0]!r} "
                         f"and {twice[1]!r} (one marginal under two keys). Give each set once.")
    return out


def first_repeat(given, sets) -> tuple | None:
    """(the first, the second) of ``given`` whose sorted sets (``sets``, in the same order) are one, or None."""
    if len(set(sets)) == len(sets):
        return None
    first: dict = {}
    for G, S in zip(given, sets, strict=True):
        if S in first:
            return first[S], G
        first[S] = G
    return None


def _sorted_sets(sets, d: int, name: str, caller: str) -> tuple[tuple[int, ...], ...]:
    """:func:`check_sets`' general path: each set checked and sorted, naming the first error."""
    out = []
    for S in sets:
        if isinstance(S, numbers.Integral) and not isinstance(S, bool | np.bool_):
            S = (S,)
        if isinstance(S, str | bytes) or not hasattr(S, "__iter__"):
            raise TypeError(f"The '{name}' parameter of {caller} must hold tuples of attribute indices. "
                            f"Got {S!r:.60} ({type(S).__name__}) instead.")
        T = tuple(v.check_int(a, name=name, caller=caller, low=0, high=d - 1) for a in S)
        if len(set(T)) != len(T):
            raise ValueError(f"The '{name}' parameter of {caller} repeats an attribute in {T}. "
                             "List each attribute of a set once.")
        out.append(tuple(sorted(T)))
    return tuple(out)


def _already_sorted_sets(sets, d: int) -> tuple[tuple[int, ...], ...] | None:
    """``sets`` unchanged when they are already what :func:`check_sets` returns (tuples of Python ints, strictly
    increasing, in [0, d)), checked with C-level passes; None to take the general path (which names the error).
    Planners hand 166,751 such subsets for 3-way marginals on 100 attributes, twice per call."""
    if not isinstance(sets, tuple | list) or not all(type(S) is tuple for S in sets):
        return None
    flat = list(itertools.chain.from_iterable(sets))
    if flat and (set(map(type, flat)) != {int} or min(flat) < 0 or max(flat) >= d):
        return None
    if not all(map(lambda S: list(S) == sorted(set(S)), sets)):
        return None
    return tuple(sets)


def cells(shape: tuple[int, ...], S: tuple[int, ...]) -> int:
    """N_S = ∏_{i∈S} nᵢ, the number of cells of the marginal on S (exact int)."""
    return math.prod(shape[i] for i in S)


def check_size(sets, *, caller: str, limit: int = MAX_INCIDENCES) -> int:
    """Σ 2^|A| over the distinct sets: refuse a closure that would exhaust memory, before enumerating it."""
    count = sum(2 ** len(A) for A in set(sets))
    if count > limit:
        largest = max(len(A) for A in sets)
        raise ValueError(f"{caller}: the downward closure of these {len(set(sets)):,} attribute sets has up to "
                         f"{count:,} (set, subset) incidences (the largest set has {largest} attributes, 2^{largest} "
                         f"subsets), more than the limit of {limit:,}. Use fewer or smaller marginals.")
    return count


@dataclass(frozen=True, eq=False)
class Closure:
    """The members S of a downward closure with their multiplicities, cell counts and retained shares.

    Attributes
    ----------
    shape : tuple of int
        (n₁, …, n_d).
    members : tuple of tuple of int
        The subsets S, by size then lexicographically; every one has r_S ≥ 1.
    index : dict
        S → its position in ``members``.
    multiplicity : ndarray
        r_S = ∏_{i∈S} (nᵢ − 1), the dimension of residual subspace S (float64; exact below 2⁵³).
    cells : ndarray
        N_S = ∏_{i∈S} nᵢ (float64).
    share : ndarray
        r_S / N_S = ∏_{i∈S} (1 − 1/nᵢ), taken as a product of ratios (no overflow): the diagonal of
        ⊗_{i∈S} Rᵢ ⊗_{i∉S} J, i.e. the squared column norm of one residual measurement.

    Examples
    --------
    >>> C = downward_closure((2, 3, 4), [(0, 1), (1, 2)])
    >>> C.members
    ((), (0,), (1,), (2,), (0, 1), (1, 2))
    >>> C.multiplicity.tolist(), C.cells.tolist()
    ([1.0, 1.0, 2.0, 3.0, 2.0, 6.0], [1.0, 2.0, 3.0, 4.0, 6.0, 12.0])
    """

    shape: tuple[int, ...]
    members: tuple[tuple[int, ...], ...]
    index: dict = field(repr=False)
    multiplicity: np.ndarray = field(repr=False)
    cells: np.ndarray = field(repr=False)
    share: np.ndarray = field(repr=False)

    def __len__(self) -> int:
        return len(self.members)

    def __repr__(self) -> str:
        top = max((len(S) for S in self.members), default=0)
        return f"Closure(d={len(self.shape)}, members={len(self.members):,}, largest={top})"


_SUBSET_LISTING_MAX = 16  # past this size a set's 2^k subsets are not listed; sets are compared instead


def maximal(sets) -> tuple[tuple[int, ...], ...]:
    """The sets contained in no other set of ``sets`` (distinct, in first-seen order; sets are sorted tuples).

    Examples
    --------
    >>> maximal([(0, 1), (1,), (2,), (0, 1)])
    ((0, 1), (2,))
    """
    uniq = list(dict.fromkeys(sets))
    if max((len(B) for B in uniq), default=0) > _SUBSET_LISTING_MAX:
        return tuple(A for A in uniq if not any(len(B) > len(A) and set(A) < set(B) for B in uniq))
    covered = {S for B in uniq for k in range(len(B)) for S in itertools.combinations(B, k)}
    return tuple(A for A in uniq if A not in covered)


def downward_closure(shape: tuple[int, ...], sets, *, caller: str = "downward_closure") -> Closure:
    """{S : S ⊆ A for some A in ``sets``}, without the members of multiplicity 0 (module docstring).

    Cost O(Σ_A 2^|A|) (refused past :data:`MAX_INCIDENCES`); never 2ᵈ.
    """
    shape = v.check_shape(shape, caller=caller)
    sets = check_sets(sets, shape, name="sets", caller=caller)
    check_size(sets, caller=caller)
    found: set[tuple[int, ...]] = set()
    for A in set(sets):
        A = tuple(i for i in A if shape[i] > 1)  # a size-1 attribute only ever gives r_S = 0
        for k in range(len(A) + 1):
            found.update(itertools.combinations(A, k))
    members = tuple(sorted(found, key=lambda S: (len(S), S)))
    r = np.array([float(math.prod(shape[i] - 1 for i in S)) for S in members])
    N = np.array([float(cells(shape, S)) for S in members])
    share = np.array([math.prod((shape[i] - 1) / shape[i] for i in S) for S in members])
    return Closure(shape, members, {S: k for k, S in enumerate(members)}, r, N, share)


def incidence(closure: Closure, sets) -> sparse.csr_matrix:
    """The 0/1 matrix (len(sets) × |closure|) with a 1 where member T ⊆ set A (A already checked and sorted).

    Every subset of every A with r_T ≥ 1 is a member (the closure was built from these sets or larger).
    """
    index, shape = closure.index, closure.shape
    cols, ptr = [], [0]
    for A in sets:
        A = tuple(i for i in A if shape[i] > 1)
        for k in range(len(A) + 1):
            cols.extend(index[T] for T in itertools.combinations(A, k))
        ptr.append(len(cols))
    data = np.ones(len(cols))
    return sparse.csr_matrix((data, np.array(cols, dtype=np.int64), np.array(ptr, dtype=np.int64)),
                             shape=(len(ptr) - 1, len(closure)))
