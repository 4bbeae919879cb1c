"""The saved-strategy format: a strategy as named arrays plus a JSON description, and back, with every check.

Notation: see README. The kinds, each stored faithfully (the rebuilt strategy has bit-identical matrices,
weights, names and term order, so every error figure computed from it is identical):

- ``dense``: a :class:`~mmopt.strategy.Strategy`; array ``matrix`` (p×n).
- ``product`` / ``union``: an :class:`~mmopt.structured.ImplicitStrategy` θ₁(⊗ᵢ A⁽¹⁾ᵢ) ; θ₂(⊗ᵢ A⁽²⁾ᵢ) ; …
  (one term, or several); arrays ``factor_0``, ``factor_1``, … (each distinct factor once) and ``weights``
  (θₖ); the description lists each factor's name and shape and, per term, the factor indices.
- ``marginals``: HDMM's M(θ) (McKenna et al., PVLDB 2018, §5), θ_S·⊗ᵢ(I if i ∈ S else 1ᵀ); arrays
  ``masks`` (S as a bitmask, bit i = attribute i, in term order) and ``weights`` (θ_S).
- ``toeplitz`` / ``weighted_sqrt``: :mod:`mmopt.toeplitz`'s strategies for prefix sums and ranges, stored in
  O(n) (:mod:`mmopt.persist._toeplitz`).
- ``residual``: a residual strategy (what a Gaussian records release measures), by its subsets and weights
  (:mod:`mmopt.persist._residual`).
- ``hierarchy_residual`` / ``hierarchy_nodes``: the grouping-set strategies over hierarchies, by their trees and
  weights (:mod:`mmopt.persist._hierarchy`).
- ``orbit``: a symmetric strategy (what ``plan`` and max-variance ``optimize`` return for grouping sets and sf1),
  by its orbits and Gram blocks (:mod:`mmopt.persist._orbit`).

Integrity: ``checksum`` holds two SHA-256 digests: of the arrays (for each name in sorted order, the line
"name\\ndtype\\nshape\\n" then the C-order bytes) and of the rest of the metadata (canonical JSON: sorted
keys, no spaces, ASCII). They catch corruption and edits; they are not a signature (anyone can recompute).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping

import numpy as np

from mmopt.dense._strategy_core import Strategy
from mmopt.persist import _hierarchy as ph
from mmopt.persist import _orbit as po
from mmopt.persist import _residual as pr
from mmopt.persist import _toeplitz as pt
from mmopt.structured.strategies import ImplicitStrategy, StrategyProduct, marginals_strategy

FORMAT = "mmopt.strategy"
FORMAT_VERSION = 1
KINDS = ("dense", "product", "union", "marginals", *pt.KINDS, *pr.KINDS, *ph.KINDS, *po.KINDS)
_FAMILIES = (pr, ph, po)  # the modules whose kinds are decoded over attribute sizes with the checked readers
METADATA = "metadata"  # the npz entry holding the JSON (UTF-8 bytes as a uint8 vector)
F8, I8 = np.dtype("<f8"), np.dtype("<i8")  # little-endian on every machine: the file is portable


#: What to save instead, per object met in the wild (each was refused with no remedy; helpers' probes).
REMEDIES = {"Plan": " Save plan.result, with privacy=plan.privacy (the plan's strategy and budget).",
            "SavedStrategy": " Save its .strategy (load returned it wrapped with the file's metadata).",
            "Synthetic": " A synthetic-data model is saved by its own method, synthetic.save(path), and read back by "
                         "mmopt.synth.load.",
            "ndarray": " Wrap the matrix: mmopt.Strategy(A) (evaluate and release take the array as it is)."}


def kind_of(strategy, caller: str = "save") -> str:
    """"dense", "product", "union" or "marginals" (an implicit strategy whose every factor is I or 1ᵀ)."""
    if isinstance(strategy, Strategy):
        return "dense"
    if not isinstance(strategy, ImplicitStrategy):
        for module in (pt, *_FAMILIES):
            if (kind := module.kind_of(strategy)) is not None:
                return kind
        kind = type(strategy).__name__
        raise TypeError(f"The 'strategy_or_result' parameter of {caller} must be a Strategy, an implicit strategy "
                        "(mmopt.strategy.kron/stack/marginals), a mmopt.toeplitz, tree, p-Identity, residual, "
                        f"hierarchy or orbit strategy or an OptimizeResult. Got {kind}.{REMEDIES.get(kind, '')}")
    if _marginal_masks(strategy) is not None:
        return "marginals"
    return "product" if strategy.is_product else "union"


def _marginal_masks(strategy: ImplicitStrategy) -> list[int] | None:
    """The bitmask S of each term when every factor is exactly marginals_strategy's I{n} or T{n}, else None."""
    masks = []
    for t in strategy.terms:
        mask = 0
        for i, f in enumerate(t.factors):
            M, n = f.matrix, f.domain_size
            if f.name == f"I{n}" and M.shape == (n, n) and np.count_nonzero(M) == n and np.all(np.diagonal(M) == 1):
                mask |= 1 << i
            elif not (f.name == f"T{n}" and M.shape == (1, n) and np.all(M == 1)):
                return None
        masks.append(mask)
    # marginals_strategy takes one weight per subset, and 62 attributes is int64's limit
    return masks if len(set(masks)) == len(masks) and len(strategy.shape) <= 62 else None


def strategy_summary(strategy) -> dict:
    """kind, name, shape [p, N] of A, domain_shape (attribute sizes; [n] for a dense A), domain_size, n_rows."""
    if callable(getattr(strategy, "json_summary", None)):  # other layers' strategies (mmopt.toeplitz) say it
        return strategy.json_summary()
    for module in (ph, po):
        if module.kind_of(strategy) is not None:
            return module.summary(strategy)
    if not isinstance(strategy, Strategy | ImplicitStrategy) and pt.kind_of(strategy) is None:
        # a strategy no file holds (the hierarchy family's): OptimizeResult.to_dict raised save's refusal for it
        shape = [int(s) for s in getattr(strategy, "shape", ())]
        return {"kind": type(strategy).__name__, "name": getattr(strategy, "name", None), "domain_shape": shape,
                "domain_size": int(np.prod(shape)) if shape else None}
    kind = kind_of(strategy)
    if kind == "dense":
        p, n = strategy.matrix.shape
        shape = [n]
    else:
        p, n, shape = strategy.n_rows, strategy.domain_size, list(strategy.shape)
    return {"kind": kind, "name": strategy.name, "shape": [int(p), int(n)], "domain_shape": shape,
            "domain_size": int(n), "n_rows": int(p)}


def encode(strategy, caller: str = "save") -> tuple[dict, dict[str, np.ndarray]]:
    """(description, arrays) of a strategy; the description also holds its name, shapes and kind."""
    kind = kind_of(strategy, caller)
    desc = strategy_summary(strategy)
    if kind in pt.KINDS:
        return pt.encode(strategy, desc)
    for module in _FAMILIES:
        if kind in module.KINDS:
            return module.encode(strategy, desc)
    if kind == "dense":
        return desc, {"matrix": strategy.matrix.astype(F8)}
    weights = np.array([t.weight for t in strategy.terms], dtype=F8)
    if kind == "marginals":
        masks = _marginal_masks(strategy)
        desc["attributes"] = [_attributes(m, len(strategy.shape)) for m in masks]
        return desc, {"masks": np.array(masks, dtype=I8), "weights": weights}
    index: dict[tuple, int] = {}  # a factor shared by several terms (or equal to another) is stored once
    factors, terms = [], []
    for t in strategy.terms:
        row = []
        for f in t.factors:
            key = (f.name, f.matrix.shape, hashlib.sha256(np.ascontiguousarray(f.matrix, dtype=F8).data).digest())
            if key not in index:
                index[key] = len(factors)
                factors.append(f)
            row.append(index[key])
        terms.append(row)
    desc["factors"] = [{"name": f.name, "shape": list(f.matrix.shape)} for f in factors]
    desc["terms"] = terms
    arrays = {f"factor_{j}": f.matrix.astype(F8) for j, f in enumerate(factors)}
    return desc, arrays | {"weights": weights}


def _attributes(mask: int, d: int) -> list[int]:
    return [i for i in range(d) if mask >> i & 1]


def canonical(obj) -> str:
    """The canonical JSON text the metadata digest is taken over."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def arrays_digest(arrays: Mapping[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}\n{a.dtype.str}\n{','.join(str(k) for k in a.shape)}\n".encode())
        h.update(a.tobytes() if a.ndim == 0 else a.data)
    return h.hexdigest()


def metadata_digest(meta: Mapping) -> str:
    return hashlib.sha256(canonical({k: val for k, val in meta.items() if k != "checksum"}).encode()).hexdigest()


def checksum(meta: Mapping, arrays: Mapping[str, np.ndarray]) -> dict:
    return {"algorithm": "sha256", "arrays": arrays_digest(arrays), "metadata": metadata_digest(meta)}


# -- decoding --------------------------------------------------------------------------------------------
def field(d, key: str, types, where: str, fail: Callable):
    """``d[key]``, refused (via ``fail``) when missing or not of ``types``."""
    if not isinstance(d, Mapping) or key not in d:
        fail(f"has metadata without '{where}.{key}'")
    val = d[key]
    if not isinstance(val, types) or (isinstance(val, bool) and types is not bool):
        fail(f"has metadata whose '{where}.{key}' is of type {type(val).__name__}")
    return val


def _ints(val, where: str, fail: Callable, low: int = 1) -> list[int]:
    if not isinstance(val, list) or not all(isinstance(k, int) and not isinstance(k, bool) and k >= low
                                            for k in val):
        fail(f"has metadata whose '{where}' is {str(val)[:60]}, not a list of integers >= {low}")
    return val


def _array(arrays, name: str, dtype: np.dtype, ndim: int, fail: Callable, *, finite: bool = True) -> np.ndarray:
    a = arrays.get(name)
    if a is None:
        fail(f"has no array '{name}'")
    if a.dtype != dtype or a.ndim != ndim:
        fail(f"has array '{name}' of dtype {a.dtype} with {a.ndim} dimensions; expected {dtype} with {ndim}")
    if finite and a.size and not np.all(np.isfinite(a)):
        fail(f"has NaN or infinite entries in array '{name}'")
    return a


def decode(desc, arrays: Mapping[str, np.ndarray], fail: Callable, written_by=None):
    """The strategy described by ``desc`` with ``arrays``, after checking that kind, shapes and values agree.

    ``fail(what, remedy=...)`` raises; it is called with a phrase completing "the file ...". ``written_by``: the
    file's ``mmopt_version``, named when the kind is unknown (load calls this after the checksums match, so such a
    file is intact: a newer mmopt's kind; the refusal blamed damage and said to restore a copy, a helper's audit).
    """
    kind = field(desc, "kind", str, "strategy", fail)
    if kind not in KINDS:
        from mmopt import __version__
        fail(f"holds a strategy of unknown kind {kind!r:.40}, which this mmopt ({__version__}) cannot read (it knows "
             f"{list(KINDS)}; the file says it was written by mmopt {written_by!r:.20})",
             remedy="Upgrade mmopt to the version that wrote the file (or newer); its checksums match, so it is not "
                    "damaged.")
    name = field(desc, "name", str, "strategy", fail)
    shape = _ints(field(desc, "shape", list, "strategy", fail), "strategy.shape", fail)
    dshape = _ints(field(desc, "domain_shape", list, "strategy", fail), "strategy.domain_shape", fail)
    N = field(desc, "domain_size", int, "strategy", fail)
    p = field(desc, "n_rows", int, "strategy", fail)
    if len(shape) != 2 or shape != [p, N] or not dshape or math.prod(dshape) != N:
        fail(f"describes inconsistent shapes: A is {shape}, n_rows {p}, domain_size {N}, attribute sizes {dshape} "
             "(A must be n_rows × domain_size, and the attribute sizes must multiply to the domain size)")
    if kind in pt.KINDS:
        if len(dshape) != 1:
            fail(f"describes a {kind} strategy over attribute sizes {dshape}; expected one attribute")
        return pt.decode(desc, arrays, N, name, field=field, array=_array, same_names=_same_names, fail=fail)
    for module in _FAMILIES:
        if kind in module.KINDS:
            return module.decode(desc, arrays, dshape, name, field=field, array=_array, same_names=_same_names,
                                 build=_build, fail=fail)
    expected = {"dense": {"matrix"}, "marginals": {"masks", "weights"}}.get(kind)
    if kind == "dense":
        _same_names(arrays, expected, fail)
        A = _array(arrays, "matrix", F8, 2, fail)
        if list(A.shape) != shape or len(dshape) != 1:
            fail(f"has a {A.shape[0]}×{A.shape[1]} matrix but its metadata says {shape}")
        return _build(lambda: Strategy(A, name), fail)
    w = _array(arrays, "weights", F8, 1, fail)
    if w.size == 0 or not np.all(w > 0):
        fail("has term weights that are not all > 0")
    d = len(dshape)
    if kind == "marginals":
        _same_names(arrays, expected, fail)
        masks = _array(arrays, "masks", I8, 1, fail).tolist()
        if len(masks) != w.size:
            fail(f"has {len(masks)} marginal masks for {w.size} weights")
        if len(set(masks)) != len(masks) or not all(0 <= m < 2**d for m in masks):
            fail(f"has repeated marginal masks, or masks outside [0, 2^{d}) for its {d} attributes")
        attrs = [_attributes(m, d) for m in masks]
        if field(desc, "attributes", list, "strategy", fail) != attrs:
            fail("lists marginal attributes that disagree with its masks")
        if sum(math.prod(dshape[i] for i in S) for S in attrs) != p:
            fail(f"says n_rows = {p}, but its marginals have a different number of rows")
        theta = {tuple(S): float(x) for S, x in zip(attrs, w.tolist(), strict=True)}
        return _build(lambda: marginals_strategy(tuple(dshape), theta, name=name), fail)
    factors = field(desc, "factors", list, "strategy", fail)
    terms = field(desc, "terms", list, "strategy", fail)
    _same_names(arrays, {f"factor_{j}" for j in range(len(factors))} | {"weights"}, fail)
    if len(terms) != w.size or (kind == "product") != (len(terms) == 1):
        fail(f"describes a '{kind}' strategy with {len(terms)} term(s) and {w.size} weight(s) (a product has one "
             "term, a union several, each with one weight)")
    mats = []
    for j, meta in enumerate(factors):
        F = _array(arrays, f"factor_{j}", F8, 2, fail)
        if list(F.shape) != _ints(field(meta, "shape", list, f"strategy.factors[{j}]", fail), "shape", fail):
            fail(f"has factor {j} of shape {F.shape}, not the {meta['shape']} its metadata says")
        mats.append(_build(lambda F=F, j=j, meta=meta: Strategy(
            F, field(meta, "name", str, f"strategy.factors[{j}]", fail)), fail))
    used = set()
    for k, row in enumerate(terms):
        row = _ints(row, f"strategy.terms[{k}]", fail, low=0)
        if len(row) != d or any(j >= len(mats) for j in row) or \
                [mats[j].domain_size for j in row] != dshape:
            fail(f"has term {k} whose factors' column counts are not the attribute sizes {dshape}")
        used.update(row)
    if used != set(range(len(mats))):
        fail("stores factors that no term uses")
    if sum(math.prod(mats[j].matrix.shape[0] for j in row) for row in terms) != p:
        fail(f"says n_rows = {p}, but its terms have a different number of rows")
    products = tuple(StrategyProduct(tuple(mats[j] for j in row), x) for row, x in zip(terms, w.tolist(), strict=True))
    return _build(lambda: ImplicitStrategy(products, name), fail)


def _same_names(arrays, expected: set, fail: Callable) -> None:
    if set(arrays) != expected:
        fail(f"holds arrays {sorted(arrays)} where its kind needs {sorted(expected)}")


def _build(make: Callable, fail: Callable):
    try:
        return make()
    except (ValueError, TypeError) as exc:
        fail(f"describes a strategy that cannot be rebuilt ({exc})")
