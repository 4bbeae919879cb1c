"""pyproject.toml's lower bounds and constraints/oldest.txt (the pins the oldest-versions run installs) must not
drift apart: every dependency with a lower bound is pinned there at exactly that version, and nothing else is."""

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent


def _lower_bounds():
    """{name: Version} from every `>=` in [project] dependencies and optional-dependencies (self-references
    such as mmopt[test] and the dev tool ruff skipped); a package named twice must have one lower bound."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    reqs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        reqs += extra
    bounds: dict[str, Version] = {}
    for text in reqs:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        if name in {canonicalize_name(project["name"]), "ruff"}:
            continue
        lows = [Version(s.version) for s in req.specifier if s.operator == ">="]
        assert len(lows) == 1, f"{text!r}: declare exactly one lower bound (>=)"
        assert bounds.setdefault(name, lows[0]) == lows[0], f"{name}: two different lower bounds in pyproject.toml"
    return bounds


def _pins():
    pins: dict[str, Version] = {}
    for line in (ROOT / "constraints" / "oldest.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        req = Requirement(line)
        (spec,) = req.specifier
        assert spec.operator == "==", f"constraints/oldest.txt: {line!r} is not a == pin"
        name = canonicalize_name(req.name)
        assert name not in pins, f"constraints/oldest.txt pins {name} twice"
        pins[name] = Version(spec.version)
    return pins


def test_oldest_constraints_pin_exactly_the_lower_bounds():
    bounds, pins = _lower_bounds(), _pins()
    assert set(pins) == set(bounds), (
        f"only in pyproject.toml: {sorted(set(bounds) - set(pins))}; "
        f"only in constraints/oldest.txt: {sorted(set(pins) - set(bounds))}"
    )
    assert pins == bounds  # Version equality: 1.26 == 1.26.0


def test_every_range_has_an_upper_bound_above_its_lower_bound():
    """The ranges are [oldest passing, below the next untested release series); mosek alone is unbounded above
    (the suite has not run with a licensed MOSEK) and ruff is a tool, not a dependency of the code."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    reqs = list(project["dependencies"]) + [r for extra in project["optional-dependencies"].values() for r in extra]
    for text in reqs:
        req = Requirement(text)
        if canonicalize_name(req.name) in {"mmopt", "mosek", "ruff"}:
            continue
        (low,) = [Version(s.version) for s in req.specifier if s.operator == ">="]
        highs = [Version(s.version) for s in req.specifier if s.operator == "<"]
        assert len(highs) == 1 and highs[0] > low, f"{text!r}: needs one upper bound `<` above its lower bound"


def test_locked_versions_lie_in_the_declared_ranges():
    """constraints/locked.txt (the newest set the suite passed with) satisfies every range pyproject.toml declares
    for a package it pins: an upper bound is never below a version that was tested."""
    locked = {}
    for line in (ROOT / "constraints" / "locked.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            (spec,) = req.specifier
            locked[canonicalize_name(req.name)] = Version(spec.version)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    reqs = list(project["dependencies"]) + [r for extra in project["optional-dependencies"].values() for r in extra]
    checked = 0
    for text in reqs:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        if name in locked:
            assert req.specifier.contains(locked[name], prereleases=True), f"{name}=={locked[name]} not in {text!r}"
            checked += 1
    assert checked >= 7  # at least the direct dependencies of the library itself
