"""The command line's spec parsers and its in-process behaviour (mmopt.cli.spec, .strategies, .output, main).

Each spec is checked against the library constructor it names (same Gram, same query count); each bad spec
against the token and the position its message must name. Subprocess runs are in tests/test_cli.py.
"""

import csv
import importlib.util
import json
import math
import os
import re

import numpy as np
import pytest

import mmopt
from mmopt import strategy as st
from mmopt import workload as wl
from mmopt.cli import commands, main, output
from mmopt.cli import spec as sp
from mmopt.cli.strategies import build_strategy


def _same(a, b):
    """Same workload: query count and Gram (dense, or the implicit one's Gram on a small domain)."""
    assert a.n_queries == b.n_queries and a.domain_size == b.domain_size
    ga = a.gram
    gb = b.gram
    np.testing.assert_allclose(ga, gb, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("text, expected", [
    ("identity:16", lambda: wl.identity(16)),
    ("total:16", lambda: wl.total(16)),
    ("prefix:64", lambda: wl.prefix(64)),
    ("all_range:32", lambda: wl.all_range(32)),
    ("all_predicate:8", lambda: wl.all_predicate(8)),
    ("identity_total:5", lambda: wl.identity_total(5)),
    ("random_range:64:100:7", lambda: wl.random_range(64, 100, seed=7)),
    ("random_range:64:100", lambda: wl.random_range(64, 100, seed=0)),  # a spec always means one workload
    ("marginals:4x4x4x4:k=2", lambda: wl.marginals((4, 4, 4, 4), 2)),
    ("marginals:3x5:1", lambda: wl.marginals((3, 5), 1)),
    # k<=K as --workload on records reads it: every marginal on 1 to K attributes (it was an unknown key)
    ("marginals:2x3x4:k<=2", lambda: wl.stack([wl.marginals((2, 3, 4), 1), wl.marginals((2, 3, 4), 2)])),
    ("marginals:2x3:k<=2", lambda: wl.marginals((2, 3), attributes=[(0,), (1,), (0, 1)])),
    ("ranges_2d:8", lambda: wl.ranges_2d(8)),
    ("prefix_3d:4", lambda: wl.prefix_3d(4)),
    ("kron(prefix:4, identity:3)", lambda: wl.kron(wl.prefix(4), wl.identity(3))),
    ("kron(kron(prefix:4,identity:3),total:2)", lambda: wl.kron(wl.prefix(4), wl.identity(3), wl.total(2))),
    ("  kron( prefix:4 ,identity:3 ) ", lambda: wl.kron(wl.prefix(4), wl.identity(3))),
    ("stack(prefix:8, all_range:8)", lambda: wl.stack([wl.prefix(8), wl.all_range(8)])),
    ("stack(2*prefix:8, all_range:8)", lambda: wl.stack([wl.prefix(8), wl.all_range(8)], [2.0, 1.0])),
    ("stack(0.5*prefix:8,1e1*total:8)", lambda: wl.stack([wl.prefix(8), wl.total(8)], [0.5, 10.0])),
    ("stack(kron(prefix:4,total:3), kron(total:4,prefix:3))",
     lambda: wl.stack([wl.kron(wl.prefix(4), wl.total(3)), wl.kron(wl.total(4), wl.prefix(3))])),
])
def test_spec_builds_the_library_workload(text, expected):
    _same(sp.build_workload(text), expected())


@pytest.mark.parametrize("name", ["sf1", "adult_w1", "adult_w2", "cps_w1", "cps_w2"])
def test_census_names(name):
    W, ref = sp.build_workload(name), getattr(wl, name)()
    assert (W.name, W.shape, W.n_queries) == (ref.name, ref.shape, ref.n_queries)


def test_every_listed_example_builds():
    for form in sp.FORMS.values():
        if form.example in ("sf1_persons", "sf1_plus"):  # large census workloads: covered by name above
            continue
        W = sp.build_workload(form.example)
        assert W.n_queries >= 1 and W.domain_size >= 1
    for _, _, example in sp.COMPOSITES[:2]:
        assert sp.build_workload(example).n_queries >= 1


def test_ebnf_is_the_one_documented():
    """The grammar printed by 'mmopt workloads' is the one in the module docstring, line for line."""
    for line in sp.EBNF.splitlines():
        assert line.strip() in sp.__doc__


@pytest.mark.parametrize("text, token, pos", [
    ("prefx:8", "'prefx'", 0),
    ("kron(prefix:4, identty:3)", "'identty'", 15),
    ("prefix:x", "'x'", 7),
    ("prefix", "'prefix'", 0),               # missing N
    ("prefix:8:9", "'prefix'", 0),           # one too many
    ("stack(prefix:4 identity:4)", "'identity'", 15),
    ("2*prefix:4", "'2*'", 0),               # a weight outside stack
    ("prefix:8)", "')'", 8),
    ("kron(prefix:4,", "spec ended", 14),
    ("kron", "'kron'", 0),
    ("marginals:4x4:j=2", "'j='", 14),
    ("marginals:4x4:k<=3", "k<=3 for marginals on 2 attributes: K must be 1 … 2", 14),
    ("marginals:4x4:k<=0", "K must be 1 … 2", 14),
    ("marginals:4y4:k=2", "'4y4'", 10),
    ("stack(a*prefix:3)", "'a'", 6),
    ("random_range:8:x", "'x'", 15),
    ("sf1:3", "'sf1'", 0),
    ("", "empty", 0),
])
def test_bad_spec_names_token_position_and_grammar(text, token, pos):
    with pytest.raises(ValueError) as info:
        sp.build_workload(text)
    msg = str(info.value)
    assert token in msg and f"at position {pos} in '{text}'" in msg and "Grammar:" in msg


def test_unknown_name_lists_the_known_ones():
    msg = str(pytest.raises(ValueError, sp.parse, "prefx:8").value)
    assert msg.startswith("unknown workload 'prefx' at position 0 in 'prefx:8'. Known: identity, total, prefix")
    assert msg.split("\n")[0].endswith("FILE.npz. Did you mean 'prefix'?")  # up to case too, and kron/stack:
    for typo, meant in (("Prefix:8", "prefix"), ("allrange:8", "all_range"), ("krn(prefix:4)", "kron")):
        assert f"Did you mean '{meant}'?" in str(pytest.raises(ValueError, sp.parse, typo).value)
    assert "Did you mean" not in str(pytest.raises(ValueError, sp.parse, "zzzz:3").value)  # nothing near: no guess
    msg = str(pytest.raises(ValueError, sp.parse, "prefix(64)").value)  # only kron and stack take parentheses
    assert msg.startswith("unexpected '(' after a complete workload (arguments follow colons: 'prefix:…') at "
                          "position 6")


@pytest.mark.parametrize("text, library, pos", [
    ("kron(prefix:0,identity:3)", "The 'n' parameter of prefix", 5),
    ("stack(prefix:4,identity:5)", "domain size", 0),
    ("marginals:4x4:k=3", "The 'k' parameter of marginals", 0),
    ("stack(0*prefix:4,total:4)", "The 'weights' parameter of stack", 0),
])
def test_library_errors_are_placed_in_the_spec(text, library, pos):
    msg = str(pytest.raises(ValueError, sp.build_workload, text).value)
    assert library in msg and f"at position {pos} in '{text}'" in msg


def test_workload_files(tmp_path):
    W = np.random.default_rng(0).integers(0, 2, size=(7, 5)).astype(float)
    W[0] = 1.0
    np.save(tmp_path / "w.npy", W)
    np.savez(tmp_path / "w.npz", W=W)
    np.savez(tmp_path / "g.npz", G=W.T @ W, n_queries=7)
    np.savez(tmp_path / "bad.npz", X=W)
    ref = wl.Workload.from_matrix(W)
    for name in ("w.npy", "w.npz", "g.npz"):
        _same(sp.build_workload(str(tmp_path / name)), ref)
    odd = tmp_path / "a,b:c.npy"  # a whole path is read even with the grammar's punctuation in it
    np.save(odd, W)
    _same(sp.build_workload(str(odd)), ref)
    _same(sp.build_workload(f"stack({tmp_path / 'w.npy'}, {tmp_path / 'g.npz'})"), wl.stack([ref, ref]))
    msg = str(pytest.raises(ValueError, sp.build_workload, str(tmp_path / "bad.npz")).value)
    assert "['X']" in msg and "'G' and 'n_queries'" in msg
    # n_queries 2.5 was truncated to 2 (the per-query figures wrong); W beside G was read and G left unread
    np.savez(tmp_path / "half.npz", G=W.T @ W, n_queries=2.5)
    np.savez(tmp_path / "both.npz", G=W.T @ W, n_queries=7, W=np.eye(5))
    msg = str(pytest.raises(ValueError, sp.build_workload, str(tmp_path / "half.npz")).value)
    assert "'n_queries' must be one integer" in msg and "2.5" in msg
    msg = str(pytest.raises(ValueError, sp.build_workload, str(tmp_path / "both.npz")).value)
    assert "['G', 'W', 'n_queries']" in msg and "exactly 'W'" in msg
    assert "does not exist" in str(pytest.raises(ValueError, sp.build_workload, "missing.npy").value)


@pytest.mark.parametrize("text, expected", [
    ("identity", lambda n: st.identity(n)),
    ("H2", lambda n: st.hierarchical(n, 2)),
    ("H4", lambda n: st.hierarchical(n, 4)),
    ("hierarchical", lambda n: st.hierarchical(n)),
    ("hierarchical:3", lambda n: st.hierarchical(n, 3)),
    ("wavelet", lambda n: st.wavelet(n)),
])
def test_strategy_leaves_on_a_dense_workload(text, expected):
    A = build_strategy(text, wl.prefix(16))
    np.testing.assert_array_equal(A.matrix, expected(16).matrix)


def test_strategies_on_product_domains():
    W = wl.ranges_2d(4)  # implicit: a leaf means the same strategy on every attribute
    A = build_strategy("H2", W)
    assert isinstance(A, st.ImplicitStrategy) and A.shape == (4, 4)
    np.testing.assert_array_equal(A.dense(), np.kron(st.hierarchical(4).matrix, st.hierarchical(4).matrix))
    B = build_strategy("kron(wavelet, identity)", W)
    np.testing.assert_array_equal(B.dense(), np.kron(st.wavelet(4).matrix, np.eye(4)))
    dense = sp.build_workload("kron(prefix:4,identity:3)")  # dense, but built on a product domain
    C = build_strategy("kron(H2,identity)", dense)
    np.testing.assert_array_equal(C.dense(), np.kron(st.hierarchical(4).matrix, np.eye(3)))


@pytest.mark.parametrize("text, workload, needle", [
    ("Hx", "prefix:8", "unknown strategy 'Hx' at position 0"),
    ("kron(H2,identity,identity)", "ranges_2d:4", "3 factors but the workload has 2 attributes"),
    ("kron(H2)", "prefix:8", "needs a workload on a product domain"),
    ("kron(H2,kron(identity))", "ranges_2d:4", "cannot be a factor"),
    ("identity:3", "prefix:8", "too many arguments"),
    ("hierarchical:b", "prefix:8", "branching 'b'"),
    ("wavelet", "prefix:12", "power of 2"),
    ("wavelet", "prefix:12", "On the command line --strategy tree:2 (H2, implicit) takes any n."),
    ("H2", "prefix:20000", "On the command line --strategy tree:2 is an H_B tree held implicitly, at any n (where n "
                           "is not a power of 2 it splits some nodes differently"),
    ("hierarchical:4", "prefix:20000", "--strategy tree:4 is an H_B tree held implicitly"),
    ("2*identity", "prefix:8", "only allowed on a part of stack"),
])
def test_bad_strategy_specs(text, workload, needle):
    with pytest.raises(ValueError, match=None) as info:
        build_strategy(text, sp.build_workload(workload))
    assert needle in str(info.value)


def test_strategy_matrix_file(tmp_path):
    A = np.random.default_rng(1).normal(size=(10, 6))
    np.save(tmp_path / "A.npy", A)
    np.testing.assert_array_equal(build_strategy(str(tmp_path / "A.npy"), wl.prefix(6)).matrix, A)


@pytest.mark.parametrize("text, pair", [
    ("restarts=4", ("restarts", 4)), ("polish=false", ("polish", False)), ("weight=0.5", ("weight", 0.5)),
    ("engine=local", ("engine", "local")), (" p = 3", ("p", 3)),
])
def test_parse_option(text, pair):
    key, value = commands.parse_option(text)
    assert (key, value) == pair and type(value) is type(pair[1])


@pytest.mark.parametrize("bad", ["restarts", "=4", ""])
def test_parse_option_refuses(bad):
    with pytest.raises(ValueError, match="key=value"):
        commands.parse_option(bad)


def test_output_json_and_csv(tmp_path):
    record = {"a": 1, "b": {"c": float("inf"), "d": [1.5, np.float64(2)]}, "e": 2**80, "f": np.bool_(True)}
    assert output.jsonable(record) == {"a": 1, "b": {"c": "inf", "d": [1.5, 2.0]}, "e": 2**80, "f": True}
    output.write_record(str(tmp_path / "r.csv"), record)
    with open(tmp_path / "r.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert rows == [{"a": "1", "b.c": "inf", "b.d": "[1.5, 2.0]", "e": str(2**80), "f": "True"}]
    output.write_record(str(tmp_path / "r.json"), record)
    assert json.loads((tmp_path / "r.json").read_text())["e"] == 2**80
    with pytest.raises(ValueError, match=r"\.json or \.csv"):
        output.write_record(str(tmp_path / "r.txt"), record)


# -- main() in process: exit codes and messages ----------------------------------------------------------
def test_main_usage_errors_exit_2_without_traceback(capsys):
    assert main(["evaluate", "prefx:8"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mmopt: error: unknown workload 'prefx' at position 0 in 'prefx:8'")
    assert "Traceback" not in err
    assert main(["plan", "prefix:8", "--target", "5", "--epsilon", "1"]) == 2  # plan's answer is ε
    assert "plan finds ε itself (the smallest budget whose strategy meets --target)" in capsys.readouterr().err
    for value in ("-1", "-1e-3", "-.5"):  # -1e-3 too: argparse 3.11 took it for an option ("expected one argument")
        assert main(["evaluate", "prefix:8", "--epsilon", value]) == 2
        assert "error: --epsilon (the 'epsilon' parameter of Privacy) must be" in capsys.readouterr().err
    assert main(["optimize", "prefix:8", "--method", "nonsense"]) == 2
    assert "'method' parameter of optimize" in capsys.readouterr().err
    assert main(["optimize", "prefix:8", "--option", "warp=9"]) == 2
    assert "Unknown options ['warp']" in capsys.readouterr().err
    assert main(["evaluate", "prefix:8", "--epsilon", "abc"]) == 2  # argparse's own check
    assert main([]) == 2


def _damaged_inputs(tmp_path):
    """(file, what it is) pairs: empty, truncated and damaged .npy and .npz files."""
    W = np.tril(np.ones((8, 8)))
    np.save(tmp_path / "w.npy", W)
    raw = (tmp_path / "w.npy").read_bytes()
    (tmp_path / "empty.npy").write_bytes(b"")
    (tmp_path / "trunc.npy").write_bytes(raw[:100])
    head = bytearray(raw)
    head[20] = ord("(")  # an unclosed bracket in the header: tokenize.TokenError
    (tmp_path / "head.npy").write_bytes(bytes(head))
    np.savez(tmp_path / "w.npz", W=W)
    crc = bytearray((tmp_path / "w.npz").read_bytes())
    crc[crc.find(b"\x93NUMPY") + 200] ^= 0xFF  # a byte of W's data: zipfile's CRC check fails on reading W
    (tmp_path / "crc.npz").write_bytes(bytes(crc))
    (tmp_path / "empty.npz").write_bytes(b"")
    return W


@pytest.mark.parametrize("name, said", [
    ("empty.npy", r"could not be read as an .npy array \(EOFError: .*empty, truncated or damaged"),
    ("trunc.npy", r"could not be read as an .npy array \(ValueError: EOF.*empty, truncated or damaged"),
    ("head.npy", r"could not be read as an .npy array \(TokenError: .*empty, truncated or damaged"),
    ("crc.npz", r"is a damaged .npz archive: reading its arrays failed \(BadZipFile: Bad CRC-32"),
    ("empty.npz", r"is not a readable .npz archive \(EOFError\)"),
])
def test_main_damaged_workload_files_exit_2(tmp_path, capsys, name, said):
    """An empty or corrupt file crashed with a traceback, exit 1 and "unexpected EOFError ... Please report this"
    (the npz's members were read lazily, outside the loader's handling)."""
    _damaged_inputs(tmp_path)
    path = str(tmp_path / name)
    assert main(["evaluate", path]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"mmopt: error: The workload file '{path}' ")
    assert re.search(said, err) and "Traceback" not in err and "Please report" not in err


def test_main_damaged_strategy_and_data_files_exit_2(tmp_path, capsys):
    _damaged_inputs(tmp_path)
    empty = str(tmp_path / "empty.npy")
    assert main(["evaluate", "prefix:8", "--strategy", empty]) == 2
    assert capsys.readouterr().err.startswith(f"mmopt: error: The strategy file '{empty}' could not be read as an "
                                              ".npy array (EOFError")
    code = main(["release", "prefix:8", "--data", empty, "--epsilon", "1", "--out", str(tmp_path / "e.npy")])
    assert code == 2
    assert capsys.readouterr().err.startswith(f"mmopt: error: The --data file '{empty}' could not be read as an "
                                              ".npy array (EOFError")


def test_workload_file_of_the_other_kind_is_refused(tmp_path):
    """An .npz named .npy was read as an NpzFile and refused as a string array; an .npy named .npz failed as
    "'numpy.ndarray' object does not support the context manager protocol"."""
    W = _damaged_inputs(tmp_path)
    (tmp_path / "z.npy").write_bytes((tmp_path / "w.npz").read_bytes())
    np.save(tmp_path / "a.npy", W)
    (tmp_path / "a.npz").write_bytes((tmp_path / "a.npy").read_bytes())
    with pytest.raises(ValueError, match="is an .npz archive, not an .npy array"):
        sp.build_workload(str(tmp_path / "z.npy"))
    with pytest.raises(ValueError, match="is an .npy array, not an .npz archive"):
        sp.build_workload(str(tmp_path / "a.npz"))


def test_main_numerical_and_solver_errors_exit_1(monkeypatch, capsys):
    def broken(*a, **k):
        raise mmopt.NumericalError("the error of 'X' is below the SVD bound")

    monkeypatch.setattr(mmopt, "evaluate", broken)
    assert main(["evaluate", "prefix:8"]) == 1
    assert capsys.readouterr().err == "mmopt: error: the error of 'X' is below the SVD bound\n"

    def fails(*a, **k):
        raise mmopt.SolverError("CLARABEL failed")

    monkeypatch.setattr(mmopt, "optimize", fails)
    assert main(["optimize", "prefix:8"]) == 1
    assert "CLARABEL failed" in capsys.readouterr().err


def test_evaluate_in_process_matches_the_library(capsys):
    assert main(["evaluate", "kron(prefix:50,identity:100)", "--strategy", "kron(H2,identity)", "--epsilon", "0.5",
                 "--delta", "1e-6", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    W = wl.kron(wl.prefix(50), wl.identity(100))
    A = st.kron(st.hierarchical(50), st.identity(100))
    P = mmopt.Privacy(0.5, 1e-6)
    r = mmopt.evaluate(W, A, P)
    assert got["total_squared_error"] == r.total_squared_error and got["total_exact"] is True
    assert got["svd_bound"] == mmopt.svd_bound(W, P) and got["noise"] == "gaussian"
    assert math.isclose(got["ratio_to_svd_bound"], r.total_squared_error / mmopt.svd_bound(W, P), rel_tol=1e-12)
    assert got["shape"] == [50, 100] and got["sensitivity"] == r.sensitivity


def test_workloads_lists_every_form(capsys):
    assert main(["workloads"]) == 0
    text = capsys.readouterr().out
    for form in sp.FORMS.values():
        assert form.pattern in text and form.example in text
    assert sp.EBNF.splitlines()[3].strip() in text and "hierarchical[:B]" in text
    assert main(["workloads", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["form"] for r in listed["workloads"]][:len(sp.FORMS)] == [f.pattern for f in sp.FORMS.values()]


@pytest.mark.parametrize("command", ["workloads", "evaluate", "optimize", "release"])
def test_help_shows_examples(command, capsys):
    assert main([command, "--help"]) == 0
    text = capsys.readouterr().out
    assert "examples:" in text and f"mmopt {command}" in text


def test_optimize_in_process_with_initial_and_options(capsys, tmp_path):
    out = tmp_path / "o.csv"
    assert main(["optimize", "prefix:8", "--method", "min_error", "--initial", "H2", "--option", "engine=local",
                 "--option", "restarts=1", "--seed", "3", "--json", "--out", str(out)]) == 0
    got = json.loads(capsys.readouterr().out)
    W = wl.prefix(8)
    res = mmopt.optimize(W, method="min_error", initial=st.hierarchical(8), seed=3,
                         options={"engine": "local", "restarts": 1})
    assert got["objective"] == res.objective and got["status"] == res.status and got["norm"] == "l1"
    assert got["lower_bound"] == res.lower_bound and got["strategy"]["rows"] == res.strategy.matrix.shape[0]
    assert got["evaluate"]["total_squared_error"] == mmopt.evaluate(W, res.strategy, mmopt.Privacy(1.0)) \
        .total_squared_error
    with open(out, newline="") as fh:
        (row,) = list(csv.DictReader(fh))
    assert float(row["objective"]) == res.objective and row["workload.name"] == "prefix(8)"
    assert float(row["evaluate.total_squared_error"]) == got["evaluate"]["total_squared_error"]


def test_totals_beyond_float64(capsys):
    """All predicates on 1,100 cells: m = 2¹¹⁰⁰ − 1 stays exact, the inf total is "inf", the ratio is per query."""
    assert main(["evaluate", "all_predicate:1100", "--json"]) == 0
    captured = capsys.readouterr()
    got = json.loads(captured.out)
    W, P = wl.all_predicate(1100), mmopt.Privacy(1.0)
    assert got["n_queries"] == 2**1100 - 1 and got["total_squared_error"] == "inf" == got["svd_bound"]
    with pytest.warns(RuntimeWarning):
        ref = mmopt.evaluate(W, st.identity(1100), P)
    assert got["mean_squared_error"] == ref.mean_squared_error and got["log10_total"] == ref.log10_total
    per_query = mmopt.svd_bound(W, P, per_query=True)
    assert got["ratio_to_svd_bound"] == pytest.approx(ref.mean_squared_error / per_query, rel=1e-12)
    assert "mmopt: warning: The total error" in captured.err and "mmopt/dispatch" not in captured.err


def test_release_refuses_unwritable_output_before_any_noise(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.ones(4))
    code = main(["release", "prefix:4", "--data", str(tmp_path / "x.npy"), "--epsilon", "1",
                 "--out", str(tmp_path / "missing" / "a.npy")])
    assert code == 2 and "cannot be written" in capsys.readouterr().err


@pytest.mark.skipif(importlib.util.find_spec("opendp") is None, reason="release needs opendp")
def test_release_on_a_product_domain(tmp_path, capsys):
    x = np.arange(16.0).reshape(4, 4)
    np.save(tmp_path / "x.npy", x)
    code = main(["release", "ranges_2d:4", "--data", str(tmp_path / "x.npy"), "--epsilon", "1e4",
                 "--strategy", "kron(H2,identity)", "--out", str(tmp_path / "a.npy"), "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    answers = np.load(tmp_path / "a.npy")
    W = wl.ranges_2d(4)
    assert answers.shape == (W.n_queries,) == (report["n_answers"],)
    np.testing.assert_allclose(answers, W.dense() @ x.ravel(), atol=0.5)  # ε = 10⁴: the noise is negligible
    assert report["sensitivity_exact"] is True and report["expected_total_is_upper_bound"] is False


def test_tree_spec_is_the_stream_tree_strategy_at_any_n():
    """'tree[:B]' is mmopt.toeplitz.trees: held by (n, B) on a 1-D workload (prefix:20000 is a stream workload, where
    'H8' would be built as a 20,000-column matrix and refused), its matrix in a kron factor; a bad branching is
    refused at its position."""
    from mmopt import toeplitz
    S = build_strategy("tree:16", sp.build_workload("prefix:20000"))
    assert S == toeplitz.tree(20000, 16)
    assert build_strategy("tree", sp.build_workload("prefix:64")) == toeplitz.tree(64, 8)
    K = build_strategy("kron(tree:2, identity)", sp.build_workload("ranges_2d:4"))
    assert np.array_equal(K.terms[0].factors[0].matrix, toeplitz.tree(4, 2).to_dense())
    with pytest.raises(ValueError, match=r"branching '1' of 'tree' is not an integer ≥ 2 at position 5"):
        build_strategy("tree:1", sp.build_workload("prefix:64"))


def _json_of(capsys, *argv) -> dict:
    import json
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_evaluate_ratio_is_finite_at_any_epsilon_and_the_release_noise_is_said(capsys):
    """An auditor's probe: the ratio read nan at ε = 1e-200 and inf at 1e308 (both totals past float64), though it
    does not depend on ε; and evaluate's Gaussian figures are the analytic σ's while release draws OpenDP's larger
    one (19 % more variance at ε = 0.5, δ = 1e-5), with nothing said."""
    import mmopt
    W = mmopt.workload.prefix(8)
    want = mmopt.expected_error(W, mmopt.strategy.identity(8)) / mmopt.svd_bound(W)
    for eps in ("1e-200", "1", "1e308"):
        r = _json_of(capsys, "evaluate", "prefix:8", "-s", "identity", "-e", eps)
        assert r["ratio_to_svd_bound"] == pytest.approx(want, rel=1e-9)
        assert r["release_variance_ratio"] == pytest.approx(1.0, abs=1e-5) and r["calibration"] == "b = Δ/ε"
    from mmopt.planning.calibration import variance_factor
    r = _json_of(capsys, "evaluate", "prefix:8", "-s", "identity", "-e", "0.5", "-d", "1e-5")
    ratio = variance_factor(0.5, 1e-5, "release") / mmopt.Privacy(0.5, 1e-5).variance_factor
    assert r["release_variance_ratio"] == pytest.approx(ratio, rel=1e-12) and 1.1 < ratio < 1.3
    assert r["noise"] == "gaussian" and r["calibration"].startswith("analytic")


def test_plan_prints_no_release_command_whose_noise_would_miss_the_targets(capsys):
    """An auditor's probe: plan --calibration analytic printed a release command at the analytic ε, where
    release's OpenDP σ gave variance 5.66 against the target 5."""
    r = _json_of(capsys, "plan", "prefix:8", "--target", "5", "-d", "1e-6", "--calibration", "analytic")
    assert r["release_with"] is None and "--calibration release" in r["release_note"]
    r = _json_of(capsys, "plan", "prefix:8", "--target", "5", "-d", "1e-6")
    assert r["release_with"].startswith("mmopt release prefix:8") and "--save FILE.npz" in r["release_note"]
    import shlex  # the command pastes into a shell: "(plan --save FILE.npz)" inside it did not (a newcomer's audit)
    assert "(" not in r["release_with"] and shlex.split(r["release_with"])[5:7] == ["--strategy", "FILE.npz"]


def test_plan_says_which_unit_each_ratio_is_in(capsys):
    """'ratio' 1.978 (ε over its bound) beside "the objective is 3.913× the proven lower bound" (variances): two
    ratios of one plan, unexplained (a helper's audit)."""
    r = _json_of(capsys, "plan", "all_range:32", "--target", "25")
    shown = float(r["message"].split("× the proven lower bound")[0].rsplit(" ", 1)[1])
    assert r["ratio"] == pytest.approx(r["epsilon"] / r["epsilon_lower_bound"], rel=1e-12)
    assert f"'ratio' {r['ratio']:.6g} is ε over epsilon_lower_bound" in r["message"] and shown > r["ratio"] > 1


def test_optimize_with_another_norm_says_the_objective_is_not_c_times_the_error(capsys, tmp_path, monkeypatch):
    """--norm l2 under a Laplace budget printed 'total_squared_error = c·objective with c = 2' beside 17.87 and
    133.18 (the error is the L1 strategy's: 2·66.59); with --save it failed only after the run (a helper's audit)."""
    from mmopt.cli import main
    assert main(["optimize", "prefix:8", "--method", "l2_approx", "--norm", "l2"]) == 0
    text = capsys.readouterr().out
    assert "c·objective with" not in text and "the objective is in l2, the error below in l1" in text
    assert main(["optimize", "prefix:8", "--method", "l2_approx"]) == 0
    assert "total_squared_error = c·objective with c = 2" in capsys.readouterr().out
    monkeypatch.chdir(tmp_path)
    assert main(["optimize", "prefix:8", "--method", "l2_approx", "--norm", "l2", "--save", "a.npz"]) == 2
    err = capsys.readouterr().err
    assert "--save stores the strategy with its budget (laplace noise, Δ in l1), which --norm l2" in err
    assert "pass --delta" in err and not os.listdir(tmp_path)


def test_a_workload_specs_own_seed_is_not_blamed_on_the_seed_option(capsys):
    from mmopt.cli import main
    assert main(["optimize", "random_range:8:5:-1"]) == 2
    err = capsys.readouterr().err
    assert "The 'seed' parameter of random_range" in err and "--seed (" not in err


def test_plan_prints_its_epsilon_rounded_up(capsys):
    """ε 1.0000007 showed as 1 in plan's table: released at 1, the variance 2.0000028 passes the target 2."""
    from mmopt.cli import main
    r = _json_of(capsys, "plan", "prefix:1", "--target", "2")
    assert r["epsilon"] > 1.0
    assert main(["plan", "prefix:1", "--target", "2"]) == 0
    line = next(s for s in capsys.readouterr().out.splitlines() if s.strip().startswith("epsilon "))
    assert float(line.split()[1]) >= r["epsilon"]


def test_lower_marginals_spec_is_named_by_its_orders():
    """'marginals:SHAPE:k<=K' is named for the orders it holds (a table's workload column), not '…,3 sets)'."""
    assert sp.build_workload("marginals:2x3x4:k<=2").name == "marginals(2x3x4,k=1..2)"
