"""Hierarchies and grouping sets (issue 32): GROUP BY ROLLUP / CUBE / GROUPING SETS over nested levels.

Notation: see README. :mod:`.tree` (a hierarchical attribute), :mod:`.components` (its residual components and
their tables), :mod:`.workload` (grouping sets as a workload), :mod:`.strategy` (the hierarchical residual
strategy: exact sensitivity, total and per-query error), :mod:`.solve` (its optimum under Gaussian noise with a
dual certificate), :mod:`.bound` (a lower bound on every strategy).
"""

from mmopt.hierarchy.solve import FamilySolution, solve
from mmopt.hierarchy.strategy import HierarchyStrategy, unit_total, unit_variances
from mmopt.hierarchy.tree import Hierarchy
from mmopt.hierarchy.workload import HierarchyWorkload, cross, cube, grouping_sets, rollup

__all__ = ["FamilySolution", "Hierarchy", "HierarchyStrategy", "HierarchyWorkload", "cross", "cube",
           "grouping_sets", "rollup", "solve", "unit_total", "unit_variances"]
