"""mmopt.structured.per_query: every query's variance on a product domain."""

import numpy as np

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
