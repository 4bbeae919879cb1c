"""Input checks and size guards for the structured (implicit) layer; message templates live here.

Notation: see README. Messages follow :mod:`mmopt._base.validation` (scikit-learn's template). A structured
object never densifies silently: every allocation that grows with the domain is checked here first and
refused with the number of bytes it would need.
"""

from __future__ import annotations

import math

import numpy as np

from mmopt._base import validation as v
from mmopt._base.frames import check_positional
from mmopt._base.guards import check_working_set
from mmopt._base.validation import check_shape  # noqa: F401  (the structured layer's callers use ck.check_shape)

# Refuse dense N×N / m×N requests above this many float64 entries (0.8 GB).
MAX_DENSE_ENTRIES = 10**8
# Refuse length-N vectors (data, estimates, scans) above this many entries (4 GB of float64).
MAX_VECTOR_ENTRIES = 5 * 10**8
# Dense reference paths (exact error of a general union strategy) run up to this many cells.
DENSE_LIMIT = 4096


def fmt_bytes(n_entries: int) -> str:
    """Human size of n_entries float64 values."""
    b = 8 * n_entries
    for unit, size in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6)):
        if b >= size:
            return f"{b / size:.3g} {unit}"
    return f"{b} bytes"


def fmt_int(n: int) -> str:
    return f"{n:,}" if n < 10**15 else v.scientific(n)


def check_allocation(n_entries: int, *, what: str, caller: str, limit: int = MAX_DENSE_ENTRIES,
                     remedy: str = "") -> None:
    """Refuse to allocate more than ``limit`` float64 entries, saying how much it would take."""
    if n_entries > limit:
        raise ValueError(
            f"{caller}: {what} would have {fmt_int(n_entries)} entries ({fmt_bytes(n_entries)} of float64), "
            f"more than the limit of {fmt_int(limit)} entries ({fmt_bytes(limit)}).{remedy}"
        )


def check_weight(w, *, name: str, caller: str) -> float:
    """A term weight: a finite real number > 0."""
    return v.check_real(w, name=name, caller=caller, low=0.0, low_open=True)


def check_query_weights(weights, *, name: str, caller: str) -> None:
    """A workload's term weights (each already a checked float > 0, :func:`check_weight`): the largest must have
    w² a normal float (|w| in [1.5e-154, 1.3e154]), as the dense ``stack`` asks — so every w² is below float64's
    overflow. Every error figure scales with the terms' w²: a single term of weight 1e-200 gave error 0.0 and SVD
    bound 0.0 with no warning (1e-160: a subnormal with lost digits); beside a heavier term a tiny one only
    underflows its own negligible share. Only the maximum is taken (C-level): a union of 161,700 terms is checked
    at every construction."""
    top = max(weights, default=1.0)
    if not _SQRT_TINY <= top <= _SQRT_MAX:
        raise ValueError(f"The '{name}' parameter of {caller} must have its square within float64 (|w| in "
                         f"[1.5e-154, 1.3e154], for the largest weight). Got {top!r}. Every error figure "
                         "scales with w²: rescale the queries.")


_SQRT_TINY, _SQRT_MAX = math.sqrt(np.finfo(float).tiny), math.sqrt(np.finfo(float).max)


def check_weights(weights, count: int, *, caller: str) -> tuple[float, ...]:
    """``count`` weights > 0 (None means all ones)."""
    if weights is None:
        return (1.0,) * count
    if not isinstance(weights, list | tuple) and np.ndim(weights) != 1:  # [[1, 2]] was read as [1, 2]: the dense
        # stack refuses it, and a (count, 1) array would have passed whatever its meaning
        raise ValueError(f"The 'weights' parameter of {caller} must be a 1-D sequence, one weight per term "
                         f"({count}). Got an array of shape {np.shape(weights)}.")
    w = np.asarray(weights, dtype=object).tolist() if not isinstance(weights, list | tuple) else weights
    if len(w) != count:
        raise ValueError(f"The 'weights' parameter of {caller} must have one weight per term ({count}). "
                         f"Got {len(w)}.")
    return tuple(check_weight(x, name="weights", caller=caller) for x in w)


def check_data(x, shape: tuple[int, ...], *, caller: str, name: str = "x") -> np.ndarray:
    """Data on the domain ``shape``: flat (N,) or shaped; returned as a finite float64 array of ``shape``."""
    N = math.prod(shape)
    check_allocation(N, what=f"a data vector over {fmt_int(N)} cells", caller=caller, limit=MAX_VECTOR_ENTRIES)
    check_positional(x, name=name, caller=caller)
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"The '{name}' parameter of {caller} must be an array of numbers. Got {exc}.") from None
    if a.shape != shape and a.shape != (N,):
        raise ValueError(f"The '{name}' parameter of {caller} must have shape {shape} or ({N},) (the domain). "
                         f"Got shape {a.shape} instead.")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"The '{name}' parameter of {caller} must be finite. Got NaN or infinite entries.")
    return a.reshape(shape)


def same_shape(first: tuple[int, ...], second: tuple[int, ...], *, caller: str, what: str) -> None:
    """Two structured objects must share the attribute sizes, not only the cell count."""
    if tuple(first) != tuple(second):
        raise ValueError(f"{caller}: {what} have different domains: {tuple(first)} and {tuple(second)}. "
                         "Build them over the same attribute sizes, in the same order.")


def check_evaluation_memory(workload, strategy, caller: str, *, inverses: bool, grams: bool,
                            dense: bool = False) -> None:
    """Refuse, before the factor tables are built, a working set beyond :func:`mmopt._base.guards.working_set_limit`.

    The per-factor tables are cached for the whole call (:class:`~mmopt.structured.factors.Cache`), so they
    add up over the *distinct* factors: per workload factor (m×n) its Gram root F (n·min(m, n); m·n when W is
    used) and Gram (n²); per strategy factor (p×n) its pseudo-inverse data (n² + n·p) on the product and
    Löwner paths, and its Gram (n²) where the marginals algebra is tried. On top, the largest transient of
    one factor (an SVD: p·n + p·min(p, n) + 3n², or p² + … for a wide factor; an eigh: 3n²), or, on the
    dense path, about 13 N² (X, its square root and the dense evaluation). Each part alone may be under the
    per-array limit of :func:`mmopt._base.validation.check_allocation` while their sum exhausts memory, which is
    what this refuses (e.g. all 2-way marginals of (10⁴,)*5: 50 factor Grams of 10⁴×10⁴ is 80 GB).
    """
    held, transient = {}, 0
    seen = set()
    for t in workload.terms:
        for f in t.factors:
            if id(f) in seen:
                continue
            seen.add(id(f))
            n, m = f.domain_size, min(f.n_queries, 2**62)
            explicit = m * n <= 10**6
            held[id(f)] = (n * min(m, n) if not explicit else m * n) + n * n
            transient = max(transient, 3 * n * n if not explicit else m * n + n * n)
    w_held = sum(held.values())
    s_held, seen = 0, set()
    for t in strategy.terms:
        for f in t.factors:
            if id(f) in seen:
                continue
            seen.add(id(f))
            p, n = f.matrix.shape
            if inverses:
                s_held += n * n + n * p
                transient = max(transient, p * n + (p * p if p < n else p * n) + 3 * n * n)
            if grams:
                s_held += n * n
                transient = max(transient, n * n)
    parts = {f"Gram roots and Grams of {len(held)} distinct workload factor(s)": w_held,
             "pseudo-inverses and Grams of the distinct strategy factors": s_held,
             "the largest single factorisation's temporaries": transient}
    if dense:
        N = strategy.domain_size
        parts[f"the dense path on N = {N:,} cells (X = AᵀA, its square root, the dense evaluation)"] = 13 * N * N
    check_working_set(parts, caller=caller, what=f"evaluating strategy '{strategy.name}' on workload "
                        f"'{workload.name}'", remedy=" Share factor objects between terms (the tables are kept "
                        "per distinct factor), use smaller attributes, or raise the limit on a larger machine.")
