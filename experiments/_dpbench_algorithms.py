"""The algorithms of experiments.dpbench: how each one turns (x, ε, seeded noise) into estimates x̂.

Data-independent (the matrix mechanism, least squares; its error does not depend on x):
  identity, H2, HB (:func:`mmopt.strategy.hb`: Qardaji, Yang & Li's branching for the domain size, the root not
  measured; for 2-D the product HB ⊗ HB, b chosen per axis), and "mmopt", the
  optimised strategy: :func:`mmopt.optimize` with ``method="min_error"`` (1-D; one restart of the p-Identity
  local search, ``max_iterations`` iterations: the default 3 × 3,000 takes ~5 min at 1,024 cells) or
  ``method="kron"`` (2-D, HDMM's OPT_⊗). One strategy per (workload, domain), cached for the run.
Post-processed: "mmopt+proj", the same strategy and the same noise draws, then the projection mechanism
  (``reconstruct="projection"``): data-dependent post-processing of a data-independent measurement.
Data-adaptive (:mod:`mmopt.adaptive`, at their defaults unless noted):
  MWEM (DPBench's settings: T = 10 rounds, 100 replay passes of the update, the last iterate as output; the
  total is measured privately with 10% of ε, where DPBench reads it from the data); DAWA-style partitioning
  (ρ = 0.25, H₂ over the buckets, Hilbert order in 2-D); AHP (ρ = 0.85, η = 0.35); Uniform; 1-D only: PHP and
  EFPA (Ács et al. 2012); 2-D only: UGrid, AGrid (Qardaji et al. 2013), the private-median kd-tree ("KD") and
  the hybrid kd-tree ("HybridKD", Cormode et al. 2012) — the grids and trees spend 5% of ε on a noisy record
  count; 1-D only: NoiseFirst and StructureFirst (Xu et al. 2012, at their defaults: k ≤ 64 buckets searched,
  resp. k = min(⌈n/10⌉, 64)); StructureFirst needs a public bound F on the counts, which DPBench data do not
  provide, so it spends 5% of ε on a noisy total ñ and uses F = max(1, ñ/n), the noisy mean count per cell
  (our choice: 10× and 100× that, and F = ñ, gave equal or larger prefix error on PATENT and ADULTFRANK at
  1,024 cells, scales 10³ and 10⁵, ε = 0.1, 3 trials), with the other 95% for the algorithm. Every
  data-adaptive algorithm but MWEM ignores the workload, so one set of their runs serves every workload.
Data-independent, 2-D only: "QuadTree" (Cormode et al. ICDE 2012: :func:`mmopt.baselines.hierarchies.quadtree`, every
  level measured, geometric budget; least squares in the Haar basis, :mod:`experiments._dpbench_quadtree`).
Multi-attribute ("MA", :mod:`experiments._dpbench_marginals`): PrivBayes, iReduct, DualQuery, MWEM and Uniform
  against identity and mmopt's marginals strategy on all k-way marginals.

All noise is numpy's, seeded: simulation only, as in :func:`mmopt.matrix_mechanism` and :mod:`mmopt.adaptive`.
"""

from __future__ import annotations

import time
import uuid

import numpy as np

import mmopt
from experiments import _dpbench_errors as er
from experiments import _dpbench_quadtree as qt
from mmopt import adaptive as ad
from mmopt import strategy as st
from mmopt import workload as wl
from mmopt._base.parallel import ordered_map
from mmopt.baselines import hierarchies as hi
from mmopt.baselines.transforms import haar_evaluate
from mmopt.structured import mechanism as smech

INDEPENDENT = ("identity", "H2", "HB", "mmopt", "QuadTree")
ADAPTIVE = ("MWEM", "DAWA", "AHP", "Uniform", "PHP", "EFPA", "UGrid", "AGrid", "KD", "HybridKD", "NoiseFirst",
            "StructureFirst", "PrivBayes", "iReduct", "DualQuery")
ALGORITHMS = (*INDEPENDENT, "mmopt+proj", *ADAPTIVE)
KIND = {**dict.fromkeys(INDEPENDENT, "data-independent"), "mmopt+proj": "post-processed",
        **dict.fromkeys(ADAPTIVE, "data-adaptive")}
WORKLOAD_FREE = ("DAWA", "AHP", "Uniform", "PHP", "EFPA", "UGrid", "AGrid", "KD", "HybridKD", "NoiseFirst",
                 "StructureFirst", "PrivBayes")
WORKLOADS = {"1D": ("prefix", "all_range"), "2D": ("ranges_2d",), "MA": ("marginals",)}
# Algorithms left out per dimension: each runs where its paper defines it (PHP, EFPA and the v-optimal
# histograms on intervals, the grids, kd-trees and the quad-tree on the plane, PrivBayes, iReduct and DualQuery
# on several attributes; H2, HB and the projection are range-query tools).
_PLANE, _LINE = ("UGrid", "AGrid", "KD", "HybridKD", "QuadTree"), ("PHP", "EFPA", "NoiseFirst", "StructureFirst")
_MULTI = ("PrivBayes", "iReduct", "DualQuery")
SKIP: dict[str, tuple[str, ...]] = {"1D": (*_PLANE, *_MULTI), "2D": (*_LINE, *_MULTI),
                                    "MA": ("H2", "HB", "mmopt+proj", "DAWA", "AHP", *_LINE, *_PLANE)}
SF_TOTAL_SHARE = 0.05  # StructureFirst's share of ε for the noisy total that sets its count bound F
MWEM = {"rounds": 10, "replay_passes": 100, "output": "last"}


def coarsen(shape: np.ndarray, side: int) -> np.ndarray:
    """Sum equal blocks: a 1-D shape to ``side`` cells, a 2-D one to side × side."""
    s = np.asarray(shape, dtype=float)
    if any(k % side for k in s.shape):
        raise ValueError(f"coarsen: a histogram of shape {s.shape} cannot be coarsened to {side} cells per axis.")
    if s.ndim == 1:
        return s.reshape(side, -1).sum(axis=1)
    return s.reshape(side, s.shape[0] // side, side, s.shape[1] // side).sum(axis=(1, 3))


class Context:
    """What a run shares: workloads, strategies (optimised once), the query samples, the run's seed."""

    def __init__(self, seed: int, *, opt_iterations: int, mwem_queries: int, error_queries_2d: int,
                 info: dict | None = None):
        self.seed, self.opt_iterations = seed, opt_iterations
        self.mwem_queries, self.error_queries_2d = mwem_queries, error_queries_2d
        self.info = {} if info is None else info
        self._cache: dict = {}
        self.token = uuid.uuid4().hex  # names this context in worker processes (_received); no effect on results

    def __reduce__(self):
        """What a worker process receives: the settings and the strategies (made once a run, kept here); the
        workloads and query samples are rebuilt there (cheap, and seeded), and the strategy records stay in
        the parent's ``info``. A worker keeps the first copy it receives (_received)."""
        slim = {k: v for k, v in self._cache.items() if k[0] == "A"}
        return _received, (self.token, self.__dict__ | {"info": {}, "_cache": slim}, type(self))

    def _cached(self, key, make):
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def workload(self, wname: str, side: int):
        return self._cached(("W", wname, side), lambda: wl.ranges_2d(side) if wname == "ranges_2d"
                            else {"prefix": wl.prefix, "all_range": wl.all_range}[wname](side))

    def strategy(self, name: str, wname: str, side: int):
        if ("A", name, wname, side) not in self._cache:
            self._keep(name, wname, side, *self._make_strategy(name, wname, side))
        return self._cache[("A", name, wname, side)]

    def _keep(self, name: str, wname: str, side: int, A, record: dict) -> None:
        self._cache[("A", name, wname, side)] = A
        self.info[f"{wname}/{side}/{name}"] = record

    def _make_strategy(self, name: str, wname: str, side: int) -> tuple:
        """(A, its record); nothing kept (see strategy)."""
        two_d = wname == "ranges_2d"
        W = self.workload(wname, side)
        t0 = time.perf_counter()
        record = {}
        if name == "mmopt":
            if two_d:
                res = mmopt.optimize(W, method="kron", seed=self.seed, verbose=False)
            else:
                res = mmopt.optimize(W, method="min_error", seed=self.seed, max_iterations=self.opt_iterations,
                                     options={"restarts": 1}, verbose=False)
            A = res.strategy
            record = {"method": res.method, "status": res.status, "objective": res.objective}
        elif name == "QuadTree":  # exact error from the Haar spectrum: mmopt.evaluate takes ~100 s at 64 × 64
            A = hi.quadtree(side)
            record = {"budget": "geometric", "seconds": round(time.perf_counter() - t0, 2),
                      "rmse_at_eps_1": float(np.sqrt(haar_evaluate(W, A, mmopt.Privacy(1.0)) / W.n_queries))}
            return A, record
        else:
            if name == "identity":
                b, one = None, st.identity(side)
            elif name == "H2":
                b, one = 2, st.hierarchical(side, 2)
            else:  # HB, from the library (it was the best H_b by exact error, an oracle choice, before issue 20)
                b, one = st.hb_branching(side), st.hb(side)
            A = st.kron(one, one) if two_d else one
            record = {"branching": b}
        record["seconds"] = round(time.perf_counter() - t0, 2)
        record["rmse_at_eps_1"] = mmopt.evaluate(W, A, mmopt.Privacy(1.0)).rmse  # expected, per query
        return A, record

    def queries(self, wname: str, side: int):
        """MWEM's candidate queries: the prefix workload itself, else a uniform sample of ranges (fixed per run)."""
        if wname == "prefix":
            return self.workload(wname, side)

        def make():
            gen = np.random.default_rng([self.seed, 7, side])
            if wname == "all_range":
                return er.range_matrix(er.sample_ranges(side, self.mwem_queries, gen), side)
            m = max(1, min(self.mwem_queries, 2 * 10**7 // side**2))  # a dense m × side² matrix: ≤ 160 MB
            return er.range_matrix_2d(er.sample_ranges(side, m, gen), er.sample_ranges(side, m, gen), (side, side))
        return self._cached(("Q", wname, side), make)

    def error(self, wname: str, estimates: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Mean |W x̂ − W x| per trial (2-D: over a fixed uniform sample of rectangles)."""
        if wname == "prefix":
            return er.mean_abs_prefix(estimates, x)
        if wname == "all_range":
            return er.mean_abs_all_ranges(estimates, x)
        side = x.shape[0]

        def make():
            gen = np.random.default_rng([self.seed, 11, side])
            return (er.sample_ranges(side, self.error_queries_2d, gen),
                    er.sample_ranges(side, self.error_queries_2d, gen))
        rows, cols = self._cached(("E", side), make)
        return er.mean_abs_ranges_2d(estimates, x, rows, cols)

    def estimates(self, alg: str, wname: str, x: np.ndarray, eps: float, trials: int, key: tuple) -> np.ndarray:
        """(trials, cells) estimates. ``key`` seeds the noise; "mmopt+proj" gets "mmopt"'s key: paired draws."""
        side = x.shape[0]
        gen = np.random.default_rng([self.seed, *key, ALGORITHMS.index("mmopt" if alg == "mmopt+proj" else alg)])
        if alg == "QuadTree":
            A = self.strategy(alg, wname, side)
            spectrum = self._cached(("S", side), lambda: qt.haar_spectrum(A))
            return qt.mechanism(A, x, eps, gen, trials, spectrum).reshape(trials, -1)
        if alg in (*INDEPENDENT, "mmopt+proj"):
            W, A = self.workload(wname, side), self.strategy(alg.removesuffix("+proj"), wname, side)
            rec = "projection" if alg == "mmopt+proj" else "least_squares"
            if x.ndim == 2:
                out = smech.matrix_mechanism(W, A, x, mmopt.Privacy(eps), rng=gen, size=trials, reconstruct=rec,
                                             max_answers=0)
            else:
                out = mmopt.matrix_mechanism(W, A, x, mmopt.Privacy(eps), rng=gen, size=trials, reconstruct=rec)
            return out.estimate.reshape(trials, -1)
        if alg == "MWEM":
            Q = self.queries(wname, side)
            return np.stack([ad.mwem(x, Q, eps, rng=gen, **MWEM).estimate.ravel() for _ in range(trials)])
        run = {"DAWA": ad.dawa, "AHP": ad.ahp, "Uniform": ad.uniform, "PHP": ad.php, "EFPA": ad.efpa,
               "UGrid": ad.ugrid, "AGrid": ad.agrid, "KD": ad.kd_tree,
               "HybridKD": lambda x, eps, rng: ad.kd_tree(x, eps, kind="hybrid", rng=rng),
               "NoiseFirst": ad.noise_first, "StructureFirst": structure_first}[alg]
        return np.stack([run(x, eps, rng=gen).estimate.ravel() for _ in range(trials)])


def structure_first(x, eps: float, rng) -> ad.AdaptiveResult:
    """StructureFirst with its count bound from a noisy total (module docstring): ε-DP by sequential
    composition, SF_TOTAL_SHARE·ε for ñ = Σx + Lap(1/(SF_TOTAL_SHARE·ε)) (sensitivity 1), the rest for the
    algorithm, whose F = max(1, ñ/n) is then public (post-processing of ñ)."""
    e0 = SF_TOTAL_SHARE * eps
    total = float(np.sum(x)) + rng.laplace(0.0, 1.0 / e0)
    return ad.structure_first(x, eps - e0, count_bound=max(1.0, total / np.size(x)), rng=rng)


def make_strategies(wanted, n_jobs: int | None = 1, progress=None) -> None:
    """Make each (context, name, workload, side) in ``wanted`` not made yet, ``n_jobs`` at once (joblib), and
    keep it in its context, recorded in the order given: one run's optimisations (10–20 s each at 1,024 cells)
    run side by side. Each is seeded with its context's seed alone, so it is the same wherever it runs.
    ``progress`` (an :class:`experiments._progress.Progress`, optional) gets a stage with a line per strategy."""
    todo = [w for w in dict.fromkeys(wanted) if ("A", *w[1:]) not in w[0]._cache]
    made = ordered_map(_make, todo, n_jobs=n_jobs)
    if progress is not None:
        progress.stage("strategies", total=len(todo))
        made = progress.track(made, [f"{name} for {wname} on {side}" + ("²" if wname.endswith("_2d") else "")
                                     + " cells" for _, name, wname, side in todo])
    for (ctx, name, wname, side), m in zip(todo, made, strict=True):
        ctx._keep(name, wname, side, *m)


def _make(ctx: Context, name: str, wname: str, side: int) -> tuple:
    return ctx._make_strategy(name, wname, side)


# The contexts a worker process has received, by token: every task it runs for one run() then uses the same
# strategy objects, on which mmopt caches the least-squares factorisation (QR at 1,024 cells: ~0.1–0.3 s per
# strategy, paid again by every task with a fresh copy), and the same workloads and query samples. At most
# three: one run's 1-D, 2-D and multi-attribute contexts.
_RECEIVED: dict[str, Context] = {}


def _received(token: str, state: dict, cls: type = Context) -> Context:
    ctx = _RECEIVED.get(token)
    if ctx is None:
        ctx = _RECEIVED[token] = cls.__new__(cls)
        ctx.__dict__.update(state)
        while len(_RECEIVED) > 3:
            del _RECEIVED[next(iter(_RECEIVED))]
    for key, A in state["_cache"].items():  # strategies the parent made after sending an earlier copy
        ctx._cache.setdefault(key, A)
    return ctx
