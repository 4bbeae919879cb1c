"""The mechanisms' inputs checked and their outputs formed (split from :mod:`mmopt.mechanism`): counts x, the
number of draws, whether answers W x̂ are formed (decided before any noise is drawn), A x and the simulation's
noisy y, each refused with the caller's name when it would overflow or exhaust memory."""

from __future__ import annotations

import warnings

import numpy as np

from mmopt._base import validation as v
from mmopt._base.opendp import finite as _finite
from mmopt.dense import _family_answers as family_answers
from mmopt.dense._error_common import check_privacy, check_workload
from mmopt.dense._workload_core import Workload
from mmopt.dense.exact_answers import refuse_negative

__all__ = ["answer_plan", "answers_available", "answers_of", "check_size", "check_types", "check_x", "noisy",
           "product"]


def answers_available(workload: Workload) -> bool:
    """Whether the mechanisms return W x̂ for this dense workload: W is stored, or it is a closed-form family
    (:mod:`mmopt.dense._family_answers`) whose m answers fit the allocation limit."""
    return workload.matrix is not None or (workload.family in family_answers.FAMILIES
                                           and workload.n_queries <= v.MAX_ALLOCATION_ENTRIES)


def answer_plan(workload: Workload, caller: str) -> bool:
    """Whether answers will be formed, decided before any noise is drawn; a family with more answers than the
    allocation limit says so (a Gram-only workload has none to give)."""
    available = answers_available(workload)
    if not available and workload.family in family_answers.FAMILIES:
        warnings.warn(f"{caller}: workload '{workload.name}' has {v.fmt_count(workload.n_queries)} queries, more "
                      "answers than the allocation limit; 'answers' will be None. Answer the queries you need "
                      "from 'estimate'.", stacklevel=3)
    return available


def answers_of(workload: Workload, answered: bool, xhat: np.ndarray, caller: str):
    """W x̂ (rows of x̂ when there are several draws): by the stored W, else the family's fast product."""
    if not answered:
        return None
    if workload.matrix is not None:
        return _finite(xhat @ workload.matrix.T, "W x̂", caller)
    rows = 1 if xhat.ndim == 1 else xhat.shape[0]
    v.check_allocation(rows * workload.n_queries, what=f"{rows} × {v.fmt_count(workload.n_queries)} answers",
                       caller=caller, remedy=" Draw in batches with a smaller 'size'.")
    Wx = family_answers.apply(workload.family, xhat)
    # the identity family's product is x̂ itself: answers must not alias the estimate
    return _finite(Wx.copy() if Wx is xhat else Wx, "W x̂", caller)


def check_types(workload, privacy, caller: str) -> None:
    check_workload(workload, caller)
    check_privacy(privacy, caller, optional=False)  # a mechanism needs a real budget


def domain_shape(workload) -> tuple[int, ...] | None:
    """The product domain's shape of a dense workload with a product twin (x and zeros may be shaped like it)."""
    from mmopt.workload import structure_of
    twin = structure_of(workload)
    return None if twin is None else tuple(twin.shape)


def check_x(x, n: int, caller: str, workload=None) -> np.ndarray:
    if workload is not None and np.ndim(x) > 1:  # shaped like a product workload's domain: its cells in C order
        shape = domain_shape(workload)
        if tuple(np.shape(x)) == shape:
            x = np.asarray(x).reshape(-1)
        elif shape is not None and len(shape) > 1:  # "must be a 1-D array" contradicted the shape it accepts
            hint = " (transposed?)" if tuple(np.shape(x))[::-1] == shape else ""
            raise ValueError(f"The 'x' parameter of {caller} must be flat ({n},) or shaped like the domain {shape}. "
                             f"Got an array of shape {np.shape(x)}{hint} instead.")
    x = v.check_vector(x, name="x", caller=caller, length=n)
    refuse_negative(x, caller)
    return x


def check_size(size, widths: tuple[int, ...], caller: str) -> int | None:
    """``size`` (None or an int >= 1), refused before drawing when size × (p + n + m) exceeds the memory limit."""
    if size is None:
        return None
    size = v.check_int(size, name="size", caller=caller)
    v.check_allocation(size * sum(widths), what=f"{size} draws of {' + '.join(map(str, widths))} values",
                       caller=caller, remedy=" Draw in batches with a smaller 'size'.")
    return size


def product(M: np.ndarray, x: np.ndarray, caller: str) -> np.ndarray:
    """M x, refused when it overflows float64 (the mechanism would return NaN)."""
    with np.errstate(over="ignore", invalid="ignore"):
        Mx = M @ x
    if not np.all(np.isfinite(Mx)):
        raise ValueError(f"The 'x' parameter of {caller} is too large: A x overflows float64 (max x = "
                         f"{np.max(x):.3g}). Rescale the counts.")
    return Mx


def noisy(Mx: np.ndarray, noise: str, scale: float, gen: np.random.Generator, size, caller: str) -> np.ndarray:
    """M x plus i.i.d. simulation noise, shape (p,) or (size, p); refused if a draw overflows."""
    shape = Mx.shape if size is None else (size, Mx.shape[0])
    with np.errstate(over="ignore", invalid="ignore"):
        y = Mx + (gen.laplace if noise == "laplace" else gen.normal)(0.0, scale, size=shape)
    return _finite(y, "the noisy measurements y", caller)
