"""The coupled split strategy for 1+2-way prefix marginals (issue #28's last row), checked densely.

On shapes small enough for a dense check, this script fits the family twice — a dense prototype (L-BFGS on
tr(G X⁺) over the ≤ 2-way subspace, below) and the production fit (:mod:`mmopt.structured.residual.coupled_fit`,
which never forms anything of size N) — and scores both with :func:`mmopt.structured.evaluate` (its exact dense
path), so the figures are mmopt's own. The large rows ((32,)⁴, (16,)¹⁰) are in ``bench_auto.txt``.

**The family.** The split strategy (:mod:`mmopt.structured.residual.split`) measures c_S·⊗_{i∈S} Bᵢ ⊗_{i∉S} 1ᵀ
with Bᵢ1 = 0, so its Gram X is block diagonal over the residual subspaces Q_S: a 2-way measurement tells nothing
about a 1-way marginal. The coupled split keeps the terms (the total 1ᵀ on the attributes outside S) but drops
Bᵢ1 = 0:

    A = stack( √c₀·(1ᵀ)^{⊗d},  A₁(i) ⊗ 1ᵀ elsewhere  (each i),  A₂(i) ⊗ A₂(j) ⊗ 1ᵀ elsewhere  (each i < j) ),

with A₁, A₂ any n×n matrices. X = AᵀA then lives on 𝒱 = ⊕_{|S|≤2} Q_S (as G does) and couples its blocks.
Δ₂² = max_y [c₀ + Σᵢ (A₁ᵀA₁)_{yᵢyᵢ} + Σ_{i<j} (A₂ᵀA₂)_{yᵢyᵢ}(A₂ᵀA₂)_{yⱼyⱼ}] (exact by mmopt's scan here).
A₁, A₂, c₀ are fitted by L-BFGS on log tr(G X⁺) + log of a soft maximum (power mean of order p) of diag X,
started from the split plan, with tr(G X⁺) computed on 𝒱 (G has no mass outside it).

**Scaling** (the production version): in the basis (1/√n, U⊥) per attribute X is an arrowhead matrix whose pair
blocks Γ₂⊗Γ₂ touch only ∅, {i}, {j}, so the Schur complement on ∅ ∪ {i} (dimension 1 + d(n−1)) gives tr(G X⁻¹)
exactly (:mod:`mmopt.structured.residual.coupled`).

Run: ``python -m benchmarks.bench_coupled_split`` (about a minute, one thread).
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
from scipy import optimize  # noqa: E402

from benchmarks import _results  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "bench_coupled_split.txt"
CASES = [(8, 3), (6, 4)]
ORDERS = (50, 300, 2000)  # soft-maximum orders, increasing: an early large order stalls L-BFGS


def _kron(mats):
    out = np.ones((1, 1))
    for m in mats:
        out = np.kron(out, m)
    return out


def _subspace(n: int, d: int) -> np.ndarray:
    """Orthonormal columns spanning 𝒱 = ⊕_{|S|≤2} Q_S (per attribute the basis 1/√n, U⊥)."""
    e = np.ones(n) / math.sqrt(n)
    H = np.column_stack([e, np.linalg.svd(np.eye(n) - np.outer(e, e))[0][:, : n - 1]])
    cols = [_kron([H[:, [k]] for k in idx]).ravel() for idx in itertools.product(range(n), repeat=d)
            if sum(k > 0 for k in idx) <= 2]
    return np.array(cols).T


class _Family:
    """X(A₁, A₂, c₀) of the module docstring on N = nᵈ cells, its objective and gradient."""

    def __init__(self, n: int, d: int, G: np.ndarray):
        self.n, self.d = n, d
        self.J = np.ones((n, n))
        self.P = _subspace(n, d)
        self.Gr = self.P.T @ G @ self.P

    def terms(self, X1, X2):
        d = self.d
        return ([[X1 if m == i else self.J for m in range(d)] for i in range(d)]
                + [[X2 if m in (i, j) else self.J for m in range(d)] for i, j in itertools.combinations(range(d), 2)])

    def gram(self, z):
        n = self.n
        A1, A2, c0 = z[: n * n].reshape(n, n), z[n * n: 2 * n * n].reshape(n, n), math.exp(z[-1])
        X1, X2 = A1.T @ A1, A2.T @ A2
        return A1, A2, c0, X1, X2, c0 * _kron([self.J] * self.d) + sum(_kron(t) for t in self.terms(X1, X2))

    def _partial(self, Z, mats, i):
        """Σ over attributes m ≠ i of Z contracted with mats[m]: an n×n matrix on attribute i."""
        d = self.d
        a, b = "abcdefgh"[:d], "ijklmnop"[:d]
        ops = [mats[m] for m in range(d) if m != i]
        subs = ",".join(a[m] + b[m] for m in range(d) if m != i)
        return np.einsum(f"{a}{b},{subs}->{a[i]}{b[i]}", Z.reshape((self.n,) * (2 * d)), *ops)

    def value(self, z, order):
        A1, A2, c0, X1, X2, X = self.gram(z)
        Xi = np.linalg.inv(self.P.T @ X @ self.P)
        E = float(np.sum(self.Gr * Xi))
        col = np.diag(X)
        M = float(col.max())
        r = col / M
        s = float(np.sum(r**order))
        val = math.log(E) + math.log(M) + math.log(s / col.size) / order
        Z = -(self.P @ (Xi @ self.Gr @ Xi) @ self.P.T) / E + np.diag(r ** (order - 1) / (M * s))
        d = self.d
        g1 = sum(self._partial(Z, [self.J] * d, i) for i in range(d))
        g2 = np.zeros_like(X2)
        for i, j in itertools.permutations(range(d), 2):
            mats = [self.J] * d
            mats[j] = X2
            g2 += self._partial(Z, mats, i)
        g0 = c0 * float(np.sum(Z * _kron([self.J] * d)))
        return val, np.concatenate([(A1 @ (g1 + g1.T)).ravel(), (A2 @ (g2 + g2.T)).ravel(), [g0]])


def _start(plan, n: int) -> np.ndarray:
    """The split plan as a point of the family (A₁, A₂ padded with a small total row so that 1 is reachable)."""
    B = plan.bases[0]
    weight = {sum(f.matrix.shape[0] > 1 for f in t.factors): t.weight for t in plan.strategy.terms}
    A1, A2 = weight[1] * B, math.sqrt(weight[2]) * B
    pad = [np.full((1, n), 0.05 * float(np.abs(A).max()) / n) for A in (A1, A2)]
    return np.concatenate([np.vstack([A1, pad[0]]).ravel(), np.vstack([A2, pad[1]]).ravel(),
                           [math.log(weight.get(0, 1e-3) ** 2 + 1e-6)]])


def _strategy(z, n: int, d: int):
    from mmopt.structured import strategies as ss
    A1, A2, c0 = z[: n * n].reshape(n, n), z[n * n: 2 * n * n].reshape(n, n), math.exp(z[-1])
    T = np.ones((1, n))
    parts = [ss.kron_strategy(*[T] * d, weight=math.sqrt(c0))]
    parts += [ss.kron_strategy(*[A1 if m == i else T for m in range(d)]) for i in range(d)]
    parts += [ss.kron_strategy(*[A2 if m in (i, j) else T for m in range(d)])
              for i, j in itertools.combinations(range(d), 2)]
    return ss.union_strategy(parts, name="coupled_split")


def run_case(n: int, d: int) -> dict:
    from benchmarks.bench_auto import _prefix_marginals
    from mmopt.structured import analysis, dual_bound
    from mmopt.structured.residual import coupled_fit
    from mmopt.structured.residual import split as sp
    W = _prefix_marginals((n,) * d)
    plan = sp.split_plan(W)
    fam = _Family(n, d, W.gram)
    c0 = time.process_time()
    z = _start(plan, n)
    for order in ORDERS:
        z = optimize.minimize(fam.value, z, args=(order,), jac=True, method="L-BFGS-B",
                              options={"maxiter": 2000}).x
    cpu = time.process_time() - c0
    split = analysis.evaluate(W, plan.strategy, norm="l2")
    coupled = analysis.evaluate(W, _strategy(z, n, d), norm="l2")
    c1 = time.process_time()
    fitted, _, _ = coupled_fit.fit(W, plan)
    fit_cpu = time.process_time() - c1
    production = analysis.evaluate(W, fitted, norm="l2")
    bound = dual_bound.dual_bound(W).value
    return {"shape": f"({n},)^{d}", "N": n**d, "split": split.total_squared_error,
            "coupled": coupled.total_squared_error, "production": production.total_squared_error,
            "fit_cpu": fit_cpu, "exact": coupled.total_exact and split.total_exact and production.total_exact,
            "method": coupled.method, "bound": bound, "cpu": cpu}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _results.add_args(p)
    args = p.parse_args(argv)
    rows = [run_case(n, d) for n, d in CASES]
    head = (f"{'workload':<28}{'N':>6}{'split':>12}{'dense fit':>12}{'production':>12}{'dual bound':>12}"
            f"{'split/b':>9}{'dense/b':>9}{'prod/b':>9}  exact  path   CPU s (dense, production)")
    lines = [f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, OPENBLAS_NUM_THREADS=1, unit privacy (c = 1)",
             head, "-" * len(head)]
    for r in rows:
        b = r["bound"]
        lines.append(f"{'1+2-way prefix ' + r['shape']:<28}{r['N']:>6}{r['split']:>12.2f}{r['coupled']:>12.2f}"
                     f"{r['production']:>12.2f}{b:>12.2f}{r['split'] / b:>9.4f}{r['coupled'] / b:>9.4f}"
                     f"{r['production'] / b:>9.4f}  {r['exact']!s:<6} {r['method']:<6}{r['cpu']:>6.1f}, "
                     f"{r['fit_cpu']:.2f}")
    lines.append("split, dense fit, production: mmopt.structured.evaluate (dense exact path); bound: "
                 "mmopt.structured.dual_bound")
    text = "\n".join(lines)
    print(text)
    _results.write(RESULTS, text + "\n", no_write=args.no_write, full=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
