"""Figures of the matrix mechanism's error, drawn with matplotlib (the ``plots`` extra).

Notation: see README. Six kinds of figure, each drawn on ``ax=`` (a new figure when None) and returned:

* :func:`error_profile` — heat map of M = (AᵀA)⁺ (or Δ²·M) on a symmetric-log colour scale (Def. 4.6);
* :func:`per_query_error` — every query's expected squared error, by (start, length) for ranges, or by index;
* :func:`error_by_shape`, :func:`error_by_term` — per-query errors of product workloads summarised by range
  shape (mean error by height × width, a heat map) and by term (per-marginal error bars), for any m;
* :func:`strategy` — heat map of A, or of each factor of an implicit product strategy;
* :func:`compare` — error against n for several strategies on log-log axes, with the SVD lower bound
  (Thm 5.26), computed here or read from precomputed rows.

matplotlib is imported only when a function is called: ``import mmopt`` and ``import mmopt.plot`` work
without it, and a call raises an ImportError naming ``pip install 'mmopt[plots]'``. Nothing here selects a
backend; scripts that write files call ``matplotlib.use("Agg")`` first.
"""

from mmopt.plot.compare import compare
from mmopt.plot.heatmaps import error_profile, strategy
from mmopt.plot.per_query import error_by_shape, error_by_term, per_query_error

__all__ = ["compare", "error_by_shape", "error_by_term", "error_profile", "per_query_error", "strategy"]
