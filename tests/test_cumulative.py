"""Cumulative sums down the rows: identical, bit for bit, to numpy's cumsum(axis=0) on every shape, order and dtype
the library passes (the sums are made in the same order), reversed too, and in place."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mmopt._base.cumulative import cumulative_rows, prefix_sums_2d


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 70), cols=st.integers(0, 70), seed=st.integers(0, 2**32 - 1), fortran=st.booleans())
def test_matches_numpy_bit_for_bit(rows, cols, seed, fortran):
    M = np.random.default_rng(seed).standard_normal((rows, cols)) * 10.0 ** np.arange(-3, cols - 3)[None, :cols]
    M = np.asfortranarray(M) if fortran else M
    assert np.array_equal(cumulative_rows(M), np.cumsum(M, axis=0))
    assert np.array_equal(cumulative_rows(M, reverse=True), np.cumsum(M[::-1], axis=0)[::-1])


@pytest.mark.parametrize("dtype", [bool, np.int8, np.int64, np.float32])
def test_dtype_as_numpys(dtype):
    M = (np.arange(40 * 50).reshape(40, 50) % 3).astype(dtype)
    got, want = cumulative_rows(M), np.cumsum(M, axis=0)
    assert got.dtype == want.dtype and np.array_equal(got, want)


def test_in_place_and_into_a_strided_view_leave_the_input_alone_unless_it_is_the_output():
    rng = np.random.default_rng(3)
    M = rng.random((60, 64))
    keep = M.copy()
    S = np.zeros((61, 65))
    cumulative_rows(M, out=S[1:, 1:])
    assert np.array_equal(S[1:, 1:], np.cumsum(keep, axis=0)) and np.array_equal(M, keep)
    assert not S[0].any() and not S[:, 0].any()
    out = cumulative_rows(M, out=M)
    assert out is M and np.array_equal(M, np.cumsum(keep, axis=0))
    v = rng.random(33)
    assert np.array_equal(cumulative_rows(v, reverse=True), np.cumsum(v[::-1])[::-1])


@pytest.mark.parametrize("fortran", [False, True])
def test_prefix_sums_2d_is_numpys_two_cumsums_padded_or_not(fortran):
    M = np.random.default_rng(5).standard_normal((50, 70))
    M = np.asfortranarray(M) if fortran else M
    want = np.cumsum(np.cumsum(M, axis=0), axis=1)
    assert np.array_equal(prefix_sums_2d(M), want)
    padded = prefix_sums_2d(M, padded=True)
    assert padded.shape == (51, 71) and not padded[0].any() and not padded[:, 0].any()
    assert np.array_equal(padded[1:, 1:], want)
