"""Run-time controls of the long-running entry points: the number of BLAS threads, and progress output.

Notation: see README. **One BLAS-thread policy** for every heavy path (``optimize``, ``evaluate``,
``matrix_mechanism``, ``release`` and what they call): one BLAS thread, through threadpoolctl, for the
duration of the call; ``MMOPT_BLAS_THREADS=k`` (or ``none``: leave BLAS as configured) changes it, and
``optimize(..., blas_threads=...)`` overrides it for one call. Nothing changes outside the call.

Why one thread: on a 2-core machine a second BLAS thread gains little when the machine is idle and costs a
great deal as soon as anything else runs (``benchmarks/bench_threads.py``, OpenBLAS, results in
``benchmarks/results/bench_threads.txt``):

* min_error, all ranges, n = 256, 2 restarts: 1.6 s with one thread, 25 s with two on an idle machine,
  2.8 s against 205 s at load ≈ 6 (many small products: threads only wait for each other);
* l2_approx, all ranges, n = 2048: 9.2 s with one, 6.1 s with two when idle; 33 s against 130 s with one
  busy process beside it;
* evaluate, H₂ on all ranges, n = 2048: 3.3 s against 6.7–10.8 s with one busy process beside it.

So the best case for two threads is 1.5× faster, the common case (a laptop running other things, CI, a
parallel test run) 2–100× slower; a user with a dedicated many-core machine sets ``MMOPT_BLAS_THREADS``.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import numbers
import os
import sys
import threading
import time
from collections.abc import Iterator

LOGGER = logging.getLogger("mmopt")


class _Elapsed(logging.Formatter):
    """Prefix each line with the seconds since the verbose call began."""

    def __init__(self) -> None:
        super().__init__("mmopt %(elapsed)7.1f s  %(message)s")
        self.began = time.time()

    def format(self, record: logging.LogRecord) -> str:
        record.elapsed = record.created - self.began
        return super().format(record)


def default_blas_threads() -> int | None:
    """The BLAS thread cap of ``blas_threads="auto"``: 1, or ``MMOPT_BLAS_THREADS`` (an int, or "none" to leave
    BLAS as configured), read at each call so a notebook can change it."""
    raw = os.environ.get("MMOPT_BLAS_THREADS", "").strip().lower()
    if not raw:
        return 1
    if raw == "none":
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"The MMOPT_BLAS_THREADS environment variable must be a positive integer or 'none'. "
                         f"Got {raw!r} instead.")
    return int(raw)


def check_blas_threads(value, *, caller: str, auto: int | None = None) -> int | None:
    """The thread cap to apply: :func:`default_blas_threads` for "auto", else ``value`` if None or a positive int.

    ``auto`` is accepted for compatibility and ignored: one policy serves every path (module docstring).
    """
    if value is None or value == "auto":
        return default_blas_threads() if value == "auto" else None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"The 'blas_threads' parameter of {caller} must be 'auto', a positive integer or None. "
                        f"Got {value!r} ({type(value).__name__}) instead.")
    if value < 1:
        raise ValueError(f"The 'blas_threads' parameter of {caller} must be 'auto', a positive integer or None "
                         f"(leave BLAS as configured). Got {value} instead.")
    return int(value)


# the cap an enclosing blas_threads block set: a nested block with the same cap has nothing to do
_ACTIVE_CAP = contextvars.ContextVar("mmopt_blas_cap", default=None)


@contextlib.contextmanager
def blas_threads(limit: int | None) -> Iterator[None]:
    """Cap the BLAS thread pools (OpenBLAS, MKL, BLIS) at ``limit`` inside the block; None: leave them.

    threadpoolctl inspects the loaded libraries on each entry (~0.2 ms), so that a BLAS loaded late (scipy ships
    its own OpenBLAS) is capped too; a block nested in one with the same cap skips that.
    """
    if limit is None or _ACTIVE_CAP.get() == limit:
        yield
        return
    from threadpoolctl import threadpool_limits

    token = _ACTIVE_CAP.set(limit)
    try:
        with threadpool_limits(limits=limit, user_api="blas"):
            yield
    finally:
        _ACTIVE_CAP.reset(token)


#: "auto" progress stays silent for this many seconds: a call that ends sooner prints nothing.
AUTO_DELAY = 10.0
# how long a tqdm bar inside the current progress block waits before it is drawn (tqdm's ``delay``)
_BAR_DELAY = contextvars.ContextVar("mmopt_bar_delay", default=0.0)


def bar_delay() -> float:
    """Seconds a progress bar waits before it appears: :data:`AUTO_DELAY` under "auto" progress, else 0."""
    return _BAR_DELAY.get()


class _Gate(logging.Filter):
    """Hold records back until the gate opens (after :data:`AUTO_DELAY` s), remembering the latest one."""

    def __init__(self, is_open: bool) -> None:
        super().__init__()
        self.is_open, self.latest = is_open, None
        self.lock = threading.Lock()  # opening (and its "still running" line) is atomic against records

    def filter(self, record: logging.LogRecord) -> bool:
        with self.lock:
            if not self.is_open:
                self.latest = record
            return self.is_open


class Heartbeat:
    """Log a progress line on the "mmopt" logger at most every ``every`` seconds (for long inner loops).

    The loops call it every iteration; it costs a clock read. Nothing shows unless a :func:`progress` block (or
    the user's logging) makes the "mmopt" INFO records visible.
    """

    def __init__(self, every: float = 5.0) -> None:
        self.every, self.last = every, time.monotonic()

    def __call__(self, message: str, *args) -> None:
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            LOGGER.info(message, *args)


def check_verbose(verbose, caller: str):
    """``verbose`` as True (progress now), False (none) or None ("auto": progress once a call passes 10 s)."""
    if verbose is None or isinstance(verbose, bool):
        return verbose
    if type(verbose).__name__ == "bool_":  # numpy.bool_, without importing numpy here
        return bool(verbose)
    raise TypeError(f"The 'verbose' parameter of {caller} must be True, False or None (progress once the call "
                    f"has run {AUTO_DELAY:g} s). Got {type(verbose).__name__}.")


@contextlib.contextmanager
def progress(verbose: bool | None) -> Iterator[None]:
    """Make the "mmopt" logger's INFO progress lines visible on stderr while the block runs.

    ``verbose=True``: from the start. ``None`` ("auto", the default of the long-running entry points): nothing
    for the first :data:`AUTO_DELAY` seconds, so quick calls stay quiet; if the block is still running then, one
    line says so (with the stage it is in) and the progress lines follow from there. ``False``: nothing; nor
    under "auto" when the user has set the "mmopt" logger's level above INFO
    (``logging.getLogger("mmopt").setLevel(logging.WARNING)`` silences every call).

    If logging is already configured so that INFO records of "mmopt" reach a handler, nothing changes:
    the user's configuration wins. Otherwise a stderr handler is attached for the duration, the logger
    is set to INFO and does not propagate (so a WARNING-level root handler does not print the lines a
    second time); everything is restored afterwards.
    """
    silenced = verbose is None and LOGGER.level > logging.INFO  # the user set the logger above INFO: respected
    if verbose is False or silenced or (LOGGER.isEnabledFor(logging.INFO) and LOGGER.hasHandlers()):
        yield
        return
    handler = logging.StreamHandler(sys.stderr)  # looked up now: pytest and notebooks swap sys.stderr
    handler.setFormatter(_Elapsed())
    gate = _Gate(is_open=verbose is True)
    handler.addFilter(gate)
    level, propagate = LOGGER.level, LOGGER.propagate
    LOGGER.addHandler(handler)
    LOGGER.setLevel(logging.INFO)
    LOGGER.propagate = False
    timer, token = None, _BAR_DELAY.set(AUTO_DELAY if verbose is None else 0.0)
    if verbose is None:
        def open_gate() -> None:
            # under the gate's lock, so that no progress record can pass the filter (open) and print before
            # the "still running" line that announces it
            with gate.lock:
                stage = f" ({gate.latest.getMessage()})" if gate.latest is not None else ""
                record = logging.LogRecord("mmopt", logging.INFO, __file__, 0,
                                           f"still running{stage}; pass verbose=False (--quiet) to silence this",
                                           None, None)
                handler.acquire()
                try:
                    handler.emit(record)
                finally:
                    handler.release()
                gate.is_open = True

        timer = threading.Timer(AUTO_DELAY, open_gate)
        timer.daemon = True
        timer.start()
    try:
        yield
    finally:
        if timer is not None:
            timer.cancel()
        _BAR_DELAY.reset(token)
        LOGGER.removeHandler(handler)
        LOGGER.setLevel(level)
        LOGGER.propagate = propagate


@contextlib.contextmanager
def heavy_call(verbose: bool | None = None) -> Iterator[None]:
    """The run-time policy of a library entry point that can take long: :func:`default_blas_threads` BLAS
    threads and :func:`progress` (``None``: "auto") for the duration of the call."""
    with progress(verbose), blas_threads(default_blas_threads()):
        yield
