"""The standard errors of answered queries (split from :mod:`mmopt.answers.queries`): by the stream strategies'
own algebra, a Kronecker product's factor-wise variance or pseudo-inverses, else the dense per-query variance,
each at the noise's standard deviation ``sd``."""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from mmopt._base.guards import Unsupported
from mmopt.answers import _stream_errors as stream
from mmopt.dense._strategy_core import Strategy
from mmopt.dispatch import evaluate
from mmopt.dispatch.routing import stream_native
from mmopt.structured import _checks as ck
from mmopt.structured import factors as fc
from mmopt.structured.mechanism import kron_apply
from mmopt.structured.orbit_strategy import OrbitStrategy
from mmopt.structured.per_query import kron_variance, scaled_factor
from mmopt.structured.strategies import ImplicitStrategy
from mmopt.structured.workloads import ImplicitWorkload, Product
from mmopt.workload import Workload

__all__ = ["kron_row", "pinv_errors", "standard_errors"]


def standard_errors(strategy, shape, Q, rows, sd: float, caller: str) -> np.ndarray:
    implicit = isinstance(strategy, ImplicitStrategy)
    N = math.prod(shape)
    if stream_native(strategy):  # mmopt.toeplitz's: no matrix (float(it) raised TypeError)
        Q = Q if Q is not None else np.array([kron_row(r) for r in rows])
        return stream.stream_errors(strategy, Q, sd, caller)
    if implicit and rows is not None:
        W = ImplicitWorkload((Product(tuple(Workload.from_matrix(np.array(col), name=f"a{i}")
                                            for i, col in enumerate(zip(*rows, strict=True))), 1.0),), "queries")
        kv = kron_variance(W, strategy, caller=caller)
        if kv is not None:
            t = kv.terms[0]
            unit = sum(c * np.prod(np.stack(fs), axis=0) for c, fs in zip(t.coefficients, t.vectors, strict=True))
            return np.sqrt(unit) * math.ldexp(sd, -kv.exponent)
    if implicit and strategy.is_product and Q is not None:
        return pinv_errors(strategy, shape, Q, sd, caller)
    if implicit:
        if N > ck.DENSE_LIMIT:
            raise ValueError(f"{caller}: standard errors of these queries under '{strategy.name}' need a product "
                             f"strategy, a marginals strategy with range specs, or at most {ck.DENSE_LIMIT:,} cells.")
        strategy = strategy.to_strategy()
    if Q is None:
        Q = np.array([kron_row(r) for r in rows])
    if isinstance(strategy, OrbitStrategy):  # held by its symmetry blocks: its matrix up to the dense size
        if N > ck.DENSE_LIMIT:
            raise ValueError(f"{caller}: standard errors of chosen queries under an OrbitStrategy are computed up to "
                             f"{ck.DENSE_LIMIT:,} cells (its matrix); past that, list the workload's own queries "
                             "with mmopt.answers_table(out, W, strategy).")
        strategy = Strategy(strategy.matrix, strategy.name)
    if not isinstance(strategy, Strategy) and callable(getattr(strategy, "to_strategy", None)):
        strategy = strategy.to_strategy()  # the p-Identity strategy up to the dense size: float() of it raised
    A = strategy if isinstance(strategy, Strategy) else Strategy(np.asarray(strategy, dtype=float))
    # an all-zero query is answered 0 exactly (standard error 0, as on the product path); one refused the whole
    # call as "The 'matrix' parameter of Workload.from_matrix" (a helper's probe)
    Q = Q.toarray() if sp.issparse(Q) else np.asarray(Q, dtype=float)
    live = np.any(Q != 0, axis=1)
    out = np.zeros(Q.shape[0])
    if live.any():
        try:
            report = evaluate(Workload.from_matrix(Q[live], name="queries"), A, None, per_query=True)
        except Unsupported:
            # evaluate's refusal named itself, an internal workload 'queries' and a Gram-trace share (a helper's
            # probe): name the caller and the query furthest outside A's row space, as the product route does,
            # on the null basis evaluate just used (cached per strategy)
            from mmopt.dense.profile import scaled_profile
            N = scaled_profile(A)[2].null_basis
            rows = np.flatnonzero(live)
            outside = np.linalg.norm(Q[rows] @ N, axis=1) / np.linalg.norm(Q[rows], axis=1)
            k = int(rows[np.argmax(outside)])
            raise Unsupported(f"{caller}: query {k} is not supported by strategy '{strategy.name}' "
                              f"({outside.max():.2g} of its norm lies outside the row space of A): its least-squares "
                              "answer is biased, with no standard error.") from None
        out[live] = np.sqrt(np.asarray(report.per_query_variance)) * (sd / float(report.sensitivity))
    return out


def kron_row(rows) -> np.ndarray:
    out = np.ones(1)
    for r in rows:
        out = np.kron(out, r)
    return out


def pinv_errors(strategy: ImplicitStrategy, shape, Q, sd: float, caller: str) -> np.ndarray:
    """‖(⊗ᵢÃᵢ⁺ᵀ) q‖/θ̃ per row q, after checking q lies in the row space ((⊗ᵢPᵢ) q = q, Pᵢ = I − NᵢNᵢᵀ)."""
    term = strategy.terms[0]
    scaled = [scaled_factor(f) for f in term.factors]
    invs = [fc.strategy_inverse(f) for f, _ in scaled]
    wm, we = math.frexp(term.weight)
    R = we + sum(e for _, e in scaled)
    pin_t = [inv.pinv.T for inv in invs]
    proj = [np.eye(n) - inv.null @ inv.null.T for inv, n in zip(invs, shape, strict=True)]
    Qd = Q.toarray() if sp.issparse(Q) else Q
    out = np.empty(Qd.shape[0])
    for k, q in enumerate(Qd):
        qs = q.reshape(shape)
        if float(np.sum((kron_apply(proj, qs) - qs) ** 2)) > 1e-18 * float(np.sum(qs * qs)):
            raise Unsupported(f"{caller}: query {k} is not supported by strategy '{strategy.name}' (it lies partly "
                             "outside the row space of A): its least-squares answer is biased, with no standard error.")
        out[k] = math.sqrt(float(np.sum(kron_apply(pin_t, qs) ** 2))) / wm
    return out * math.ldexp(sd, -R)
