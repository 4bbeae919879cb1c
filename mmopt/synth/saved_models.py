"""The fitted models of :mod:`mmopt.synth` as named float64 arrays plus a JSON description, and back, exactly.

Notation: see README and :mod:`mmopt.synth.saved` (the file). Each model is stored by the arrays and structure it
holds, never pickled, so the rebuilt model has bit-identical tables and gives bit-identical marginals and, from the
same seed, the same records:

- ``tree`` (MST's :class:`~mmopt.synth.tree.TreeModel`): the one-way tables, the parent of each attribute, the
  breadth-first order, the edge tables and the conditionals (arrays ``model_oneway_i``, ``model_table_k``,
  ``model_conditional_k``);
- ``joint`` (:class:`~mmopt.synth.joint.JointModel`): the whole table P (``model_table``);
- ``junction`` (:class:`~mmopt.synth.junction.JunctionModel`): the cliques, their parents, the beliefs μ_K and the
  warm-start θ_M (``model_belief_k``, ``model_theta_k``);
- ``residual`` (:class:`~mmopt.synth.estimate.ResidualModel`): the measured cliques, the sampler's structure and
  the least-squares estimates r̂_S with their variances (:func:`encode_estimates`); its marginals are recomputed
  from them by the same code (the cache it held is a function of them).

Decoding checks every shape against the domain, the forests for cycles and the arrays for NaN or infinities, and
refuses through ``fail`` (:func:`mmopt.persist._files.refuser`) with what is wrong.
"""

from __future__ import annotations

import math

import numpy as np

from mmopt._base.jsonable import number, to_float
from mmopt.synth.compress import Compression
from mmopt.synth.estimate import ResidualModel
from mmopt.synth.joint import JointModel
from mmopt.synth.junction import JunctionModel
from mmopt.synth.residuals import ResidualEstimates
from mmopt.synth.tree import TreeModel

__all__ = ["KINDS", "decode_compression", "decode_estimates", "decode_model", "encode_compression",
           "encode_estimates", "encode_model"]

F8, I8 = np.dtype("<f8"), np.dtype("<i8")  # little-endian on every machine, as mmopt.save's files
KINDS = {TreeModel: "tree", JointModel: "joint", JunctionModel: "junction", ResidualModel: "residual"}
STATUSES = ("optimal", "optimal_inaccurate", "user_limit")


def _exact(a, dtype: np.dtype, what: str) -> np.ndarray:
    """``a`` as ``dtype`` when that changes no value (a float32 table would load as another model), else a
    ValueError."""
    a = np.asarray(a)
    if a.dtype.kind != dtype.kind or a.dtype.itemsize != dtype.itemsize:
        raise ValueError(f"Synthetic.save: the model's {what} is an array of {a.dtype}, not {dtype}: it cannot be "
                         "saved exactly.")
    return a.astype(dtype, order="C", copy=False)  # (ascontiguousarray made a 0-d array 1-d)


def encode_model(model, shape) -> tuple[dict, dict]:
    """(description, arrays) of ``model`` over attribute sizes ``shape`` (module docstring); a ValueError for a
    model of another class."""
    kind = KINDS.get(type(model))
    if kind is None:
        raise ValueError(f"Synthetic.save: the model is a {type(model).__name__}, which the file format does not "
                         "hold. It saves what mst and aim return: TreeModel (mst) and JointModel, JunctionModel or "
                         "ResidualModel (aim, estimator 'joint', 'junction' or 'residual').")
    if tuple(model.shape if kind != "joint" else model.table.shape) != tuple(shape):
        raise ValueError(f"Synthetic.save: the model is over attribute sizes {tuple(model.shape)}, the domain's are "
                         f"{tuple(shape)}.")
    desc: dict = {"kind": kind, "total": number(model.total)}
    if kind == "tree":
        desc |= {"parent": list(model.parent), "order": list(model.order), "edges": [list(e) for e in model.tables],
                 "children": list(model.conditionals)}
        arrays = {f"model_oneway_{i}": _exact(p, F8, "one-way table") for i, p in enumerate(model.oneway)}
        arrays |= {f"model_table_{k}": _exact(T, F8, "edge table") for k, T in enumerate(model.tables.values())}
        arrays |= {f"model_conditional_{k}": _exact(K, F8, "conditional")
                   for k, K in enumerate(model.conditionals.values())}
        return desc, arrays
    if kind == "residual":
        est, arrays = encode_estimates(model.estimates, "model_estimates")
        return desc | {"cliques": [list(C) for C in model.cliques], "structure": [list(C) for C in model.structure],
                       "estimates": est}, arrays
    desc |= {"loss": number(model.loss), "status": model.status, "iterations": int(model.iterations)}
    if kind == "joint":
        return desc, {"model_table": _exact(model.table, F8, "table")}
    arrays = {f"model_belief_{k}": _exact(mu, F8, "belief") for k, mu in enumerate(model.beliefs)}
    arrays |= {f"model_theta_{k}": _exact(th, F8, "θ") for k, (_, th) in enumerate(model.theta)}
    return desc | {"cliques": [list(K) for K in model.cliques], "parent": [int(p) for p in model.parent],
                   "theta": [list(M) for M, _ in model.theta], "step": number(model.step)}, arrays


def encode_estimates(est: ResidualEstimates, prefix: str) -> tuple[dict, dict]:
    """(description, arrays) of least-squares estimates: each r̂_S as ``<prefix>_k`` in the order of
    ``subsets``, the variances v_S as ``<prefix>_variances``."""
    subsets = list(est.values)
    arrays = {f"{prefix}_{k}": _exact(est.values[S], F8, f"estimate of {S}") for k, S in enumerate(subsets)}
    arrays[f"{prefix}_variances"] = _exact([est.variances[S] for S in subsets], F8, "variances")
    return {"shape": list(est.shape), "subsets": [list(S) for S in subsets]}, arrays


def encode_compression(comp: Compression, prefix: str) -> tuple[dict, dict]:
    """(description, arrays) of MST's compression: each map as ``<prefix>_map_i``, each share ``<prefix>_share_i``."""
    arrays = {f"{prefix}_map_{i}": _exact(m, I8, "compression map") for i, m in enumerate(comp.maps)}
    arrays |= {f"{prefix}_share_{i}": _exact(q, F8, "compression share") for i, q in enumerate(comp.shares)}
    return {"original": list(comp.original), "shape": list(comp.shape), "maps": len(comp.maps)}, arrays


# -- decoding -------------------------------------------------------------------------------------------------
def take(arrays: dict, name: str, shape, fail, dtype: np.dtype = F8) -> np.ndarray:
    """Remove and return array ``name`` after checking its dtype, shape and (floats) finiteness."""
    a = arrays.pop(name, None)
    if a is None:
        fail(f"has no array '{name}'")
    if a.dtype != dtype or a.shape != tuple(shape):
        fail(f"has array '{name}' of dtype {a.dtype} and shape {a.shape}; expected {dtype} of shape {tuple(shape)}")
    if dtype.kind == "f" and a.size and not np.all(np.isfinite(a)):
        fail(f"has NaN or infinite entries in array '{name}'")
    return a


def entry(d, key: str, types, where: str, fail):
    """``d[key]`` when present and of ``types`` (a bool is no int here), else refused."""
    if not isinstance(d, dict) or key not in d:
        fail(f"has metadata without '{where}.{key}'")
    val, allowed = d[key], types if isinstance(types, tuple) else (types,)
    if not isinstance(val, allowed) or (isinstance(val, bool) and bool not in allowed):
        kinds = " or ".join(t.__name__ for t in allowed)
        fail(f"has metadata whose '{where}.{key}' is {val!r:.40}, not of type {kinds}")
    return val


def real(d, key: str, where: str, fail, *, finite: bool = True) -> float:
    """A float stored by :func:`mmopt._base.jsonable.number`."""
    val = entry(d, key, (int, float, str), where, fail)
    try:
        x = to_float(val)
    except KeyError:
        fail(f"has metadata whose '{where}.{key}' is {val!r:.40}, not a number")
    if finite and not math.isfinite(x):
        fail(f"has metadata whose '{where}.{key}' is {val!r:.20}, not a finite number")
    return x


def ints(val, where: str, fail, low: int, high: int | None = None) -> list[int]:
    """A list of integers in [low, high)."""
    if not isinstance(val, list) or not all(isinstance(k, int) and not isinstance(k, bool) and k >= low
                                            and (high is None or k < high) for k in val):
        fail(f"has metadata whose '{where}' is {str(val)[:60]}, not a list of integers ≥ {low}"
             + ("" if high is None else f" and < {high}"))
    return val


def attribute_sets(val, d: int, where: str, fail) -> tuple[tuple[int, ...], ...]:
    """A list of attribute sets, each a strictly increasing list of indices below ``d``."""
    if not isinstance(val, list):
        fail(f"has metadata whose '{where}' is {str(val)[:60]}, not a list of attribute sets")
    out = tuple(tuple(ints(S, where, fail, 0, d)) for S in val)
    if any(list(S) != sorted(set(S)) for S in out):
        fail(f"has metadata whose '{where}' holds an attribute set that is not strictly increasing")
    return out


def _forest(parent, where: str, fail) -> None:
    """Refuse a parent list with a cycle (the models walk it to the roots)."""
    for k in range(len(parent)):
        p, steps = parent[k], 0
        while p is not None and p >= 0:
            p, steps = parent[p], steps + 1
            if steps > len(parent):
                fail(f"has metadata whose '{where}' contains a cycle, not a forest")


def decode_model(desc, arrays: dict, shape: tuple, fail):
    """The model described by ``desc`` over attribute sizes ``shape``, its arrays removed from ``arrays``.

    Examples
    --------
    >>> from mmopt.synth.tree import tree_model
    >>> T = np.array([[3.0, 1.0], [0.0, 4.0]])
    >>> m = tree_model((2, 2), 8.0, [T.sum(1), T.sum(0)], {(0, 1): T})
    >>> desc, arrays = encode_model(m, (2, 2))
    >>> desc["kind"], sorted(arrays)
    ('tree', ['model_conditional_0', 'model_oneway_0', 'model_oneway_1', 'model_table_0'])
    >>> def fail(what):
    ...     raise ValueError(what)
    >>> back = decode_model(desc, arrays, (2, 2), fail)
    >>> back.marginal((0, 1)).tolist(), arrays                    # every array used
    ([[3.0, 1.0], [0.0, 4.0]], {})
    """
    kind = entry(desc, "kind", str, "model", fail)
    if kind not in KINDS.values():
        fail(f"holds a model of kind {kind!r:.40}, not one of {sorted(KINDS.values())}")
    d, total = len(shape), real(desc, "total", "model", fail)
    if kind == "residual":
        est = decode_estimates(entry(desc, "estimates", dict, "model", fail), arrays, "model_estimates", fail)
        if est.shape != shape:
            fail(f"holds estimates over attribute sizes {est.shape}, not the domain's {shape}")
        cliques = attribute_sets(entry(desc, "cliques", list, "model", fail), d, "model.cliques", fail)
        structure = attribute_sets(entry(desc, "structure", list, "model", fail), d, "model.structure", fail)
        return ResidualModel(est, cliques, total, structure)
    if kind == "tree":
        parent = entry(desc, "parent", list, "model", fail)
        if len(parent) != d or not all(p is None or (isinstance(p, int) and not isinstance(p, bool) and 0 <= p < d)
                                       for p in parent):
            fail(f"has metadata whose 'model.parent' is {str(parent)[:60]}, not a parent (or null) per attribute")
        order = ints(entry(desc, "order", list, "model", fail), "model.order", fail, 0, d)
        place = {v: j for j, v in enumerate(order)}
        if sorted(order) != list(range(d)) or any(p is not None and place[p] > place[v] for v, p in enumerate(parent)):
            fail("has metadata whose 'model.order' is not a breadth-first order of its attributes")
        children = ints(entry(desc, "children", list, "model", fail), "model.children", fail, 0, d)
        edges = attribute_sets(entry(desc, "edges", list, "model", fail), d, "model.edges", fail)
        links = {c for c, p in enumerate(parent) if p is not None}
        if set(children) != links or len(children) != len(links) or \
                sorted(edges) != sorted(tuple(sorted((c, parent[c]))) for c in links) or len(set(edges)) != len(edges):
            fail("has metadata whose tree edges and conditionals do not match its parents")
        oneway = tuple(take(arrays, f"model_oneway_{i}", (shape[i],), fail) for i in range(d))
        tables = {e: take(arrays, f"model_table_{k}", (shape[e[0]], shape[e[1]]), fail) for k, e in enumerate(edges)}
        conditionals = {c: take(arrays, f"model_conditional_{k}", (shape[parent[c]], shape[c]), fail)
                        for k, c in enumerate(children)}
        return TreeModel(shape, total, oneway, tuple(parent), tuple(order), conditionals, tables)
    loss = real(desc, "loss", "model", fail, finite=False)
    status = entry(desc, "status", str, "model", fail)
    iterations = entry(desc, "iterations", int, "model", fail)
    if status not in STATUSES or iterations < 0:
        fail(f"has metadata whose model status {status!r:.30} or iterations {iterations} is not a fit's")
    if kind == "joint":
        return JointModel(take(arrays, "model_table", shape, fail), total, loss, status, iterations)
    cliques = attribute_sets(entry(desc, "cliques", list, "model", fail), d, "model.cliques", fail)
    parent = ints(entry(desc, "parent", list, "model", fail), "model.parent", fail, -1, len(cliques))
    if len(parent) != len(cliques):
        fail(f"has {len(parent)} clique parents for {len(cliques)} cliques")
    _forest(parent, "model.parent", fail)
    measured = attribute_sets(entry(desc, "theta", list, "model", fail), d, "model.theta", fail)
    beliefs = tuple(take(arrays, f"model_belief_{k}", [shape[i] for i in K], fail) for k, K in enumerate(cliques))
    theta = tuple((M, take(arrays, f"model_theta_{k}", [shape[i] for i in M], fail)) for k, M in enumerate(measured))
    return JunctionModel(shape, cliques, tuple(parent), beliefs, total, loss, status, iterations, theta,
                         real(desc, "step", "model", fail))


def _sizes(desc, key: str, where: str, fail) -> tuple[int, ...]:
    return tuple(ints(entry(desc, key, list, where, fail), f"{where}.{key}", fail, 1))


def decode_estimates(desc, arrays: dict, prefix: str, fail) -> ResidualEstimates:
    """The estimates :func:`encode_estimates` wrote under ``prefix``; r̂_∅ comes back as a numpy float, as measured."""
    shape = _sizes(desc, "shape", prefix, fail)
    subsets = attribute_sets(entry(desc, "subsets", list, prefix, fail), len(shape), f"{prefix}.subsets", fail)
    if len(set(subsets)) != len(subsets):
        fail(f"has metadata whose '{prefix}.subsets' lists a set twice")
    variances = take(arrays, f"{prefix}_variances", (len(subsets),), fail)
    if np.any(variances <= 0):
        fail(f"has a variance ≤ 0 in array '{prefix}_variances'")
    values = {}
    for k, S in enumerate(subsets):
        r = take(arrays, f"{prefix}_{k}", [shape[i] for i in S], fail)
        values[S] = r[()] if r.ndim == 0 else r
    return ResidualEstimates(shape, values, dict(zip(subsets, variances.tolist(), strict=True)))


def decode_compression(desc, arrays: dict, prefix: str, fail) -> Compression:
    """The compression :func:`encode_compression` wrote under ``prefix``."""
    original, shape = _sizes(desc, "original", prefix, fail), _sizes(desc, "shape", prefix, fail)
    count = entry(desc, "maps", int, prefix, fail)
    if len(shape) != len(original) or count not in (0, len(original)) or any(
            m > n for m, n in zip(shape, original, strict=True)):
        fail(f"has a compression from {original} to {shape} with {count} maps, which do not fit")
    maps = tuple(take(arrays, f"{prefix}_map_{i}", (original[i],), fail, I8) for i in range(count))
    if any(m.size and (m.min() < 0 or m.max() >= shape[i]) for i, m in enumerate(maps)):
        fail(f"has a compression map onto cells outside its compressed sizes {shape}")
    shares = tuple(take(arrays, f"{prefix}_share_{i}", (original[i],), fail) for i in range(count))
    return Compression(original, shape, maps, shares)
