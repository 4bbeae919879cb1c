"""mmopt.records.datasets: the shipped CPS 1988 extract, its public domain, and how they were built."""

import json

import numpy as np
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


def test_randhie_every_record_lies_in_the_documented_domain():
    pytest.importorskip("statsmodels")
    from mmopt.records.datasets import randhie

    df, domain = randhie()
    assert len(df) == 20190 and domain.shape == (7, 5, 2, 6, 5, 2, 6, 2, 2, 2)
    assert list(df.columns) == list(domain.names)
    one = marginal_counts(df, domain, [(i,) for i in range(10)])
    assert all(int(m.sum()) == 20190 for m in one.values())          # nothing dropped by the domain
    # lncoins: one cell per plan rate (0, 25, 50, 95, 100 %), so each cell holds a single raw value
    cell = np.searchsorted(np.array(domain.attributes[1].edges), df["lncoins"].to_numpy(), side="right") - 1
    rates = {j: set(np.round(np.expm1(df["lncoins"].to_numpy()[cell == j]))) for j in range(5)}
    assert rates == {0: {0.0}, 1: {25.0}, 2: {50.0}, 3: {95.0}, 4: {100.0}}
    # the indicators' cells are the raw 0/1 values (physlm, a yearly average, is binned at ½)
    for name in ("idp", "hlthg", "hlthf", "hlthp"):
        i = domain.names.index(name)
        np.testing.assert_array_equal(one[(i,)], np.bincount(df[name].to_numpy().astype(int), minlength=2))


def test_tree_network_rows_follow_the_network_it_returns():
    from mmopt.records.datasets import tree_network

    n = 200_000
    df, domain, net = tree_network(6, n, seed=3, return_network=True)
    assert list(df.columns) == list(domain.names) and len(df) == n
    marginals = [np.asarray(net[0][1])]
    for parent, K in net[1:]:
        assert K.shape == (domain.shape[parent], domain.shape[len(marginals)])
        np.testing.assert_allclose(K.sum(axis=1), 1.0, rtol=1e-12)
        marginals.append(marginals[parent] @ K)  # the tree's exact one-way marginals, root to leaves
    for j, (parent, K) in enumerate(net):
        if parent is None:
            continue
        # each (parent, child) cell's frequency against the exact joint diag(p_parent)·K: 5 binomial standard
        # errors (a false alarm has probability < 10⁻⁵ per cell)
        exact = marginals[parent][:, None] * K
        got = np.zeros_like(exact)
        np.add.at(got, (df[f"x{parent}"].to_numpy(), df[f"x{j}"].to_numpy()), 1.0 / n)
        assert np.all(np.abs(got - exact) <= 5 * np.sqrt(exact * (1 - exact) / n) + 1 / n)


def test_tree_network_is_reproducible_and_refuses_bad_sizes():
    from mmopt.records.datasets import tree_network

    a, d1 = tree_network(5, 100, seed=7, binary=True)
    b, d2 = tree_network(5, 100, seed=7, binary=True)
    assert a.equals(b) and d1.shape == d2.shape == (2,) * 5
    with pytest.raises(ValueError, match="'attributes' parameter of tree_network"):
        tree_network(0, 10)
    with pytest.raises(TypeError, match="'records' parameter of tree_network"):
        tree_network(3, 10.5)
    for flag in ("binary", "return_network"):  # "no" was read as True (a helper's probe)
        with pytest.raises(TypeError, match=f"'{flag}' parameter of tree_network must be True or False"):
            tree_network(3, 5, **{flag: "no"})
