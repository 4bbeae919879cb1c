"""Independent restarts (and experiment sweeps) in parallel with joblib, with results that do not depend on it.

Notation: see README. A search with K restarts runs K independent tasks; task k draws its randomness only
from ``numpy.random.SeedSequence(seed).spawn(K)[k]`` (:func:`seed_children`), the tasks come back in task
order (:func:`ordered_map`), and the caller keeps the best by iterating in that order and replacing the
incumbent only on a strict improvement, so ties go to the lowest index. The returned strategy is then the
same for a given seed whatever ``n_jobs`` and joblib backend run the tasks: sequential, processes
("loky"), threads ("threading"), or a Dask cluster through ``with joblib.parallel_config(backend="dask"):``
with a ``dask.distributed.Client`` open.

BLAS: each task in a worker *process* runs with one BLAS thread (threadpoolctl, restored after the task):
the restarts work on small matrices where BLAS threads only wait for each other (see :mod:`mmopt._base.runtime`),
and K workers with several threads each would oversubscribe the cores. Threads share the process's BLAS
pools, whose size is process-wide, so for thread workers (joblib's "threading", Dask with
``processes=False``) the cap is set once around the whole call instead. A sequential run keeps the caller's
setting (``optimize``'s ``blas_threads``, one thread by default for these methods), so results are
identical between n_jobs values when BLAS runs with one thread in both, the default.
"""

from __future__ import annotations

import contextlib
import numbers
import os
import socket
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from mmopt._base.runtime import bar_delay, blas_threads

__all__ = ["check_n_jobs", "ordered_map", "plan", "seed_children"]


def check_n_jobs(n_jobs, *, caller: str) -> int | None:
    """``n_jobs`` as joblib reads it: None, or an int other than 0 (-1: every core, -2: all but one, ...).

    Examples
    --------
    >>> check_n_jobs(-1, caller="optimize"), check_n_jobs(None, caller="optimize")
    (-1, None)
    >>> check_n_jobs(0, caller="optimize")
    Traceback (most recent call last):
    ...
    ValueError: The 'n_jobs' parameter of optimize must be None or a non-zero integer (1: sequential, 2: two \
workers, -1: every core, joblib's convention). Got 0 instead.
    """
    if n_jobs is None:
        return None
    what = (f"The 'n_jobs' parameter of {caller} must be None or a non-zero integer (1: sequential, 2: two workers, "
            "-1: every core, joblib's convention).")
    if isinstance(n_jobs, bool | np.bool_) or not isinstance(n_jobs, numbers.Integral):
        raise TypeError(f"{what} Got {n_jobs!r:.60} ({type(n_jobs).__name__}) instead.")
    if n_jobs == 0:
        raise ValueError(f"{what} Got 0 instead.")
    return int(n_jobs)


def seed_children(seed, k: int, *, caller: str) -> list[np.random.SeedSequence]:
    """The K per-task seeds ``numpy.random.SeedSequence(seed).spawn(K)``.

    ``seed`` may be None (fresh entropy), an int ≥ 0, a SeedSequence (copied first: ``spawn`` advances the
    original's counter, which would make a second call with it differ) or a numpy Generator, which is
    consumed: 128 bits drawn from it seed the root, so the same Generator state gives the same children
    and successive calls with one Generator differ.

    Examples
    --------
    >>> a, b = seed_children(7, 2, caller="f")
    >>> a.spawn_key, b.spawn_key, a.entropy == 7
    ((0,), (1,), True)
    """
    return seed_root(seed, caller=caller).spawn(k)


def seed_root(seed, *, caller: str) -> np.random.SeedSequence:
    """The root SeedSequence of :func:`seed_children` (its rules for each kind of ``seed``)."""
    if isinstance(seed, np.random.Generator):
        root = np.random.SeedSequence([int(x) for x in seed.integers(0, 2**32, size=4, dtype=np.uint64)])
    elif isinstance(seed, np.random.SeedSequence):
        root = np.random.SeedSequence(seed.entropy, spawn_key=seed.spawn_key, pool_size=seed.pool_size,
                                      n_children_spawned=seed.n_children_spawned)
    elif seed is None:
        root = np.random.SeedSequence()
    elif isinstance(seed, bool | np.bool_) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"The 'seed' parameter of {caller} must be None, an int >= 0, a numpy.random.SeedSequence "
                        f"or a numpy.random.Generator. Got {seed!r:.60} ({type(seed).__name__}) instead.")
    elif seed < 0:
        raise ValueError(f"The 'seed' parameter of {caller} must be an int >= 0. Got {seed} instead.")
    else:
        root = np.random.SeedSequence(int(seed))
    return root


def plan(n_jobs: int | None, n_tasks: int) -> tuple[int, str]:
    """(workers, backend) that :func:`ordered_map` will use: joblib's reading of ``n_jobs`` under the active
    ``joblib.parallel_config``, at most one worker per task; backend "sequential" for one worker."""
    import joblib

    workers = max(1, min(int(joblib.effective_n_jobs(n_jobs)), n_tasks))
    if workers == 1:
        return 1, "sequential"
    backend, _ = joblib.parallel.get_active_backend()
    name = type(backend).__name__.removesuffix("Backend").lower()
    return workers, {"daskdistributed": "dask"}.get(name, name)


def _where() -> tuple[str, int]:
    return socket.gethostname(), os.getpid()


def _task(fn: Callable, args: tuple, parent: tuple[str, int]) -> Any:
    """Run one task; in another process than the caller's, with one BLAS thread (module docstring)."""
    if _where() == parent:  # a thread of the caller's process: the cap was set around the whole call
        return fn(*args)
    with blas_threads(1):
        return fn(*args)


def _bar(total: int, desc: str, enabled: bool):
    """A tqdm bar on stderr, or None when not wanted or tqdm (an optional dependency) is not installed."""
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    # disable=None: off when stderr is not a terminal, as tqdm documents it; a bar piped to a log file wrote a
    # carriage-return redraw per update into it (the verbose run's logger lines say the same)
    return tqdm(total=total, desc=desc, unit="task", file=sys.stderr, leave=False, delay=bar_delay(), disable=None)


def ordered_map(fn: Callable, tasks: Iterable[tuple], *, n_jobs: int | None = None, desc: str = "",
                progress: bool = False) -> Iterator:
    """Yield ``fn(*args)`` for each ``args`` in ``tasks``, in task order, run by joblib with ``n_jobs``.

    ``fn`` and its arguments must pickle for process and Dask workers (a module-level function and arrays).
    One worker runs in this process with no joblib involved. ``progress`` shows a tqdm bar (if tqdm is
    installed) that advances as results arrive in order.

    Examples
    --------
    >>> list(ordered_map(pow, [(2, 3), (3, 2)], n_jobs=1))
    [8, 9]
    """
    tasks = list(tasks)
    workers, _ = plan(n_jobs, len(tasks))
    bar = _bar(len(tasks), desc, progress)
    with contextlib.ExitStack() as stack:
        if bar is not None:
            stack.callback(bar.close)
        if workers == 1:
            results = (fn(*args) for args in tasks)
        else:
            import joblib

            stack.enter_context(blas_threads(1))  # for thread workers; process workers set it per task
            parent = _where()
            results = joblib.Parallel(n_jobs=n_jobs, return_as="generator")(
                joblib.delayed(_task)(fn, args, parent) for args in tasks)
        for result in results:
            if bar is not None:
                bar.update()
            yield result
