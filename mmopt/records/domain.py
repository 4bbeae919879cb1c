"""The public domain of a table of records: attribute names, sizes, and how raw values map to cells.

Notation: see README. Attribute i has nᵢ cells; the domain is the product of d attributes with
N = ∏ nᵢ cells, and a record is the cell (x₁, …, x_d) of its values. The data vector x counts records per
cell; nothing here ever forms it (N is 10¹⁵ for 15 attributes of size 10).

**The value → cell rule, fixed before the data are seen.** An attribute is either

* categorical: ``categories`` lists the values (all strings, or all numbers); cell j is the value
  ``categories[j]``, matched by equality (the number 3 matches 3.0; a fraction stored in float32 or float16
  matches the category it rounds from, 0.1 as float32 the category 0.1; in a numeric attribute text is read as a CSV
  cell is, on every engine, so the string "3" matches 3 too and "x" is dropped; under string categories a
  non-string value is matched by its text, with a warning — 1 as "1", 1.0 as "1.0" — as Dask and DuckDB read it); or
* binned: ``edges`` e₀ < e₁ < … < e_k (±inf allowed) give k cells, cell j = [e_j, e_{j+1}) closed on the left
  and open on the right, except the last, [e_{k−1}, e_k], closed on both sides (numpy.histogram's rule). The
  value compared is float64(x), on every engine: an integer past 2⁵³ is first rounded to the nearest float64,
  so 2⁶⁰ + 1 falls in a bin ending at 2⁶⁰. Categories compare integers exactly, at any size.

**Out-of-domain rule: drop.** A record whose value of *any* domain attribute is missing (None, NaN, null)
or outside the declared categories or edges is dropped from every count. The rule is part of the public
domain, so it is the same for every data set: the kept records form a data set whose histogram is x, and
adding or removing one record changes x by at most one cell (by none when the record is dropped), so the
add/remove-one-record sensitivity is unchanged. The number of dropped records is a function of the data:
it is never reported, except through a noisy total. To count missing values, fill them with a declared
category before the release (``df.fillna({"sex": "missing"})``, SQL's ``COALESCE(sex, 'missing')``).

Examples
--------
>>> D = Domain.from_json({"attributes": [{"name": "sex", "categories": ["F", "M"]},
...                                      {"name": "age", "edges": [0, 18, 65, "inf"]}]})
>>> D.shape, D.names, D.index("age")
((2, 3), ('sex', 'age'), 1)
>>> D.attributes[1].labels
('[0, 18)', '[18, 65)', '[65, inf]')
>>> Domain.from_json(D.to_json()) == D
True
"""

from __future__ import annotations

import json
import math
import numbers
import os
from dataclasses import dataclass

import numpy as np

_INF_WORDS = {"inf": math.inf, "+inf": math.inf, "infinity": math.inf, "-inf": -math.inf, "-infinity": -math.inf}


def _number(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool | np.bool_)


def _fmt(x: float) -> str:
    return repr(int(x)) if math.isfinite(x) and x == int(x) and abs(x) < 2**53 else repr(float(x))


@dataclass(frozen=True)
class Attribute:
    """One attribute of the domain: its name and the map from raw values to its cells (module docstring).

    Parameters
    ----------
    name : str
        The column of the records holding this attribute.
    categories : tuple or None
        The values of the cells, all strings or all numbers, distinct (cell j is ``categories[j]``).
    edges : tuple of float or None
        Strictly increasing bin edges (at least two; ±inf allowed): k = len(edges) − 1 cells.

    Exactly one of ``categories`` and ``edges`` is given.

    Examples
    --------
    >>> Attribute("income", edges=(0, 1e4, 5e4)).size, Attribute("region", categories=("N", "S", "W")).size
    (2, 3)
    """

    name: str
    categories: tuple | None = None
    edges: tuple | None = None

    def __post_init__(self) -> None:
        caller = "Attribute"
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"The 'name' parameter of {caller} must be a non-empty str. Got {self.name!r:.60} instead.")
        if (self.categories is None) == (self.edges is None):
            raise ValueError(f"{caller} '{self.name}' must have exactly one of 'categories' (a list of values) and "
                             f"'edges' (numeric bin edges). Got {'both' if self.edges is not None else 'neither'}.")
        for key in ("categories", "edges"):
            if reason := _unordered(getattr(self, key)):
                raise TypeError(f"The '{key}' parameter of {caller} '{self.name}' must be ordered (a tuple or list): "
                                f"its order is the cells' order, and {reason}. Got a "
                                f"{type(getattr(self, key)).__name__} instead; pass sorted(...) or a tuple.")
        if self.categories is not None:
            object.__setattr__(self, "categories", _check_categories(self.categories, self.name))
        else:
            object.__setattr__(self, "edges", _check_edges(self.edges, self.name))

    @property
    def kind(self) -> str:
        """"text" (string categories), "number" (numeric categories) or "bins" (edges)."""
        if self.edges is not None:
            return "bins"
        return "text" if isinstance(self.categories[0], str) else "number"

    @property
    def size(self) -> int:
        """nᵢ: the number of categories, or of bins."""
        return len(self.categories) if self.categories is not None else len(self.edges) - 1

    @property
    def labels(self) -> tuple:
        """One label per cell: the category itself, or the bin as "[a, b)" ("[a, b]" for the last)."""
        if self.categories is not None:
            return self.categories
        e = self.edges
        return tuple(f"[{_fmt(e[j])}, {_fmt(e[j + 1])}{']' if j == len(e) - 2 else ')'}" for j in range(len(e) - 1))

    def to_dict(self) -> dict:
        if self.categories is not None:
            return {"name": self.name, "categories": list(self.categories)}
        return {"name": self.name, "edges": [x if math.isfinite(x) else ("inf" if x > 0 else "-inf")
                                             for x in self.edges]}


def _unordered(value) -> str | None:
    """Why ``value`` cannot give an order of cells or axes (a set's iteration order follows PYTHONHASHSEED and
    addresses; a dict would give its keys alone), or None."""
    if isinstance(value, set | frozenset):
        return "a set's order changes from one Python process to the next"
    if isinstance(value, dict):
        return "a dict would give its keys alone, silently"
    return None


def _check_categories(cats, name: str) -> tuple:
    where = f"The 'categories' parameter of Attribute '{name}'"
    if isinstance(cats, str | bytes) or not hasattr(cats, "__iter__"):
        raise TypeError(f"{where} must be a list of values. Got {type(cats).__name__} instead.")
    out = tuple(c.item() if isinstance(c, np.generic) else c for c in cats)
    if not out:
        raise ValueError(f"{where} must list at least one value. Got none.")
    if all(isinstance(c, str) for c in out):
        pass
    elif all(_number(c) for c in out):
        _check_float_range(out, where)
        bad = [c for c in out if not math.isfinite(c)]
        if bad:
            raise ValueError(f"{where} must hold finite numbers (NaN is 'missing', always dropped). Got {bad[0]!r}.")
    else:
        kinds = sorted({type(c).__name__ for c in out})
        raise TypeError(f"{where} must be all strings or all numbers (not booleans). Got a mix of {kinds} instead.")
    if len(set(out)) != len(out):
        seen, dup = set(), None
        for c in out:
            if c in seen:
                dup = c
                break
            seen.add(c)
        raise ValueError(f"{where} must list each value once. Got {dup!r} twice.")
    return out


def _check_float_range(values, where: str) -> None:
    """Numbers past float64 (an int of 1,100 bits) raised OverflowError in the checks and the coding."""
    for c in values:
        try:
            float(c)
        except OverflowError:
            raise ValueError(f"{where} must hold numbers within float64's range (|x| < 1.8e308). Got an integer of "
                             f"{abs(int(c)).bit_length():,} bits.") from None


def _check_edges(edges, name: str) -> tuple:
    where = f"The 'edges' parameter of Attribute '{name}'"
    if isinstance(edges, str | bytes) or not hasattr(edges, "__iter__"):
        raise TypeError(f"{where} must be a list of numbers. Got {type(edges).__name__} instead.")
    out = []
    for e in edges:
        if isinstance(e, str) and e.strip().lower() in _INF_WORDS:
            e = _INF_WORDS[e.strip().lower()]
        if not _number(e):
            raise TypeError(f"{where} must hold numbers (or 'inf', '-inf'). Got {e!r:.40} ({type(e).__name__}).")
        _check_float_range((e,), where)
        out.append(float(e))
    if len(out) < 2:
        raise ValueError(f"{where} must hold at least two edges (one bin). Got {len(out)}.")
    if any(math.isnan(e) for e in out) or any(b <= a for a, b in zip(out, out[1:], strict=False)):
        raise ValueError(f"{where} must be strictly increasing and not NaN. Got {out!r:.80} instead.")
    return tuple(out)


@dataclass(frozen=True)
class Domain:
    """The public schema: one :class:`Attribute` per column, in the order of the domain's axes.

    Attributes
    ----------
    attributes : tuple of Attribute
    shape : tuple of int
        (n₁, …, n_d).
    names : tuple of str
    """

    attributes: tuple

    def __post_init__(self) -> None:
        caller = "Domain"
        if reason := _unordered(self.attributes):
            raise TypeError(f"The 'attributes' parameter of {caller} must be ordered (a tuple or list of Attribute): "
                            f"its order is the axes' order, and {reason}. Got a {type(self.attributes).__name__} "
                            "instead.")
        attrs = tuple(self.attributes) if hasattr(self.attributes, "__iter__") else None
        if not attrs or not all(isinstance(a, Attribute) for a in attrs):
            raise TypeError(f"The 'attributes' parameter of {caller} must be a non-empty tuple of Attribute. "
                            f"Got {self.attributes!r:.80} instead.")
        names = [a.name for a in attrs]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"The 'attributes' parameter of {caller} must have distinct names. Got {dup} twice.")
        object.__setattr__(self, "attributes", attrs)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.size for a in self.attributes)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    def __getitem__(self, name: str) -> Attribute:
        """The attribute named ``name`` (``domain["sex"]``), to build a domain from another's attributes."""
        if not isinstance(name, str):
            raise TypeError(f"Domain[...] takes an attribute's name, one of {list(self.names)}. Got "
                            f"{type(name).__name__} instead; use domain.attributes[i] for the i-th.")
        return self.attributes[self.index(name)]

    def index(self, name: str) -> int:
        """The axis of attribute ``name``; ValueError listing the names when it is not in the domain."""
        try:
            return self.names.index(name)
        except ValueError:
            raise ValueError(f"Domain.index: no attribute named {name!r}. The domain has {list(self.names)}."
                             ) from None

    @classmethod
    def from_json(cls, source) -> Domain:
        """A domain from a dict ``{"attributes": [{"name": …, "categories": […]} or {"name": …, "edges": […]}]}``,
        its JSON text, or the path of a JSON file holding one (edges may use the strings "inf" and "-inf")."""
        caller = "Domain.from_json"
        if isinstance(source, str) and source.lstrip().startswith("{"):
            try:
                source = json.loads(source)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{caller}: the domain text is not valid JSON: {exc}") from None
        elif isinstance(source, str | os.PathLike):
            try:
                with open(source, encoding="utf-8") as fh:
                    source = json.load(fh)
            except OSError as exc:
                raise ValueError(f"{caller}: cannot read the domain file {os.fspath(source)!r}: {exc}") from None
            except UnicodeDecodeError:  # a .npy passed as --domain said only "'utf-8' codec can't decode byte 0x93"
                raise ValueError(f"{caller}: the domain file {os.fspath(source)!r} is not UTF-8 text: a domain is a "
                                 "JSON file (see mmopt.records.Domain.to_json).") from None
            except json.JSONDecodeError as exc:
                raise ValueError(f"{caller}: the domain file is not valid JSON: {exc}") from None
        if not isinstance(source, dict) or not isinstance(source.get("attributes"), list):
            raise ValueError(f"The 'source' parameter of {caller} must be a dict (or JSON file) with a list "
                             f"'attributes'. Got {source!r:.80} instead.")
        attrs = []
        for k, entry in enumerate(source["attributes"]):
            if not isinstance(entry, dict) or set(entry) - {"name", "categories", "edges"} or "name" not in entry:
                raise ValueError(f"{caller}: attribute #{k} must be an object with 'name' and one of 'categories' or "
                                 f"'edges' (and no other keys). Got {entry!r:.80} instead.")
            cats, edges = entry.get("categories"), entry.get("edges")
            attrs.append(Attribute(entry["name"], None if cats is None else tuple(cats),
                                   None if edges is None else tuple(edges)))
        return cls(tuple(attrs))

    def to_json(self, path=None) -> str:
        """The domain as JSON text (the format :meth:`from_json` reads); also written to ``path`` if given."""
        text = json.dumps({"attributes": [a.to_dict() for a in self.attributes]}, indent=2)
        if path is not None:
            from mmopt._base.atomic import atomic_target
            with atomic_target(os.fspath(path), ".json") as tmp, open(tmp, "w", encoding="utf-8") as fh:
                fh.write(text + "\n")
        return text


def check_domain(domain, *, caller: str) -> None:
    """TypeError unless ``domain`` is a :class:`Domain`, with the remedy for what was given instead.

    Examples
    --------
    >>> try:
    ...     check_domain({"age": 3}, caller="release_marginals")
    ... except TypeError as exc:
    ...     for sentence in str(exc).split(". ")[1:]:
    ...         print(sentence)
    Got dict instead
    Build it with Domain.from_json({"attributes": [{"name": "age", "categories": [0, 1, 2]}, ...]}) (edges for binned \
columns); a Domain fixes how each value maps to a cell, which a size alone does not.
    """
    if isinstance(domain, Domain):
        return
    got = type(domain).__name__
    if (isinstance(domain, dict) and "attributes" in domain) or isinstance(domain, str | os.PathLike):
        remedy = "Build it with Domain.from_json(...), which reads that form (a dict, JSON text or a file)."
    elif isinstance(domain, dict) and domain and all(isinstance(k, str) for k in domain):
        name = next(iter(domain))
        size = domain[name]
        cats = list(range(size)) if isinstance(size, int) and 0 < size <= 3 else "[...]"
        example = f'{{"name": {json.dumps(name)}, "categories": {cats}}}'
        remedy = (f'Build it with Domain.from_json({{"attributes": [{example}, ...]}}) (edges for binned columns); '
                  "a Domain fixes how each value maps to a cell, which a size alone does not.")
    else:
        remedy = ('Build it with Domain.from_json({"attributes": [{"name": ..., "categories": [...]}, ...]}) or '
                  "Domain.from_json(path_to_json).")
    raise TypeError(f"The 'domain' parameter of {caller} must be a Domain (mmopt.records.Domain). Got {got} instead. "
                    + remedy)
