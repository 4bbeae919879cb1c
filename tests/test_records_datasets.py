"""mmopt.records.datasets: the shipped CPS 1988 extract, its public domain, and how they were built."""

import json

import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")

from mmopt.records import marginal_counts  # noqa: E402
from mmopt.records.datasets import cps1988, cps1988_files  # noqa: E402


def test_cps1988_loads_with_its_domain_and_no_record_is_dropped():
    df, D = cps1988()
    assert len(df) == 28_155 and list(df.columns) == list(D.names)
    assert D.shape == (7, 6, 7, 2, 2, 4, 2)
    counts = marginal_counts(df, D, [(i,) for i in range(7)])
    assert all(int(c.sum()) == 28_155 for c in counts.values())  # every record lies inside the domain
    # AER's documented frequencies (R: table(CPS1988$region), table(CPS1988$ethnicity))
    assert counts[(5,)].tolist() == [6441, 6863, 8760, 6091] and counts[(3,)].tolist() == [25923, 2232]


def test_shipped_files_are_small_and_match_the_build_script():
    from experiments import data_cps1988

    parquet, domain = cps1988_files()
    assert parquet.stat().st_size < 1_000_000  # package data: under 1 MB
    assert json.loads(domain.read_text()) == data_cps1988.DOMAIN
