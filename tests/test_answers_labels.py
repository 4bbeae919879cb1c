"""mmopt.answers labels: every label, read back as a query, is the row of W it labels (every family, kron, stack,
marginals, a census workload), in blocks of any size, without forming all m labels at once."""

import math

import numpy as np
import pytest

from mmopt import answers as ans
from mmopt import workload as wl
from mmopt.answers import labels as lab
from mmopt.answers.layout import layout_of
from mmopt.structured import census
from mmopt.structured import mechanism as smech


def _parse(desc: str, n: int, custom: dict) -> np.ndarray:
    """The row a description stands for (the grammar of mmopt.answers.labels), independently of its code."""
    if desc in custom:
        return custom[desc]
    c = 1.0
    if "×" in desc:
        head, desc = desc.split("×", 1)
        c = float(head)
    cells = np.arange(n)
    if desc == "*":
        r = np.ones(n)
    elif desc.startswith("≤ "):
        r = (cells <= int(desc[2:])).astype(float)
    elif desc.startswith("["):
        a, b = (int(t) for t in desc[1:-1].split(", "))
        r = ((cells >= a) & (cells <= b)).astype(float)
    elif desc.startswith("{"):
        r = np.isin(cells, [int(t) for t in desc[1:-1].split(", ")]).astype(float)
    else:
        r = (cells == int(desc)).astype(float)
    return c * r


def _custom(W) -> dict:
    out = {}
    terms = W.terms if hasattr(W, "terms") else ()
    for t in terms:
        for f in t.factors:
            labels = census.row_labels(f)
            if labels is not None:
                out.update(zip(labels, f.explicit_matrix(), strict=True))
            elif f.matrix is not None:  # "row r": a row that is not constant on its cells
                out.update({f"row {r}": row for r, row in enumerate(f.matrix)})
    return out


def _rows_from_labels(W, chunk_rows: int, sample=None):
    """(query, rows as per-attribute vectors with the weight, term) of every query (or of those in ``sample``),
    read from the labels alone."""
    layout = layout_of(W)
    custom = _custom(layout.structure)
    out = []
    for chunk in ans.iter_labels(W, chunk_rows=chunk_rows):
        assert chunk.stop - chunk.start <= chunk_rows
        for k in range(chunk.stop - chunk.start):
            if sample is not None and chunk.start + k not in sample:
                continue
            vecs = [_parse(chunk.columns[a][k], n, custom) for a, n in zip(layout.attributes, layout.shape,
                                                                           strict=True)]
            out.append((chunk.start + k, chunk.weight, vecs, chunk.term))
    return out


def _kron(vecs):
    row = np.ones(1)
    for v in vecs:
        row = np.kron(row, v)
    return row


DENSE = {
    "identity": wl.identity(5), "total": wl.total(5), "prefix": wl.prefix(6), "all_range": wl.all_range(5),
    "all_predicate": wl.all_predicate(4), "random_range": wl.random_range(7, 9, seed=0),
    "matrix": wl.Workload.from_matrix([[0, 2, 2, 0], [1, 0, 1, 0], [0.5, 0, 0, 1]], name="mixed"),
    "kron": wl.kron(wl.all_range(4), wl.prefix(3), wl.identity_total(2)),
    "stack": wl.stack([wl.kron(wl.prefix(3), wl.total(4)), wl.kron(wl.total(3), wl.all_range(4))], weights=[1.0, 3.0]),
    "stack_1d": wl.stack([wl.prefix(6), wl.all_range(6)], weights=[2.0, 1.0]),
    "marginals": wl.marginals((2, 3, 4), 2),
    "marginals_sets": wl.marginals((3, 2, 2), attributes=[(0, 2), (1,), ()]),
}


@pytest.mark.parametrize("name", list(DENSE))
def test_labels_read_back_as_the_rows_of_the_explicit_w(name):
    W = DENSE[name]
    M = W.explicit_matrix()
    got = _rows_from_labels(W, chunk_rows=4)
    assert len(got) == W.n_queries == M.shape[0]
    for i, w, vecs, _ in got:
        np.testing.assert_array_equal(w * _kron(vecs), M[i], err_msg=f"{name}: query {i}")


@pytest.mark.parametrize("W", [
    wl.kron(wl.all_range(70), wl.identity_total(60)),                     # implicit: 4,200 cells
    wl.stack([wl.kron(wl.prefix(80), wl.total(60)), wl.kron(wl.total(80), wl.identity(60))], weights=[1.0, 2.0]),
    wl.marginals((10, 10, 10, 5), 2),
    wl.sf1(),
], ids=["kron", "stack", "marginals", "sf1"])
def test_labels_of_implicit_workloads_reproduce_every_answer(W):
    """Labels → rows → answers on a random x equal W x query by query (W itself is never formed)."""
    rng = np.random.default_rng(0)
    x = rng.random(W.shape)
    expected = smech.answer(W, x)
    m = W.n_queries
    sample = set(range(m)) if m <= 5000 else {0, m - 1, *rng.integers(0, m, 3000).tolist()}
    got = _rows_from_labels(W, chunk_rows=997, sample=sample)
    assert [i for i, *_ in got] == sorted(sample)
    values = []
    for _, w, vecs, _ in got:
        y = x
        for v in vecs:
            y = np.tensordot(v, y, axes=(0, 0))
        values.append(w * float(y))
    np.testing.assert_allclose(values, expected[sorted(sample)], rtol=1e-12, atol=1e-9)


def test_census_names_tables_and_race_rows():
    W = wl.sf1()
    L = layout_of(W)
    assert L.attributes == ("sex", "hispanic", "race", "age")
    assert [t.name for t in L.terms] == list(census.sf1_term_tables())
    assert layout_of(wl.sf1_plus()).attributes[-1] == "state"
    rec = ans.query_label(W, 0)
    assert rec == {"query": 0, "term": 0, "table": "P1", "sex": "*", "hispanic": "*", "race": "*", "age": "*",
                   "weight": 1.0}
    # the P12 age bands: intervals of age1
    p12 = next(j for j, t in enumerate(L.terms) if t.name == "P12")
    start = sum(t.n_queries for t in L.terms[:p12])
    assert [ans.query_label(W, start + k)["age"] for k in (0, 1, 22)] == ["[0, 4]", "[5, 9]", "[85, 114]"]
    # a user's own workload named like a census block gets no census labels (metadata is by object)
    mine = wl.Workload.from_matrix(np.eye(7, 64), name="race1")
    assert census.row_labels(mine) is None and census.row_labels(census.race1())[0].startswith("race flag 0")
    # numbers are unchanged by the metadata
    assert W.n_queries == 4151 and W.domain_size == 29440


def test_names_can_be_given_and_marginal_terms_are_named_by_their_attributes():
    W = wl.marginals((3, 4, 5), 2)
    L = layout_of(W, attributes=("sex", "age", "race"))
    assert [t.name for t in L.terms] == ["sex×age", "sex×race", "age×race"]
    rec = ans.query_label(W, 13, attributes=("sex", "age", "race"))
    assert rec["table"] == "sex×race" and rec["sex"] == "0" and rec["age"] == "*" and rec["race"] == "1"
    assert [t.name for t in layout_of(W, terms=["a", "b", "c"]).terms] == ["a", "b", "c"]
    with pytest.raises(ValueError, match="'attributes' parameter of layout_of must give 3 names"):
        layout_of(W, attributes=("x",))
    with pytest.raises(ValueError, match="'i' parameter of query_label"):
        ans.query_label(W, W.n_queries)
    with pytest.raises(ValueError, match="Gram matrix only"):
        layout_of(wl.Workload.from_gram(np.eye(3), n_queries=3))
    with pytest.raises(TypeError, match=r"'workload' parameter of query_label .* Got ndarray\. Wrap a query matrix "
                                        r"with mmopt\.Workload\.from_matrix\(W\)"):
        ans.query_label(np.eye(3), 0)


def test_large_factors_are_described_per_block_and_blocks_follow_the_grid():
    """all_range(1500) has 1,125,750 rows: described row by row (not listed); blocks never cross a term or a
    prefix, and cover every row once, in order."""
    W = wl.all_range(1500)
    labeller = lab.Labeller()
    assert labeller.listed(W) is None
    first = next(ans.iter_labels(W, chunk_rows=3))
    assert first.columns["a0"].tolist() == ["[0, 0]", "[0, 1]", "[0, 2]"]
    assert lab.describe(W, np.array([W.n_queries - 1]))[0] == "[1499, 1499]"
    L = layout_of(wl.stack([wl.kron(wl.prefix(3), wl.all_range(4), wl.identity(5)), wl.kron(wl.total(3),
                                                                                              wl.total(4),
                                                                                              wl.prefix(5))]))
    for rows in (1, 4, 7, 50, 10**6):
        chunks = list(L.chunks(rows))
        assert [c.start for c in chunks] == [0] + [c.stop for c in chunks[:-1]]
        assert chunks[-1].stop == L.n_queries and all(0 < c.stop - c.start <= rows for c in chunks)
        for c in chunks:
            t = L.terms[c.term]
            inner = math.prod(t.grid[c.axis + 1:])
            assert c.stop - c.start == (c.block[1] - c.block[0]) * inner


def test_import_mmopt_needs_neither_pandas_nor_pyarrow_and_tables_name_their_extra(monkeypatch):
    import subprocess
    import sys

    code = "import sys, mmopt; print('pandas' in sys.modules, 'pyarrow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # `import pyarrow` now fails
    import mmopt

    W, A = wl.prefix(4), mmopt.strategy.identity(4)
    res = mmopt.matrix_mechanism(W, A, np.ones(4), mmopt.Privacy(1.0), rng=0)
    with pytest.raises(ImportError, match=r"mmopt\[tables\]"):
        ans.answers_table(res, W, A)
    assert ans.answer([(0, 2)], res, A).standard_error.shape == (1,)  # own queries need neither


def test_grouping_sets_are_labelled_as_answers_table_lists_them():
    """query_label and iter_labels refused a HierarchyWorkload that answers_table takes (a helper's audit): they
    list the same union of level products, in answers_table's row order."""
    import mmopt
    from mmopt.hierarchy import Hierarchy, grouping_sets
    h = Hierarchy.from_parents([[0, 0, 1]], level_names=("nation", "state", "county"), name="geo")
    W = grouping_sets([h, 2], [("state", "a1"), ()])
    geo = [g for c in ans.iter_labels(W) for g in c.columns["geo"].tolist()]
    assert geo == ["[0, 1]", "[0, 1]", "2", "2", "*"]
    assert ans.query_label(W, 4) == {"query": 4, "term": 1, "table": "total", "geo": "*", "a1": "*", "weight": 1.0}
    P = mmopt.Privacy(1.0, 1e-6)
    A = mmopt.optimize(W, privacy=P, method="hierarchy").strategy
    out = mmopt.release(W, A, np.arange(6.0).reshape(3, 2), P)
    t = ans.answers_table(out, W, A)
    assert t["geo"].tolist() == geo and t["table"].tolist()[-1] == "total"
    with pytest.raises(TypeError, match="'strategy' parameter of per_query_variances must be .* Got NodeStrategy. "
                                        "For grouping sets, mmopt.evaluate"):
        list(ans.per_query_variances(W, A))


def test_all_predicate_past_63_cells_is_refused_by_name():
    """2ⁿ − 1 rows past int64 indices: numpy's 'Maximum allowed dimension exceeded' (a helper's audit)."""
    assert ans.query_label(wl.all_predicate(62), 2**62 - 2)["a0"] == "*"
    assert ans.query_label(wl.all_predicate(63), 2**63 - 2)["a0"] == "*"  # every row index fits int64 at 63
    assert ans.query_label(wl.all_predicate(63), 2**62)["a0"] == "{0, 62}"  # the bits of r + 1
    with pytest.raises(ValueError, match=r"'workload' parameter of query_label has all_predicate\(64\), 2\^64 − 1"):
        ans.query_label(wl.all_predicate(64), 5)
