"""mmopt.synth.clique_loss: the residual-basis loss and gradient against their definition, subset by subset."""

import itertools

import numpy as np
import pytest

from mmopt.synth import clique_loss as clique_loss_module
from mmopt.synth.clique_loss import _basis, clique_loss
from mmopt.synth.joint import _centred


def _by_definition(mu, M, shape, values, variances, sets):
    """½ Σ_S ‖C_S A_S μ − r̂_S‖² / v_S and its gradient Σ_S A_Sᵀ C_S (C_S A_S μ − r̂_S) / v_S, term by term."""
    loss, grad = 0.0, np.zeros(mu.shape)
    for S in sets:
        r = _centred(mu.sum(axis=tuple(p for p, i in enumerate(M) if i not in S))) - values[S]
        loss += 0.5 * float(np.vdot(r, r)) / variances[S]
        grad = grad + (_centred(r) / variances[S]).reshape([shape[i] if i in S else 1 for i in M])
    return loss, grad


@pytest.mark.parametrize("dense_cells", [0, 512])   # mode products, and one dense product per shape
@pytest.mark.parametrize("M", [(0,), (1, 3), (0, 2, 3), (0, 1, 2, 3)])
def test_the_loss_and_its_gradient_are_the_definitions(M, dense_cells, monkeypatch):
    monkeypatch.setattr(clique_loss_module, "DENSE_CELLS", dense_cells)
    shape = (3, 1, 4, 5)   # a 1-value attribute too: its only coefficient is the constant one
    g = np.random.default_rng(len(M))
    subsets = [S for k in range(1, len(M) + 1) for S in itertools.combinations(M, k)]
    other = (0, 1) if len(M) != 2 else (2,)
    values = {S: _centred(g.standard_normal([shape[i] for i in S])) for S in subsets + [other]}
    variances = {S: float(g.uniform(0.5, 4.0)) for S in values}
    # M with some subsets unmeasured, a clique of another shape, and M again with all (stacked with the first)
    cliques = [M, other, M]
    per = [[S for S in subsets if g.random() < 0.7] or subsets[:1], [other], subsets]
    f = clique_loss(cliques, shape, values, variances, per)
    mus = [g.uniform(0, 10, [shape[i] for i in C]) for C in cliques]
    loss, grads = f(mus)
    want = [_by_definition(mu, C, shape, values, variances, S) for mu, C, S in zip(mus, cliques, per, strict=True)]
    # a handful of sums of O(10²) terms of O(10²): round-off far below 10⁻⁹ relative
    assert np.isclose(loss, sum(w[0] for w in want), rtol=1e-10)
    for grad, (_, want_grad) in zip(grads, want, strict=True):
        np.testing.assert_allclose(grad, want_grad, rtol=1e-9, atol=1e-9 * np.abs(want_grad).max())


@pytest.mark.parametrize("n", [1, 2, 7])
def test_the_basis_is_orthonormal_with_a_constant_first_column(n):
    Q = _basis(n)
    np.testing.assert_allclose(Q.T @ Q, np.eye(n), atol=1e-12)
    np.testing.assert_allclose(Q[:, 0], np.full(n, 1 / np.sqrt(n)), atol=1e-12)
