"""AIM's estimator past the whole table: the graphical-model family on the model's junction tree, mirror descent.

Notation: see README and :mod:`mmopt.synth.joint`, whose objective this is,

    f(μ) = ½ Σ_{S ≠ ∅} ‖C_S μ_S − r̂_S‖² / v_S,      μ_S the marginal on S of P = t·softmax(Σ_M θ_M),

with θ_M a function of the attributes of measured clique M, and a junction tree whose cliques K hold every M
(AIM's size-capped tree, :mod:`mmopt.synth.model_size`, or a fresh triangulation). The whole table is never
formed: K's potential is exp of the θ_M it holds, the clique marginals μ_K come from belief propagation on the tree
(sum-product in linear space, each potential shifted by its maximum and each message scaled; one pass to the roots
and one back; each tree of the forest normalised on its own, as P is the product of the trees' distributions), and
any other marginal from
the tree's factorisation P = Π_K μ_K / Π_{edges} μ_{K ∩ parent(K)} restricted to the smallest subtree that holds
the attributes (:meth:`JunctionModel.marginal`).

The fit is Private-PGM's (McKenna, Sheldon & Miklau, *Graphical-model based estimation and inference for
differential privacy*, ICML 2019, Algorithm 1): entropic mirror descent, θ ← θ − α ∇_μ f(μ(θ)), where ∇_μ f on
each measured clique is that of its measured sets' terms (each S scored on one clique; computed in an orthonormal
residual basis, :mod:`mmopt.synth.clique_loss`), with the
step α doubled before and halved during a backtracking search until f falls by at least ½ α ⟨∇_μ f, μ_old − μ_new⟩.
f is convex in μ and the family's marginals are the marginal polytope's interior, so the iterates converge to the
family's maximum-likelihood table (the one :mod:`mmopt.synth.joint` finds on the whole table); ``status`` is
"optimal" when the relative fall of f in an iteration is below ``tol`` or f itself is (f ≥ 0 is in noise
variances, so it bounds its distance to the minimum), "optimal_inaccurate" when the
backtracking found no step that lowers f (round-off), else "user_limit". A fit may start from an earlier one's θ
and α (``start``): AIM fits once a round, as Private-PGM's AIM does, and a round adds one clique. Records are drawn
ancestrally: each root clique from μ_K, each child's other attributes from μ_K given its separator, with uniforms
stratified per separator configuration (:func:`mmopt.synth.tree.stratified_uniforms`).

Why: the residual model's marginals of unmeasured sets are local (maximum entropy inside the set), so a dependence
between two attributes that only a chain of measured cliques links is lost. On a tree-structured network of 15
attributes (:func:`mmopt.records.datasets.tree_network`, 20,000 records, AIM on all 3-way marginals) the residual
model's error stayed near 0.06 even at ε = 100, with every tree edge measured. Limits, measured in development runs:
from θ = 0 after the last round, 300 iterations on 198 pairs over 50 binary attributes left the fit worse than the
residual model (0.0058 against 0.0019); warm-started every round it is better (:mod:`mmopt.synth.aim` gives the
numbers), and more iterations at the end did not lower the workload error (15 attributes, ε = 1: 0.0931 / 0.0934 /
0.0954 after 300 / 1,000 / 3,000 from θ = 0, with f 229 / 144 / 131). A Bethe start (θ_M = log μ̂_M less the shared
one-way terms) did no better.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass

import numpy as np

from mmopt._base import validation as v
from mmopt.synth import sum_product as sp
from mmopt.synth.clique_loss import clique_loss
from mmopt.synth.model_size import subtree
from mmopt.synth.tree import stratified_uniforms

__all__ = ["ITERATIONS", "JunctionModel", "ROUND_ITERATIONS", "fit"]

#: Mirror-descent iterations at most (default of :func:`fit`; AIM's fit after its last round).
ITERATIONS = 300
#: The iterations of each AIM round's warm-started fit (``aim(..., estimator="junction")``). AIM gives its fits
#: iterations, never CPU seconds: a seeded run then releases the same records on every machine.
ROUND_ITERATIONS = 100


@dataclass(frozen=True, eq=False)
class JunctionModel:
    """The fitted family on a junction tree (module docstring).

    Attributes
    ----------
    shape : tuple of int
    cliques : tuple of tuple
        The tree's cliques (sorted attributes).
    parent : tuple of int
        Each clique's parent in the forest (−1 at a root).
    beliefs : tuple of ndarray
        μ_K, the marginal counts of P on each clique (summing to ``total``).
    total, loss : float
    status : str
        "optimal", "optimal_inaccurate" or "user_limit" (module docstring).
    iterations : int
    theta : tuple
        (M, θ_M) for each measured clique M, and ``step`` the last step size α: a later fit with more measured
        cliques starts from them (``fit(..., start=)``).
    step : float
    """

    shape: tuple
    cliques: tuple
    parent: tuple
    beliefs: tuple
    total: float
    loss: float
    status: str
    iterations: int
    theta: tuple = ()
    step: float = 0.0

    @functools.cached_property
    def _depth(self) -> list:
        return sp.depths(self.parent)

    def marginal(self, attributes) -> np.ndarray:
        """The marginal of P on the sorted tuple ``attributes`` (counts): a clique's belief summed when one holds
        them, else the factorisation on the smallest subtree holding them, eliminated leaves first (each message a
        function of a separator and of the wanted attributes met below it)."""
        A = tuple(attributes)
        for K, mu in zip(self.cliques, self.beliefs, strict=True):
            if set(A) <= set(K):
                return mu.sum(axis=tuple(p for p, i in enumerate(K) if i not in A))
        nodes = subtree(self.parent, [next(k for k, K in enumerate(self.cliques) if i in K) for i in A])
        depth = self._depth
        messages: dict = {k: [] for k in nodes}
        tops = []
        for k in sorted(nodes, key=lambda k: -depth[k]):
            K, p = self.cliques[k], self.parent[k]
            inside = p in nodes
            sep = tuple(i for i in K if i in self.cliques[p]) if inside else ()
            factor = (_conditional(self.beliefs[k], K, sep) if inside else self.beliefs[k] / self.total, K)
            keep = tuple(sorted(set(sep) | (set(A) & (set(K).union(*(set(m[1]) for m in messages[k]))))))
            out = (_contract([factor] + messages[k], keep), keep)
            (messages[p] if inside else tops).append(out)
        return self.total * _contract(tops, A)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n records (cell codes, n × d), ancestrally through the tree (module docstring)."""
        codes = np.zeros((n, len(self.shape)), dtype=np.int64)
        depth = self._depth
        for k in sorted(range(len(self.cliques)), key=depth.__getitem__):
            K, p = self.cliques[k], self.parent[k]
            sep = () if p < 0 else tuple(i for i in K if i in self.cliques[p])
            new = tuple(i for i in K if i not in sep)
            if not new:
                continue
            table = np.moveaxis(self.beliefs[k], [K.index(i) for i in sep + new], range(len(K)))
            table = table.reshape(math.prod(self.shape[i] for i in sep), -1)
            group = np.ravel_multi_index(tuple(codes[:, i] for i in sep), [self.shape[i] for i in sep]) if sep \
                else np.zeros(n, dtype=np.int64)
            cdf = np.cumsum(table, axis=1)
            cdf /= np.where(cdf[:, -1:] > 0, cdf[:, -1:], 1.0)
            # one sorted array for every separator value: row g's CDF shifted to [g, g + 1]
            flat = (cdf + np.arange(cdf.shape[0])[:, None]).ravel()
            u = stratified_uniforms(group, rng)
            cell = np.searchsorted(flat, group + u, side="right") - group * cdf.shape[1]
            cell = np.clip(cell, 0, cdf.shape[1] - 1)
            for i, c in zip(new, np.unravel_index(cell, [self.shape[i] for i in new]), strict=True):
                codes[:, i] = c
        return codes


def fit(model, tree, *, iterations: int = ITERATIONS, seconds: float | None = None,
        tol: float = 1e-7, start: JunctionModel | None = None) -> JunctionModel:
    """The family's maximum-likelihood marginals on ``tree`` for the measurements of ``model`` (module docstring).

    Parameters
    ----------
    model : mmopt.synth.estimate.ResidualModel
        Its ``estimates`` (the measurements) and ``total``.
    tree : mmopt.synth.model_size.JunctionTree
        A junction tree whose cliques hold every measured clique.
    iterations : int
        Mirror-descent iterations at most.
    seconds : float, optional
        A CPU budget (status "user_limit" when spent).
    tol : float
        "optimal" once an iteration lowers f by less than ``tol``·f.
    start : JunctionModel, optional
        A fit of fewer measurements (AIM's previous round): θ starts from its θ (each of its cliques lies in one
        measured clique now, as measurements are only added) and α from its last step, instead of θ = 0.

    Examples
    --------
    >>> from mmopt.synth.estimate import ResidualModel
    >>> from mmopt.synth.model_size import junction_tree
    >>> from mmopt.synth.residuals import ResidualEstimates
    >>> x = np.array([[30.0, 10.0], [20.0, 40.0]])           # noiseless 2-way tables on (0, 1) and (1, 2)
    >>> r = {(): np.array(100.0), (0,): np.array([-10.0, 10.0]), (1,): np.array([0.0, 0.0]),
    ...      (2,): np.array([0.0, 0.0]), (0, 1): x - x.mean(0) - x.mean(1)[:, None] + x.mean(),
    ...      (1, 2): x - x.mean(0) - x.mean(1)[:, None] + x.mean()}
    >>> est = ResidualEstimates((2, 2, 2), r, {S: 1.0 for S in r})
    >>> P = fit(ResidualModel(est, [(0, 1), (1, 2)], 100.0), junction_tree((2, 2, 2), [(0, 1), (1, 2)]))
    >>> P.marginal((0, 1)).round(4).tolist(), P.status
    ([[30.0, 10.0], [20.0, 40.0]], 'optimal')
    """
    caller = "mmopt.synth.junction.fit"
    iterations = v.check_int(iterations, name="iterations", caller=caller, low=0)
    t0 = time.process_time()
    est, shape, t = model.estimates, tuple(model.shape), float(model.total)
    cliques = [tuple(K) for K in tree.cliques]
    parent = list(tree.parent)
    # θ lives on the measured maximal cliques M (small tables); each M, and each measured S, on one tree clique
    measured = [tuple(M) for M in model.cliques]
    where = []
    for M in measured:
        k = next((k for k, K in enumerate(cliques) if set(M) <= set(K)), None)
        if k is None:
            raise ValueError(f"{caller}: the measured clique {M} lies in no clique of the tree. Pass a junction "
                             "tree of the measured cliques (mmopt.synth.model_size.junction_tree).")
        where.append(k)
    scored: list = [[] for _ in measured]   # the measured sets each clique's loss holds
    for S in est.values:
        if S:
            j = next((j for j, M in enumerate(measured) if set(S) <= set(M)), None)
            if j is None:
                raise ValueError(f"{caller}: the measured set {S} lies in none of the model's cliques "
                                 f"{measured}. Pass the ResidualModel of the measurements.")
            scored[j].append(S)
    theta = [np.zeros([shape[i] for i in M]) for M in measured]
    for M0, th0 in (start.theta if start is not None else ()):
        j = next((j for j, M in enumerate(measured) if set(M0) <= set(M)), None)
        if j is None:
            raise ValueError(f"{caller}: the 'start' model's clique {M0} lies in none of the measured cliques "
                             f"{measured}. Pass a fit of a subset of these measurements.")
        theta[j] = theta[j] + _onto(th0, M0, measured[j])

    plan = sp.plan(cliques, parent, shape)   # the index work of every pass below, done once
    onto = [tuple(shape[i] if i in M else 1 for i in cliques[k]) for M, k in zip(measured, where, strict=True)]
    outside = [tuple(q for q, i in enumerate(cliques[k]) if i not in M) for M, k in zip(measured, where, strict=True)]

    def marginals(theta):
        log_pot = [np.zeros([shape[i] for i in K]) for K in cliques]
        for th, k, to in zip(theta, where, onto, strict=True):
            log_pot[k] = log_pot[k] + th.reshape(to)
        beliefs = sp.calibrate(log_pot, plan, t)
        return beliefs, [beliefs[k].sum(axis=ax) for k, ax in zip(where, outside, strict=True)]

    objective = clique_loss(measured, shape, est.values, est.variances, scored)

    beliefs, mu = marginals(theta)
    loss, grad = objective(mu)
    alpha = start.step if start is not None and start.step > 0 else \
        min(est.variances[S] for S in est.values if S) / max(t, 1.0)
    status, done = "user_limit", 0
    for done in range(1, iterations + 1):
        if seconds is not None and time.process_time() - t0 > seconds:
            done -= 1
            break
        alpha *= 2.0
        for _ in range(30):
            new_theta = [th - alpha * g for th, g in zip(theta, grad, strict=True)]
            new_beliefs, new_mu = marginals(new_theta)
            new_loss, new_grad = objective(new_mu)
            fall = sum(float(np.vdot(g, m0 - m1)) for g, m0, m1 in zip(grad, mu, new_mu, strict=True))
            if loss - new_loss >= 0.5 * alpha * fall:
                break
            alpha *= 0.5
        else:  # no step lowers f: stationary to round-off, before the test below could say so
            status = "optimal_inaccurate"
            break
        improved = loss - new_loss
        theta, beliefs, mu, loss, grad = new_theta, new_beliefs, new_mu, new_loss, new_grad
        if improved <= tol * max(loss, 1e-300):
            status = "optimal"
            break
    if status == "user_limit" and loss <= tol:
        # f ≥ 0, so f bounds its own distance to the minimum: below tol of one noise variance the fit is converged,
        # which the relative test never says as f falls geometrically towards 0 on consistent measurements
        # (f 7·10⁻¹³ after 300 iterations was reported 'user_limit'; a helper's audit)
        status = "optimal"
    return JunctionModel(shape, tuple(cliques), tuple(parent), tuple(beliefs), t, float(loss), status, done,
                         tuple(zip(measured, theta, strict=True)), alpha)


def _onto(message: np.ndarray, sep: tuple, K: tuple) -> np.ndarray:
    """A function of ``sep`` (sorted, ⊆ K) shaped to broadcast over clique K."""
    return message.reshape([message.shape[sep.index(i)] if i in sep else 1 for i in K])


def _contract(factors, keep: tuple) -> np.ndarray:
    """Σ over every attribute not in ``keep`` of the product of ``factors`` ((array, attributes) pairs), by
    ``np.einsum`` on letters local to the call (so any attribute index works)."""
    letters: dict = {}
    operands = []
    for array, attrs in factors:
        operands += [array, [letters.setdefault(i, len(letters)) for i in attrs]]
    # a path search costs more than a small contraction (AIM asks thousands a round): only for large operands
    small = len(factors) <= 2 and sum(array.size for array, _ in factors) <= 65536
    return np.einsum(*operands, [letters.setdefault(i, len(letters)) for i in keep],
                     optimize=False if small else "greedy")


def _conditional(mu: np.ndarray, K: tuple, sep: tuple) -> np.ndarray:
    """μ_K / μ_sep (0 where μ_sep = 0): K's distribution given its separator."""
    below = mu.sum(axis=tuple(p for p, i in enumerate(K) if i not in sep), keepdims=True)
    return np.divide(mu, below, out=np.zeros_like(mu), where=below > 0)
