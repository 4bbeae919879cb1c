"""Read-only copies of the arrays a frozen object holds.

A frozen dataclass stops ``obj.weights = …`` but not ``obj.weights[:] *= 100``. Its arrays are its definition:
a strategy's weights set the sensitivity a release charges, a workload's weights the error it reports, and the
objects are shared (a records measurement hands every release the same strategy; ``as_marginal_workload`` caches
its conversion). Editing one in place changed later answers with the noise and the privacy map unchanged — 100×
the per-record change at the charged σ (a helper's probe). So such arrays are copied on construction (the
caller's array stays the caller's) and made read-only: an edit raises ``ValueError: assignment destination is
read-only`` instead of changing what was checked.

>>> import numpy as np
>>> w = read_only([1.0, 2.0])
>>> w.flags.writeable, w.dtype.name
(False, 'float64')
"""

from __future__ import annotations

import numpy as np

__all__ = ["read_only"]


def read_only(values, dtype=float) -> np.ndarray:
    """A read-only copy of ``values`` as an array of ``dtype`` (None: numpy's own choice)."""
    a = np.array(values, dtype=dtype, copy=True)
    a.setflags(write=False)
    return a
