"""The tokenizer and recursive-descent parser shared by the workload and strategy specs of the command line.

The grammar itself (EBNF) is documented in :mod:`mmopt.cli.spec`; this module only turns text into a tree
of :class:`Node` objects and words every syntax error the same way: what went wrong, at which character
of which spec, and the grammar. Nothing is evaluated.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mmopt._base.hints import did_you_mean
from mmopt.cli._numbers import number
from mmopt.persist._files import CORRUPT_FILE_ERRORS

__all__ = ["Arg", "Node", "Parser", "is_file", "spec_error"]


@dataclass(frozen=True)
class Arg:
    """One ``:arg`` of a leaf: ``value`` or ``key=value``, at character ``pos`` of the spec."""

    key: str | None
    value: str
    pos: int


@dataclass(frozen=True)
class Node:
    """A parsed spec: a leaf (``name`` and ``args``), a call ("kron"/"stack" with ``children``) or a file."""

    kind: str  # "leaf", "call" or "file"
    name: str  # the leaf's or call's name, or the file path
    pos: int
    args: tuple[Arg, ...] = ()
    children: tuple[Node, ...] = ()
    weight: float | None = None


def spec_error(text: str, pos: int, what: str, *, known: str = "", hint: str = "", grammar: str) -> ValueError:
    """The one message format: what went wrong, at which position of which spec, the known names, a hint, and the
    grammar."""
    tail = f" Known: {known}." if known else ""
    return ValueError(f"{what} at position {pos} in '{text}'.{tail}{hint}\n{grammar}")


# -- tokens and parser -------------------------------------------------------------------------------
_TOKEN = re.compile(r"\s*(?:([(),:*=])|([^\s(),:*=]+))")


def _tokens(text: str) -> list[tuple[str, str, int]]:
    out, i = [], 0
    while (match := _TOKEN.match(text, i)) is not None:  # None once only spaces are left
        punct, word = match.groups()
        out.append(("punct", punct, match.start(1)) if punct else ("word", word, match.start(2)))
        i = match.end()
    return out


def is_file(word: str) -> bool:
    return word.lower().endswith((".npy", ".npz"))


#: How deeply kron(...)/stack(...) may nest: far beyond any real workload, far below Python's recursion limit.
MAX_DEPTH = 32


class Parser:
    """Recursive descent over the token list, one method per grammar rule.

    ``is_known(name)`` says which leaf names exist, ``calls`` which names take parenthesised parts, and
    ``noun``, ``known`` and ``grammar`` word the errors (the strategy specs reuse this parser).
    """

    def __init__(self, text: str, *, is_known: Callable[[str], bool], calls: tuple[str, ...], noun: str, known: str,
                 grammar: str):
        self.text, self.toks, self.i, self.depth = text, _tokens(text), 0, 0
        self.is_known, self.calls, self.noun, self.known, self.grammar = is_known, calls, noun, known, grammar

    def error(self, pos: int, what: str, **kw) -> ValueError:
        return spec_error(self.text, pos, what, grammar=self.grammar, **kw)

    def suggest(self, word: str) -> str:
        """" Did you mean 'prefix'?" for a known name equal up to case or close by difflib, else ""."""
        names = [w for w in re.findall(r"[A-Za-z_]\w*", self.known) if self.is_known(w) or w in self.calls]
        return did_you_mean(word, names, fold=True)

    def peek(self, value: str | None = None):
        tok = self.toks[self.i] if self.i < len(self.toks) else None
        return tok if value is None or (tok is not None and tok[1] == value) else None

    def take(self, expected: str):
        tok = self.peek()
        if tok is None:
            raise self.error(len(self.text), f"expected {expected} but the spec ended")
        self.i += 1
        return tok

    def whole(self) -> Node:
        """The entire text as one part, nothing left over."""
        node = self.part(in_stack=False)
        extra = self.peek()
        if extra is not None:
            # prefix(64): arguments follow colons, only kron and stack take parentheses
            hint = (f" (arguments follow colons: '{node.name}:…')" if extra[1] == "(" and node.kind == "leaf"
                    else "")
            raise self.error(extra[2], f"unexpected '{extra[1]}' after a complete {self.noun}{hint}")
        return node

    def part(self, in_stack: bool) -> Node:
        kind, value, pos = self.take(f"a {self.noun}")
        weight = None
        if kind == "word" and self.peek("*"):
            try:
                weight = number(value)  # not float(): it read 0_5 as 5
            except argparse.ArgumentTypeError:
                raise self.error(pos, f"weight '{value}' is not a number") from None
            if not in_stack:
                raise self.error(pos, f"weight '{value}*' is only allowed on a part of stack(...)")
            self.i += 1
            kind, value, pos = self.take(f"a {self.noun} after the weight")
        if kind != "word":
            raise self.error(pos, f"unexpected '{value}' where a {self.noun} name belongs")
        node = self.item(value, pos)
        return node if weight is None else Node(node.kind, node.name, node.pos, node.args, node.children, weight)

    def item(self, word: str, pos: int) -> Node:
        if word in self.calls:
            return self.call(word, pos)
        if is_file(word):
            return Node("file", word, pos)
        if not self.is_known(word):
            raise self.error(pos, f"unknown {self.noun} '{word}'", known=self.known, hint=self.suggest(word))
        args = []
        while self.peek(":"):
            self.i += 1
            kind, value, apos = self.take(f"an argument of '{word}'")
            if kind != "word":
                raise self.error(apos, f"unexpected '{value}' where an argument of '{word}' belongs")
            key = None
            if self.peek("="):
                self.i += 1
                kind, val2, _ = self.take(f"a value for '{value}='")
                if kind != "word":
                    raise self.error(apos, f"'{value}=' of '{word}' has no value")
                key, value = value, val2
            args.append(Arg(key, value, apos))
        return Node("leaf", word, pos, tuple(args))

    def call(self, name: str, pos: int) -> Node:
        if not self.peek("("):
            raise self.error(pos, f"'{name}' needs its parts in parentheses: {name}(..., ...)")
        if self.depth >= MAX_DEPTH:  # refused here, not by Python's recursion limit halfway through the build
            raise self.error(pos, f"'{name}(' nests deeper than {MAX_DEPTH} levels; flatten the spec "
                                  "(stack and kron take any number of parts)")
        self.i += 1
        self.depth += 1
        children = [self.part(name == "stack")]
        while self.peek(","):
            self.i += 1
            children.append(self.part(name == "stack"))
        self.depth -= 1
        kind, value, cpos = self.take(f"',' or ')' to close {name}(")
        if value != ")":
            raise self.error(cpos, f"unexpected '{value}' in {name}(...): expected ',' or ')'")
        return Node("call", name, pos, children=tuple(children))


# errors of access, not of content: their own messages (no such file, permission denied) say what is wrong
_ACCESS_ERRORS = (FileNotFoundError, PermissionError, IsADirectoryError)


def load_npy(path: str, what: str) -> np.ndarray:
    """A plain numeric array from an .npy file, never unpickled; a non-array file is refused in words that do not
    suggest unpickling it (numpy's own message does), and an empty, truncated or damaged one as such (numpy raises
    anything from EOFError to a tokenizer error for those, which the command reported as a crash)."""
    try:
        arr = np.load(path, allow_pickle=False)
    except _ACCESS_ERRORS:
        raise
    except ValueError as exc:
        if "allow_pickle" in str(exc):
            raise ValueError(f"The {what} '{path}' is not a numeric .npy array ({exc.__class__.__name__}: it holds "
                             "pickled objects or is not an .npy file at all). Save the array with numpy.save(path, "
                             "array); pickled files are never loaded.") from None
        raise _damaged(path, what, exc) from None
    except CORRUPT_FILE_ERRORS as exc:
        raise _damaged(path, what, exc) from None
    if not isinstance(arr, np.ndarray):  # np.load opens a zip archive whatever the file's name
        arr.close()
        raise ValueError(f"The {what} '{path}' is an .npz archive, not an .npy array. Save the array with "
                         "numpy.save(path, array).")
    return arr


def _damaged(path: str, what: str, exc: Exception) -> ValueError:
    return ValueError(f"The {what} '{path}' could not be read as an .npy array ({exc.__class__.__name__}: {exc}): it "
                      "is empty, truncated or damaged. Save the array again with numpy.save(path, array).")


def load_npz(path: str, what: str) -> dict[str, np.ndarray]:
    """Every array of an .npz archive, read now (allow_pickle=False); a corrupt or non-zip file is refused clearly.

    The arrays are read here, not left to the caller: an archive's members are decompressed on first access, and a
    damaged one (bad CRC, truncated) failed there, outside this function's handling, as a crash to report."""
    remedy = "Save it with numpy.savez(path, W=...) or numpy.savez(path, G=..., n_queries=m)."
    try:
        z = np.load(path, allow_pickle=False)
    except _ACCESS_ERRORS:
        raise
    except (ValueError, *CORRUPT_FILE_ERRORS) as exc:
        raise ValueError(f"The {what} '{path}' is not a readable .npz archive ({exc.__class__.__name__}). "
                         f"{remedy}") from None
    if isinstance(z, np.ndarray):
        raise ValueError(f"The {what} '{path}' is an .npy array, not an .npz archive. {remedy}")
    with z:
        try:
            return {k: z[k] for k in z.files}
        except (ValueError, *CORRUPT_FILE_ERRORS) as exc:
            raise ValueError(f"The {what} '{path}' is a damaged .npz archive: reading its arrays failed "
                             f"({exc.__class__.__name__}: {exc}). {remedy}") from None
