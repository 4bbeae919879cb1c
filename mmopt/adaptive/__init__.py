"""Data-adaptive algorithms for 1-D and 2-D histograms (the DPBench landscape: Uniform, MWEM, DAWA-style
partitioning, AHP, and more).

Each function takes the counts x (1-D length n, or 2-D (n1, n2), flattened row-major for workloads), a total
budget ε, ``noise=`` and ``rng=``, and returns an :class:`AdaptiveResult` whose ``estimate`` answers any
workload as ``W @ estimate.ravel()``. Every function is ε-DP end to end under add/remove of one record; each
docstring states the budget split and the sensitivity of every private step.

**Noise** (``noise=``, one switch for every Laplace, Gaussian and exponential-mechanism sample):

* ``"numpy"`` (default, with a seed ``rng``): reproducible, for simulation and benchmarking only — numpy's
  floating-point samplers leak through their low-order bits (Mironov 2012). ``path == "simulation"``.
* ``"opendp"`` (``rng`` must be None): every sample from OpenDP's vetted samplers
  (:mod:`mmopt.adaptive._opendp_noise`; Gumbel noisy max for the exponential mechanism, exactly its
  distribution). Release-grade: ``path == "release"``. Needs ``pip install opendp``.
"""

from mmopt.adaptive._common import AdaptiveResult
from mmopt.adaptive._exponential import exponential_mechanism, exponential_probabilities
from mmopt.adaptive.ahp import ahp
from mmopt.adaptive.dawa import dawa
from mmopt.adaptive.dualquery import dual_query
from mmopt.adaptive.efpa import efpa
from mmopt.adaptive.grid import agrid, ugrid
from mmopt.adaptive.hilbert import hilbert_order
from mmopt.adaptive.ireduct import ireduct
from mmopt.adaptive.kdtree import kd_tree
from mmopt.adaptive.mwem import mwem
from mmopt.adaptive.partition import Partition, private_partition
from mmopt.adaptive.php import php
from mmopt.adaptive.privbayes import privbayes
from mmopt.adaptive.uniform import uniform
from mmopt.adaptive.vopt import noise_first, structure_first

__all__ = ["AdaptiveResult", "Partition", "agrid", "ahp", "dawa", "dual_query", "efpa", "exponential_mechanism",
           "exponential_probabilities", "hilbert_order", "ireduct", "kd_tree", "mwem", "noise_first", "php",
           "private_partition", "privbayes", "structure_first", "ugrid", "uniform"]
