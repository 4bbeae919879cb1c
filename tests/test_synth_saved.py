"""Synthetic.save / mmopt.synth.load (mmopt.synth.saved): every model MST and AIM return is rebuilt bit for bit —
marginals equal to the last bit, the same records under a seed — with its domain, steps, budget, sampler and
details; a damaged, edited or foreign file is refused naming the file."""

import dataclasses
import io
import itertools
import json
import warnings
import zipfile

import numpy as np
import pytest
from test_synth_mst import D, _records

import mmopt
from mmopt.synth import aim, load, mst

W3 = list(itertools.combinations(range(4), 3))
ESTIMATORS = ("auto", "joint", "junction", "residual")
MODELS = {"mst": "TreeModel", "mst_merged": "TreeModel", "auto": "JointModel", "joint": "JointModel",
          "junction": "JunctionModel", "residual": "ResidualModel"}


@pytest.fixture(scope="module")
def runs():
    df = _records(1500)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # seeded noise: a simulation, said by a warning
        out = {"mst": mst(df, D, mmopt.Privacy(1.0, 1e-9), seed=0),
               "mst_merged": mst(_records(3000), D, mmopt.Privacy(0.02, 1e-9), seed=1)}  # values merged
        for est in ESTIMATORS:
            out[est] = aim(df, D, W3, mmopt.Privacy(1.0, 1e-9), seed=0, estimator=est, rounds=8)
    return out


def _same_estimates(a, b):
    assert a.shape == b.shape and list(a.values) == list(b.values) and a.variances == b.variances
    for S in a.values:
        assert np.array_equal(a.values[S], b.values[S]) and np.shape(a.values[S]) == np.shape(b.values[S])


@pytest.mark.parametrize("name", list(MODELS))
def test_the_model_and_everything_public_round_trip_exactly(name, runs, tmp_path):
    s = runs[name]
    back = load(s.save(tmp_path / name))
    assert type(back.model).__name__ == MODELS[name] == type(s.model).__name__
    if name == "auto":  # the AIM run on this small domain fits the whole table
        assert s.details["estimator"]["estimator"] == "joint"
    if name == "mst_merged":  # values merged: the maps and shares are not the identity, the estimates compressed
        assert s.details["compression"].merged and s.details["estimates"].shape != D.shape
    # every set of the domain: the measured ones, and every 1-, 2-, 3- and 4-way one, in two axis orders
    sets = [A for r in range(1, 5) for A in itertools.combinations(range(4), r)]
    assert set(s.measured) <= set(sets)
    for A in sets + [A[::-1] for A in sets]:
        a, b = s.marginal(A), back.marginal(A)
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), A
    for seed in (None, 7):  # None: the run's seed
        assert back.records(300, seed=seed).equals(s.records(300, seed=seed))
    assert back.records(0).equals(s.records(0)) and back.default_rows == s.default_rows
    assert [b.equals(c) for b, c in zip(back.batches(250, rows_per_batch=100, seed=3),
                                        s.batches(250, rows_per_batch=100, seed=3), strict=True)] == [True] * 3
    for field in ("method", "domain", "steps", "rho", "delta", "epsilon", "budget", "sampler", "seed"):
        assert getattr(back, field) == getattr(s, field), field
    assert back.sampler == "numpy-seeded" and back.seed == s.seed is not None and "numpy-seeded" in repr(back)
    assert list(back.details) == list(s.details)
    for key, val in s.details.items():
        if key == "estimates":
            _same_estimates(val, back.details[key])
        elif key == "compression":
            c = back.details[key]
            assert (c.original, c.shape) == (val.original, val.shape)
            assert all(np.array_equal(x, y) and x.dtype == y.dtype for x, y in zip(c.maps + c.shares,
                                                                                 val.maps + val.shares, strict=True))
        else:
            assert back.details[key] == val and type(back.details[key]) is type(val), key


def test_the_residual_model_keeps_its_estimates_once_and_as_its_own(runs, tmp_path):
    s = runs["residual"]
    back = load(s.save(tmp_path / "r"))
    assert back.details["estimates"] is back.model.estimates          # as in the run
    _same_estimates(s.model.estimates, back.model.estimates)
    assert back.model.cliques == s.model.cliques and back.model.structure == s.model.structure
    assert back.model.network() == s.model.network()
    with np.load(tmp_path / "r.npz") as z:
        assert not any(k.startswith("details_") for k in z.files)      # stored once, under the model


def test_a_junction_model_keeps_its_warm_start(runs, tmp_path):
    s = runs["junction"]
    m = load(s.save(tmp_path / "j")).model
    assert (m.cliques, m.parent, m.status, m.iterations, m.loss, m.step, m.total) == (
        s.model.cliques, s.model.parent, s.model.status, s.model.iterations, s.model.loss, s.model.step, s.model.total)
    assert [M for M, _ in m.theta] == [M for M, _ in s.model.theta]
    assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(m.theta, s.model.theta, strict=True))


def _meta(path):
    """The metadata as any zip + .npy + JSON reader sees it (no mmopt code)."""
    with np.load(path, allow_pickle=False) as z:
        assert all(z[k].dtype.kind in "fiu" for k in z.files)             # numbers only: nothing to unpickle
        return json.loads(z["metadata"].tobytes().decode("utf-8"))


def test_the_file_says_it_holds_a_simulation(runs, tmp_path):
    meta = _meta(runs["mst"].save(tmp_path / "sim"))
    assert meta["format"] == "mmopt.synthetic" and meta["format_version"] == 1
    assert meta["sampler"] == "numpy-seeded" and meta["simulation"] is True and "simulation" in meta["note"]
    assert meta["synthetic"]["seed"] == 0 and meta["synthetic"]["method"] == "mst"
    assert meta["synthetic"]["domain"] == json.loads(D.to_json())
    assert [st["kind"] for st in meta["synthetic"]["steps"]] == [st.kind for st in runs["mst"].steps]


def test_a_release_is_saved_as_one(tmp_path):
    s = mst(_records(400), D, mmopt.Privacy(1.0, 1e-9))                 # OpenDP's samplers: no seed, no warning
    path = s.save(tmp_path / "release")
    meta = _meta(path)
    assert meta["sampler"] == "opendp" and meta["simulation"] is False and "note" not in meta
    back = load(path)
    assert (back.sampler, back.seed) == ("opendp", None)
    assert back.records(200, seed=4).equals(s.records(200, seed=4))
    assert back.marginal((0, 2)).tobytes() == s.marginal((0, 2)).tobytes()


def test_names_overwrite_and_paths(runs, tmp_path):
    s = runs["mst"]
    written = s.save(tmp_path / "m")
    assert written.name == "m.npz" and load(tmp_path / "m").method == "mst" and load(str(written)).method == "mst"
    before = written.read_bytes()
    with pytest.raises(FileExistsError, match="^Synthetic.save: the file .* already exists. Pass overwrite=True"):
        runs["auto"].save(written)
    assert written.read_bytes() == before
    assert load(runs["auto"].save(written, overwrite=True)).method == "aim"
    with pytest.raises(TypeError, match="'overwrite' parameter of Synthetic.save must be True or False"):
        s.save(tmp_path / "x", overwrite="yes")
    with pytest.raises(ValueError, match="'path' parameter of Synthetic.save names a directory.*model.npz"):
        s.save(tmp_path)
    with pytest.raises(ValueError, match="'path' parameter of Synthetic.save must be a non-empty"):
        s.save("")
    with pytest.raises(TypeError, match="'path' parameter of Synthetic.save must be a non-empty str"):
        s.save(3)
    with pytest.raises(FileNotFoundError, match="^Synthetic.save: the directory '.*nowhere' does not exist"):
        s.save(tmp_path / "nowhere" / "m")
    with pytest.raises(FileNotFoundError, match=r"mmopt.synth.load: there is no file '.*absent' or '.*absent\.npz'"):
        load(tmp_path / "absent")
    with pytest.raises(TypeError, match="'path' parameter of mmopt.synth.load must be a non-empty str"):
        load(None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.npz"]     # no temporary left behind


def test_what_cannot_be_saved_exactly_is_refused_or_said(runs, tmp_path):
    s = runs["mst"]
    with pytest.raises(ValueError, match="model is a dict, which the file format does not hold. It saves what mst "
                                         "and aim return: TreeModel"):
        dataclasses.replace(s, model={}).save(tmp_path / "x")
    assert not (tmp_path / "x.npz").exists()
    odd = dataclasses.replace(s, details={**s.details, "note": object(), "gap": float("inf"), "n": np.int64(3)})
    back = load(odd.save(tmp_path / "odd"))
    assert "note" not in back.details and "gap" not in back.details and back.details["n"] == 3   # left out, said:
    assert _meta(tmp_path / "odd.npz")["details"]["omitted"] == ["note", "gap"]
    with pytest.raises(TypeError, match="synthetic.save\\(path\\), and read back by mmopt.synth.load"):
        mmopt.save(tmp_path / "y", s)                                     # mmopt.save points to the method


# -- damaged, edited and foreign files -------------------------------------------------------------------------
def refused(path, match):
    with pytest.raises(ValueError, match=match) as info:
        load(path)
    assert str(info.value).startswith(f"mmopt.synth.load: the file '{path}'")


def test_empty_truncated_and_flipped_files_are_refused(runs, tmp_path):
    path = runs["junction"].save(tmp_path / "j")
    data = path.read_bytes()
    path.write_bytes(b"")
    refused(path, r"not an \.npz \(zip\) archive: it is truncated, or was not written by Synthetic.save")
    path.write_bytes(data[: len(data) // 2])
    refused(path, r"not an \.npz \(zip\) archive")
    with zipfile.ZipFile(io.BytesIO(data)) as z:  # inside the compressed metadata (the middle of the file can be a
        at = z.getinfo("metadata.npy").header_offset + 200  # local header's sizes, which readers ignore: harmless)
    assert at + 8 < z.getinfo("metadata.npy").compress_size
    path.write_bytes(data[:at] + bytes(b ^ 0xFF for b in data[at:at + 8]) + data[at + 8:])
    refused(path, "corrupted|damaged|checksum|SHA-256")


def test_any_flipped_bit_is_refused_or_harmless(runs, tmp_path):
    """One bit flipped at 150 places spread over the file: a ValueError naming it, or (a byte no reader uses, e.g.
    a zip timestamp) the same model."""
    s = runs["mst"]
    raw = s.save(tmp_path / "m").read_bytes()
    bad, want = tmp_path / "bad.npz", s.marginal((0, 1, 2, 3)).tobytes()
    for k, i in enumerate(np.linspace(0, len(raw) - 1, 150).astype(int)):
        flipped = bytearray(raw)
        flipped[i] ^= 1 << (k % 8)
        bad.write_bytes(bytes(flipped))
        try:
            got = load(bad)
        except ValueError as exc:
            assert "bad.npz" in str(exc), (i, exc)
            continue
        assert got.marginal((0, 1, 2, 3)).tobytes() == want, i


def test_a_strategy_file_and_a_synthetic_file_each_name_their_reader(runs, tmp_path):
    W = mmopt.workload.prefix(8)
    strategy = mmopt.save(tmp_path / "s", mmopt.optimize(W, method="hierarchical"))
    refused(strategy, "is not an mmopt synthetic-data file \\(format 'mmopt.strategy', expected 'mmopt.synthetic'\\)."
                      " It holds a strategy: read it with mmopt.load.")
    synthetic = runs["mst"].save(tmp_path / "m")
    with pytest.raises(ValueError, match="load: the file .* is not an mmopt strategy file .* It holds a "
                                         "synthetic-data model \\(MST or AIM\\): read it with mmopt.synth.load."):
        mmopt.load(synthetic)
    np.savez(tmp_path / "plain.npz", a=np.eye(2))
    refused(tmp_path / "plain.npz", "no 'metadata' entry, so it was not written by Synthetic.save")


def _raw(path):
    with np.load(path) as z:
        raw = {k: z[k] for k in z.files}
    return json.loads(raw.pop("metadata").tobytes()), raw


def _write(path, meta, raw, rehash):
    from mmopt.persist import _format as fmt
    if rehash:  # an edit that recomputes the checksum: only the consistency checks can catch it
        meta["arrays"] = {k: {"dtype": a.dtype.str, "shape": list(a.shape)} for k, a in raw.items()}
        meta["checksum"] = fmt.checksum(meta, raw)
    np.savez_compressed(path, metadata=np.frombuffer(json.dumps(meta).encode(), np.uint8), **raw)


def test_edits_are_caught_by_the_checksums(runs, tmp_path):
    path = runs["mst"].save(tmp_path / "m")
    meta, raw = _raw(path)
    meta["sampler"] = "opendp"  # a simulation passed off as a release
    _write(path, meta, raw, rehash=False)
    refused(path, "metadata does not match the SHA-256 checksum")
    meta, raw = _raw(runs["mst"].save(path, overwrite=True))
    raw["model_oneway_0"] = raw["model_oneway_0"] + 1.0
    _write(path, meta, raw, rehash=False)
    refused(path, "arrays do not match the SHA-256 checksum")
    meta, raw = _raw(runs["mst"].save(path, overwrite=True))
    meta["format_version"] = 2
    _write(path, meta, raw, rehash=True)
    refused(path, "format version 2, which this mmopt .* cannot read: it reads version 1.*Upgrade mmopt")


def test_a_synthetic_edited_by_hand_is_refused_before_anything_is_written(runs, tmp_path):
    s = runs["mst"]
    for odd, match in ((dataclasses.replace(s, sampler="opendp"), "sampler 'opendp' with seed 0 .* which disagree"),
                       (dataclasses.replace(s, budget=s.rho / 2), "a budget that does not add up"),
                       (dataclasses.replace(s, method="pgm"), "method 'pgm'")):
        with pytest.raises(ValueError, match=f"Synthetic.save: the file records {match}.*, which "
                                             "mmopt.synth.load refuses. Nothing was written."):
            odd.save(tmp_path / "odd")
    assert list(tmp_path.iterdir()) == []
