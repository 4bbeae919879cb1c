"""Workload specs for the command line: a small grammar, a recursive-descent parser, and the builder.

A spec is a short string that names a workload of :mod:`mmopt.workload`, e.g. ``prefix:64``,
``kron(prefix:50,identity:100)`` or ``stack(2*prefix:8,all_range:8)``. The grammar (EBNF; spaces between
tokens are ignored)::

    spec  = part ;
    part  = [ number "*" ] item ;                 (* a weight, only on a part of stack(...) *)
    item  = call | leaf | file ;
    call  = ( "kron" | "stack" ) "(" part { "," part } ")" ;
    leaf  = name { ":" arg } ;                    (* e.g. prefix:64, random_range:64:100:7 *)
    arg   = word [ "=" word ] ;                   (* e.g. 4x4x4, k=2 *)
    file  = word ending in ".npy" | ".npz" ;      (* W as a matrix; or an .npz with W, or G and n_queries *)

A spec that is a whole file path (it may then contain any character) is read as a file. Nothing is
evaluated: the parser only builds a tree, and :func:`build_workload` calls the library's constructors, so
a bad spec is a ``ValueError`` naming the token, its position and the grammar.

Examples
--------
>>> build_workload("kron(prefix:4, identity:3)").n_queries
12
>>> build_workload("stack(2*prefix:8, all_range:8)").n_queries
44
>>> parse("prefx:8")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: unknown workload 'prefx' at position 0 in 'prefx:8'. Known: ...
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from mmopt import workload as wl
from mmopt.cli._grammar import Arg, Node, Parser, is_file, load_npy, load_npz, spec_error
from mmopt.cli._numbers import integer
from mmopt.error import NumericalError

__all__ = ["COMPOSITES", "EBNF", "FORMS", "GRAMMAR", "Form", "build_workload", "parse"]

EBNF = """\
spec  = part ;
part  = [ number "*" ] item ;                 (* a weight, only on a part of stack(...) *)
item  = call | leaf | file ;
call  = ( "kron" | "stack" ) "(" part { "," part } ")" ;
leaf  = name { ":" arg } ;                    (* e.g. prefix:64, random_range:64:100:7 *)
arg   = word [ "=" word ] ;                   (* e.g. 4x4x4, k=2 *)
file  = word ending in ".npy" | ".npz" ;      (* W as a matrix; or an .npz with W, or G and n_queries *)"""

GRAMMAR = ("Grammar: spec = item; item = name[:arg...] | kron(spec, ...) | stack([w*]spec, ...) | "
           "FILE.npy | FILE.npz. Run 'mmopt workloads' for every form with an example.")


@dataclass(frozen=True)
class Form:
    """One leaf the grammar knows: its argument pattern, what it builds, an example, and the builder."""

    pattern: str
    description: str
    example: str
    build: Callable


def _err(text: str, pos: int, what: str) -> ValueError:
    return spec_error(text, pos, what, grammar=GRAMMAR)


def parse(text: str) -> Node:
    """The tree of a workload spec (no workload is built). Raises ValueError with the grammar."""
    if not isinstance(text, str):
        raise TypeError(f"A workload spec must be a string. Got {type(text).__name__}.")
    stripped = text.strip()
    if not stripped:
        raise _err(text, 0, "empty workload spec")
    if is_file(stripped) and os.path.exists(stripped):  # a whole path may hold ':' or ','
        return Node("file", stripped, 0)
    known = f"{', '.join(FORMS)}, kron(...), stack(...), FILE.npy, FILE.npz"
    return Parser(text, is_known=FORMS.__contains__, calls=("kron", "stack"), noun="workload", known=known,
                  grammar=GRAMMAR).whole()


# -- argument helpers -------------------------------------------------------------------------------
def _count(node: Node, text: str, low: int, high: int, usage: str) -> None:
    k = len(node.args)
    if not low <= k <= high:
        want = f"{low}" if low == high else f"{low} to {high}"
        raise _err(text, node.pos, f"'{node.name}' takes {want} argument(s), got {k} ({usage})")


def _int(arg: Arg, text: str, what: str) -> int:
    if arg.key is not None:
        raise _err(text, arg.pos, f"'{arg.key}={arg.value}' is not expected here; {what} is a plain integer")
    try:
        return integer(arg.value)  # not int(): it read 1_6 as 16
    except argparse.ArgumentTypeError:
        raise _err(text, arg.pos, f"'{arg.value}' is not an integer ({what})") from None


def _sized(fn: Callable, usage: str) -> Callable:
    def build(node: Node, text: str):
        _count(node, text, 1, 1, usage)
        return fn(_int(node.args[0], text, "the domain size N"))
    return build


def _plain(fn: Callable) -> Callable:
    def build(node: Node, text: str):
        _count(node, text, 0, 0, f"just '{node.name}'")
        return fn()
    return build


def _random_range(node: Node, text: str):
    _count(node, text, 2, 3, "random_range:N:M[:SEED]")
    n, m = (_int(a, text, w) for a, w in zip(node.args, ("the domain size N", "the query count M"), strict=False))
    seed = _int(node.args[2], text, "the seed") if len(node.args) == 3 else 0  # a spec always means one workload
    return wl.random_range(n, m, seed=seed)


def _shape(arg: Arg, text: str) -> tuple[int, ...]:
    if arg.key is not None or not re.fullmatch(r"\d+(x\d+)*", arg.value):
        raise _err(text, arg.pos, f"'{arg.value}' is not a shape like 4x4x4 (sizes joined by 'x')")
    return tuple(integer(s) for s in arg.value.split("x"))


def _marginals(node: Node, text: str):
    _count(node, text, 2, 2, "marginals:SHAPE:k=K")
    shape, karg = _shape(node.args[0], text), node.args[1]
    if karg.key not in (None, "k", "k<"):
        raise _err(text, karg.pos, f"unknown key '{karg.key}=' for marginals (use k=K, or k<=K for every marginal "
                                   "on 1 to K attributes)")
    k = _int(Arg(None, karg.value, karg.pos), text, "the marginal order k")
    if karg.key != "k<":
        return wl.marginals(shape, k)
    # k<=K as --workload reads it on records (mmopt.cli.release_records): every marginal on 1 to K attributes, no
    # grand total (mmopt.workload.lower_marginals has it); 'marginals:2x2x2:k<=2' was refused as an unknown key
    if not 1 <= k <= len(shape):
        raise _err(text, karg.pos, f"k<={k} for marginals on {len(shape)} attributes: K must be 1 … {len(shape)}")
    sets = [S for j in range(1, k + 1) for S in itertools.combinations(range(len(shape)), j)]
    return wl.marginals(shape, attributes=sets, name=f"marginals({'x'.join(map(str, shape))},k=1..{k})")


def _forms() -> dict[str, Form]:
    S = _sized
    rows = [
        ("identity", "N", "every cell count (W = I)", "identity:16", S(wl.identity, "identity:N")),
        ("total", "N", "the sum of all N cells", "total:16", S(wl.total, "total:N")),
        ("prefix", "N", "the N prefix sums x1+...+xk", "prefix:64", S(wl.prefix, "prefix:N")),
        ("all_range", "N", "all N(N+1)/2 interval queries", "all_range:64", S(wl.all_range, "all_range:N")),
        ("all_predicate", "N", "all 2^N-1 0/1 predicate queries", "all_predicate:8",
         S(wl.all_predicate, "all_predicate:N")),
        ("identity_total", "N", "every cell and the total, [I; 1ᵀ] (a factor for kron)", "identity_total:5",
         S(wl.identity_total, "identity_total:N")),
        ("random_range", "N:M[:SEED]", "M random intervals, reproducible from SEED (default 0)",
         "random_range:64:100:7", _random_range),
        ("marginals", "SHAPE:k=K", "all K-way marginals (k<=K: 1- to K-way) of SHAPE",
         "marginals:4x4x4x4:k=2", _marginals),
        ("ranges_2d", "N", "all 2-D ranges on N×N cells (implicit)", "ranges_2d:64", S(wl.ranges_2d, "ranges_2d:N")),
        ("prefix_3d", "N", "all 3-D prefix queries on N³ cells (implicit)", "prefix_3d:16",
         S(wl.prefix_3d, "prefix_3d:N")),
        ("sf1", "", "Census SF1: 29,440 cells, 4,151 queries (implicit)", "sf1", _plain(wl.sf1)),
        ("sf1_persons", "", "SF1 with the relationship attribute, 500,480 cells", "sf1_persons",
         _plain(wl.sf1_persons)),
        ("sf1_plus", "", "SF1 by state, 1,501,440 cells", "sf1_plus", _plain(wl.sf1_plus)),
        ("adult_w1", "", "adult: all 2^5 marginals on 75·16·5·2·20", "adult_w1", _plain(wl.adult_w1)),
        ("adult_w2", "", "adult: all 2-way marginals", "adult_w2", _plain(wl.adult_w2)),
        ("cps_w1", "", "CPS: all 2^5 marginals on 50·100·7·4·2", "cps_w1", _plain(wl.cps_w1)),
        ("cps_w2", "", "CPS: prefixes on 2 attributes × all 2^3 marginals", "cps_w2",
         _plain(wl.cps_w2)),
    ]
    return {name: Form(f"{name}:{pat}" if pat else name, desc, ex, fn) for name, pat, desc, ex, fn in rows}


FORMS: dict[str, Form] = _forms()
COMPOSITES = (
    ("kron(SPEC, SPEC, ...)", "the product W1 ⊗ W2 ⊗ ..., one factor per attribute",
     "kron(prefix:50,identity:100)"),
    ("stack([W*]SPEC, ...)", "the union [w1·W1; w2·W2; ...] on one domain",
     "stack(2*prefix:8,all_range:8)"),
    ("FILE.npy", "a query matrix W (m×n) saved with numpy.save", "queries.npy"),
    ("FILE.npz", "an .npz with W, or with G (= WᵀW) and n_queries", "gram.npz"),
)


# -- builder --------------------------------------------------------------------------------------------
def _load_file(path: str, text: str, pos: int):
    name = os.path.basename(path)
    if not os.path.isfile(path):  # a folder said "[Errno 21] Is a directory"
        raise _err(text, pos, f"workload file '{path}' " + ("is a folder" if os.path.isdir(path) else "does not exist"))
    if path.lower().endswith(".npy"):
        return wl.Workload.from_matrix(load_npy(path, "workload file"), name=name)
    z = load_npz(path, "workload file")  # every member read: a damaged one is refused there
    keys = sorted(z)
    if keys == ["W"]:
        return wl.Workload.from_matrix(z["W"], name=name)
    if keys == ["G", "n_queries"]:
        m = z["n_queries"]
        if m.shape != () or m.dtype.kind not in "iu":  # int() truncated 2.5 to 2 (per-query figures wrong)
            raise _err(text, pos, f"workload file '{path}': 'n_queries' must be one integer (the number of "
                                  f"queries m). Got {m.dtype} array of shape {m.shape}: {m.tolist()!r}")
        return wl.Workload.from_gram(z["G"], n_queries=int(m), name=name)
    raise _err(text, pos, f"workload file '{path}' has keys {keys}; expected exactly 'W', or exactly 'G' and "
                          "'n_queries' (a file with both W and G would leave one unread)")


def _build(node: Node, text: str):
    try:
        if node.kind == "file":
            return _load_file(node.name, text, node.pos)
        if node.kind == "leaf":
            return FORMS[node.name].build(node, text)
        parts = [_build(c, text) for c in _flatten(node)]
        if node.name == "kron":
            return wl.kron(*parts)
        weights = None if all(c.weight is None for c in node.children) else \
            [1.0 if c.weight is None else c.weight for c in node.children]
        return wl.stack(parts, weights)
    except (ValueError, TypeError) as exc:
        where = f"at position {node.pos} in '{text}'"
        if isinstance(exc, NumericalError) or f" in '{text}'" in str(exc):  # a numerical failure, or placed already
            raise
        kind = TypeError if isinstance(exc, TypeError) else ValueError
        raise kind(f"{exc} (building '{_name(node)}' {where})") from None


def _flatten(node: Node) -> tuple[Node, ...]:
    """kron(kron(a, b), c) is kron(a, b, c): keep one factor per attribute."""
    if node.name != "kron":
        return node.children
    out: list[Node] = []
    for c in node.children:
        out.extend(_flatten(c) if c.kind == "call" and c.name == "kron" else (c,))
    return tuple(out)


def _name(node: Node) -> str:
    return f"{node.name}(...)" if node.kind == "call" else node.name


def build_workload(text: str):
    """The workload a spec names: a dense :class:`~mmopt.workload.Workload` or an implicit one."""
    return _build(parse(text), text)
