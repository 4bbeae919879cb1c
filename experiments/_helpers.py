"""Shared pieces of the experiments: workloads by name, cached optimiser runs, the paper's constructions.

Only mmopt's public API is used. Optimiser runs are cached per process, so the tables, the figures
and the checks that need the same optimised strategy (e.g. min_error on all ranges at n = 16) pay
for it once.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from functools import cache

import numpy as np

import mmopt
from mmopt import strategy as st
from mmopt import workload as wl

WORKLOADS = {"all_range": wl.all_range, "prefix": wl.prefix, "all_predicate": wl.all_predicate}
SIZES = (4, 8, 16, 32, 64, 128, 256, 512, 1024)
BRANCHINGS = (2, 3, 4, 8, 16)
LABELS = {"svd_strategy": "Thm 5.25 strategy", "l2_approx": "l2_approx (L1 Δ)", "H_best": "H_best (best b)"}


@dataclass(frozen=True)
class Config:
    """How far each optimiser goes. quick: the default; full: --full."""

    sizes: tuple[int, ...] = SIZES
    min_error_max: int = 256      # largest n for min_error
    sdp_max: int = 8              # min_error uses the convex-iteration SDP up to here, local search above
    minsens_max: int = 4          # largest n for min_sensitivity (Program 5.3; ~20 s per workload at n = 8)
    epsilon: float = 1.0


QUICK = Config()
# Measured on 2 shared cores: min_sensitivity on the (dense) l2_approx factor takes 4–5 s per workload at n = 8;
# at n = 16, ~35 s on all ranges but over 20 minutes on prefix, so --full stops it at 8. min_error's local
# search takes ~7 s per workload at n = 256, ~35 s at 512 and ~160 s at 1024, so --full runs it to 1024.
FULL = Config(min_error_max=1024, sdp_max=16, minsens_max=8)


def min_error_engine(n: int, cfg: Config) -> str:
    """The min_error engine a row at n uses: the convex-iteration SDP up to cfg.sdp_max, local search above."""
    return "sdp" if n <= cfg.sdp_max else "local"


def xy(points) -> tuple[list, list]:
    """Split [(x, y), ...] into xs and ys for plotting."""
    return [p[0] for p in points], [p[1] for p in points]


def label(name: str) -> str:
    """Legend text for a strategy column (the CSVs keep the short names)."""
    return LABELS.get(name, name)


@cache
def workload(name: str, n: int) -> mmopt.Workload:
    return WORKLOADS[name](n)


@cache
def profile(kind: str, n: int) -> np.ndarray:
    """(AᵀA)⁻¹ of a closed-form strategy ("identity", "H<b>", "wavelet"), cached."""
    return mmopt.error_profile(closed_form(kind, n)).matrix


def closed_form(kind: str, n: int) -> mmopt.Strategy:
    if kind == "identity":
        return st.identity(n)
    if kind == "wavelet":
        return st.wavelet(n)
    return st.hierarchical(n, branching=int(kind[1:]))


def best_branching(wname: str, n: int) -> int:
    """The branching b ∈ BRANCHINGS (b ≤ n) whose H_b has the least total error on the workload."""
    G = workload(wname, n).mean_gram
    scores = {}
    for b in BRANCHINGS:
        if b <= n:
            A = closed_form(f"H{b}", n)
            scores[b] = A.sensitivity() ** 2 * float(np.sum(G * profile(f"H{b}", n)))
    return min(scores, key=scores.get)


@dataclass(frozen=True)
class Run:
    """One optimiser call: its result (None when it failed) and what happened."""

    result: mmopt.OptimizeResult | None
    status: str
    message: str
    seconds: float


@cache
def optimise(method: str, wname: str, n: int, engine: str | None = None, initial: str | None = None) -> Run:
    """mmopt.optimize on a named workload, cached; failures become a Run with status and message.

    ``initial="l2_approx"`` re-profiles the cached l2_approx strategy (for min_sensitivity).
    On 2ⁿ − 1 queries (all predicates at n = 1,024) optimize's totals are inf; the rows read the per-query
    figures (mean squared error against the per-query SVD bound), which stay finite.
    """
    W = workload(wname, n)
    kw: dict = {"seed": 0, "verbose": False}  # the experiments say what runs themselves (experiments._progress)
    if engine:
        kw["options"] = {"engine": engine}
    if initial == "l2_approx":
        base = optimise("l2_approx", wname, n, engine="fast")  # the very factor of the l2_approx row
        if base.result is None:
            return Run(None, "skipped", f"l2_approx failed: {base.message}", 0.0)
        kw["initial"] = base.result.strategy
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            res = mmopt.optimize(W, method=method, **kw)
    except (ImportError, NotImplementedError) as e:
        return Run(None, "unavailable", f"{type(e).__name__}: {e}", time.perf_counter() - t0)
    except Exception as e:  # noqa: BLE001 — a failed optimiser is a recorded row, not a crash
        return Run(None, "error", f"{type(e).__name__}: {e}"[:300], time.perf_counter() - t0)
    return Run(res, res.status, res.message, time.perf_counter() - t0)


def range_errors(M: np.ndarray) -> np.ndarray:
    """E[a, b] = w M wᵀ for the range w = [a, b] (0-based, inclusive); NaN below the diagonal.

    Uses 2-D prefix sums S[i, j] = Σ_{p<i, q<j} M[p, q], so all n(n+1)/2 ranges cost O(n²).
    """
    n = M.shape[0]
    S = np.zeros((n + 1, n + 1))
    S[1:, 1:] = np.cumsum(np.cumsum(M, axis=0), axis=1)
    a, b1 = np.arange(n)[:, None], np.arange(1, n + 1)[None, :]
    E = S[b1, b1] - S[a, b1] - S[b1.T, a.T].T + S[a, a]
    E[np.tril_indices(n, -1)] = np.nan
    return E


def table1_basis(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Table 1 (Thm F.45): orthonormal eigenvectors (rows) of HₙᵀHₙ and YₙᵀYₙ and their eigenvalues.

    Row 0 is 1ₙ/√n (λ_H = 2n − 1, λ_Y = n); then, for block size 2ʲ, j = k … 1, each dyadic block
    with +1 on its left half and −1 on its right half, normalised (λ_H = 2ʲ − 1, λ_Y = 2ʲ).
    Returns (Q, λ_H, λ_Y, block_size) with block_size[0] = n for the all-ones row.
    """
    rows, lam_h, lam_y, size = [np.ones(n) / np.sqrt(n)], [2.0 * n - 1], [float(n)], [n]
    s = n
    while s > 1:
        for start in range(0, n, s):
            h = np.zeros(n)
            h[start:start + s // 2], h[start + s // 2:start + s] = 1.0, -1.0
            rows.append(h / np.sqrt(s))
            lam_h.append(s - 1.0)
            lam_y.append(float(s))
            size.append(s)
        s //= 2
    return np.array(rows), np.array(lam_h), np.array(lam_y), np.array(size)


def h_decomposition(n: int) -> mmopt.Strategy:
    """D_H Q_H of §6.1: rows √λ × the Table-1 eigenvectors; square, profile-equivalent to Hₙ."""
    Q, lam_h, _, _ = table1_basis(n)
    return mmopt.Strategy(np.sqrt(lam_h)[:, None] * Q, "H decomposition")


def y_modified(n: int) -> mmopt.Strategy:
    """§6.1's modified Y decomposition: in the eigenvalue-n eigenspace, use 1 on each half instead."""
    Q, _, lam_y, _ = table1_basis(n)
    A = np.sqrt(lam_y)[:, None] * Q
    half = np.zeros((2, n))
    half[0, : n // 2] = half[1, n // 2:] = 1.0
    A[:2] = np.sqrt(n) * half / np.sqrt(n / 2)
    return mmopt.Strategy(A, "Y modified decomposition")
