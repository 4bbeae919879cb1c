"""mmopt.answers tables: standard errors equal the dense per-query variances at the noise drawn, the answers are
the output's, streamed files equal the in-memory table, and a Monte-Carlo run has the variances claimed."""

import dataclasses
import math

import numpy as np
import pytest

import mmopt
from mmopt import answers as ans
from mmopt import strategy as st
from mmopt import workload as wl
from mmopt.structured import mechanism as smech
from mmopt.structured import workloads as sw

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")

EPS = mmopt.Privacy(0.8)
GAUSS = mmopt.Privacy(1.0, 1e-6)


def _dense_se(W, A, noise_scale: float, noise: str) -> np.ndarray:
    """√(s²·diag(W (AᵀA)⁺ Wᵀ)) with numpy's pseudo-inverse of the explicit pair: the reference, independent of
    mmopt's per-query code (s² = 2b² for Laplace, σ² for Gaussian)."""
    Wd = W.dense() if hasattr(W, "dense") else W.explicit_matrix()
    Ad = A.dense() if hasattr(A, "dense") else A.matrix
    M = np.linalg.pinv(Ad.T @ Ad, rcond=1e-12, hermitian=True)
    s2 = 2 * noise_scale**2 if noise == "laplace" else noise_scale**2
    return np.sqrt(s2 * np.einsum("ij,jk,ik->i", Wd, M, Wd))


# Implicit pairs at small sizes are built with mmopt.structured directly (mmopt.workload.kron turns implicit only
# past 4,096 cells), so that the dense reference stays cheap.
PAIRS = {  # (workload, strategy, privacy): product, marginals algebra, dense, union on few cells
    "kron_implicit": (sw.kron(wl.all_range(7), wl.identity_total(6)), st.kron(st.hierarchical(7), st.identity(6)),
                      EPS),
    "kron_dense_w": (wl.kron(wl.all_range(6), wl.prefix(5)), st.kron(st.hierarchical(6), st.identity(5)), GAUSS),
    "stack_weighted": (sw.union([sw.kron(wl.prefix(8), wl.total(6)), sw.kron(wl.total(8), wl.identity(6))],
                                weights=[1.0, 3.0]), st.kron(st.hierarchical(8), st.identity(6), weight=2.0), EPS),
    "marginals_theta": (wl.marginals((4, 5, 6), 2), st.marginals((4, 5, 6), np.arange(1.0, 9.0)), EPS),
    "marginals_implicit": (sw.marginals((3, 4, 5), 2), st.marginals((3, 4, 5), np.arange(1.0, 9.0)), GAUSS),
    "dense_1d": (wl.all_range(16), st.hierarchical(16), GAUSS),
    "union_small": (wl.stack([wl.kron(wl.prefix(6), wl.total(5)), wl.kron(wl.total(6), wl.identity(5))]),
                    st.stack([st.kron(st.identity(6), st.identity(5)), st.kron(st.hierarchical(6), st.identity(5))]),
                    EPS),
}


def _implicit_pair(W, A):
    """The pair as mmopt.structured sees it, for the reference (dense twin or implicit)."""
    twin = wl.structure_of(W)
    return (twin if twin is not None else W), A


@pytest.mark.parametrize("name", list(PAIRS))
def test_standard_errors_are_the_dense_per_query_variances_at_the_noise_drawn(name):
    """Relative tolerance 1e-8: both sides are exact formulas; they differ by the rounding of two pseudo-inverses,
    about κ(AᵀA)·eps with κ ≤ 10⁴ for these strategies (H₂ on 80 cells: κ(AᵀA) ≈ 10³)."""
    W, A, P = PAIRS[name]
    x = np.random.default_rng(1).integers(0, 20, W.domain_size).astype(float)
    out = mmopt.matrix_mechanism(W, A, x if not hasattr(W, "terms") else x.reshape(W.shape), P, rng=2)
    t = ans.answers_table(out, W, A, P)
    Wr, Ar = _implicit_pair(W, A)
    ref = _dense_se(Wr, Ar, out.noise_scale, out.noise)
    np.testing.assert_allclose(t["standard_error"].to_numpy(), ref, rtol=1e-8)
    np.testing.assert_array_equal(t["answer"].to_numpy(), np.ravel(out.answers))
    assert t["query"].tolist() == list(range(W.n_queries))
    # the total is evaluate's at the noise drawn: Σ SE² = total · (variance drawn / c·Δ²)
    report = mmopt.evaluate(W, A, P)
    s2 = 2 * out.noise_scale**2 if out.noise == "laplace" else out.noise_scale**2
    expected = report.total_squared_error * s2 / (P.variance_factor * report.sensitivity**2)
    assert float(np.sum(t["standard_error"] ** 2)) == pytest.approx(expected, rel=1e-8)
    assert t.attrs["strategy"] == A.name and t.attrs["noise"] == out.noise


def test_answers_are_formed_block_by_block_when_the_output_has_none():
    W = sw.kron(wl.all_range(9), wl.identity_total(6), wl.prefix(4))
    A = st.kron(st.hierarchical(9), st.identity(6), st.identity(4))
    out = mmopt.matrix_mechanism(W, A, np.random.default_rng(0).random(W.shape) * 9, EPS, rng=0)
    bare = dataclasses.replace(out, answers=None)  # as a release past its answer limit returns it
    for rows in (1, 5, 29, 1000, 10**6):
        t = ans.answers_table(bare, W, A, chunk_rows=rows)
        np.testing.assert_allclose(t["answer"].to_numpy(), out.answers, rtol=1e-12, atol=1e-9)
    assert np.array_equal(t["standard_error"].to_numpy(), ans.answers_table(out, W, A)["standard_error"].to_numpy())


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_streamed_files_equal_the_in_memory_table(tmp_path, fmt):
    W = wl.sf1()
    A = st.kron(*[st.identity(n) for n in W.shape])
    x = np.random.default_rng(3).integers(0, 5, W.shape).astype(float)
    out = mmopt.matrix_mechanism(W, A, x, EPS, rng=0)
    frame = ans.answers_table(out, W, A)
    assert list(frame.columns) == ["query", "term", "table", "sex", "hispanic", "race", "age", "answer",
                                   "standard_error"]
    path = tmp_path / f"sf1.{fmt}"
    written = ans.write_answers(path, out, W, A, chunk_rows=100)
    assert written.rows == W.n_queries and written.bytes == path.stat().st_size and written.format == fmt
    # float_precision="round_trip": pandas < 3 parses with a faster, not correctly rounded, strtod by default
    exact = {"float_precision": "round_trip"} if int(pd.__version__.split(".")[0]) < 3 else {}  # 3: the default
    back = pd.read_csv(path, keep_default_na=False, **exact) if fmt == "csv" else pd.read_parquet(path)
    assert back.shape == frame.shape and list(back.columns) == list(frame.columns)
    for col in frame.columns:
        if frame[col].dtype.kind == "f":  # CSV keeps every float exactly (shortest round-trip form)
            np.testing.assert_array_equal(back[col].to_numpy(), frame[col].to_numpy())
        else:
            assert back[col].astype(str).tolist() == frame[col].astype(str).tolist(), col
    chunks = list(ans.iter_tables(out, W, A, chunk_rows=500))
    assert max(len(c) for c in chunks) <= 500
    pd.testing.assert_frame_equal(pd.concat(chunks, ignore_index=True), frame)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left behind


def test_without_a_strategy_there_is_no_standard_error_and_weights_are_a_column():
    W = wl.stack([wl.prefix(6), wl.all_range(6)], weights=[2.0, 1.0])
    out = mmopt.matrix_mechanism(W, st.hierarchical(6), np.arange(6.0), EPS, rng=0)
    t = ans.answers_table(out, W)
    assert "standard_error" not in t.columns and t["a0"].iloc[0] == "2×0" and t["answer"].size == 27
    W2 = wl.kron(wl.prefix(70), wl.total(60), name="pt")
    out2 = mmopt.matrix_mechanism(wl.stack([W2, W2], weights=[1.0, 2.0]), st.kron(st.identity(70), st.identity(60)),
                                  np.ones((70, 60)), EPS, rng=0)
    t2 = ans.answers_table(out2, wl.stack([W2, W2], weights=[1.0, 2.0]), st.kron(st.identity(70), st.identity(60)))
    assert t2["weight"].tolist() == [1.0] * 70 + [2.0] * 70
    np.testing.assert_allclose(t2["standard_error"].to_numpy()[70:], 2 * t2["standard_error"].to_numpy()[:70])


def test_bad_tables_are_refused_with_the_parameter_named(tmp_path, monkeypatch):
    W, A = wl.prefix(8), st.hierarchical(8)
    out = mmopt.matrix_mechanism(W, A, np.ones(8), EPS, rng=0)
    with pytest.raises(ValueError, match="holds 8 answers; workload 'prefix\\(9\\)' has 9"):
        ans.answers_table(dataclasses.replace(out, estimate=np.ones(9)), wl.prefix(9), st.hierarchical(9))
    with pytest.raises(ValueError, match="several draws"):
        ans.answers_table(mmopt.matrix_mechanism(W, A, np.ones(8), EPS, rng=0, size=2), W, A)
    with pytest.raises(ValueError, match="'privacy' parameter of answers_table"):
        ans.answers_table(out, W, A, GAUSS)
    with pytest.raises(TypeError, match="'output' parameter of answers_table"):
        ans.answers_table(np.ones(8), W, A)
    with pytest.raises(ValueError, match="must end in .csv or .parquet"):
        ans.write_answers(tmp_path / "a.txt", out, W, A)
    with pytest.raises(ValueError, match="no estimate"):
        ans.answers_table(dataclasses.replace(out, estimate=None), W, A)
    big = wl.kron(wl.all_range(70), wl.all_range(60))  # 4.4 million rows: fine to stream, refused in memory
    Ab = st.kron(st.identity(70), st.identity(60))
    outb = smech.matrix_mechanism(big, Ab, np.ones((70, 60)), EPS, rng=0, max_answers=0)  # answers: None
    monkeypatch.setattr("mmopt.answers.table.MAX_TABLE_ROWS", 10**6)
    with pytest.raises(ValueError, match="write_answers"):
        ans.answers_table(outb, big, Ab)
    union = st.stack([st.kron(st.identity(70), st.identity(60)), st.kron(st.hierarchical(70), st.identity(60))])
    with pytest.raises(ValueError, match="exact for product strategies"):
        ans.answers_table(outb, big, union)


@pytest.mark.parametrize("case", ["dense_laplace", "implicit_gaussian"])
def test_monte_carlo_variance_of_the_answers_is_the_standard_error_squared(case):
    """Over R seeded draws, each query's sample variance estimates SE² with relative standard deviation
    √((2 + κ)/R), κ ≤ 3 the excess kurtosis of a sum of Laplace noises (0 for Gaussian): 5 of those for each
    query, and for their mean over queries."""
    if case == "dense_laplace":
        W, A, P, R = wl.prefix(8), st.hierarchical(8), EPS, 20000
        x = np.array([3.0, 0, 2, 5, 1, 1, 0, 4])
    else:
        W, A, P, R = sw.kron(wl.all_range(7), wl.identity_total(5)), st.kron(st.hierarchical(7), st.identity(5)), \
            GAUSS, 4000
        x = np.random.default_rng(0).integers(0, 9, (7, 5)).astype(float)
    sim = mmopt.matrix_mechanism(W, A, x, P, rng=5, size=R)
    one = mmopt.matrix_mechanism(W, A, x, P, rng=6)
    se = ans.answers_table(one, W, A, P)["standard_error"].to_numpy()
    ratio = np.var(sim.answers, axis=0, ddof=1) / se**2
    tol = 5 * math.sqrt((2 + 3) / R)
    assert np.all(np.abs(ratio - 1) < tol), (ratio.min(), ratio.max(), tol)
    assert abs(ratio.mean() - 1) < tol
    truth = smech.answer(W, x) if hasattr(W, "terms") else W.explicit_matrix() @ x
    assert np.all(np.abs(sim.answers.mean(axis=0) - truth) < 5 * se / math.sqrt(R))


@pytest.mark.slow
def test_all_68_million_2d_ranges_stream_to_parquet_in_blocks(tmp_path):
    """ranges_2d(128) under H₂ ⊗ H₂: every row written (about 36 s, 1.5 GB), a block at a time; spot checks of
    rows in the first, a middle and the last row group against W x̂ and the per-factor standard errors."""
    pq = pytest.importorskip("pyarrow.parquet")
    W, H = wl.ranges_2d(128), st.hierarchical(128)
    A = st.kron(H, H)
    x = np.random.default_rng(0).integers(0, 9, (128, 128)).astype(float)
    out = mmopt.matrix_mechanism(W, A, x, EPS, rng=0)  # past 10⁷ queries: answers None, x̂ only
    assert out.answers is None
    written = ans.write_answers(tmp_path / "r.parquet", out, W, A)
    f = pq.ParquetFile(tmp_path / "r.parquet")
    assert written.rows == f.metadata.num_rows == 68_161_536
    R = wl.all_range(128).explicit_matrix()
    q = np.einsum("ij,jk,ik->i", R, np.linalg.pinv(H.matrix.T @ H.matrix), R)
    xhat = np.asarray(out.estimate).reshape(128, 128)
    for g in (0, f.metadata.num_row_groups // 2, f.metadata.num_row_groups - 1):
        t = f.read_row_group(g).to_pandas().iloc[::997]
        r1, r2 = np.unravel_index(t["query"].to_numpy(), (8256, 8256))
        np.testing.assert_allclose(t["answer"], np.einsum("ij,ij->i", R[r1] @ xhat, R[r2]), rtol=1e-9, atol=1e-6)
        np.testing.assert_allclose(t["standard_error"], math.sqrt(2) * out.noise_scale * np.sqrt(q[r1] * q[r2]),
                                   rtol=1e-12)


def test_an_output_of_another_strategy_or_workload_is_refused():
    """answers_table took identity(8) for an H₂ output (standard errors 5.66 where the truth is 4.42) and an output
    of prefix(8) as identity(8)'s (row 'a0 = 7' showed the prefix sum 28); answer took identity(8) too."""
    W, H = wl.prefix(8), st.hierarchical(8)
    out = mmopt.matrix_mechanism(W, H, np.arange(8.0), mmopt.Privacy(1.0), rng=0)
    for other in (st.identity(8), st.wavelet(8)):
        with pytest.raises(ValueError, match="Pass the strategy the output was released with"):
            ans.answers_table(out, W, other, alpha=0.05)
    with pytest.raises(ValueError, match="'strategy' parameter of answer has 8 rows, but the output holds 15"):
        ans.answer([(0, 3)], out, st.identity(8))
    with pytest.raises(ValueError, match="answers that are not W x̂ for workload 'identity\\(8\\)'"):
        ans.answers_table(out, wl.identity(8), H)
    assert len(ans.answers_table(out, W, H, alpha=0.05)) == 8
    scaled = mmopt.matrix_mechanism(W, mmopt.Strategy(2.0 * st.identity(8).matrix), np.arange(8.0),
                                    mmopt.Privacy(1.0), rng=0)  # as many rows as identity(8): Δ tells them apart
    with pytest.raises(ValueError, match="sensitivity 1, but the output was released at Δ = 2"):
        ans.answers_table(scaled, W, st.identity(8))


def test_a_non_finite_estimate_is_refused_not_spread_over_other_rows(tmp_path):
    """A NaN in cell 2 made both answers NaN (0·NaN in the block product), though "≤ 0, *" reads cells 0 and 1 only;
    answer() refused it already, the tables now do too."""
    W, A = wl.kron(wl.prefix(2), wl.total(2)), st.kron(st.identity(2), st.identity(2))
    out = mmopt.matrix_mechanism(W, A, np.ones(4), mmopt.Privacy(0.8), rng=0)
    bad = dataclasses.replace(out, estimate=np.array([1.0, 2.0, np.nan, 4.0]), answers=None)
    for call in (lambda: ans.answers_table(bad, W, A), lambda: list(ans.iter_tables(bad, W, A)),
                 lambda: ans.write_answers(tmp_path / "t.csv", bad, W, A)):
        with pytest.raises(ValueError, match="must hold a finite estimate. Got 1 NaN"):
            call()
    with pytest.raises(TypeError, match="'privacy' parameter of answers_table must be a Privacy or None. Got str"):
        ans.answers_table(out, W, A, privacy="eps")
    with pytest.raises(FileNotFoundError, match="no_such_folder.*does not exist"):
        ans.write_answers(tmp_path / "no_such_folder" / "t.csv", out, W, A)
    # an existing file was replaced without a word, '~' read as a folder, a folder named by its temporary file's
    # IsADirectoryError (a helper's audit)
    (tmp_path / "keep.csv").write_text("precious\n")
    with pytest.raises(FileExistsError, match="'path' parameter of write_answers names a file that exists"):
        ans.write_answers(tmp_path / "keep.csv", out, W, A)
    assert (tmp_path / "keep.csv").read_text() == "precious\n"
    assert ans.write_answers(tmp_path / "keep.csv", out, W, A, overwrite=True).rows > 0
    (tmp_path / "dir.csv").mkdir()
    with pytest.raises(ValueError, match="names a folder"):
        ans.write_answers(tmp_path / "dir.csv", out, W, A)


def test_a_strategy_on_another_domain_or_none_is_refused_by_the_callers_name():
    """The refusal named evaluate (deep inside), or Strategy's 'matrix' for None, not the function called."""
    W = wl.prefix(8)
    out = mmopt.matrix_mechanism(W, st.hierarchical(8), np.arange(8.0), mmopt.Privacy(0.8), rng=1)
    with pytest.raises(ValueError, match=r"answers_table: workload 'prefix\(8\)' has domain size n=8 but the "
                                         r"'strategy' parameter has n=16"):
        ans.answers_table(out, W, st.identity(16))
    with pytest.raises(ValueError, match=r"per_query_variances: workload 'prefix\(8\)' has domain size n=8 but "
                                         r"the 'strategy' parameter has n=4"):
        next(ans.per_query_variances(W, np.eye(4)))
    with pytest.raises(TypeError, match="'strategy' parameter of error_by_term must be a strategy"):
        ans.error_by_term(sw.kron(wl.prefix(3), wl.total(2)), None, mmopt.Privacy(1.0))


def test_an_implicit_simulation_checks_the_strategy_and_a_transposed_estimate_is_refused():
    """A simulation of a product pair keeps no y, so the row check never ran: identity·7 (the same Δ₁ = 7 as
    identity ⊗ H₂) gave standard errors 2.2× too small; and answer reshaped an x̂ laid out (2, 3) for a (3, 2)
    domain, reading 3 for the query (0, *) where the user's array holds 11 (a helper's probe)."""
    W = wl.kron(wl.identity(80), wl.prefix(60))
    A = st.kron(st.identity(80), st.hierarchical(60))
    out = mmopt.matrix_mechanism(W, A, np.ones((80, 60)), mmopt.Privacy(1.0), rng=0)
    assert out.measurements is None and out.n_measurements == A.n_rows == 9520
    H = st.hierarchical(60).matrix
    r = np.zeros(60)
    r[:10] = 1.0
    want = math.sqrt(2 * 7.0**2 * r @ np.linalg.pinv(H.T @ H) @ r)  # Laplace, b = Δ₁/ε = 7
    assert ans.answer([(0, (0, 9))], out, A).standard_error[0] == pytest.approx(want, rel=1e-9)
    with pytest.raises(ValueError, match="has 4,800 rows, but the output holds 9,520 measurements"):
        ans.answer([(0, (0, 9))], out, st.kron(st.identity(80), st.identity(60), weight=7.0))
    small = st.kron(st.identity(3), st.identity(2))
    x = np.array([[1.0, 2.0, 3.0], [10.0, 20.0, 30.0]])
    with pytest.raises(ValueError, match=r"has shape \(2, 3\); the strategy's domain is \(3, 2\)"):
        ans.answer([(0, None)], x, small, mmopt.Privacy(1.0))
    assert ans.answer([(0, None)], x.T, small, mmopt.Privacy(1.0)).answers[0] == 11.0
    assert ans.answer([(0, None)], x.T.ravel(), small, mmopt.Privacy(1.0)).answers[0] == 11.0


def test_another_workloads_output_is_refused_at_any_scale():
    """The check compared answers to W x̂ with an absolute floor of 10⁻⁸: on data held as fractions (x ~ 10⁻¹⁰ here)
    every answer was within it, and prefix(8)'s output was labelled as identity(8)'s."""
    W, H = wl.prefix(8), st.hierarchical(8)
    out = mmopt.matrix_mechanism(W, H, np.arange(1.0, 9.0) * 1e-10, mmopt.Privacy(1e14), rng=0)
    with pytest.raises(ValueError, match="answers that are not W x̂ for workload 'identity\\(8\\)'"):
        ans.answers_table(out, wl.identity(8), H)
    assert len(ans.answers_table(out, W, H, alpha=0.05)) == 8


@pytest.mark.parametrize("method", ["nnls", "projection"])
def test_a_constrained_answer_s_standard_error_column_is_named_for_least_squares(method, tmp_path):
    """Beside an nnls or projection answer the column held least squares' standard error under the name
    ``standard_error`` (the answer's own RMSE measured at 0.20–1.29× it): it is now named for what it is, in the
    frame, the streamed file and mmopt.answers.answer's frame; least-squares tables keep ``standard_error``."""
    pytest.importorskip("pyarrow")
    W, A = wl.prefix(8), st.hierarchical(8)
    out = mmopt.matrix_mechanism(W, A, np.arange(8.0), mmopt.Privacy(1.0), rng=0, reconstruct=method)
    ls = mmopt.matrix_mechanism(W, A, np.arange(8.0), mmopt.Privacy(1.0), rng=0)
    table, plain = ans.answers_table(out, W, A), ans.answers_table(ls, W, A)
    assert "standard_error" not in table.columns and "standard_error" in plain.columns
    np.testing.assert_array_equal(table["least_squares_standard_error"], plain["standard_error"])
    assert method in table.attrs["standard_error"]
    ans.write_answers(tmp_path / "a.csv", out, W, A)
    assert "least_squares_standard_error" in (tmp_path / "a.csv").read_text().splitlines()[0]
    frame = ans.answer([(2, 5)], out, A).to_frame()
    assert list(frame.columns) == ["a0", "answer", "least_squares_standard_error"]
    assert "standard_error" in ans.answer([(2, 5)], ls, A).to_frame().columns


def test_a_stack_of_products_with_a_negative_weight_is_tabled_with_its_signs():
    """stack([kron(…), kron(…)], weights=[-1, 2]) keeps a product twin with |w| (only w² enters G), and the table
    read its rows from the twin: the release was refused as another workload's (its answers −W₁x̂ against the
    twin's +W₁x̂; a helper's probe). The table now carries the signed weights: answers W x̂, weight column −1, 2."""
    W = wl.stack([wl.kron(wl.prefix(4), wl.identity(4)), wl.kron(wl.identity(4), wl.prefix(4))], weights=[-1.0, 2.0])
    A = st.kron(st.hierarchical(4), st.identity(4))
    out = mmopt.matrix_mechanism(W, A, np.arange(16.0), mmopt.Privacy(1.0), rng=0)
    table = ans.answers_table(out, W, A)
    np.testing.assert_allclose(table["answer"], W.explicit_matrix() @ out.estimate, rtol=1e-12, atol=1e-9)
    assert sorted(set(table["weight"])) == [-1.0, 2.0] and list(table["weight"][:16]) == [-1.0] * 16
    assert [t.weight for t in wl.structure_of(W).terms] == [1.0, 2.0]  # the twin optimize reads: |w|
    # the standard errors do not depend on the sign: those of the positively weighted stack
    plus = wl.stack([wl.kron(wl.prefix(4), wl.identity(4)), wl.kron(wl.identity(4), wl.prefix(4))], weights=[1.0, 2.0])
    twin = mmopt.matrix_mechanism(plus, A, np.arange(16.0), mmopt.Privacy(1.0), rng=0)
    np.testing.assert_allclose(table["standard_error"], ans.answers_table(twin, plus, A)["standard_error"])
    # a stack of such a stack keeps the inner signs (its own weights are all positive)
    outer = wl.stack([wl.kron(wl.identity(4), wl.identity(4)), W], weights=[3.0, 1.0])
    nested = ans.answers_table(mmopt.matrix_mechanism(outer, A, np.arange(16.0), mmopt.Privacy(1.0), rng=0), outer, A)
    assert list(dict.fromkeys(nested["weight"])) == [3.0, -1.0, 2.0]


def test_a_privacy_other_than_the_outputs_is_refused_not_ignored():
    """Privacy(0.1) beside an ε = 1 output gave the ε = 1 standard errors without a word (answers_table and answer;
    a helper's probe): the errors come from the noise drawn, so another budget is refused; the output's own passes."""
    W, A = wl.prefix(8), st.hierarchical(8)
    out = mmopt.matrix_mechanism(W, A, np.arange(8.0), mmopt.Privacy(1.0), rng=0)
    for call in (lambda p: ans.answers_table(out, W, A, p), lambda p: ans.answer([(2, 5)], out, A, p)):
        with pytest.raises(ValueError, match=r"'privacy' parameter of (answers_table|answer) \(Privacy\(epsilon=0\.1"
                                             r".*is not the output's"):
            call(mmopt.Privacy(0.1))
        call(mmopt.Privacy(1.0))
        call(None)


def test_an_attribute_named_like_an_optional_column_keeps_its_labels_as_text():
    """Typed by name, an attribute called 'standard_error' took float64 when the table had no standard errors
    (its labels read as numbers), and one called 'weight' beside a '*' label made pyarrow fail (a helper's
    audit); every attribute column is text."""
    from mmopt.hierarchy import Hierarchy, grouping_sets
    P = mmopt.Privacy(1.0, 1e-6)
    W = mmopt.workload.marginals((2, 3), 2)
    out = mmopt.release(W, mmopt.strategy.identity(6), np.arange(1.0, 7.0), P)
    t = mmopt.answers_table(out, W, attributes=("standard_error", "b"))
    assert t["standard_error"].tolist() == ["0", "0", "0", "1", "1", "1"] and t["b"].tolist()[:3] == ["0", "1", "2"]
    geo = Hierarchy.from_parents([[0, 0, 1]], level_names=("nation", "state", "county"), name="geo")
    Wh = grouping_sets([geo, Hierarchy.flat(2, name="weight")], [("county", "weight"), ("state",)])
    Ah = mmopt.optimize(Wh, privacy=P).strategy
    t = mmopt.answers_table(mmopt.release(Wh, Ah, np.arange(1.0, 7.0), P), Wh, Ah)
    assert t["weight"].tolist() == ["0", "1"] * 3 + ["*", "*"] and t["standard_error"].dtype == np.float64


def test_another_workload_sharing_the_first_term_is_refused():
    """The answers were checked on the first term's rows only: marginals listed in another order after a shared
    total were labelled with the wrong groups ('a1 = 3' showed 100, the true 7), and sf1 with one table weighted 3×
    showed the weight beside unweighted answers (a helper's audit). Every term's first and last rows are checked."""
    W1 = wl.marginals((3, 4), attributes=[(), (0,), (1,)])
    W2 = wl.marginals((3, 4), attributes=[(), (1,), (0,)])
    x = np.zeros(12)
    x[[0, 5, 11]] = [100.0, 50.0, 7.0]
    out = mmopt.matrix_mechanism(W1, st.identity(12), x, mmopt.Privacy(1e6), rng=0)
    with pytest.raises(ValueError, match="answers that are not W x̂ .* in its term"):
        ans.answers_table(out, W2, st.identity(12))
    t = ans.answers_table(out, W1, st.identity(12))
    np.testing.assert_allclose(t["answer"], W1.matrix @ x, atol=1e-3)  # the right workload still passes
    # the rows checked: the first and last of every term, however long the term
    from mmopt.answers.layout import layout_of
    from mmopt.answers.values import probe_chunks
    lay = layout_of(sw.union([sw.kron(wl.identity(100), wl.identity(60)), sw.kron(wl.total(100), wl.identity(60)),
                              sw.kron(wl.identity(100), wl.total(60))]))
    rows = np.concatenate([np.arange(c.start, c.stop) for c in probe_chunks(lay, rows=120)])
    assert np.array_equal(rows, [*range(120), *range(6000, 6060), *range(6060, 6160)])  # each term's first 120


def test_a_strategy_of_the_same_size_and_sensitivity_is_refused():
    """Only A's row count and Δ were compared: l2_approx for all_range(32) passed for l2_approx for prefix(32) (both
    32×32, Δ₂ = 1), and its standard errors were 0.63–1.22× the truth (intervals covering 79.5% at 95%); the
    product route passed another product of as many rows (a helper's audit). Reordering or negating A's rows is the
    same strategy (the same AᵀA and Δ) and passes."""
    W = wl.prefix(32)
    A1 = mmopt.optimize(W, method="l2_approx").strategy
    A2 = mmopt.optimize(wl.all_range(32), method="l2_approx").strategy
    assert A1.matrix.shape == A2.matrix.shape and A1.sensitivity("l2") == pytest.approx(A2.sensitivity("l2"))
    x = np.arange(32.0)
    for out in (mmopt.release(W, A1, x, GAUSS), mmopt.matrix_mechanism(W, A1, x, GAUSS, rng=0)):
        with pytest.raises(ValueError, match="not the strategy the output was released with"):
            ans.answers_table(out, W, A2, alpha=0.05)
        with pytest.raises(ValueError, match="not the strategy the output was released with"):
            ans.answer([(0, 3)], out, A2)
        flipped = mmopt.Strategy(-A1.matrix[::-1])
        t = ans.answers_table(out, W, flipped)
        np.testing.assert_allclose(t["standard_error"], _dense_se(W, A1, out.noise_scale, out.noise), rtol=1e-9)
    # the implicit route: H₂ ⊗ I released, I ⊗ H₂ (as many rows, the same Δ) given
    from mmopt.structured import release as srelease
    from mmopt.structured import strategies as ss
    Wk = sw.kron(wl.prefix(8), wl.prefix(8))
    B1 = ss.kron_strategy(st.hierarchical(8).matrix, np.eye(8))
    B2 = ss.kron_strategy(np.eye(8), st.hierarchical(8).matrix)
    assert B1.n_rows == B2.n_rows and B1.sensitivity("l1") == B2.sensitivity("l1")
    for out in (smech.matrix_mechanism(Wk, B1, np.ones((8, 8)), EPS, rng=0),
                srelease.release(Wk, B1, np.ones((8, 8)), EPS)):
        t = ans.answers_table(out, Wk, B1)
        np.testing.assert_allclose(t["standard_error"], _dense_se(Wk, B1, out.noise_scale, out.noise), rtol=1e-9)
        with pytest.raises(ValueError, match="not the strategy the output was released with"):
            ans.answers_table(out, Wk, B2)


def test_the_fingerprint_checks_matrix_like_strategies_at_any_scale_and_one_draw():
    """A strategy given as a list, tuple or sparse matrix skipped the Δ and fingerprint checks (standard errors
    [5.0, 19.4, 27.8] where the release's are [5.51, 4.45, 5.08]); ‖A u‖² underflowed to 0 near 10⁻¹⁶² (a column
    shuffle passed) and overflowed to inf near 10¹⁵³ (the strategy itself was refused); a size=1 simulation's
    (1, m) answers were sliced by draw (a helper's audit). The answers are checked on the first 4,096 rows of every
    term: rows reordered among the first of a long term are found."""
    import scipy.sparse
    W = wl.prefix(16)
    H = st.hierarchical(16).matrix
    B = np.vstack([np.eye(16), np.zeros((15, 16))])
    B[16, 0] = 1.0
    out = mmopt.release(W, H, np.arange(16.0), mmopt.Privacy(1.0))
    for given in (B.tolist(), tuple(map(tuple, B)), scipy.sparse.csr_matrix(B)):  # its Δ₁ is 2, H's 5
        with pytest.raises(ValueError, match="Pass the strategy the output was released with"):
            ans.answers_table(out, W, given)
        with pytest.raises(ValueError, match="Pass the strategy the output was released with"):
            ans.answer([(0, 15)], out, given)
    assert len(ans.answers_table(out, W, H.tolist())) == 16
    perm = np.random.default_rng(0).permutation(16)
    for scale in (1e-170, 1e160):
        A = mmopt.Strategy(H * scale)
        out = mmopt.release(W, A, np.arange(16.0), mmopt.Privacy(1.0))
        assert np.all(np.isfinite(out.strategy_probe))
        assert len(ans.answers_table(out, W, A)) == 16  # itself passes
        with pytest.raises(ValueError, match="not the strategy the output was released with"):
            ans.answers_table(out, W, mmopt.Strategy(H[:, perm] * scale))
    Wm = wl.marginals((4, 4, 4), 2)
    A = st.kron(st.identity(4), st.identity(4), st.identity(4))
    one = mmopt.matrix_mechanism(Wm, A, np.ones(64), GAUSS, rng=1, size=1)
    assert len(ans.answers_table(one, Wm, A)) == 48
    Wr = wl.all_range(128)
    out = mmopt.release(Wr, st.hierarchical(128), np.arange(128.0), mmopt.Privacy(1.0))
    M = Wr.explicit_matrix().copy()
    M[1000:7000] = M[1000:7000][::-1]  # rows of one long term reordered, from its 1,000th
    with pytest.raises(ValueError, match="answers that are not W x̂"):
        ans.answers_table(out, mmopt.Workload.from_matrix(M, name="moved"), st.hierarchical(128))
