"""Error analysis of one strategy without a workload: its profile, one query's error, profile equivalence.

Notation: see README. M_A = (AᵀA)⁺ is the error profile (Def. 4.6); one query w has expected squared error
c·Δ_A²·w M_A wᵀ (Prop. 4.4 (1)). Everything is computed on A scaled by an exact power of two, as in
:mod:`mmopt.error`, which re-exports every public name here.
"""

from __future__ import annotations

import math

import numpy as np

from mmopt._base import guards as g
from mmopt._base import validation as v
from mmopt._base.guards import Unsupported
from mmopt.dense._error_common import as_strategy, check_workload, resolve_norm, scaled_sensitivity
from mmopt.dense._workload_core import Workload
from mmopt.dense.profile import Profile, scaled_profile
from mmopt.dense.support import unsupported
from mmopt.privacy import Privacy


def error_profile(strategy) -> Profile:
    """The error profile M_A = (AᵀA)⁺ (Def. 4.6), computed stably from A.

    Examples
    --------
    >>> from mmopt import strategy
    >>> M = error_profile(strategy.wavelet(4)).matrix
    >>> np.round(8 * M, 10)[0].tolist() == [3, -1, 0, 0]   # Fig. 3: M_Y = (1/8)[[3,-1,0,0],...]
    True
    """
    e, _, prof = scaled_profile(as_strategy(strategy, "error_profile"))  # A·2⁻ᵉ: AᵀA never over/underflows
    if e == 0:
        return prof
    with np.errstate(over="ignore", under="ignore"):
        M, B = np.ldexp(prof.matrix, -2 * e), np.ldexp(prof.factor, -e)
    top = float(np.max(np.abs(M)))
    if not np.isfinite(top) or (top > 0 and top < np.finfo(float).tiny):
        raise OverflowError(f"error_profile: the profile (AᵀA)⁺ of this strategy (entries of order 2^{e}) is "
                            f"outside float64's range (≈1e{-2 * e * math.log10(2):.0f}). Error figures do not "
                            "need it: mmopt.evaluate works at any scale. Or rescale A, which changes no error.")
    return Profile(M, B, prof.rank, prof.null_basis, prof.method)


def supports(workload: Workload, strategy) -> bool:
    """Whether every query of the workload lies (numerically) in the row space of A (Def. 3.1).

    Stored queries are judged one by one (:func:`mmopt.dense.support.unsupported`); a workload known only by its
    Gram (``Workload.from_gram``) by the Gram's share off the row space, so there a query carrying less than
    100·n·eps of tr G outside it cannot be told from round-off (unless it uses a cell A never measures: a zero
    column of A, refused exactly): keep W (``Workload.from_matrix``) to check each.
    """
    caller = "supports"
    check_workload(workload, caller)
    strategy = as_strategy(strategy, caller)
    v.check_same_domain(workload.domain_size, strategy.domain_size, caller=caller)
    _, As, prof = scaled_profile(strategy)
    return not unsupported(workload.mean_gram, prof, workload.matrix, As)[0]


def query_error(query, strategy, privacy: Privacy | None = None, *, norm: str | None = None) -> float:
    """Expected squared error c·Δ²·w M wᵀ of one query w (Prop. 4.4 (1)).

    Examples
    --------
    >>> from mmopt import strategy
    >>> round(query_error([1, 0, 0, 0], strategy.hierarchical(4)), 3)   # Ex. 4.7: 9·13/21
    5.571
    """
    caller = "query_error"
    strategy = as_strategy(strategy, caller)
    w = v.check_vector(query, name="query", caller=caller, length=strategy.domain_size)
    norm = resolve_norm(privacy, norm, caller)
    _, As, prof = scaled_profile(strategy)
    if np.any(w) and unsupported(np.outer(w, w), prof, w[None, :])[0]:
        raise Unsupported(f"{caller}: strategy '{strategy.name}' does not support this query (it is not in "
                         "the row space of A). Add rows to A, e.g. augment it with a scaled identity.")
    if not np.any(w):
        return 0.0
    # tr(wᵀw M) = ‖Bᵀ w‖²: a sum of squares, never negative, blind to directions w does not use
    term = float(np.sum((w @ prof.factor) ** 2)) if not prof.certified else float(w @ prof.matrix @ w)
    return g.scaled(scaled_sensitivity(As, norm) ** 2 * term, privacy, "query")


def profile_equivalent(first, second, *, rtol: float = 1e-9) -> bool:
    """Whether two strategies have the same error profile, i.e. AᵀA = BᵀB (Def. 4.10)."""
    A, B = as_strategy(first, "profile_equivalent"), as_strategy(second, "profile_equivalent")
    if A.domain_size != B.domain_size:
        return False
    (XA, ea), (XB, eb) = A.scaled_gram(), B.scaled_gram()   # X = 4ᵉ·X̂, safe at any scale
    e = max(ea, eb)
    with np.errstate(under="ignore"):   # bring both to the larger exponent; what underflows is negligible
        XA, XB = np.ldexp(XA, 2 * (ea - e)), np.ldexp(XB, 2 * (eb - e))
    scale = max(float(np.max(np.abs(XA))), float(np.max(np.abs(XB))), 1e-300)
    return bool(np.max(np.abs(XA - XB)) <= rtol * scale)


def eigen_structure(strategy) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (descending) and eigenvectors (columns) of X = AᵀA; the profile's are their inverses."""
    lam, V = np.linalg.eigh(as_strategy(strategy, "eigen_structure").gram)
    return lam[::-1], V[:, ::-1]
