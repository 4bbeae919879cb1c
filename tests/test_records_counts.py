"""mmopt.records.marginal_counts against a dense np.add.at histogram, on every input path, and its refusals."""

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from mmopt.records import Attribute, Domain, marginal_counts
from mmopt.records.counts import maximal

D = Domain((Attribute("sex", categories=("F", "M")),
            Attribute("kids", categories=(0, 1, 2, 5)),
            Attribute("age", edges=(0, 18, 30.5, 65, 100)),
            Attribute("score", categories=(0.5, -1.25, 3.0))))
ALL_SETS = [S for k in range(5) for S in itertools.combinations(range(4), k)]


def _records(n, seed=0):
    """Records with every kind of out-of-domain value: unknown categories, missing, outside the edges."""
    rng = np.random.default_rng(seed)
    sex = rng.choice(np.array(["F", "M", "X", None], dtype=object), n, p=[0.45, 0.45, 0.05, 0.05])
    kids = rng.choice([0, 1, 2, 5, 3, -1], n, p=[0.3, 0.3, 0.2, 0.1, 0.05, 0.05]).astype(float)
    kids[rng.random(n) < 0.03] = np.nan
    age = rng.choice([0, 17.9, 18, 30.5, 64, 65, 99.99, 100, 100.5, -0.1, np.nan], n)
    score = rng.choice([0.5, -1.25, 3.0, 3, 2.0], n)
    return pd.DataFrame({"sex": sex, "kids": kids, "age": age, "score": score, "unused": rng.random(n)})


def _cell(a: Attribute, value):
    """The reference value → cell rule, one value at a time (the domain module's docstring)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return -1
    if a.edges is not None:
        e = a.edges
        for j in range(len(e) - 1):
            if e[j] <= value < e[j + 1] or (j == len(e) - 2 and value == e[-1]):
                return j
        return -1
    return a.categories.index(value) if value in a.categories else -1


def _dense(df, domain):
    """The N-cell histogram of the kept records, by np.add.at."""
    cells = np.array([[_cell(a, v) for a, v in zip(domain.attributes, row, strict=True)]
                      for row in df[list(domain.names)].itertuples(index=False)]).reshape(-1, len(domain.names))
    keep = (cells >= 0).all(axis=1)
    x = np.zeros(domain.shape, dtype=np.int64)
    np.add.at(x, tuple(cells[keep].T), 1)
    return x


def _oracle(df, domain, sets):
    x = _dense(df, domain)
    d = len(domain.shape)
    return {A: x.sum(axis=tuple(i for i in range(d) if i not in A)) for A in sets}


def _same(got, want):
    assert set(got) == set(want)
    for A in want:
        assert got[A].dtype == np.int64 and got[A].shape == want[A].shape, A
        np.testing.assert_array_equal(got[A], want[A], err_msg=str(A))


@pytest.fixture(scope="module")
def df():
    return _records(600)


def test_counts_match_dense_histogram(df):
    want = _oracle(df, D, ALL_SETS)
    assert 0 < int(want[()]) < len(df)  # some records are dropped, not all
    _same(marginal_counts(df, D, ALL_SETS), want)
    _same(marginal_counts(df, D, ALL_SETS, batch_size=7), want)  # batches sum exactly
    named = marginal_counts(df, D, [("age", "sex"), "kids", ()])
    _same(named, {A: want[A] for A in [(0, 2), (1,), ()]})
    assert named[()].shape == ()


def test_bins_rule_and_drop_rule():
    frame = pd.DataFrame({"sex": ["F"] * 9, "kids": [0] * 9, "score": [0.5] * 9,
                          "age": [0, 18, 17.999, 30.5, 65, 100, 100.0001, -1e-9, np.nan]})
    c = marginal_counts(frame, D, [(2,)])[(2,)]
    assert c.tolist() == [2, 1, 1, 2]  # [0,18): 0, 17.999; [18,30.5): 18; [30.5,65): 30.5; [65,100]: 65, 100
    # a record out of domain in an attribute outside the requested set is dropped all the same
    frame.loc[0, "kids"] = 3
    assert marginal_counts(frame, D, [(2,), ()])[()] == 5


@pytest.mark.parametrize("cats", [(-3, 0, 7), (-3, 0, 7.0, 10**9)])  # a lookup table; a sorted search
def test_numeric_categories_match_by_value(cats):
    Z = Domain((Attribute("v", categories=cats),))
    ints = np.array([-3, 7, 0, 1, -4, 8, 10**9, 7, 2**40], dtype=np.int64)
    want = [1, 1, 2] + ([1] if len(cats) == 4 else [])
    for col in (ints, ints.astype(np.float64), ints[ints < 2**31].astype(np.int32), pd.array(ints, dtype="Int64")):
        assert marginal_counts(pd.DataFrame({"v": col}), Z, [(0,)])[(0,)].tolist() == want
    big = np.array([2**64 - 3, 7, 0, 2**63 + 7], dtype=np.uint64)  # never wrapped onto -3 or 7
    assert marginal_counts(pd.DataFrame({"v": big}), Z, [(0,)])[(0,)].tolist()[:3] == [0, 1, 1]
    floats = pd.DataFrame({"v": [-3.0, -2.999, 7.5, np.nan, 0.0, 6.9999999]})
    assert marginal_counts(floats, Z, [(0,)])[(0,)].tolist()[:3] == [1, 1, 0]


def test_maximal_sets():
    assert maximal([(0, 1), (0,), (1, 2), (), (0, 1)]) == ((0, 1), (1, 2))


def test_dtype_variants_agree(df):
    want = _oracle(df, D, ALL_SETS)
    variants = {
        "categorical": df.assign(sex=df["sex"].astype("category"), kids=df["kids"].astype("category"),
                                 score=df["score"].astype("category")),
        "str": df.assign(sex=df["sex"].astype("str")),
        "nullable_int": df.assign(kids=df["kids"].astype("Int64")),
        "int": df.fillna({"kids": -1}).astype({"kids": "int64"}),
    }
    for name, frame in variants.items():
        if name == "str":  # astype("str") turns None into the missing value; still dropped
            assert frame["sex"].isna().sum() == df["sex"].isna().sum()
        _same(marginal_counts(frame, D, ALL_SETS), want)


@pytest.mark.filterwarnings("error::UserWarning")  # missing cells are not text: no warning, in a CSV file too
def test_files_parquet_folder_and_csv(df, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    want = _oracle(df, D, ALL_SETS)
    df.to_parquet(tmp_path / "r.parquet", row_group_size=100)
    _same(marginal_counts(tmp_path / "r.parquet", D, ALL_SETS, batch_size=64), want)
    folder = tmp_path / "parts"
    folder.mkdir()
    for k in range(3):
        pq.write_table(__import__("pyarrow").Table.from_pandas(df.iloc[k::3], preserve_index=False),
                       folder / f"part-{k}.parquet")
    _same(marginal_counts(str(folder), D, ALL_SETS), want)
    df.to_csv(tmp_path / "r.csv", index=False)
    _same(marginal_counts(tmp_path / "r.csv", D, ALL_SETS, batch_size=50), want)


def test_csv_reads_string_categories_as_strings(tmp_path):
    path = tmp_path / "codes.csv"
    path.write_text("zip,n\n007,1\n7,2\n010,3\n")
    Z = Domain((Attribute("zip", categories=("007", "010")),))
    assert marginal_counts(path, Z, [(0,)])[(0,)].tolist() == [1, 1]  # "7" is not "007"


@pytest.mark.filterwarnings("ignore:The inplace keyword")  # dask.dataframe under pandas 3.1
def test_dask_matches_pandas(df, tmp_path):
    dd = pytest.importorskip("dask.dataframe")
    distributed = pytest.importorskip("distributed")
    want = _oracle(df, D, ALL_SETS)
    ddf = dd.from_pandas(df, npartitions=5)
    with (distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None)
          as cluster, distributed.Client(cluster)):
        _same(marginal_counts(ddf, D, ALL_SETS, batch_size=40), want)
        ddf.to_parquet(tmp_path / "p")  # a partitioned data set: one file per partition
        assert len(list((tmp_path / "p").glob("*.parquet"))) == 5
        _same(marginal_counts(dd.read_parquet(tmp_path / "p"), D, ALL_SETS), want)
    _same(marginal_counts(tmp_path / "p", D, ALL_SETS), want)  # the same folder through pyarrow


def test_refusals(df, tmp_path):
    with pytest.raises(ValueError, match=r"has no column 'age' .*Its columns are \['kids', 'score', 'sex'"):
        marginal_counts(df.drop(columns="age"), D, [(0,)])
    numbered = Domain((Attribute("0", categories=(1, 2)),))  # an int column 0 is not the attribute '0': said so
    with pytest.raises(ValueError, match=r"has no column '0' .*Its columns are \[0\]\. .*astype\(str\)"):
        marginal_counts(pd.DataFrame({0: [1, 2]}), numbered, [(0,)])
    # a column equal up to case or spaces (SQL engines fold case, CSV headers keep spaces) is named, not used
    for column in ("Age", " age "):
        with pytest.raises(ValueError, match=rf"has no column 'age' .*Did you mean '{column}'\? .*case and spaces"):
            marginal_counts(df.rename(columns={"age": column}), D, [(0,)])
    with pytest.raises(ValueError, match=r"has no column 'age' .*\]\.$"):  # nothing near: no guess
        marginal_counts(df.rename(columns={"age": "zzz"}), D, [(0,)])
    # a CSV without a header: its first line is a record, which the refusal listed as the file's columns (a
    # helper's audit); the fields are counted, not quoted, in every engine; a name equal but for case is said
    headless = tmp_path / "headless.csv"
    df.head(3).to_csv(headless, index=False, header=False)
    first = headless.read_text().splitlines()[0].split(",")
    for engine in ("auto", "polars", "duckdb"):
        with pytest.raises(ValueError, match=rf"no column 'sex' .*first line, its header, has {len(first)} field"
                                             r".*needs a header") as caught:
            marginal_counts(headless, D, [(0,)], engine=engine)
        assert not any(f"'{field}'" in str(caught.value) for field in first), (engine, str(caught.value))
    # read into a frame without its header (pandas, Polars, Dask name the columns after the first record): the
    # same refusal, the fields counted not listed, when none of the domain's attributes is a column (a review)
    frame = pd.read_csv(headless)
    with pytest.raises(ValueError, match=r"no column 'sex' .*None is a column of it, which has 5 field") as caught:
        marginal_counts(frame, D, [(0,)])
    assert not any(f"'{field}'" in str(caught.value) for field in frame.columns)
    frame.columns = ["sexe", "k", "a", "s", "x"]  # a Parquet file is never headerless: its columns are listed
    frame.to_parquet(tmp_path / "named.parquet")
    with pytest.raises(ValueError, match=r"no column 'sex' .*Its columns are \['a', 'k', 's', 'sexe', 'x'\]"):
        marginal_counts(tmp_path / "named.parquet", D, [(0,)])
    cased = tmp_path / "cased.csv"
    df.rename(columns={"age": "AGE"}).to_csv(cased, index=False)
    with pytest.raises(ValueError, match=r"no column 'age' .*Did you mean 'AGE'\? .*case and spaces count"):
        marginal_counts(cased, D, [(0,)])
    # text under a numeric attribute is parsed as a CSV cell, from a DataFrame too (Dask turns object columns into
    # text, and the files, Polars and DuckDB parse it: one table, one count); what is not a number is dropped, said
    typed = marginal_counts(df.assign(age=df["age"].astype(str)), D, [(0,)])
    assert typed[(0,)].tolist() == marginal_counts(df, D, [(0,)])[(0,)].tolist()
    with pytest.warns(UserWarning, match="'age' holds values that are not numbers.*dropped"):  # issue 30: never
        worded = marginal_counts(df.assign(age="thirty"), D, [(0,)])  # a refusal for values
    assert worded[(0,)].sum() == 0
    with pytest.raises(ValueError, match="column 'sex' of dtype number, but .* needs strings"):
        marginal_counts(df.assign(sex=1.0), D, [(0,)])
    with pytest.raises(ValueError, match="column 'age' of dtype datetime64"):
        marginal_counts(df.assign(age=pd.Timestamp("2020-01-01")), D, [(0,)])
    with pytest.raises(ValueError, match="more than one column named 'age'"):
        marginal_counts(pd.concat([df, df[["age"]]], axis=1), D, [(0,)])
    dd = pytest.importorskip("dask.dataframe")  # Dask too (an AttributeError from inside the count before)
    with pytest.raises(ValueError, match="more than one column named 'age'"):
        marginal_counts(dd.from_pandas(pd.concat([df, df[["age"]]], axis=1), npartitions=1), D, [(0,)])
    with pytest.raises(ValueError, match="'sets' parameter of marginal_counts must list at least one marginal"):
        marginal_counts(df, D, [])  # "max() arg is an empty sequence" before
    with pytest.raises(TypeError, match="must be a pandas DataFrame, a path"):
        marginal_counts(df.to_numpy(), D, [(0,)])
    with pytest.raises(TypeError, match="'domain' parameter of marginal_counts must be a Domain"):
        marginal_counts(df, {"attributes": []}, [(0,)])
    with pytest.raises(ValueError, match="names attribute 'height', which is not in the domain"):
        marginal_counts(df, D, [("height",)])
    with pytest.raises(ValueError, match="does not exist"):
        marginal_counts(tmp_path / "nope.parquet", D, [(0,)])
    (tmp_path / "r.txt").write_text("x")
    with pytest.raises(ValueError, match=r"must be a .parquet or .csv file"):
        marginal_counts(tmp_path / "r.txt", D, [(0,)])
    (tmp_path / "bad.csv").write_text("sex,kids,age,score\nF,1,ten,0.5\nM,0,40,0.5\n")
    with pytest.warns(UserWarning, match="'age' holds values that are not numbers"):
        one = marginal_counts(tmp_path / "bad.csv", D, [(0,)])
    assert one[(0,)].tolist() == [0, 1]  # the unparseable record is dropped, the other counted
    with pytest.raises(ValueError, match="'batch_size' parameter of marginal_counts must be an integer >= 1"):
        marginal_counts(df, D, [(0,)], batch_size=0)


def test_maximal_sets_and_their_sources_match_the_pairwise_definition():
    """Issue 30: set containment by listing subsets (the pairwise test took 4·10⁸ comparisons for the 1- to 3-way
    marginals on 50 attributes: a 209 s release, now 6 s) agrees with the definition on random families."""
    import itertools
    import math

    from mmopt.records import counts as rcounts
    rng = np.random.default_rng(3)
    for _ in range(30):
        d = int(rng.integers(3, 9))
        shape = tuple(int(x) for x in rng.integers(1, 5, d))
        family = [tuple(sorted(rng.choice(d, int(rng.integers(0, d + 1)), replace=False).tolist()))
                  for _ in range(int(rng.integers(1, 15)))]
        uniq = list(dict.fromkeys(family))
        brute = tuple(A for A in uniq if not any(set(A) < set(B) for B in uniq))
        top = rcounts.maximal(family)
        assert top == brute
        src = rcounts.smallest_supersets(family, top, shape)
        for A in family:
            fits = [B for B in top if set(A) <= set(B)]
            assert src[A] in fits and math.prod(shape[i] for i in src[A]) == min(
                math.prod(shape[i] for i in B) for B in fits)
    wide = [tuple(range(20)), tuple(range(19)), (25,)]  # past the subset-listing size: the pairwise path
    assert rcounts.maximal(wide) == (tuple(range(20)), (25,))
    assert list(itertools.islice(rcounts.smallest_supersets(wide, rcounts.maximal(wide), (2,) * 30).values(), 1)) == [
        tuple(range(20))]


@pytest.mark.filterwarnings("ignore:The inplace keyword")  # dask.dataframe under pandas 3.1
def test_dask_says_a_near_miss_of_any_partition_once():
    """A partition's near-miss warning is kept with its counts (a worker's stderr is not the caller's) and the
    partitions' messages are joined: "f" in the second and third partition and " m" in the last are each said
    once, with the pandas counts."""
    dd = pytest.importorskip("dask.dataframe")
    import warnings

    import mmopt
    from mmopt.records import counts as rcounts
    Ds = Domain((Attribute("sex", categories=("F", "M")),))
    df = pd.DataFrame({"sex": ["F", "M", "F", "M", "f", "M", "F", "M", "F", "f", "M", " m"]})
    ddf = dd.from_pandas(df, npartitions=3, sort=False)
    assert [p["sex"].tolist().count("f") for p in (ddf.partitions[i].compute() for i in range(3))] == [0, 1, 1]
    for source in (ddf, ddf.astype({"sex": "category"})):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            assert marginal_counts(source, Ds, [(0,)])[(0,)].tolist() == [4, 5]
        near = [str(x.message) for x in w if "case or surrounding spaces" in str(x.message)]
        assert sorted(m.split("category ")[1][:3] for m in near) == ["'F'", "'M'"], near
    with warnings.catch_warnings():
        warnings.simplefilter("error", mmopt.DataWarning)  # kept, not said, where the partition runs
        counts, kept = rcounts._kept_partition_counts(df.iloc[8:], Ds, [(0,)], 100)
    assert counts[(0,)].tolist() == [1, 1] and [m.split("category ")[1][:3] for m in kept] == ["'F'", "'M'"]
