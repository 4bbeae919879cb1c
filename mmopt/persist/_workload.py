"""The workload a strategy file records: its description, checked against the strategy's domain, and a sketch of
its Gram, so that a file loaded with other queries over the same cells is said, not silently used (a helper's
probe: a plan for all_range:8 released on prefix:8; random_range:16:10:0 and :1 share the name
'random_range(16,10)').

    sketch(G) = (tr G,  rᵀ G r,  Σ|G_ij|,  uᵀ G u,  vᵀ G v),   r_c = cos(1 + c·γ), γ the golden angle,
                                                              u the fixed probe of :mod:`mmopt._base.probe`, v = 2u − 1

The same queries in any representation (rows, Gram only, Kronecker or union form, a stream workload's dense twin)
have the same G over the same cells in the same order, so the same sketch up to round-off; other queries differ
in it except on a measure-zero set. The quadratic forms are compared on G/tr G, to 10⁻⁹ of Σ|G|/tr G: a scaled
workload (2·W, a stack with every weight doubled) has the same best strategy and is not said. The oscillating r
alone missed kron(all_range(64), total(64)) against kron(total(64), all_range(64)) (rᵀGr is O(m) where Σ|G| grows
with the squared range length, so round-off's allowance swamped it; a helper's audit): u, non-negative, weighs
every entry. Files with the first three numbers only (written before) are compared on them, as then. Computed
for workloads of at most :data:`MAX_CELLS` cells (a dense Gram); larger ones are not compared.
"""

from __future__ import annotations

import math

import numpy as np

from mmopt._base.jsonable import jsonable
from mmopt._base.probe import probe_histogram
from mmopt.dense._workload_type import not_a_workload
from mmopt.structured.strategies import ImplicitStrategy
from mmopt.workload import ImplicitWorkload, Workload, structure_of

__all__ = ["MAX_CELLS", "attribute_sizes", "check_recorded_attributes", "differs", "sketch", "workload_metadata"]

MAX_CELLS = 4096
_GOLDEN_ANGLE = math.pi * (3.0 - math.sqrt(5.0))


def _gram(workload) -> np.ndarray | None:
    from mmopt.toeplitz.error import StreamWorkload  # lazy, as persist's other uses of the stream layer
    if isinstance(workload, StreamWorkload):
        workload = workload.to_workload()
    if callable(getattr(workload, "gram", None)):  # implicit: its dense Gram (N ≤ MAX_CELLS)
        return np.asarray(workload.gram(), dtype=float)
    mean = getattr(workload, "mean_gram", None)
    return None if mean is None else np.asarray(mean, dtype=float) * float(workload.n_queries)


def sketch(workload) -> list[float] | None:
    """(tr G, rᵀGr, Σ|G|, uᵀGu, vᵀGv) of ``workload`` (module docstring), or None past :data:`MAX_CELLS` cells."""
    if workload.domain_size > MAX_CELLS:
        return None
    G = _gram(workload)
    if G is None:
        return None
    r = np.cos(1.0 + _GOLDEN_ANGLE * np.arange(G.shape[0]))
    u = probe_histogram(G.shape[0])
    v = 2.0 * u - 1.0
    return [float(np.trace(G)), float(r @ G @ r), float(np.abs(G).sum()), float(u @ G @ u), float(v @ G @ v)]


def differs(given, recorded) -> bool:
    """Whether two sketches are of different Grams up to scale, beyond round-off (module docstring): Σ|G|/tr G to
    10⁻⁹ relative, each quadratic form over tr G to 10⁻⁹ of Σ|G|/tr G (|probe| ≤ 1, so entries perturbed by δ move
    it by at most Σ|δ|). A three-number sketch (an older file): the trace to 10⁻⁹ and rᵀGr to 10⁻⁹ of Σ|G|, as
    written then. Either missing: not compared."""
    if not given or not recorded or len(recorded) not in (3, 5):
        return False
    mine, theirs = [float(x) for x in given], [float(x) for x in recorded]
    if len(theirs) == 3:
        (t1, q1, s1), (t2, q2, s2) = mine[:3], theirs
        scale = max(s1, s2, np.finfo(float).tiny)
        return abs(t1 - t2) > 1e-9 * max(abs(t1), abs(t2)) or abs(q1 - q2) > 1e-9 * scale
    t1, t2 = (max(x[0], np.finfo(float).tiny) for x in (mine, theirs))
    a, b = np.array(mine[1:]) / t1, np.array(theirs[1:]) / t2  # rᵀGr, Σ|G|, uᵀGu, vᵀGv over tr G
    if abs(a[1] - b[1]) > 1e-9 * max(a[1], b[1]):
        return True
    return bool(np.any(np.abs(a[[0, 2, 3]] - b[[0, 2, 3]]) > 1e-9 * max(a[1], b[1])))


def attribute_sizes(strategy) -> tuple[int, ...] | None:
    """A strategy's own attribute sizes (implicit and residual strategies have them), else None (a dense or stream
    strategy knows only its N cells)."""
    from mmopt.hierarchy.nodes import NodeStrategy
    from mmopt.hierarchy.strategy import HierarchyStrategy
    from mmopt.structured.residual.strategy import ResidualStrategy
    kinds = ImplicitStrategy | ResidualStrategy | HierarchyStrategy | NodeStrategy
    return tuple(strategy.shape) if isinstance(strategy, kinds) else None


def check_recorded_attributes(given: dict, recorded: dict | None, caller: str) -> None:
    """A workload over several attributes whose sizes differ from those of the workload the file records (a dense
    strategy carries no attribute sizes of its own, so the cell count alone matched): the same N cells in another
    attribute order, or other attributes, are other cells. A flat workload (one attribute) is not compared."""
    if recorded is None:
        return
    sizes, saved = list(given["domain_shape"]), list(recorded.get("domain_shape") or [])
    if len(sizes) > 1 and len(saved) > 1 and sizes != saved:
        raise ValueError(f"{caller}: the 'workload' parameter ('{given['name']}') is over attribute sizes "
                         f"{tuple(sizes)}, but the strategy was saved with a workload ('{recorded.get('name')}') over "
                         f"{tuple(saved)}: the same {given['domain_size']:,} cells in another layout are other cells. "
                         "Build the workload in the saved attribute order.")


def workload_metadata(workload, strategy, caller: str, what: str) -> dict:
    """The workload's description, after checking that its domain is the strategy's."""
    from mmopt.hierarchy.workload import HierarchyWorkload  # lazy, as StreamWorkload
    from mmopt.toeplitz.error import StreamWorkload  # lazy: mmopt.toeplitz.prefix(n) / all_range(n)

    if isinstance(workload, HierarchyWorkload):  # recorded as the queries they are (it was refused; a helper's audit)
        workload = workload.to_implicit()
    if not isinstance(workload, Workload | ImplicitWorkload | StreamWorkload):  # with the remedy for a bare matrix
        raise not_a_workload(workload, name=what.split("'")[1], caller=caller,
                             expected="a Workload, an implicit workload or a mmopt.toeplitz workload")
    N, n = workload.domain_size, strategy.domain_size
    structure = structure_of(workload)
    sizes = list(structure.shape) if structure is not None else [N]
    own = attribute_sizes(strategy)
    if N != n or (structure is not None and own is not None and tuple(sizes) != own):
        shown = own if own is not None else (n,)
        raise ValueError(f"{caller}: the {what} ('{workload.name}') is over attribute sizes {tuple(sizes)} "
                         f"(N = {N:,}) but the strategy '{strategy.name}' is over {shown} (N = {n:,}). Pass the "
                         "workload the strategy was made for.")
    kind = "implicit" if isinstance(workload, ImplicitWorkload) else "stream" if isinstance(
        workload, StreamWorkload) else "dense"
    return jsonable({"name": workload.name, "kind": kind, "domain_shape": sizes, "domain_size": N,
                     "n_queries": workload.n_queries, "gram_sketch": sketch(workload)})
