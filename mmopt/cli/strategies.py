"""Strategy specs for the command line (``--strategy``), and the lazy link to saved strategies.

The grammar (EBNF, tokens as in :mod:`mmopt.cli.spec`)::

    strategy = leaf | "kron" "(" leaf { "," leaf } ")" | file ;
    leaf     = "identity" | "hierarchical" [ ":" B ] | "H" B | "wavelet"    (* B: the branching, default 2 *)
             | "tree" [ ":" B ] ;                                          (* default 8 *)
    file     = word ending in ".npz" (saved with mmopt.save / --save) | ".npy" (a strategy matrix A) ;

A leaf is sized from the workload: over its n cells for a 1-D workload, and as the product of one
per-attribute strategy for any workload on a product domain, small (dense) or large (implicit) alike: ``H2``
on ``kron(prefix:8,prefix:8)`` is H₂ ⊗ H₂, as it is on ``ranges_2d:128``, and ``identity`` on ``sf1`` is
I ⊗ … ⊗ I. ``tree[:B]`` is H_B with each node measured once (:mod:`mmopt.toeplitz.trees`), held by
(n, B) on a 1-D workload, so prefix sums and ranges take it at any n (``hierarchical`` is built as a matrix).
``kron(S1, ..., Sd)`` chooses each attribute's strategy; it needs a workload built on a product
domain (``kron``, ``marginals``, a census workload).

Examples
--------
>>> from mmopt.cli.spec import build_workload
>>> build_strategy("H2", build_workload("prefix:8")).matrix.shape
(15, 8)
>>> build_strategy("kron(hierarchical:2, identity)", build_workload("ranges_2d:4")).shape
(4, 4)
"""

from __future__ import annotations

import argparse
import importlib
import os
import re

from mmopt import strategy as st
from mmopt import workload as wl
from mmopt.cli._grammar import Node, Parser, is_file, load_npy, spec_error
from mmopt.cli._numbers import integer

__all__ = ["STRATEGY_FORMS", "STRATEGY_GRAMMAR", "build_strategy", "persistence"]

STRATEGY_GRAMMAR = ("Strategies: identity | hierarchical[:B] (H2 = hierarchical:2) | tree[:B] | wavelet | kron(S, "
                    "...) (one per attribute) | FILE.npz (saved with 'mmopt optimize --save') | FILE.npy (a matrix A).")
STRATEGY_FORMS = (
    ("identity", "measure every cell once (I)", "identity"),
    ("hierarchical[:B]", "the B-ary tree of ranges H_B (H2 = hierarchical:2)", "hierarchical:4"),
    ("tree[:B]", "H_B held by (n, B), B = 8 by default: ranges at any n", "tree:16"),
    ("wavelet", "the Haar wavelet Y (n a power of two)", "wavelet"),
    ("kron(S, ...)", "one strategy per attribute of a product-domain workload", "kron(H2,identity)"),
    ("FILE.npz", "a strategy saved by 'mmopt optimize --save' (mmopt.save)", "best.npz"),
    ("FILE.npy", "a strategy matrix A (p×n) saved with numpy.save", "A.npy"),
)
_LEAVES = ("identity", "hierarchical", "tree", "wavelet")


def _err(text: str, pos: int, what: str) -> ValueError:
    return spec_error(text, pos, what, grammar=STRATEGY_GRAMMAR)


def _known(word: str) -> bool:
    return word in _LEAVES or re.fullmatch(r"H\d+", word) is not None


def _one(node: Node, n: int, text: str) -> st.Strategy:
    """One leaf over n cells."""
    if node.kind != "leaf":
        raise _err(text, node.pos, f"'{node.name}' cannot be a factor of kron(...); use identity, hierarchical[:B], "
                                   "H2 or wavelet")
    name, args = node.name, node.args
    if len(args) > (1 if name in ("hierarchical", "tree") else 0):
        raise _err(text, args[-1].pos, f"too many arguments for strategy '{name}'")
    if name == "tree":
        return _tree(node, n, text).to_strategy()
    if name == "identity":
        return st.identity(n)
    if name == "wavelet":
        return st.wavelet(n)
    if name == "hierarchical" and not args:
        return st.hierarchical(n)
    raw, pos = (name[1:], node.pos) if name != "hierarchical" else (args[0].value, args[0].pos)
    try:
        b = integer(raw)  # not int(): it read 1_6 as 16
    except argparse.ArgumentTypeError:
        raise _err(text, pos, f"branching '{raw}' of '{name}' is not an integer") from None
    return st.hierarchical(n, b)


def _tree(node: Node, n: int, text: str):
    from mmopt.toeplitz.trees import TreeStrategy
    if len(node.args) > 1:
        raise _err(text, node.args[-1].pos, "too many arguments for strategy 'tree'")
    if not node.args:
        return TreeStrategy(n)
    raw = node.args[0].value
    if not raw.isdigit() or int(raw) < 2:
        raise _err(text, node.args[0].pos, f"branching '{raw}' of 'tree' is not an integer ≥ 2")
    return TreeStrategy(n, int(raw))


def _shape(workload, text: str, pos: int) -> tuple[int, ...]:
    implicit = wl.structure_of(workload)
    if implicit is None:
        raise _err(text, pos, f"kron(...) needs a workload on a product domain; '{workload.name}' has none (build "
                              "it with kron, marginals or a census name)")
    return implicit.shape


def persistence():
    """(save, load) from mmopt (``mmopt.save``/``mmopt.load``, or :mod:`mmopt.persist`/``mmopt.io``)."""
    import mmopt
    save, load = getattr(mmopt, "save", None), getattr(mmopt, "load", None)
    for module in ("mmopt.persist", "mmopt.io"):
        if save is not None and load is not None:
            break
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError:
            continue
        save, load = getattr(mod, "save", None), getattr(mod, "load", None)
    if save is None or load is None:
        raise ValueError("Saved strategies need mmopt.save and mmopt.load, which this installation of mmopt "
                         "lacks. Upgrade mmopt, or pass the strategy matrix as a .npy file.")
    return save, load


def saved_file(text: str, workload):
    """The saved strategy file ``text`` names, read once and checked against ``workload`` (its ``.strategy`` and the
    ``.privacy`` it was optimised for), when it is an existing FILE.npz; None otherwise (a spec to build)."""
    path = text.strip()
    if not path.lower().endswith(".npz") or not os.path.exists(path):
        return None
    return persistence()[1](path, workload=workload)  # a bad file or one for another domain is refused here


def _load(path: str, text: str, pos: int, workload):
    if not os.path.isfile(path):  # a folder said "[Errno 21] Is a directory"
        raise _err(text, pos, f"strategy file '{path}' " + ("is a folder" if os.path.isdir(path) else "does not exist"))
    if path.lower().endswith(".npy"):
        return st.Strategy(load_npy(path, "strategy file"), os.path.basename(path))
    _, load = persistence()
    return load(path, workload=workload).strategy  # load checks the file and that its domain fits the workload


def _is_stream(workload) -> bool:
    from mmopt.toeplitz.error import StreamWorkload
    return isinstance(workload, StreamWorkload)


def build_strategy(text: str, workload):
    """The strategy a spec names, sized for ``workload`` (dense or implicit). Raises ValueError."""
    if not isinstance(text, str) or not text.strip():
        raise _err(str(text), 0, "empty strategy spec")
    stripped = text.strip()
    if is_file(stripped) and os.path.exists(stripped):  # a whole path may hold ':' or ','
        return _load(stripped, text, 0, workload)
    known = "identity, hierarchical[:B], H2, H4, ..., wavelet, kron(...), FILE.npz, FILE.npy"
    node = Parser(text, is_known=_known, calls=("kron",), noun="strategy", known=known,
                  grammar=STRATEGY_GRAMMAR).whole()
    if node.kind == "file":
        return _load(node.name, text, node.pos, workload)
    try:
        if node.kind == "call":
            shape = _shape(workload, text, node.pos)
            if len(node.children) != len(shape):
                raise _err(text, node.pos, f"kron(...) has {len(node.children)} factors but the workload has "
                                           f"{len(shape)} attributes {shape}")
            return st.kron(*[_one(c, n, text) for c, n in zip(node.children, shape, strict=True)])
        structure = wl.structure_of(workload)
        if structure is not None and len(structure.shape) > 1:  # one meaning on every product domain, any size
            return st.kron(*[_one(node, n, text) for n in structure.shape])
        if node.kind == "leaf" and node.name == "tree":  # held by (n, B): the stream layer's own, at any n
            return _tree(node, workload.domain_size, text)
        if node.kind == "leaf" and node.name == "identity" and _is_stream(workload):
            from mmopt.toeplitz.strategies import banded  # I as a Toeplitz strategy: O(n), at any n
            return banded([1.0], workload.n, name="identity")
        return _one(node, workload.domain_size, text)
    except (ValueError, TypeError) as exc:
        if f" in '{text}'" in str(exc):
            raise
        kind = TypeError if isinstance(exc, TypeError) else ValueError
        raise kind(f"{exc} (building strategy '{text}'){_cli_remedy(node, str(exc))}") from None


def _cli_remedy(node, message: str) -> str:
    """The command line's way past a dense H_B or wavelet too large or of the wrong size: tree:B holds H_B by
    (n, B) at any n (the library's remedy named hierarchical(n), a Python call that then hit the same limit)."""
    dense_tree = node.kind == "leaf" and (node.name == "hierarchical" or re.fullmatch(r"H\d+", node.name))
    if dense_tree and "MAX_ALLOCATION_ENTRIES" in message:
        b = node.name[1:] if node.name.startswith("H") else (node.args[0].value if node.args else "2")
        # not "the same": where n is not a power of B the two trees split a node differently (prefix:1000, H2:
        # 300,625.69 dense, 300,432.41 as tree:2; a helper's audit)
        return (f". On the command line --strategy tree:{b} is an H_B tree held implicitly, at any n (where n is "
                f"not a power of {b} it splits some nodes differently, so its error differs slightly).")
    if node.kind == "leaf" and node.name == "wavelet" and "power of 2" in message:
        return ". On the command line --strategy tree:2 (H2, implicit) takes any n."
    return ""
