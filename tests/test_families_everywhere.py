"""Issue 31: every workload family through every public entry point — optimize, evaluate, svd_bound, release,
answers_table (with exact intervals) — either works or refuses naming what works (every one works now).
Families: dense prefix, the stream prefix / all ranges (small, and 2¹⁶ cells through mmopt.workload.prefix), a
Kronecker product (2-D ranges), and a marginal workload from the residual layer (what a records release carries)."""

import warnings

import numpy as np
import pytest

import mmopt
from mmopt import toeplitz, workload
from mmopt.answers import answers_table
from mmopt.structured import residual

pytest.importorskip("opendp")
pytest.importorskip("pandas")
GAUSS = mmopt.Privacy(1.0, 1e-6)

FAMILIES = {
    "dense prefix(64)": lambda: workload.prefix(64),
    "stream all_range(64)": lambda: toeplitz.all_range(64),
    "stream prefix(2^16)": lambda: workload.prefix(2**16),
    "kron ranges 32²": lambda: workload.ranges_2d(32),
    "marginals (residual)": lambda: residual.marginal_workload((4, 3, 5), [(0, 1), (1, 2)]),
}


def _cells(W) -> int:
    return W.domain_size if hasattr(W, "domain_size") else W.n


@pytest.mark.parametrize("name", FAMILIES)
def test_every_entry_point_takes_the_family(name):
    W = FAMILIES[name]()
    res = mmopt.optimize(W, privacy=GAUSS, seed=0, verbose=False, budget="fast")
    report = mmopt.evaluate(W, res.strategy, GAUSS)
    bound = mmopt.svd_bound(W, GAUSS)
    assert report.total_squared_error >= bound * (1 - 1e-9)
    assert report.total_squared_error == pytest.approx(res.objective * GAUSS.variance_factor, rel=1e-9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = mmopt.release(W, res.strategy, np.ones(_cells(W)), GAUSS)
    assert np.all(np.isfinite(out.estimate))
    if _cells(W) > 4096:  # prefix sums past 4,096 cells list every prefix (mmopt.answers._stream_errors)
        assert isinstance(W, toeplitz.StreamWorkload) and W.kind == "prefix", "a family with no table past 4,096"
    t = answers_table(out, W, res.strategy, alpha=0.05)
    assert len(t) == W.n_queries and np.all(t.lower <= t.answer) and np.all(t.answer <= t.upper)
