"""mmopt.groupby.parse: GROUP BY / GROUPING SETS / ROLLUP / CUBE expand to SQL's grouping sets (DuckDB itself is
the oracle where it is installed), and everything else is refused with a message that says what to do."""

import itertools

import pytest

pytest.importorskip("sqlglot")

from mmopt.groupby.parse import MAX_GROUPING_SETS, expand, parse_query  # noqa: E402

QUERIES = [
    "SELECT a, b, c, COUNT(*) FROM t GROUP BY GROUPING SETS ((a, c), (b, c), ())",
    "SELECT a, b, c, d, COUNT(*) FROM t GROUP BY ROLLUP(a, b), CUBE(c, d)",
    "SELECT a, b, c, COUNT(*) FROM t GROUP BY a, ROLLUP(b, c)",
    "SELECT a, b, COUNT(*) FROM t GROUP BY GROUPING SETS (a, ROLLUP(a, b), ())",
    "SELECT a, b, c, COUNT(*) FROM t GROUP BY CUBE(a, b, c)",
    "SELECT a, b, c, COUNT(*) FROM t GROUP BY ROLLUP((a, b), c)",
    "SELECT a, b, c, COUNT(*) FROM t GROUP BY GROUPING SETS ((a, b), (b, a)), ROLLUP(c)",
    "SELECT a, b, COUNT(*) FROM t GROUP BY a, b",
    "SELECT COUNT(*) FROM t",
    "SELECT a, b, c, d, COUNT(*) FROM t GROUP BY GROUPING SETS (CUBE(a, b), (c, d)), GROUPING SETS (c, ())",
]


def _as_sets(sets):
    return {frozenset(S) for S in sets}


@pytest.mark.parametrize("query", QUERIES)
def test_grouping_sets_are_duckdb_s(query):
    """The distinct grouping sets equal those DuckDB groups by: on a table without NULLs, a row's non-NULL grouping
    columns name its grouping set (SQL's rule for rolled-up columns)."""
    duckdb = pytest.importorskip("duckdb")
    q = parse_query(query)
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES (1, 2, 3, 4), (5, 6, 7, 8)) v(a, b, c, d)")
    rows = con.execute(query).fetchall()
    cols = q.columns
    theirs = {frozenset(c for c, v in zip(cols, row[:len(cols)], strict=True) if v is not None) for row in rows}
    assert _as_sets(q.grouping_sets) == theirs
    assert len(q.grouping_sets) == len(_as_sets(q.grouping_sets))  # each distinct set once


def test_cross_product_by_hand():
    """ROLLUP(state, county) × CUBE(sex, agegrp): 3 × 4 = 12 sets, in SQL's order, columns in SELECT order."""
    q = parse_query("SELECT state, county, sex, agegrp, COUNT(*) AS n FROM people "
                    "GROUP BY ROLLUP(state, county), CUBE(sex, agegrp)")
    rollup = [("state", "county"), ("state",), ()]
    cube = [("sex", "agegrp"), ("sex",), ("agegrp",), ()]
    assert q.grouping_sets == tuple(a + b for a, b in itertools.product(rollup, cube))
    assert len(q.grouping_sets) == 12 and q.count_name == "n" and q.table == "people"
    assert q.columns == ("state", "county", "sex", "agegrp")


def test_order_within_a_set_follows_select_and_duplicates_go():
    q = parse_query("SELECT b, a, COUNT(*) FROM t GROUP BY GROUPING SETS ((a, b), (b, a), a, (a), ())")
    assert q.grouping_sets == (("b", "a"), ("a",), ())


def test_expand_is_the_cross_product():
    assert expand([[("a",)], [("b",), ()]]) == [("a", "b"), ("a",)]
    assert expand([[("a", "b")], [("b", "c")]]) == [("a", "b", "c")]  # repeated columns once
    with pytest.raises(ValueError, match=f"at most {MAX_GROUPING_SETS} grouping sets"):
        expand([[("a",), ()]] * 13)


def test_qualified_names_and_quoted_identifiers():
    q = parse_query('SELECT p."State", p.sex, COUNT(*) FROM census.people AS p GROUP BY ROLLUP(p."State", sex)')
    assert q.table == "census.people" and q.columns == ("State", "sex")
    assert q.grouping_sets == (("State", "sex"), ("State",), ())
    q = parse_query("SELECT db.t.a, t.b, COUNT(*) FROM db.t GROUP BY CUBE(a, db.t.b)")  # any suffix of its name
    assert q.columns == ("a", "b") and len(q.grouping_sets) == 4


REFUSED = [
    ("SELECT a, COUNT(*) FROM t WHERE a = 1 GROUP BY a", "refuses WHERE.*group by it and keep those rows"),
    ("SELECT a, COUNT(*) FROM t GROUP BY a HAVING COUNT(*) > 5", "refuses HAVING"),
    ("SELECT a, COUNT(*) FROM t GROUP BY a ORDER BY a", "refuses ORDER BY.*Sort the returned table"),
    ("SELECT a, COUNT(*) FROM t GROUP BY a LIMIT 3", "refuses LIMIT"),
    ("SELECT a, COUNT(*) FROM t JOIN u ON t.a = u.a GROUP BY a", "refuses JOIN.*Join the tables before"),
    ("SELECT a, COUNT(*) FROM (SELECT * FROM t) GROUP BY a", "refuses a subquery in FROM"),
    ("SELECT a, COUNT(*) FROM t WHERE a IN (SELECT a FROM u) GROUP BY a", "refuses WHERE"),
    ("SELECT a, (SELECT 1), COUNT(*) FROM t GROUP BY a", "refuses the subquery"),
    ("WITH c AS (SELECT * FROM t) SELECT a, COUNT(*) FROM c GROUP BY a", "refuses WITH"),
    ("SELECT DISTINCT a, COUNT(*) FROM t GROUP BY a", "refuses SELECT DISTINCT"),
    ("SELECT a, COUNT(*) FROM t GROUP BY a; SELECT 1", "refuses 2 statements"),
    ("SELECT a FROM t UNION SELECT a FROM u", r"refuses the statement .*\(UNION\)"),
    ("DROP TABLE t", r"refuses the statement .*\(DROP\)"),
    ("SELECT a, SUM(b) FROM t GROUP BY a", "refuses the aggregate 'SUM"),
    ("SELECT a, AVG(b), COUNT(*) FROM t GROUP BY a", "refuses the aggregate 'AVG"),
    ("SELECT a, b, GROUPING(b), COUNT(*) FROM t GROUP BY ROLLUP (a, b)", "refuses 'GROUPING\\(b\\)'.*grouping_set"),
    ("SELECT a, COUNT(b) FROM t GROUP BY a", r"refuses 'COUNT\(b\)'.*COUNT\(\*\)"),
    ("SELECT a, COUNT(DISTINCT b) FROM t GROUP BY a", "refuses 'COUNT"),
    ("SELECT a FROM t GROUP BY a", r"with 0 COUNT\(\*\)"),
    ("SELECT a, COUNT(*), COUNT(*) FROM t GROUP BY a", r"with 2 COUNT\(\*\)"),
    ("SELECT *, COUNT(*) FROM t", r"refuses '\*' in SELECT"),
    ("SELECT a + 1, COUNT(*) FROM t GROUP BY a + 1", "refuses 'a \\+ 1' in SELECT"),
    ("SELECT a, COUNT(*) FROM t GROUP BY 1", "refuses '1' in GROUP BY"),
    ("SELECT a AS x, COUNT(*) FROM t GROUP BY a", "refuses the alias"),
    ("SELECT a, b, COUNT(*) FROM t GROUP BY a", "selected column 'b', which is in no grouping set"),
    ("SELECT a, COUNT(*) FROM t GROUP BY a, b", "grouping by 'b' without selecting it"),
    ("SELECT a, a, COUNT(*) FROM t GROUP BY a", "a column selected twice"),
    ("SELECT u.a, COUNT(*) FROM t GROUP BY a", "Columns must belong to the FROM table"),
    # the whole qualifier is the FROM table's (other.t.a counted db.t's column; a helper's probe), and an aliased
    # table is named by its alias, as SQL engines require
    ("SELECT a, COUNT(*) FROM db.t GROUP BY other.t.a", r"Columns must belong to the FROM table \(qualified by "
                                                          r"db.t or t at most\)"),
    ("SELECT t.a, COUNT(*) FROM t AS t2 GROUP BY a", r"qualified by t2 at most"),
    ("SELECT a, COUNT(*) FROM read_parquet('x.parquet') GROUP BY a", "pass the file as 'source'"),
    # table modifiers change which rows are counted: refused, not silently dropped (a sample was counted whole)
    ("SELECT a, COUNT(*) FROM t TABLESAMPLE (10 PERCENT) GROUP BY a", r"FROM item .*\(sample\).*sample, pivot"),
    ("SELECT a, COUNT(*) FROM t FOR SYSTEM_TIME AS OF 1 GROUP BY a", r"\(version\)"),
    ("SELECT a, COUNT(*) FROM t WITH (NOLOCK) GROUP BY a", r"\(hints\)"),
    ("SELECT a, COUNT(*) FROM t PIVOT (SUM(x) FOR y IN (1)) GROUP BY a", r"\(pivots\)"),
    ("SELECT a, COUNT(*) FROM t AS x(a, b) GROUP BY a", r"\(alias columns\)"),
    ("SELECT a, COUNT(*) FROM ONLY t GROUP BY a", "refuses FROM ONLY t"),
    ("SELECT a, COUNT(*) GROUP BY a", "a query without FROM"),
    ("SELECT a, COUNT(*) FROM t GROUP BY ALL", "refuses GROUP BY ALL"),
    ("SELECT a, b, COUNT(*) FROM t GROUP BY a, b WITH ROLLUP", "refuses GROUP BY … WITH ROLLUP.*ROLLUP\\(a, b\\)"),
    ("SELECT a, b, COUNT(*) FROM t GROUP BY ROLLUP(a, CUBE(b))", "cannot parse"),  # not SQL:1999 either
    ("SELECT a, COUNT(*) FROM t GROUP BY CUBE(" + ", ".join(f"c{i}" for i in range(13)) + ")",
     "CUBE of 13 elements"),
    ("SELEC a FROM", "cannot parse|refuses"),
    ("SELECT a, COUNT(*) FROM t GROUP BY (", "cannot parse"),
    ("   ", "must be a non-empty SQL string"),
]


@pytest.mark.parametrize("query,match", REFUSED)
def test_refusals_say_what_and_what_to_do(query, match):
    with pytest.raises(ValueError, match=match):
        parse_query(query)


def test_a_query_must_be_text():
    with pytest.raises(TypeError, match="'query' parameter of mmopt.sql must be a SQL string"):
        parse_query(b"SELECT COUNT(*) FROM t")


@pytest.mark.parametrize("alias", ["std_error", "county", "lower", "upper", "grouping_set", "STD_ERROR", "County"])
def test_a_count_alias_never_takes_the_name_of_a_result_column(alias):
    """COUNT(*) AS std_error replaced the counts by their standard errors, AS county the labels by the counts, in
    mmopt.sql's table, without a word (a helper's probe)."""
    with pytest.raises(ValueError, match=f"refuses COUNT\\(\\*\\) AS {alias}. Name the count otherwise"):
        parse_query(f"SELECT county, COUNT(*) AS {alias} FROM t GROUP BY county")
    assert parse_query("SELECT county, COUNT(*) AS n FROM t GROUP BY county").count_name == "n"


@pytest.mark.parametrize("name", ["std_error", "lower", "upper", "grouping_set"])
def test_a_grouping_column_never_takes_the_name_of_a_result_column(name):
    """A grouping column named std_error (lower, upper, grouping_set) had its labels replaced by the result's own
    column in mmopt.sql's table, without a word; only the count's alias was refused (a probe)."""
    with pytest.raises(ValueError, match=f"refuses the grouping column '{name}'.*Rename it .*'{name}_group'"):
        parse_query(f'SELECT "{name}", COUNT(*) AS n FROM t GROUP BY "{name}"')


def test_a_quoted_table_name_keeps_its_parts():
    """FROM "my.tab" and FROM my.tab both gave the table "my.tab": the quoting was lost, and DuckDB read the
    table tab of schema my for both (a probe)."""
    assert parse_query('SELECT COUNT(*) FROM "my.tab"').table_parts == ("my.tab",)
    assert parse_query("SELECT COUNT(*) FROM my.tab").table_parts == ("my", "tab")
    assert parse_query('SELECT COUNT(*) FROM "my.tab"').table == "my.tab"  # the name, as before


@pytest.mark.parametrize("query, needle", [
    ("SELECT state, COUNT(* EXCLUDE (sex)) FROM t GROUP BY state", r"COUNT\(\*\) takes no column modifier \(EXCEPT\)"),
    ("SELECT state, COUNT(* ILIKE 'inc%') FROM t GROUP BY state", r"no column modifier \(ILIKE\)"),
    ("SELECT state, COUNT(* REPLACE (NULL AS sex)) FROM t GROUP BY state", r"no column modifier \(REPLACE\)"),
    ("SELECT state, COUNT(DISTINCT sex) FROM t GROUP BY state", r"counts distinct values, not records"),
    ("SELECT state, COUNT(*) FROM t /*! WHERE sex = 'M' */ GROUP BY state", r"comment /\*! WHERE .*MySQL runs"),
    ("SELECT state, COUNT(*) FROM t GROUP BY state /*!50000 HAVING COUNT(*) > 50 */", r"comment /\*!50000"),
])
def test_what_the_sql_says_beyond_count_star_is_refused_not_dropped(query, needle):
    """COUNT(* EXCLUDE …) and COUNT(* ILIKE …) were released as COUNT(*), and a MySQL /*! WHERE … */ was ignored:
    the whole table counted where the SQL asks for less (a helper's audit). Plain comments stay harmless."""
    with pytest.raises(ValueError, match=needle):
        parse_query(query)
    assert parse_query("SELECT state, COUNT(ALL *) FROM t /* a note */ GROUP BY state -- and one more").count_name


def test_a_column_in_another_case_names_the_attribute_meant():
    """SELECT STATE … GROUP BY STATE (valid SQL for a column state) was refused as 'not an attribute', no hint."""
    with pytest.raises(ValueError, match=r"refuses the column 'STATE'.*Did you mean 'state'\?"):
        parse_query("SELECT STATE, COUNT(*) FROM t GROUP BY STATE", attributes=("state", "sex"))
    with pytest.raises(ValueError, match=r"refuses the column 'zip'.*the query\.$"):
        parse_query("SELECT zip, COUNT(*) FROM t GROUP BY zip", attributes=("state", "sex"))
