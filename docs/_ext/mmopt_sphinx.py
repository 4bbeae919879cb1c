"""Fixes that let mmopt's docstrings build under ``sphinx-build -W``, and read well, without editing them.

1. **|x| is absolute value, not a substitution.** The docstrings write math in Unicode (|log δ|, |z| ≤ 1.96),
   which reST reads as substitution references and reports as undefined. mmopt defines no substitutions,
   so an undefined one is turned back into its literal text, ``|…|``, just before docutils would report it.
   Defined substitutions (and Sphinx's |version|, |release|, |today|) are untouched.
2. **One object, several public names.** ``mmopt.Workload`` is also ``mmopt.workload.Workload``; both pages
   document it, so autodoc notes the private canonical name (``mmopt.dense._workload_type.Workload``) twice and a
   type such as "Workload" in a docstring matches several entries. Sphinx reports both (sphinx-doc/sphinx
   issues #10348, #11050). Here a canonical alias noted twice is not reported, and a cross-reference whose
   candidates are all the *same Python object* goes to its shortest public name. Candidates that are
   different objects are still reported.
3. **"Prop. 4.4" does not end a sentence.** autosummary's one-line summaries stop at the first period
   unless it closes a known abbreviation; the paper's references (Prop., Def., Thm, Fig., Ex., …) are added
   to its list, so "Exact expected error of the matrix mechanism (Prop. 4.4)" is not cut after "Prop.".
"""

from __future__ import annotations

import importlib

from docutils import nodes
from sphinx.domains.python import PythonDomain
from sphinx.ext import autosummary
from sphinx.transforms import SphinxTransform


class LiteralBars(SphinxTransform):
    """Undefined substitution references → the literal text ``|…|`` (absolute values, norms)."""

    # After Sphinx's DefaultSubstitutions (210), before docutils' Substitutions (220) reports them.
    default_priority = 215

    def apply(self, **kwargs) -> None:
        defined = set(self.document.substitution_defs) | set(self.document.substitution_names)
        for ref in list(self.document.findall(nodes.substitution_reference)):
            if ref["refname"] not in defined:
                ref.replace_self(nodes.Text(f"|{ref.astext()}|"))


def _resolve(dotted: str):
    """The Python object a documented dotted name stands for, or a unique sentinel if it cannot be imported."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return object()
        return obj
    return object()


class AliasAwarePythonDomain(PythonDomain):
    def note_object(self, name, objtype, node_id, aliased=False, location=None):
        other = self.objects.get(name)
        if aliased and other is not None and other.aliased:
            return  # the same canonical (private) name, reached through a second public name
        super().note_object(name, objtype, node_id, aliased=aliased, location=location)

    def find_obj(self, env, modname, classname, name, type, searchmode=0):
        matches = super().find_obj(env, modname, classname, name, type, searchmode)
        if len(matches) > 1:
            public = [m for m in matches if not m[1].aliased] or matches
            first = _resolve(public[0][0])
            if all(_resolve(m[0]) is first for m in public[1:]):
                return [min(public, key=lambda m: (len(m[0]), m[0]))]
        return matches


PAPER_ABBREVIATIONS = ("Prop.", "Def.", "Thm.", "Thm", "Fig.", "Ex.", "Eq.", "App.", "Alg.", "Sec.", "Cor.",
                       "Lem.", "cf.", "resp.")


def setup(app):
    if isinstance(getattr(autosummary, "WELL_KNOWN_ABBREVIATIONS", None), tuple):
        autosummary.WELL_KNOWN_ABBREVIATIONS = tuple(
            dict.fromkeys(autosummary.WELL_KNOWN_ABBREVIATIONS + PAPER_ABBREVIATIONS))
    app.add_transform(LiteralBars)
    app.add_domain(AliasAwarePythonDomain, override=True)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
