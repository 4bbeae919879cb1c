"""Release and evaluate with an :class:`~mmopt.structured.orbit_strategy.OrbitStrategy`: the blocks measured in
their own orthonormal bases, OpenDP's Gaussian noise, exact least squares and exact per-query variances.

Notation: see README and :mod:`mmopt.structured.orbit_maxvar`. The strategy's Gram is X = Σ_c K_c (X_c ⊗ I) K_cᵀ
with K_c = ⊗ⱼ Bⱼ (Bⱼ the orbit-indicator basis U of attribute j, or the Helmert basis of one orbit's zero-sum
vectors), orthonormal columns and mutually orthogonal ranges. The measurement is

    y_c = (S_c ⊗ I) K_cᵀ x + z_c,     S_c = X_c^{1/2} (symmetric, from X_c's eigendecomposition),

one row per coordinate of every measured block, so Aᵀ A = Σ_c K_c (S_cᵀS_c ⊗ I) K_cᵀ = X: every query's variance
is the plan's. Least squares is block by block, x̂ = Σ_c K_c (S_c⁺ ⊗ I) y_c, and W x̂ is the workload's implicit
product. The sensitivity is that of the matrices used, Δ₂² = max_x Σ_c (K_c (S_cᵀS_c ⊗ I) K_cᵀ)_xx (the cell
diagonal of :func:`~mmopt.structured.orbit_maxvar.cell_diagonal` at S_cᵀS_c, in floating point), rounded upwards
as every mmopt release; the guarantee is that of :func:`mmopt.release`. A x is computed by compensated mode
products (:mod:`mmopt.structured.charged_answers`) and the proven bound on its rounding charged in d_in
(:func:`_charge`, about 9.5·10⁻⁷ of Δ): plain BLAS had moved neighbours past d_in at 2³² records (reviews' exact
checks: 2 of 360 by 5.7·10⁻⁸ of it on one planned strategy, 12 of 91 by up to 6.6·10⁻⁷ on a rank-deficient one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from mmopt._base.opendp import finite, measure
from mmopt._base.probe import gram_probe
from mmopt.dense.exact_answers import check_histogram
from mmopt.privacy import Privacy
from mmopt.structured import charged_answers as ca
from mmopt.structured import orbit_maxvar as om
from mmopt.structured.mechanism import answer, check_counts, kron_apply
from mmopt.structured.orbit_strategy import OrbitStrategy
from mmopt.structured.release import upper_sensitivity

__all__ = ["OrbitRelease", "evaluate", "orbit_apply", "release"]


@dataclass(frozen=True, eq=False)
class OrbitRelease:
    """``answers`` W x̂ (the workload's row order), their exact ``variances`` at the noise drawn, ``estimate`` x̂
    (the domain's shape), the noise ``noise_scale`` σ, the ``sensitivity`` Δ₂ it was calibrated to (rounded up),
    OpenDP's ``verified_loss`` and the noisy ``measurements``."""

    answers: np.ndarray = field(repr=False)
    variances: np.ndarray = field(repr=False)
    estimate: np.ndarray = field(repr=False)
    noise_scale: float
    sensitivity: float
    verified_loss: object
    measurements: np.ndarray = field(repr=False)
    noise: str = "gaussian"
    strategy_probe: tuple[float, float] | None = None  # A's gram_probe: mmopt.answers checks the strategy given
    # what every release output says (mmopt release's report read them, and failed with AttributeError after the
    # draw once a planned sf1 strategy could be saved and released from the CLI): OpenDP's noise, least squares
    path: str = "release"
    reconstruction: object = None


def _implicit(workload, caller: str):
    from mmopt.structured.workloads import ImplicitWorkload
    W = workload.to_implicit() if hasattr(workload, "to_implicit") and not isinstance(workload, ImplicitWorkload) \
        else workload
    if not isinstance(W, ImplicitWorkload):
        raise TypeError(f"The 'workload' parameter of {caller} must be the union of Kronecker products (or grouping "
                        f"sets) the OrbitStrategy was planned for. Got {type(workload).__name__}.")
    return W


def _reduction(W, A: OrbitStrategy, caller: str) -> om.Reduction:
    """W's reduction, refused unless its cell orbits and blocks are the strategy's (a strategy planned for W)."""
    red = om.reduce(W, caller)
    same = (len(red.orbits) == len(A.orbits) and red.combinations == A.combinations
            and all(np.array_equal(a.labels, b.labels) for a, b in zip(red.orbits, A.orbits, strict=True)))
    if not same:
        raise ValueError(f"{caller}: the OrbitStrategy '{A.name}' was planned for a workload with other cell "
                         f"symmetries than '{W.name}'. Plan (or optimise) the strategy for this workload.")
    return red


def _estimable(unit: np.ndarray, W, A: OrbitStrategy, caller: str) -> np.ndarray:
    """The per-query variances ``unit``, refused when a query is not estimable from A (an infinite variance)."""
    if not np.all(np.isfinite(unit)):
        raise ValueError(f"{caller}: {int(np.sum(~np.isfinite(unit))):,} queries of '{W.name}' are not estimable "
                         f"from the OrbitStrategy '{A.name}' (blocks it does not measure). Plan it for this workload.")
    return unit


def _roots(A: OrbitStrategy) -> list:
    """(S_c, S_c⁺) per block (None where nothing is measured): the symmetric square root and its pseudo-inverse."""
    out = []
    for X in A.blocks:
        if X is None:
            out.append(None)
            continue
        lam, V = np.linalg.eigh((X + X.T) / 2)
        keep = lam > lam.max() * lam.size * np.finfo(float).eps  # max_variance._variances' range
        root = np.sqrt(np.where(keep, lam, 0.0))
        inv = np.divide(1.0, root, out=np.zeros_like(root), where=keep)
        out.append(((V * root) @ V.T, (V * inv) @ V.T))
    return out


class _Blocks:
    """Per block c: its bases Bⱼ, and the coefficient layout (trivial attributes first, then standard ones, as
    X_c ⊗ I orders them)."""

    def __init__(self, A: OrbitStrategy):
        self.bases = [A.block_bases(c) for c in A.combinations]
        self.trivial = [[j for j, cj in enumerate(c) if cj < 0] for c in A.combinations]  # bases U: orbit indicators
        self.order = [t + [j for j, cj in enumerate(c) if cj >= 0] for t, c in zip(self.trivial, A.combinations,
                                                                                   strict=True)]
        self.rows = [math.prod(o.r for o, cj in zip(A.orbits, c, strict=True) if cj < 0) for c in A.combinations]

    def coefficients(self, k: int, x: np.ndarray) -> np.ndarray:
        """K_cᵀ x as a (trivial coordinates × standard coordinates) matrix."""
        T = kron_apply([B.T for B in self.bases[k]], x)
        return np.transpose(T, self.order[k]).reshape(self.rows[k], -1)

    def synthesis(self, k: int, C: np.ndarray) -> np.ndarray:
        """K_c applied to coefficients C (trivial × standard), in the domain's shape."""
        dims = [self.bases[k][j].shape[1] for j in self.order[k]]
        return kron_apply(self.bases[k], np.transpose(C.reshape(dims), np.argsort(self.order[k])))


def _charge(roots, blocks: _Blocks) -> tuple[float, float]:
    """(c, η) of the charged answers (:func:`_charged_parts`), from the strategy alone: the modes' bound of
    :mod:`mmopt.structured.charged_answers`. It is taken with (|S_c| ⊗ I)(⊗ⱼ|Bⱼ|ᵀ) x, whose columns have A's norms:
    a trivial attribute's basis is its orbit indicators (one non-zero per row, checked), so column x of the trivial
    part is a multiple of one unit vector e_o, |S_c| of it has ‖S_c e_o‖ as norm, and the standard part is I."""
    c = eta = 0.0
    for k, r in enumerate(roots):
        if r is None:
            continue
        if not all(np.all(np.count_nonzero(blocks.bases[k][j], axis=1) <= 1) for j in blocks.trivial[k]):
            raise RuntimeError("orbit release: a trivial attribute's basis is not its orbit indicators; the charge "
                               "below assumes it (a bug: please report it).")
        mats = [B.T for B in blocks.bases[k]] + [r[0]]
        ca.check_magnitudes(mats, range(len(mats)), 1.0)
        rho = eta_k = 0.0
        for M in mats:
            rho, eta_k = ca.mode_charge(M, rho, eta_k)
        c_k, eta_k = ca.final_charge(rho, eta_k)
        c, eta = max(c, c_k), max(eta, eta_k)
    return c, eta


def _charged_parts(roots, blocks: _Blocks, x: np.ndarray) -> list:
    """:func:`_parts` by compensated mode products (:func:`mmopt.structured.charged_answers.compensated_mode`),
    each answer the pair's sum rounded once: within c·|A|x + η of the exact ones (:func:`_charge`)."""
    out = []
    for k, r in enumerate(roots):
        if r is None:
            continue
        hi, lo = x, None
        for j, B in enumerate(blocks.bases[k]):
            hi, lo = ca.compensated_mode(B.T, hi, lo, j)
        hi, lo = (np.transpose(T, blocks.order[k]).reshape(blocks.rows[k], -1) for T in (hi, lo))
        hi, lo = ca.compensated_mode(r[0], hi, lo, 0)
        out.append((k, hi + lo))
    return out


def _sensitivity(A: OrbitStrategy, roots) -> float:
    """Δ₂ of the measurement as built: max_x of the cell diagonal at S_cᵀS_c (floating point)."""
    grams = [None if r is None else r[0].T @ r[0] for r in roots]
    return math.sqrt(float(om.cell_diagonal(A, grams).max()))


def evaluate(workload, A: OrbitStrategy, privacy: Privacy | None = None, *, caller: str = "evaluate"):
    """Exact total, largest and per-query variance of ``A`` on ``workload`` (Gaussian noise; privacy None: unit
    noise at Δ₂ = 1), as an :class:`~mmopt.structured.ImplicitErrorReport`."""
    from mmopt._base import guards
    from mmopt.structured._report import ImplicitErrorReport
    if privacy is not None and not isinstance(privacy, Privacy):  # routed here before any check: a raw
        # AttributeError on privacy.noise (a helper's audit)
        raise TypeError(f"The 'privacy' parameter of {caller} must be a Privacy or None. Got "
                        f"{type(privacy).__name__}: use Privacy(epsilon, delta) with delta > 0.")
    if privacy is not None and privacy.noise != "gaussian":
        raise ValueError(f"{caller}: an OrbitStrategy is a Gaussian-noise strategy (its L1 sensitivity has no closed "
                         f"form here). Use privacy=Privacy(epsilon, delta) with delta > 0. Got {privacy!r}.")
    W = _implicit(workload, caller)
    red = _reduction(W, A, caller)
    delta2 = A.sensitivity_squared()
    # refused as the dense path and release refuse an unsupported workload (it returned inf totals here)
    unit = delta2 * _estimable(om.variances(red, A.blocks)[red.query_class], W, A, caller)
    per_query = guards.scaled(1.0, privacy, W.name) * unit
    total, top, m = float(per_query.sum()), float(per_query.max()), W.n_queries
    return ImplicitErrorReport(W.name, A.name, privacy, W.shape, W.domain_size, m, math.sqrt(delta2), True, total,
                               True, total / m, math.sqrt(total / m), top, top, True, "orbit blocks (exact)",
                               per_query_variance=per_query, sensitivity_norm="l2")


def release(workload, A: OrbitStrategy, x, privacy: Privacy, *, noise_scale: float | None = None) -> OrbitRelease:
    """Release W x̂ from the histogram ``x`` (the domain's shape, or flat in C order) with OpenDP's Gaussian noise
    (module docstring).

    Refused before any noise is drawn when a query is not estimable from ``A`` (an infinite variance).
    """
    caller = "release"
    if not isinstance(privacy, Privacy) or privacy.noise != "gaussian":
        raise ValueError(f"The 'privacy' parameter of {caller} must be a Privacy with delta > 0 for an OrbitStrategy "
                         f"(Gaussian noise at its exact L2 sensitivity). Got {privacy!r}.")
    W = _implicit(workload, caller)
    red = _reduction(W, A, caller)
    x = check_counts(x, A, caller)  # flat or shaped, finite, ≥ 0, as the implicit release takes it (flat was refused)
    unit = _estimable(om.variances(red, A.blocks)[red.query_class], W, A, caller)
    check_histogram(x.ravel(), caller)  # whole counts, at most MAX_RECORDS records: what Δ and the charge assume
    roots, blocks = _roots(A), _Blocks(A)
    exact = _sensitivity(A, roots)
    c, eta = _charge(roots, blocks)  # from the strategy alone: the charge never sees the data
    d_in = ca.charged_sensitivity(upper_sensitivity(exact, caller=caller), c, eta, "l2", _n_rows(roots, blocks))
    parts = _charged_parts(roots, blocks, x)
    Ax = finite(np.concatenate([P.ravel() for _, P in parts]), "the strategy answers A x", caller)
    y, scale, loss = measure(Ax, d_in, privacy, noise_scale=noise_scale, caller=caller)
    xhat, at = np.zeros(W.shape), 0
    for k, P in parts:  # x̂ = Σ_c K_c (S_c⁺ ⊗ I) y_c
        Y = y[at:at + P.size].reshape(P.shape)
        at += P.size
        xhat += blocks.synthesis(k, roots[k][1] @ Y)
    variances = (scale * scale) * unit  # σ² w X⁺ wᵀ: the noise is σ on every row of A, AᵀA = X
    return OrbitRelease(answer(W, xhat), variances, xhat, scale, d_in, loss, y,
                        strategy_probe=gram_probe(orbit_apply(A, roots, blocks), A.domain_size))


def _n_rows(roots, blocks: _Blocks) -> int:
    """The number of measurements: every measured block's trivial × standard coordinates."""
    return sum(math.prod(B.shape[1] for B in blocks.bases[k]) for k, r in enumerate(roots) if r is not None)


def _parts(roots, blocks, x) -> list:
    """(block, S_c·C_c(x)) of every measured block: A x, block by block."""
    return [(k, r[0] @ blocks.coefficients(k, x)) for k, r in enumerate(roots) if r is not None]


def orbit_apply(A: OrbitStrategy, roots=None, blocks=None):
    """x ↦ A x (flat, the release's row order) for x flat or shaped like the domain: what :func:`release`
    measures, and what :mod:`mmopt.answers` fingerprints to match a release to its strategy."""
    roots = _roots(A) if roots is None else roots
    blocks = _Blocks(A) if blocks is None else blocks
    return lambda x: np.concatenate([P.ravel() for _, P in _parts(roots, blocks, np.reshape(x, A.shape))])
