"""Issue 31: the architecture page prints the code's own tables (families, optimize's routes, auto's plans, the
dispatch table, the package imports), and the package root holds at most 15 modules, each listed on the page."""

from pathlib import Path

import mmopt
from mmopt.family import tables

ROOT = Path(mmopt.__file__).resolve().parent
PAGE = ROOT.parent / "docs" / "architecture.md"


def test_the_page_shows_what_the_code_says():
    page = PAGE.read_text(encoding="utf-8")
    assert page.count("<!-- table: ") == len(tables.TABLES)
    assert tables.render(page) == page, "docs/architecture.md is stale: python -m mmopt.family.tables " \
                                        "docs/architecture.md"


def test_the_root_is_small_and_every_module_and_subpackage_is_on_the_page():
    page = PAGE.read_text(encoding="utf-8")
    modules = sorted(p.name for p in ROOT.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert len(modules) + 2 <= 15, modules
    for name in modules:
        assert f"`{name}`" in page, f"{name} is not on the architecture page"
    for pkg in sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()):
        assert f"`{pkg}/`" in page, f"{pkg}/ is not on the architecture page"


def test_render_replaces_a_stale_table():
    stale = "<!-- table: families -->\n| old |\n<!-- end table -->"
    assert "| dense |" in tables.render(stale) and "| old |" not in tables.render(stale)
