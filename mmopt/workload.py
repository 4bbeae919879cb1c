"""Workloads W (m×n) of linear counting queries: the dense 1-D families, and products and unions of them.

Notation: see README. A dense :class:`Workload` *is* its Gram matrix G = WᵀW (stored per query, G/m) plus
the exact query count m. On a product domain of N cells (attributes in C order) a workload is a union of
Kronecker products of small per-attribute query sets; :func:`kron`, :func:`stack` and :func:`marginals` keep
such a workload dense while N ≤ 4,096 cells — where the dense path is exact and cheap — and return an
implicit :class:`~mmopt.structured.ImplicitWorkload` beyond, which stores only its factors and never forms
an N×N matrix (HDMM's representation: McKenna et al., PVLDB 2018). The census and benchmark workloads of
HDMM (SF1, SF1+, adult, CPS, 2-D ranges, 3-D prefix) are always implicit.

This module is the public face; the dense core lives in :mod:`mmopt.dense._workload_core` and the implicit layer
in :mod:`mmopt.structured`, so that neither imports this one.
"""

from __future__ import annotations

import math
import warnings
import weakref
from collections.abc import Iterator

from mmopt._base import validation as v
from mmopt.dense import _workload_core as core
from mmopt.dense._workload_core import (
    FAMILIES,
    MAX_EXPLICIT_ENTRIES,
    Workload,
    all_predicate,
    identity,
    random_range,
    total,
)
from mmopt.structured import workloads as sw
from mmopt.structured._checks import DENSE_LIMIT
from mmopt.structured.census import adult_w1, adult_w2, cps_w1, cps_w2, prefix_3d, ranges_2d, sf1, sf1_persons, sf1_plus
from mmopt.structured.residual.closure import first_repeat
from mmopt.structured.workloads import ImplicitWorkload, identity_total, lower_marginals, predicates

# Dense workloads built from a product structure remember it (weakly), so that structure-aware optimisers
# (mmopt.optimize(method="auto")) can still use it when the dense path was chosen for its size.
_STRUCTURE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: a stack's signed weights where its twin holds |w| (the twin's terms take w > 0; only w² enters G)
_SIGNED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

#: Past this many cells prefix(n) and all_range(n) are the O(n) stream workloads of mmopt.toeplitz: their dense
#: Gram (n² floats, and one temporary) would pass the allocation limit (n = 10,000 is 0.8 GB).
STREAM_FROM = int(math.isqrt(v.MAX_ALLOCATION_ENTRIES // 2)) + 1


def prefix(n: int):
    """The n prefix sums x₁+…+x_k; G_ij = n − max(i, j) + 1 (1-indexed).

    A dense :class:`Workload` up to :data:`STREAM_FROM` − 1 cells; from there the O(n) stream workload
    ``mmopt.toeplitz.prefix(n)``, which evaluate, svd_bound, optimize and release all take (an n×n Gram would not
    fit in memory: 68.7 GB at n = 65,536).

    Examples
    --------
    >>> prefix(4).n_queries, type(prefix(2**16)).__name__
    (4, 'StreamWorkload')
    """
    n = v.check_int(n, name="n", caller="prefix")
    if n >= STREAM_FROM:
        from mmopt import toeplitz
        return toeplitz.prefix(n)
    return core.prefix(n)


def all_range(n: int):
    """All n(n+1)/2 interval queries W_R (§6.2); G_ij = min(i, j)·(n − max(i, j) + 1), 1-indexed.

    Dense up to :data:`STREAM_FROM` − 1 cells, then ``mmopt.toeplitz.all_range(n)`` (as :func:`prefix`).

    Examples
    --------
    >>> W = all_range(3)
    >>> W.n_queries, W.gram.tolist()
    (6, [[3.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 3.0]])
    """
    n = v.check_int(n, name="n", caller="all_range")
    if n >= STREAM_FROM:
        from mmopt import toeplitz
        return toeplitz.all_range(n)
    return core.all_range(n)


__all__ = [
    "DENSE_LIMIT", "FAMILIES", "MAX_EXPLICIT_ENTRIES", "ImplicitWorkload", "Workload", "adult_w1", "adult_w2",
    "all_predicate", "all_range", "cps_w1", "cps_w2", "identity", "identity_total", "kron", "lower_marginals",
    "marginals", "predicates", "prefix", "prefix_3d", "random_range", "ranges_2d", "sf1", "sf1_persons",
    "sf1_plus", "stack", "structure_of", "total",
]


def structure_of(workload) -> ImplicitWorkload | None:
    """The product structure a workload was built from: itself if implicit, the implicit twin of a dense
    workload made by :func:`kron`, :func:`stack` or :func:`marginals` or of a residual-layer
    :class:`~mmopt.structured.residual.MarginalWorkload`, else None."""
    if isinstance(workload, ImplicitWorkload):
        return workload
    if type(workload).__name__ == "MarginalWorkload":  # by name: the residual layer imports this module
        return workload.to_implicit()
    return _STRUCTURE.get(workload) if isinstance(workload, Workload) else None


def signed_weights(workload) -> tuple[float, ...] | None:
    """The signed weight of each term of the product twin (:func:`structure_of`) of a dense :func:`stack` of
    products with a negative weight, whose twin holds magnitudes: same Gram, same errors, but rows of the opposite
    sign, which an answers table must not take from the twin (it refused the release as another workload's). Else
    None."""
    return _SIGNED.get(workload) if isinstance(workload, Workload) else None


def _remember(dense: Workload, implicit: ImplicitWorkload) -> Workload:
    _STRUCTURE[dense] = implicit
    return dense


def kron(*factors, name: str | None = None):
    """The product workload W₁ ⊗ … ⊗ W_d (queries on a product domain): G = ⊗ Gᵢ, m = ∏ mᵢ.

    Dense (a :class:`Workload`) while N = ∏ nᵢ ≤ 4,096 cells, implicit beyond. Factors are one-attribute
    workloads (``identity(n)``, ``prefix(n)``, ``identity_total(n)``, ``predicates(matrix)``, ...).

    Examples
    --------
    >>> kron(prefix(4), identity(3)).n_queries            # dense: 12 cells
    12
    >>> W = kron(all_range(100), all_range(100), prefix(10))   # 10⁵ cells: implicit
    >>> type(W).__name__, W.n_queries == 5050 * 5050 * 10
    ('ImplicitWorkload', True)
    """
    if len(factors) == 1 and isinstance(factors[0], list | tuple):
        factors = tuple(factors[0])
    for i, f in enumerate(factors):
        if isinstance(f, ImplicitWorkload):
            raise TypeError(f"The factors of kron must be one-attribute workloads; factor {i} ('{f.name}') is "
                            "already a product. Pass its factors instead: kron(*W.terms[0].factors, ...).")
        if type(f).__name__ == "StreamWorkload":  # prefix(n) / all_range(n) past the dense limit
            remedy = (f"Coarsen that attribute below {STREAM_FROM:,} values." if f.n >= STREAM_FROM else
                      f"Pass mmopt.workload.{f.kind}({f.n}) (dense below {STREAM_FROM:,} cells) instead.")
            raise TypeError(f"The factors of kron are dense one-attribute workloads; factor {i} ('{f.name}') is a "
                            f"stream workload (mmopt.toeplitz's prefix sums or all ranges, held in O(n) at any "
                            f"size), which has no Kronecker form here. {remedy}")
    if len(factors) >= 2 and all(isinstance(f, Workload) for f in factors) and \
            math.prod(f.domain_size for f in factors) <= DENSE_LIMIT:
        out = factors[0]
        for i, f in enumerate(factors[1:], start=2):
            out = core.kron(out, f, name=name if i == len(factors) else None)
        return _remember(out, sw.kron(*factors, name=out.name))
    return sw.kron(*factors, name=name)


def stack(workloads, weights=None, *, name: str | None = None):
    """Weighted union [w₁W₁; w₂W₂; …]: G = Σ wᵢ² Gᵢ, m = Σ mᵢ. Implicit when its parts are.

    Examples
    --------
    >>> stack([prefix(4), identity(4)]).n_queries
    8
    >>> W = stack([kron(prefix(100), total(100)), kron(total(100), prefix(100))], weights=[1.0, 2.0])
    >>> type(W).__name__, W.n_queries
    ('ImplicitWorkload', 200)
    """
    if hasattr(workloads, "n_queries"):  # stack(W1, W2): kron takes its factors one by one, stack one list
        second = " (the second went to 'weights')" if hasattr(weights, "n_queries") else ""
        raise TypeError(f"The 'workloads' parameter of stack must be a list of workloads. Got one "
                        f"{type(workloads).__name__}{second}. Pass them as one list: stack([W1, W2, ...]).")
    try:
        parts = list(workloads)
    except TypeError:  # not a list: the dense constructor says what it needs
        return core.stack(workloads, weights, name=name)
    if streams := [p for p in parts if type(p).__name__ == "StreamWorkload"]:  # "must be a list of Workload"
        f = streams[0]  # objects" was said of a list of mmopt workloads
        remedy = (f"Pass mmopt.workload.{f.kind}({f.n}) (dense below {STREAM_FROM:,} cells)" if f.n < STREAM_FROM
                  else "Stack them below that size, or evaluate each part on its own")
        raise TypeError(f"The 'workloads' parameter of stack holds a stream workload ('{f.name}': mmopt.toeplitz's "
                        f"prefix sums or all ranges, held in O(n)), which has no stacked form here. {remedy}.")
    implicit = [isinstance(p, ImplicitWorkload) for p in parts]
    if parts and all(implicit):
        if weights is not None and not isinstance(weights, str | bytes):
            try:
                negative = [float(w) for w in weights if float(w) < 0]
            except (TypeError, ValueError):  # not numbers: the union's own check says what it needs
                negative = []
            if negative:  # the dense stack (≤ 4,096 cells) takes it, its signs kept: same call, other sizes
                raise ValueError(f"The 'weights' parameter of stack must be > 0 for an implicit workload (past "
                                 f"{DENSE_LIMIT:,} cells), whose terms are scaled copies of their products. Got "
                                 f"{negative[0]!r}. Only w² enters the error: pass |w| for the same errors, and "
                                 "negate the answers of that part if you need its signs (a dense stack, up to "
                                 f"{DENSE_LIMIT:,} cells, keeps them).")
        return sw.union(parts, weights, name=name, caller="stack")
    if any(implicit):
        raise TypeError("The 'workloads' parameter of stack mixes implicit (product) and dense workloads. Build "
                        "every part on the product domain with kron(...) (e.g. kron(identity(n1), total(n2))).")
    twins = [structure_of(p) for p in parts]
    shapes = list(dict.fromkeys(t.shape for t in twins if t is not None))
    if len(shapes) > 1:  # cell i means different attribute values in different parts: the union is meaningless
        raise ValueError(f"The 'workloads' parameter of stack has products over different attribute shapes "
                         f"{' and '.join(map(str, shapes))}: their cells do not line up (cell i is a different "
                         "combination of attribute values in each). Build every part over the same attributes, "
                         "e.g. kron(prefix(8), identity(4)) with kron(identity(8), prefix(4)).")
    out = core.stack(parts, weights, name=name)
    if twins and all(t is not None for t in twins):
        # |w|: the dense stack takes a negative weight (only w² enters G), the implicit twin's terms only w > 0,
        # and stack([kron(…), kron(…)], weights=[-1, 1]) was refused where stack([prefix(4), …]) was not
        magnitudes = None if weights is None else [abs(float(w)) for w in weights]  # (checked by core.stack)
        twin = sw.union(twins, magnitudes, name=out.name, caller="stack")
        # the sign of each term of the twin: part j's terms carry w_j's times their own (a part may be such a stack)
        outer = [1.0] * len(parts) if weights is None else [-1.0 if float(w) < 0 else 1.0 for w in weights]
        signs = [sg * (-1.0 if w < 0 else 1.0) for sg, p, t in zip(outer, parts, twins, strict=True)
                 for w in (signed_weights(p) or [1.0] * len(t.terms))]
        if any(sg < 0 for sg in signs):
            if len(signs) != len(twin.terms):  # (the union merged terms: no twin rather than one of wrong signs)
                return out
            _SIGNED[out] = tuple(sg * float(t.weight) for sg, t in zip(signs, twin.terms, strict=True))
        _remember(out, twin)
    return out


def _warn_repeats(given: list) -> None:
    """A marginal listed twice is asked twice: its rows repeat, its weight in the total error doubles. Legitimate as a
    weight, but release_marginals refuses it as a slip ("it would count twice"), and here it went without a word (a
    newcomer's audit); said, so that an optimised strategy is not silently tilted towards it."""
    # any iterable of indices, as sw.marginals takes (and has checked) them: rows of an array, sets, ranges (int(S)
    # of one raised a bare TypeError, where the marginals were valid); spelled as tuples of ints in the message
    spelled = [tuple(int(a) for a in S) for S in given]
    if twice := first_repeat(spelled, [tuple(sorted(S)) for S in spelled]):
        warnings.warn(f"marginals: the marginal {twice[0]!r} is listed twice (also as {twice[1]!r}): its queries are "
                      "asked twice, its weight in the total error doubled. List it once; to weight it, use "
                      "mmopt.workload.stack([...], weights=[...]).", UserWarning, stacklevel=3)


def marginals(shape, k: int | None = None, *, attributes=None, name: str | None = None):
    """All k-way marginals (``k``) or the marginals on listed attribute sets (``attributes``).

    The marginal on S is ⊗ᵢ (I if i ∈ S else 1ᵀ). Dense while N ≤ 4,096 cells, implicit beyond.

    Examples
    --------
    >>> marginals((4, 4, 4), 2).n_queries                        # 3 pairs · 16 cells, dense
    48
    >>> marginals((10,) * 10, attributes=[(0, 1), (2,)]).n_queries   # 10¹⁰ cells, implicit
    110
    """
    if isinstance(attributes, Iterator):  # a generator: read once, here, so that the check below sees it too
        attributes = list(attributes)
    W = sw.marginals(shape, k, attributes=attributes, name=name)
    if attributes is not None:  # (checked by sw.marginals: tuples of distinct attribute indices)
        _warn_repeats(list(attributes))
    if W.domain_size > DENSE_LIMIT:
        return W
    if k is not None:
        out = core.marginals(W.shape, k)
        out = out if name is None else Workload._make(out.mean_gram, out.n_queries, name, out.matrix, out.family)
    else:
        out = W.to_workload()
    return _remember(out, W)
