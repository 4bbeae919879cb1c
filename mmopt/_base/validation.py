"""Input checks shared by every public function; every user-facing message template lives here.

Notation: see README. Messages follow scikit-learn's template ("The 'epsilon' parameter of Privacy
must be ... Got ... instead.") and append a remedy where one exists. They never print whole
matrices: only shapes and the offending statistic.

Array inputs (:func:`check_matrix`, :func:`check_vector`) are converted to float64. Accepted: lists,
numpy arrays of integers, floats or booleans (a boolean matrix is a 0/1 predicate matrix), object arrays
whose entries are all real numbers (e.g. :class:`fractions.Fraction`), and scipy.sparse matrices (made
dense, after an allocation check). Refused with a TypeError: ``None``, strings, arrays of strings or
dates, and **every complex array**, even one whose imaginary part is zero: mmopt works over the reals, and
a complex matrix is most often an accident (``np.linalg.eig`` output); pass ``M.real`` if it is not.

Memory: :func:`check_allocation` refuses, before allocating, any array of more than
:data:`MAX_ALLOCATION_ENTRIES` float64 entries, stating the size it would need. It judges one array at a
time; a computation that holds several at once checks their sum with
:func:`mmopt._base.guards.check_working_set` (a share of the memory available), and loop counts (``runs``,
``rounds``, ``restarts``) are bounded by :func:`mmopt._base.guards.check_work`.
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Iterable

import numpy as np
from scipy import sparse

from mmopt._base.frames import check_positional
from mmopt._base.hints import did_you_mean

# The largest array (in float64 entries) any mmopt function allocates: 2·10⁸ entries ≈ 1.6 GB.
# Raise it (mmopt._base.validation.MAX_ALLOCATION_ENTRIES = ...) on a machine with more memory.
MAX_ALLOCATION_ENTRIES = 2 * 10**8


def _param(name: str, caller: str) -> str:
    return f"The '{name}' parameter of {caller}"


def scientific(k: int) -> str:
    """~m.meX of a positive integer that may exceed any float, from its digits (log10 printed as an exponent read
    2·10¹² as "1e12.3").

    >>> scientific(2**1100)
    '~1.3e331'
    """
    digits = str(k)
    return f"~{digits[0]}.{digits[1:2] or '0'}e{len(digits) - 1}"


def fmt_count(k: int) -> str:
    """An exact count, or ~m.meX once it has more than 12 digits (k may exceed any float).

    >>> fmt_count(123_456), fmt_count(2 * 10**12 + 5), fmt_count(10**400)
    ('123,456', '~2.0e12', '~1.0e400')
    """
    return f"{k:,}" if k < 10**12 else scientific(k)


def _fmt_bytes(n_bytes: int) -> str:
    """Bytes in TB, GB or MB (three digits), or ~m.meX TB past 10¹⁵.

    >>> _fmt_bytes(16 * 10**12), _fmt_bytes(8 * 10**30)
    ('16 TB', '~8.0e18 TB')
    """
    for unit, size in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6)):
        if n_bytes >= size:
            return f"{n_bytes / size:.3g} {unit}" if n_bytes < 10**15 else f"{scientific(n_bytes // 10**12)} TB"
    return f"{n_bytes} bytes"


def check_allocation(n_entries: int, *, what: str, caller: str, remedy: str = "") -> int:
    """Refuse, before allocating, an array of more than :data:`MAX_ALLOCATION_ENTRIES` float64 entries.

    Call it with the exact number of entries an operation is about to allocate at its peak (its result
    plus any temporary of the same size). Raises ValueError stating that number and its size in bytes.
    """
    n_entries = int(n_entries)
    if n_entries > MAX_ALLOCATION_ENTRIES:
        raise ValueError(
            f"{caller}: {what} would need {fmt_count(n_entries)} float64 entries ({_fmt_bytes(8 * n_entries)}), "
            f"more than the limit of {fmt_count(MAX_ALLOCATION_ENTRIES)} "
            f"({_fmt_bytes(8 * MAX_ALLOCATION_ENTRIES)}; mmopt._base.validation.MAX_ALLOCATION_ENTRIES).{remedy}"
        )
    return n_entries


def _real_array(M, *, name: str, caller: str, kind: str) -> np.ndarray:
    """``M`` as a float64 ndarray of any shape, refusing inputs that are not real numbers (see module doc)."""
    what = f"{_param(name, caller)} must be a {kind} of real numbers."
    if M is None or isinstance(M, str | bytes):
        raise TypeError(f"{what} Got {type(M).__name__}.")
    if sparse.issparse(M):
        rows, cols = M.shape
        check_allocation(rows * cols, what=f"a dense copy of the sparse '{name}' ({rows}×{cols})", caller=caller)
        M = M.toarray()
    try:
        arr = np.asarray(M)
    except ValueError as exc:  # ragged nested sequences
        raise ValueError(f"{what} Got nested sequences of unequal lengths ({exc}).") from None
    if arr.dtype.kind == "c":
        raise TypeError(f"{what} Got a complex array (dtype {arr.dtype}). mmopt works over the reals: pass "
                        f"np.real({name}) if its imaginary part is zero by construction.")
    if arr.dtype.kind == "O":
        bad = list(itertools.islice((e for e in arr.flat if not isinstance(e, numbers.Real | np.bool_)), 1))
        if bad:
            shown = repr(bad[0]) if len(repr(bad[0])) <= 40 else repr(bad[0])[:39] + "…"  # cut, and said to be
            raise TypeError(f"{what} Got an entry {shown} of type {type(bad[0]).__name__}.")
    elif arr.dtype.kind not in "biuf":
        raise TypeError(f"{what} Got an array of dtype {arr.dtype} ({type(M).__name__}).")
    try:
        with np.errstate(over="ignore", under="ignore"):
            out = arr.astype(np.float64, copy=False)
    except OverflowError:  # Python ints beyond float64
        raise ValueError(f"{_param(name, caller)} must be finite in float64. Got an integer entry beyond "
                         f"{np.finfo(float).max:.3g}.") from None
    if (arr.dtype.kind == "O" or arr.dtype.itemsize > 8) and np.any((out == 0) & (arr != 0)):
        # a Fraction(1, 10**400) or a longdouble 1e-4000 became 0.0: a cell dropped out without a word
        raise ValueError(f"{_param(name, caller)} must be representable in float64. Got a non-zero entry below "
                         f"the smallest float64 ({np.finfo(float).smallest_subnormal:.3g}), which would be read as 0; "
                         "rescale the entries.")
    return out


def _check_finite(M: np.ndarray, *, name: str, caller: str) -> None:
    # max and min propagate NaN, so two reductions without a temporary prove every entry finite
    if M.size and not (np.isfinite(M.max()) and np.isfinite(M.min())):
        bad = int(M.size - np.count_nonzero(np.isfinite(M)))
        raise ValueError(f"{_param(name, caller)} must be finite. Got {bad} NaN or infinite entries "
                         "(after conversion to float64).")


def check_matrix(M, *, name: str, caller: str, square: bool = False) -> np.ndarray:
    """Return ``M`` as a finite, non-empty 2-D float64 array, or raise a ValueError/TypeError naming it.

    Accepts what the module docstring lists (lists, int/float/bool arrays, real object arrays,
    scipy.sparse); refuses complex, string, object and None inputs with a TypeError.
    """
    M = _real_array(M, name=name, caller=caller, kind="2-D array")
    if M.ndim != 2:
        raise ValueError(f"{_param(name, caller)} must be a 2-D array. Got an array of shape {M.shape} instead.")
    if M.size == 0:
        raise ValueError(f"{_param(name, caller)} must be non-empty. Got shape {M.shape} instead.")
    if square and M.shape[0] != M.shape[1]:
        raise ValueError(f"{_param(name, caller)} must be a square matrix. Got shape {M.shape} instead.")
    _check_finite(M, name=name, caller=caller)
    return M


def check_vector(v, *, name: str, caller: str, length: int | None = None,
                 meaning: str = "the domain size n", bools: bool = True) -> np.ndarray:
    """Return ``v`` as a finite 1-D float64 array of the given length, which is ``meaning`` (same accepted types as
    check_matrix). ``bools`` False refuses booleans (weights: [True, True] was read as 1, 1), in a bool array or
    among other numbers."""
    check_positional(v, name=name, caller=caller)  # a Series read by position must not disagree with its labels
    if sparse.issparse(v):
        raise TypeError(f"{_param(name, caller)} must be a dense 1-D array. Got a scipy.sparse matrix of shape "
                        f"{v.shape}. Pass {name}.toarray().ravel().")
    if not bools and (np.asarray(v).dtype == bool or any(isinstance(e, bool | np.bool_)
                                                         for e in np.asarray(v, dtype=object).flat)):
        raise TypeError(f"{_param(name, caller)} must hold real numbers, not booleans. Got "
                        f"{np.asarray(v, dtype=object).tolist()!r:.60} instead.")
    v = _real_array(v, name=name, caller=caller, kind="1-D array")
    if v.ndim != 1:
        raise ValueError(f"{_param(name, caller)} must be a 1-D array. Got an array of shape {v.shape} instead.")
    if length is not None and v.shape[0] != length:
        raise ValueError(
            f"{_param(name, caller)} must have length {length} ({meaning}). Got length {v.shape[0]}."
        )
    _check_finite(v, name=name, caller=caller)
    return v


GRAM_MAGNITUDE = (1e-100, 1e100)


def check_gram_magnitude(G: np.ndarray, *, name: str = "gram", caller: str) -> None:
    """Refuse a Gram whose largest |entry| lies outside :data:`GRAM_MAGNITUDE`, naming the remedy.

    The direct solvers eigendecompose G and form products such as X G X, which square its scale: at 1e±200
    LAPACK stopped with "did not converge" and at 1e150 one returned a strategy 33 % off the optimum. Their
    strategies do not depend on G's scale, so dividing G by its mean diagonal loses nothing; mmopt.optimize
    does that itself.
    """
    top = float(np.max(np.abs(G))) if G.size else 0.0
    low, high = GRAM_MAGNITUDE
    if top > 0 and not low <= top <= high:
        raise ValueError(f"{_param(name, caller)} must have its largest entry between {low:g} and {high:g}. Got "
                         f"{top:.3g} instead. The optimal strategy does not depend on the Gram's scale: pass "
                         f"G / np.mean(np.diag(G)), or call mmopt.optimize, which rescales for you.")


def check_symmetric(G, *, name: str = "gram", caller: str, tol: float = 1e-9, remedy: str = "") -> np.ndarray:
    """``G`` square, finite and symmetric to ``tol`` of its largest entry, exactly symmetrised (G + (Gᵀ − G)/2,
    which cannot overflow), in O(n²): :func:`check_gram` without its eigendecomposition, for solvers that meet
    n = 4,096 (W passed for WᵀW, lower-triangular, was solved as another problem: a helper's probe)."""
    G = check_matrix(G, name=name, caller=caller, square=True)
    scale = float(max(G.max(), -G.min()))
    with np.errstate(over="ignore"):  # an overflowing difference is an infinite asymmetry: refused below
        asym = float(np.max(np.abs(G - G.T)))
    if asym > tol * max(scale, 1e-300) * 10:
        raise ValueError(
            f"{_param(name, caller)} must be symmetric; max |G - G.T| is {asym:.3g} "
            f"({asym / max(scale, 1e-300):.2g} of max |G|).{remedy}"
        )
    return G + (G.T - G) * 0.5


def check_gram(G, *, name: str = "gram", caller: str, tol: float = 1e-9, remedy: str = "",
               queries: int | None = None) -> np.ndarray:
    """Return ``G`` as a symmetric PSD float64 matrix (exactly symmetrised), or raise ValueError.

    The PSD test allows eigenvalues down to ``-tol * n * max|eig|`` (round-off of ``W.T @ W``).
    Symmetrisation is G + (Gᵀ − G)/2, which cannot overflow for entries near the float64 limit.
    With ``queries`` = m, G = WᵀW of m queries has rank ≤ m: more eigenvalues above the same round-off
    threshold contradict m (its per-query figures, total/m, would be wrong), and G is refused.
    """
    G = check_symmetric(G, name=name, caller=caller, tol=tol, remedy=remedy)
    if not G.any():
        return G
    eig = np.linalg.eigvalsh(G)
    if eig[0] < -tol * G.shape[0] * max(eig[-1], 0.0) - 1e-300:
        raise ValueError(
            f"{_param(name, caller)} must be positive semidefinite; its smallest eigenvalue is "
            f"{eig[0]:.3g} ({100 * eig[0] / max(abs(eig[-1]), 1e-300):.3g} % of the largest).{remedy}"
        )
    rank = int(np.count_nonzero(eig > tol * G.shape[0] * eig[-1]))
    if queries is not None and rank > queries:
        raise ValueError(f"{_param(name, caller)} has rank {rank} (eigenvalues above {tol * G.shape[0]:.2g} of the "
                         f"largest), more than n_queries = {queries}: a Gram WᵀW of m queries has rank ≤ m, and its "
                         "per-query errors (total/m) would be wrong. Pass the number of rows of W as n_queries.")
    return G


def check_int(x, *, name: str, caller: str, low: int = 1, high: int | None = None) -> int:
    """Return ``x`` as a Python int in [low, high], rejecting bools and floats."""
    if isinstance(x, bool | np.bool_) or not isinstance(x, numbers.Integral):
        raise TypeError(f"{_param(name, caller)} must be an integer. Got {x!r:.60} ({type(x).__name__}) instead.")
    x = int(x)
    if x < low or (high is not None and x > high):
        rng = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{_param(name, caller)} must be an integer {rng}. Got {x} instead.")
    return x


def check_real(
    x, *, name: str, caller: str, low: float | None = None, high: float | None = None,
    low_open: bool = False, high_open: bool = False,
) -> float:
    """Return ``x`` as a finite float in the given interval (open or closed ends)."""
    if isinstance(x, bool | np.bool_) or not isinstance(x, numbers.Real):
        raise TypeError(f"{_param(name, caller)} must be a real number. Got {x!r:.60} ({type(x).__name__}) instead.")
    try:
        x = float(x)
    except OverflowError:  # a Python int or Fraction beyond float64
        x = math.inf
    lo_ok = low is None or (x > low if low_open else x >= low)
    hi_ok = high is None or (x < high if high_open else x <= high)
    if not np.isfinite(x) or not lo_ok or not hi_ok:
        lo = "(" if low_open or low is None else "["
        hi = ")" if high_open or high is None else "]"
        interval = f"{lo}{'-inf' if low is None else f'{low:g}'}, {'inf' if high is None else f'{high:g}'}{hi}"
        raise ValueError(f"{_param(name, caller)} must be a float in the range {interval}. Got {x!r} instead.")
    return x


def check_str(value, *, name: str, caller: str) -> str:
    """Return ``value`` if it is a str (labels, names)."""
    if not isinstance(value, str):
        raise TypeError(f"{_param(name, caller)} must be a str. Got {type(value).__name__}.")
    return value


def check_bool(value, *, name: str, caller: str) -> bool:
    """``value`` as a bool if it is one (numpy's ``np.True_`` too: its type is also called 'bool', and a message
    refusing it as "Got bool" read as a contradiction); a string such as 'no' is truthy, never a choice."""
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{_param(name, caller)} must be True or False. Got {value!r:.60} ({type(value).__name__}) "
                        "instead.")
    return bool(value)


def check_choice(value, *, name: str, caller: str, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices``; otherwise list them."""
    choices = tuple(choices)
    try:
        ok = value in choices
    except TypeError:  # unhashable or incomparable values are simply not a choice
        ok = False
    if not ok or not isinstance(value, str):
        listed = ", ".join(repr(c) for c in choices)
        hint = did_you_mean(value, choices) if isinstance(value, str) else ""  # 'hierarchial' among twenty-odd
        raise ValueError(f"{_param(name, caller)} must be one of {listed}. Got {value!r:.60} instead.{hint}")
    return value


def check_rng(rng, *, name: str, caller: str) -> np.random.Generator:
    """A numpy Generator from ``rng``: None (fresh entropy), an int seed >= 0, a SeedSequence or a Generator."""
    if rng is None or isinstance(rng, np.random.Generator | np.random.SeedSequence):
        return np.random.default_rng(rng)
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool | np.bool_):
        return np.random.default_rng(check_int(rng, name=name, caller=caller, low=0))
    raise TypeError(f"{_param(name, caller)} must be a numpy.random.Generator, a SeedSequence, an int seed >= 0 "
                    f"or None. Got {rng!r:.60} ({type(rng).__name__}).")


def check_same_domain(n_workload: int, n_strategy: int, *, caller: str, what: tuple[str, str] | None = None) -> None:
    """The workload and strategy (or the two parts of a ``stack``, ``what`` naming them) act on the same cells."""
    if n_workload != n_strategy:
        first, second = what or ("the workload", "the strategy")
        raise ValueError(
            f"{caller}: {first} has domain size n={n_workload} but {second} has "
            f"n={n_strategy} columns. Build both over the same domain."
        )


def check_shape(shape, *, caller: str, name: str = "shape") -> tuple[int, ...]:
    """A domain shape: a non-empty sequence of integers >= 1."""
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    try:
        items = list(shape)
    except TypeError:
        raise TypeError(f"The '{name}' parameter of {caller} must be a sequence of attribute sizes. "
                        f"Got {type(shape).__name__}.") from None
    if not items:
        raise ValueError(f"The '{name}' parameter of {caller} must name at least one attribute. Got ().")
    return tuple(check_int(d, name=name, caller=caller) for d in items)
