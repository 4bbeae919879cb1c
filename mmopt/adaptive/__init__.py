"""Data-adaptive baselines for 1-D and 2-D histograms: Uniform, MWEM, DAWA-style partitioning, AHP.

Each function takes the counts x (1-D length n, or 2-D (n1, n2), flattened row-major for workloads), a total
budget ε and a seeded ``rng``, and returns an :class:`AdaptiveResult` whose ``estimate`` answers any workload
as ``W @ estimate.ravel()``. Every function is ε-DP end to end under add/remove of one record; each docstring
states the budget split and the sensitivity of every private step.

**Research baselines**: the noise comes from numpy's floating-point samplers (Laplace, Gumbel), which leak
through their low-order bits (Mironov 2012). Use them for simulation and benchmarking (DPBench-style
comparisons with the matrix mechanism), never to release real data; :func:`mmopt.release` is the release path.
"""

from mmopt.adaptive._common import AdaptiveResult
from mmopt.adaptive._exponential import exponential_mechanism, exponential_probabilities
from mmopt.adaptive.ahp import ahp
from mmopt.adaptive.dawa import dawa
from mmopt.adaptive.hilbert import hilbert_order
from mmopt.adaptive.mwem import mwem
from mmopt.adaptive.partition import Partition, private_partition
from mmopt.adaptive.uniform import uniform

__all__ = ["AdaptiveResult", "Partition", "ahp", "dawa", "exponential_mechanism", "exponential_probabilities",
           "hilbert_order", "mwem", "private_partition", "uniform"]
