"""AIM's estimator without Private-PGM: least squares in the residual basis, local maximum entropy, and a sampler.

Notation: see README and :mod:`mmopt.synth.residuals`. This is :func:`mmopt.synth.aim`'s
``estimator="residual"`` (asked for; "auto" takes the joint table or the junction tree, which are consistent), and it
is a **heuristic** in two of its three parts:

1. **Measured marginals** (every subset of the clique measured): the generalised least-squares marginal from all
   measurements (:meth:`ResidualEstimates.marginal`, unbiased, minimum variance among linear unbiased estimates),
   projected onto the simplex of the noisy total t (:func:`mmopt.synth.projection.simplex`). Guarantee: exact as
   the noise vanishes; each table is non-negative, but tables of different cliques agree on their shared
   sub-marginals only up to the projections (the least-squares tables themselves agree exactly).
2. **Unmeasured marginals** (heuristic): the maximum-entropy table on C whose marginals on the maximal measured
   subsets of C are those of step 1, by iterative proportional fitting from the uniform table (Darroch & Ratcliff
   1972; at most 50 sweeps, stopped at a fixed point, so approximate when the targets disagree). It ignores
   dependencies that Private-PGM's global model would propagate through attributes outside C, so it is *not*
   PGM's estimate.
3. **Records** (heuristic, junction-tree-free): a Bayesian network read off a greedy min-fill triangulation of
   the graph joining the attributes of each measured clique (:func:`elimination`): sampled in reverse elimination
   order, each attribute's parents are its neighbours when it was eliminated, and its conditional comes from the
   step 1–2 table on that family (a clique of the triangulated graph, so every measured clique lies inside some
   family). If those tables were mutually consistent this would sample exactly the decomposable model they define
   (Lauritzen 1996, §2.1.3); they agree only approximately, so the rows' marginals follow the tables only
   approximately. Uniforms are stratified per parent configuration (:func:`mmopt.synth.tree.stratified_uniforms`).
   AIM's size filter keeps the families within its model-size cap. :meth:`ResidualModel.marginal` is the estimate
   of steps 1–2, not the network's marginal.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from mmopt._base.readonly import read_only
from mmopt.structured.residual import closure as cl
from mmopt.synth import projection as pj
from mmopt.synth.residuals import ResidualEstimates
from mmopt.synth.tree import stratified_uniforms

__all__ = ["ResidualModel", "junction_tree_mb"]

#: Sweeps of iterative proportional fitting for an unmeasured marginal.
IPF_SWEEPS = 50


class ResidualModel:
    """The estimator of the module docstring over the measured ``cliques`` (sorted tuples)."""

    def __init__(self, estimates: ResidualEstimates, cliques, total: float, structure=None) -> None:
        self.estimates, self.shape = estimates, estimates.shape
        self.cliques = tuple(cl.maximal(tuple(dict.fromkeys(cliques))))
        # the sampler's graph: the measured cliques, or (AIM) the cliques of a junction tree holding them, which is
        # chordal, so the min-fill elimination of step 3 adds no edge and its families lie inside those cliques
        self.structure = self.cliques if structure is None else tuple(structure)
        self.total = float(total)
        self._cache: dict = {}

    def marginal(self, attributes) -> np.ndarray:
        """The non-negative estimate on the sorted tuple ``attributes`` summing to the total (steps 1–2)."""
        A = tuple(attributes)
        if A not in self._cache:  # read-only: handed out as is, and an edit in place changed the model (a probe)
            if self.estimates.covers(A):
                self._cache[A] = read_only(pj.simplex(self.estimates.marginal(A), self.total))
            else:
                self._cache[A] = read_only(self._max_entropy(A))
        return self._cache[A]

    def _max_entropy(self, A: tuple) -> np.ndarray:
        subs = [S for k in range(len(A) - 1, 0, -1) for S in itertools.combinations(A, k) if self.estimates.covers(S)]
        targets = cl.maximal(subs)
        T = np.full(tuple(self.shape[i] for i in A), self.total / cl.cells(self.shape, A))
        for _ in range(IPF_SWEEPS):
            before = T
            for S in targets:
                axes = tuple(p for p, i in enumerate(A) if i not in S)
                cur = T.sum(axis=axes, keepdims=True)
                want = self.marginal(S).reshape(cur.shape)
                T = T * np.divide(want, cur, out=np.zeros_like(cur), where=cur > 0)
            # a sweep that moves no cell by more than 10⁻¹² of the total is a fixed point of IPF: the next sweeps
            # would return the same table (e.g. disjoint targets, where the first sweep gives their product)
            if np.abs(T - before).max() <= 1e-12 * max(self.total, 1.0):
                break
        return T

    def network(self) -> list[tuple[int, tuple[int, ...]]]:
        """[(attribute, parents)] in sampling order: the reverse of a min-fill elimination of the measured cliques'
        graph, each attribute's parents its neighbours when eliminated (step 3 of the module docstring)."""
        return list(reversed(elimination(self.shape, self.structure)))

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n records (cell codes, n × d) drawn ancestrally from the network (step 3)."""
        codes = np.zeros((n, len(self.shape)), dtype=np.int64)
        for j, parents in self.network():
            fam = tuple(sorted(parents + (j,)))
            T = self.marginal(fam)
            order = [fam.index(i) for i in parents] + [fam.index(j)]
            K = np.transpose(T, order).reshape(-1, self.shape[j])  # rows: parent configurations (C order)
            rows = K.sum(axis=1, keepdims=True)
            fallback = self.marginal((j,)) / max(float(self.marginal((j,)).sum()), 1e-300)
            K = np.where(rows > 0, K / np.where(rows > 0, rows, 1.0), fallback[None, :])
            flat_parent = np.zeros(n, dtype=np.int64)
            for i in parents:
                flat_parent = flat_parent * self.shape[i] + codes[:, i]
            cdf = np.cumsum(K, axis=1)
            cdf = cdf / cdf[:, -1:]
            shifted = (cdf + np.arange(K.shape[0])[:, None]).ravel()
            u = stratified_uniforms(flat_parent, rng)
            idx = np.searchsorted(shifted, flat_parent + u, side="right") - flat_parent * K.shape[1]
            codes[:, j] = np.clip(idx, 0, self.shape[j] - 1)
        return codes


def elimination(shape, cliques) -> list[tuple[int, tuple[int, ...]]]:
    """Greedy min-fill elimination of the graph joining the attributes of each clique: [(v, its neighbours when
    eliminated)] in elimination order (ties: fewest cells, then the smallest v). Every attribute is a node, as the
    1-way marginals are always in the model. Each v with its neighbours is a clique of the triangulated graph."""
    d = len(shape)
    adj: dict = {i: set() for i in range(d)}
    for C in cliques:
        for a, b in itertools.combinations(C, 2):
            adj[a].add(b)
            adj[b].add(a)
    out, left = [], set(range(d))

    def cost(v):
        nb = sorted(adj[v] & left)
        return (sum(1 for a, b in itertools.combinations(nb, 2) if b not in adj[a]), math.prod(shape[i] for i in nb), v)

    while left:
        v = min(left, key=cost)
        nb = tuple(sorted(adj[v] & left))
        for a, b in itertools.combinations(nb, 2):
            adj[a].add(b)
            adj[b].add(a)
        out.append((v, nb))
        left.remove(v)
    return out


def junction_tree_mb(shape, cliques) -> float:
    """Megabytes (float64) of the maximal cliques of a greedy min-fill triangulation of the cliques' graph.

    The size rule of AIM's candidate filter (the paper's ``hypothetical_model_size``, which asks Private-PGM's
    junction tree, built the same way up to ties).

    Examples
    --------
    >>> junction_tree_mb((10, 10, 10), [(0, 1), (1, 2), (0, 2)]) == 1000 * 8 / 2**20   # a triangle: one clique
    True
    """
    found = [tuple(sorted(nb + (v,))) for v, nb in elimination(shape, cliques)]
    return sum(cl.cells(shape, C) for C in cl.maximal(found)) * 8 / 2**20
