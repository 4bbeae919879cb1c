"""Reproductions of the paper's tables and figures; each module is run() + plot() + main(argv).

Two cores are shared with other jobs here, and a multithreaded BLAS on the mid-sized (n ≤ 1024)
products of these experiments spends more time waiting for a busy core than computing (about 10×
slower when measured), so BLAS is pinned to one thread before numpy is first imported. Set the
variables yourself to override.
"""

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
