"""mmopt.dense.profile: the profile factor, the one rank rule, and sums of squares that cannot go negative."""

import numpy as np
import pytest

from mmopt import strategy as st
from mmopt import workload as wl
from mmopt.dense import profile as pf


def _paths():
    rng = np.random.default_rng(0)
    ill = np.diag([1.0, 1.0, 1e-5]) @ rng.normal(size=(3, 3))   # κ(AᵀA) ≈ 1e10: QR, not Cholesky
    deficient = rng.normal(size=(2, 5))                          # rank 2 of 5: SVD
    return {"cholesky": st.hierarchical(8).matrix, "qr": ill, "svd": deficient}


@pytest.mark.parametrize("method", ["cholesky", "qr", "svd"])
def test_factor_reproduces_the_pseudo_inverse(method):
    A = _paths()[method]
    prof = pf.profile_of_matrix(A)
    assert prof.method == method
    top = np.abs(prof.matrix).max()
    np.testing.assert_allclose(prof.factor @ prof.factor.T, prof.matrix, rtol=1e-12, atol=1e-12 * top)
    np.testing.assert_allclose(prof.matrix, np.linalg.pinv(A.T @ A, rcond=1e-12, hermitian=True),
                               rtol=1e-6, atol=1e-6 * np.abs(prof.matrix).max())


def test_the_cholesky_path_is_certified_with_kappa_itself_not_lapack_s_estimate(monkeypatch):
    """LAPACK's dpocon estimates ‖X⁻¹‖₁ from below: on [I₃₀₀; R] (R 50×300 uniform) it says κ₁ = 2.76·10⁴ where
    κ₁ is 2.97·10⁴. With the limit between the two certificates the path must be QR (it was Cholesky)."""
    from scipy.linalg import lapack
    A = np.vstack([np.eye(300), np.random.default_rng(0).random((50, 300))])
    X = A.T @ A
    anorm = float(np.abs(X).sum(axis=0).max())
    C = lapack.dpotrf(X, lower=0, clean=1)[0]
    estimate = 1.0 / lapack.dpocon(C, anorm, uplo="U")[0]
    exact = anorm * float(np.abs(np.linalg.inv(X)).sum(axis=0).max())
    assert estimate < 0.97 * exact  # the estimator's shortfall on this A (7.6 %): what the test needs
    n_eps = 300 * np.finfo(float).eps
    monkeypatch.setattr(pf, "CHOLESKY_MAX_RELATIVE_ERROR", n_eps * (estimate * exact) ** 0.5)
    assert pf.profile_of_matrix(A).method == "qr"
    monkeypatch.setattr(pf, "CHOLESKY_MAX_RELATIVE_ERROR", n_eps * exact * 1.01)
    assert pf.profile_of_matrix(A).method == "cholesky"


@pytest.mark.parametrize("k", [-600, -170, 0, 170, 600])
def test_rank_rule_is_relative_to_the_objects_own_scale(k):
    A = np.ldexp(np.random.default_rng(1).normal(size=(3, 6)), k // 2)
    s = np.linalg.svd(A, compute_uv=False)
    assert pf.numerical_rank(s, A.shape) == 3
    assert pf.numerical_rank(np.zeros(3), A.shape) == 0


def test_power_of_two_scale_is_exact():
    A = np.array([[3e-170, -1e-171], [0.0, 7e-170]])
    e = pf.power_of_two_scale(A)
    As = np.ldexp(A, -e)
    assert 0.5 <= np.abs(As).max() < 1.0 and np.array_equal(np.ldexp(As, e), A)


def test_spectrum_cuts_roundoff_eigenvalues():
    W = np.random.default_rng(2).normal(size=(3, 8))
    spec = pf.spectrum(W.T @ W)
    assert spec.rank == 3
    np.testing.assert_allclose(spec.factor @ spec.factor.T, W.T @ W, atol=1e-12)
    np.testing.assert_allclose(spec.svd_sum, np.linalg.svd(W, compute_uv=False).sum(), rtol=1e-12)


def test_trace_is_a_sum_of_squares_where_the_elementwise_sum_cancels():
    """Round-off directions (s ≈ 1e-9) that G does not use: Σ G∘M is garbage, ‖FᵀB‖² is not."""
    G = wl.marginals((3, 3, 3), 1).mean_gram        # rank 7 of 27
    spec = pf.spectrum(G)
    null = np.linalg.svd(np.eye(27) - spec.basis @ spec.basis.T)[0][:, :20]
    A = np.diag(np.r_[np.ones(7), np.full(20, 1e-9)]) @ np.hstack([spec.basis, null]).T
    prof = pf.profile_of_matrix(A)
    assert prof.method in ("qr", "svd")
    exact = float(np.sum(spec.factor**2))           # G's weight sits on the unit directions only
    assert pf.trace_with_profile(G, prof, spec) == pytest.approx(exact, rel=1e-6)
    assert abs(np.sum(G * prof.matrix) - exact) > 1e-3 * exact   # what the old elementwise sum gave
    with pytest.raises(ValueError, match="spectrum"):
        pf.trace_with_profile(G, prof, None)


def test_effective_profile_agrees_with_the_profile_on_the_workloads_queries():
    W = wl.marginals((2, 3, 4), 2)
    spec = pf.spectrum(W.mean_gram)
    A = np.diag(np.geomspace(1.0, 1e-5, 24)) @ np.random.default_rng(4).normal(size=(24, 24))
    prof = pf.profile_of_matrix(A)
    assert not prof.certified and spec.rank < 24
    Me = pf.effective_profile(prof, spec)
    Wm = W.explicit_matrix()
    exact = np.einsum("ij,ij->i", Wm @ prof.matrix, Wm)
    np.testing.assert_allclose(np.einsum("ij,ij->i", Wm @ Me, Wm), exact, rtol=1e-6)
    assert pf.effective_profile(pf.profile_of_matrix(np.eye(24)), spec) is not None


def test_spectrum_of_a_gram_with_large_eigenvalue_clusters():
    """(I + J)⊗I has eigenvalues of multiplicity 31 and more: LAPACK's dsyevr (scipy's default driver) raised a bare
    "LinAlgError: Internal Error." in l2_approx, svd_strategy, factorization_norm and svd_bound (a helper's audit;
    13 of 42 such Grams with sizes in [20, 40])."""
    import mmopt
    from mmopt import workload as wk
    from mmopt.dense.profile import spectrum
    IT = np.vstack([np.eye(35), np.ones((1, 35))])
    W = np.kron(IT, np.eye(31))
    G = W.T @ W
    s = spectrum(G)
    np.testing.assert_allclose((s.basis * s.eigenvalues) @ s.basis.T, G, atol=1e-11 * np.abs(G).max())
    # the closed form: G = (I + J)⊗I, eigenvalues 1 + 35 (once per column of I) and 1 (34 times each)
    assert s.svd_sum == pytest.approx(31 * (6.0 + 34.0), rel=1e-12)
    assert mmopt.svd_bound(wk.kron(wk.identity_total(35), wk.identity(31))) == pytest.approx(
        (31 * 40.0) ** 2 / (35 * 31), rel=1e-12)
