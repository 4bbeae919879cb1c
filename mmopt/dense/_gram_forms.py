"""Gram matrices of workloads, computed safely and checked: closed forms, marginals, WᵀW/m at any scale.

Notation: see README. Private helpers of :mod:`mmopt.workload`: every function here allocates at most one
n×n temporary besides its result, after :func:`mmopt._base.validation.check_allocation`, and refuses a Gram
that over- or underflows float64 instead of returning inf or 0. :func:`validate_fields` checks a directly
constructed Workload against these forms.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from mmopt._base import validation as v

TINY = np.finfo(float).tiny  # below it a float64 has lost relative precision (subnormal)


def check_range(G: np.ndarray, what: str, caller: str, detail: str = "") -> None:
    """Refuse a Gram that over- or underflowed float64 (errors scale with it: they would be inf or 0)."""
    top = float(np.max(np.abs(G)))
    if not math.isfinite(top) or top < TINY:
        side = "overflows" if not math.isfinite(top) else "underflows"
        raise ValueError(f"{caller}: {what} {side} float64{detail}. Rescale the queries: every error figure "
                         "scales with the square of W's entries, so it would be inf or 0.")


def mean_gram_of(W: np.ndarray, *, caller: str) -> np.ndarray:
    """WᵀW/m, exactly symmetric, computed without intermediate over/underflow.

    When max|W|²·m is near either end of float64's range, W is scaled by a power of two 2⁻ᵉ (exact)
    before the product and the result by 4ᵉ after: only a G/m that itself overflows (or underflows
    entirely) is refused.
    """
    m, n = W.shape
    top = float(max(W.max(), -W.min()))
    e = int(np.frexp(top)[1])
    safe = -450 < e and m * top * top < 2.0**1000
    v.check_allocation(n * n + (0 if safe else m * n), what=f"the {n}×{n} Gram matrix WᵀW", caller=caller)
    Ws = W if safe else np.ldexp(W, -e)
    G = Ws.T @ Ws
    for i in range(n - 1):  # mirror the upper triangle in place: BLAS need not return a bit-symmetric product
        G[i + 1:, i] = G[i, i + 1:]
    G /= as_float(m)
    if not safe:
        with np.errstate(over="ignore", under="ignore"):
            G = np.ldexp(G, 2 * e)
    check_range(G, "WᵀW/m", caller, f" (max |W| = {top:.3g}, m = {v.fmt_count(m)})")
    return G


def as_float(m: int) -> float:
    try:
        return float(m)
    except OverflowError:
        return math.inf


# -- closed forms ---------------------------------------------------------------------------------------
def family_count(family: str, n: int) -> int:
    return {"identity": n, "total": 1, "prefix": n, "all_range": n * (n + 1) // 2, "all_predicate": 2**n - 1}[family]


def family_mean_gram(family: str, n: int, caller: str) -> np.ndarray:
    """G/m of a closed-form family, with at most one n×n temporary."""
    v.check_allocation(2 * n * n, what=f"the {n}×{n} Gram matrix of {family}({n}) and one temporary", caller=caller)
    i = np.arange(1.0, n + 1)
    if family == "identity":
        G = np.eye(n)
        G /= n
    elif family == "total":
        G = np.ones((n, n))
    elif family == "prefix":  # n − max(i, j) + 1
        G = np.minimum.outer(n + 1 - i, n + 1 - i)
        G /= n
    elif family == "all_range":  # min(i, j)·(n − max(i, j) + 1) = min(P, Pᵀ) with P_ij = i·(n + 1 − j)
        P = np.outer(i, n + 1 - i)
        G = np.minimum(P, P.T)
        del P
        G /= n * (n + 1) // 2
    else:  # all_predicate: (I + J)/(4(1 − 2⁻ⁿ)), i.e. 2ⁿ⁻²/(2ⁿ − 1) without overflow
        G = np.ones((n, n))
        G[np.diag_indices(n)] += 1.0
        G *= 1.0 / (4.0 * -math.expm1(-n * math.log(2.0)))
    return G


def _ranges_matrix(n: int) -> np.ndarray:
    a, b = np.triu_indices(n)  # row-major: a ascending, then b >= a (matches mmopt.error's order)
    cells = np.arange(n)
    return ((cells >= a[:, None]) & (cells <= b[:, None])).astype(np.float64)


def _predicate_matrix(n: int) -> np.ndarray:
    codes = np.arange(1, 2**n, dtype=np.int64)  # row k-1 is the binary code of k, bit j = cell j
    return ((codes[:, None] >> np.arange(n)) & 1).astype(np.float64)


BUILDERS = {
    "identity": lambda n: np.eye(n),
    "total": lambda n: np.ones((1, n)),
    "prefix": lambda n: np.tril(np.ones((n, n))),
    "all_range": _ranges_matrix,
    "all_predicate": _predicate_matrix,
}


def marginals_mean_gram(dims: tuple[int, ...], k: int) -> tuple[int, np.ndarray]:
    """(m, G/m) of all k-way marginals on a domain of shape ``dims``: G_{c,c'} = C(a(c, c'), k), a = number of
    attributes on which cells c and c' agree; m = e_k(dims), the k-th elementary symmetric polynomial."""
    n = math.prod(dims)
    e = [1] + [0] * k  # e[j] = j-th elementary symmetric polynomial of the dims seen so far
    for d in dims:
        for j in range(k, 0, -1):
            e[j] += e[j - 1] * d
    m = e[k]
    coords = np.indices(dims).reshape(len(dims), n)
    agree = np.zeros((n, n), dtype=np.min_scalar_type(len(dims)))
    for c in coords:
        agree += c[:, None] == c[None, :]
    table = np.array([float(Fraction(math.comb(a, k), m)) for a in range(len(dims) + 1)])
    return m, table[agree]


def validate_fields(w, families: tuple[str, ...]) -> None:
    """Every invariant of a directly constructed :class:`~mmopt.workload.Workload` (see its docstring): the
    Gram matches W or the family's closed form, so per-query figures cannot silently be wrong. Freezes copies."""
    caller = "Workload"
    family = v.check_choice(w.family, name="family", caller=caller, choices=families)
    m = v.check_int(w.n_queries, name="n_queries", caller=caller, low=1)
    v.check_str(w.name, name="name", caller=caller)
    for label, arr in (("mean_gram", w.mean_gram), ("matrix", w.matrix)):
        if arr is not None and not (isinstance(arr, np.ndarray) and arr.dtype == np.float64):
            raise TypeError(
                f"The '{label}' parameter of {caller} must be a float64 numpy array. Got {type(arr).__name__}"
                f"{f' of dtype {arr.dtype}' if isinstance(arr, np.ndarray) else ''}. Use Workload.from_matrix(W) "
                "or Workload.from_gram(G, n_queries=m), which convert and check their input.")
    G = v.check_matrix(w.mean_gram, name="mean_gram", caller=caller, square=True).copy()
    n = G.shape[0]
    if not np.any(G):
        raise ValueError(f"The 'mean_gram' parameter of {caller} must be non-zero.")
    check_range(G, "'mean_gram'", caller)
    W = w.matrix
    if (W is not None) != (family == "matrix"):
        got = "None" if W is None else f"an array of shape {W.shape}"
        raise ValueError(f"The 'matrix' parameter of {caller} must be given exactly when family='matrix'. "
                         f"Got {got} with family={family!r}.")
    if family == "matrix":
        W = v.check_matrix(W, name="matrix", caller=caller).copy()
        if W.shape != (m, n):
            raise ValueError(f"The 'matrix' parameter of {caller} must have shape (n_queries, n) = ({m}, {n}). "
                             f"Got {W.shape}.")
        _require_close(G, mean_gram_of(W, caller=caller), "WᵀW/m of its 'matrix'", family)
    elif family == "gram":
        G = v.check_gram(G, name="mean_gram", caller=caller, remedy=" Build it with Workload.from_gram.", queries=m)
    else:
        count = family_count(family, n)
        if m != count:
            raise ValueError(f"The 'n_queries' parameter of {caller} must be {v.fmt_count(count)} for family "
                             f"{family!r} on n={n} cells. Got {v.fmt_count(m)}.")
        _require_close(G, family_mean_gram(family, n, caller), f"the closed form of family {family!r}", family)
    for key, val in (("mean_gram", G), ("matrix", W)):
        if val is not None:
            val.setflags(write=False)
        object.__setattr__(w, key, val)


def _require_close(G: np.ndarray, expected: np.ndarray, what: str, family: str) -> None:
    top = float(np.max(np.abs(expected)))
    diff = float(np.max(np.abs(G - expected)))
    if not diff <= 1e-9 * top:
        hint = "Workload.from_gram(G, n_queries=m)" if family != "matrix" else "Workload.from_matrix(W)"
        raise ValueError(
            f"The 'mean_gram' parameter of Workload does not match {what}: max difference {diff:.3g} "
            f"({diff / max(top, 1e-300):.2g} of its largest entry). Its per-query and maximum errors would be "
            f"wrong. Build it with {hint}, or with the family's own constructor."
        )
