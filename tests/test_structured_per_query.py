"""mmopt.structured.per_query: every query's variance on a product domain."""

import numpy as np
import pytest

import mmopt
from mmopt import strategy as st
from mmopt import structured as ss
from mmopt import workload as wl


def test_per_query_variances_of_an_ill_conditioned_factor():
    """A factor with κ = 10¹⁰: the range [0, 2] ⊗ e_j, orthogonal to its weak direction, has variance 3 (A's
    other rows orthonormal); the factor's prefix sums of M's entries gave 8,193."""
    from mmopt.structured.per_query import per_query_variance
    v = np.array([1.0, 0.0, -1.0, 0.0]) / np.sqrt(2)
    Q = np.linalg.qr(np.column_stack([v, np.eye(4)[:, [1, 3]], [1.0, 0.0, 1.0, 0.0]]))[0]
    A = mmopt.strategy.Strategy((Q * np.array([1e-10, 1.0, 1.0, 1.0])).T, "weak")
    W = ss.kron(wl.all_range(4), wl.identity(2))
    got = per_query_variance(W, ss.kron_strategy(A, st.identity(2)), 1.0).reshape(10, 2)
    assert np.allclose(got[2], 3.0, rtol=1e-9)  # range [0, 2] is the third row of all_range(4)


def test_a_constant_row_is_not_refused_for_its_round_off_residual():
    """a = ‖r‖² − (1ᵀr)²/n of c·1ᵀ is round-off (2.2·10⁻¹⁶ for 0.7·1ᵀ₃), and an exact-zero test took it for a part
    on the never-measured residual of attribute 0: 98 of 330 supported pairs c·1ᵀₙ ⊗ I₄ were refused (a helper's
    audit), while evaluate and the dense path score them. The variances match the dense path's; a row with a real
    residual part is still refused."""
    from mmopt._base.guards import Unsupported
    for n in (2, 3, 5, 7):
        A = ss.marginals_strategy((n, 4), {(): 1.0, (1,): 1.0})
        for c in (0.1, 0.7, 1.3, 2.9):
            W = ss.kron(ss.predicates(c * np.ones((1, n))), wl.identity(4))
            got = np.concatenate([v for _, _, v in mmopt.answers.per_query_variances(W, A)])
            dense = mmopt.evaluate(W.to_workload(), A.to_strategy(), per_query=True).per_query_variance
            np.testing.assert_allclose(got, dense, rtol=1e-9)
    W = ss.kron(ss.predicates(np.array([[0.7] * 3, [1.0, -1.0, 0]])), wl.identity(4))
    A = ss.marginals_strategy((3, 4), {(): 1.0, (1,): 1.0})
    with pytest.raises(Unsupported, match="does not support"):
        list(mmopt.answers.per_query_variances(W, A))
