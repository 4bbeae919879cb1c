"""Shared fixtures and tolerances. TOL is for exact linear algebra, SDP_TOL for solver output."""

import os

# The tests use small matrices, where a two-thread BLAS on a 2-core CI machine mostly waits for the
# other core (measured 3-10x slower under load). Pin it before numpy loads; export to override.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

TOL = dict(rtol=1e-9, atol=1e-9)
SDP_TOL = dict(rtol=1e-4)


@pytest.fixture
def rng():
    return np.random.default_rng(0)
