"""Read-only SQL over records: ``mmopt.sql("SELECT …, COUNT(*) FROM t GROUP BY ROLLUP(…), CUBE(…)", …)``.

Notation: see README. :mod:`mmopt.groupby.parse` reduces the query (sqlglot) to a list of grouping sets, refusing
anything else before any data is read; :mod:`mmopt.groupby.release` releases all of them at once by the matrix
mechanism and lays the result out as SQL would (NULL for rolled-up columns), with exact standard errors and
intervals. Needs the ``sql`` extra (sqlglot).
"""

from mmopt.groupby.parse import GroupByQuery, parse_query
from mmopt.groupby.release import SqlRelease, grouping_table, release_grouping_sets, sql

__all__ = ["GroupByQuery", "SqlRelease", "grouping_table", "parse_query", "release_grouping_sets", "sql"]
