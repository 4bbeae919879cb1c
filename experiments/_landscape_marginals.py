"""The landscape's fourth table: all 2-way marginals on small multi-attribute domains, exact ε-DP errors.

The workload is every 2-way marginal of a product domain (``mmopt.structured.marginals(shape, 2)``: for each
pair of attributes, the counts of every pair of values). Its rows, each scored by :func:`mmopt.evaluate` under
the experiment's privacy (Laplace noise, so Δ₁ counts) with an exactness check as the 2-D table has:

* Identity — the cells, Δ₁ = 1;
* Fourier (Barak et al., PODS 2007) — every character in the downward closure of the 2-way sets, equal weights
  (:func:`mmopt.strategy.fourier`), Δ₁ = the number of coefficients on binary attributes;
* datacube (Ding et al., SIGMOD 2011) — ``optimize(method="datacube")``: a greedy set cover of the cuboid
  lattice and the budget split that minimises the total variance (:mod:`mmopt.multidim.datacube`);
* OPT_M — ``optimize(method="marginals")``: HDMM's weighted-marginals search (50 restarts, seed 0);
* auto — ``optimize(method="auto")``: every product search that applies and, up to 256 cells, the dense
  p-Identity search (seed 0); its winner is named in the detail.

The reference "mmopt" is the best of these five at each domain.
"""

from __future__ import annotations

import math
import time

import mmopt
from mmopt import strategy as st
from mmopt.structured import marginals

TABLE = "marginals"
K = 2  # 2-way marginals: the 1-way ones are sums of them, so adding them changes little and is not done


def label(shape) -> str:
    """The domain as the table prints it: "2^8" for equal attribute sizes, else "4x4x8"."""
    shape = tuple(shape)
    return f"{shape[0]}^{len(shape)}" if len(set(shape)) == 1 else "x".join(map(str, shape))


def rows(shape, privacy) -> list[dict]:
    """The rows of one domain (table, n = :func:`label`, strategy, sensitivity, rmse, detail, seconds), the
    reference "mmopt" last.

    Parameters
    ----------
    shape : tuple of int
        Attribute sizes, each ≥ 2 (the Fourier basis needs it).
    privacy : mmopt.Privacy
        The ε-DP budget every row is scored under.
    """
    shape = tuple(shape)
    if len(shape) < K or any(not isinstance(s, int) or s < 2 for s in shape):
        raise ValueError(f"_landscape_marginals.rows: 'shape' must hold at least {K} attribute sizes, each an "
                         f"int >= 2. Got {shape!r}.")
    W = marginals(shape, K)
    name = label(shape)
    cells = math.prod(shape)

    def ev(strategy_name, A, detail, t0):
        r = mmopt.evaluate(W, A, privacy)
        # a dense report (auto's dense winner) is always exact; an implicit one says so itself
        if not getattr(r, "total_exact", True):
            raise RuntimeError(f"landscape: {strategy_name} on 2-way marginals of {name} is not exact")
        return {"table": TABLE, "n": name, "strategy": strategy_name, "sensitivity": float(r.sensitivity),
                "rmse": float(r.rmse), "detail": detail, "seconds": round(time.perf_counter() - t0, 2)}

    out = []
    t0 = time.perf_counter()
    out.append(ev("Identity", st.kron(*[st.identity(s) for s in shape]), f"{cells} cells", t0))
    t0 = time.perf_counter()
    F = st.fourier(shape, K)
    out.append(ev("Fourier", F, f"{F.n_rows} coefficients", t0))
    for row_name, method, opts in (("datacube", "datacube", {}), ("OPT_M", "marginals", {"seed": 0}),
                                   ("auto", "auto", {"seed": 0})):
        t0 = time.perf_counter()
        res = mmopt.optimize(W, method=method, privacy=privacy, verbose=False, **opts)
        detail = (f"{len(res.extra['cuboids'])} cuboids" if method == "datacube" else
                  f"{res.method}, {res.status}")
        out.append(ev(row_name, res.strategy, detail, t0))
    best = min(out, key=lambda r: r["rmse"])
    out.append({**best, "strategy": "mmopt", "detail": f"best of {len(out)}: {best['strategy']} ({best['detail']})",
                "seconds": round(sum(r["seconds"] for r in out), 2)})
    return out
