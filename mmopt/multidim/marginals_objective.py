"""OPT_M's objective: the unit-privacy error of the weighted marginals strategy M(θ) for a union of products,
and its gradient, in O(d·2^d) from the workload's projection traces c_T (:mod:`mmopt.multidim.marginals`, whose
module docstring derives it; split from it)."""

from __future__ import annotations

import numpy as np

from mmopt._base import validation as v
from mmopt.dense._strategy_core import NORMS
from mmopt.structured import algebra as alg
from mmopt.structured import factors as fc
from mmopt.structured.workloads import ImplicitWorkload

__all__ = ["MAX_ATTRIBUTES", "marginals_objective", "projection_traces", "subset_weights"]

# 2^d weights; mmopt.structured.evaluate's exact algebra path (used to rank restarts) stops at d = 16.
MAX_ATTRIBUTES = 16
_CHUNK = 2**22  # entries of one (terms × 2^d) table while summing c_T


def _check_d(shape, caller: str) -> int:
    d = len(shape)
    if d > MAX_ATTRIBUTES:
        raise ValueError(f"{caller}: OPT_M optimises one weight per attribute subset, 2^d = 2^{d} here; it supports "
                         f"at most d = {MAX_ATTRIBUTES} attributes (the limit of the exact marginals algebra in "
                         "mmopt.structured.evaluate). Use a product strategy (OPT_⊗) instead.")
    return d


def projection_traces(workload: ImplicitWorkload) -> np.ndarray:
    """c_T = tr(G Q_T) for every subset T (length 2^d, bitmask order): the workload's only input to OPT_M.

    Exact for every union of products: c_T = Σ_j w_j² ∏_{i∈T} (tr Gᵢ − 1ᵀGᵢ1/nᵢ) ∏_{i∉T} 1ᵀGᵢ1/nᵢ, the
    per-factor numbers computed as :func:`mmopt.structured.algebra.projection_traces` does (same round-off
    snapping), summed over terms in chunks of a (terms × 2^d) table.
    """
    if not isinstance(workload, ImplicitWorkload):
        raise TypeError(f"The 'workload' parameter of projection_traces must be an ImplicitWorkload. "
                        f"Got {type(workload).__name__}.")
    shape = workload.shape
    _check_d(shape, "projection_traces")
    cache = fc.Cache()
    mean = np.empty((len(workload.terms), len(shape)))
    rest = np.empty_like(mean)
    for j, t in enumerate(workload.terms):
        for i, (f, n) in enumerate(zip(t.factors, shape, strict=True)):
            G = cache.get(fc.workload_gram, f)
            mean[j, i] = float(np.sum(G)) / n
            rest[j, i] = float(np.trace(G)) - mean[j, i]
    # tr G − 1ᵀG1/n = tr(G(I − P)) ≥ 0, exactly 0 for G ∝ J: snap its round-off as the algebra does.
    rest = np.where(rest <= 16 * np.finfo(float).eps * np.abs(mean), 0.0, np.clip(rest, 0.0, None))
    mean = np.clip(mean, 0.0, None)
    w2 = np.array([t.weight**2 for t in workload.terms])
    step = max(1, _CHUNK >> len(shape))
    c = np.zeros(2 ** len(shape))
    for s in range(0, len(w2), step):
        c += w2[s:s + step] @ alg.product_table(rest[s:s + step], mean[s:s + step])
    return c


def subset_weights(shape) -> np.ndarray:
    """w_S = ∏_{i∉S} nᵢ for every subset S: the eigenvalue of ⊗ᵢ(I if i ∈ S else J) on Q_T, T ⊆ S."""
    n = np.asarray(shape, dtype=float)
    return alg.product_table(np.ones((1, n.size)), n[None, :])[0]


def marginals_objective(traces, shape, theta, *, norm: str = "l1", gradient: bool = False):
    """f(θ) = Δ(θ)² Σ_T c_T/λ_T(θ) (module docstring), and ∂f/∂θ when ``gradient``; +∞ when unsupported.

    Parameters
    ----------
    traces : ndarray of shape (2^d,)
        c_T from :func:`projection_traces`.
    shape : tuple of int
        The attribute sizes n₁…n_d.
    theta : array_like of shape (2^d,)
        Weights θ_S ≥ 0 indexed by the bitmask of S (as :func:`mmopt.structured.marginals_strategy`).
    norm : {"l1", "l2"}
        Δ = Σθ (Laplace) or ‖θ‖₂ (Gaussian).

    Returns
    -------
    float, or (float, ndarray)
        The unit-privacy total error of M(θ), equal to ``evaluate(W, marginals_strategy(shape, θ),
        norm=norm).total_squared_error``; ``inf`` (gradient zero) when some c_T > 0 has λ_T = 0.
    """
    caller = "marginals_objective"
    d = _check_d(shape, caller)
    v.check_choice(norm, name="norm", caller=caller, choices=NORMS)
    c = v.check_vector(traces, name="traces", caller=caller, length=2**d, meaning="2^d, one per attribute subset")
    if np.any(c < 0):  # c_T = tr(G Q_T) ≥ 0: a negative one reported an error below the true one (a helper's probe)
        raise ValueError(f"The 'traces' parameter of {caller} must hold c_T = tr(G Q_T) >= 0 "
                         f"(mmopt.multidim.projection_traces). Got {int(np.sum(c < 0))} negative entries.")
    th = v.check_vector(theta, name="theta", caller=caller, length=2**d, meaning="2^d, one per attribute subset")
    if np.any(th < 0):
        raise ValueError(f"The 'theta' parameter of {caller} must hold weights >= 0. "
                         f"Got {int(np.sum(th < 0))} negative entries.")
    return _objective(th, c, subset_weights(shape), norm == "l1", gradient)


def _objective(theta, c, w, l1: bool, gradient: bool):
    lam = alg.superset_sums(theta**2 * w)
    pos = lam > 0
    if np.any(c[~pos] > 0):
        return (np.inf, np.zeros_like(theta)) if gradient else np.inf
    ratio = np.where(pos, c / np.where(pos, lam, 1.0), 0.0)
    E = float(np.sum(ratio))
    delta = float(np.sum(theta)) if l1 else float(np.sqrt(theta @ theta))
    f = delta**2 * E
    if not gradient:
        return f
    dE = alg.subset_sums(np.where(pos, ratio / np.where(pos, lam, 1.0), 0.0))  # Σ_{T⊆S} c_T/λ_T²
    ddelta2 = 2 * delta * np.ones_like(theta) if l1 else 2 * theta  # ∂Δ²/∂θ_S
    return f, ddelta2 * E - 2 * delta**2 * theta * w * dE
