"""Every adaptive algorithm's release path refuses, before any draw, what its privacy proof does not cover:
fractional counts and more than MAX_RECORDS records (a vetted Noise that fails on any draw); exactly
MAX_RECORDS records reach the first draw. (Proposed: catches a dropped check in any single algorithm.)"""
import dataclasses

import numpy as np
import pytest

import mmopt.adaptive as A
from mmopt.adaptive._noise import Noise
from mmopt.dense.exact_answers import MAX_RECORDS


class Drew(Exception):
    pass


@dataclasses.dataclass(frozen=True, eq=False)
class Tripwire(Noise):
    def _trip(self, *args, **kwargs):
        raise Drew

    laplace = gaussian = add_laplace = add_discrete_laplace = add_gaussian = gumbel_max = exponential = _trip
    exponential_monotone = _trip


W8 = np.tril(np.ones((8, 8)))
ONE_D = {
    "uniform": lambda x, z: A.uniform(x, 1.0, noise=z),
    "mwem": lambda x, z: A.mwem(x, W8, 1.0, noise=z),
    "dawa": lambda x, z: A.dawa(x, 1.0, noise=z),
    "dawa_singletons": lambda x, z: A.dawa(x, 1.0, max_bucket_length=1, noise=z),
    "dawa_callable": lambda x, z: A.dawa(x, 1.0, strategy=lambda k: np.eye(k), noise=z),
    "private_partition": lambda x, z: A.private_partition(x, 1.0, bucket_penalty=1.0, noise=z),
    "private_partition_noisy_cost": lambda x, z: A.private_partition(x, 1.0, bucket_penalty=1.0,
                                                                     selection="noisy_cost", noise=z),
    "ahp": lambda x, z: A.ahp(x, 1.0, noise=z),
    "efpa": lambda x, z: A.efpa(x, 1.0, noise=z),
    "php": lambda x, z: A.php(x, 1.0, noise=z),
    "noise_first": lambda x, z: A.noise_first(x, 1.0, noise=z),
    "structure_first": lambda x, z: A.structure_first(x, 1.0, count_bound=10, buckets=2, noise=z),
}
TWO_D = {
    "ugrid": lambda x, z: A.ugrid(x, 1.0, noise=z),
    "agrid": lambda x, z: A.agrid(x, 1.0, noise=z),
    "kd_tree": lambda x, z: A.kd_tree(x, 1.0, noise=z),
    "dawa": lambda x, z: A.dawa(x, 1.0, noise=z),
    "privbayes": lambda x, z: A.privbayes(x, 1.0, noise=z),
    "dual_query": lambda x, z: A.dual_query(x, 1.0, rounds=3, noise=z),
    "ireduct": lambda x, z: A.ireduct(x, 1.0, noise=z),
}


def _inputs(shape):
    size = int(np.prod(shape))
    frac = (np.arange(size) + 0.5).reshape(shape)
    over, edge = np.zeros(size), np.zeros(size)
    over[0], over[1] = MAX_RECORDS, 1
    edge[0] = MAX_RECORDS
    return frac, over.reshape(shape), edge.reshape(shape)


@pytest.mark.parametrize("name,run", [*ONE_D.items(), *(("2d_" + k, f) for k, f in TWO_D.items())])
def test_release_domain_is_checked_before_any_draw(name, run):
    frac, over, edge = _inputs((4, 4) if name.startswith("2d_") else (8,))
    for bad in (frac, over):
        with pytest.raises(ValueError, match=r"'(x|data)' parameter of .* must hold"):
            run(bad, Tripwire("opendp"))
    with pytest.raises(Drew):  # the domain's edge is accepted: the first draw is reached
        run(edge, Tripwire("opendp"))
