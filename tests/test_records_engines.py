"""mmopt.records.polars_counts and duckdb_counts: the same integers as the pandas, Parquet and Dask paths on
random tables of tricky columns (hypothesis), through every way in (LazyFrame, DataFrame, relation, engine= on
a path), the schema refusals before any count, and a seeded release from a LazyFrame equal to the pandas one."""

import importlib.util
import itertools
import math
import sys
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

import mmopt
from mmopt.records import Attribute, Domain, marginal_counts, release_marginals
from mmopt.records.engines import candidates, groups, is_duckdb, is_polars

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pl = pytest.importorskip("polars")
duckdb = pytest.importorskip("duckdb")

BIG = 2**53
ENGINES = ("polars lazy", "polars eager", "duckdb relation", "parquet", "parquet duckdb", "parquet polars")


def _same(got: dict, want: dict, where: str) -> None:
    assert set(got) == set(want), where
    for A in want:
        assert got[A].dtype == np.int64 and got[A].shape == want[A].shape, (where, A)
        np.testing.assert_array_equal(got[A], want[A], err_msg=f"{where} {A}")


def _all_engines(df, domain, sets, tmp_path, *, with_pandas=True) -> dict:
    """{engine: counts} of the same records through every path; pandas built the other sources' tables."""
    table = pl.from_pandas(df, nan_to_null=False)  # NaN stays NaN (pandas' missing values become null)
    path = tmp_path / "r.parquet"
    table.write_parquet(path)
    con = duckdb.connect()
    con.register("people", table.to_arrow())
    sources = {"polars lazy": (table.lazy(), "auto"), "polars eager": (table, "auto"),
               "duckdb relation": (con.table("people"), "auto"), "parquet": (path, "auto"),
               "parquet duckdb": (path, "duckdb"), "parquet polars": (path, "polars")}
    if with_pandas:
        sources["pandas"] = (df, "auto")
    return {k: marginal_counts(src, domain, sets, engine=e) for k, (src, e) in sources.items()}


# -- random tables of tricky columns ----------------------------------------------------------------------------
FLOATS = [0.0, -0.0, 0.1, 0.5, 1.5, 2.0, 3.0, -1.25, 18.0, 65.0, 1e300, BIG, math.inf, -math.inf, math.nan, None]
INTS = [0, 1, 2, 3, 5, -1, 17, 18, 65, BIG - 1, BIG, BIG + 1, BIG + 3, -(2**63), 2**63 - 1, None]
TEXT = ["a", "b", "", " a", "A", "é", "NA", "null", "3", "a'b", None]
EDGES = [(0, 18, 65, math.inf), (-math.inf, 0, 1.5, 1e300), (0.0, 0.1, 0.5), (BIG - 1, BIG, BIG + 2, BIG + 4),
         (-1.25, 3)]
NUMBER_CATS = [(0, 1, 2, 5), (0.5, -1.25, 3.0), (BIG, BIG + 1, 5), (0.1, 1e300, 18), (-(2**63), 2**63 - 1, 0),
               (1,)]


@hs.composite
def tables(draw):
    """A DataFrame of 1–60 rows, its domain and some attribute sets: float64/float32/Int64/int64/uint64/bool/
    text/categorical columns under bins, numeric categories and string categories, with missing, NaN, ±0, ±inf
    and out-of-domain values."""
    n = draw(hs.integers(1, 60))
    cols, attrs = {}, []
    kinds = draw(hs.lists(hs.sampled_from(["f64", "f32", "Int64", "int64", "uint64", "bool", "text", "category"]),
                          min_size=1, max_size=4))
    for k, kind in enumerate(kinds):
        name = f"x{k}"
        if kind in ("text", "category"):
            values = draw(hs.lists(hs.sampled_from(TEXT), min_size=n, max_size=n))
            cats = tuple(dict.fromkeys(draw(hs.lists(hs.sampled_from([t for t in TEXT if t is not None]),
                                                     min_size=1, max_size=5))))
            col = pd.Series(values, dtype=object)
            cols[name] = col.astype("category") if kind == "category" else col
            attrs.append(Attribute(name, categories=cats))
            continue
        if kind == "bool":
            cols[name] = pd.Series(draw(hs.lists(hs.booleans(), min_size=n, max_size=n)), dtype=bool)
            attrs.append(Attribute(name, categories=draw(hs.sampled_from([(0, 1), (1,), (1, 0), (0.5, 1)]))))
            continue
        if kind in ("f64", "f32"):
            values = [math.nan if v is None else v for v in draw(hs.lists(hs.sampled_from(FLOATS), min_size=n,
                                                                          max_size=n))]
            with np.errstate(over="ignore"):
                cols[name] = pd.Series(np.array(values, dtype=np.float64 if kind == "f64" else np.float32))
        else:
            values = draw(hs.lists(hs.sampled_from(INTS), min_size=n, max_size=n))
            if kind == "Int64":
                cols[name] = pd.Series(pd.array(values, dtype="Int64"))
            elif kind == "int64":
                cols[name] = pd.Series(np.array([0 if v is None else v for v in values], dtype=np.int64))
            else:  # uint64: past 2⁶³ too
                cols[name] = pd.Series(np.array([2**64 - 1 if v is None else v % 2**64 for v in values],
                                                dtype=np.uint64))
        if draw(hs.booleans()):
            attrs.append(Attribute(name, edges=draw(hs.sampled_from(EDGES))))
        else:
            attrs.append(Attribute(name, categories=draw(hs.sampled_from(NUMBER_CATS))))
    d = len(attrs)
    every = [S for k in range(min(d, 3) + 1) for S in itertools.combinations(range(d), k)]
    sets = draw(hs.lists(hs.sampled_from(every), min_size=1, max_size=6))
    return pd.DataFrame(cols), Domain(tuple(attrs)), sets


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=tables())
def test_every_engine_counts_the_same_integers(case, tmp_path):
    df, domain, sets = case
    got = _all_engines(df, domain, sets, tmp_path)
    for name in ENGINES:
        _same(got[name], got["pandas"], name)


def test_nan_in_a_parquet_file_whose_statistics_leave_it_out(tmp_path):
    """Parquet min/max statistics leave NaN out; DuckDB folded isnan(x) (and x > e_k) to false from them, so
    NaN fell in a bin. Hypothesis found it: [0.0, NaN] under edges (0, 18, 65, inf) counted 2 records."""
    domain = Domain((Attribute("x", edges=(0, 18, 65, math.inf)), Attribute("y", categories=(0.0, 1))))
    df = pd.DataFrame({"x": [0.0, math.nan, 0.0, math.nan], "y": [0.0, 0.0, math.nan, 1.0]})
    for name, got in _all_engines(df, domain, [(0,), (1,), ()], tmp_path).items():
        assert int(got[()]) == 1 and got[(0,)].tolist() == [1, 0, 0] and got[(1,)].tolist() == [1, 0], name
    dk = marginal_counts(duckdb.read_parquet(str(tmp_path / "r.parquet")), domain, [(0,), ()])  # the user's own
    assert int(dk[()]) == 1


def test_counts_equal_a_value_by_value_oracle(tmp_path):
    """Independent of mmopt's coders: the domain module's rule applied to one Python value at a time."""
    rng = np.random.default_rng(0)
    n = 500
    df = pd.DataFrame({"sex": rng.choice(np.array(["F", "M", "X", None], dtype=object), n),
                       "kids": pd.array(rng.choice([0, 1, 2, 5, 7, -1], n), dtype="Int64"),
                       "age": rng.choice([0, 17.9, 18, 30.5, 64, 65, 99.99, 100, 100.5, -0.1, -0.0, np.nan], n)})
    df.loc[rng.random(n) < 0.05, "kids"] = None
    domain = Domain((Attribute("sex", categories=("F", "M")), Attribute("kids", categories=(0, 1, 2, 5)),
                     Attribute("age", edges=(0, 18, 30.5, 65, 100))))

    def cell(a, v):
        if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
            return -1
        if a.edges is None:
            return a.categories.index(v) if v in a.categories else -1
        e = a.edges
        return next((j for j in range(len(e) - 1) if e[j] <= v < e[j + 1] or (j == len(e) - 2 and v == e[-1])), -1)

    x = np.zeros(domain.shape, dtype=np.int64)
    for row in df.astype(object).itertuples(index=False):
        c = [cell(a, v) for a, v in zip(domain.attributes, row, strict=True)]
        if min(c) >= 0:
            x[tuple(c)] += 1
    sets = [(0,), (1, 2), (0, 2), ()]
    want = {A: x.sum(axis=tuple(i for i in range(3) if i not in A)) for A in sets}
    for name, got in _all_engines(df, domain, sets, tmp_path).items():
        _same(got, want, name)


def test_dask_and_parquet_folder_agree(tmp_path):
    dd = pytest.importorskip("dask.dataframe")
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"a": rng.choice(["u", "v", "w", None], 300), "b": rng.normal(1, 2, 300),
                       "c": rng.integers(-1, 4, 300)})
    domain = Domain((Attribute("a", categories=("u", "v")), Attribute("b", edges=(-1, 0, 1, 2, 3)),
                     Attribute("c", categories=(0, 1, 2))))
    sets = [(0, 1), (1, 2), (0, 2)]
    dask = marginal_counts(dd.from_pandas(df, npartitions=4), domain, sets)
    folder = tmp_path / "parts"
    folder.mkdir()
    for k in range(3):
        df.iloc[k::3].to_parquet(folder / f"part-{k}.parquet")
    for engine in ("pyarrow", "duckdb", "polars"):
        _same(marginal_counts(folder, domain, sets, engine=engine), dask, engine)
    _same(marginal_counts(pl.scan_parquet(folder / "*.parquet"), domain, sets), dask, "scan_parquet")
    _same(marginal_counts(duckdb.read_parquet(str(folder / "*.parquet")), domain, sets), dask, "read_parquet")


def test_a_partition_key_only_in_folder_names_is_refused_with_the_remedy(tmp_path):
    """pandas' partition_cols writes state=CA/… folders without the state column in the files: every engine reported
    'no column state' (a helper's probe). The refusal names the layout, and its remedy counts exactly."""
    rng = np.random.default_rng(2)
    df = pd.DataFrame({"state": rng.choice(["CA", "NY", "TX"], 200), "sex": rng.choice(["F", "M"], 200)})
    domain = Domain((Attribute("state", categories=("CA", "NY", "TX")), Attribute("sex", categories=("F", "M"))))
    df.to_parquet(tmp_path / "hive", partition_cols=["state"])
    for engine in ("pyarrow", "duckdb", "polars"):
        with pytest.raises(ValueError, match=r"partitioned Parquet folder whose key column\(s\) \['state'\] .*"
                                             r"pandas\.read_parquet"):
            marginal_counts(tmp_path / "hive", domain, [(0,)], engine=engine)
    got = marginal_counts(pd.read_parquet(tmp_path / "hive"), domain, [(0, 1)])
    _same(got, marginal_counts(df, domain, [(0, 1)]), "pandas.read_parquet of the folder")
    sex_only = Domain((domain.attributes[1],))  # a domain without the key reads the files as before
    _same(marginal_counts(tmp_path / "hive", sex_only, [(0,)]), marginal_counts(df, sex_only, [(0,)]), "no key")


def test_text_under_a_numeric_attribute_is_parsed_as_in_a_csv(tmp_path):
    """A Polars or DuckDB text column under a numeric attribute is parsed (integers exactly), as pyarrow parses a
    CSV column; unparseable text is dropped with the values module's warning."""
    domain = Domain((Attribute("id", categories=(BIG, BIG + 1, 5)), Attribute("age", edges=(0, 18, 65, math.inf))))
    text = pl.DataFrame({"id": ["9007199254740993", " 5 ", "9007199254740992", "x", None, "5.0"],
                         "age": ["30", "1e1", "inf", "70", "12", "-1"]})
    path = tmp_path / "r.csv"
    text.write_csv(path)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*holds values that are not numbers", category=UserWarning)
        want = marginal_counts(path, domain, [(0, 1)])
        assert want[(0, 1)].sum() == 3  # rows 1–3 kept; "x", the null and age −1 dropped; "5.0" is the number 5
        con = duckdb.connect()
        con.register("t", text.to_arrow())
        for name, got in {"lazy": marginal_counts(text.lazy(), domain, [(0, 1)]),
                          "relation": marginal_counts(con.table("t"), domain, [(0, 1)]),
                          "csv duckdb": marginal_counts(path, domain, [(0, 1)], engine="duckdb"),
                          "csv polars": marginal_counts(path, domain, [(0, 1)], engine="polars")}.items():
            _same(got, want, name)


def test_true_and_false_in_a_csv_count_as_the_bool_column_does(tmp_path):
    """pd.read_csv reads True/False as bools, which count as 1/0 under numeric categories; the CSV paths (pyarrow,
    DuckDB, Polars) read them as text and dropped them: the same file gave [1, 2] and [0, 0]."""
    df = pd.DataFrame({"flag": [True, False, True, None], "x": [1, 2, 1, 1]})
    path = tmp_path / "r.csv"
    df.to_csv(path, index=False)  # True, False, True, "" (missing)
    path2 = tmp_path / "lower.csv"
    path2.write_text("flag,x\ntrue,1\nFALSE,2\nTRUE,1\n,1\n")  # as DuckDB and Polars write them, and upper case
    domain = Domain((Attribute("flag", categories=(0, 1)), Attribute("x", edges=(0, 1.5, 3))))
    want = marginal_counts(pd.read_csv(path), domain, [(0, 1)])
    assert want[(0, 1)].tolist() == [[0, 1], [2, 0]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing dropped, so nothing said
        for engine in ("auto", "duckdb", "polars"):
            for p in (path, path2):
                _same(marginal_counts(p, domain, [(0, 1)], engine=engine), want, f"{engine} {p.name}")
        _same(marginal_counts(pd.DataFrame({"flag": ["True", "false", "TRUE", None], "x": [1, 2, 1, 1]}), domain,
                              [(0, 1)]), want, "object column of text")


def test_records_that_change_between_the_two_reads_are_refused_not_undercounted():
    """Numeric categories read the records twice (candidates, then counts): a sample drawn anew on each read had
    100 records counted as 8–12, and one record's value decided whether others counted (a helper's probe). Now a
    value the first read did not list is refused with the remedy; materialised once, the same sample counts 100."""
    domain = Domain((Attribute("x", categories=tuple(range(1000))),))
    con = duckdb.connect()
    con.sql("create table t as select i::INTEGER as x from range(1000) r(i)")
    # 1,000 distinct values, ~100 drawn per read: the two reads list the same values with probability ~10⁻¹⁴⁰
    with pytest.raises(ValueError, match=r"DuckDB relation gave different records on two reads.*create\('t'\)"):
        marginal_counts(con.sql("select * from t where random() < 0.1"), domain, [()])
    con.sql("select * from t using sample 100 rows").create("drawn")
    assert int(marginal_counts(con.table("drawn"), domain, [()])[()]) == 100
    lf = pl.LazyFrame({"x": list(range(1000))}).select(pl.col("x").sample(n=100))
    with pytest.raises(ValueError, match=r"Polars frame gave different records on two reads.*lf\.collect\(\)"):
        marginal_counts(lf, domain, [()])
    assert int(marginal_counts(lf.collect(), domain, [()])[()]) == 100
    # bins and string categories are one read: a fresh sample counts whole (nothing to refuse)
    bins = Domain((Attribute("x", edges=(0, 500, 1000)),))
    assert int(marginal_counts(con.sql("select * from t using sample 100 rows"), bins, [()])[()]) == 100


def test_a_decimal_wider_than_38_digits_is_refused_by_duckdb_and_read_exactly_by_pyarrow(tmp_path):
    """DuckDB reads decimal(76, 38) as a float that is not the nearest (0.1 as 0.09999999999999999): the category
    0.1 counted 0 (a helper's probe). Refused with the engine that reads it; pyarrow counts every value."""
    import decimal
    values = [decimal.Decimal(t) for t in ("0.1", "0.2", "0.3", "2.3")]
    path = tmp_path / "wide.parquet"
    pq.write_table(pa.table({"d": pa.array(values, type=pa.decimal256(76, 38))}), path)
    domain = Domain((Attribute("d", categories=(0.1, 0.2, 0.3, 2.3)),))
    assert marginal_counts(path, domain, [(0,)])[(0,)].tolist() == [1, 1, 1, 1]
    with pytest.raises(ValueError, match=r"column 'd' of .* decimal of more than 38 digits .*engine='pyarrow'"):
        marginal_counts(path, domain, [(0,)], engine="duckdb")


def test_column_names_that_polars_reads_as_patterns_are_taken_literally(tmp_path):
    """pl.col('^a$') is a regex (it counted column 'a') and pl.col('*') every column (a helper's probe)."""
    df = pd.DataFrame({"^a$": [1, 2, 2], "a": [2, 2, 2], "*": [1, 1, 2]})
    domain = Domain((Attribute("^a$", categories=(1, 2)), Attribute("*", edges=(0, 1.5, 3))))
    want = marginal_counts(df, domain, [(0,), (1,)])
    assert want[(0,)].tolist() == [1, 2] and want[(1,)].tolist() == [2, 1]
    for name, got in _all_engines(df, domain, [(0,), (1,)], tmp_path, with_pandas=False).items():
        _same(got, want, name)


@pytest.mark.parametrize("text", ['age,sex\n30, "F"\n50,"M"\n', 'age,sex\n30,"F" \n50,"M"\n',
                                  'sex,age\n "F",30\n"M",50\n'])
def test_duckdb_refuses_spaces_outside_quotes_that_it_alone_strips(tmp_path, text):
    """30, "F": DuckDB read F, pyarrow, Polars and pandas ' "F"' (RFC 4180), so the counts differed silently."""
    path = tmp_path / "r.csv"
    path.write_text(text)
    domain = Domain((Attribute("age", edges=(0, 100)), Attribute("sex", categories=("F", "M"))))
    want = marginal_counts(pd.read_csv(path), domain, [(1,)])
    assert want[(1,)].tolist() == [0, 1]  # the spaced cell is not "F"
    for engine in ("auto", "polars") if text.count('" \n') == 0 else ("auto",):  # Polars refuses '"F" ' itself
        _same(marginal_counts(path, domain, [(1,)], engine=engine), want, engine)
    with pytest.raises(ValueError, match=r"quoted cell with spaces outside its quotes .*engine='pyarrow'"):
        marginal_counts(path, domain, [(1,)], engine="duckdb")
    path.write_text('age,sex\n30,"F, ok"\n50,"M"\n')  # spaces inside the quotes are text: read
    assert marginal_counts(path, domain, [(1,)], engine="duckdb")[(1,)].tolist() == [0, 1]


def test_csv_through_every_engine(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text('zip,n,w\n007,1,0.5\n7,2,x\n010,3,\n"NA",1,0.5\n"0""1",2,0.50\n\n010,5,1e-1\nnull,1,0.1\n')
    domain = Domain((Attribute("zip", categories=("007", "010", "NA", '0"1')), Attribute("n", categories=(1, 2, 3)),
                     Attribute("w", categories=(0.1, 0.5))))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*holds values that are not numbers", category=UserWarning)
        want = marginal_counts(path, domain, [(0, 1, 2)])
        # "7" is not "007"; "NA" is a declared category, so a value, but "null" is missing; "x" and "" dropped
        assert want[(0, 1, 2)].sum() == 3 and want[(0, 1, 2)][2, 0, 1] == 1
        for engine in ("duckdb", "polars"):
            _same(marginal_counts(path, domain, [(0, 1, 2)], engine=engine), want, engine)


def test_csv_null_strings_that_the_domain_declares_are_values(tmp_path):
    """pyarrow's null strings ("NA", "N/A", "null", …) are missing values, unless the domain declares one as a
    category: then that cell is counted, by every engine; a numeric column's "NA" stays missing (a record with a
    missing value is dropped whole, the domain's rule)."""
    path = tmp_path / "c.csv"
    path.write_text("continent,answer,age\nNA,N/A,30\nEU,yes,40\nNA,N/A,50\nNA,null,50\nAS,no,NA\n")
    domain = Domain((Attribute("continent", categories=("NA", "EU", "AS")),
                     Attribute("answer", categories=("yes", "no", "N/A")), Attribute("age", edges=(0, 100))))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing here is text in a numeric column
        for engine in ("auto", "duckdb", "polars"):
            got = marginal_counts(path, domain, [(0,), (1,), (2,)], engine=engine)
            assert got[(0,)].tolist() == [2, 1, 0], engine  # the last two records are dropped:
            assert got[(1,)].tolist() == [1, 0, 2], engine  # "null" is a missing answer,
            assert got[(2,)].tolist() == [3], engine  # "NA" a missing age


def test_refusals_before_any_count(tmp_path):
    domain = Domain((Attribute("sex", categories=("F", "M")), Attribute("age", edges=(0, 18, 65))))
    lf = pl.LazyFrame({"sex": ["F", "M"], "age": [30, 70]})
    con = duckdb.connect()
    con.execute("create table people as select 'F' as sex, 30 as age, DATE '2020-01-01' as born")
    with pytest.raises(ValueError, match=r"has no column 'age' .*Its columns are \['sex'\]"):
        marginal_counts(lf.select("sex"), domain, [(0,)])
    with pytest.raises(ValueError, match="column 'age' of dtype Datetime.*needs numbers"):
        marginal_counts(lf.with_columns(pl.datetime(2020, 1, 1).alias("age")), domain, [(0,)])
    with pytest.raises(ValueError, match="column 'sex' of dtype number, but .* needs strings"):
        marginal_counts(lf.with_columns(sex=pl.lit(1.0)), domain, [(0,)])
    with pytest.raises(ValueError, match="column 'age' of dtype DATE"):
        marginal_counts(con.sql("select sex, born as age from people"), domain, [(0,)])
    with pytest.raises(ValueError, match="has no column 'age'"):
        marginal_counts(con.sql("select sex from people"), domain, [(0,)])
    with pytest.raises(ValueError, match="more than one column named 'age'"):
        marginal_counts(con.sql("select sex, age, age from people"), domain, [(0,)])
    (tmp_path / "bad.parquet").write_text("not a Parquet file")
    with pytest.raises(ValueError, match="reading the records failed"):  # the scan fails when the plan runs
        marginal_counts(pl.scan_parquet(tmp_path / "bad.parquet", schema={"sex": pl.String, "age": pl.Int64}),
                        domain, [(0,)])
    with pytest.raises(ValueError, match="reading the records failed"):
        marginal_counts(duckdb.sql("select 'F' as sex, error('disk on fire') as age"), domain, [(0,)])
    with pytest.raises(ValueError, match=r"'engine' parameter of marginal_counts must be one of \['auto'"):
        marginal_counts(lf, domain, [(0,)], engine="spark")
    with pytest.raises(ValueError, match="chooses who reads a file.*Leave engine='auto'"):
        marginal_counts(lf, domain, [(0,)], engine="duckdb")
    with pytest.raises(TypeError, match="a polars LazyFrame or DataFrame, or a DuckDB relation"):
        marginal_counts([("F", 30)], domain, [(0,)])


def test_a_missing_package_is_named(tmp_path, monkeypatch):
    path = tmp_path / "r.parquet"
    pd.DataFrame({"sex": ["F"], "age": [30]}).to_parquet(path)
    domain = Domain((Attribute("sex", categories=("F", "M")), Attribute("age", edges=(0, 18, 65))))
    monkeypatch.setitem(sys.modules, "duckdb", None)
    with pytest.raises(ImportError, match=r"needs duckdb\. Install it with: pip install duckdb"):
        marginal_counts(path, domain, [(0,)], engine="duckdb")
    monkeypatch.setitem(sys.modules, "polars", None)
    with pytest.raises(ImportError, match=r"needs polars\. Install it with: pip install polars"):
        marginal_counts(path, domain, [(0,)], engine="polars")


def test_type_checks_import_nothing():
    assert is_polars(pl.LazyFrame()) and is_polars(pl.DataFrame()) and not is_polars(pd.DataFrame())
    assert is_duckdb(duckdb.sql("select 1")) and not is_duckdb(pl.DataFrame()) and not is_duckdb("records.parquet")


def test_groups_and_candidates():
    shape = (10, 10, 10, 10)
    plan = groups([(0, 1), (2, 3), (0, 2)], shape, limit=1000)  # {0,1,2} has 1,000 cells; 4 attributes 10⁴
    assert sorted(A for _, members in plan for A in members) == [(0, 1), (0, 2), (2, 3)]
    assert all(math.prod(shape[i] for i in U) <= 1000 and all(set(A) <= set(U) for A in members)
               for U, members in plan) and len(plan) == 2
    # every value mmopt keeps for category 0.1 (float64 0.1, float32 0.1, float16 0.1) is a candidate
    assert candidates(Attribute("w", categories=(0.1, 2))) == sorted({0.1, float(np.float32(0.1)),
                                                                      float(np.float16(0.1)), 2.0})
    # float32(1e300) is inf, but a value's cell is its own: a float32 inf is not the category 1e300, in pandas as in
    # the engines (hypothesis found the engines' disagreement when the rule read the column's type)
    assert candidates(Attribute("w", categories=(1e300,))) == [1e300, math.inf]
    df = pd.DataFrame({"w": np.array([np.inf, 0.0, -np.inf, 0.5], dtype=np.float32)})
    want = marginal_counts(df, Domain((Attribute("w", categories=(1e300, 0.5)),)), [(0,)])
    assert want[(0,)].tolist() == [0, 1]
    for source in (pl.from_pandas(df).lazy(), duckdb.from_df(df)):
        _same(marginal_counts(source, Domain((Attribute("w", categories=(1e300, 0.5)),)), [(0,)]), want, "inf")


def test_release_from_a_lazyframe_equals_the_pandas_release():
    rng = np.random.default_rng(2)
    df = pd.DataFrame({"a": rng.choice(["u", "v", "w"], 2000), "b": rng.normal(1, 2, 2000),
                       "c": rng.integers(0, 4, 2000)})
    domain = Domain((Attribute("a", categories=("u", "v", "w")), Attribute("b", edges=(-1, 0, 1, 2, 3)),
                     Attribute("c", categories=(0, 1, 2, 3))))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*seed=.*numpy's seeded generator", category=UserWarning)
        want = release_marginals(df, domain, 2, mmopt.Privacy(1.0, 1e-9), seed=3)
        for source in (pl.from_pandas(df).lazy(), duckdb.from_arrow(pa.Table.from_pandas(df))):
            got = release_marginals(source, domain, 2, mmopt.Privacy(1.0, 1e-9), seed=3)
            assert set(got.marginals) == set(want.marginals)
            for A in want.marginals:
                np.testing.assert_array_equal(got.marginals[A], want.marginals[A])
            assert got.expected_total == want.expected_total


def test_long_category_lists_enums_and_empty_tables(tmp_path):
    """Past 256 values Polars maps through replace_strict, not a when-chain; an Enum column is compared only with
    its own categories; a table without rows gives zeros."""
    rng = np.random.default_rng(4)
    n = 3000
    domain = Domain((Attribute("zip", categories=tuple(f"z{j:03d}" for j in range(300))),
                     Attribute("code", categories=tuple(range(0, 900, 3))),
                     Attribute("sex", categories=("F", "M", "U"))))
    df = pd.DataFrame({"zip": rng.choice([f"z{j:03d}" for j in range(320)] + [None], n),
                       "code": rng.integers(-5, 905, n),
                       "sex": pd.Categorical(rng.choice(["F", "M", "X"], n), categories=["F", "M", "X"])})
    sets = [(0, 1), (1, 2), (0,)]
    got = _all_engines(df, domain, sets, tmp_path)
    assert got["pandas"][(1, 2)].sum() > 0
    for name in ENGINES:
        _same(got[name], got["pandas"], name)
    enum = pl.from_pandas(df).with_columns(pl.col("sex").cast(pl.Enum(["F", "M", "X"])))  # no "U" in the Enum
    _same(marginal_counts(enum.lazy(), domain, sets), got["pandas"], "enum")
    empty = marginal_counts(enum.lazy().head(0), domain, sets)
    con = duckdb.connect()
    con.register("t", enum.to_arrow())
    none = marginal_counts(con.sql("select * from t where false"), domain, sets)
    for counts in (empty, none):
        assert all(c.sum() == 0 and c.shape == got["pandas"][A].shape for A, c in counts.items())


@pytest.mark.parametrize("categories, ints", [
    ((5, BIG + 1, 2**70), [5, BIG, BIG + 1]),        # one category past int64
    ((2**62, 2**62 + 1), [2**62, 2**62 + 1, 2**62 + 1]),  # 64-bit ids
    ((0.5, BIG), [BIG + 1, BIG]),                   # one category not a whole number
])
def test_integers_are_exact_whatever_the_other_categories(categories, ints, tmp_path):
    # with one category ≥ 2⁶² or one non-whole category, the attribute was compared in float64 on every engine:
    # 2⁵³ and 2⁵³ + 1 (or 2⁶² and 2⁶² + 1) shared a cell, and a record outside the domain was counted inside it
    domain = Domain((Attribute("id", categories=categories),))
    df = pd.DataFrame({"id": np.array(ints, dtype=np.int64)})
    want = {(0,): np.array([sum(v == c for v in ints) for c in categories], dtype=np.int64)}  # Python: exact
    for engine, got in _all_engines(df, domain, [(0,)], tmp_path).items():
        _same(got, want, engine)


def test_an_empty_csv_cell_is_a_declared_empty_category_on_every_engine(tmp_path):
    """A domain declaring "" a category counts empty cells as that value (pyarrow, DuckDB); Polars read them as null
    whatever its null_values said, and dropped those records without a word (a helper's probe)."""
    path = tmp_path / "e.csv"
    path.write_text('answer,k\nyes,1\n,1\nno,2\n"",2\nyes,2\n')
    declared = Domain((Attribute("answer", categories=("yes", "no", "")), Attribute("k", categories=(1, 2))))
    undeclared = Domain((Attribute("answer", categories=("yes", "no")), Attribute("k", categories=(1, 2))))
    for engine in ("auto", "duckdb", "polars"):
        assert marginal_counts(path, declared, [(0,)], engine=engine)[(0,)].tolist() == [2, 1, 2], engine
        assert marginal_counts(path, undeclared, [(0,)], engine=engine)[(0,)].tolist() == [2, 1], engine


def test_more_than_63_groups_count_the_same_integers(tmp_path, monkeypatch):
    """The DuckDB query told its grouping sets apart by GROUPING(k0, …), which DuckDB refuses past 63 arguments:
    all 66 pairs of 12 attributes of 170 categories (each pair over 2²² cells with any other, so its own group)
    failed from a DuckDB source while pandas counted them (a helper's probe). Forced here to one set per group,
    on 12 small attributes, so that 66 pairs make 66 groups; every engine must give pandas' integers."""
    from mmopt.records import engines

    plan = engines.groups
    monkeypatch.setattr(engines, "groups", lambda top, shape: plan(top, shape, 0))  # each set in its own group
    rng = np.random.default_rng(7)
    domain = Domain(tuple(Attribute(f"a{i}", categories=(0, 1, 2)) for i in range(12)))
    df = pd.DataFrame({f"a{i}": rng.integers(0, 4, 300) for i in range(12)})  # 3: outside the domain, dropped
    sets = list(itertools.combinations(range(12), 2))
    assert len(engines.groups(sets, domain.shape)) == 66
    got = _all_engines(df, domain, sets, tmp_path)
    for name in ENGINES:
        _same(got[name], got["pandas"], name)


def test_duckdb_bins_a_text_column_by_sql_checked_against_mmopts_own_parse():
    """A text column under bins was a CASE over every distinct text (181 s for 200,000; pandas 0.3 s, a helper's
    probe): DuckDB's TRY_CAST is binned in SQL, and the texts where it and mmopt's parse differ are mapped
    explicitly, so the counts are pandas' (the oracle) and the SQL does not grow with the distinct texts."""
    from mmopt.records import duckdb_counts as dc
    rng = np.random.default_rng(0)
    odd = ["1,5", " 12 ", "1e5", "\u0661", "nan", "-0", "18", "65.0", "abc", "", "inf", "0x10", "1_000"]
    texts = [f"{v:.6f}" for v in rng.uniform(-5, 110, 3000)] + odd
    frame = pd.DataFrame({"age": pd.Series(texts, dtype=object)})
    domain = Domain((Attribute("age", edges=(0, 18, 65, 100)),))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*holds values that are not numbers", category=UserWarning)
        want = marginal_counts(frame, domain, [(0,)])[(0,)]
        con = duckdb.connect()
        con.register("t", frame)
        assert marginal_counts(con.table("t"), domain, [(0,)])[(0,)].tolist() == want.tolist()
        sql = dc.codes(con.table("t"), domain, caller="t")[0]
    assert len(sql) < 20_000   # the odd texts' exceptions at most, not 3,000 branches


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz"])
def test_a_blank_line_is_no_record_when_every_attribute_declares_empty(tmp_path, suffix):
    """Polars reads a blank line as a record of empty cells: a one-column file's two blank lines were counted as
    two records of the declared category "" (pyarrow, DuckDB and pandas skip them). Polars refuses such a file
    (it cannot tell a blank line from ",,"); a domain with an attribute not declaring "" drops the record anyway."""
    import gzip
    text = 'answer\nyes\n\n""\nno\r\n\r\n'
    path = tmp_path / f"b{suffix}"
    path.write_bytes(gzip.compress(text.encode()) if suffix.endswith(".gz") else text.encode())
    declared = Domain((Attribute("answer", categories=("yes", "no", "")),))
    assert marginal_counts(path, declared, [(0,)])[(0,)].tolist() == [1, 1, 1]  # the quoted "" is one record
    with pytest.raises(ValueError, match="blank line.*engine='pyarrow'"):
        marginal_counts(path, declared, [(0,)], engine="polars")
    clean = tmp_path / "c.csv"
    clean.write_text('answer\nyes\n""\nno\n')
    assert marginal_counts(clean, declared, [(0,)], engine="polars")[(0,)].tolist() == [1, 1, 1]
    two = tmp_path / "two.csv"
    two.write_text('answer,k\nyes,1\n\n"",2\nno,1\n\n')
    domain = Domain((Attribute("answer", categories=("yes", "no", "")), Attribute("k", categories=(1, 2))))
    for engine in ("auto", "polars"):
        assert marginal_counts(two, domain, [(0,)], engine=engine)[(0,)].tolist() == [1, 1, 1], engine


@pytest.mark.parametrize("setup", ["CREATE TABLE people (state VARCHAR COLLATE NOCASE, n VARCHAR)",
                                   "SET default_collation='nocase.noaccent'; CREATE TABLE people (state VARCHAR, "
                                   "n VARCHAR)"])
def test_duckdb_compares_text_byte_for_byte_whatever_the_collation(setup):
    """A helper's probe: a NOCASE column (or connection default) merged 'CA' and 'ca' in DuckDB's = and DISTINCT,
    1,000 counted where pandas counts 500; NOACCENT merged 'É' into 'é'. Text bins (n) go the same way."""
    D = Domain((Attribute("state", categories=("CA", "ca", "é")), Attribute("n", edges=(0, 10, 20))))
    con = duckdb.connect()
    for statement in setup.split(";"):
        con.execute(statement)
    con.execute("INSERT INTO people VALUES ('CA', '5'), ('CA', '15'), ('ca', '5'), ('É', '5'), ('é', '15')")
    got = marginal_counts(con.table("people"), D, [(0, 1)])[(0, 1)]
    want = marginal_counts(con.table("people").df(), D, [(0, 1)])[(0, 1)]
    assert got.tolist() == want.tolist() == [[1, 1], [1, 0], [0, 1]]


def test_a_string_view_column_is_refused_with_a_cast_that_works():
    """A helper's probe: the refusal said the column 'needs strings' of a column of strings, with no way out."""
    D = Domain((Attribute("s", categories=("a", "b")),))
    df = pd.DataFrame({"s": pd.Series(["a", "b", "a", None], dtype=pd.ArrowDtype(pa.string_view()))})
    with pytest.raises(ValueError, match=r"string_view.*cast it to plain strings in Arrow") as caught:
        marginal_counts(df, D, [(0,)])
    remedy = str(caught.value).split("first: ")[1].rstrip(".")
    exec(remedy, {"pd": pd, "pa": pa, "df": df})  # the remedy as printed
    assert marginal_counts(df, D, [(0,)])[(0,)].tolist() == [2, 1]


def test_duckdb_maps_many_string_categories_by_exact_bytes():
    """String categories are an ENUM cast (a hash lookup) where a CASE of one WHEN per category cost rows ×
    categories (13 CPU s on 20,000 × 100,000); the map is the categories' exact bytes, even under NOCASE."""
    rng = np.random.default_rng(0)
    cats = tuple(f"tract{i:05d}" for i in range(3000)) + ("é", "it's", "", "CA", "ca", "日本", "a b")
    D1 = Domain((Attribute("a", categories=cats),))
    values = list(cats) + ["nope", "Ca", "TRACT00001", None]
    df = pd.DataFrame({"a": [values[i] for i in rng.integers(0, len(values), 20_000)]})
    want = marginal_counts(df, D1, [(0,)])[(0,)]
    con = duckdb.connect()
    con.sql("SET default_collation='nocase'")
    got = marginal_counts(con.from_df(df), D1, [(0,)])[(0,)]
    assert np.array_equal(got, want) and want.sum() < len(df) and want[cats.index("ca")] > 0


def test_an_engine_s_message_that_can_quote_a_record_is_withheld(tmp_path):
    """DuckDB's "Could not convert string 'Jane Doe HIV+' to INT32" and Polars' "failed … for 1 out of 3 values:
    ["Jane Doe HIV+"]" reached the user of a release, one record deciding it (a helper's audit): withheld, the
    class and the remedy said; a message of a class that names only columns passes on."""
    domain = Domain((Attribute("sex", categories=("F", "M")), Attribute("age", edges=(0, 18, 65, 120))))
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES ('F', '30'), ('M', 'Jane Doe HIV+'), ('F', '70')) v(sex, a)")
    lf = pl.LazyFrame({"sex": ["F", "M", "F"], "a": ["30", "Jane Doe HIV+", "70"]})
    bad = {"DuckDB": con.sql("SELECT sex, CAST(a AS INTEGER) AS age FROM t"),
           "Polars": lf.select("sex", pl.col("a").cast(pl.Int64, strict=True).alias("age"))}
    for engine, source in bad.items():
        with pytest.raises(ValueError, match=f"reading the records failed.*{engine}'s message is withheld") as e:
            release_marginals(source, domain, 1, mmopt.Privacy(1.0, 1e-6))
        assert "Jane" not in str(e.value)
    from mmopt.records.engines import said
    assert said(duckdb.BinderException("column nope"), "DuckDB", "") == "column nope"  # names a column: passed on


def test_duckdb_columns_equal_but_for_case_are_refused_not_mixed_up(tmp_path):
    """DuckDB matches names ignoring case: of columns Sex and sex the count read Sex ([0, 3] for [2, 1]), where
    pandas, Polars and Parquet read sex (a helper's audit)."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t (a VARCHAR, b VARCHAR)")
    con.execute("INSERT INTO t VALUES ('M', 'F'), ('M', 'F'), ('M', 'M')")
    domain = Domain((Attribute("sex", categories=("F", "M")),))
    with pytest.raises(ValueError, match="columns 'sex' and 'Sex', which DuckDB cannot tell apart"):
        marginal_counts(con.sql('SELECT a AS "Sex", b AS "sex" FROM t'), domain, [(0,)])
    assert marginal_counts(con.sql('SELECT b AS "sex" FROM t'), domain, [(0,)])[(0,)].tolist() == [2, 1]
    path = tmp_path / "twins.parquet"
    pd.DataFrame({"Sex": ["M", "M", "M"], "sex": ["F", "F", "M"]}).to_parquet(path)
    assert marginal_counts(path, domain, [(0,)])[(0,)].tolist() == [2, 1]
    with pytest.raises(ValueError, match="columns 'sex' and 'Sex', which DuckDB cannot tell apart"):
        marginal_counts(path, domain, [(0,)], engine="duckdb")  # DuckDB renamed it sex_1: 'no column sex' before


def test_a_csv_cell_that_is_not_utf8_is_counted_alike_by_polars(tmp_path):
    """Polars refused a CSV with a Latin-1 cell, where pyarrow reads it as missing: one record decided whether the
    file was counted (a helper's audit). Read lossily, the cell is no category: the same counts."""
    domain = Domain((Attribute("name", categories=("x", "é")), Attribute("b", categories=(1, 2, 3))))
    path = tmp_path / "latin.csv"
    path.write_bytes(b"name,b,other\nx,1,p\n\xe9,2,q\n\xc3\xa9,3,\xff\nx,2,r\n")
    want = marginal_counts(path, domain, [(0, 1)])[(0, 1)].tolist()
    assert want == [[1, 1, 0], [0, 0, 1]]
    assert marginal_counts(path, domain, [(0, 1)], engine="polars")[(0, 1)].tolist() == want


def test_polars_refuses_a_csv_when_a_category_holds_the_replacement_character(tmp_path):
    """Polars reads a non-UTF-8 cell lossily, as U+FFFD: under a category holding it the cell counted, where
    pyarrow and DuckDB drop it (a review)."""
    domain = Domain((Attribute("name", categories=("x", "caf\ufffd")),))
    path = tmp_path / "latin.csv"
    path.write_bytes(b"name\nx\ncaf\xe9\n")
    assert marginal_counts(path, domain, [(0,)])[(0,)].tolist() == [1, 0]
    with pytest.raises(ValueError, match="U\\+FFFD.*engine='pyarrow'"):
        marginal_counts(path, domain, [(0,)], engine="polars")


def test_duckdb_refuses_case_twins_in_a_later_file_of_a_parquet_folder(tmp_path):
    """The twin check read the folder's first file only: DuckDB counted Sex in a later file ([4, 4] for [6, 2]; a
    review)."""
    folder = tmp_path / "people"
    folder.mkdir()
    pq.write_table(pa.table({"sex": ["F", "F"]}), folder / "a.parquet")
    pq.write_table(pa.table({"sex": ["F", "F", "M"]}), folder / "b0.parquet")
    domain = Domain((Attribute("sex", categories=("F", "M")),))
    assert marginal_counts(folder, domain, [(0,)], engine="duckdb")[(0,)].tolist() == [4, 1]
    pq.write_table(pa.table({"Sex": ["M", "M", "M"], "sex": ["F", "F", "M"]}), folder / "c.parquet")
    with pytest.raises(ValueError, match="columns 'sex' and 'Sex', which DuckDB cannot tell apart"):
        marginal_counts(folder, domain, [(0,)], engine="duckdb")


def test_polars_refuses_a_csv_of_bare_cr_line_ends(tmp_path):
    """Polars read a CR-only file as one line: zero records, or a refusal listing the records' values as its
    columns (a review); pyarrow and DuckDB read it."""
    domain = Domain((Attribute("a", categories=(1, 2)), Attribute("b", categories=("x", "y"))))
    path = tmp_path / "mac.csv"
    path.write_bytes(b"a,b,note\r1,x,secret\r2,y,q\r")
    assert marginal_counts(path, domain, [(0,)])[(0,)].tolist() == [1, 1]
    with pytest.raises(ValueError, match="bare CR.*engine='pyarrow'") as e:
        marginal_counts(path, domain, [(0,)], engine="polars")
    assert "secret" not in str(e.value)


def test_duckdb_text_under_numbers_is_coded_as_pandas_codes_it():
    """The two other maps of texts (text under numeric categories, text bins whose DuckDB cast differs from
    mmopt's parse) go through the same IN-and-ENUM lookup as string categories, with codes that are not 0, 1, …"""
    D = Domain((Attribute("k", categories=(3, 1, 2)), Attribute("x", edges=(0, 10, 20))))
    k = ["1", "01", " 2", "2.0", "3", "x", None, "+3", "1e0", "2"]
    x = ["5", " 15", "1e1", "nan", "abc", "-0", "0x5", "19.5", None, "20"]
    df = pd.DataFrame({"k": k * 3, "x": x * 3})
    want = marginal_counts(df, D, [(0, 1)])[(0, 1)]
    con = duckdb.connect()
    got = marginal_counts(con.from_df(df), D, [(0, 1)])[(0, 1)]
    assert np.array_equal(got, want) and 0 < want.sum() < len(df)


# -- a near miss of a string category ("f" for "F") ----------------------------------------------------------------
NEAR = "case or surrounding spaces"


def _near_misses(record) -> set:
    return {str(w.message) for w in record if issubclass(w.category, mmopt.DataWarning) and NEAR in str(w.message)}


def _each_engine(df, domain, sets, tmp_path, *, full: bool = True) -> dict:
    """{engine: a thunk counting ``df``'s marginals ``sets``}: pandas, a LazyFrame, a relation, a Parquet file through
    each engine; ``full``: also a categorical column, Dask partitions (when installed) and a CSV through each engine."""
    df.to_parquet(tmp_path / "r.parquet")
    con = duckdb.connect()
    con.register("people", pl.from_pandas(df, nan_to_null=False).to_arrow())
    sources = {"pandas": (df, "auto"), "polars lazy": (pl.from_pandas(df, nan_to_null=False).lazy(), "auto"),
               "duckdb relation": (con.table("people"), "auto")}
    kinds = ("parquet", "csv") if full else ("parquet",)
    if full:
        df.to_csv(tmp_path / "r.csv", index=False)
        sources["pandas categorical"] = (df.astype({"sex": "category"}), "auto")
        if importlib.util.find_spec("dask"):
            import dask.dataframe as dd
            sources["dask"] = (dd.from_pandas(df, npartitions=3), "auto")
    for engine in ("pyarrow", "polars", "duckdb"):
        for kind in kinds:
            sources[f"{kind} {engine}"] = (tmp_path / f"r.{kind}", engine)
    # con=con: the relation's connection lives as long as the thunk (DuckDB closes it when it is collected)
    return {k: (lambda s=s, e=e, con=con: marginal_counts(s, domain, sets, engine=e)) for k, (s, e) in
            sources.items()}


def _python_counts(sex, age, domain) -> dict:
    """The oracle: exact matches counted one Python value at a time."""
    cats, ages = domain.attributes[0].categories, domain.attributes[1].categories
    kept = [(s, a) for s, a in zip(sex, age, strict=True) if s in cats and a in ages]
    return {(0,): [sum(s == c for s, _ in kept) for c in cats],
            (0, 1): [[sum(r == (c, a) for r in kept) for a in ages] for c in cats]}


SEX_AGE = Domain((Attribute("sex", categories=("F", "M")), Attribute("age", categories=(1, 2))))


def test_a_near_miss_of_a_string_category_is_said_on_every_engine(tmp_path):
    """"f", " F" and "m " under the categories ("F", "M") were dropped without a word (a newcomer's stumble): every
    engine now says it once per category, naming the column and the category, never the text or how many; the counts
    are unchanged (exact matches only)."""
    sex = ["F", "f", " F", "m ", "M", "X", None, "F", "M", "f", "F"]
    age = [1, 2, 1, 2, 1, 1, 2, 9, 2, 1, 2]
    df = pd.DataFrame({"sex": sex, "age": age})
    want = _python_counts(sex, age, SEX_AGE)
    assert want == {(0,): [2, 2], (0, 1): [[1, 1], [1, 1]]}  # the oracle itself: "F" at age 9 dropped too
    said = None
    for where, count in _each_engine(df, SEX_AGE, [(0,), (0, 1)], tmp_path).items():
        with pytest.warns(mmopt.DataWarning, match=r"Column 'sex' .*category 'F' only in case or surrounding") as w:
            got = count()
        assert {A: c.tolist() for A, c in got.items()} == want, where
        near = _near_misses(w)
        assert len(near) == 2 and any("category 'M'" in m for m in near), (where, near)
        assert len([x for x in w if NEAR in str(x.message)]) == 2, where  # once per category, not per batch
        assert not any(t in m for m in near for t in ("'f'", "' F'", "'m '", "'X'", "2", "3")), near
        assert all("df['sex'].str.strip().str.upper()" in m for m in near), near
        said = near if said is None else said
        assert near == said, where  # the same words on every engine


def test_a_dropped_value_that_is_no_near_miss_is_not_said(tmp_path):
    """"X", "FF", "F." and a missing value are dropped as before, without the near-miss warning; cleaned data raises
    no DataWarning at all, on every engine."""
    sex = ["F", "X", "FF", "F.", "M", "M", None, "M"]
    age = [1, 2, 1, 2, 1, 2, 1, 2]
    cleaned = ["F", "M", "F", "F", "M", "M", "M", "F"]
    for values in (sex, cleaned):
        want = _python_counts(values, age, SEX_AGE)
        for where, count in _each_engine(pd.DataFrame({"sex": values, "age": age}), SEX_AGE, [(0,), (0, 1)],
                                         tmp_path).items():
            with warnings.catch_warnings():
                warnings.simplefilter("error", mmopt.DataWarning)
                got = count()
            assert {A: c.tolist() for A, c in got.items()} == want, where
    assert want[(0,)] == [4, 4]  # the oracle itself, on the cleaned values


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=tables())
def test_every_engine_says_the_near_misses_a_value_by_value_fold_finds(case, tmp_path):
    """The random tables of tricky columns (" a", "A", "é", "NA", missing values, categorical columns): each engine
    names exactly the (column, category) pairs that some dropped text equals after str.strip().casefold()."""
    df, domain, sets = case
    want = {(a.name, c) for a in domain.attributes if a.kind == "text" for c in a.categories
            for v in df[a.name] if isinstance(v, str) and v not in a.categories
            and v.strip().casefold() == c.strip().casefold()}
    for where, count in _each_engine(df, domain, sets, tmp_path, full=False).items():
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            count()
        near = _near_misses(w)
        got = {(a.name, c) for a in domain.attributes if a.kind == "text" for c in a.categories
               if f"Column {a.name!r} holds values that differ from its category {c!r} only" in " ".join(near)}
        assert got == want and len(near) == len(want), where


def test_one_near_miss_in_a_second_text_column_is_said_on_every_engine_and_counted_nowhere(tmp_path):
    """One record "ca " under the second string attribute: every engine says it (Polars and DuckDB list every string
    attribute's dropped texts, from one dropped record on), and the record is in no marginal, not even those that
    do not read its column (its key eg.DROPPED would wrap to a cell in numpy)."""
    domain = Domain((Attribute("sex", categories=("F", "M")), Attribute("state", categories=("NY", "CA")),
                     Attribute("age", categories=(1, 2))))
    sex, state, age = ["F", "M", "F", "M", "F", "F"], ["NY", "CA", "ca ", "NY", "CA", "NY"], [1, 2, 1, 1, 2, 1]
    sets = [(0,), (2,), (0, 2), (1, 2), ()]
    kept = [r for r in zip(sex, state, age, strict=True) if r[1] in ("NY", "CA")]
    cats = [a.categories for a in domain.attributes]
    want = {A: np.zeros([len(cats[i]) for i in A], dtype=np.int64) for A in sets}
    for r in kept:  # the oracle: exact matches, one record at a time
        for A in sets:
            want[A][tuple(cats[i].index(r[i]) for i in A)] += 1
    assert int(want[()]) == 5 and want[(0, 2)].tolist() == [[2, 1], [1, 1]]
    df = pd.DataFrame({"sex": sex, "state": state, "age": age})
    for where, count in _each_engine(df, domain, sets, tmp_path).items():
        with pytest.warns(mmopt.DataWarning, match=r"Column 'state' .*category 'CA' only in case") as w:
            got = count()
        assert {A: c.tolist() for A, c in got.items()} == {A: c.tolist() for A, c in want.items()}, where
        assert len(_near_misses(w)) == 1, where


def test_a_relation_read_once_is_counted_whether_or_not_a_text_was_dropped():
    """Polars and DuckDB list the dropped texts in one more read: a source that can be read once (an Arrow stream,
    a generator behind a Polars IO source) failed there, so one record outside the domain stopped a count that
    finished without it (a helper's probe). The counts stand; only the near-miss warning is skipped."""
    from polars.io.plugins import register_io_source
    domain = Domain((Attribute("sex", categories=("F", "M")),))

    def once(values):
        used = []

        def source(with_columns, predicate, n_rows, batch_size):
            if used:
                raise RuntimeError("read twice")
            used.append(1)
            df = pl.DataFrame({"sex": values})
            yield df.filter(predicate) if predicate is not None else df
        return register_io_source(source, schema={"sex": pl.String})

    for last in ("M", "X", None, "f"):
        values = ["F", "M"] * 5 + [last]
        table = pa.table({"sex": values})
        stream = duckdb.connect().from_arrow(pa.RecordBatchReader.from_batches(table.schema, table.to_batches()))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", mmopt.DataWarning)
            for where, source in (("duckdb", stream), ("polars", once(values))):
                got = marginal_counts(source, domain, [(0,)])[(0,)].tolist()
                assert got == [values.count("F"), values.count("M")], (where, last)


def test_a_ctrl_c_inside_a_duckdb_query_is_an_interrupt_not_a_failed_read(monkeypatch):
    """DuckDB turns Ctrl-C into duckdb.InterruptException, a duckdb.Error: the count said "reading the records failed"
    (a ValueError, exit 2) and the near-miss pass, which skips a failed read, had a special case to let it through.
    Both are now a KeyboardInterrupt, from the one place that runs the queries."""
    from mmopt.records import duckdb_counts as dc
    domain = Domain((Attribute("sex", categories=("F", "M")),))
    rel = duckdb.connect().from_arrow(pa.table({"sex": ["F", "M", "f"]}))
    real, calls = dc._run, []

    class Interrupted:  # a relation whose query DuckDB interrupts
        def query(self, *args):
            raise duckdb.InterruptException("INTERRUPT Error")

    def interrupted_at(k):
        def run(rel, sql, caller, **kw):
            calls.append(sql)
            return real(Interrupted() if len(calls) == k else rel, sql, caller, **kw)
        return run

    monkeypatch.setattr(dc, "_run", interrupted_at(1))  # the count's query
    with pytest.raises(KeyboardInterrupt):
        marginal_counts(rel, domain, [(0,)])
    calls.clear()
    monkeypatch.setattr(dc, "_run", interrupted_at(2))  # the near-miss pass, after the count
    with pytest.raises(KeyboardInterrupt):
        marginal_counts(rel, domain, [(0,)])
    assert len(calls) == 2 and "DISTINCT" in calls[1]


def test_records_that_change_between_reads_are_refused_even_where_their_text_is_dropped():
    """A record whose numeric value the candidates' read did not list is refused (it could be a category) whether
    or not its text is dropped as well: eg.UNSEEN is tested before eg.DROPPED, as the refusal was before."""
    domain = Domain((Attribute("x", categories=tuple(range(1000))), Attribute("s", categories=("a",))))
    con = duckdb.connect()
    con.sql("create table t as select i::INTEGER as x, 'A' as s from range(1000) r(i)")  # every text a near miss
    with pytest.raises(ValueError, match=r"DuckDB relation gave different records on two reads"):
        marginal_counts(con.sql("select * from t where random() < 0.1"), domain, [()])
    lf = pl.LazyFrame({"x": list(range(1000)), "s": ["A"] * 1000}).select(pl.all().sample(n=100, seed=None))
    with pytest.raises(ValueError, match=r"Polars frame gave different records on two reads"):
        marginal_counts(lf, domain, [()])
