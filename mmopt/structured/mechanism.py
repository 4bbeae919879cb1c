"""The matrix mechanism on product domains: y = A x + z, x̂ = A⁺y by exact least squares, answers W x̂.

Notation: see README. Nothing of size N×N is formed; memory is O(N + p + Σ factor sizes).

* Products apply axis by axis: (A₁ ⊗ … ⊗ A_d) x = x reshaped to (n₁, …, n_d) contracted with Aᵢ along
  axis i; for a product strategy (θ⊗ᵢAᵢ)⁺ = θ⁻¹ ⊗ᵢ Aᵢ⁺, so x̂ is the same contraction with the factors'
  SVD pseudo-inverses (exact least squares, minimum norm).
* A union strategy is solved by LSMR (Fong & Saunders 2011) on a LinearOperator, started at 0 so that the
  iterates stay in range(Aᵀ) and converge to the minimum-norm solution A⁺y. It stops when
  ‖Aᵀr‖ ≤ tol·‖A‖·‖r‖ (the normal-equation residual); that test is re-checked here on the returned x̂,
  and a solve that did not pass it raises rather than returning a wrong estimate.

Noise is numpy's (seeded), so this is the **simulation** path, as :func:`mmopt.matrix_mechanism`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.sparse.linalg import LinearOperator, lsmr

from mmopt._base import validation as v
from mmopt._base.hints import missing_attribute
from mmopt._base.opendp import simulation_scale
from mmopt._base.probe import gram_probe
from mmopt.dense import _family_answers as family_answers
from mmopt.dense._error_common import check_privacy, check_type
from mmopt.dense.exact_answers import refuse_negative
from mmopt.privacy import Privacy
from mmopt.reconstruct import Reconstruction, check_reconstruction, combine
from mmopt.reconstruct import implicit as recon
from mmopt.structured import _checks as ck
from mmopt.structured import analysis
from mmopt.structured import factors as fc
from mmopt.structured.strategies import ImplicitStrategy
from mmopt.structured.workloads import ImplicitWorkload

DEFAULT_TOL = 1e-10
#: The implicit mechanisms form W x̂ up to this many answers (``max_answers``); mmopt.answers streams any number.
MAX_ANSWERS = 10**7


def kron_apply(matrices, x: np.ndarray) -> np.ndarray:
    """(M₁ ⊗ … ⊗ M_d) x for x shaped (n₁, …, n_d) (optionally with a leading batch axis): one axis at a time."""
    off = x.ndim - len(matrices)
    for i, M in enumerate(matrices):
        x = np.moveaxis(np.tensordot(M, x, axes=(1, off + i)), 0, off + i)
    return x


def strategy_apply(strategy: ImplicitStrategy, x: np.ndarray) -> np.ndarray:
    """A x (flat, length p) for x shaped like the domain."""
    return np.concatenate([t.weight * kron_apply([f.matrix for f in t.factors], x).ravel() for t in strategy.terms])


def implicit_probe(strategy: ImplicitStrategy) -> tuple[float, float]:
    """:func:`mmopt._base.probe.gram_probe` of an implicit strategy, by its Kronecker factors."""
    return gram_probe(lambda u: strategy_apply(strategy, u.reshape(strategy.shape)), strategy.domain_size)


def strategy_apply_transpose(strategy: ImplicitStrategy, y: np.ndarray) -> np.ndarray:
    """Aᵀ y (shaped like the domain) for y flat of length p."""
    out, start = np.zeros(strategy.shape), 0
    for t in strategy.terms:
        rows = tuple(f.matrix.shape[0] for f in t.factors)
        block = y[start:start + math.prod(rows)].reshape(rows)
        out += t.weight * kron_apply([f.matrix.T for f in t.factors], block)
        start += math.prod(rows)
    return out


def _factor_apply(W, x: np.ndarray, axis: int) -> np.ndarray:
    """Apply one workload factor along ``axis``, in closed form for :mod:`mmopt.dense._family_answers`' families."""
    fam = W.family if W.matrix is None else "matrix"
    if fam in family_answers.FAMILIES:
        return family_answers.apply(fam, x, axis)
    return np.moveaxis(np.tensordot(W.explicit_matrix(), x, axes=(1, axis)), 0, axis)


def answer(workload: ImplicitWorkload, x, *, max_entries: int = ck.MAX_VECTOR_ENTRIES) -> np.ndarray:
    """W x (flat, length m, terms in order, each in C order of its query grid) without forming W."""
    caller = "answer"
    x = ck.check_data(x, workload.shape, caller=caller)
    ck.check_allocation(workload.n_queries, what=f"the {ck.fmt_int(workload.n_queries)} answers of "
                        f"'{workload.name}'", caller=caller, limit=max_entries)
    parts = []
    for t in workload.terms:
        y = x
        for i, f in enumerate(t.factors):
            y = _factor_apply(f, y, i)
        parts.append(t.weight * y.ravel())
    return np.concatenate(parts)


@dataclass(frozen=True)
class SolveInfo:
    """How x̂ was obtained: ``method`` "pinv" (exact, factor-wise) or "lsmr" with its iterations and residual."""

    method: str
    iterations: int
    normal_residual: float  # ‖Aᵀ(y − A x̂)‖ / (‖A‖_F,est · ‖y − A x̂‖); 0 for "pinv"
    tol: float


def least_squares(strategy: ImplicitStrategy, y, *, tol: float = DEFAULT_TOL,
                  max_iterations: int | None = None) -> tuple[np.ndarray, SolveInfo]:
    """x̂ = A⁺y (shaped like the domain): factor-wise for a product, LSMR for a union (module docstring)."""
    caller = "least_squares"
    if not isinstance(strategy, ImplicitStrategy):
        raise TypeError(f"The 'strategy' parameter of {caller} must be an ImplicitStrategy. "
                        f"Got {type(strategy).__name__}.")
    tol = v.check_real(tol, name="tol", caller=caller, low=0.0, high=1.0, low_open=True)
    y = v.check_vector(y, name="y", caller=caller, length=strategy.n_rows, meaning="the strategy's rows")
    if strategy.is_product:
        t = strategy.terms[0]
        rows = tuple(f.matrix.shape[0] for f in t.factors)
        pinvs = [fc.strategy_inverse(f).pinv for f in t.factors]
        return kron_apply(pinvs, y.reshape(rows)) / t.weight, SolveInfo("pinv", 0, 0.0, tol)
    shape, N, p = strategy.shape, strategy.domain_size, strategy.n_rows
    op = LinearOperator((p, N), dtype=np.float64, matvec=lambda z: strategy_apply(strategy, z.reshape(shape)),
                        rmatvec=lambda r: strategy_apply_transpose(strategy, r).ravel())
    limit = max(1000, 10 * min(N, 10**4)) if max_iterations is None else v.check_int(
        max_iterations, name="max_iterations", caller=caller)
    # x̂ = A⁺y is linear in y: solve for y/s, s = max|y|, so that the norms below cannot overflow (counts near 1e300
    # read "residual 0 > tol" — ‖y‖ was inf) nor underflow; LSMR's tests are scale-free
    scale = float(np.abs(y).max())
    if scale == 0.0:
        return np.zeros(shape), SolveInfo("lsmr", 0, 0.0, tol)
    y = y / scale
    out = lsmr(op, y, atol=tol, btol=tol, maxiter=limit)
    xhat, istop, itn, normA = out[0], out[1], out[2], out[5]
    r = y - op.matvec(xhat)
    rnorm = float(np.linalg.norm(r))
    gradient = float(np.linalg.norm(op.rmatvec(r)))
    rel = gradient / max(normA * rnorm, 1e-300) if rnorm > 0 else 0.0
    # Aᵀr carries round-off of order eps·‖A‖·(‖y‖ + ‖A‖‖x̂‖) from forming r = y − Ax̂ by cancellation: with counts
    # large against the noise (‖y‖/‖r‖ ≥ 10⁶) that alone passed 10·tol relative to ‖A‖‖r‖, and a well-conditioned
    # union (cond 2) was refused — after release had drawn its noise. Round-off is not a failure to converge.
    floor = 64 * np.finfo(float).eps * normA * (float(np.linalg.norm(y)) + normA * float(np.linalg.norm(xhat)))
    # istop 1/2: converged by the tolerance tests (b ≈ Ax, or normal equations); 4/5: ill-conditioned or budget.
    # Each is re-checked on the true residual, with LSMR's own test: 1 is ‖r‖ ≤ btol‖y‖ + atol‖A‖‖x̂‖ (a consistent
    # system, e.g. a square union of full rank). Without the atol‖A‖‖x̂‖ term a third of Laplace draws on a 48×48
    # union of condition 41 were refused (‖r‖/‖y‖ 1.3–4.9·10⁻¹⁰, x̂ within 3·10⁻⁹ of lstsq's) — after the noise.
    consistent = rnorm <= 10 * tol * (float(np.linalg.norm(y)) + normA * float(np.linalg.norm(xhat)))
    if istop not in (0, 1, 2) or (not consistent and rel > 10 * tol and gradient > floor):
        raise ValueError(f"{caller}: LSMR did not reach the least-squares solution for '{strategy.name}' "
                         f"(istop={istop}, {itn} iterations, normal-equation residual {rel:.3g} > {tol:g}). "
                         "Solve again with a larger max_iterations or tol, mmopt.structured.least_squares(strategy, "
                         "y, tol=..., max_iterations=...) (a release returns y as .measurements), or use a "
                         "better-conditioned strategy.")
    return scale * xhat.reshape(shape), SolveInfo("lsmr", int(itn), rel, tol)


@dataclass(frozen=True, eq=False)
class StructuredOutput:
    """One run (or ``size`` runs stacked on axis 0) of the structured matrix mechanism (simulation path)."""

    answers: np.ndarray | None = field(repr=False)  # W x̂, or None past the answer limit
    estimate: np.ndarray = field(repr=False)        # x̂, shaped (…, n₁, …, n_d)
    noise_scale: float
    noise: str
    sensitivity: float
    sensitivity_exact: bool  # False: Δ is a proven upper bound (more noise than needed, still private)
    expected_total: float    # E‖W x̂ − W x‖² of least squares at the noise drawn (an upper bound unless
    #                          report.total_exact); report.total_squared_error is evaluate's, at Privacy's σ
    report: analysis.ImplicitErrorReport
    solve: SolveInfo         # the least-squares step x̂ = A⁺y (always run: it starts every reconstruction)
    path: str = "simulation"
    reconstruction: Reconstruction | None = None  # which estimate ``estimate`` is, and its solver record
    verified_loss: float | tuple | None = None    # release: OpenDP's privacy map at Δ (ε, or (ε, δ)); else None
    measurements: np.ndarray | None = field(default=None, repr=False)  # release: the noisy y = A x + z
    n_measurements: int | None = None  # simulation: A's rows, for mmopt.answers to check the strategy it is given
    strategy_probe: tuple[float, float] | None = None  # A's gram_probe: mmopt.answers checks the strategy given

    @property
    def privacy(self):
        """The budget (the report's), as the dense MechanismOutput's ``privacy``: it was missing here, so code
        reading ``out.privacy`` raised AttributeError past 4,096 cells, where kron/marginals turn implicit."""
        return self.report.privacy

    def __getattr__(self, name: str):  # only for names the class lacks: where the answers' table lives
        raise missing_attribute(self, name)


def expected_at(report: analysis.ImplicitErrorReport, privacy: Privacy, scale: float) -> float:
    """E‖W x̂ − W x‖² at the noise scale drawn: evaluate's total is at ``privacy``'s own σ (or b); a release draws
    OpenDP's (a few per cent larger under zCDP) or the caller's ``noise_scale``, whose variance it scales by."""
    calibrated = privacy.noise_scale(report.sensitivity)
    return report.total_squared_error * (scale / calibrated) ** 2 if calibrated > 0 else report.total_squared_error


def matrix_mechanism(workload: ImplicitWorkload, strategy: ImplicitStrategy, x, privacy: Privacy, *,
                     rng=None, size: int | None = None, tol: float = DEFAULT_TOL,
                     max_answers: int = MAX_ANSWERS, reconstruct: str = "least_squares", total: float | None = None,
                     zeros=None, reconstruct_options: dict | None = None,
                     noise_scale: float | None = None) -> StructuredOutput:
    """Simulate M_A(W, x) = W A⁺(A x + z) on a product domain (Li et al., PODS 2010, Prop. 3).

    z is i.i.d. Laplace(Δ₁/ε) (δ = 0) or Gaussian at Δ₂ (δ > 0), Δ from
    :func:`~mmopt.structured.strategies.sensitivity` (exact, or a proven upper bound). Support is checked
    by :func:`~mmopt.structured.analysis.evaluate`, whose total is the expected ‖W x̂ − W x‖².
    ``reconstruct`` ("least_squares", "nnls", "projection"), ``total`` and ``zeros`` (a boolean mask, flat or
    shaped like the domain) are those of :func:`mmopt.matrix_mechanism`: post-processing with public facts,
    by :func:`reconstruct_estimate`. ``noise_scale`` (never below ``privacy``'s) draws at another b or σ, e.g. a
    release's. **Simulation only** (numpy noise).
    """
    caller = "matrix_mechanism"
    check_type(workload, ImplicitWorkload, name="workload", caller=caller)
    check_privacy(privacy, caller, optional=False)  # a mechanism needs a real budget
    report = analysis.evaluate(workload, strategy, privacy, caller=caller)  # types, domain, support, error
    reconstruct, total, zeros, options = check_reconstruction(reconstruct, total, zeros, reconstruct_options,
                                                              strategy.domain_size, caller, strategy.shape)
    x = check_counts(x, strategy, caller)
    runs = 1 if size is None else v.check_int(size, name="size", caller=caller)
    max_answers = v.check_int(max_answers, name="max_answers", caller=caller, low=0)  # nan, -1 gave no answers
    ck.check_allocation(runs * (strategy.n_rows + strategy.domain_size), what=f"{runs} noisy runs",
                        caller=caller, limit=ck.MAX_VECTOR_ENTRIES)
    scale = (privacy.noise_scale(report.sensitivity) if noise_scale is None
             else simulation_scale(privacy, report.sensitivity, noise_scale, caller))
    clean = strategy_apply(strategy, x)
    gen = v.check_rng(rng, name="rng", caller=caller)  # the dense path's rule (np.int64, SeedSequence too)
    draw = gen.laplace if privacy.noise == "laplace" else gen.normal
    estimates, answers, info, hows = [], [], None, []
    for _ in range(runs):
        xhat, info, how = reconstruct_estimate(workload, strategy, clean + draw(0.0, scale, size=clean.shape),
                                               reconstruct, total=total, zeros=zeros, tol=tol, options=options)
        estimates.append(xhat)
        hows.append(how)
        if workload.n_queries <= max_answers:
            answers.append(answer(workload, xhat))
    est = estimates[0] if size is None else np.stack(estimates)
    ans = None if not answers else (answers[0] if size is None else np.stack(answers))
    return StructuredOutput(ans, est, scale, privacy.noise, report.sensitivity, report.sensitivity_exact,
                            expected_at(report, privacy, scale), report, info, reconstruction=combine(hows),
                            n_measurements=int(strategy.n_rows), strategy_probe=implicit_probe(strategy))


def check_counts(x, strategy: ImplicitStrategy, caller: str) -> np.ndarray:
    """x as counts shaped like the domain (flat or shaped input), refused if any is negative."""
    x = ck.check_data(x, strategy.shape, caller=caller)
    refuse_negative(x, caller)
    return x


def reconstruct_estimate(workload: ImplicitWorkload, strategy: ImplicitStrategy, y: np.ndarray, method: str, *,
                         total=None, zeros=None, tol: float = DEFAULT_TOL, options: dict | None = None
                         ) -> tuple[np.ndarray, SolveInfo, Reconstruction]:
    """(estimate, least-squares record, reconstruction record) from one y: x̂ = A⁺y, then ``method``.

    "nnls" and "projection" start from x̂ and are solved by ADMM and/or FISTA (:mod:`mmopt.reconstruct.implicit`),
    which raise :class:`mmopt.solvers.SolverError` if the KKT residual does not reach its tolerance; ``options``
    (checked ``reconstruct_options``: ``tol``, ``max_iterations``) tune them. ``tol`` is least squares' own.
    """
    xhat, info = least_squares(strategy, y, tol=tol)
    if method == "nnls":
        h, how = recon.nnls(strategy, y, xhat, total=total, zeros=zeros, **(options or {}))
    elif method == "projection":
        h, how = recon.projection(workload, xhat, total=total, zeros=zeros, **(options or {}))
    else:
        h, how = xhat, Reconstruction("least_squares", info.method, info.iterations, info.normal_residual, tol)
    return h, info, how

