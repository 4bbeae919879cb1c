"""Read-only SQL to grouping sets: ``SELECT cols, COUNT(*) FROM t GROUP BY … | GROUPING SETS | ROLLUP | CUBE``.

Notation: see README. The query is parsed by sqlglot (a real SQL parser) and reduced to a plain
:class:`GroupByQuery` — the table name, the selected columns and the list of grouping sets (tuples of column
names, ``()`` the grand total) — before any data is read. The GROUP BY list means what SQL:1999 says
(§7.9; PostgreSQL, DuckDB and Spark agree):

* ``ROLLUP(e₁, …, e_k)`` is the k + 1 sets (e₁, …, e_k), (e₁, …, e_{k−1}), …, (e₁), ();
* ``CUBE(e₁, …, e_k)`` is all 2^k subsets, largest first, each in the listed order;
* ``GROUPING SETS (g₁, …, g_m)`` is the concatenation of its items' sets (an item may be a column, a
  parenthesised list, ``()``, a ROLLUP, a CUBE or a nested GROUPING SETS);
* a column or ``(a, b)`` is the single set of those columns;
* a GROUP BY list of several elements is their **cross product**: every choice of one set per element, united.
  ``GROUP BY ROLLUP(state, county), CUBE(sex, agegrp)`` is 3 × 4 = 12 grouping sets.

A repeated grouping set is answered once (SQL would repeat its rows). Everything else — WHERE, HAVING,
ORDER BY, LIMIT, DISTINCT, joins, subqueries, CTEs, set operations, several statements, aggregates other than
COUNT(*), expressions, ``SELECT *``, columns outside the domain, a FROM table with TABLESAMPLE, PIVOT, a version
or hints — is refused with a ValueError that says what
to do instead. A refusal happens here, so no record has been read.

Examples
--------
>>> q = parse_query("SELECT state, county, sex, COUNT(*) FROM people "
...                 "GROUP BY GROUPING SETS ((state, sex), (county, sex), ())")
>>> q.table, q.columns, q.grouping_sets
('people', ('state', 'county', 'sex'), (('state', 'sex'), ('county', 'sex'), ()))
>>> parse_query("SELECT a, b, COUNT(*) AS n FROM t GROUP BY ROLLUP(a, b)").grouping_sets
(('a', 'b'), ('a',), ())
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

__all__ = ["MAX_GROUPING_SETS", "RESULT_COLUMNS", "GroupByQuery", "expand", "parse_query"]

#: More grouping sets than this (CUBE of 14 columns is 16,384) is refused before they are listed.
MAX_GROUPING_SETS = 4096
#: The result table's own columns (besides the grouping columns and the count): no column may be named like one.
RESULT_COLUMNS = ("grouping_set", "std_error", "lower", "upper")

_CALLER = "mmopt.sql"
_CLAUSES = {"where": "WHERE", "having": "HAVING", "order": "ORDER BY", "limit": "LIMIT", "offset": "OFFSET",
            "joins": "JOIN", "laterals": "LATERAL", "with": "WITH (common table expressions)",
            "with_": "WITH (common table expressions)", "distinct": "SELECT DISTINCT", "qualify": "QUALIFY",
            "windows": "WINDOW", "into": "INTO", "sample": "TABLESAMPLE", "prewhere": "PREWHERE"}
_KEEP = {"expressions", "from", "from_", "group", "kind"}
_FILTER = ("A filter changes which records are counted, and mmopt.sql releases whole tables. To restrict to values of "
           "a domain attribute, group by it and keep those rows of the returned table (post-processing, free); to "
           "filter on anything else, filter the records before the release (and declare the narrower domain).")
_TODO = {"where": _FILTER, "prewhere": _FILTER, "qualify": _FILTER, "having": _FILTER.replace("records", "groups", 1),
         "joins": "Join the tables before the release and pass the joined records as 'source' (one record per "
                  "person, or the privacy unit changes).",
         "laterals": "Join the tables before the release and pass the joined records as 'source'.",
         "order": "Sort the returned table afterwards (post-processing).",
         "limit": "Cut the returned table afterwards (post-processing).",
         "offset": "Cut the returned table afterwards (post-processing).",
         "with": "Name the table of records directly in FROM.", "with_": "Name the table of records directly in FROM.",
         "distinct": "Remove DISTINCT: a GROUP BY already gives one row per group."}


@dataclass(frozen=True)
class GroupByQuery:
    """A parsed counting query: plain data, handed to :func:`mmopt.groupby.release.release_grouping_sets`.

    Attributes
    ----------
    table : str
        The FROM table ("schema.name" when qualified).
    columns : tuple of str
        The selected grouping columns, in SELECT order (each a domain attribute).
    grouping_sets : tuple of tuple of str
        The distinct grouping sets in SQL's order; each lists its columns in SELECT order; ``()`` is the total.
    count_name : str
        The COUNT(*) column's name in the result (its alias, else "count").
    table_parts : tuple of str
        The FROM name's identifier parts as written, unquoted: ``("my", "tab")`` for ``my.tab`` but ``("my.tab",)``
        for ``"my.tab"`` (one table whose name holds a dot), which ``table`` alone cannot tell apart.
    """

    table: str
    columns: tuple
    grouping_sets: tuple
    count_name: str = "count"
    table_parts: tuple = ()


def _refuse(what: str, todo: str):
    raise ValueError(f"{_CALLER} refuses {what}. {todo}")


def _sqlglot():
    try:
        import sqlglot
        from sqlglot import exp
    except ImportError:
        raise ImportError(f"{_CALLER} needs sqlglot to parse SQL. Install it with: pip install sqlglot "
                          "(from a checkout: pip install -e '.[sql]')") from None
    return sqlglot, exp


def _name(node, exp, qualifiers: set, where: str) -> str:
    """The column name of a bare column reference, qualified at most by the FROM table as ``qualifiers`` allows
    (tuples of name parts): its alias if it has one, else a suffix of its own name — db.t.state or t.state for FROM
    db.t, not other.t.state (only the table's last part was compared, and other.t.state counted db.t's column; a
    helper's probe)."""
    if isinstance(node, exp.Paren):
        return _name(node.this, exp, qualifiers, where)
    if not isinstance(node, exp.Column) or isinstance(node.this, exp.Star):
        _refuse(f"{node.sql()!r} in {where}", "Only plain column names of the domain may be grouped or selected "
                "(no expressions, literals, ordinals or SELECT *).")
    qualifier = tuple(p.name for p in node.parts[:-1])
    if qualifier and qualifier not in qualifiers:
        _refuse(f"the column {node.sql()!r}", "Columns must belong to the FROM table (qualified by "
                f"{' or '.join(sorted('.'.join(q) for q in qualifiers))} at most).")
    return node.name


def _element(node, exp, names, where: str) -> list[tuple]:
    """The grouping sets of one GROUP BY element (module docstring), as tuples of names."""
    if isinstance(node, exp.Tuple):  # (a, b) or () — one set
        return [tuple(n for item in node.expressions for n in _element(item, exp, names, where)[0])]
    if isinstance(node, exp.Rollup | exp.Cube):
        parts = [_element(e, exp, names, where) for e in node.expressions]
        if any(len(p) != 1 for p in parts):
            _refuse(f"a nested grouping construct inside {type(node).__name__.upper()}",
                    "ROLLUP and CUBE take columns or parenthesised column lists.")
        cols = [p[0] for p in parts]
        if isinstance(node, exp.Rollup):
            return [tuple(itertools.chain(*cols[:k])) for k in range(len(cols), -1, -1)]
        if len(cols) > math.log2(MAX_GROUPING_SETS):
            _refuse(f"CUBE of {len(cols)} elements (2^{len(cols)} grouping sets)",
                    f"Ask for at most {MAX_GROUPING_SETS} grouping sets.")
        return [tuple(itertools.chain(*(cols[i] for i in S))) for k in range(len(cols), -1, -1)
                for S in itertools.combinations(range(len(cols)), k)]
    if isinstance(node, exp.GroupingSets):
        return [s for item in node.expressions for s in _element(item, exp, names, where)]
    return [(_name(node, exp, names, where),)]


def expand(elements: list[list[tuple]]) -> list[tuple]:
    """The cross product of the elements' grouping sets, each united in order (repeated columns once).

    Examples
    --------
    >>> expand([[("a", "b"), ("a",), ()], [("c",), ()]])
    [('a', 'b', 'c'), ('a', 'b'), ('a', 'c'), ('a',), ('c',), ()]
    """
    n = math.prod(len(e) for e in elements)
    if n > MAX_GROUPING_SETS:
        _refuse(f"a GROUP BY of {n:,} grouping sets", f"Ask for at most {MAX_GROUPING_SETS} grouping sets.")
    return [tuple(dict.fromkeys(itertools.chain(*combo))) for combo in itertools.product(*elements)]


def _group_elements(group) -> list:
    """The GROUP BY list's elements. sqlglot 30.x keeps them in ``expressions`` in the written order; earlier
    30.x releases put GROUPING SETS, ROLLUP and CUBE in their own lists (after the plain columns: the cross
    product, hence the set of grouping sets, is the same). An empty ROLLUP or CUBE is MySQL's ``WITH ROLLUP``."""
    elements = list(group.expressions)
    for key, value in group.args.items():
        if key == "expressions" or not value:
            continue
        items = value if isinstance(value, list) else [value]
        if key not in ("grouping_sets", "rollup", "cube") or any(not item.expressions for item in items):
            what = "ALL" if key == "all" else f"… WITH {key.upper()}"
            _refuse(f"GROUP BY {what}", "Write the grouping explicitly, e.g. GROUP BY ROLLUP(a, b), CUBE(c, d) or "
                    "GROUPING SETS ((a, b), ()).")
        elements += items
    if not elements:
        _refuse("GROUP BY ALL", "Write the grouping explicitly, e.g. GROUP BY ROLLUP(a, b) or GROUPING SETS ((a), ()).")
    return elements


def _from(select, exp) -> tuple[str, set, tuple]:
    src = select.args.get("from_") or select.args.get("from")
    if src is None:
        _refuse("a query without FROM", "Name the table of records: SELECT …, COUNT(*) FROM people GROUP BY ….")
    table = src.this
    if isinstance(table, exp.Subquery) or table.find(exp.Select) is not None:
        _refuse("a subquery in FROM", "Count from one table of records; filter or join before the release.")
    if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier):
        _refuse(f"the FROM item {table.sql()!r}", "Name one table (e.g. FROM people); table functions such as "
                "read_parquet(...) are not read by mmopt.sql: pass the file as 'source'.")
    # Anything on the table beyond its name and a plain alias changes which rows, or which columns, are counted
    # (TABLESAMPLE, FOR SYSTEM_TIME AS OF, PIVOT, hints, an alias renaming the columns): refused, not ignored.
    extra = sorted(k for k, val in table.args.items() if k not in ("this", "db", "catalog", "alias") and val)
    alias = table.args.get("alias")
    if alias is not None and alias.args.get("columns"):
        extra.append("alias columns")
    if extra:
        _refuse(f"the FROM item {table.sql()!r} ({', '.join(extra)})", "Count from the plain table (FROM people): "
                "sample, pivot or version the records before the release, and pass them as 'source'.")
    if alias is not None and not table.this.quoted and table.name.upper() == "ONLY":
        _refuse(f"FROM ONLY {table.alias}", "Name the table alone (FROM people): ONLY is not read by mmopt.sql.")
    parts = tuple(p.name for p in table.parts)  # kept: ".".join lost the quoting, and "my.tab" read my.tab
    name = ".".join(parts)
    qualifiers = {(table.alias,)} if table.alias else {parts[i:] for i in range(len(parts))}
    return name, qualifiers, parts


def parse_query(query: str, attributes=None, levels=()) -> GroupByQuery:
    """Parse one read-only counting query into a :class:`GroupByQuery` (module docstring), or refuse it. With the
    domain's ``attributes`` (names; and hierarchy ``levels``), a column that is neither is refused first, by name
    (``GROUP BY foo`` was refused as a selected column in no grouping set, never saying foo is unknown)."""
    if not isinstance(query, str):
        raise TypeError(f"The 'query' parameter of {_CALLER} must be a SQL string. Got {type(query).__name__} "
                        "instead.")
    if not query.strip():
        raise ValueError(f"The 'query' parameter of {_CALLER} must be a non-empty SQL string. Got {query!r}.")
    sqlglot, exp = _sqlglot()
    try:
        statements = [s for s in sqlglot.parse(query) if s is not None]
    except sqlglot.errors.SqlglotError as exc:
        raise ValueError(f"{_CALLER} cannot parse the query: {str(exc).splitlines()[0]}") from None
    if len(statements) != 1:
        _refuse(f"{len(statements)} statements", "Pass exactly one SELECT statement.")
    select = statements[0]
    # MySQL / MariaDB run what /*! … */ holds: sqlglot keeps it as a comment, so a WHERE or HAVING in one was
    # ignored here and the whole table's counts released (a helper's audit)
    if hidden := next((c for node in select.walk() for c in (node.comments or ()) if c.lstrip().startswith("!")),
                      None):
        _refuse(f"the comment /*{hidden.strip()[:40]} */", "MySQL runs a /*! … */ comment as SQL, which mmopt.sql "
                "would ignore. Remove it (or write what it holds in the query, where it is checked).")
    if not isinstance(select, exp.Select):
        _refuse(f"the statement {select.sql()[:60]!r} ({type(select).__name__.upper()})", "Only a read-only "
                "SELECT … COUNT(*) … GROUP BY … query is accepted (no UNION, INSERT, UPDATE, DELETE, DDL).")
    for key, value in select.args.items():
        if value and key not in _KEEP:
            _refuse(_CLAUSES.get(key, key.upper()), "mmopt.sql answers SELECT <columns>, COUNT(*) FROM <table> GROUP "
                    "BY … only. " + _TODO.get(key, "Remove the clause."))
    table, names, parts = _from(select, exp)
    columns, counts = [], []
    for item in select.expressions:
        node, alias = (item.this, item.alias) if isinstance(item, exp.Alias) else (item, None)
        if isinstance(node, exp.Count):
            inner = node.this
            if isinstance(inner, exp.Distinct):
                _refuse(f"{node.sql()!r}", "COUNT(DISTINCT …) counts distinct values, not records; mmopt.sql releases "
                        "record counts: COUNT(*).")
            if not isinstance(inner, exp.Star):
                _refuse(f"{node.sql()!r}", "Count records with COUNT(*) (records with a missing or out-of-domain "
                        "value are dropped by the domain's public rule, so COUNT(col) would be the same).")
            if modifiers := [k.rstrip("_").upper() for k, v in inner.args.items() if v]:
                # COUNT(* EXCLUDE …), COUNT(* ILIKE …): Snowflake leaves out rows with a NULL in the kept columns;
                # the modifier was dropped and a plain COUNT(*) released (a helper's audit)
                _refuse(f"{node.sql()!r}", f"COUNT(*) takes no column modifier ({', '.join(modifiers)}); write "
                        "COUNT(*).")
            counts.append(alias or "count")
        elif isinstance(node, exp.Grouping):
            # GROUPING(b) is an AggFunc to sqlglot: the SUM/AVG message below sent users looking for bounded values
            _refuse(f"{node.sql()!r}", "Drop it: every row of the result names its grouping set in the column "
                    "'grouping_set' (and a rolled-up column is NULL there), which is what GROUPING() tells apart.")
        elif isinstance(node, exp.AggFunc):
            _refuse(f"the aggregate {node.sql()!r}", "Only COUNT(*) is released (SUM, AVG, MIN, MAX need bounded "
                    "values and a different sensitivity).")
        elif node.find(exp.Select) is not None:
            _refuse(f"the subquery {node.sql()!r}", "Select grouping columns and COUNT(*) only.")
        else:
            if alias:
                _refuse(f"the alias {item.sql()!r}", "Select grouping columns by their own names.")
            columns.append(_name(node, exp, names, "SELECT"))
    if len(counts) != 1:
        _refuse(f"a SELECT list with {len(counts)} COUNT(*)", "Select the grouping columns and exactly one COUNT(*).")
    if len(set(columns)) != len(columns):
        _refuse("a column selected twice", "Select each grouping column once.")
    # the result's own columns: an alias among them replaced one silently (COUNT(*) AS std_error lost the counts,
    # AS county the labels; a helper's probe), and so did a grouping column named like one (std_error's labels
    # became standard errors; a probe)
    # SQL names match up to case: COUNT(*) AS STD_ERROR beside std_error read back as the counts (a helper's audit)
    if clash := [c for c in columns if c.casefold() in RESULT_COLUMNS]:
        _refuse(f"the grouping column {clash[0]!r}", f"The result already has a column {clash[0]!r} (grouping_set, "
                "std_error, and with alpha lower and upper), which would replace its labels; a grouping column takes "
                f"no alias here. Rename it in the records and the domain (e.g. pandas' df.rename(columns={{"
                f"{clash[0]!r}: '{clash[0]}_group'}}) and Attribute('{clash[0]}_group', …), or a DuckDB view selecting "
                f"\"{clash[0]}\" AS {clash[0]}_group) and group by the new name.")
    if counts[0].casefold() in {c.casefold() for c in (*columns, *RESULT_COLUMNS)}:
        _refuse(f"COUNT(*) AS {counts[0]}", "Name the count otherwise: the result already has a column "
                f"{counts[0]!r} (the grouping columns, grouping_set, std_error, and with alpha lower and upper).")
    group = select.args.get("group")
    if group is not None:
        sets = expand([_element(e, exp, names, "GROUP BY") for e in _group_elements(group)])
    else:
        sets = [()]
    grouped = {c for S in sets for c in S}
    if attributes is not None:
        unknown = [c for c in (*columns, *sorted(grouped)) if c not in attributes and c not in levels]
        if unknown:
            # SQL folds an unquoted name's case; the domain's names are matched as written, so say which was meant
            near = [a for a in (*attributes, *levels) if str(a).casefold() == unknown[0].casefold()]
            hint = f" Did you mean {near[0]!r}? Names match as the domain writes them." if near else ""
            raise ValueError(f"{_CALLER} refuses the column {unknown[0]!r}: it is not an attribute of the domain "
                             f"{list(attributes)}. Only domain attributes (public sizes and categories) can be "
                             f"grouped; add it to the domain or drop it from the query.{hint}")
    missing = [c for c in columns if c not in grouped]
    if missing:
        _refuse(f"the selected column {missing[0]!r}, which is in no grouping set", "Group by every selected column "
                "(as SQL requires), or drop it from SELECT.")
    hidden = sorted(grouped - set(columns))
    if hidden:
        _refuse(f"grouping by {hidden[0]!r} without selecting it", "Select every grouping column, so that each row "
                "of the result says which group it counts.")
    order = {c: i for i, c in enumerate(columns)}
    distinct = dict.fromkeys(tuple(sorted(S, key=order.__getitem__)) for S in sets)
    return GroupByQuery(table, tuple(columns), tuple(distinct), counts[0], parts)
