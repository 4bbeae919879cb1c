"""Sphinx configuration for mmopt's documentation.

Build (from the repository root; both must pass with no warnings):

    python -m sphinx -W --keep-going -b html docs docs/_build/html
    python -m sphinx -W -b doctest docs docs/_build/doctest

Choices, and why:

* ``numpydoc`` reads the numpydoc docstrings of mmopt/. It renders a section entry exactly as written, which
  matters here: mmopt's docstrings often name several attributes on one line ("rmse, rmse_ci : float,
  Interval"), and ``sphinx.ext.napoleon`` (tried first) turns such a line into one mislabelled field. It is
  a small pure-Python package whose only dependency is Sphinx.
* ``sphinx.ext.autosummary`` + ``autodoc``: one page per public name and per module, generated from the
  docstrings; adding a module to the reference is one line in ``api/modules.rst``.
* ``myst_parser``: the pages are Markdown, like README.md and the existing notes (``paper_notes.md``,
  ``factorization.md``), which are included unchanged.
* ``sphinx.ext.doctest``: every code example on the pages is a ``{doctest}`` block, run by
  ``-b doctest``. Plain ``>>>`` blocks inside docstrings are not run here (``doctest_test_doctest_blocks``
  is off): pytest already runs them (``--doctest-modules`` on mmopt/), in their module's namespace.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

# One BLAS thread, set before numpy loads: the examples work on small matrices, where more threads only wait.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import mmopt  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).parent / "_ext"))
sys.path.insert(0, str(ROOT))  # the experiments package, for tutorials/reproduce.md's example

project = "mmopt"
author = "mmopt contributors"
copyright = "mmopt contributors"
release = version = mmopt.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "sphinx.ext.doctest",
    "sphinx.ext.mathjax",
    "mmopt_sphinx",  # _ext/mmopt_sphinx.py: |x| read as absolute value, re-exported names, "Prop." summaries
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
templates_path = ["_templates"]

# The docstrings cross-reference private modules and numpy/scipy types that are not documented here: those
# links are left as plain text rather than reported.
nitpicky = False

# -- autodoc / autosummary / numpydoc ------------------------------------------------------------------
autosummary_generate = True
autodoc_default_options = {"members": True}
autodoc_member_order = "bysource"
# Types are in the signature; the docstrings' own Parameters sections say the rest.
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
numpydoc_show_class_members = False  # autodoc's :members: already documents them
numpydoc_xref_param_type = False
numpydoc_validation_checks: set[str] = set()  # style is checked by review, not by the build

# -- MyST -----------------------------------------------------------------------------------------------
myst_enable_extensions: list[str] = []
myst_heading_anchors = 3

# -- doctest --------------------------------------------------------------------------------------------
doctest_test_doctest_blocks = ""
# No global setup: every page imports what it uses in its first example, so that examples can be copied.

# -- HTML -----------------------------------------------------------------------------------------------
# furo if installed (the ``docs`` extra), else the theme that ships with Sphinx.
html_theme = "furo" if importlib.util.find_spec("furo") else "alabaster"
html_title = f"mmopt {release}"
html_static_path: list[str] = []
