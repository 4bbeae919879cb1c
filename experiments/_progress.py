"""What a long experiment says while it runs: a line per stage and per configuration on stderr, never silent.

Every experiment reports through one :class:`Progress`:

- ``stage(text, total=None)`` starts a stage (the §6 table, the theorem checks, one workload, …);
- ``step(text)`` starts the next of the stage's ``total`` configurations (a row, a workload, a (W, A) pair);
- ``note(text)`` (or the module-level :func:`note`, for code that has no handle on the reporter) says what
  the current configuration is doing now, e.g. "auto search" after "baselines".

On a terminal a stage with a total is a tqdm bar (when tqdm is installed; it stays on screen when done) and
the rest are lines written above it; otherwise (a log file, a pipe, CI) every call is one plain line,
``[multidim 0:42] workloads 3/8: sf1_plus``. A heartbeat thread repeats the current line with the time
spent on it whenever nothing was written for ``every`` seconds (10 by default), so a run never looks hung.
``enabled=False`` (the experiments' ``--quiet``) writes nothing, and raises the "mmopt" logger to WARNING
for the duration, which silences mmopt's own progress lines too.

Work done in joblib worker processes cannot reach the reporter; there :func:`note` is a no-op and the
parent's lines say which configuration it is waiting for.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Sequence

_CURRENT: Progress | None = None
_MMOPT = logging.getLogger("mmopt")  # where mmopt's long calls say they are still running
EVERY = 10.0  # seconds: the longest silence a run allows itself


def note(text: str) -> None:
    """Tell the active reporter of this process (if any) what the current configuration is doing."""
    if _CURRENT is not None:
        _CURRENT.note(text)


def _columns(stream) -> int:
    """The terminal width behind ``stream`` (0 when unknown: tqdm would draw nothing there)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return 0


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class Progress:
    """Progress lines of one experiment run on ``stream`` (default: sys.stderr at creation).

    Use it as a context manager: it becomes the process's reporter for :func:`note`, starts the heartbeat and,
    on exit, closes any bar and writes ``done in …``.
    """

    def __init__(self, name: str, *, enabled: bool = True, every: float = EVERY, stream=None,
                 tty: bool | None = None):
        self.name, self.enabled, self.every = name, enabled, float(every)
        self.stream = sys.stderr if stream is None else stream
        if tty is None:
            isatty = getattr(self.stream, "isatty", None)
            tty = bool(isatty and isatty()) and _columns(self.stream) > 0  # a bar needs a known width
        self.tty = tty
        self._lock = threading.RLock()
        self._t0 = self._last = time.monotonic()
        self._stage = self._step = self._note = ""
        self._total: int | None = None
        self._done = 0
        self._since = self._t0  # when the current configuration (or stage) started
        self._bar = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._previous: Progress | None = None

    # -- the API -------------------------------------------------------------------------------------------
    def stage(self, text: str, total: int | None = None) -> None:
        """Start a stage; ``total`` configurations follow (announced by :meth:`step`), if given."""
        with self._lock:
            self._close_bar()
            self._stage, self._step, self._note, self._total, self._done = text, "", "", total, 0
            self._since = time.monotonic()
            if not self.enabled:
                return
            if self.tty and total:
                self._bar = self._make_bar(text, total)
            if self._bar is None:  # a bar names its stage itself
                self._emit(self._line())

    def step(self, text: str) -> None:
        """Start the next configuration of the stage (the previous one is done)."""
        with self._lock:
            self._done += 1
            self._step, self._note, self._since = text, "", time.monotonic()
            if not self.enabled:
                return
            if self._bar is not None:
                if self._done > 1:
                    self._bar.update(1)
                self._bar.set_postfix_str(text, refresh=True)
                self._last = time.monotonic()
            else:
                self._emit(self._line())

    def note(self, text: str) -> None:
        """What the current configuration is doing now (a sub-stage)."""
        with self._lock:
            self._note, self._since = text, time.monotonic()  # "… s so far" counts from the latest sub-stage
            if not self.enabled:
                return
            if self._bar is not None:
                self._bar.set_postfix_str(self._text, refresh=True)
                self._last = time.monotonic()
            else:
                self._emit(self._line())

    def track(self, results: Iterable, labels: Sequence[str]) -> Iterator:
        """Yield from ``results`` (e.g. :func:`mmopt._base.parallel.ordered_map`'s generator, in task order), with
        :meth:`step` announcing ``labels[k]`` *before* result k is asked for: in this process, before it is
        computed; with workers, while waiting for it."""
        it = iter(results)
        for label in labels:
            self.step(label)
            yield next(it)

    def done(self, text: str = "done") -> None:
        """A closing line with the total time."""
        with self._lock:
            self._close_bar()
            if self.enabled:
                self._emit(f"[{self.name} {_clock(time.monotonic() - self._t0)}] {text}")

    # -- context manager: the process's reporter and its heartbeat ------------------------------------------
    def __enter__(self) -> Progress:
        global _CURRENT
        self._previous, _CURRENT = _CURRENT, self
        if not self.enabled:  # quiet means quiet: mmopt's own "still running" lines too (its documented switch)
            self._mmopt_level = _MMOPT.level
            if _MMOPT.getEffectiveLevel() < logging.WARNING:
                _MMOPT.setLevel(logging.WARNING)
        if self.enabled and self.every > 0:
            self._thread = threading.Thread(target=self._beat, name=f"{self.name} progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        global _CURRENT
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            self._close_bar()
        if not self.enabled:
            _MMOPT.setLevel(self._mmopt_level)
        _CURRENT = self._previous

    # -- internals -------------------------------------------------------------------------------------------
    @property
    def _text(self) -> str:
        return " — ".join(t for t in (self._step, self._note) if t)

    def _line(self, still: bool = False) -> str:
        now = time.monotonic()
        head = f"[{self.name} {_clock(now - self._t0)}] {self._stage}"
        if self._total:
            head += f" {self._done}/{self._total}"
        body = f"{head}: {self._text}" if self._text else head
        return f"{body} … still running ({now - self._since:.0f} s so far)" if still else body

    def _emit(self, line: str) -> None:
        self._last = time.monotonic()
        if self._bar is not None:
            self._bar.write(line, file=self.stream)
        else:
            try:
                print(line, file=self.stream, flush=True)
            except ValueError:  # the stream was closed under us (e.g. pytest's capture ended): stay quiet
                pass

    def _make_bar(self, desc: str, total: int):
        try:
            from tqdm import tqdm
        except ImportError:
            return None
        # left on screen when done: the finished stages stay readable above the next one
        return tqdm(total=total, desc=desc, unit="config", file=self.stream, leave=True, dynamic_ncols=True)

    def _close_bar(self) -> None:
        if self._bar is not None:
            self._bar.update(self._done - self._bar.n)
            self._bar.close()
            self._bar = None

    def _beat(self) -> None:
        tick = min(0.5, self.every / 2)  # so the longest silence is every + tick
        while not self._stop.wait(tick):
            with self._lock:
                silent = time.monotonic() - self._last >= self.every and (self._stage or self._text)
                if self._bar is not None:  # the bar's clock keeps moving; its postfix gains the time spent
                    if silent:
                        self._bar.set_postfix_str(f"{self._text} ({time.monotonic() - self._since:.0f} s)",
                                                  refresh=False)
                        self._last = time.monotonic()
                    self._bar.refresh()
                elif silent:
                    self._emit(self._line(still=True))
