"""The models' arrays and structure in a file (mmopt.synth.saved_models): a file edited with its checksum recomputed
(the checksum is no signature) is refused by the consistency checks, naming the file and what disagrees, never
with a bare IndexError or an endless walk up a cyclic tree; a model that cannot be stored exactly is refused."""

import dataclasses

import numpy as np
import pytest
from test_persist import _array_edit as _array
from test_persist import _nan
from test_persist import _set as _set_at
from test_synth_saved import _raw, _write, refused, runs  # noqa: F401  (runs: the fixture)


def _set(*path, value):
    return _set_at(path, value)  # (test_persist's edit, with the path spread)


# (run, edit, what the refusal says), each file's checksum recomputed after the edit
EDITS = {
    "tree_cycle": ("mst", _set("model", "parent", value=[1, 0, 1, 0]), "not a breadth-first order"),
    "tree_edges": ("mst", _set("model", "edges", value=[[0, 1], [0, 2], [0, 3]]), "do not match its parents"),
    "tree_shape": ("mst", _array("model_table_0", lambda a: a[:1]), "expected float64 of shape"),
    "tree_missing": ("mst", lambda meta, raw: meta["model"].pop("order"), "without 'model.order'"),
    "junction_cycle": ("junction", _set("model", "parent", value=[1, 0]), "contains a cycle"),
    "junction_parent": ("junction", _set("model", "parent", value=[-1, 5]), "integers ≥ -1 and < 2"),
    "junction_nan": ("junction", _array("model_belief_0", _nan), "NaN or infinite"),
    "joint_float32": ("joint", _array("model_table", lambda a: a.astype(np.float32)), "dtype float32"),
    "joint_status": ("joint", _set("model", "status", value="great"), "status 'great'"),
    "kind": ("joint", _set("model", "kind", value="pgm"), "model of kind 'pgm'"),
    "total": ("joint", _set("model", "total", value="nan"), "'model.total' is 'nan', not a finite number"),
    "variance": ("residual", _array("model_estimates_variances", lambda a: -a), "variance ≤ 0"),
    "subset": ("residual", _set("model", "estimates", "subsets", 1, value=[7]), "integers ≥ 0 and < 4"),
    "unsorted": ("residual", _set("model", "cliques", 0, value=[2, 1, 0]), "not strictly increasing"),
    "details_same": ("mst", _set("details", "same_as_model", value=["edges"]), "the model has none"),
    "details_keys": ("mst", _set("details", "keys", value=["edges"]), "keys do not match"),
    "compression": ("mst", _array("details_1_map_0", lambda a: a + 10), "cells outside its compressed sizes"),
    "extra": ("mst", lambda meta, raw: raw.update(spare=np.ones(2)), r"arrays \['spare'\] that its model"),
    "domain": ("mst", _set("synthetic", "domain", "attributes", 1, "name", value="a"), "domain that is not valid"),
    "domain_size": ("mst", _set("synthetic", "domain", "attributes", 1, "categories", value=[0, 1, 2]),
                    "expected float64 of shape"),
    "budget": ("mst", _set("synthetic", "budget", value=1e-6), "budget that does not add up"),
    "release": ("mst", _set("sampler", value="opendp"), "sampler 'opendp' with seed 0 .* which disagree"),
    "simulation": ("mst", _set("simulation", value=False), "simulation False, which disagree"),
    "seed": ("mst", _set("synthetic", "seed", value=True), "'synthetic.seed' is True, not of type int or NoneType"),
    "step": ("mst", _set("synthetic", "steps", 0, "kind", value="laplace"), "step 0 of kind 'laplace'"),
    "step_sets": ("mst", _set("synthetic", "steps", 0, "sets", value=[[0, 9]]), "steps\\[0\\].sets"),
}


@pytest.mark.parametrize("case", list(EDITS))
def test_an_edited_file_with_a_fresh_checksum_is_refused(case, runs, tmp_path):  # noqa: F811
    name, edit, match = EDITS[case]
    path = runs[name].save(tmp_path / case)
    meta, raw = _raw(path)
    edit(meta, raw)
    _write(path, meta, raw, rehash=True)
    refused(path, match)


def test_a_table_of_another_precision_is_refused_when_saved(runs, tmp_path):  # noqa: F811
    s = runs["joint"]
    half = dataclasses.replace(s, model=dataclasses.replace(s.model, table=s.model.table.astype(np.float32)))
    with pytest.raises(ValueError, match="the model's table is an array of float32, not float64: it cannot be "
                                         "saved exactly"):
        half.save(tmp_path / "half")
    assert not (tmp_path / "half.npz").exists()
