"""Census SF1 and HDMM benchmark workloads as implicit unions of products (HDMM's benchmarks).

Notation: see README. Cells in C order over the attributes listed. SF1 Persons: sex 2 · hispanic 2 ·
race 64 · relationship 17 · age 115 (N = 500,480); race value r is the bitmask of six race flags. Sources:
HDMM (McKenna, Miklau, Hay, Machanavajjhala, PVLDB 2018; journal version 2021), Census SF1 tables P1–PCT12.

Metadata for readable released answers (:mod:`mmopt.answers`), numbers unchanged: :func:`metadata` gives a
census workload's attribute names and each term's table, :func:`row_labels` the row descriptions of the
predicate blocks that are not plain cells or intervals (race1, race2, white, hisp, nothisp). Attribute
names are recorded only where the source gives them (SF1); adult and CPS attributes stay unnamed.
"""

from __future__ import annotations

import itertools
import weakref
from dataclasses import dataclass

import numpy as np

from mmopt._base import validation as v
from mmopt.dense._workload_core import Workload
from mmopt.structured import workloads as sw

SEX, HISPANIC, RACE, RELATIONSHIP, AGE, STATE = 2, 2, 64, 17, 115, 51
_AGE1_CUTS = (0, 5, 10, 15, 18, 20, 21, 22, 25, 30, 35, 40, 45, 50, 55, 60, 62, 65, 67, 70, 75, 80, 85, 115)
_ADULT = (75, 16, 5, 2, 20)
_CPS = (50, 100, 7, 4, 2)
_SF1_ATTRIBUTES = ("sex", "hispanic", "race", "age")


@dataclass(frozen=True)
class Metadata:
    """Names of a census workload's attributes (C order) and of each term (its SF1 table), for labels."""

    attributes: tuple[str, ...]
    terms: tuple[str, ...]


# Keyed by the objects themselves (weakly): a user's own workload named "race1" gets no census labels.
_METADATA: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_ROW_LABELS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def metadata(workload) -> Metadata | None:
    """The :class:`Metadata` of a workload built by :func:`sf1`, :func:`sf1_persons` or :func:`sf1_plus`
    (None for any other object).

    Examples
    --------
    >>> m = metadata(sf1())
    >>> m.attributes, m.terms[:3]
    (('sex', 'hispanic', 'race', 'age'), ('P1', 'P3', 'P3'))
    """
    try:
        return _METADATA.get(workload)
    except TypeError:  # not weakly referenceable: not a census workload
        return None


def row_labels(factor) -> tuple[str, ...] | None:
    """One description per row of a census predicate block (race1, race2, white, hisp, nothisp), else None.

    Race cell r is the bitmask of six race flags (flag 0, cell 1, is "white" in SF1's tables).

    Examples
    --------
    >>> row_labels(race1())[0], row_labels(race1())[6]
    ('race flag 0 alone (r=1)', 'two or more race flags, or none')
    """
    try:
        return _ROW_LABELS.get(factor)
    except TypeError:
        return None


def _labelled(w: Workload, labels) -> Workload:
    _ROW_LABELS[w] = tuple(labels)
    return w


def _intervals(n: int, cuts) -> np.ndarray:
    cells = np.arange(n)
    return np.array([(cells >= a) & (cells < b) for a, b in zip(cuts[:-1], cuts[1:], strict=True)], dtype=float)


def race1() -> Workload:
    """7 rows: "race i alone" (cell 2ⁱ) for i = 0…5, then every other cell (two or more races, and r = 0)."""
    W = np.zeros((7, RACE))
    alone = [1 << i for i in range(6)]
    W[np.arange(6), alone] = 1.0
    W[6] = 1.0
    W[6, alone] = 0.0
    labels = [f"race flag {i} alone (r={1 << i})" for i in range(6)] + ["two or more race flags, or none"]
    return _labelled(Workload.from_matrix(W, name="race1"), labels)


def race2() -> Workload:
    """70 rows: cells r = 1…63; "exactly k races" for k = 1…6; "two or more races"."""
    pop = np.array([bin(r).count("1") for r in range(RACE)])
    single = np.eye(RACE)[1:]
    exactly = np.array([pop == k for k in range(1, 7)], dtype=float)
    labels = [f"r={r}" for r in range(1, RACE)] + [f"exactly {k} race flag{'s' * (k > 1)}" for k in range(1, 7)]
    W = Workload.from_matrix(np.vstack([single, exactly, (pop >= 2)[None].astype(float)]), name="race2")
    return _labelled(W, labels + ["two or more race flags"])


def _cell(n: int, i: int, name: str, label: str) -> Workload:
    W = np.zeros((1, n))
    W[0, i] = 1.0
    return _labelled(Workload.from_matrix(W, name=name), [label])


def _sf1_blocks() -> dict[str, Workload]:
    ages = np.arange(AGE)
    return {
        "I2": sw.identity(2), "T2": sw.total(2), "IT2": sw.identity_total(2),
        "hisp": _cell(HISPANIC, 0, "hisp", "hispanic (0)"),
        "nothisp": _cell(HISPANIC, 1, "nothisp", "not hispanic (1)"),
        "T64": sw.total(RACE), "race1": race1(), "race2": race2(),
        "white": _cell(RACE, 1, "white", "white alone (r=1)"),
        "T17": sw.total(RELATIONSHIP), "T115": sw.total(AGE),
        "adult": Workload.from_matrix((ages >= 18)[None].astype(float), name="adult"),
        "age1": Workload.from_matrix(_intervals(AGE, _AGE1_CUTS), name="age1"),
        "age3": Workload.from_matrix(np.vstack([np.eye(AGE)[:100], _intervals(AGE, (100, 105, 110, 115))]),
                                     name="age3"),
    }


# (sex, hispanic, race, age) per term, by table, in the order of WORKLOADS_MULTIDIM.md §1; relationship is T.
_P1 = ("T2", "T2", "T64", "T115")
_TABLES = (
    [_P1],
    [("T2", "T2", "race1", "T115"), _P1],
    [("T2", "I2", "T64", "T115"), _P1],
    [("T2", "I2", "race1", "T115"), ("T2", "IT2", "T64", "T115")],
    [("T2", "T2", "race2", "T115"), _P1],
    [("T2", "I2", "T64", "T115"), ("T2", "nothisp", "race2", "T115"), _P1],
    [("T2", "T2", "race2", "adult"), ("T2", "T2", "T64", "adult")],
    [("T2", "I2", "T64", "adult"), ("T2", "nothisp", "race2", "adult"), ("T2", "T2", "T64", "adult")],
    [("I2", "T2", "T64", "age1"), ("IT2", "T2", "T64", "T115")],
    [("I2", "T2", "race1", "age1"), ("IT2", "T2", "race1", "T115"), ("I2", "hisp", "T64", "age1"),
     ("IT2", "hisp", "T64", "T115"), ("I2", "nothisp", "white", "age1"), ("IT2", "nothisp", "white", "T115")],
    [("I2", "T2", "T64", "age3"), ("IT2", "T2", "T64", "T115")],
    [("I2", "T2", "race1", "age3"), ("IT2", "T2", "race1", "T115"), ("I2", "hisp", "T64", "age3"),
     ("IT2", "hisp", "T64", "T115"), ("I2", "nothisp", "race1", "age3"), ("IT2", "nothisp", "race1", "T115")],
)


SF1_TABLES = ("P1", "P3", "P4", "P5", "P8", "P9", "P10", "P11", "P12", "P12A-I", "PCT12", "PCT12A-O")


def sf1_term_tables() -> tuple[str, ...]:
    """The SF1 table of each term of :func:`sf1` (and of sf1_persons, sf1_plus), in term order.

    Use it to group a per-term error breakdown by table (:func:`mmopt.structured.term_errors`).
    """
    return tuple(t for t, terms in zip(SF1_TABLES, _TABLES, strict=True) for _ in terms)


def _sf1_terms(relationship: bool, state: bool, weights, caller: str) -> tuple[sw.Product, ...]:
    b = _sf1_blocks()
    it_state = sw.identity_total(STATE)
    w = _table_weights(weights, caller)
    terms = []
    for table, (sex, hisp, race, age) in zip(sf1_term_tables(), itertools.chain.from_iterable(_TABLES),
                                             strict=True):
        fs = [b[sex], b[hisp], b[race]] + ([b["T17"]] if relationship else []) + [b[age]]
        terms.append(sw.Product(tuple(fs + ([it_state] if state else [])), w.get(table, 1.0)))
    return tuple(terms)


def _table_weights(weights, caller: str) -> dict[str, float]:
    """Validate {table: weight > 0}: the tutorial's "tuning workload error" (weight c multiplies every
    query of a table, so its share of the optimised error shrinks as c grows). Refusals name ``caller`` (sf1_persons
    and sf1_plus were named sf1; a helper's probe)."""
    if weights is None:
        return {}
    if not isinstance(weights, dict):
        raise TypeError(f"The 'weights' parameter of {caller} must be a dict {{table: weight}}. "
                        f"Got {type(weights).__name__}.")
    unknown = sorted(set(weights) - set(SF1_TABLES))
    if unknown:
        raise ValueError(f"The 'weights' parameter of {caller} names unknown tables {unknown}. Tables: "
                         f"{list(SF1_TABLES)}.")
    return {t: v.check_real(c, name="weights", caller=caller, low=0.0, low_open=True) for t, c in weights.items()}


def sf1_persons(weights: dict[str, float] | None = None) -> sw.ImplicitWorkload:
    """SF1 Persons (HDMM's SF1): 2·2·64·17·115 = 500,480 cells, 4,151 queries over 12 tables.

    ``weights`` ({table: c > 0}, tables in :data:`SF1_TABLES`) up-weights whole tables, e.g. PL94-like
    ones (the HDMM tutorial, "Tuning workload error"); the error an optimiser minimises is then
    Σ_tables c²·error(table).
    """
    return _described(sw.ImplicitWorkload(_sf1_terms(True, False, weights, "sf1_persons"), "sf1_persons"),
                      ("sex", "hispanic", "race", "relationship", "age"))


def sf1(weights: dict[str, float] | None = None) -> sw.ImplicitWorkload:
    """HDMM's "census": SF1 without relationship, 2·2·64·115 = 29,440 cells, 4,151 queries (``weights``:
    see :func:`sf1_persons`)."""
    return _described(sw.ImplicitWorkload(_sf1_terms(False, False, weights, "sf1"), "sf1"), _SF1_ATTRIBUTES)


def sf1_plus(weights: dict[str, float] | None = None) -> sw.ImplicitWorkload:
    """SF1+ (by state): every SF1 term times IT on 51 states; 1,501,440 cells, 215,852 queries (``weights``:
    see :func:`sf1_persons`)."""
    return _described(sw.ImplicitWorkload(_sf1_terms(False, True, weights, "sf1_plus"), "sf1_plus"),
                      (*_SF1_ATTRIBUTES, "state"))


def _described(W: sw.ImplicitWorkload, attributes: tuple[str, ...]) -> sw.ImplicitWorkload:
    _METADATA[W] = Metadata(attributes, sf1_term_tables())
    return W


def _all_it(shape, name: str) -> sw.ImplicitWorkload:
    return sw.kron(*[sw.identity_total(n) for n in shape], name=name)


def adult_w1() -> sw.ImplicitWorkload:
    """Adult W1: (IT,)*5 on 75·16·5·2·20, i.e. all 2⁵ marginals."""
    return _all_it(_ADULT, "adult_w1")


def adult_w2() -> sw.ImplicitWorkload:
    """Adult W2: all 2-way marginals on 75·16·5·2·20."""
    return sw.marginals(_ADULT, 2, name="adult_w2")


def cps_w1() -> sw.ImplicitWorkload:
    """CPS W1: (IT,)*5 on 50·100·7·4·2."""
    return _all_it(_CPS, "cps_w1")


def cps_w2() -> sw.ImplicitWorkload:
    """CPS W2: (P, P, IT, IT, IT) on 50·100·7·4·2: marginals with prefix ranges on the numeric attributes."""
    a, b, *rest = _CPS
    return sw.kron(sw.prefix(a), sw.prefix(b), *[sw.identity_total(n) for n in rest], name="cps_w2")


def ranges_2d(n: int) -> sw.ImplicitWorkload:
    """All 2-D range queries (R, R) on n × n cells: (n(n+1)/2)² queries."""
    n = v.check_int(n, name="n", caller="ranges_2d")
    R = sw.all_range(n)
    return sw.kron(R, R, name=f"ranges_2d({n})")


def prefix_3d(n: int) -> sw.ImplicitWorkload:
    """All 3-D prefix queries (P, P, P) on n³ cells."""
    n = v.check_int(n, name="n", caller="prefix_3d")
    P = sw.prefix(n)
    return sw.kron(P, P, P, name=f"prefix_3d({n})")
