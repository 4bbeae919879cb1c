"""Guards between a computation and a user: no wrong number gets out, no request runs until it is killed.

Notation: see README. Three kinds of guard live here.

* **Error figures.** An error figure is c·u with c = Privacy.variance_factor and u the unit-privacy value
  Δ²·tr(G M); c alone overflows at ε = 1e-300 and underflows at ε = 1e300, so figures are formed in log
  space where needed, and ``log10_total`` stays finite whenever the error is defined. A figure beyond
  float64 is returned as inf, and one below its normal range as 0.0 or a subnormal, each with a
  RuntimeWarning naming the true order of magnitude (never silently); a computed error that is negative,
  non-finite or below the proven lower bound raises :class:`NumericalError`.
* **Loop counts** (:func:`check_work`). Parameters such as ``runs`` (:func:`mmopt.monte_carlo`),
  ``rounds`` (:func:`mmopt.adaptive.mwem`) and ``restarts`` (the multi-dimensional searches) are refused
  up front when the work they ask for exceeds :data:`MAX_WORK` operations, stating the work and the time
  it would take and what to do instead.
* **Working sets** (:func:`check_working_set`). :func:`mmopt._base.validation.check_allocation` refuses one
  array past its limit; a computation that holds several large arrays at once (evaluate's profile, its
  factorisation and the per-query temporaries; the structured path's per-factor tables) is refused when
  their *sum* exceeds :func:`working_set_limit`, a share of the memory available when the call is made.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping

import numpy as np

from mmopt._base import validation as v

# A computed error may fall below the SVD bound by round-off only: beyond this relative slack it is a bug.
BOUND_SLACK = 1e-8
_LN10 = math.log(10.0)
_TINY = np.finfo(float).tiny

# -- loop counts ----------------------------------------------------------------------------------------
# The most work one call may be asked for, in floating-point operations. The loops guarded here (Monte-Carlo
# runs, MWEM rounds, search restarts) work on small arrays, where one core of numpy sustains about 10⁹
# operations per second (OPS_PER_SECOND; measured: a prefix(8) Monte-Carlo run takes ~0.1–0.2 ms, an MWEM
# round ~0.05–0.08 ms, i.e. 10⁵ operations of Python overhead each). 3·10¹¹ is thus about five minutes:
# long studies stay possible, a typo (runs=10**12, rounds=10**9) is refused at once. Raise it
# (mmopt._base.guards.MAX_WORK = ...) for a deliberate long run.
MAX_WORK = 3 * 10**11
OPS_PER_SECOND = 10**9
# The fixed cost of one Python-level iteration (a Monte-Carlo run, an MWEM round, a restart), in operations.
ITERATION_OPS = 10**5

# -- working sets ---------------------------------------------------------------------------------------
# A computation may hold at most this share of the memory available when it starts (MemAvailable on
# Linux: free memory plus what the kernel can reclaim). Half leaves room for the estimate's slack (it
# counts the large arrays, not every small one) and for the rest of the process.
WORKING_SET_FRACTION = 0.5
# A fixed limit in bytes instead (None: WORKING_SET_FRACTION of the available memory, read at each check).
MAX_WORKING_SET_BYTES: int | None = None
# Working sets up to this many bytes are never refused, and the available memory is not even read.
SMALL_WORKING_SET_BYTES = 2**28


class NumericalError(ValueError):
    """A computed error that cannot be right (negative, non-finite, below the lower bound): never returned."""


class DataWarning(UserWarning):
    """A diagnostic about the records themselves (a column's values that the domain drops), for the data holder who
    runs a release. Whether it is raised depends on the records — one added record can raise it — so it is outside
    the privacy guarantee: read it, never publish it beside the release (the command line marks it so). Filter it
    with ``warnings.filterwarnings("ignore", category=mmopt.DataWarning)``."""


class Unsupported(ValueError):
    """The strategy does not support the workload: some query lies (numerically) outside A's row space, so its
    least-squares answer is biased and its error unbounded (Def. 3.1). A ValueError, so ``except ValueError`` still
    catches it; :func:`mmopt.supports` answers False exactly where an evaluation would raise this."""


def check_value(value: float, bound: float | None, name: str, what: str, caller: str) -> None:
    if value == math.inf and bound is not None and bound == math.inf:
        raise NumericalError(
            f"{caller}: the error of strategy '{name}' on {what} exceeds float64 (so does its SVD lower bound): "
            "the workload's entries are too large. Rescale the queries: every error figure scales with the "
            "square of W's entries.")
    if not math.isfinite(value) or value <= 0.0:
        raise NumericalError(
            f"{caller}: the computed error of strategy '{name}' on {what} is {value!r}, which cannot be right "
            "(an error is finite and positive). The strategy is too ill-conditioned for float64, or the workload's "
            "entries too large: drop the strategy's near-zero directions (e.g. Strategy.from_gram of its Gram), "
            "or rescale the queries, and evaluate again.")
    if bound is not None and math.isfinite(bound) and value < bound * (1.0 - BOUND_SLACK):
        raise NumericalError(
            f"{caller}: the computed error of strategy '{name}' on {what} ({value:.6g} per query at unit "
            f"privacy) is below the proven SVD lower bound ({bound:.6g}), so it is wrong: float64 cannot "
            "resolve this strategy. Drop its near-zero directions (e.g. Strategy.from_gram of its Gram).")


def nonnegative(terms: np.ndarray, name: str) -> np.ndarray:
    """Per-query terms w M wᵀ ≥ 0: round-off below zero becomes 0; anything more is a NumericalError."""
    top = float(np.max(np.abs(terms))) if terms.size else 0.0
    if terms.size and float(np.min(terms)) < -1e-9 * top:
        raise NumericalError(f"evaluate: strategy '{name}' gives a negative per-query variance "
                             f"({float(np.min(terms)):.3g}); float64 cannot resolve this strategy.")
    return np.clip(terms, 0.0, None)


def log10_variance_factor(privacy) -> float:
    """log₁₀ of Privacy.variance_factor (0 for unit privacy), finite for every valid Privacy.

    Taken from :attr:`Privacy.log_variance_factor`, the one place c = 2/ε² or σ² is defined; c itself
    overflows at ε = 1e-300 and underflows at ε = 1e300.
    """
    return 0.0 if privacy is None else privacy.log_variance_factor / _LN10


def scaled(unit: float, privacy, name: str) -> float:
    """c·unit with c = privacy.variance_factor (1 for None), without spurious overflow or underflow of c.

    The plain product is used whenever c is a normal float and so is the product (so figures such as 40.0
    stay exact); otherwise it is formed from logarithms. A result beyond float64 is inf and one below its
    normal range 0.0 or a subnormal, each with a RuntimeWarning (:func:`underflow_warning`).
    """
    if privacy is None:
        return unit
    c = privacy.variance_factor
    if _TINY <= c < math.inf:  # a subnormal c has lost digits itself: the logarithms are exact
        with np.errstate(over="ignore", under="ignore"):
            out = unit * c
        if math.isfinite(out) and (out >= _TINY or unit == 0.0):
            return out
    log10_out = math.log10(unit) + log10_variance_factor(privacy) if unit > 0 else -math.inf
    if log10_out > 308.0:
        warnings.warn(f"An error figure of '{name}' exceeds float64 (≈1e{log10_out:.1f}); returning inf. "
                      "Use log10_total.", RuntimeWarning, stacklevel=3)
        return math.inf
    out = 10.0**log10_out if unit > 0 else 0.0
    if unit > 0 and out < _TINY:
        underflow_warning(log10_out, out, name, stacklevel=4)
    return out


def underflow_warning(log10_value: float, returned: float, name: str, *, stacklevel: int = 3) -> None:
    """Warn that a positive error figure fell below float64's normal range (≈1e{log10_value}).

    The counterpart of the overflow warning: an error of 0.0 for a workload that has queries is not the
    error, only float64's rounding of it, so it is never returned silently.
    """
    what = "0.0" if returned == 0.0 else f"the subnormal {returned!r}, with lost digits"
    warnings.warn(f"An error figure of '{name}' is below float64's smallest normal number (≈1e{log10_value:.1f}); "
                  f"returning {what}, which is not the true value. "
                  "Use log10_total, or evaluate at privacy=None and add Privacy.log_variance_factor / ln 10.",
                  RuntimeWarning, stacklevel=stacklevel)


def times_int(x: float, m: int, name: str) -> float:
    try:
        out = x * float(m)
    except OverflowError:
        out = math.inf
    if math.isinf(out) and math.isfinite(x):
        warnings.warn(f"The total error of workload '{name}' exceeds float64 (m = 2^{m.bit_length() - 1}…); "
                      "returning inf. Use the per-query figures or log10_total.", RuntimeWarning, stacklevel=3)
    return out


def log10_int(m: int) -> float:
    try:
        return math.log10(m)
    except OverflowError:  # pragma: no cover - math.log10 takes big ints, kept for safety
        return m.bit_length() * math.log10(2.0)


# -- loop counts ----------------------------------------------------------------------------------------
def _fmt_ops(x: float) -> str:
    return f"{x:.2g}".replace("e+", "e")


def fmt_seconds(seconds: float) -> str:
    """A duration in the largest sensible unit ("5 minutes", "3.2 days", "~1e9 years")."""
    for unit, size in (("years", 365.25 * 86400), ("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= size:
            k = seconds / size
            if k >= 1e6:
                return f"~1e{math.log10(k):.0f} {unit}"
            return f"{k:.2g} {unit}" if k < 100 else f"{k:,.0f} {unit}"
    return f"{seconds:.2g} seconds"


def check_work(count, *, name: str, caller: str, per_item: float | None = None, item: str, remedy: str,
               low: int = 1, high: int | None = None, work_of=None) -> int:
    """``count`` as an int in [low, limit], refused before any work when it asks for more than :data:`MAX_WORK`.

    The work of ``count`` iterations is ``count·per_item`` (``per_item`` at least :data:`ITERATION_OPS`, an
    iteration's Python overhead), or ``work_of(count)`` for a cost that is not linear (non-decreasing in
    count). limit = min(``high``, the largest count whose work fits MAX_WORK). The message states the
    limit, the work and time ``count`` would take, and ``remedy``. Type and lower-bound checks are
    :func:`mmopt._base.validation.check_int`'s.
    """
    count = v.check_int(count, name=name, caller=caller, low=low)
    if work_of is None:
        per = max(float(per_item), float(ITERATION_OPS))

        def work_of(k: int) -> float:
            return k * per
    if work_of(count) <= MAX_WORK and (high is None or count <= high):
        return count
    lo, hi = low - 1, count  # the limit: the largest k in [low, count) with work_of(k) ≤ MAX_WORK
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if work_of(mid) <= MAX_WORK else (lo, mid)
    limit = max(lo, low) if high is None else min(max(lo, low), high)
    work = float(work_of(count))
    each = f" of about {_fmt_ops(work / count)} operations each" if count else ""
    capped = high is not None and limit == high and work <= MAX_WORK
    why = (f"more than the cap of {high:,} {item}" if capped else
           f"more than the limit of {_fmt_ops(MAX_WORK)} (~{fmt_seconds(MAX_WORK / OPS_PER_SECOND)}; "
           "mmopt._base.guards.MAX_WORK)")
    raise ValueError(
        f"The '{name}' parameter of {caller} must be <= {limit:,} here. Got {count:,} instead: {count:,} {item}"
        f"{each} would need about {_fmt_ops(work)} operations (~{fmt_seconds(work / OPS_PER_SECOND)} at 10^9 per "
        f"second), {why}. {remedy}")


# -- working sets ---------------------------------------------------------------------------------------
def available_memory() -> int | None:
    """Bytes of memory available to a new allocation: MemAvailable (Linux), else free physical pages, capped by
    the process's own limits — the room left under RLIMIT_AS and under its cgroup's memory.max (a 3 GiB cap on a
    22 GB machine raised MemoryError where a ValueError was due; a helper's probe); None when nothing can be read."""
    found = [x for x in (_machine_memory(), _rlimit_room(), _cgroup_room()) if x is not None]
    return min(found) if found else None


def _machine_memory() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):
        return None


def _status_bytes(key: str) -> int | None:
    """A "kB" field of /proc/self/status (VmSize: the address space in use), in bytes."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _rlimit_room() -> int | None:
    try:
        import resource
        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, OSError, ValueError, AttributeError):  # Windows: no resource module
        return None
    if soft == resource.RLIM_INFINITY or soft < 0:
        return None
    used = _status_bytes("VmSize")
    return max(int(soft) - (used or 0), 0)


def _cgroup_room() -> int | None:
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as fh:
            top = fh.read().strip()
        if top == "max":
            return None
        with open("/sys/fs/cgroup/memory.current", encoding="ascii") as fh:
            used = int(fh.read().strip())
        return max(int(top) - used, 0)
    except (OSError, ValueError):
        return None


def working_set_limit() -> tuple[int, str]:
    """(bytes, how the limit was chosen) for :func:`check_working_set`."""
    if MAX_WORKING_SET_BYTES is not None:
        return int(MAX_WORKING_SET_BYTES), "mmopt._base.guards.MAX_WORKING_SET_BYTES"
    avail = available_memory()
    if avail is None:  # unknown: four times the per-array limit of mmopt._base.validation
        limit = 4 * 8 * v.MAX_ALLOCATION_ENTRIES
        return limit, f"{v._fmt_bytes(limit)}, four times mmopt._base.validation.MAX_ALLOCATION_ENTRIES (available " \
                      "memory unknown)"
    limit = max(int(WORKING_SET_FRACTION * avail), SMALL_WORKING_SET_BYTES)
    return limit, (f"{v._fmt_bytes(limit)}, {WORKING_SET_FRACTION:g} of the {v._fmt_bytes(avail)} of memory "
                   "available now (mmopt._base.guards.WORKING_SET_FRACTION, or set MAX_WORKING_SET_BYTES)")


def check_working_set(parts: Mapping[str, int], *, what: str, caller: str, remedy: str = "") -> int:
    """Refuse, before allocating, a computation whose arrays held *at once* exceed :func:`working_set_limit`.

    ``parts`` maps a description to its number of float64 entries; their sum is the working set (each part
    may be under mmopt._base.validation's per-array limit and the sum still exhaust memory). Returns the total.
    """
    total = int(sum(int(x) for x in parts.values()))
    if 8 * total <= SMALL_WORKING_SET_BYTES:
        return total
    limit, how = working_set_limit()
    if 8 * total > limit:
        top = sorted(parts.items(), key=lambda kv: -int(kv[1]))[:4]
        listed = "; ".join(f"{k}: {v._fmt_bytes(8 * int(x))}" for k, x in top if int(x) > 0)
        raise ValueError(
            f"{caller}: {what} would hold about {v.fmt_count(total)} float64 entries ({v._fmt_bytes(8 * total)}) "
            f"in memory at once ({listed}), more than the limit of {how}.{remedy}")
    return total
