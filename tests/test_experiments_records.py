"""experiments.records on tiny records: predicted error against a dense oracle and Monte Carlo, and its outputs."""

import itertools
import math
from dataclasses import replace

import numpy as np
import pytest

import mmopt
from experiments import _records_sim as sim
from experiments import records

pytest.importorskip("opendp")
pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")

CFG = records.Config(epsilons=(1.0,), draws=400, pgm_draws=0)


@pytest.fixture(scope="module")
def tiny():
    from mmopt.records import Domain

    D = Domain.from_json({"attributes": [{"name": "a", "categories": ["x", "y"]},
                                         {"name": "b", "edges": [0, 1, 2, 3]},
                                         {"name": "c", "categories": ["p", "q", "r"]}]})
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"a": rng.choice(["x", "y"], 500), "b": rng.uniform(0, 3, 500),
                       "c": rng.choice(["p", "q", "r"], 500, p=[0.7, 0.2, 0.1])})
    return df, D


@pytest.fixture(scope="module")
def rows(tiny):
    return records.run(*tiny, CFG)


def _dense_marginals(shape, theta):
    """HDMM's M(θ) as a dense matrix: θ_S ⊗ᵢ (I if i ∈ S else 1ᵀ) stacked over the bitmasks S."""
    blocks = []
    for m, t in enumerate(theta):
        if t > 0:
            M = np.ones((1, 1))
            for i, n in enumerate(shape):
                M = np.kron(M, np.eye(n) if m >> i & 1 else np.ones((1, n)))
            blocks.append(t * M)
    return np.vstack(blocks)


@pytest.mark.parametrize("theta_of", ["identity", "random"])
def test_gram_equivalent_predicts_the_dense_least_squares_error(theta_of):
    shape, sets = (2, 3, 3), sim.all_k_way(3, 2)
    theta = np.zeros(8)
    if theta_of == "identity":
        theta[-1] = 1.0
    else:
        theta[:] = np.random.default_rng(0).uniform(0.1, 1.0, 8)
    A = _dense_marginals(shape, theta)
    W = np.vstack([_dense_marginals(shape, np.eye(8)[sum(1 << i for i in S)]) for S in sets])
    sigma = 1.7
    dense = sigma**2 * np.trace(W @ np.linalg.pinv(A.T @ A) @ W.T)  # σ² tr(W X⁺ Wᵀ), the oracle
    R = sim.gram_equivalent(shape, theta, sets, theta_of)
    assert sim.predicted_total(R, sets, sigma) == pytest.approx(dense, rel=1e-10)
    # and the Gram itself: c_T·⊗(Bᵢ if i ∈ T else 1ᵀ) stacked has the same marginal error covariances as M(θ)
    from mmopt.structured.residual import residual_basis

    blocks = []
    for T, c in zip(R.subsets, R.weights, strict=True):
        K = np.ones((1, 1))
        for i, n in enumerate(shape):
            K = np.kron(K, residual_basis(n) if i in T else np.ones((1, n)))
        blocks.append(c * K)
    Rd = np.vstack(blocks)
    for S in sets:
        M = _dense_marginals(shape, np.eye(8)[sum(1 << i for i in S)])
        assert np.allclose(M @ np.linalg.pinv(Rd.T @ Rd) @ M.T, M @ np.linalg.pinv(A.T @ A) @ M.T, atol=1e-9)


def test_rows_match_their_prediction_within_sampling_error(rows):
    by = {r["method"]: r for r in rows}
    assert {"residual via release_marginals", "residual (optimal)", "OPT_M", "identity"} <= set(by)
    for name in ("residual (optimal)", "OPT_M", "identity"):
        r = by[name]
        assert r["draws"] == 400 and abs(r["z"]) < 4.5, r  # 4.5 se: a false alarm about once in 150,000 runs
        assert r["measured_rmse"] == pytest.approx(math.sqrt(r["measured_total"] / 21), rel=1e-12)  # 6+6+9 cells
    # the residual plan is optimal: no strategy predicts less (OPT_M ties it when its search finds the optimum)
    assert by["residual (optimal)"]["predicted_total"] <= by["OPT_M"]["predicted_total"] * (1 + 1e-9)
    assert by["OPT_M"]["predicted_total"] < by["identity"]["predicted_total"]
    assert by["residual via release_marginals"]["predicted_total"] == by["residual (optimal)"]["predicted_total"]


def test_prediction_is_evaluate_at_opendp_s_noise(rows, tiny):
    """The residual row's prediction is mmopt's own evaluate, rescaled from the analytic σ to OpenDP's σ."""
    from mmopt.structured import residual as rp

    _, D = tiny
    r = next(r for r in rows if r["method"] == "residual (optimal)")
    P = mmopt.Privacy(1.0, CFG.delta)
    W = rp.marginal_workload(D.shape, list(itertools.combinations(range(3), 2)))
    A = rp.plan(W).strategy
    expected = rp.evaluate(W, A, P).total_squared_error * (r["noise_scale"] / P.noise_scale(A.sensitivity("l2")))**2
    assert r["predicted_total"] == pytest.approx(expected, rel=1e-9)


@pytest.mark.slow  # 12 s: two joblib workers start and import mmopt
def test_rows_are_the_same_with_two_workers(tiny, rows):
    cfg = replace(CFG, epsilons=(1.0, 0.5), draws=50)
    one = records.run(*tiny, cfg)
    two = records.run(*tiny, cfg, n_jobs=2)
    strip = lambda rs: [{k: v for k, v in r.items() if k != "seconds"} for r in rs]  # noqa: E731
    assert strip(one) == strip(two)


def test_refusals(tiny, tmp_path, capsys):
    with pytest.raises(ValueError, match="delta must be > 0"):
        records.run(*tiny, replace(CFG, delta=0.0))
    with pytest.raises(ValueError, match="'n_jobs' parameter of experiments.records.run"):
        records.run(*tiny, CFG, n_jobs=0)
    with pytest.raises(SystemExit) as e:
        records.main(["--out", str(tmp_path), "--jobs", "0"])
    assert e.value.code == 2 and "--jobs" in capsys.readouterr().err


def test_main_writes_its_outputs_on_the_cps_extract(tmp_path, monkeypatch):
    monkeypatch.setattr(records, "QUICK", records.Config(epsilons=(1.0,), draws=20, pgm_draws=0))
    assert records.main(["--out", str(tmp_path), "--quiet"]) == 0
    assert (tmp_path / "records.csv").read_text().startswith("epsilon,delta,method")
    assert (tmp_path / "records.png").stat().st_size > 1000
    assert "| 1 | residual (optimal) | 20 |" in (tmp_path / "records.md").read_text()
