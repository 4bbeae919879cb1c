"""mmopt.records.domain: attributes, the value → cell rule, JSON round trips and refusals."""

import json
import math

import pandas as pd
import pytest

from mmopt.records import Attribute, Domain
from mmopt.records.domain import check_domain


def test_attribute_kinds_sizes_and_labels():
    a = Attribute("region", categories=("N", "S", "W"))
    b = Attribute("kids", categories=[0, 1, 2, 3])
    c = Attribute("age", edges=[0, 18, 65, "inf"])
    assert (a.kind, a.size) == ("text", 3)
    assert (b.kind, b.size, b.categories) == ("number", 4, (0, 1, 2, 3))
    assert (c.kind, c.size, c.edges) == ("bins", 3, (0.0, 18.0, 65.0, math.inf))
    assert c.labels == ("[0, 18)", "[18, 65)", "[65, inf]")
    assert Attribute("x", edges=(0.5, 1.25)).labels == ("[0.5, 1.25]",)


def test_domain_shape_names_index():
    D = Domain((Attribute("a", categories=("x",)), Attribute("b", edges=(0, 1, 2))))
    assert D.shape == (1, 2) and D.names == ("a", "b") and D.index("b") == 1
    with pytest.raises(ValueError, match=r"no attribute named 'c'.*\['a', 'b'\]"):
        D.index("c")
    assert D["b"] is D.attributes[1]  # by name, to build another domain from its attributes
    with pytest.raises(ValueError, match=r"no attribute named 'c'"):
        D["c"]
    with pytest.raises(TypeError, match=r"Domain\[\.\.\.\] takes an attribute's name.*Got int.*attributes\[i\]"):
        D[0]


@pytest.mark.parametrize("kwargs, err, match", [
    ({}, ValueError, "exactly one of 'categories'.*Got neither"),
    ({"categories": ("a",), "edges": (0, 1)}, ValueError, "exactly one.*Got both"),
    ({"categories": ()}, ValueError, "at least one value"),
    ({"categories": ("a", 1)}, TypeError, "all strings or all numbers"),
    ({"categories": (True, False)}, TypeError, "all strings or all numbers"),
    ({"categories": ("a", "b", "a")}, ValueError, "each value once. Got 'a' twice"),
    ({"categories": (1.0, float("nan"))}, ValueError, "finite numbers"),
    ({"categories": "abc"}, TypeError, "list of values"),
    ({"edges": (0,)}, ValueError, "at least two edges"),
    ({"edges": (0, 2, 1)}, ValueError, "strictly increasing"),
    ({"edges": (0, 1, 1)}, ValueError, "strictly increasing"),
    ({"edges": (0, "ten")}, TypeError, "must hold numbers"),
    # past float64: a plain OverflowError before
    ({"edges": (0, 2**1100)}, ValueError, "'edges' .* within float64's range .*1,101 bits"),
    ({"categories": (0, 2**1100)}, ValueError, "'categories' .* within float64's range .*1,101 bits"),
])
def test_attribute_refusals(kwargs, err, match):
    with pytest.raises(err, match=match):
        Attribute("v", **kwargs)


def test_attribute_name_and_domain_refusals():
    with pytest.raises(TypeError, match="'name' parameter of Attribute must be a non-empty str"):
        Attribute("", categories=("a",))
    with pytest.raises(ValueError, match=r"distinct names. Got \['a'\] twice"):
        Domain((Attribute("a", categories=("x",)), Attribute("a", edges=(0, 1))))
    with pytest.raises(TypeError, match="non-empty tuple of Attribute"):
        Domain(())
    with pytest.raises(TypeError, match="non-empty tuple of Attribute"):
        Domain(("a",))


def test_json_round_trip_dict_text_and_file(tmp_path):
    spec = {"attributes": [{"name": "sex", "categories": ["F", "M"]},
                           {"name": "age", "edges": ["-inf", 18, 65, "inf"]},
                           {"name": "kids", "categories": [0, 1, 2]}]}
    D = Domain.from_json(spec)
    assert D.shape == (2, 3, 3) and D.attributes[1].edges[0] == -math.inf
    assert Domain.from_json(json.dumps(spec)) == D
    path = tmp_path / "domain.json"
    text = D.to_json(path)
    assert json.loads(path.read_text()) == json.loads(text)
    assert Domain.from_json(path) == D and Domain.from_json(str(path)) == D
    assert json.loads(text)["attributes"][1]["edges"] == ["-inf", 18.0, 65.0, "inf"]


def test_json_refusals(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        Domain.from_json(bad)
    with pytest.raises(ValueError, match="cannot read the domain file"):
        Domain.from_json(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="with a list 'attributes'"):
        Domain.from_json({"attrs": []})
    with pytest.raises(ValueError, match="attribute #0 must be an object with 'name'"):
        Domain.from_json({"attributes": [{"name": "a", "categories": ["x"], "size": 3}]})
    with pytest.raises(ValueError, match="attribute #1 must be an object"):
        Domain.from_json({"attributes": [{"name": "a", "categories": ["x"]}, ["b"]]})
    with pytest.raises(ValueError, match="strictly increasing"):
        Domain.from_json({"attributes": [{"name": "a", "edges": [3, 1]}]})


@pytest.mark.parametrize("given, remedy", [
    ({"age": 3}, 'Domain.from_json({"attributes": [{"name": "age", "categories": [0, 1, 2]}, ...]})'),
    ({"age": 12}, 'Domain.from_json({"attributes": [{"name": "age", "categories": [...]}, ...]})'),
    ({"attributes": []}, "Build it with Domain.from_json(...), which reads that form"),
    ("domain.json", "Build it with Domain.from_json(...), which reads that form"),
    ([3, 2], "Domain.from_json(path_to_json)"),
    (None, "Domain.from_json(path_to_json)"),
])
def test_check_domain_names_the_caller_and_the_remedy(given, remedy):
    with pytest.raises(TypeError, match="The 'domain' parameter of f must be a Domain") as info:
        check_domain(given, caller="f")
    assert remedy in str(info.value) and f"Got {type(given).__name__} instead." in str(info.value)
    check_domain(Domain.from_json({"attributes": [{"name": "age", "categories": [0, 1, 2]}]}), caller="f")


def test_every_public_entry_point_refuses_a_dict_of_sizes_with_the_remedy():
    import mmopt
    from mmopt import synth
    from mmopt.records import release_marginals

    df = pd.DataFrame({"a": [0, 1, 2], "b": [0, 1, 0]})
    sizes = {"a": 3, "b": 2}
    privacy = mmopt.Privacy(1.0, delta=1e-6)
    calls = {"mst": lambda: synth.mst(df, sizes, privacy, seed=0),
             "aim": lambda: synth.aim(df, sizes, [("a", "b")], privacy, seed=0),
             "release_marginals": lambda: release_marginals(df, sizes, [("a", "b")], privacy)}
    for caller, call in calls.items():
        with pytest.raises(TypeError, match=f"'domain' parameter of {caller} must be a Domain.*Domain.from_json"):
            call()


def test_a_set_of_categories_edges_or_attributes_is_refused_as_unordered():
    # a set's iteration order depends on PYTHONHASHSEED: the cells (or axes) would change from process to process
    import pytest as _pytest

    from mmopt.records import Attribute, Domain
    with _pytest.raises(TypeError, match="'categories' parameter of Attribute 'region' must be ordered"):
        Attribute("region", categories={"north", "south"})
    with _pytest.raises(TypeError, match="'edges' parameter of Attribute 'age' must be ordered"):
        Attribute("age", edges=frozenset({0, 18, 65}))
    with _pytest.raises(TypeError, match="Got a dict instead"):  # its keys would be taken silently
        Attribute("region", categories={"north": 1, "south": 2})
    sex = Attribute("sex", categories=("F", "M"))
    with _pytest.raises(TypeError, match="'attributes' parameter of Domain must be ordered"):
        Domain({sex, Attribute("age", categories=(0, 1))})
    assert Domain([sex]).names == ("sex",)  # a list is ordered
