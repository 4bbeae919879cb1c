"""Shared fixtures and tolerances. TOL is for exact linear algebra, SDP_TOL for solver output."""

import numpy as np
import pytest

TOL = dict(rtol=1e-9, atol=1e-9)
SDP_TOL = dict(rtol=1e-4)


@pytest.fixture
def rng():
    return np.random.default_rng(0)
