"""Issue 31: strategies saved by mmopt before the re-layout (main 5d3d436, files in tests/data/saved_0.1, written by
that version's mmopt.save) load with today's mmopt and give the same expected error (errors.json, computed by
that version on the same workloads; 1e-10 relative: the same formulas, another BLAS may round differently)."""

import json
from pathlib import Path

import pytest

import mmopt
from mmopt import toeplitz
from mmopt import workload as wl

DATA = Path(__file__).resolve().parent / "data" / "saved_0.1"
WORKLOADS = {
    "dense_result": lambda: wl.prefix(8),
    "product": lambda: wl.kron(wl.prefix(4), wl.identity(3)),
    "marginals": lambda: wl.marginals((3, 4, 2), 2),
    "toeplitz": lambda: toeplitz.prefix(32),
    "weighted_sqrt": lambda: toeplitz.prefix(64),
}


STREAM_NORM = {"toeplitz": "l2", "weighted_sqrt": "l2"}


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_a_file_saved_before_the_relayout_loads_with_the_same_error(name):
    expected = json.loads((DATA / "errors.json").read_text())[name]
    saved = mmopt.load(DATA / f"{name}.npz")
    # the stream strategies' figures were recorded at Δ₂, mmopt.toeplitz.evaluate's unit privacy; mmopt.evaluate's
    # is Δ₁ for every family that has one (it gave a Toeplitz strategy Δ₂ and the same matrix Δ₁)
    got = mmopt.evaluate(WORKLOADS[name](), saved.strategy, norm=STREAM_NORM.get(name)).total_squared_error
    assert got == pytest.approx(expected, rel=1e-10)
