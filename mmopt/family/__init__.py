"""The representation families behind the public entry points, and the one table that routes to them.

A workload is held in one of four representations, chosen by its constructor for its size and structure:

======== ===================================================== ============================================
family   type                                                  where its layer lives
======== ===================================================== ============================================
dense    :class:`mmopt.workload.Workload` (n×n Gram)            :mod:`mmopt.dense`, :mod:`mmopt.error`
stream   :class:`mmopt.toeplitz.StreamWorkload` (prefix sums /  :mod:`mmopt.toeplitz`
         all ranges, O(n) at any n)
product  :class:`mmopt.structured.ImplicitWorkload` (Kronecker  :mod:`mmopt.structured`, :mod:`mmopt.multidim`
         products and their unions)
residual :class:`mmopt.structured.residual.MarginalWorkload`   :mod:`mmopt.structured.residual`
         (unions of marginals, records releases)
======== ===================================================== ============================================

:func:`family_of` names a workload's family; :data:`mmopt.family.routes.ROUTES` is the table
:func:`mmopt.optimize` looks its method up in (which family's code runs which method), so ``optimize`` itself has
no branch on a representation. The architecture page of the docs prints both tables from this code.
"""

from mmopt.family.routes import FAMILIES, ROUTES, Route, family_of, find

__all__ = ["FAMILIES", "ROUTES", "Route", "family_of", "find"]
