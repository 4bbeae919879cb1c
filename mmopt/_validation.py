"""Input checks shared by every public function; every user-facing message template lives here.

Notation: see README. Messages follow scikit-learn's template ("The 'epsilon' parameter of Privacy
must be ... Got ... instead.") and append a remedy where one exists. They never print whole
matrices: only shapes and the offending statistic.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable

import numpy as np


def _param(name: str, caller: str) -> str:
    return f"The '{name}' parameter of {caller}"


def check_matrix(M, *, name: str, caller: str, square: bool = False) -> np.ndarray:
    """Return ``M`` as a finite 2-D float64 array, or raise a ValueError/TypeError naming it."""
    if isinstance(M, str | bytes) or M is None:
        raise TypeError(f"{_param(name, caller)} must be a 2-D array of numbers. Got {type(M).__name__}.")
    try:
        M = np.asarray(M, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{_param(name, caller)} must be a 2-D array of numbers. Got {exc}.") from None
    if M.ndim != 2:
        raise ValueError(f"{_param(name, caller)} must be a 2-D array. Got an array of shape {M.shape} instead.")
    if M.size == 0:
        raise ValueError(f"{_param(name, caller)} must be non-empty. Got shape {M.shape} instead.")
    if square and M.shape[0] != M.shape[1]:
        raise ValueError(f"{_param(name, caller)} must be a square matrix. Got shape {M.shape} instead.")
    if not np.all(np.isfinite(M)):
        bad = int(np.size(M) - np.count_nonzero(np.isfinite(M)))
        raise ValueError(f"{_param(name, caller)} must be finite. Got {bad} NaN or infinite entries.")
    return M


def check_vector(v, *, name: str, caller: str, length: int | None = None) -> np.ndarray:
    """Return ``v`` as a finite 1-D float64 array of the given length."""
    try:
        v = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{_param(name, caller)} must be a 1-D array of numbers. Got {exc}.") from None
    if v.ndim != 1:
        raise ValueError(f"{_param(name, caller)} must be a 1-D array. Got an array of shape {v.shape} instead.")
    if length is not None and v.shape[0] != length:
        raise ValueError(
            f"{_param(name, caller)} must have length {length} (the domain size n). Got length {v.shape[0]}."
        )
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{_param(name, caller)} must be finite. Got NaN or infinite entries.")
    return v


def check_gram(G, *, name: str = "gram", caller: str, tol: float = 1e-9, remedy: str = "") -> np.ndarray:
    """Return ``G`` as a symmetric PSD float64 matrix (exactly symmetrised), or raise ValueError.

    The PSD test allows eigenvalues down to ``-tol * n * max|eig|`` (round-off of ``W.T @ W``).
    """
    G = check_matrix(G, name=name, caller=caller, square=True)
    scale = float(np.max(np.abs(G)))
    asym = float(np.max(np.abs(G - G.T)))
    if asym > tol * max(scale, 1e-300) * 10:
        raise ValueError(
            f"{_param(name, caller)} must be symmetric; max |G - G.T| is {asym:.3g} "
            f"({asym / max(scale, 1e-300):.2g} of max |G|).{remedy}"
        )
    G = (G + G.T) / 2
    if scale == 0.0:
        return G
    eig = np.linalg.eigvalsh(G)
    if eig[0] < -tol * G.shape[0] * max(eig[-1], 0.0) - 1e-300:
        raise ValueError(
            f"{_param(name, caller)} must be positive semidefinite; its smallest eigenvalue is "
            f"{eig[0]:.3g} ({100 * eig[0] / max(abs(eig[-1]), 1e-300):.2g}% of the largest).{remedy}"
        )
    return G


def check_int(x, *, name: str, caller: str, low: int = 1, high: int | None = None) -> int:
    """Return ``x`` as a Python int in [low, high], rejecting bools and floats."""
    if isinstance(x, bool) or not isinstance(x, numbers.Integral):
        raise TypeError(f"{_param(name, caller)} must be an integer. Got {x!r} ({type(x).__name__}) instead.")
    x = int(x)
    if x < low or (high is not None and x > high):
        rng = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{_param(name, caller)} must be an integer {rng}. Got {x} instead.")
    return x


def check_real(
    x, *, name: str, caller: str, low: float | None = None, high: float | None = None,
    low_open: bool = False, high_open: bool = False,
) -> float:
    """Return ``x`` as a finite float in the given interval (open or closed ends)."""
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise TypeError(f"{_param(name, caller)} must be a real number. Got {x!r} ({type(x).__name__}) instead.")
    x = float(x)
    lo_ok = low is None or (x > low if low_open else x >= low)
    hi_ok = high is None or (x < high if high_open else x <= high)
    if not np.isfinite(x) or not lo_ok or not hi_ok:
        lo = "(" if low_open or low is None else "["
        hi = ")" if high_open or high is None else "]"
        interval = f"{lo}{'-inf' if low is None else f'{low:g}'}, {'inf' if high is None else f'{high:g}'}{hi}"
        raise ValueError(f"{_param(name, caller)} must be a float in the range {interval}. Got {x!r} instead.")
    return x


def check_choice(value, *, name: str, caller: str, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices``; otherwise list them."""
    choices = tuple(choices)
    if value not in choices:
        listed = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{_param(name, caller)} must be one of {listed}. Got {value!r} instead.")
    return value


def check_same_domain(n_workload: int, n_strategy: int, *, caller: str) -> None:
    """The workload and strategy must act on the same number of cells."""
    if n_workload != n_strategy:
        raise ValueError(
            f"{caller}: the workload has domain size n={n_workload} but the strategy has "
            f"n={n_strategy} columns. Build both over the same domain."
        )
