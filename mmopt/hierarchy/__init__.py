"""Hierarchies and grouping sets (issue 32): GROUP BY ROLLUP / CUBE / GROUPING SETS over nested levels.

Notation: see README. :mod:`.tree` (a hierarchical attribute), :mod:`.components` (its residual components and
their tables), :mod:`.workload` (grouping sets as a workload), :mod:`.strategy` (the hierarchical residual
strategy: exact sensitivity, total and per-query error), :mod:`.solve` (its optimum under Gaussian noise with a
dual certificate), :mod:`.nodes` and :mod:`.node_solve` (the weighted node family for skewed trees), :mod:`.bound`
(a lower bound on every strategy), :mod:`.basis` and :mod:`.release` (OpenDP noise, least squares, exact
variances), :mod:`.records` (records in, a labelled table out), :mod:`.baselines` (independent noise per set),
:mod:`.synthetic` (a census-like geography), :mod:`.detect` (grouping sets inside a union of Kronecker products).

Examples
--------
>>> import mmopt
>>> from mmopt.hierarchy import Hierarchy, cross, cube, grouping_sets, rollup
>>> geo = Hierarchy.from_parents([[0, 0, 0, 1, 2, 2]], level_names=("nation", "state", "county"), name="geo")
>>> W = grouping_sets([geo, Hierarchy.flat(2, name="sex")], cross(rollup("state", "county"), cube("sex")))
>>> res = mmopt.optimize(W, privacy=mmopt.Privacy(1.0, 1e-6), method="hierarchy")
>>> res.method, bool(res.lower_bound <= res.objective <= 1.01 * res.lower_bound)
('hierarchy', True)
"""

from mmopt.hierarchy.records import GroupedRelease, GroupingPlan, plan_grouping_sets, release_grouping_sets
from mmopt.hierarchy.solve import FamilySolution, solve
from mmopt.hierarchy.strategy import HierarchyStrategy, unit_total, unit_variances
from mmopt.hierarchy.tree import Hierarchy
from mmopt.hierarchy.workload import HierarchyWorkload, cross, cube, grouping_sets, rollup

__all__ = ["FamilySolution", "GroupedRelease", "GroupingPlan", "Hierarchy", "HierarchyStrategy", "HierarchyWorkload",
           "cross", "cube", "grouping_sets", "plan_grouping_sets", "release_grouping_sets", "rollup", "solve",
           "unit_total", "unit_variances"]
