"""Error profiles (Def. 4.6) and per-range error of each strategy on all ranges.

Run:  python -m experiments.profiles [--out DIR | --paper-figures] [--from-csv] [--quiet]
      (default folder: results/range_queries/, the main job's, not tracked)
Out:  profiles_n16.png/.csv  heatmaps of Δ²·(AᵀA)⁻¹ at n = 16 (I, H2, Y, Thm 5.25, l2_approx, min_error
                             optimised for all ranges); CSV has (AᵀA)⁻¹ itself too.
      range_error_n64.png/.csv  expected error (ε = 1) of every range at n = 64: mean vs range length,
                             and vs start position for ranges of a fixed length.
"""

from __future__ import annotations

import numpy as np

import mmopt
from experiments import _common, _helpers
from mmopt import strategy as st

HEAT_N, RANGE_N, FIXED_LENGTHS = 16, 64, (1, 8)
HEAT = ("identity", "H2", "wavelet", "svd_strategy", "l2_approx", "min_error")
RANGE = ("identity", "H2", "H_best", "wavelet", "svd_strategy", "l2_approx", "min_error")
PROFILE_COLUMNS = ["strategy", "n", "sensitivity", "i", "j", "profile", "delta2_profile"]
RANGE_COLUMNS = ["strategy", "n", "a", "b", "length", "error"]


def strategy(name: str, n: int, cfg: _helpers.Config) -> mmopt.Strategy | None:
    """The strategy a row of the §6 table used for all ranges at n (None when its optimiser failed)."""
    if name in ("identity", "H2", "wavelet"):
        return _helpers.closed_form(name, n)
    if name == "H_best":
        return _helpers.closed_form(f"H{_helpers.best_branching('all_range', n)}", n)
    if name == "svd_strategy":
        return st.svd_strategy(_helpers.workload("all_range", n))
    engine = "fast" if name == "l2_approx" else _helpers.min_error_engine(n, cfg)
    r = _helpers.optimise(name, "all_range", n, engine=engine)
    return r.result.strategy if r.result else None


def run(cfg: _helpers.Config) -> dict[str, list[dict]]:
    """{"profiles_n16": rows, "range_error_n64": rows}: the numbers behind the two figures."""
    prof, rng = [], []
    for name in HEAT:
        A = strategy(name, HEAT_N, cfg)
        if A is None:
            continue
        M, d2 = mmopt.error_profile(A).matrix, A.sensitivity() ** 2
        prof += [{"strategy": name, "n": HEAT_N, "sensitivity": A.sensitivity(), "i": i, "j": j, "profile": M[i, j],
                  "delta2_profile": d2 * M[i, j]} for i in range(HEAT_N) for j in range(HEAT_N)]
    c = mmopt.Privacy(1.0).variance_factor
    for name in RANGE:
        A = strategy(name, RANGE_N, cfg)
        if A is None:
            continue
        E = c * A.sensitivity() ** 2 * _helpers.range_errors(mmopt.error_profile(A).matrix)
        label = f"H_best = {A.name}" if name == "H_best" else name
        rng += [{"strategy": label, "n": RANGE_N, "a": a, "b": b, "length": b - a + 1, "error": E[a, b]}
                for a in range(RANGE_N) for b in range(a, RANGE_N)]
    return {"profiles_n16": prof, "range_error_n64": rng}


def save(tables: dict[str, list[dict]], out) -> None:
    _common.save_tables(tables, out, dict((("profiles_n16", PROFILE_COLUMNS), ("range_error_n64", RANGE_COLUMNS))))


def plot(out) -> list:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mmopt import plot as mplot

    rows = _common.read_csv(out / "profiles_n16.csv")
    names = [s for s in HEAT if any(r["strategy"] == s for r in rows)]
    fig, axes = plt.subplots(2, 3, figsize=(13, 8.2), constrained_layout=True)
    for ax, name in zip(axes.flat, names, strict=False):
        sub = [r for r in rows if r["strategy"] == name]
        M = np.zeros((HEAT_N, HEAT_N))
        for r in sub:
            M[r["i"], r["j"]] = r["delta2_profile"]
        # Δ²·M as written to the CSV (so --from-csv redraws the same figure), on mmopt.plot's symlog scale
        mplot.error_profile(M, ax=ax, linear_fraction=0.01, label="Δ²·(AᵀA)⁻¹ [i, j]")
        ax.set_title(f"{_helpers.label(name)} (Δ = {sub[0]['sensitivity']:.3g})")
    for ax in axes.flat[len(names):]:
        ax.axis("off")
    fig.suptitle(f"Error profiles at n = {HEAT_N} (Def. 4.6), scaled by Δ² so that error(w) = (2/ε²)·w (Δ²M) wᵀ; "
                 "optimised for all ranges.\nPer-panel symmetric-log colour scale centred at 0 "
                 "(linear within ±1% of the "
                 "panel's largest entry), so small off-diagonal terms stay visible")
    _common.save_png(fig, out / "profiles_n16.png", dpi=110)

    rows = _common.read_csv(out / "range_error_n64.csv")
    names = list(dict.fromkeys(r["strategy"] for r in rows))
    fig, axes = plt.subplots(1, 1 + len(FIXED_LENGTHS), figsize=(16, 4.8), constrained_layout=True)
    for name, mk in zip(names, "osDv^PX*", strict=False):
        sub = [r for r in rows if r["strategy"] == name]
        lengths = np.arange(1, RANGE_N + 1)
        err = np.array([[r["error"] for r in sub if r["length"] == ell] for ell in lengths], dtype=object)
        axes[0].plot(lengths, [np.mean(e) for e in err], mk + "-", ms=4, markevery=[0, 1, 3, 7, 15, 31, 63],
                     label=_helpers.label(name))
        for ax, ell in zip(axes[1:], FIXED_LENGTHS, strict=True):
            pts = sorted((r["a"], r["error"]) for r in sub if r["length"] == ell)
            ax.plot(*_helpers.xy(pts), mk + "-", ms=3, markevery=4, label=_helpers.label(name))
    axes[0].set(xscale="log", yscale="log", xlabel="range length b − a + 1",
                ylabel="mean expected squared error (ε = 1)", title=f"all ranges, n = {RANGE_N}: error vs length")
    axes[0].set_xscale("log", base=2)
    for ax, ell in zip(axes[1:], FIXED_LENGTHS, strict=True):
        ax.set(yscale="log", xlabel="range start a (cell index)", ylabel="expected squared error (ε = 1)",
               title=f"ranges of length {ell}: error vs position")
    for ax in axes:
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    _common.save_png(fig, out / "range_error_n64.png", dpi=110)
    return [out / "profiles_n16.png", out / "range_error_n64.png"]


def main(argv=None) -> int:
    return _common.figure_main(argv, name="profiles", description=__doc__,
                               compute=lambda out: save(run(_helpers.QUICK), out), plot=plot,
                               inputs=("profiles_n16.csv", "range_error_n64.csv"))


if __name__ == "__main__":
    raise SystemExit(main())
