"""Training workloads beyond prefix sums: momentum (Toeplitz) and learning-rate schedules (semiseparable).

Notation: see README and :mod:`mmopt.participation.schemas`. Gradient descent with step sizes η_s and heavy-ball
momentum β updates v_s = β v_{s−1} + g_s, θ_t = θ_{t−1} − η_t v_t, so θ_t − θ_0 = −(W g)_t with

    W_tr = Σ_{s=r}^{t} η_s β^{s−r}   (r ≤ t),   i.e.  W = L·diag(η)·M_β,

L the prefix-sum matrix (lower-triangular ones) and M_β = T(1, β, β², …) (Denisov et al., NeurIPS 2022, §5;
Choquette-Choo et al., ICML 2023, the "momentum" workloads). The correlated noise of a factorisation W = B C
enters the iterates exactly as W C⁻¹ z, so the error of every iterate is the workload's.

* Constant η (:func:`momentum`): W = T(a), a_k = Σ_{j≤k} β^j = (1 − β^{k+1})/(1 − β), lower-triangular Toeplitz;
  β = 0 is prefix sums. :func:`toeplitz_workload` takes any coefficients.
* A schedule η (:func:`learning_rate_workload`, e.g. :func:`cosine_decay`): W_tr = β^{−r}(P_t − P_{r−1}) with
  P_t = Σ_{s≤t} η_s β^s, a rank-2 function of (t, r) on the lower triangle: W is lower *semiseparable* of rank
  ≤ 2 (rank 1 without momentum: W_tr = η_r, the prefix sums of lr-weighted gradients), Toeplitz only when η is
  constant. It is held dense (n×n), as the certified optimum under fixed epochs needs (n ≤ 4,096).

All are dense :class:`~mmopt.Workload` objects with their matrix, which ``optimize(W, participation=...)`` takes;
:func:`toeplitz_coefficients` recovers a from a lower-triangular Toeplitz W (checked entry by entry).
"""

from __future__ import annotations

import numpy as np

from mmopt._base import validation as v
from mmopt._base.cumulative import cumulative_rows

__all__ = ["MAX_N", "cosine_decay", "learning_rate_workload", "linear_decay", "momentum", "toeplitz_coefficients",
           "toeplitz_workload"]

#: the largest n these dense workloads are built at (the certified optimum's limit, mmopt.participation.optimum)
MAX_N = 4096


def _dense(W: np.ndarray, name: str):
    from mmopt.dense._workload_type import Workload
    return Workload.from_matrix(W, name=name)


def toeplitz_workload(coefficients, *, name: str = "toeplitz"):
    """W = T(a): W_tr = a_{t−r} for r ≤ t, n = len(a).

    Examples
    --------
    >>> toeplitz_workload([1.0, 0.5, 0.25]).matrix.tolist()
    [[1.0, 0.0, 0.0], [0.5, 1.0, 0.0], [0.25, 0.5, 1.0]]
    """
    caller = "toeplitz_workload"
    a = v.check_vector(coefficients, name="coefficients", caller=caller)
    n = len(a)
    if not 1 <= n <= MAX_N:
        raise ValueError(f"The 'coefficients' parameter of {caller} must have between 1 and {MAX_N:,} entries (the "
                         f"workload is dense). Got {n:,} instead.")
    if a[0] == 0:
        raise ValueError(f"The 'coefficients' parameter of {caller} must have a non-zero first entry (W "
                         "invertible, as every training workload is). Got coefficients[0] = 0 instead.")
    from scipy.linalg import toeplitz
    return _dense(toeplitz(a, np.zeros(n)), v.check_str(name, name="name", caller=caller))


def momentum(n: int, beta: float = 0.9):
    """Heavy-ball momentum β at a constant step: a_k = (1 − β^{k+1})/(1 − β) (module docstring).

    Examples
    --------
    >>> momentum(4, 0.5).matrix[-1].tolist()          # 1 + β + … + β^k for the gradient k steps back
    [1.875, 1.75, 1.5, 1.0]
    >>> bool(np.array_equal(momentum(5, 0.0).matrix, np.tril(np.ones((5, 5)))))   # β = 0: prefix sums
    True
    """
    caller = "momentum"
    n = v.check_int(n, name="n", caller=caller, high=MAX_N)
    beta = v.check_real(beta, name="beta", caller=caller, low=0.0, high=1.0, high_open=True)
    a = np.cumsum(beta ** np.arange(n))  # Σ_{j≤k} β^j, summed rather than (1 − β^{k+1})/(1 − β): no cancellation
    return toeplitz_workload(a, name=f"momentum({beta:g})")


def learning_rate_workload(learning_rates, *, beta: float = 0.0):
    """W = L·diag(η)·M_β: the iterates of SGD with step sizes η_t and momentum β (module docstring).

    Parameters
    ----------
    learning_rates : array_like (n,)
        η_t > 0 (:func:`cosine_decay`, :func:`linear_decay`, or any schedule).
    beta : float in [0, 1), default 0
        Heavy-ball momentum.

    Examples
    --------
    >>> learning_rate_workload([1.0, 0.5, 0.25]).matrix.tolist()    # row t: η_r for every r ≤ t
    [[1.0, 0.0, 0.0], [1.0, 0.5, 0.0], [1.0, 0.5, 0.25]]
    """
    caller = "learning_rate_workload"
    eta = v.check_vector(learning_rates, name="learning_rates", caller=caller)
    n = len(eta)
    if not 1 <= n <= MAX_N or np.any(eta <= 0):
        raise ValueError(f"The 'learning_rates' parameter of {caller} must hold between 1 and {MAX_N:,} positive "
                         f"step sizes. Got {n:,} with smallest {eta.min() if n else float('nan'):.3g} instead.")
    beta = v.check_real(beta, name="beta", caller=caller, low=0.0, high=1.0, high_open=True)
    v.check_allocation(2 * n * n, what=f"the {n:,}×{n:,} workload and its Gram", caller=caller)
    from scipy.linalg import toeplitz
    M = toeplitz(beta ** np.arange(n), np.zeros(n))
    W = cumulative_rows(eta[:, None] * M)  # L·(diag(η) M): O(n²), no n³ product
    return _dense(W, f"learning_rates(n={n}, beta={beta:g})")


def cosine_decay(n: int, final: float = 0.0) -> np.ndarray:
    """η_t = f + (1 − f)(1 + cos(π t/n))/2, t = 0 … n − 1: cosine decay from 1 towards ``final`` = f.

    >>> cosine_decay(4).round(4).tolist()
    [1.0, 0.8536, 0.5, 0.1464]
    """
    n = v.check_int(n, name="n", caller="cosine_decay", high=MAX_N)
    final = v.check_real(final, name="final", caller="cosine_decay", low=0.0, high=1.0)
    return final + (1 - final) * (1 + np.cos(np.pi * np.arange(n) / n)) / 2


def linear_decay(n: int, final: float = 0.1) -> np.ndarray:
    """η_t = 1 − (1 − f)·t/(n − 1) (n > 1): linear decay from 1 to ``final`` = f.

    >>> linear_decay(3, 0.5).tolist()
    [1.0, 0.75, 0.5]
    """
    n = v.check_int(n, name="n", caller="linear_decay", high=MAX_N)
    final = v.check_real(final, name="final", caller="linear_decay", low=0.0, high=1.0, low_open=True)
    return 1 - (1 - final) * np.arange(n) / max(n - 1, 1)


def toeplitz_coefficients(workload) -> np.ndarray | None:
    """a if ``workload`` is a dense square lower-triangular Toeplitz W = T(a) with its matrix known, else None.

    >>> toeplitz_coefficients(momentum(3, 0.5)).tolist(), toeplitz_coefficients(learning_rate_workload([2, 1]))
    ([1.0, 1.5, 1.75], None)
    """
    from mmopt.dense._workload_type import Workload
    if not isinstance(workload, Workload) or workload.matrix is None:
        return None
    W = workload.matrix
    n = W.shape[1]
    if W.shape[0] != n:
        return None
    a = W[:, 0]
    from scipy.linalg import toeplitz
    return a.copy() if a[0] != 0 and np.array_equal(W, toeplitz(a, np.zeros(n))) else None
