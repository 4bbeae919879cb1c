"""mmopt.auto.costs: the estimates grow with the work and pass through the measured points they quote."""

import pytest

from mmopt.auto import costs


def test_estimates_increase_with_n():
    for f in (costs.closed_dense, costs.l2_dense, costs.l2_tridiagonal_step, costs.min_error_dense,
              costs.min_error_fast):
        values = [f(n) for n in (64, 256, 512, 1024, 3000, 4096, 8192, 20000)]
        assert all(a <= b for a, b in zip(values, values[1:], strict=False)), f.__name__


@pytest.mark.parametrize("n,quoted", [(1024, 16.0), (2048, 55.0), (8192, 520.0)])
def test_min_error_fast_interpolates_its_table(n, quoted):
    assert costs.min_error_fast(n) == pytest.approx(quoted)


def test_measured_points_within_a_factor_of_two():
    # the figures the docstrings quote: dense MinError 19 s at 512, the dual ~1.35 s an iteration at 4,096
    assert 19 / 2 < costs.min_error_dense(512) < 19 * 2
    assert 1.35 / 2 < costs.l2_tridiagonal_step(4096) < 1.35 * 2
    assert 0.8 / 2 < costs.l2_dense(1024) < 0.8 * 2


def test_coupled_passes_through_its_measured_points():
    # the coupled split fit plus the dual bound it attaches: 1.4 s on (16,)^10 and 8.5 s on (32,)^4 (bench_auto)
    import itertools

    import numpy as np

    from mmopt.structured import workloads as sw

    def prefix_marginals(n, d):
        sets = [S for k in (1, 2) for S in itertools.combinations(range(d), k)]
        P, T = np.tril(np.ones((n, n))), np.ones((1, n))
        return sw.union([sw.kron(*[P if i in S else T for i in range(d)]) for S in sets])

    assert 1.4 / 2 < costs.coupled(prefix_marginals(16, 10)) < 1.4 * 2
    assert 8.5 / 2 < costs.coupled(prefix_marginals(32, 4)) < 8.5 * 2
    assert costs.coupled(prefix_marginals(8, 3)) < costs.coupled(prefix_marginals(16, 3))
