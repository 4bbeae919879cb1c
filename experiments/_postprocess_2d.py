"""The 2-D part of :mod:`experiments.postprocess`: DPBench's 2-D histograms on implicit product pairs.

Each 256×256 file is coarsened to side × side cells by summing equal square blocks, and its shape (counts ÷
total) is rescaled like the 1-D data. The workloads are implicit Kronecker products (nothing N×N is formed):
``prefix_2d`` = P ⊗ P (the side² "lower-left rectangle" counts) and ``ranges_2d`` = R ⊗ R (every axis-aligned
rectangle, (side(side+1)/2)² queries). The strategies are products too, I ⊗ I, H₂ ⊗ H₂ and HDMM's OPT_⊗
(``mmopt.optimize(W, method="kron")``), so least squares is factor-wise; NNLS runs ADMM with the exact factor-wise
(Q + ρI)⁻¹ (:mod:`mmopt.reconstruct.admm`) and projection runs FISTA, each handing over to the other if it stalls.

Why the sides are small: time. Quick mode runs every (dataset, scale, ε, strategy, reconstruction) 10 times,
and the projection's quadratic form is the workload's Gram, whose condition number grows like side⁴ per factor
pair (P ⊗ P at 256×256: about 10¹⁰). Its solver (FISTA first, then ADMM; relative KKT residual 10⁻⁸) takes
~500 steps on R ⊗ R at 64×64 and ~6,000 steps (9 s) on P ⊗ P at 256×256 on Adult_2D at scale 10³, ε = 0.1
(measured, one run). A configuration that still fails to converge is kept as a row of NaNs, not dropped.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

import mmopt
from mmopt import strategy as st
from mmopt.structured import ImplicitStrategy, kron_strategy, ranges_2d
from mmopt.structured import workloads as sw

DATASETS = ("Adult_2D", "cabspottingE", "cabspottingS", "checkin", "twitter")
SIDE = 256  # the side of DPBench's 2-D files
WORKLOADS = {"prefix_2d": lambda k: sw.kron(sw.prefix(k), sw.prefix(k), name=f"prefix_2d({k})"),
             "ranges_2d": ranges_2d}
STRATEGIES = ("identity", "H2", "opt_kron")


def data_file(name: str, data: Path) -> Path:
    """Where DPBench's 2-D dataset ``name`` lives under the DPBench folder."""
    return Path(data) / "2D" / f"{name}_{SIDE}_{SIDE}.npy"


def coarsen(shape: np.ndarray, side: int) -> np.ndarray:
    """A square array summed over equal square blocks down to side × side (the total is kept)."""
    shape = np.asarray(shape, dtype=float)
    k = shape.shape[0]
    if shape.ndim != 2 or shape.shape[1] != k or k % side:
        raise ValueError(f"coarsen: a {shape.shape} array cannot be coarsened to {side}×{side} cells.")
    return shape.reshape(side, k // side, side, k // side).sum(axis=(1, 3))


def load_shape(name: str, data: Path) -> np.ndarray:
    """A 2-D DPBench dataset's shape (counts ÷ total) at its full 256×256 resolution."""
    x = np.load(data_file(name, data)).astype(float)
    if x.shape != (SIDE, SIDE):
        raise ValueError(f"load_shape: {data_file(name, data)} holds a {x.shape} array, not {SIDE}×{SIDE}.")
    return x / x.sum()


def strategy(name: str, W, side: int, seed: int) -> ImplicitStrategy:
    """I ⊗ I, H₂ ⊗ H₂ or OPT_⊗ for W (a single product: it is asked for one)."""
    if name == "opt_kron":
        A = mmopt.optimize(W, method="kron", seed=seed, verbose=False).strategy
        if not (isinstance(A, ImplicitStrategy) and A.is_product):
            raise ValueError("strategy: mmopt.optimize(W, method='kron') did not return a single product strategy.")
        return A
    factor = {"identity": st.identity, "H2": st.hierarchical}[name]
    return kron_strategy(factor(side), factor(side))


def is_2d(row: dict) -> bool:
    return str(row["workload"]).endswith("_2d")


def _side(n) -> int:
    return math.isqrt(int(n))


def panel_title(n, workload: str, strategy: str | None = None) -> str:
    """A figure panel's title: the 1-D ones name n, the 2-D ones the grid and the strategy."""
    if not workload.endswith("_2d"):
        return f"{workload}, n = {n}"
    return f"{workload}, {_side(n)}×{_side(n)}" + ("" if strategy is None else f", {strategy}")


def _ratio(rows: list[dict], key: tuple, rec: str) -> float:
    for r in rows:
        if (r["dataset"], r["workload"], r["strategy"], r["epsilon"], r["scale"], r["reconstruct"]) == key + (rec,):
            return float(r["ratio_to_least_squares"])
    return math.nan


def _fmt(x: float, flag: bool = False) -> str:
    if math.isnan(x):
        return "n/c"
    if flag and x > 1 + 1e-9:
        return f"{x:.3f}†"  # three digits: 1.0004 must not read as 1.00
    return f"{x:.2f}"


def _median(rows: list[dict], rec: str, **where) -> float:
    vals = [float(r["ratio_to_least_squares"]) for r in rows if r["reconstruct"] == rec
            and all(r[k] == v for k, v in where.items()) and not math.isnan(float(r["ratio_to_least_squares"]))]
    return float(np.median(vals)) if vals else math.nan


def _best(rows: list[dict], workload: str, scale) -> str:
    """The strategy + reconstruction with the lowest RMSE ÷ (the best least-squares RMSE on the same data and ε)."""
    here = [r for r in rows if r["workload"] == workload and r["scale"] == scale and not math.isnan(float(r["rmse"]))]
    best_ls = {}
    for r in here:
        if r["reconstruct"] == "least_squares":
            k = (r["dataset"], r["epsilon"])
            best_ls[k] = min(best_ls.get(k, math.inf), float(r["rmse"]))
    rel = {}
    for r in here:
        if (r["dataset"], r["epsilon"]) in best_ls:
            rel.setdefault((r["strategy"], r["reconstruct"]), []).append(
                float(r["rmse"]) / best_ls[(r["dataset"], r["epsilon"])])
    if not rel:
        return "no result"
    (s, rec), vals = min(rel.items(), key=lambda kv: float(np.median(kv[1])))
    return f"{s} + {rec} ({float(np.median(vals)):.2f})"


def finding(rows: list[dict]) -> list[str]:
    """A few plain sentences; every number, and every "helps"/"hurts", is read from the rows."""
    scales = sorted({r["scale"] for r in rows})
    lo, hi = scales[0], scales[-1]

    def verdict(x: float) -> str:
        return "no result" if math.isnan(x) else "helps" if x < 0.95 else "hurts" if x > 1.05 else "about neutral"

    p_lo, p_hi = _median(rows, "projection", scale=lo), _median(rows, "projection", scale=hi)
    out = [f"- Projection (median RMSE ratio to least squares over datasets, workloads, strategies and ε): "
           f"{verdict(p_lo)} at scale {lo:.0e} ({p_lo:.2f}), {verdict(p_hi)} at {hi:.0e} ({p_hi:.2f}). The "
           "constraint h ≥ 0 binds where counts are small next to the noise (small scale × ε, empty cells)."]
    for s in sorted({r["strategy"] for r in rows}):
        n_lo, n_hi = _median(rows, "nnls", strategy=s, scale=lo), _median(rows, "nnls", strategy=s, scale=hi)
        out.append(f"- NNLS after {s}: {verdict(n_lo)} at {lo:.0e} ({n_lo:.2f}), {verdict(n_hi)} at {hi:.0e} "
                   f"({n_hi:.2f})." + (" After I ⊗ I, NNLS only clamps each noisy cell at 0, which can only raise "
                                      "every rectangle's estimate: a bias that grows with the rectangles."
                                      if s == "identity" else ""))
    for w in sorted({r["workload"] for r in rows}):
        out.append(f"- Lowest RMSE on {w} (median over datasets and ε, relative to the best least squares): "
                   + "; ".join(_best(rows, w, sc) + f" at {sc:.0e}" for sc in (lo, hi)) + ".")
    worse = [r for r in rows if r["reconstruct"] == "projection" and float(r["ratio_to_least_squares"]) > 1 + 1e-9]
    if worse:
        out.append(f"- † marks {len(worse)} projection row(s) above least squares, which an exact projection "
                   "cannot be (it never increases the workload's error, on any draw): solver artefacts. ADMM stops "
                   "on a KKT residual relative to ‖h‖, which at large scales measures the data, not the noise, so "
                   "it can stop near max(x̂, 0) before the projection is accurate.")
    if any(math.isnan(float(r["rmse"])) for r in rows):
        out.append("- n/c: the reconstruction did not converge (ADMM's 20,000 steps) in at least one run.")
    return out


def markdown(rows: list[dict]) -> str:
    """The 2-D section: setup, finding and the key ratios (the caller appends every row)."""
    rows = [r for r in rows if is_2d(r)]
    if not rows:
        return ""
    sizes = ", ".join(sorted({f"{r['workload']} at {_side(r['n'])}×{_side(r['n'])}" for r in rows}))
    scales = sorted({r["scale"] for r in rows})
    lines = ["", "## 2-D: DPBench's 2-D histograms (implicit product pairs)", "",
             f"The 256×256 files coarsened by summing square blocks; {sizes} (why so small: the module docstring "
             "of `experiments/_postprocess_2d.py`). Strategies are products (identity = I ⊗ I, H2 = H₂ ⊗ H₂, "
             "opt_kron = HDMM's OPT_⊗); NNLS is solved by ADMM with the exact factor-wise (Q + ρI)⁻¹, projection by "
             f"FISTA (each hands over to the other if it stalls); {rows[0]['runs']} seeded runs per row; the error "
             "is over all of the workload's queries.",
             "", "Finding:", "", *finding(rows), "",
             "RMSE ratio to least squares, projection / NNLS (below 1: the reconstruction helps):", "",
             "| dataset | workload | strategy | ε | " + " | ".join(f"{s:.0e}" for s in scales) + " |",
             "|---|---|---|---|" + "---|" * len(scales)]
    keys = sorted({(r["dataset"], r["workload"], r["strategy"], r["epsilon"]) for r in rows},
                  key=lambda k: (k[1], k[2], k[0], k[3]))
    for key in keys:
        cells = [f"{_fmt(_ratio(rows, key + (s,), 'projection'), True)} / {_fmt(_ratio(rows, key + (s,), 'nnls'))}"
                 for s in scales]
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
