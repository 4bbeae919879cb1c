"""Run-time controls of :func:`mmopt.optimize`: the number of BLAS threads, and verbose progress output.

Notation: see README. The heuristics (min_error, min_sensitivity) spend their time in many small dense
products and factorisations, thousands per second. On such matrices a multithreaded BLAS mostly
synchronises its threads, and on a shared machine it waits for busy cores. Measured on 2 cores
(``benchmarks/bench_threads.py``, OpenBLAS, fresh process with OPENBLAS_NUM_THREADS unset): min_error on
all ranges at n = 256 with 2 restarts took 25.3 s with BLAS's own 2 threads and 1.6 s with one (load
≈ 1.4); with other jobs running (load ≈ 6), 205 s against 2.8 s. So by default (``blas_threads="auto"``)
:func:`mmopt.optimize` runs those methods with one BLAS thread, through threadpoolctl. The L2 solver's
n×n eigendecompositions are large enough to gain from threads on an idle machine (n = 2048: 6.4 s
with two, 9.2 s with one), so "auto" leaves BLAS as configured for l2_approx and the closed forms.
Nothing changes outside the call.
"""

from __future__ import annotations

import contextlib
import logging
import numbers
import sys
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


def check_blas_threads(value, *, caller: str, auto: int | None) -> int | None:
    """The thread cap to apply: ``auto`` for "auto", else ``value`` if it is None or a positive int."""
    if value is None or value == "auto":
        return auto if value == "auto" else None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"The 'blas_threads' parameter of {caller} must be 'auto', a positive integer or None. "
                        f"Got {value!r} ({type(value).__name__}) instead.")
    if value < 1:
        raise ValueError(f"The 'blas_threads' parameter of {caller} must be 'auto', a positive integer or None "
                         f"(leave BLAS as configured). Got {value} instead.")
    return int(value)


@contextlib.contextmanager
def blas_threads(limit: int | None) -> Iterator[None]:
    """Cap the BLAS thread pools (OpenBLAS, MKL, BLIS) at ``limit`` inside the block; None: leave them."""
    if limit is None:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=limit, user_api="blas"):
        yield


@contextlib.contextmanager
def progress(verbose: bool) -> Iterator[None]:
    """Make the "mmopt" logger's INFO progress lines visible on stderr while the block runs.

    If logging is already configured so that INFO records of "mmopt" reach a handler, nothing changes:
    the user's configuration wins. Otherwise a stderr handler is attached for the duration, the logger
    is set to INFO and does not propagate (so a WARNING-level root handler does not print the lines a
    second time); everything is restored afterwards.
    """
    if not verbose or (LOGGER.isEnabledFor(logging.INFO) and LOGGER.hasHandlers()):
        yield
        return
    handler = logging.StreamHandler(sys.stderr)  # looked up now: pytest and notebooks swap sys.stderr
    handler.setFormatter(_Elapsed())
    level, propagate = LOGGER.level, LOGGER.propagate
    LOGGER.addHandler(handler)
    LOGGER.setLevel(logging.INFO)
    LOGGER.propagate = False
    try:
        yield
    finally:
        LOGGER.removeHandler(handler)
        LOGGER.setLevel(level)
        LOGGER.propagate = propagate
