"""The Workload type: a Gram matrix per query G/m, the exact query count m, and optionally W itself.

Notation: see README. Error depends on W only through G = WᵀW (and on m for per-query figures), so a
:class:`Workload` *is* a Gram matrix plus m. The Gram is stored per query, G/m, with m an exact Python int:
all 2ⁿ−1 predicate queries have G = 2ⁿ⁻²(I+J), which overflows float64 past n≈1000, while G/m ≈ (I+J)/4
stays finite for every n. The family constructors live in :mod:`mmopt.dense._workload_core`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mmopt._base import validation as v
from mmopt.dense import _gram_forms as gf

FAMILIES = ("matrix", "gram", "identity", "total", "prefix", "all_range", "all_predicate")
CLOSED_FORMS = FAMILIES[2:]
# Explicit W is built on request only up to this many entries (≈ 0.8 GB of float64).
MAX_EXPLICIT_ENTRIES = 10**8


@dataclass(frozen=True, eq=False)
class Workload:
    """A workload of m linear queries over a domain of n cells.

    Build one with :meth:`from_matrix`, :meth:`from_gram` or a family constructor
    (:func:`all_range`, :func:`prefix`, ...). Attributes are read-only (arrays included).
    Direct construction ``Workload(mean_gram, n_queries, name, matrix, family)`` checks every invariant:
    ``mean_gram`` a finite float64 n×n array; ``matrix`` given exactly when ``family="matrix"``, of
    shape (m, n), with WᵀW/m equal to ``mean_gram``; a closed-form family's m and Gram equal to its
    formula; ``family="gram"`` symmetric PSD (O(n³)). A contradicting family would make per-query and
    maximum errors silently wrong, so it is refused.

    Attributes
    ----------
    mean_gram : ndarray of shape (n, n)
        G/m, the Gram matrix per query (finite for every family).
    n_queries : int
        m, exact (a Python int, possibly larger than any float).
    name : str
        A short label for tables.
    matrix : ndarray of shape (m, n) or None
        W, when known explicitly.
    family : str
        One of :data:`FAMILIES`; lets error analysis use closed forms.

    Examples
    --------
    >>> W = Workload.from_matrix([[1, 0], [1, 1]], name="prefix2")
    >>> W.gram
    array([[2., 1.],
           [1., 1.]])
    >>> W.n_queries, W.domain_size
    (2, 2)
    """

    mean_gram: np.ndarray = field(repr=False)
    n_queries: int
    name: str = "workload"
    matrix: np.ndarray | None = field(default=None, repr=False)
    family: str = "gram"

    def __post_init__(self) -> None:
        gf.validate_fields(self, FAMILIES)

    @classmethod
    def _make(cls, mean_gram, n_queries, name, matrix, family) -> Workload:
        """For the constructors of mmopt.dense._workload_core: correct by construction (tested against explicit W),
        so the O(n²)–O(n³) checks of direct construction are skipped. Arrays are frozen: W and G/m must never
        drift apart."""
        self = object.__new__(cls)
        for key, val in (("mean_gram", mean_gram), ("n_queries", n_queries), ("name", name),
                         ("matrix", matrix), ("family", family)):
            if isinstance(val, np.ndarray):
                val.setflags(write=False)
            object.__setattr__(self, key, val)
        return self

    # -- constructors -------------------------------------------------------------------------------
    @classmethod
    def from_matrix(cls, matrix, *, name: str = "workload") -> Workload:
        """Workload with explicit query matrix W (m×n); G = WᵀW is computed (scale-safely).

        ``matrix`` may be a list, an int/float/bool array (bool = 0/1 predicates) or a scipy.sparse
        matrix; complex and string input is refused. W is copied when it is the caller's array.
        """
        caller = "Workload.from_matrix"
        W = v.check_matrix(matrix, name="matrix", caller=caller)
        if not np.any(W):
            raise ValueError(f"The 'matrix' parameter of {caller} must have a non-zero entry. Got all zeros.")
        G = gf.mean_gram_of(W, caller=caller)
        if W is matrix or W.base is not None:
            W = W.copy()  # never freeze the caller's own array (or a view of it)
        return cls._make(G, W.shape[0], v.check_str(name, name="name", caller=caller), W, "matrix")

    @classmethod
    def from_gram(cls, gram, *, n_queries: int, name: str = "workload") -> Workload:
        """Workload known only through G = WᵀW (n×n, symmetric PSD) and its query count m."""
        caller = "Workload.from_gram"
        m = v.check_int(n_queries, name="n_queries", caller=caller, low=1)
        G = v.check_gram(gram, caller=caller, remedy=" Pass W.T @ W, or use Workload.from_matrix(W).", queries=m)
        if not np.any(G):
            raise ValueError(f"The 'gram' parameter of {caller} must be non-zero.")
        mean = G / gf.as_float(m)
        gf.check_range(mean, "G/m", caller, f" (max |G| = {np.max(np.abs(G)):.3g}, m = {v.fmt_count(m)})")
        return cls._make(mean, m, v.check_str(name, name="name", caller=caller), None, "gram")

    # -- derived quantities -------------------------------------------------------------------------
    @property
    def domain_size(self) -> int:
        """n, the number of cells of the data vector."""
        return self.mean_gram.shape[0]

    @property
    def knows_rows(self) -> bool:
        """Whether W's queries are known: stored, or built from a named family by :meth:`explicit_matrix`; False for
        a workload given by its Gram alone (:meth:`from_gram`)."""
        return self.matrix is not None or self.family != "gram"

    @property
    def gram(self) -> np.ndarray:
        """G = WᵀW. Raises OverflowError when it exceeds float64 (use ``mean_gram``)."""
        with np.errstate(over="ignore"):
            G = self.mean_gram * gf.as_float(self.n_queries)
        if not np.all(np.isfinite(G)):
            raise OverflowError(
                f"Workload '{self.name}' has a Gram matrix beyond float64 range (m = {v.fmt_count(self.n_queries)}). "
                "Use its 'mean_gram' (G/m) and per-query error figures instead."
            )
        return G

    def explicit_matrix(self, *, max_entries: int = MAX_EXPLICIT_ENTRIES) -> np.ndarray:
        """Return W, building it from the family's definition when it is not stored.

        A stored W is returned as it is (nothing is allocated, so ``max_entries`` does not apply); otherwise
        raises ValueError for Gram-only workloads and when building W's m·n entries would exceed ``max_entries``
        (or the allocation limit :data:`mmopt._base.validation.MAX_ALLOCATION_ENTRIES`).
        """
        if self.matrix is not None:
            return self.matrix
        caller = "Workload.explicit_matrix"
        max_entries = v.check_int(max_entries, name="max_entries", caller=caller, low=0)
        if self.family == "gram":
            size = self.n_queries * self.domain_size
            why = ("built from its Gram matrix only" if size <= MAX_EXPLICIT_ENTRIES else
                   f"kept as its Gram matrix only (its m·n = {size:,} entries exceed {MAX_EXPLICIT_ENTRIES:,}, so a "
                   "product or stack of them did not form W)")
            raise ValueError(
                f"Workload '{self.name}' was {why}, so W is unknown. mmopt.evaluate and mmopt.optimize read the "
                "Gram; Workload.from_matrix(W) keeps a W you have."
            )
        n = self.domain_size
        if self.n_queries * n > max_entries:
            raise ValueError(
                f"Workload '{self.name}' has m·n = {v.fmt_count(self.n_queries * n)} entries, more than "
                f"max_entries={max_entries}. Its error figures are available without W: use mmopt.evaluate."
            )
        v.check_allocation(self.n_queries * n, what=f"W of '{self.name}' ({self.n_queries}×{n})", caller=caller)
        return gf.BUILDERS[self.family](n)

    def __repr__(self) -> str:
        return (f"Workload(name={self.name!r}, n={self.domain_size}, m={v.fmt_count(self.n_queries)}, "
                f"family={self.family!r})")


def not_a_workload(value, *, name: str, caller: str, expected: str = "a Workload") -> TypeError:
    """The TypeError for a ``name`` of ``caller`` that is not a workload, with the remedy for a bare matrix.

    Examples
    --------
    >>> print(not_a_workload(np.ones((2, 3)), name="workload", caller="optimize"))
    The 'workload' parameter of optimize must be a Workload. Got ndarray. Wrap a query matrix with \
mmopt.Workload.from_matrix(W) (rows = queries, columns = cells).
    """
    remedy = ""
    if hasattr(value, "toarray"):  # scipy.sparse
        remedy = (" Wrap a sparse query matrix with mmopt.Workload.from_matrix(W) (held dense), or, on a large "
                  "domain, use an implicit workload of mmopt.workload.")
    elif isinstance(value, np.ndarray | list | tuple):
        remedy = " Wrap a query matrix with mmopt.Workload.from_matrix(W) (rows = queries, columns = cells)."
    return TypeError(f"The '{name}' parameter of {caller} must be {expected}. Got {type(value).__name__}.{remedy}")
