"""``mmopt release``'s files (split from :mod:`mmopt.cli.release`): the --data histogram read and checked in the
command's words, the answers written whole or not at all, the fallback file when they cannot be, the expected
error at the noise actually drawn (in logarithms)."""

from __future__ import annotations

import math
import os
import sys
import tempfile
import warnings

import numpy as np

import mmopt
from mmopt._base.atomic import atomic_target
from mmopt.cli import output as out
from mmopt.cli._grammar import load_npy
from mmopt.cli._numbers import is_number
from mmopt.workload import ImplicitWorkload

__all__ = ["atomic_save", "check_data", "expected_release_error", "fallback", "load_data", "measurement_table"]


def load_data(path: str) -> np.ndarray:
    ext = out.check_extension(path, (".npy", ".csv"), "--data")
    if not os.path.isfile(path):  # said before anything is built or drawn, in the command's words
        raise ValueError(f"The --data file '{path}' does not exist (or is not a file). Give the path of the true "
                         "histogram x: a .npy array or a .csv of numbers.")
    if ext == ".npy":
        return load_npy(path, "--data file")
    with warnings.catch_warnings():  # an empty file: numpy's own warning came before the clean error below
        warnings.simplefilter("ignore", UserWarning)
        try:
            # utf-8-sig: the byte-order mark a spreadsheet writes first was read as part of the first number
            return np.loadtxt(path, delimiter=",", ndmin=1, encoding="utf-8-sig")
        except ValueError as exc:
            if (x := _after_header(path)) is not None:
                return x
            empty = " An empty cell (,,) is not a count: write 0 there, or fill it." if "string ''" in str(exc) else ""
            raise ValueError(f"Could not read the --data file '{path}' as numbers separated by commas: "
                             f"{str(exc).rstrip('.')}.{empty}") from None


def _after_header(path: str) -> np.ndarray | None:
    """The numbers after a first row of names only (a spreadsheet's header, e.g. 'count': refused before, a
    newcomer's stumble), said on stderr; None when the first row holds a number or the rest is not numbers."""
    with open(path, encoding="utf-8-sig") as f:
        first = f.readline().strip()
    cells = [c.strip() for c in first.split(",")]
    if not first or any(is_number(c) for c in cells):
        return None
    try:
        x = np.loadtxt(path, delimiter=",", ndmin=1, encoding="utf-8-sig", skiprows=1)
    except ValueError:
        return None
    if x.size:
        print(f"mmopt: --data '{path}': the first row ({first[:40]!r}) is read as a header.", file=sys.stderr,
              flush=True)
        return x
    return None



def check_data(path: str, W, x: np.ndarray) -> np.ndarray:
    """x as release reads it, its size and finiteness checked in the command's words (the library's own messages
    name its parameter 'x', not --data)."""
    if not isinstance(W, ImplicitWorkload):
        from mmopt.workload import structure_of
        twin = structure_of(W)
        if x.ndim > 1 and (twin is None or tuple(x.shape) != tuple(twin.shape)):  # two columns (index, count)
            # were read as one histogram of twice the cells before
            raise ValueError(f"The --data file '{path}' must hold one count per cell of '{W.name}': one column "
                             f"(or one row) of {W.domain_size:,} numbers"
                             + ("" if twin is None else f", or an array of shape {tuple(twin.shape)}")
                             + f". Got an array of shape {x.shape}.")
        x = x.ravel()  # a dense workload reads a flat histogram (C order)
    if x.size != W.domain_size:
        raise ValueError(f"The --data file '{path}' must hold one count per cell of '{W.name}': {W.domain_size:,} "
                         f"numbers. Got {x.size:,}.")
    bad = np.flatnonzero(~np.isfinite(x.ravel())) if x.dtype.kind in "fc" else ()
    if len(bad):
        raise ValueError(f"The --data file '{path}' must hold finite counts. Got {bad.size:,} NaN or infinite "
                         f"(the first at cell {bad[0]:,} of the flat histogram, 0-based); fill or drop them.")
    return x


def atomic_save(path: str, vector: np.ndarray, ext: str) -> None:
    """Write ``vector`` to ``path`` whole or not at all (:func:`mmopt._base.atomic.atomic_target`)."""
    with atomic_target(path, ext) as tmp, open(tmp, "wb") as fh:
        if ext == ".npy":
            np.save(fh, np.asarray(vector))
        else:
            np.savetxt(fh, np.ravel(vector), fmt="%.17g")


def log10_or_none(value) -> float | None:
    return math.log10(value) if isinstance(value, float | int) and math.isfinite(value) and value > 0 else None


def expected_release_error(expected, privacy: mmopt.Privacy, noise_scale: float) -> tuple[float | None, float | None]:
    """(total, log10 total) of least squares' expected squared error at the noise scale actually drawn.

    evaluate's total is c·Δ²·tr(G M) at the calibrated scale; the release drew variance v = 2b² (Laplace) or
    σ² (Gaussian), so its total is v·tr(G M) = total·v/(c·Δ²). Formed in logarithms, so it never overflows,
    underflows to a false 0 or divides by zero; None where evaluate itself has no finite figure.
    """
    log_total = getattr(expected, "log10_total", None)
    if log_total is None:
        log_total = log10_or_none(expected.total_squared_error)
    log_d, log_b = log10_or_none(expected.sensitivity), log10_or_none(noise_scale)
    if log_total is None or log_d is None or log_b is None:
        return None, None
    log_v = 2 * log_b + (math.log10(2.0) if privacy.noise == "laplace" else 0.0)
    log_release = log_total + log_v - privacy.log_variance_factor / math.log(10.0) - 2 * log_d
    return (10.0**log_release if log_release < 308 else math.inf), log_release


def fallback(vector: np.ndarray) -> str:
    fd, fallback = tempfile.mkstemp(prefix="mmopt-release-", suffix=".npy")
    with os.fdopen(fd, "wb") as fh:
        np.save(fh, np.asarray(vector))
    return fallback


def measurement_table(y: np.ndarray, path: str, fmt: str) -> None:
    """The noisy measurements y as a two-column table (row of A, measurement), when no x̂ survived."""
    import pyarrow as pa

    from mmopt.answers import files

    batch = pa.RecordBatch.from_arrays([pa.array(np.arange(y.size, dtype=np.int64)), pa.array(y)],
                                       names=["row", "measurement"])
    files.stream_batches(path, fmt, batch.schema, [batch])
