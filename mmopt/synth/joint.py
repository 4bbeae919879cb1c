"""AIM's estimator on small domains: the maximum-likelihood distribution of the measured cliques' family.

Notation: see README and :mod:`mmopt.synth.residuals`. AIM's measurements are summarised without loss by the
residual estimates r̂_S (independent, isotropic in their subspaces, variance v_S), so the Gaussian negative
log-likelihood of a table P of counts (all N cells, summing to the estimated total t = r̂_∅) is, up to a constant,

    f(P) = ½ Σ_{S ≠ ∅} ‖C_S m_S(P) − r̂_S‖² / v_S,        C_S = ⊗_{i∈S} Cᵢ (centring), m_S the marginal on S.

:func:`fit` minimises f over the distributions whose logarithm is a sum of functions of the measured maximal
cliques, P = t·softmax(Σ_C φ_C) (the graphical-model family Private-PGM fits; McKenna, Sheldon & Miklau,
*Graphical-model based estimation and inference for differential privacy*, ICML 2019):

1. **start** inside the family: iterative proportional fitting from the uniform table to the non-negative
   least-squares marginal of each maximal clique (:meth:`mmopt.synth.estimate.ResidualModel.marginal`),
   :data:`IPF_SWEEPS` sweeps (each step multiplies P by a function of one clique);
2. **L-BFGS on φ**: ∂f/∂φ_C is the marginal on C of P ⊙ (g − ⟨g, P⟩/t), g = ∂f/∂P = Σ_S (C_S m_S(P) − r̂_S)/v_S
   broadcast over the cells.

Why the family and not every table: many tables fit the measurements equally well, and the family holds the one of
largest entropy among them (where the fit is exact), which adds no dependence the measurements do not show. (In a
development run on RAND HIE at ε = 0.1 — AIM, 5 trials, all 3-way marginals; the script is not kept — L-BFGS over
all N cells started from the residual model's network reached a model error of 0.154, the family 0.148, the
residual model 0.155; ``python -m experiments.synth`` reproduces the last two.)

Guarantee: P ≥ 0 sums to t, and every marginal is a marginal of the one table P (consistent, unlike the residual
model's projected tables); ``status="optimal"`` when L-BFGS met its stationarity test (f is convex in P but not in
φ, so this is a stationary point of the family), ``"user_limit"`` when its iterations ran out. Records are drawn
from P by systematic sampling (:func:`mmopt.synth.tree.stratified_uniforms`). N is at most :data:`MAX_CELLS`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize as sopt

from mmopt._base import validation as v
from mmopt.synth.tree import stratified_uniforms

__all__ = ["IPF_SWEEPS", "ITERATIONS", "MAX_CELLS", "JointModel", "fit"]

#: The largest domain (cells) fitted here: a handful of float64 arrays of N cells (8 MiB each at the cap), about
#: four passes over P per measured clique and iteration (at the cap, 39 three-way cliques: 0.3 CPU s an iteration).
MAX_CELLS = 2**20
#: IPF sweeps of the start, and L-BFGS iterations (defaults of :func:`fit`).
IPF_SWEEPS = 20
ITERATIONS = 100


@dataclass(frozen=True, eq=False)
class JointModel:
    """A table of counts P over the whole domain (module docstring), with how its fit ended.

    Attributes
    ----------
    table : ndarray
        P, shape = the domain's, non-negative, summing to ``total``.
    total : float
    loss : float
        f(P), the negative log-likelihood up to a constant.
    status : str
        "optimal", "user_limit" or "optimal_inaccurate" (L-BFGS's line search stopped first).
    iterations : int
    """

    table: np.ndarray
    total: float
    loss: float
    status: str
    iterations: int

    def marginal(self, attributes) -> np.ndarray:
        """The marginal of P on the sorted tuple ``attributes`` (counts)."""
        A = tuple(attributes)
        return self.table.sum(axis=tuple(i for i in range(self.table.ndim) if i not in A))

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n records (cell codes, n × d) by inverse CDF of P with systematic uniforms."""
        cdf = np.cumsum(self.table.ravel())
        cdf /= cdf[-1]
        u = stratified_uniforms(np.zeros(n, dtype=np.int64), rng)
        cell = np.minimum(np.searchsorted(cdf, u, side="right"), cdf.size - 1)
        return np.stack(np.unravel_index(cell, self.table.shape), axis=1).astype(np.int64)


def fit(model, *, iterations: int = ITERATIONS, sweeps: int = IPF_SWEEPS) -> JointModel:
    """The family's maximum-likelihood table for the measurements of ``model`` (module docstring).

    Parameters
    ----------
    model : mmopt.synth.estimate.ResidualModel
        Its ``estimates`` (the measurements), ``cliques`` (maximal measured sets) and ``total``.
    iterations : int
        L-BFGS iterations at most.
    sweeps : int
        IPF sweeps of the start.

    Examples
    --------
    >>> from mmopt.synth.estimate import ResidualModel
    >>> from mmopt.synth.residuals import ResidualEstimates
    >>> x = np.array([[30.0, 10.0], [20.0, 40.0]])           # noiseless estimates of the 2-way table
    >>> r = {(): np.array(100.0), (0,): np.array([-10.0, 10.0]), (1,): np.array([0.0, 0.0]),
    ...      (0, 1): x - x.mean(0) - x.mean(1)[:, None] + x.mean()}
    >>> est = ResidualEstimates((2, 2), r, {S: 1.0 for S in r})
    >>> P = fit(ResidualModel(est, [(0, 1)], 100.0))
    >>> P.marginal((0, 1)).round(6).tolist(), P.status
    ([[30.0, 10.0], [20.0, 40.0]], 'optimal')
    """
    caller = "mmopt.synth.joint.fit"
    iterations = v.check_int(iterations, name="iterations", caller=caller, low=0)
    sweeps = v.check_int(sweeps, name="sweeps", caller=caller, low=0)
    est, shape, t = model.estimates, tuple(model.shape), float(model.total)
    d, N = len(shape), math.prod(shape)
    if N > MAX_CELLS:
        raise ValueError(f"{caller}: the domain has {N:,} cells, above {MAX_CELLS:,}; use the residual model "
                         "(mmopt.synth.estimate.ResidualModel), which never forms the whole table.")
    cliques = [tuple(C) for C in model.cliques]
    # each measured subspace is scored on the marginal of a clique holding it: one pass over P per clique
    home = {C: [S for S in est.values if S and set(S) <= set(C)] for C in cliques}
    seen: set = set()
    for C in cliques:
        home[C] = [S for S in home[C] if not (S in seen or seen.add(S))]
    over = [[shape[i] if i in C else 1 for i in range(d)] for C in cliques]
    sizes = [math.prod(shape[i] for i in C) for C in cliques]
    cut = np.concatenate([[0], np.cumsum(sizes)]).astype(int)

    def table(phi):
        theta = np.zeros(shape)
        for a, b, o in zip(cut[:-1], cut[1:], over, strict=True):
            theta = theta + phi[a:b].reshape(o)
        E = np.exp(theta - theta.max())
        return E * (t / E.sum())

    def objective(phi):
        P = table(phi)
        loss, g = 0.0, np.zeros(shape)
        for C, o in zip(cliques, over, strict=True):
            mC = P.sum(axis=tuple(i for i in range(d) if i not in C))
            gC = np.zeros(mC.shape)
            for S in home[C]:
                r = _centred(mC.sum(axis=tuple(p for p, i in enumerate(C) if i not in S))) - est.values[S]
                loss += 0.5 * float(np.vdot(r, r)) / est.variances[S]
                gC = gC + _centred(r).reshape([shape[i] if i in S else 1 for i in C]) / est.variances[S]
            g = g + gC.reshape(o)
        gtheta = P * (g - float(np.vdot(g, P)) / t)
        grad = np.concatenate([gtheta.sum(axis=tuple(i for i in range(d) if i not in C)).ravel() for C in cliques])
        return loss, grad

    phi = _ipf(model, cliques, over, cut, shape, t, sweeps)
    if iterations == 0:
        loss = objective(phi)[0]
        return JointModel(table(phi), t, loss, "user_limit", 0)
    res = sopt.minimize(objective, phi, jac=True, method="L-BFGS-B",
                        options={"maxiter": iterations, "maxcor": 20, "ftol": 1e-12, "gtol": 1e-9})
    status = "optimal" if res.success else ("user_limit" if res.nit >= iterations else "optimal_inaccurate")
    return JointModel(table(res.x), t, float(res.fun), status, int(res.nit))


def _centred(r: np.ndarray) -> np.ndarray:
    """C_S r: the mean removed along every axis."""
    for ax in range(r.ndim):
        r = r - r.mean(axis=ax, keepdims=True)
    return r


def _ipf(model, cliques, over, cut, shape, t: float, sweeps: int) -> np.ndarray:
    """φ after IPF from the uniform table to the residual model's non-negative clique marginals (floored at 10⁻⁶
    of a cell's mean count, so that every cell keeps a finite log)."""
    d = len(shape)
    phi = np.zeros(int(cut[-1]))
    P = np.full(shape, t / math.prod(shape))
    targets = []
    for C in cliques:
        m = np.maximum(model.marginal(C), 0.0)
        targets.append(m + 1e-6 * t / m.size)
    for _ in range(sweeps):
        for C, o, a, b, m in zip(cliques, over, cut[:-1], cut[1:], targets, strict=True):
            cur = P.sum(axis=tuple(i for i in range(d) if i not in C))
            step = np.log(m * (cur.sum() / m.sum())) - np.log(np.maximum(cur, 1e-300))
            phi[a:b] += step.ravel()
            P = P * np.exp(step).reshape(o)
    return phi
