"""ADMM with the exact factor-wise (Q + ρI)⁻¹ (mmopt.reconstruct.admm) against an interior-point QP and FISTA."""

import cvxpy as cp
import numpy as np
import pytest

import mmopt
from mmopt import strategy as st
from mmopt import workload as wl
from mmopt.reconstruct import _common, admm, first_order
from mmopt.solvers import SolverError
from mmopt.structured import mechanism as smech
from mmopt.structured import strategies as ss
from mmopt.structured import workloads as sw


def _psd(rng, n: int, rank: int | None = None) -> np.ndarray:
    B = rng.standard_normal((rank or n, n))
    return B.T @ B


def _qp(Q: np.ndarray, c: np.ndarray, total, zeros) -> np.ndarray:
    """The same QP by Clarabel (an interior-point oracle independent of both first-order solvers)."""
    h = cp.Variable(c.size)
    cons = [h >= 0]
    if total is not None:
        cons.append(cp.sum(h) == total)
    if zeros is not None:
        cons.append(h[np.flatnonzero(zeros)] == 0)
    cp.Problem(cp.Minimize(0.5 * cp.quad_form(h, cp.psd_wrap(Q)) - c @ h), cons).solve(solver=cp.CLARABEL)
    return h.value


@pytest.mark.parametrize("constraint", ["none", "total", "zeros"])
@pytest.mark.parametrize("rank_deficient", [False, True])
def test_admm_matches_an_interior_point_qp_and_fista(constraint, rank_deficient):
    rng = np.random.default_rng(7)
    factors = [_psd(rng, 5, 3 if rank_deficient else None), _psd(rng, 4)]
    Q = np.kron(*factors)
    c = rng.standard_normal(20) * 5
    total = 7.0 if constraint == "total" else None
    zeros = (np.arange(20) % 6 == 0) if constraint == "zeros" else None
    start = np.linalg.lstsq(Q, c, rcond=None)[0]
    h, it, res = admm.solve(factors, lambda v: Q @ v, c, start, total=total, zeros=zeros, tol=1e-9,
                            max_iterations=50_000)
    assert res <= 1e-9 and it >= 1
    assert h.min() >= 0.0
    if total is not None:
        assert abs(h.sum() - total) <= 1e-9 * total
    if zeros is not None:
        assert np.all(h[zeros] == 0.0)
    ref = _qp(Q, c, total, zeros)
    f = lambda v: 0.5 * v @ Q @ v - c @ v  # noqa: E731
    # the minimiser may not be unique when Q is singular: compare objective values, and Q-weighted points
    assert f(h) <= f(ref) + 1e-6 * max(1.0, abs(f(ref)))
    np.testing.assert_allclose(Q @ h, Q @ ref, atol=1e-4 * max(1.0, np.abs(Q @ ref).max()))
    g, _, _ = first_order.fista(lambda v: Q @ v, c, float(np.linalg.eigvalsh(Q)[-1]), start, total=total, zeros=zeros,
                                tol=1e-9, max_iterations=200_000)
    assert f(h) <= f(g) + 1e-6 * max(1.0, abs(f(g)))


def test_admm_stops_on_the_same_certificate_as_fista():
    rng = np.random.default_rng(1)
    factors = [_psd(rng, 6), _psd(rng, 6)]
    Q = np.kron(*factors)
    c = rng.standard_normal(36)
    start = np.linalg.solve(Q, c)  # the unconstrained minimiser, with negative entries
    h, _, res = admm.solve(factors, lambda v: Q @ v, c, start, total=None, zeros=None, tol=1e-7,
                           max_iterations=10_000)
    L = float(np.linalg.eigvalsh(Q)[-1])
    scale = _common.kkt_scale(start, c, L, None, None, 1e-7)
    assert scale == pytest.approx(np.linalg.norm(np.minimum(start, 0.0)))
    assert res == pytest.approx(_common.kkt_residual(h, Q @ h - c, L, scale, None, None))
    assert res <= 1e-7


def test_admm_refuses_to_return_an_unconverged_point():
    rng = np.random.default_rng(2)
    factors = [_psd(rng, 8), _psd(rng, 8)]
    Q = np.kron(*factors)
    c = rng.standard_normal(64) * 100
    with pytest.raises(SolverError, match="ADMM did not converge in 3 iterations"):
        admm.solve(factors, lambda v: Q @ v, c, np.linalg.solve(Q, c), total=None, zeros=None, tol=1e-12,
                   max_iterations=3)


def test_product_pairs_meet_the_guarantees_whichever_solver_finishes():
    """After H₂ ⊗ I on a product workload with a rank-one factor (total): NNLS starts with ADMM, projection with
    FISTA (each hands over to the other when it stalls); both meet the guarantees."""
    W = sw.kron(wl.prefix(8), wl.total(6))
    A = ss.kron_strategy(st.hierarchical(8), st.identity(6))
    Wm, Am = W.dense(), A.dense()
    rng = np.random.default_rng(3)
    for seed in range(3):
        x = np.where(rng.random((8, 6)) < 0.4, rng.integers(1, 20, (8, 6)), 0).astype(float)
        ls = mmopt.matrix_mechanism(W, A, x, mmopt.Privacy(0.5), rng=seed)
        for method in ("projection", "nnls"):
            out = mmopt.matrix_mechanism(W, A, x, mmopt.Privacy(0.5), rng=seed, reconstruct=method,
                                         total=float(x.sum()))
            first = {"nnls": "admm", "projection": "fista"}[method]
            assert out.reconstruction.solver.split("+")[0] == first
            assert out.reconstruction.optimality <= out.reconstruction.tol
            h = out.estimate.ravel()
            assert h.min() >= 0.0 and abs(h.sum() - x.sum()) <= 1e-9 * x.sum()
            if method == "projection":
                e_ls = np.sum((Wm @ (ls.estimate.ravel() - x.ravel())) ** 2)
                assert np.sum((Wm @ (h - x.ravel())) ** 2) <= e_ls * (1 + 1e-6)
            else:
                assert np.linalg.norm(Am @ (h - x.ravel())) <= np.linalg.norm(Am @ (ls.estimate - x).ravel()) * (
                    1 + 1e-6)


def test_only_small_factors_get_a_dense_eigenbasis():
    assert admm.usable((admm.MAX_FACTOR, 3)) and not admm.usable((admm.MAX_FACTOR + 1, 2))


def test_a_stalled_first_solver_hands_over_to_the_second(monkeypatch):
    """NNLS gets ADMM_FIRST_BUDGET ADMM steps, then FISTA finishes from ADMM's iterate (and vice versa)."""
    from mmopt.reconstruct import implicit

    W = sw.kron(wl.prefix(8), wl.prefix(6))
    A = ss.kron_strategy(st.hierarchical(8), st.hierarchical(6))
    x = np.where(np.random.default_rng(4).random((8, 6)) < 0.3, 9.0, 0.0)
    monkeypatch.setattr(implicit, "ADMM_FIRST_BUDGET", 1)
    out = mmopt.matrix_mechanism(W, A, x, mmopt.Privacy(0.2), rng=1, reconstruct="nnls")
    assert out.reconstruction.solver == "admm+fista" and out.reconstruction.optimality <= out.reconstruction.tol
    y = smech.strategy_apply(A, x) + np.random.default_rng(2).laplace(0.0, 30.0, A.n_rows)
    xhat, _ = smech.least_squares(A, y)
    with pytest.raises(SolverError, match="nnls: ADMM then projected gradient .FISTA. did not converge in 3 iter"):
        implicit.nnls(A, y, xhat, tol=1e-12, max_iterations=3)
