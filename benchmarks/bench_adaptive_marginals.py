"""iReduct and DualQuery against the Laplace mechanism on marginals, PrivBayes and a uniform table, on seeded
synthetic multi-attribute data.

Run:  python benchmarks/bench_adaptive_marginals.py [--seeds 3] [--out FILE]
Data: a latent-class model (4 hidden classes, each attribute drawn from a class-specific Dirichlet(0.3) law),
n records, seeded, on two domains: "mixed" 4 × 5 × 3 × 6 × 4 × 8 (11,520 cells) and "binary" 2⁸ (256 cells).
Workload: every 1- and 2-way marginal. Errors, averaged over the seeds: "rel" is the mean relative error over
all workload cells with the sanity bound δ = 10⁻³·n (iReduct's metric, |ŷ − y|/max(y, δ)); "L1/n" is the mean
over the 2-way marginals of ‖ŷ − y‖₁/n; "max/n" is the largest error of a 2-way marginal cell over n
(DualQuery's metric). "ratio" is rel divided by the rel of the Laplace mechanism (``ireduct(rounds=1)``, every
marginal at scale K/ε) on the same data. "s" is seconds per run (wall clock, one BLAS thread, shared machine).
Every algorithm runs with noise="numpy" (simulation). The uniform table uses the true n: a reference only.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

DOMAINS = {"mixed": (4, 5, 3, 6, 4, 8), "binary": (2,) * 8}


def latent_class_data(n: int, seed: int, shape=DOMAINS["mixed"]) -> np.ndarray:
    """Counts of n records: a hidden class z ∈ {0..3}, then each attribute from its class's Dirichlet(0.3) law."""
    rng = np.random.default_rng(seed)
    z = rng.integers(0, 4, n)
    cols = []
    for k in shape:
        cdf = np.cumsum(rng.dirichlet(np.full(k, 0.3), size=4), axis=1)
        cols.append(np.minimum((rng.random(n)[:, None] > cdf[z]).sum(axis=1), k - 1))
    x = np.zeros(shape)
    np.add.at(x, tuple(cols), 1)
    return x


def errors(est: np.ndarray, x: np.ndarray) -> tuple[float, float, float]:
    from mmopt.adaptive._marginals import project
    d = x.ndim
    n = x.sum()
    delta = max(1.0, 1e-3 * n)
    Ms = [(i,) for i in range(d)] + list(itertools.combinations(range(d), 2))
    rel = np.concatenate([(np.abs(project(est, M) - project(x, M)) / np.maximum(project(x, M), delta)).ravel()
                          for M in Ms])
    two = [np.abs(project(est, M) - project(x, M)) / n for M in Ms if len(M) == 2]
    return float(rel.mean()), float(np.mean([e.sum() for e in two])), float(max(e.max() for e in two))


def methods():
    from mmopt.adaptive import dual_query, ireduct, privbayes
    return {
        "laplace (ireduct R=1)": lambda x, e, s: ireduct(x, e, rounds=1, rng=s).estimate,
        "ireduct (R=2)": lambda x, e, s: ireduct(x, e, rng=s).estimate,
        "ireduct (R=3)": lambda x, e, s: ireduct(x, e, rounds=3, rng=s).estimate,
        "dual_query (s=50)": lambda x, e, s: dual_query(x, e, rng=s).estimate,
        "dual_query (s=5)": lambda x, e, s: dual_query(x, e, samples=5, rng=s).estimate,
        "privbayes": lambda x, e, s: privbayes(x, e, rng=s).estimate,
        "uniform table": lambda x, e, s: np.full(x.shape, x.sum() / x.size),  # n public: a reference only
    }


def run(seeds: int) -> list[dict]:
    rows = []
    for dom, n, eps in itertools.product(DOMAINS, (1_000, 10_000, 100_000), (0.1, 1.0)):
        data = [latent_class_data(n, seed, DOMAINS[dom]) for seed in range(seeds)]
        base = None
        for name, f in methods().items():
            t0 = time.perf_counter()
            errs = [errors(f(x, eps, seed), x) for seed, x in enumerate(data)]
            sec = (time.perf_counter() - t0) / seeds
            rel, l1, mx = (float(np.mean(col)) for col in zip(*errs, strict=True))
            base = rel if base is None else base
            rows.append({"data": dom, "n": n, "eps": eps, "method": name, "rel": rel, "l1": l1, "max": mx,
                         "ratio": rel / base, "s": sec})
    return rows


def table(rows: list[dict]) -> str:
    head = (f"{'data':<6} {'n':>7} {'ε':>4}  {'method':<22} {'rel':>8} {'L1/n':>7} {'max/n':>7} {'ratio':>6} "
            f"{'s':>6}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['data']:<6} {r['n']:>7} {r['eps']:>4g}  {r['method']:<22} {r['rel']:>8.4f} "
                     f"{r['l1']:>7.4f} {r['max']:>7.4f} {r['ratio']:>6.2f} {r['s']:>6.2f}")
    return "\n".join(lines)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "bench_adaptive_marginals.txt"))
    a = p.parse_args(argv)
    text = table(run(a.seeds))
    print(text)
    note = f"(--seeds {a.seeds}; the uniform table uses the true n: a reference, not private)"
    Path(a.out).write_text(f"{text}\n{note}\n")


if __name__ == "__main__":
    main()
