"""The architecture page's tables, printed from the code they describe (``docs/architecture.md``).

``python -m mmopt.family.tables docs/architecture.md`` rewrites every block between ``<!-- table: NAME -->`` and
``<!-- end table -->`` in that page; a test checks the page against this module, so the page cannot drift from
the routing table, the families, the dispatch table, auto's plans or the import graph.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent


def families() -> str:
    from mmopt.family.routes import FAMILIES
    rows = ["| family | held as | layer | size |", "|---|---|---|---|"]
    rows += [f"| {f.name} | `{f.type_path.replace(':', '.')}` | {f.layer} | {f.size} |" for f in FAMILIES]
    return "\n".join(rows)


def routes() -> str:
    from mmopt.family.routes import ROUTES
    rows = ["| route | methods | what runs | function | condition |", "|---|---|---|---|---|"]
    for r in ROUTES:
        methods = "every other method, or a callable" if r.methods is None else ", ".join(r.methods)
        when = f"`{r.takes_path}`" if r.takes_path else "—"
        rows.append(f"| {r.name} | {methods} | {r.summary} | `{r.run_path}` | {when} |")
    return "\n".join(rows)


def operations() -> str:
    from mmopt.dispatch import OPS
    names = list(next(iter(OPS.values())))
    rows = ["| family | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for fam, ops in OPS.items():
        rows.append(f"| {fam} | " + " | ".join(f"`{ops[k].__module__}.{ops[k].__name__}`" for k in names) + " |")
    return "\n".join(rows)


def _auto_rows():
    from mmopt import workload as wl
    from mmopt.auto.plan import Context, plan
    from mmopt.optimize import optimize
    from mmopt.toeplitz.error import StreamWorkload
    from mmopt.workload import structure_of
    cases = [("prefix(1,024), dense", wl.prefix(1024)), ("prefix(2¹⁶), stream", wl.prefix(2**16)),
             ("2-D ranges 64×64, product", wl.ranges_2d(64)),
             ("2-way marginals on (8,)¹⁰, product", wl.marginals((8,) * 10, 2))]
    for label, W in cases:
        for norm in ("l1", "l2"):
            stream = W if isinstance(W, StreamWorkload) else None
            ctx = Context(W, None if stream else structure_of(W), stream, norm, 0, None, None, None, None, optimize)
            yield label, "Laplace" if norm == "l1" else "Gaussian", [c.name for c in plan(ctx, 60.0)]


def auto_plans() -> str:
    rows = ["| workload | noise | candidates, in the order auto tries them |", "|---|---|---|"]
    rows += [f"| {w} | {noise} | {', '.join(names)} |" for w, noise, names in _auto_rows()]
    return "\n".join(rows)


def _package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def dependencies() -> str:
    """Which of mmopt's packages and root modules each one imports (lazy imports included)."""
    graph: dict[str, set[str]] = {}
    names = {p.stem if p.suffix else p.name for p in PACKAGE.iterdir()
             if p.suffix == ".py" or (p / "__init__.py").exists()}
    for path in PACKAGE.rglob("*.py"):
        if path.name == "__init__.py" and path.parent == PACKAGE:
            continue
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        here = _package_of(".".join(rel.parts))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mmopt"):
                targets = [node.module] + ([f"mmopt.{a.name}" for a in node.names] if node.module == "mmopt" else [])
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.startswith("mmopt")]
            else:
                continue
            for t in targets:
                if (p := _package_of(t)) in names and p != here and t != "mmopt":
                    graph.setdefault(here, set()).add(p)
    rows = ["| package or module | imports from |", "|---|---|"]
    rows += [f"| {k} | {', '.join(sorted(v))} |" for k, v in sorted(graph.items())]
    return "\n".join(rows)


TABLES = {"families": families, "routes": routes, "operations": operations, "auto": auto_plans,
          "dependencies": dependencies}
_BLOCK = re.compile(r"(<!-- table: (\w+) -->\n)(.*?)(<!-- end table -->)", re.S)


def render(page: str) -> str:
    """``page`` with every table block replaced by the table the code gives now."""
    return _BLOCK.sub(lambda m: m.group(1) + TABLES[m.group(2)]() + "\n" + m.group(4), page)


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0] if args else "docs/architecture.md")
    path.write_text(render(path.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
