"""mmopt.records.values (issue 30): one bad record never refuses a table; integers exact beyond 2⁵³; float32
matched by value; CSV text parsed; the empty table released like any other. A fuzz-style table of cases."""

import importlib.util
import warnings

import numpy as np
import pytest

import mmopt
from mmopt.records import Attribute, Domain, marginal_counts, release_marginals

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")

BIG = 2**53
D = Domain((Attribute("id", categories=(BIG, BIG + 1, 5)), Attribute("age", edges=(0, 18, 65, float("inf"))),
            Attribute("w", categories=(0.1, 0.5))))


def _counts(records, sets=((0,), (1,), (2,))):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*holds values that are not numbers", category=UserWarning)
        return {A: c.tolist() for A, c in marginal_counts(records, D, list(sets)).items()}


BASE = {"id": [BIG + 1, 5, BIG], "age": [30.0, 70.0, 12.0], "w": [0.1, 0.5, 0.1]}


@pytest.mark.parametrize("case, column, values, want", [
    ("int64 beyond 2⁵³", "id", np.array([BIG + 1, 5, BIG], dtype=np.int64), {(0,): [1, 1, 1]}),
    ("nullable Int64 with a missing value", "id", pd.array([BIG + 1, None, BIG], dtype="Int64"), {(0,): [1, 1, 0]}),
    ("uint64 past 2⁶³ (dropped, no wrap)", "id", np.array([BIG + 1, 2**63 + 5, BIG], dtype=np.uint64),
     {(0,): [1, 1, 0]}),
    ("object ints", "id", pd.Series([BIG + 1, 5, BIG], dtype=object), {(0,): [1, 1, 1]}),
    ("float32 categories by value", "w", np.array([0.1, 0.5, 0.1], dtype=np.float32), {(2,): [2, 1]}),
    ("text among numbers", "age", pd.Series([30.0, "unknown", 12.0], dtype=object), {(1,): [1, 1, 0]}),
    ("None among numbers", "age", pd.Series([30.0, None, 12.0], dtype=object), {(1,): [1, 1, 0]}),
    ("nullable Float64 with NA", "age", pd.array([30.0, None, 12.0], dtype="Float64"), {(1,): [1, 1, 0]}),
    ("bool for a numeric category", "id", pd.Series([True, False, True]), {(0,): [0, 0, 0]}),
])
def test_dataframe_columns(case, column, values, want):
    df = pd.DataFrame(BASE).assign(**{column: values})
    got = _counts(df, list(want))
    assert got == want, case


def test_arrow_and_csv_sources(tmp_path):
    table = pa.table({"id": pa.array([BIG + 1, None, BIG], type=pa.int64()), "age": pa.array([30.0, 70.0, 12.0]),
                      "w": pa.array([0.1, 0.5, 0.1], type=pa.float32())})
    import pyarrow.parquet as pq
    pq.write_table(table, tmp_path / "r.parquet")
    assert _counts(tmp_path / "r.parquet") == {(0,): [1, 1, 0], (1,): [1, 1, 0], (2,): [2, 0]}  # id null: dropped
    (tmp_path / "r.csv").write_text("id,age,w\n9007199254740993,30,0.1\n5,unknown,0.5\n9007199254740992,,0.1\n"
                                    " 5 ,1e1,0.50\n5,inf,.5\n")
    with pytest.warns(UserWarning, match="'age' holds values that are not numbers"):
        got = marginal_counts(tmp_path / "r.csv", D, [(0,), (1,), (2,)])
    # kept: row 1 (2⁵³+1, 30, 0.1), row 4 (5, 10, 0.5), row 5 (5, inf, 0.5); dropped: "unknown" and the blank age
    assert {A: c.tolist() for A, c in got.items()} == {(0,): [0, 1, 2], (1,): [1, 1, 1], (2,): [1, 2]}


def test_one_bad_record_never_refuses_and_the_empty_table_is_released():
    df = pd.DataFrame(BASE)
    bad = df.assign(age=pd.Series([30.0, "n/a", 12.0], dtype=object))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        r = release_marginals(bad, D, 1, mmopt.Privacy(1.0), seed=0)
        empty = release_marginals(df.iloc[:0], D, 1, mmopt.Privacy(1.0), seed=0)
        one = release_marginals(df.iloc[:1], D, 1, mmopt.Privacy(1.0), seed=0)
    assert set(r.marginals) == set(empty.marginals) == set(one.marginals) == {(0,), (1,), (2,)}
    assert empty.expected_total == one.expected_total == r.expected_total  # the error never depends on the data


@pytest.mark.parametrize("dtype, cats", [(np.float32, (2**24 - 1, 2**24)), (np.float64, (2**60 - 1, 2**60))])
def test_float_outside_small_integer_categories_is_dropped(dtype, cats):
    """The lookup-table path once sent NaN and every value outside the categories to the last cell when hi + 1
    rounded to hi in the column's float type (float32: 2²⁴ + 1 → 2²⁴; float64: 2⁶⁰ + 1 → 2⁶⁰)."""
    Z = Domain((Attribute("x", categories=cats),))
    x = np.array([np.nan, 5.0, -np.inf, cats[1]], dtype=dtype)  # cats[1] is exact in both types
    assert marginal_counts(pd.DataFrame({"x": x}), Z, [(0,)])[(0,)].tolist() == [0, 1]


def test_decimal_objects_count_as_the_parquet_file_they_came_from(tmp_path):
    """pd.read_parquet turns a decimal128 column into Decimal objects: they are numbers (as the file's float64
    reading), not dropped; a date in a numeric column is dropped with the warning, a missing value silently."""
    import datetime
    import decimal
    import fractions
    domain = Domain((Attribute("income", edges=(0, 50_000, 1e9)),))
    income = [decimal.Decimal("1000.5")] * 5 + [decimal.Decimal("60000")] * 3 + [None]
    path = tmp_path / "dec.parquet"
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"income": pa.array(income, type=pa.decimal128(12, 2))}), path)
    read = pd.read_parquet(path)
    assert isinstance(read["income"].iloc[0], decimal.Decimal)
    want = marginal_counts(path, domain, [(0,)])[(0,)].tolist()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert marginal_counts(read, domain, [(0,)])[(0,)].tolist() == want == [5, 3]
        cats = Domain((Attribute("k", categories=(1, 2, 0.5)),))
        mixed = pd.DataFrame({"k": [decimal.Decimal(1), fractions.Fraction(1, 2), decimal.Decimal("2.0"), pd.NA,
                                    decimal.Decimal("NaN")]})
        assert marginal_counts(mixed, cats, [(0,)])[(0,)].tolist() == [1, 1, 1]
    with pytest.warns(UserWarning, match="'k' holds values that are not numbers"):
        dated = pd.DataFrame({"k": [1, datetime.date(2020, 1, 1), None]}, dtype=object)
        assert marginal_counts(dated, cats, [(0,)])[(0,)].tolist() == [1, 0, 0]


@pytest.mark.parametrize("value", [["y"], {"k": 1}, {"y"}, np.array(["y"])])
def test_an_unhashable_value_in_one_record_is_dropped_not_raised(value):
    """A list (dict, set, array) in one record of a text attribute raised TypeError ('unhashable') in the pandas
    fallback: whether the release (and mst/aim) happened depended on that one record. It is dropped, as any value
    outside the domain."""
    T = Domain((Attribute("a", categories=("x", "y")), Attribute("b", categories=(1, 2))))
    df = pd.DataFrame({"a": pd.Series(["x", "y"] * 5 + [value], dtype=object), "b": [1, 2] * 5 + [1]})
    counts = marginal_counts(df, T, [("a",), ("a", "b")])
    assert counts[(0,)].tolist() == [5, 5] and counts[(0, 1)].sum() == 10
    from mmopt.synth import mst
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the seeded generator's
        assert mst(df, T, mmopt.Privacy(1.0, 1e-9), seed=0).epsilon <= 1.0


def test_an_integer_past_float64_falls_in_its_bin_and_never_stops_the_count():
    """One cell of 10⁴⁰⁰ under a binned attribute raised OverflowError (float()) on every engine."""
    B = Domain((Attribute("n", edges=(float("-inf"), 0, 1, float("inf"))),))
    df = pd.DataFrame({"n": pd.Series([0.5, 10**400, -(10**400)], dtype=object)})
    assert marginal_counts(df, B, [("n",)])[(0,)].tolist() == [1, 1, 1]


def test_a_parquet_folder_whose_files_differ_in_type_is_refused_on_every_engine(tmp_path):
    """DuckDB cast a later file's 2.5 to the first file's int32 (counted 2) and 2⁵³ + 1 to float64 (counted 2⁵³);
    pyarrow refused 2⁴⁰ in a later int64 file but counted 2. One rule now, from the footers, before any row."""
    import pyarrow.parquet as pq
    C = Domain((Attribute("a", categories=(1, 2, 3)),))
    pq.write_table(pa.table({"a": pa.array([1], pa.int32())}), tmp_path / "p0.parquet")
    pq.write_table(pa.table({"a": pa.array([2.5, 3.0000001])}), tmp_path / "p1.parquet")
    engines = ["auto"] + [e for e in ("duckdb", "polars") if __import__("importlib").util.find_spec(e)]
    for engine in engines:
        with pytest.raises(ValueError, match="folder of Parquet files whose columns differ in type"):
            marginal_counts(tmp_path, C, [("a",)], engine=engine)


def test_duckdb_hugeint_categories_are_matched_as_exact_integers():
    duckdb = pytest.importorskip("duckdb")
    C = Domain((Attribute("x", categories=(2**53, 5)),))
    con = duckdb.connect()
    rel = con.sql(f"SELECT CAST(x AS HUGEINT) AS x FROM (VALUES ({2**53 + 1}), (5)) t(x)")
    assert marginal_counts(rel, C, [("x",)])[(0,)].tolist() == [0, 1]  # 2⁵³ + 1 was counted as 2⁵³


def test_whole_number_decimals_are_compared_as_integers(tmp_path):
    # SQL's NUMERIC(38, 0) read from Parquet went through float64: 2⁵³ + 1 was counted in the cell of 2⁵³
    import decimal

    import pyarrow.parquet as pq
    values = [BIG + 1, 5, BIG, None, 10**20, BIG + 1]  # 10²⁰: past int64, out of the domain (dropped)
    column = [None if v is None else decimal.Decimal(v) for v in values]
    pq.write_table(pa.table({"id": pa.array(column, type=pa.decimal128(38, 0))}), tmp_path / "d.parquet")
    one = Domain((D.attributes[0],))
    want = [1, 2, 1]
    for engine in ("auto", "duckdb", "polars"):
        if engine != "auto":
            pytest.importorskip(engine)
        assert marginal_counts(tmp_path / "d.parquet", one, [(0,)], engine=engine)[(0,)].tolist() == want, engine
    frame = pd.DataFrame({"id": pd.Series(column, dtype=object)})  # pandas: Decimal objects
    assert marginal_counts(frame, one, [(0,)])[(0,)].tolist() == want
    small = [decimal.Decimal(v) for v in (BIG + 1, 5, BIG)]  # fits int64: the fast cast
    pq.write_table(pa.table({"id": pa.array(small, type=pa.decimal128(20, 0))}), tmp_path / "s.parquet")
    assert marginal_counts(tmp_path / "s.parquet", one, [(0,)])[(0,)].tolist() == [1, 1, 1]


def test_fractional_decimals_count_on_every_engine_as_their_written_value(tmp_path):
    """Arrow's decimal → float64 cast is not correctly rounded: DECIMAL 0.3 became 0.30000000000000004, missing the
    category 0.3 and counted above the edge 0.3, on every Arrow path (Parquet, DuckDB, Polars) while pandas counted
    it right (a helper's probe: DuckDB's VALUES (0.3), (0.6), (0.7), (1.2) counted [0, 0, 0, 0])."""
    import decimal

    import pyarrow.parquet as pq
    written = ["0.3", "0.6", "0.7", "1.2", "137.596853", None]
    column = pa.array([None if v is None else decimal.Decimal(v) for v in written], type=pa.decimal128(12, 6))
    pq.write_table(pa.table({"x": column}), tmp_path / "d.parquet")
    cats = Domain((Attribute("x", categories=(0.3, 0.6, 0.7, 1.2, 137.596853)),))
    bins = Domain((Attribute("x", edges=(0.3, 0.6, 0.7, 1.2, 137.596853, 200.0)),))   # each value on an edge
    for engine in ("auto", "duckdb", "polars"):
        if engine != "auto":
            pytest.importorskip(engine)
        assert marginal_counts(tmp_path / "d.parquet", cats, [(0,)], engine=engine)[(0,)].tolist() == [1] * 5, engine
        assert marginal_counts(tmp_path / "d.parquet", bins, [(0,)], engine=engine)[(0,)].tolist() == [1] * 5, engine
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES (0.3), (0.6), (0.7), (1.2)) v(x)")   # DECIMAL(2, 1)
    assert marginal_counts(con.table("t"), cats, [(0,)])[(0,)].tolist() == [1, 1, 1, 1, 0]


@pytest.mark.parametrize("bad", [{"s": [2**100], "c": [1]},                   # first value of a text column past int64
                                 {"s": [np.uint64(2**64 - 1)], "c": [1]},
                                 {"s": ["a"], "c": [__import__("decimal").Decimal("sNaN")]}])
def test_one_unusual_record_is_dropped_never_an_error(bad):
    # each raised (OverflowError from Arrow's type inference, ValueError from float(sNaN)): one table was released
    # and its neighbour with this record refused, so whether a release happened depended on one person's record
    domain = Domain((Attribute("s", categories=("a", "b")), Attribute("c", categories=(0, 1, 2))))
    base = pd.DataFrame({"s": pd.Series(["a", "b"], dtype=object), "c": pd.Series([0, 1], dtype=object)})
    with_it = pd.concat([pd.DataFrame({k: pd.Series(v, dtype=object) for k, v in bad.items()}), base],
                        ignore_index=True)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*holds values that are not numbers", category=UserWarning)
        got = marginal_counts(with_it, domain, [("s",), ("c",)])
    want = marginal_counts(base, domain, [("s",), ("c",)])
    assert all(np.array_equal(got[A], want[A]) for A in want)


def test_bytes_are_coded_by_their_own_value_whatever_the_other_records():
    """b"a" matched the category "a" on Arrow's path and nothing on the fallback, which one other record (a number,
    itself dropped) selected: adding that record moved a thousand counts (a helper's probe). bytes are now the
    UTF-8 text they hold on both paths; bytes that are not UTF-8 are out of the domain."""
    domain = Domain((Attribute("c", categories=("a", "b", "é")),))
    base = [b"a"] * 1000 + ["b", "é".encode(), b"\xff"]
    want = [1000, 1, 1]
    for extra in ([], [5], [[1, 2]]):  # the last two make Arrow fail: the fallback decides
        column = pd.Series(base + extra, dtype=object)
        assert marginal_counts(pd.DataFrame({"c": column}), domain, [(0,)])[(0,)].tolist() == want, extra


def test_a_number_under_string_categories_is_matched_by_its_text_on_every_engine():
    """An object column ["02139", 2, "x", 2] under string categories: pandas dropped the 2s (the Python lookup said
    2 != "2") while Dask and DuckDB read them as the text "2" and counted them, so one table gave two counts."""
    domain = Domain((Attribute("zip", categories=("02139", "2", "x", "True")),))
    df = pd.DataFrame({"zip": ["02139", 2, "x", 2, True, None, float("nan")]}, dtype=object)
    sources = [df]
    if __import__("importlib").util.find_spec("dask"):
        import dask.dataframe as dd
        sources.append(dd.from_pandas(df, npartitions=1))
    if __import__("importlib").util.find_spec("duckdb"):
        sources.append(__import__("duckdb").from_df(df))
    for source in sources:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*holds values that are not strings", category=UserWarning)
            assert marginal_counts(source, domain, [(0,)])[(0,)].tolist() == [1, 2, 1, 1], type(source)
    with pytest.warns(UserWarning, match="'zip' holds values that are not strings"):
        marginal_counts(df, domain, [(0,)])
    only_ints = pd.DataFrame({"zip": [2, 2]}, dtype=object)  # raised ArrowTypeError (int64 vs string)
    with pytest.warns(UserWarning, match="not strings"):
        assert marginal_counts(only_ints, domain, [(0,)])[(0,)].tolist() == [0, 2, 0, 0]


def _one(records, attribute):
    return marginal_counts(records, Domain((attribute,)), [(0,)])[(0,)].tolist()


@pytest.mark.parametrize("extra", [{"x": [None]}, {"x": [np.nan]}, {"x": ["text"]}],
                         ids=["None (object)", "NaN (float64)", "text (object)"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_one_added_record_never_moves_the_other_records_cells(dtype, extra):
    """An auditor's probe: a None added to a float32 column of 0.1 made pandas hold it as Python floats, and the
    thousand values, matched by the float32 rule only in a float32 column, left the category 0.1 ([1000, 0] became
    [0, 0]); a float16 column matched nothing. A value's cell is now the value's alone."""
    attribute = Attribute("x", categories=(0.1, 0.2))
    df = pd.DataFrame({"x": np.full(1000, 0.1, dtype)})
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*holds values that are not numbers", category=UserWarning)
        assert _one(df, attribute) == [1000, 0]
        assert _one(pd.concat([df, pd.DataFrame(extra)], ignore_index=True), attribute) == [1000, 0]
        held = pd.DataFrame({"x": pd.Series([dtype(0.1), dtype(0.2), None], dtype=object)})  # the scalars themselves
        assert _one(held, attribute) == [1, 1]


def test_an_integer_category_matches_only_the_float_that_is_that_integer():
    """An auditor's probe: 2⁵³ + 1 rounded to float64 is 2⁵³, so a float64 column of 2⁵³ (an int64 column with one
    NaN added) was counted in the category 2⁵³ + 1 where the int64 column dropped it: one record moved 1,000."""
    attribute = Attribute("id", categories=(BIG + 1, 7))
    assert _one(pd.DataFrame({"id": [BIG] * 1000}), attribute) == [0, 0]
    assert _one(pd.DataFrame({"id": [BIG] * 1000 + [np.nan]}), attribute) == [0, 0]
    assert _one(pd.DataFrame({"id": np.array([2**24, 7], dtype=np.float32)}), Attribute("id", categories=(2**24 + 1, 7,
                                                                                                    0.5))) == [0, 1, 0]
    assert _one(pd.DataFrame({"id": [float(BIG + 2), 7.0]}), Attribute("id", categories=(BIG + 2, 7, 0.5))) == [1, 1, 0]


def test_a_null_in_an_arrow_bool_column_is_dropped_not_raised():
    """An auditor's probe: to_numpy(int64, na_value=0) raised ArrowInvalid on bool[pyarrow] holding a null."""
    attribute = Attribute("x", categories=(0, 1))
    df = pd.DataFrame({"x": pd.Series([True, None, False, True], dtype=pd.ArrowDtype(pa.bool_()))})
    assert _one(df, attribute) == [1, 2]
    assert _one(df.astype("boolean"), attribute) == [1, 2]


def test_arrow_backed_pandas_text_and_polars_128_bit_integers_are_counted():
    """(a helper's probes) a pandas ArrowDtype(dictionary<int32, string>) column was refused as "not strings"; a
    Polars Int128 column under numeric categories raised pyarrow's raw "unsupported format string '_pli128'"."""
    states = pd.Series(pd.array(["CA", "NY", "CA"], dtype=pd.ArrowDtype(pa.dictionary(pa.int32(), pa.string()))))
    domain = Domain((Attribute("state", categories=("CA", "NY")),))
    assert marginal_counts(pd.DataFrame({"state": states}), domain, [(0,)])[(0,)].tolist() == [2, 1]
    pl = pytest.importorskip("polars")
    if not hasattr(pl, "Int128"):
        pytest.skip("this Polars has no Int128")
    frame = pl.DataFrame({"x": pl.Series([1, 2, 3, 2**70, None], dtype=pl.Int128)})
    for source in (frame, frame.lazy()):
        got = marginal_counts(source, Domain((Attribute("x", categories=(1, 2, 3, 2**70)),)), [(0,)])
        assert got[(0,)].tolist() == [1, 1, 1, 1]


def test_a_pandas_sparse_column_is_counted_as_its_dense_values():
    """Sparse[int64, 0] under numeric categories raised a bare TypeError ("Cannot interpret … as a data type")."""
    import pandas as pd
    D = Domain((Attribute("a", categories=(0, 3, 7)), Attribute("b", categories=("x", "y"))))
    frame = pd.DataFrame({"a": pd.arrays.SparseArray([3, 7, 0, 3]),
                          "b": pd.arrays.SparseArray(["x", "y", "x", "x"], fill_value="x")})
    got = marginal_counts(frame, D, [(0,), (1,)])
    assert got[(0,)].tolist() == [1, 2, 1] and got[(1,)].tolist() == [3, 1]


HUGE = "9" * 5000  # past Python's 4,300-digit limit on int(text) and str(int)


def test_leading_zeros_and_huge_decimal_exponents_are_read_without_error():
    """"0"·4,300 + "1" still reached int() whole (a review); int(Decimal("1e1000000")) took 26 CPU s."""
    import decimal
    Dn = Domain((Attribute("n", categories=(1, 2)),))
    df = pd.DataFrame({"n": pd.Series(["1", "0" * 4300 + "1", "-" + "0" * 4400 + "2", decimal.Decimal("1e1000000"),
                                       decimal.Decimal("-1e1000000")], dtype=object)})
    assert marginal_counts(df, Dn, [(0,)])[(0,)].tolist() == [2, 0]


@pytest.mark.parametrize("engine", ["pandas", "csv", "polars", "duckdb"])
def test_an_integer_past_python_s_digit_limit_is_one_record_like_any_other(engine, tmp_path):
    """int() of its text raised ValueError, and one such cell stopped every release of the table (a helper's
    audit): it is past every category and finite edge, so it is dropped under categories and counted in a last bin
    that reaches infinity."""
    rows = [(str(BIG + 1), "30", "0.1"), ("5", HUGE, "0.5"), (HUGE, "-" + HUGE, "0.1"), (str(BIG), "12", HUGE)]
    df = pd.DataFrame(rows, columns=["id", "age", "w"])
    if engine == "csv":
        path = tmp_path / "r.csv"
        df.to_csv(path, index=False)
        source = path
    elif engine == "polars":
        source = pytest.importorskip("polars").from_pandas(df)
    elif engine == "duckdb":
        duckdb = pytest.importorskip("duckdb")
        con = duckdb.connect()
        con.register("t", df)
        source = con.sql("select * from t")
    else:
        source = df.astype(object)
    # a record out of the domain in any attribute is dropped whole: row 2 (id huge: no category) and row 3 (w huge);
    # row 1's huge age lies in the last bin [65, inf)
    assert _counts(source) == {(0,): [0, 1, 1], (1,): [0, 1, 1], (2,): [1, 1]}


def test_text_categories_drop_an_integer_whose_text_python_refuses():
    Dt = Domain((Attribute("k", categories=("1", "2")),))
    col = pd.Series([1, 2, int("9" * 4000) * 10**1000, "2"], dtype=object)  # str() of the third raises
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        got = marginal_counts(pd.DataFrame({"k": col}), Dt, [(0,)])
    assert got[(0,)].tolist() == [1, 2]


def test_a_fraction_or_long_double_past_float64_is_read_without_error_or_warning():
    from fractions import Fraction
    df = pd.DataFrame(BASE).assign(age=pd.Series([30.0, Fraction(10**400), Fraction(-(10**400))], dtype=object))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # neither OverflowError nor numpy's overflow warning
        got = {A: c.tolist() for A, c in marginal_counts(df, D, [(1,)]).items()}
    assert got == {(1,): [0, 1, 1]}  # 30 in [18, 65), 10⁴⁰⁰ in [65, inf); −10⁴⁰⁰ below every edge: dropped
    ids = pd.Series([Fraction(BIG + 1), Fraction(5), Fraction(7)], dtype=object)  # whole: exact, not via float64
    assert {A: c.tolist() for A, c in marginal_counts(pd.DataFrame(BASE).assign(id=ids), D, [(0,)]).items()} == \
        {(0,): [0, 1, 1]}
    if np.finfo(np.longdouble).max > np.finfo(np.float64).max:
        big = np.array([30.0, 70.0, 12.0], dtype=np.longdouble)
        big[1] = np.longdouble(10) ** 400
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = {A: c.tolist() for A, c in marginal_counts(pd.DataFrame(BASE).assign(age=big), D,
                                                             [(1,)]).items()}
        assert got == {(1,): [1, 1, 1]}


def test_bytes_under_a_numeric_attribute_are_their_text_as_dask_reads_them():
    dd = pytest.importorskip("dask.dataframe")
    Dn = Domain((Attribute("v", categories=(0, 1, 2)),))
    df = pd.DataFrame({"v": pd.Series([b"1", b"2", 1, b"\xff"], dtype=object)})  # the last is not UTF-8: dropped
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        got = marginal_counts(df, Dn, [(0,)])[(0,)].tolist()
    assert got == [0, 2, 1]
    assert marginal_counts(dd.from_pandas(df.iloc[:3], npartitions=1), Dn, [(0,)])[(0,)].tolist() == got


def test_a_cell_that_is_not_utf8_is_one_dropped_record_on_pyarrow_and_duckdb(tmp_path):
    """A Latin-1 "é" made pyarrow's read raise: one record refused the table, and the message quoted the row (a
    helper's audit); it is missing now, and DuckDB (which refused the file) skips its row: the same counts. A
    non-UTF-8 cell outside the domain's columns is not read."""
    Dt = Domain((Attribute("a", categories=("x", "y", "z", "é")), Attribute("b", categories=(1, 2, 3, 4))))
    path = tmp_path / "r.csv"
    path.write_bytes(b"a,b,c\nx,1,p\nz,3,\xe9\n\xe9,4,q\n\xc3\xa9,4,r\n")
    for engine in ("pyarrow", "duckdb"):
        got = {A: c.tolist() for A, c in marginal_counts(path, Dt, [(0,), (1,)], engine=engine).items()}
        assert got == {(0,): [1, 0, 1, 1], (1,): [1, 0, 1, 1]}, engine  # x, z and the UTF-8 é; Latin-1 dropped
    (tmp_path / "empty.csv").write_bytes(b"")
    with pytest.raises(ValueError, match="Empty CSV file"):  # a message that quotes no record is passed on
        marginal_counts(tmp_path / "empty.csv", Dt, [(0,)])


RAGGED = {"long": b"a,b\nx,1\ny,2,Jane Doe 555-1234\nz,3\n", "short": b"a,b,c\nx,1,p\ny,2\nz,3,q\n",
          "trailing separator": b"a,b\nx,1\ny,2,\nz,3\n"}


@pytest.mark.parametrize("case", list(RAGGED))
def test_a_row_of_the_wrong_number_of_fields_is_skipped_and_said_never_quoted(case, tmp_path):
    """One such row refused the whole file (pyarrow's message withheld), so one record decided whether a release
    happened; Polars padded a short row with missing values (counted when the missing field is outside the
    domain). pyarrow's read skips it with one DataWarning that quotes nothing; 'polars' and 'duckdb', which would
    read it otherwise (DuckDB takes "y,2," under a,b as y, 2), refuse the file, naming the default engine."""
    Dt = Domain((Attribute("a", categories=("x", "y", "z")), Attribute("b", categories=(1, 2, 3))))
    path = tmp_path / "r.csv"
    path.write_bytes(RAGGED[case])
    with pytest.warns(mmopt.DataWarning, match="number of fields differs from its header") as w:
        got = {A: c.tolist() for A, c in marginal_counts(path, Dt, [(0,), (1,)]).items()}
    assert got == {(0,): [1, 0, 1], (1,): [1, 0, 1]}
    assert len(w) == 1 and not any(t in str(w[0].message) for t in ("Jane", "y,2"))
    pytest.importorskip("polars")
    pytest.importorskip("duckdb")
    for engine in ("polars", "duckdb"):
        with pytest.raises(ValueError, match="engine='pyarrow'") as e:
            marginal_counts(path, Dt, [(0,)], engine=engine)
        assert "Jane" not in str(e.value) and "y,2" not in str(e.value)


def test_a_well_formed_csv_raises_no_data_warning_on_any_engine(tmp_path):
    pytest.importorskip("polars")
    pytest.importorskip("duckdb")
    Dt = Domain((Attribute("a", categories=("x", "y")), Attribute("b", categories=(1, 2))))
    path = tmp_path / "ok.csv"
    path.write_bytes(b'a,b,c\nx,1,"p,q"\ny,2,\n"x",2,"multi\nline"\n')
    for engine in ("pyarrow", "polars", "duckdb"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = marginal_counts(path, Dt, [(0, 1)], engine=engine)[(0, 1)].tolist()
        assert got == [[1, 1], [0, 1]], engine


def test_a_parse_error_does_not_quote_the_records(tmp_path):
    from mmopt.records import _csv
    pa_ = pytest.importorskip("pyarrow")
    said = _csv._said(pa_.ArrowInvalid("CSV parse error: Row #102: Expected 3 columns, got 4: F,30,1,Jane Doe"))
    assert "Jane" not in said and "withheld" in said
    assert _csv._said(OSError("disk full")) == "disk full"


def test_integer_text_is_coded_as_python_reads_it_at_every_length():
    """CSV integer text is cast by Arrow up to 18 characters (was value by value in Python: 8× slower) and read as a
    Python int beyond: both against int() of the text, with signs, spaces and leading zeros, under categories and
    bins."""
    from mmopt.records import values as V
    rng = np.random.default_rng(7)
    cats = Attribute("v", categories=(-7, 0, 5, 10**17, 2**62, -(2**62)))
    bins = Attribute("v", edges=(-1e19, -5, 0, 5, 1e18, 1e19))
    texts = []
    for _ in range(3000):
        value = int(rng.choice([-7, 0, 5, 10**17, 2**62, -(2**62), 2**63, 10**18, -5, 3]))
        body = "0" * int(rng.integers(0, 25)) + str(abs(value))
        sign = "-" if value < 0 else str(rng.choice(["", "+"]))
        texts.append(" " * int(rng.integers(0, 2)) + sign + body + "\t" * int(rng.integers(0, 2)))
    for attribute in (cats, bins):
        got = V._parsed_codes(pa.array(texts, type=pa.string()), attribute)
        for text, code in zip(texts, got.tolist(), strict=True):
            x = int(text)
            if attribute.kind == "bins":
                e = attribute.edges
                want = next((j for j in range(len(e) - 1) if e[j] <= x < e[j + 1]), -1)
            else:
                want = attribute.categories.index(x) if x in attribute.categories else -1
            assert code == want, (text, attribute.kind)


def test_a_column_whose_every_value_misses_the_domain_is_said_on_every_engine(tmp_path):
    """"SOUTH" under the category "south" dropped every record: the release was pure noise, without a word (a
    newcomer's audit). A DataWarning says so (naming the attributes read, never a value), on every engine."""
    Dr = Domain((Attribute("region", categories=("north", "south")), Attribute("n", categories=(1, 2))))
    df = pd.DataFrame({"region": ["SOUTH", "NORTH", "SOUTH"], "n": [1, 2, 1]})
    path = tmp_path / "upper.parquet"
    df.to_parquet(path)
    sources = {"pandas": (df, "auto"), "pyarrow": (path, "auto")}
    if all(importlib.util.find_spec(m) for m in ("polars", "duckdb")):
        sources.update({"polars": (path, "polars"), "duckdb": (path, "duckdb")})
    for where, (src, engine) in sources.items():
        with pytest.warns(mmopt.DataWarning, match=r"No record was counted.*\['region', 'n'\].*spelling, case") as w:
            got = marginal_counts(src, Dr, [(0, 1)], engine=engine)[(0, 1)]
        assert got.sum() == 0 and not any("SOUTH" in str(x.message) for x in w), where
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert marginal_counts(df.assign(region=df["region"].str.lower()), Dr, [(0, 1)])[(0, 1)].sum() == 3


def test_quoted_line_breaks_across_pyarrow_s_blocks_are_read_as_pandas_reads_them(tmp_path):
    """A quoted line break on a 1 MiB block boundary started pyarrow's next block mid-record: the misread rows
    raised (the file refused) and, once rows of the wrong number of fields were skipped, were miscounted — 10,017
    phantom records of 300,000 (a review). Every engine now counts what pandas and the csv module read."""
    rng = np.random.default_rng(0)
    n = 120_000  # ~2 MB: across pyarrow's block boundaries
    df = pd.DataFrame({"a": rng.choice(list("xy"), n), "note": np.where(rng.random(n) < 0.3, "l1\nz,q,3\n", "plain"),
                       "b": rng.choice([1, 2], n)})
    path = tmp_path / "notes.csv"
    df.to_csv(path, index=False)
    Dn = Domain((Attribute("a", categories=("x", "y", "z")), Attribute("b", categories=(1, 2, 3))))
    want = np.zeros((3, 3), dtype=np.int64)
    want[:2, :2] = pd.crosstab(df["a"], df["b"]).to_numpy()
    engines = ["pyarrow"] + [e for e in ("polars", "duckdb") if importlib.util.find_spec(e)]
    for engine in engines:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no row skipped, none said to be
            np.testing.assert_array_equal(marginal_counts(path, Dn, [(0, 1)], engine=engine)[(0, 1)], want)


def test_a_quoted_cell_never_closed_refuses_the_csv_on_every_engine(tmp_path):
    """One record's unclosed quote made pyarrow read the rest of the file as one cell: [51, 50] of 300,000, silently
    (a review). An odd number of quotes that Python's csv module cannot read refuses the file, quoting nothing; a
    quote inside an unquoted cell (5'10") is read as text, as before."""
    rows = ["sex,comment"] + [f"{'FM'[i % 2]},ok" for i in range(20_000)]
    Ds = Domain((Attribute("sex", categories=("F", "M")),))
    engines = ["pyarrow"] + [e for e in ("polars", "duckdb") if importlib.util.find_spec(e)]
    rows[101] = 'F,"Bob said hi'
    (tmp_path / "open.csv").write_text("\n".join(rows) + "\n")
    for engine in engines:
        with pytest.raises(ValueError, match="quoted cell that is never closed") as e:
            marginal_counts(tmp_path / "open.csv", Ds, [(0,)], engine=engine)
        assert "Bob" not in str(e.value)
    rows[101] = "F,5'10\""
    (tmp_path / "inch.csv").write_text("\n".join(rows) + "\n")
    assert marginal_counts(tmp_path / "inch.csv", Ds, [(0,)])[(0,)].tolist() == [10_000, 10_000]


def test_an_even_count_of_quotes_is_no_proof_and_a_long_quoted_cell_is_no_error(tmp_path):
    """The check ran only on an odd count of quotes: an inch mark and an unclosed quote, or two unclosed quotes,
    made [51, 50] and [2550, 2550] of 20,000 without a word; and a quoted cell over the csv module's 128 KiB limit
    was refused as never closed (a review)."""
    Ds = Domain((Attribute("sex", categories=("F", "M")),))
    rows = [f"{'FM'[i % 2]},ok" for i in range(20_000)]
    for bad in ({50: "F,5'10\"", 100: 'F,"Bob said hi'}, {100: 'F,"Bob said hi', 15_000: 'M,"Ann said bye'}):
        text = [bad.get(i, r) for i, r in enumerate(rows)]
        (tmp_path / "bad.csv").write_text("sex,comment\n" + "\n".join(text) + "\n")
        with pytest.raises(ValueError, match="quoted cell that is never closed"):
            marginal_counts(tmp_path / "bad.csv", Ds, [(0,)])
    text = [{50: "F,5'10\"", 100: 'F,"' + "x" * 200_000 + '"'}.get(i, r) for i, r in enumerate(rows)]
    (tmp_path / "long.csv").write_text("sex,comment\n" + "\n".join(text) + "\n")
    assert marginal_counts(tmp_path / "long.csv", Ds, [(0,)])[(0,)].tolist() == [10_000, 10_000]


@pytest.mark.parametrize("category, remedy", [
    ("south", "e.g. df['c'].str.strip().str.lower()"), ("NY", "e.g. df['c'].str.strip().str.upper()"),
    ("New York", "e.g. df['c'].str.strip().str.title()"), ("12", "e.g. df['c'].str.strip()"),
    ("McDonald", "then map each spelling to 'McDonald'"), (" x ", "map each spelling in df['c'] to ' x '")])
def test_a_near_miss_names_the_cleaning_that_gives_its_category(category, remedy):
    """The remedy follows the category's own case (str.upper() would not give "south"); a category with its own spaces
    is not promised by strip()."""
    from mmopt.records._text_values import warn_near_misses
    near = " " + category.swapcase() + "  "
    with pytest.warns(mmopt.DataWarning, match="only in case or surrounding spaces") as w:
        warn_near_misses([near, None, 3, b"\xff"], Attribute("c", categories=("zz", category)))
    assert len(w) == 1 and remedy in str(w[0].message) and repr(near) not in str(w[0].message)


def test_a_near_miss_is_said_only_of_values_a_record_holds():
    """A pandas categorical column codes the categories its records hold: an unused category "f" (which every Dask
    partition carries) raised no record's warning; bytes are the text they hold, as they are counted."""
    Ds = Domain((Attribute("sex", categories=("F", "M")),))
    unused = pd.DataFrame({"sex": pd.Categorical(["F", "M", "F", None], categories=["F", "M", "f", "x"])})
    with warnings.catch_warnings():
        warnings.simplefilter("error", mmopt.DataWarning)
        assert marginal_counts(unused, Ds, [(0,)])[(0,)].tolist() == [2, 1]
    used = unused.assign(sex=pd.Categorical(["F", "M", "f", "x"], categories=["F", "M", "f", "x"]))
    with pytest.warns(mmopt.DataWarning, match="category 'F' only in case") as w:
        assert marginal_counts(used, Ds, [(0,)])[(0,)].tolist() == [1, 1]
    assert len(w) == 1
    with pytest.warns(mmopt.DataWarning, match="category 'M' only in case"):
        assert marginal_counts(pd.DataFrame({"sex": [b"M", b" m", "F"]}), Ds, [(0,)])[(0,)].tolist() == [1, 1]


def test_a_near_miss_is_said_once_per_count_not_per_batch():
    """Each batch of the pandas path finds its own near misses: the count's scope says each message once."""
    Ds = Domain((Attribute("sex", categories=("F", "M")),))
    sex = ["F", "f", "M", "m", "f ", "F"] * 50
    with pytest.warns(mmopt.DataWarning, match="only in case or surrounding spaces") as w:
        got = marginal_counts(pd.DataFrame({"sex": sex}), Ds, [(0,)], batch_size=4)[(0,)].tolist()
    assert got == [sex.count("F"), sex.count("M")] == [100, 50]
    assert sorted(str(x.message).split("category ")[1][:3] for x in w) == ["'F'", "'M'"]


def test_a_near_miss_is_found_by_casefold_and_said_in_words_that_hold_no_value_or_count():
    """str.casefold(), not lower(): "STRASSE" is a near miss of "Straße" ("ss" both, where lower() keeps "ß"). The
    words depend on the column and the category alone: the same for one near miss and for many, of any spelling."""
    from mmopt.records._text_values import warn_near_misses
    a = Attribute("street", categories=("Straße", "F"))
    said = []
    for dropped in (["STRASSE"], [" strasse", "STRASSE ", "straße", "X"] * 50, ["STRAßE"]):
        with pytest.warns(mmopt.DataWarning) as w:
            warn_near_misses(dropped, a)
        said.append([str(x.message) for x in w])
    assert said[0] == said[1] == said[2] and len(said[0]) == 1 and "category 'Straße'" in said[0][0]
    assert not any(t in said[0][0] for t in ("STRASSE", "strasse", "50", "200")), said[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", mmopt.DataWarning)
        warn_near_misses(["Strasse!", "FF", None, b"\xff"], a)  # no near miss: nothing said
