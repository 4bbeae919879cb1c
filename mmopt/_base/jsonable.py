"""Plain-JSON views of results and strategies: what :meth:`OptimizeResult.to_dict` and saved files' metadata hold.

Notation: see README. Everything returned here survives ``json.loads(json.dumps(d, allow_nan=False)) == d``:
only dict (str keys), list, str, int, float, bool and None. numpy scalars become Python numbers, small arrays
lists; a non-finite float becomes the string "inf", "-inf" or "nan" (strict JSON has no such numbers, and
nan ≠ nan would break the round trip); any other object is written as its repr.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

# Arrays in ``extra``/``history`` with more entries than this are summarised, not listed.
MAX_LISTED_ENTRIES = 4096
NONFINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def number(x: float) -> float | str:
    """A float, or "inf" / "-inf" / "nan" for the non-finite ones (strict JSON)."""
    x = float(x)
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def to_float(x) -> float:
    """The inverse of :func:`number`."""
    return NONFINITE[x] if isinstance(x, str) else float(x)


def jsonable(obj, *, strict: bool = False, _depth: int = 0):
    """``obj`` as plain JSON values (see the module docstring).

    ``strict=True`` (the command line's output) lists every array in full and raises TypeError for an object
    with no JSON form, instead of summarising large arrays and writing other objects as their repr.
    """
    if _depth > 20 and not strict:
        return repr(obj)[:200]
    if obj is None or isinstance(obj, bool | str):
        return obj
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, int | np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        return number(obj)
    if isinstance(obj, np.ndarray):
        if not strict and (obj.dtype.kind not in "biuf" or obj.size > MAX_LISTED_ENTRIES):
            return f"<ndarray shape={obj.shape} dtype={obj.dtype} not listed>"
        return jsonable(obj.tolist(), strict=strict, _depth=_depth + 1)
    if isinstance(obj, Mapping):
        return {str(k): jsonable(val, strict=strict, _depth=_depth + 1) for k, val in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(val, strict=strict, _depth=_depth + 1) for val in obj]
    if strict:
        raise TypeError(f"not representable in JSON: {type(obj).__name__}")
    return repr(obj)


def result_dict(result) -> dict:
    """The JSON view of an :class:`~mmopt._base.result.OptimizeResult` (see :meth:`OptimizeResult.to_dict`)."""
    from mmopt.persist._format import strategy_summary  # lazy: the format module imports the strategy classes
    try:
        gap, ratio = result.gap, result.ratio
    except ZeroDivisionError:  # a zero objective (an all-zero workload) has no relative gap
        gap = ratio = math.nan
    d = {"method": result.method, "solver": result.solver, "norm": result.norm, "status": result.status,
         "success": bool(result.success), "message": result.message,
         "objective": result.objective, "lower_bound": result.lower_bound, "gap": gap, "ratio": ratio,
         "objective_per_query": result.objective_per_query, "lower_bound_per_query": result.lower_bound_per_query,
         "iterations": result.iterations, "seconds": result.seconds,
         # optimize records the seed it was given in extra['seed'] (see mmopt.optimize.seed_record)
         "seed": result.extra.get("seed") if isinstance(result.extra, Mapping) else None,
         "strategy": strategy_summary(result.strategy),
         "history": list(result.history), "extra": dict(result.extra)}
    return jsonable(d)
