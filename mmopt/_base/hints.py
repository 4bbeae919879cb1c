"""Pointers for the names a newcomer reaches for on an object that does not have them."""

from __future__ import annotations

import difflib

__all__ = ["did_you_mean", "factor_names", "holder_name", "missing_attribute", "unexpected_keywords"]

#: Names a newcomer reaches for on a release's output, pointed at the table that has them.
_TABLE_NAMES = frozenset({"intervals", "interval", "confidence_intervals", "table", "to_frame", "to_pandas",
                          "standard_error", "standard_errors", "std_error", "std_errors", "labels"})


def missing_attribute(output, name: str) -> AttributeError:
    """AttributeError for ``output.name``, saying where labelled answers, standard errors and intervals are."""
    where = ("; the labelled answers with standard errors and exact 1 − α intervals are "
             "mmopt.answers_table(out, W, A, alpha=0.05)") if name in _TABLE_NAMES else ""
    return AttributeError(f"{type(output).__name__!r} object has no attribute {name!r}{where}")


def unexpected_keywords(caller: str, given: dict, known, hints: dict[str, str]) -> TypeError:
    """TypeError for keywords ``caller`` does not take: the reason for one a newcomer reaches for (``hints``), else
    the nearest known keyword ("Did you mean …?"), where Python's own message said only "unexpected keyword"."""
    name = sorted(given)[0]
    if name in hints:
        return TypeError(f"{caller}() got an unexpected keyword argument {name!r}: {hints[name]}")
    return TypeError(f"{caller}() got an unexpected keyword argument {name!r}."
                     + (did_you_mean(name, known) or f" It takes {', '.join(sorted(known))}."))


def did_you_mean(value: str, choices, quote=repr, *, fold: bool = False) -> str:
    """" Did you mean 'x'?" for the choice nearest ``value`` (difflib's ratio ≥ 0.6), or "" when none is near.
    With ``fold``, a choice equal to ``value`` up to case and surrounding spaces comes first (names a SQL engine
    folds, a CSV header that keeps its spaces).

    >>> did_you_mean("hierarchial", ["identity", "hierarchical"]), did_you_mean("zzz", ["identity"])
    (" Did you mean 'hierarchical'?", '')
    >>> did_you_mean(" AGE", ["sex", "age"], fold=True)
    " Did you mean 'age'?"
    """
    choices = list(choices)
    key = value.strip().casefold()
    near = [c for c in choices if fold and c.strip().casefold() == key] or difflib.get_close_matches(value, choices,
                                                                                                    n=1)
    return f" Did you mean {quote(near[0])}?" if near else ""


#: the names messages give objects that hold what a parameter wanted (a Plan's strategy and privacy, a loaded
#: SavedStrategy's strategy); others are called by their type's name in lower case
_HOLDERS = {"SavedStrategy": "saved"}


def holder_name(value) -> str:
    """The variable name a message uses for ``value`` in "pass plan.strategy" (saved, plan, …)."""
    kind = type(value).__name__
    return _HOLDERS.get(kind, kind.lower())


def factor_names(names) -> str:
    """The name of a Kronecker product from its factors' names, a factor that is a sum (a stack,
    ``prefix(2)+2*total(2)``) in parentheses: ``(prefix(2)+2*total(2))⊗identity(3)``, where the bare join read as
    prefix(2) + 2·(total(2)⊗identity(3)) in an answers table's ``table`` column (a newcomer's audit).

    >>> factor_names(["prefix(2)+2*total(2)", "identity(3)"]), factor_names(["marginals(2x2,k=1)", "H2"])
    ('(prefix(2)+2*total(2))⊗identity(3)', 'marginals(2x2,k=1)⊗H2')
    """
    def wrapped(name: str) -> str:
        depth = 0
        for c in name:
            if c in "([":
                depth += 1
            elif c in ")]":
                depth -= 1
            elif c == "+" and depth == 0:  # a sum at the top level ('-' too is a hyphen in names: p-identity)
                return f"({name})"
        return name

    return "⊗".join(wrapped(str(n)) for n in names)
