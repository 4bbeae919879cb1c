"""Per-table error breakdown and SF1 table weights (the HDMM tutorial's "Tuning workload error")."""

import pytest

import mmopt
from mmopt import Privacy
from mmopt import strategy as st
from mmopt import workload as wl
from mmopt.structured import census, term_errors


def _identity(W):
    return st.kron(*[st.identity(d) for d in W.shape])


def test_table_breakdown_adds_up_to_the_total():
    W = wl.sf1()
    A = st.kron(st.identity(2), st.identity(2), st.hierarchical(64), st.hierarchical(115))
    rows = term_errors(W, A, Privacy(1.0), groups=census.sf1_term_tables())
    assert [r["group"] for r in rows] == list(census.SF1_TABLES)
    total = mmopt.evaluate(W, A, Privacy(1.0)).total_squared_error
    assert sum(r["total_squared_error"] for r in rows) == pytest.approx(total, rel=1e-12)
    assert sum(r["n_queries"] for r in rows) == 4151 and all(r["exact"] for r in rows)
    assert sum(r["share"] for r in rows) == pytest.approx(1.0)


def test_table_weights_scale_that_tables_queries():
    base, tuned = wl.sf1(), wl.sf1(weights={"P1": 10.0, "P12": 3.0})
    A = _identity(base)
    b = {r["group"]: r["total_squared_error"] for r in term_errors(base, A, groups=census.sf1_term_tables())}
    t = {r["group"]: r["total_squared_error"] for r in term_errors(tuned, A, groups=census.sf1_term_tables())}
    assert t["P1"] == pytest.approx(100 * b["P1"]) and t["P12"] == pytest.approx(9 * b["P12"])
    assert t["P3"] == pytest.approx(b["P3"]) and tuned.n_queries == base.n_queries


@pytest.mark.parametrize("weights,match", [({"P2": 1.0}, "unknown tables"), ({"P1": -1.0}, "weights"),
                                           ([1.0], "must be a dict")])
def test_bad_table_weights(weights, match):
    with pytest.raises((ValueError, TypeError), match=match):
        wl.sf1(weights=weights)


def test_groups_must_match_terms():
    W = wl.sf1()
    with pytest.raises(ValueError, match="one label per term"):
        term_errors(W, _identity(W), groups=["a"])
