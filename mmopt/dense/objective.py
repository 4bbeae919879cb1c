"""An optimiser's score of a dense strategy, Δ²·tr(G (AᵀA)⁺) against a Gram G, and the SVD bound from G alone.

Split from :mod:`mmopt.error` (which re-exports :func:`unit_objective`, :func:`gram_svd_bound` and
:func:`trusted_gram_svd_bound`): the optimisers score many strategies against one G, so G's spectrum, which the
score's guard needs when A's profile is not certified, is cached for the last G seen.
"""

from __future__ import annotations

import hashlib

import numpy as np

from mmopt._base import guards as g
from mmopt._base import validation as v
from mmopt.dense._error_common import as_strategy, scaled_sensitivity
from mmopt.dense.profile import Spectrum, power_of_two_scale, profile_of_matrix, spectrum, trace_with_profile
from mmopt.dense.support import support_leak, support_tolerance

__all__ = ["bound_of", "gram_svd_bound", "trusted_gram_svd_bound", "unit_objective"]


def gram_svd_bound(G: np.ndarray) -> float:
    """(Σᵢ √λᵢ(G))² / n for a PSD Gram G: the SVD bound at unit privacy, in G's own scale.

    G is checked (finite, square, symmetric, PSD within round-off): a NaN or infinite G and −I gave the "lower
    bound" 0.0. :func:`trusted_gram_svd_bound` skips the check, for a G the caller built as WᵀW.

    >>> gram_svd_bound(np.diag([4.0, 1.0]))  # (2 + 1)² / 2
    4.5
    """
    return trusted_gram_svd_bound(v.check_gram(G, name="G", caller="gram_svd_bound"))


def trusted_gram_svd_bound(G: np.ndarray) -> float:
    """:func:`gram_svd_bound` without its O(n³) check of G, for a G = WᵀW the caller formed itself."""
    return bound_of(spectrum(G), G.shape[0])


def unit_objective(A: np.ndarray, G: np.ndarray, norm: str = "l1") -> float:
    """Δ_norm(A)² · tr(G (AᵀA)⁺) for a Gram G; inf when A does not support G (an optimiser's score).

    Raises :class:`NumericalError` when the value cannot be right (see :func:`evaluate`).
    """
    caller = "unit_objective"
    strategy = as_strategy(A, caller)
    norm = v.check_choice(norm, name="norm", caller=caller, choices=("l1", "l2"))
    n = strategy.matrix.shape[1]
    if not (isinstance(G, np.ndarray) and G.dtype == np.float64 and G.shape == (n, n)):  # the optimisers' own pass
        G = v.check_matrix(G, name="G", caller=caller, square=True)
        if G.shape[0] != n:
            raise ValueError(f"The 'G' parameter of {caller} must be {n}×{n}, the Gram over A's {n} columns. Got "
                             f"shape {G.shape} instead.")
    # an asymmetric G has no meaning here (tr(G M) reads only its symmetric part): refused, O(n²) beside the O(n³)
    with np.errstate(over="ignore", invalid="ignore"):
        if not float(np.max(np.abs(G - G.T))) <= 1e-8 * float(np.max(np.abs(G))):
            raise ValueError(f"The 'G' parameter of {caller} must be a symmetric (Gram) matrix WᵀW, finite. Got "
                             f"max |G − Gᵀ| = {float(np.max(np.abs(G - G.T))):.3g} against max |G| = "
                             f"{float(np.max(np.abs(G))):.3g}.")
    As = np.ldexp(strategy.matrix, -power_of_two_scale(strategy.matrix))
    prof = profile_of_matrix(As)
    if support_leak(G, prof) > support_tolerance(G.shape[0]):
        return np.inf
    spec = None if prof.certified else _cached_spectrum(G)
    value = scaled_sensitivity(As, norm) ** 2 * trace_with_profile(G, prof, spec)
    bound = None if spec is None else bound_of(spec, G.shape[0])
    g.check_value(value, bound, strategy.name, "the given Gram", "unit_objective")
    return value


def bound_of(spec: Spectrum, n: int) -> float:
    """(Σᵢ σᵢ)²/n from G's spectrum (Thm 5.26's bound at unit privacy); s·s is inf past float64 (s ** 2 raised a
    bare OverflowError)."""
    return spec.svd_sum * spec.svd_sum / n



_LAST_SPECTRUM: list = []  # [(G, its digest, Spectrum)]: optimisers score many strategies against one G


def _cached_spectrum(G: np.ndarray) -> Spectrum:
    # the same object with the same bytes: G *= 4 between two calls returned the old spectrum (8.0 for 32.0; a
    # helper's probe). The digest is O(n²), against the spectrum's O(n³)
    digest = hashlib.blake2b(np.ascontiguousarray(G).tobytes(), digest_size=16).digest()
    if _LAST_SPECTRUM and _LAST_SPECTRUM[0][0] is G and _LAST_SPECTRUM[0][1] == digest:
        return _LAST_SPECTRUM[0][2]
    spec = spectrum(G)
    _LAST_SPECTRUM[:] = [(G, digest, spec)]
    return spec
