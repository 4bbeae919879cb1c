"""The multi-attribute panel of experiments.dpbench: data-adaptive synthesisers against the matrix mechanism on
all k-way marginals of a table with several attributes.

Data: the CPS 1988 extract shipped with mmopt (:func:`mmopt.records.datasets.cps1988`: 28,155 records, 7
attributes, 7 × 6 × 7 × 2 × 2 × 4 × 2 = 9,408 cells), studied as DPBench studies a histogram: its shape
(counts ÷ total) at several scales. PrivBayes, iReduct and DualQuery count records, so the counts must be whole
numbers: at scale s the table is one multinomial draw of s records from the shape (DPBench's own sampling, Hay
et al. 2016 §4), fixed per (dataset, scale) and the same for every algorithm and trial — unlike the 1-D and
2-D panels, whose x = scale · shape. The 2-D DPBench files are not used here: as 2-attribute tables PrivBayes
would reduce to noisy counts of the whole table.

Workload "marginals": all k-way marginals (k = 2: 21 tables, 369 cells). Error: DPBench's scaled per-query
error, the mean over every marginal cell of |M x̂ − M x|, divided by the scale. Algorithms:

* data-independent: "identity" (Laplace noise on every cell, the marginals summed from them) and "mmopt",
  :func:`mmopt.optimize` with ``method="marginals"`` (HDMM's weighted-marginals search, L1: Laplace noise),
  least squares (:func:`mmopt.structured.matrix_mechanism`);
* data-adaptive: PrivBayes (:func:`mmopt.adaptive.privbayes`, degree 2), iReduct and DualQuery (on the
  workload's marginals, at their defaults), MWEM (experiments.dpbench's settings, the workload's 369 marginal
  cells as its candidate queries) and Uniform.

An algorithm mmopt.adaptive does not have (an older install) is left out of the run and named in the notes
(:func:`missing`).
"""

from __future__ import annotations

import itertools
import time

import numpy as np

import mmopt
from experiments import _dpbench_algorithms as alg
from mmopt import adaptive as ad
from mmopt import strategy as st
from mmopt.structured import marginals as implicit_marginals
from mmopt.structured import mechanism as smech

__all__ = ["DATASET", "MarginalContext", "attribute_sets", "cps1988_shape", "marginal_errors", "marginal_matrix",
           "missing", "sample"]

DATASET = "CPS1988"
_FUNCTIONS = {"PrivBayes": "privbayes", "iReduct": "ireduct", "DualQuery": "dual_query"}


def missing() -> tuple[str, ...]:
    """The multi-attribute algorithms that mmopt.adaptive does not provide in this install."""
    return tuple(a for a, f in _FUNCTIONS.items() if not hasattr(ad, f))


def cps1988_shape() -> np.ndarray:
    """The shape (counts ÷ total) of the shipped CPS 1988 records, one axis per attribute."""
    from mmopt.records import marginal_counts
    from mmopt.records.datasets import cps1988

    records, domain = cps1988()
    full = tuple(range(len(domain.shape)))
    x = np.asarray(marginal_counts(records, domain, [full])[full], dtype=float)
    return x / x.sum()


def sample(shape: np.ndarray, scale: int, gen: np.random.Generator) -> np.ndarray:
    """A table of ``scale`` records drawn from ``shape`` (multinomial: whole counts summing to ``scale``)."""
    p = np.asarray(shape, dtype=float).ravel()
    return gen.multinomial(int(scale), p / p.sum()).reshape(np.shape(shape)).astype(float)


def attribute_sets(d: int, k: int) -> list[tuple[int, ...]]:
    """Every k-subset of the d attributes, in lexicographic order."""
    return list(itertools.combinations(range(d), min(k, d)))


def _marginal(t: np.ndarray, keep: tuple[int, ...]) -> np.ndarray:
    """Sum ``t`` (a leading trial axis, then the attributes) over the attributes not in ``keep``."""
    drop = tuple(1 + i for i in range(t.ndim - 1) if i not in keep)
    return t.sum(axis=drop)


def marginal_errors(estimates: np.ndarray, x: np.ndarray, sets) -> np.ndarray:
    """Mean |M x̂ − M x| over every cell of every marginal in ``sets``, one value per trial."""
    x = np.asarray(x, dtype=float)
    e = np.asarray(estimates, dtype=float).reshape(-1, *x.shape) - x  # marginals are linear: M x̂ − M x = M e
    total, cells = np.zeros(e.shape[0]), 0
    for S in sets:
        m = _marginal(e, tuple(S))
        total += np.abs(m).reshape(e.shape[0], -1).sum(axis=1)
        cells += m[0].size
    return total / cells


def marginal_matrix(shape: tuple[int, ...], sets) -> np.ndarray:
    """The 0/1 query matrix (marginal cells × cells, row-major) of the marginals in ``sets`` (MWEM's candidates)."""
    N = int(np.prod(shape))
    grid = np.indices(shape).reshape(len(shape), N)  # each cell's attribute values, row-major
    rows = []
    for S in sets:
        sub = tuple(shape[i] for i in S)
        M = np.zeros((int(np.prod(sub)), N))
        M[np.ravel_multi_index(tuple(grid[i] for i in S), sub), np.arange(N)] = 1.0
        rows.append(M)
    return np.vstack(rows)


class MarginalContext(alg.Context):
    """experiments.dpbench's Context for the multi-attribute panel: ``side`` is the table's shape (a tuple)."""

    def __init__(self, seed: int, *, k: int = 2, **kw):
        super().__init__(seed, **kw)
        self.k = k

    def sets(self, shape) -> list[tuple[int, ...]]:
        return attribute_sets(len(shape), self.k)

    def workload(self, wname: str, shape):
        return self._cached(("W", wname, shape), lambda: implicit_marginals(shape, self.k))

    def _make_strategy(self, name: str, wname: str, shape) -> tuple:
        W = self.workload(wname, shape)
        t0 = time.perf_counter()
        if name == "mmopt":
            res = mmopt.optimize(W, method="marginals", seed=self.seed, verbose=False)
            A, record = res.strategy, {"method": res.method, "status": res.status, "objective": res.objective}
        elif name == "identity":
            A, record = st.kron(*(st.identity(n) for n in shape), name="identity"), {}
        else:
            raise ValueError(f"MarginalContext: no data-independent strategy '{name}' for marginals.")
        record["seconds"] = round(time.perf_counter() - t0, 2)
        record["rmse_at_eps_1"] = mmopt.evaluate(W, A, mmopt.Privacy(1.0)).rmse
        return A, record

    def queries(self, wname: str, shape):
        return self._cached(("Q", wname, shape), lambda: marginal_matrix(shape, self.sets(shape)))

    def error(self, wname: str, estimates: np.ndarray, x: np.ndarray) -> np.ndarray:
        return marginal_errors(estimates, x, self.sets(x.shape))

    def estimates(self, alg_name: str, wname: str, x: np.ndarray, eps: float, trials: int, key: tuple) -> np.ndarray:
        """(trials, cells) estimates; ``key`` seeds the noise as in :meth:`Context.estimates`."""
        shape = x.shape
        gen = np.random.default_rng([self.seed, *key, alg.ALGORITHMS.index(alg_name)])
        if alg_name in alg.INDEPENDENT:
            W, A = self.workload(wname, shape), self.strategy(alg_name, wname, shape)
            out = smech.matrix_mechanism(W, A, x, mmopt.Privacy(eps), rng=gen, size=trials, max_answers=0)
            return out.estimate.reshape(trials, -1)
        if alg_name == "MWEM":
            Q = self.queries(wname, shape)
            return np.stack([ad.mwem(x.ravel(), Q, eps, rng=gen, **alg.MWEM).estimate.ravel() for _ in range(trials)])
        if alg_name == "Uniform":
            return np.stack([ad.uniform(x.ravel(), eps, rng=gen).estimate.ravel() for _ in range(trials)])
        if alg_name == "PrivBayes":
            return np.stack([ad.privbayes(x, eps, rng=gen).estimate.ravel() for _ in range(trials)])
        fn = getattr(ad, _FUNCTIONS[alg_name])  # iReduct, DualQuery: on the workload's marginals
        sets = self.sets(shape)
        return np.stack([fn(x, eps, marginals=sets, rng=gen).estimate.ravel() for _ in range(trials)])
