"""Released answers a person can read: query labels, a tidy table with standard errors, your own queries.

Notation: see README. For a workload W and an output of :func:`mmopt.release` (or
:func:`mmopt.matrix_mechanism`):

* :func:`answers_table` — a pandas DataFrame, one row per query: ``query``, ``term``, ``table``, one column
  per attribute (what the query asks of it: ``"3"``, ``"[2, 9]"``, ``"≤ 5"``, ``"*"``, …), ``answer`` (W x̂)
  and ``standard_error`` (the least-squares answer's exact standard deviation at the noise drawn);
  :func:`write_answers` streams the same table to CSV or Parquet block by block (any number of rows),
  :func:`iter_tables` yields it as DataFrames;
* :func:`answer` — your own queries (range specs or rows of a matrix) from x̂, with standard errors;
* :func:`query_label`, :func:`iter_labels` — the labels alone (:mod:`mmopt.answers.labels`);
* :func:`per_query_variances` — ``evaluate(..., per_query=True)`` in blocks, for any number of queries;
  :func:`error_by_shape`, :func:`error_by_term` — per-query errors summarised by range shape and by term.

Per-query variances of a product strategy on a workload of products are Kronecker products of per-factor
terms (:mod:`mmopt.structured.per_query`): 2-D ranges on 128² (68 million queries) need two vectors of
8,256 numbers. pandas and pyarrow (``pip install 'mmopt[tables]'``) are imported only by the table functions.
"""

from mmopt.answers.files import WrittenTable, write_answers
from mmopt.answers.labels import iter_labels, query_label
from mmopt.answers.layout import Layout, layout_of
from mmopt.answers.queries import QueryAnswers, answer
from mmopt.answers.summary import ShapeErrors, TermError, error_by_shape, error_by_term
from mmopt.answers.table import MAX_TABLE_ROWS, answers_table, iter_tables
from mmopt.answers.variance import per_query_variances

__all__ = [
    "MAX_TABLE_ROWS", "Layout", "QueryAnswers", "ShapeErrors", "TermError", "WrittenTable", "answer",
    "answers_table", "error_by_shape", "error_by_term", "iter_labels", "iter_tables", "layout_of",
    "per_query_variances", "query_label", "write_answers",
]
