"""The documentation site (docs/) builds without a single warning, and every example on its pages runs.

Both builds of docs/building.md are run here, on a copy of docs/ (autosummary writes its generated pages
into the source folder) with the repository as working directory (for ``import experiments``):

    python -m sphinx -W --keep-going -b html docs <out>/html
    python -m sphinx -W --keep-going -b doctest docs <out>/doctest

The html build is in the slow suite (40 s, for the default run's ~10 minutes); the doctest build reads every page
and docstring with -W too, so a warning from reading them still fails the default run. It runs the examples of
every page but :data:`HEAVY`'s three in the default run (50 CPU s), and those three in the slow suite (60 s).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sphinx")
pytest.importorskip("myst_parser")
pytest.importorskip("numpydoc")

import mmopt  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# The pages written for the site: their code examples must be executed ({doctest} blocks), never plain
# ```python fences. (paper_notes.md and factorization.md are notes kept as written.)
TUTORIALS = ["getting_started", "tutorials/optimize", "tutorials/evaluate", "tutorials/release",
             "tutorials/multidim", "tutorials/command_line", "tutorials/save_load", "tutorials/plotting",
             "tutorials/sparse_vector_and_adaptive", "tutorials/parallel", "tutorials/reproduce",
             "tutorials/accountant", "tutorials/records", "tutorials/prefix", "tutorials/training",
             "tutorials/groupby"]
PAGES = ["index.md", "notation.md", "building.md", "tutorials/index.md", "sparse_vector.md",
         *(f"{page}.md" for page in TUTORIALS)]


def _sphinx(builder: str, tmp_path: Path, pages=None) -> tuple[subprocess.CompletedProcess, Path]:
    src = tmp_path / "src" / "docs"
    if not src.exists():
        shutil.copytree(DOCS, src, ignore=shutil.ignore_patterns("_build", "generated"))
        shutil.copy(ROOT / "README.md", src.parent / "README.md")   # notation.md includes ../README.md
    out = tmp_path / builder
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", builder, str(src), str(out),
           *(str(src / f"{page}.md") for page in pages or ())]  # the pages built (all are read, with -W)
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    return proc, out


def _report(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\n--- stderr ---\n{proc.stderr[-6000:]}\n--- stdout ---\n{proc.stdout[-3000:]}"


@pytest.mark.slow  # the default run's ~10 minutes (README): run with `pytest -m slow`
def test_html_builds_without_warnings(tmp_path):
    proc, out = _sphinx("html", tmp_path)
    assert proc.returncode == 0, _report(proc)
    assert "WARNING" not in proc.stderr and "ERROR" not in proc.stderr, _report(proc)
    for page in ["index", "notation", "paper_notes", "factorization", "sparse_vector", "building", "tutorials/index",
                 *TUTORIALS, "api/index", "api/public", "api/modules", "api/generated/mmopt.evaluate",
                 "api/generated/mmopt.optimize", "api/generated/mmopt.Workload",
                 "api/generated/modules/mmopt.workload", "api/generated/modules/mmopt.structured"]:
        assert (out / f"{page}.html").is_file(), f"{page}.html missing"
    # the notation table is README's, included: a renamed README section would leave it empty
    notation = (out / "notation.html").read_text(encoding="utf-8")
    assert "variance_factor" in notation and "svd_bound" in notation
    # the API pages are generated from the docstrings, not empty stubs
    evaluate = (out / "api/generated/mmopt.evaluate.html").read_text(encoding="utf-8")
    assert "Prop. 4.4" in evaluate


#: The tutorials whose examples take 10–20 CPU s each (optimisations at scale): the slow suite runs them, for the
#: default run's ~10 minutes (README); every other page's examples run by default.
HEAVY = ["tutorials/training", "tutorials/multidim", "tutorials/optimize"]
EXAMPLES = ["architecture", "getting_started", "sparse_vector", *TUTORIALS]


@pytest.mark.parametrize("group", [pytest.param([p for p in EXAMPLES if p not in HEAVY], id="default"),
                                   pytest.param(HEAVY, id="heavy", marks=pytest.mark.slow)])
def test_every_example_runs(tmp_path, group):
    proc, out = _sphinx("doctest", tmp_path, group)
    assert proc.returncode == 0, _report(proc)
    report = (out / "output.txt").read_text(encoding="utf-8")
    assert re.search(r"^\s*0 failures in tests$", report, re.M), report[-3000:]
    # every tutorial's examples were found and run (a page whose blocks silently stopped being doctests
    # would otherwise pass with nothing tested)
    counts = {doc: int(n) for doc, n in re.findall(r"^Document: (\S+)\n-+\n.*?^(\d+) tests in", report, re.M | re.S)}
    for page in group:
        assert counts.get(page, 0) >= 5, f"{page}: {counts.get(page, 0)} examples run"
    assert set(counts) <= set(group), sorted(set(counts) - set(group))  # the pages not asked for: the other group's


def test_pages_run_their_examples():
    for name in PAGES:
        text = (DOCS / name).read_text(encoding="utf-8")
        fences = re.findall(r"^```+\s*(\{?[\w-]*\}?)", text, re.M)
        assert not {"python", "py", "pycon", "ipython"} & set(fences), f"{name}: a Python example that is not run"
    for page in TUTORIALS:
        assert "```{doctest}" in (DOCS / f"{page}.md").read_text(encoding="utf-8"), page
    # test_every_example_runs builds the pages of EXAMPLES only: a page with examples outside it would run none
    for path in DOCS.rglob("*.md"):
        if "_build" not in path.parts and re.search(r"^```\{doctest\}$", path.read_text(encoding="utf-8"), re.M):
            assert path.relative_to(DOCS).with_suffix("").as_posix() in EXAMPLES, path


def test_api_reference_lists_the_public_api():
    public = (DOCS / "api/public.rst").read_text(encoding="utf-8")
    modules = (DOCS / "api/modules.rst").read_text(encoding="utf-8")
    listed = set(re.findall(r"^ {3}(\S+)$", public, re.M))
    listed_modules = set(re.findall(r"^ {3}(mmopt(?:\.\w+)+)$", modules, re.M))
    for name in mmopt.__all__:
        if isinstance(getattr(mmopt, name), type(mmopt)):
            assert f"mmopt.{name}" in listed_modules, f"module mmopt.{name} is not in docs/api/modules.rst"
        else:
            assert name in listed, f"mmopt.{name} is not in docs/api/public.rst"
    assert {"mmopt.reconstruct", "mmopt.search.factorization", "mmopt.montecarlo", "mmopt.privacy"} <= listed_modules
