"""Workloads W (m×n) of linear counting queries, held as their Gram matrix G = WᵀW and query count m.

Notation: see README. Error depends on W only through G (and on m for per-query figures), so a
:class:`Workload` *is* a Gram matrix plus m; the explicit W is optional. Internally the Gram is stored
per query, G/m, with m an exact Python int: all 2ⁿ−1 predicate queries have G = 2ⁿ⁻²(I+J), which
overflows float64 past n≈1000, while G/m ≈ (I+J)/4 stays finite for every n.

Query families with a closed form (``identity``, ``total``, ``prefix``, ``all_range``,
``all_predicate``) keep their family name, so that :mod:`mmopt.error` computes per-query variances and
the maximum over all queries from the error profile alone, never materialising W.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from mmopt import _validation as v

FAMILIES = ("matrix", "gram", "identity", "total", "prefix", "all_range", "all_predicate")
# Explicit W is built on request only up to this many entries (≈ 0.8 GB of float64).
MAX_EXPLICIT_ENTRIES = 10**8


@dataclass(frozen=True, eq=False)
class Workload:
    """A workload of m linear queries over a domain of n cells.

    Build one with :meth:`from_matrix`, :meth:`from_gram` or a family constructor
    (:func:`all_range`, :func:`prefix`, ...). Attributes are read-only.

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
        v.check_choice(self.family, name="family", caller="Workload", choices=FAMILIES)
        v.check_int(self.n_queries, name="n_queries", caller="Workload", low=1)

    # -- constructors -------------------------------------------------------------------------------
    @classmethod
    def from_matrix(cls, matrix, *, name: str = "workload") -> Workload:
        """Workload with explicit query matrix W (m×n); G = WᵀW is computed."""
        W = v.check_matrix(matrix, name="matrix", caller="Workload.from_matrix")
        if not np.any(W):
            raise ValueError("The 'matrix' parameter of Workload.from_matrix must have a non-zero entry.")
        m = W.shape[0]
        return cls((W.T @ W) / m, m, name, W, "matrix")

    @classmethod
    def from_gram(cls, gram, *, n_queries: int, name: str = "workload") -> Workload:
        """Workload known only through G = WᵀW (n×n, symmetric PSD) and its query count m."""
        caller = "Workload.from_gram"
        m = v.check_int(n_queries, name="n_queries", caller=caller, low=1)
        G = v.check_gram(gram, caller=caller, remedy=" Pass W.T @ W, or use Workload.from_matrix(W).")
        if not np.any(G):
            raise ValueError(f"The 'gram' parameter of {caller} must be non-zero.")
        return cls(G / m, m, name, None, "gram")

    # -- derived quantities -------------------------------------------------------------------------
    @property
    def domain_size(self) -> int:
        """n, the number of cells of the data vector."""
        return self.mean_gram.shape[0]

    @property
    def gram(self) -> np.ndarray:
        """G = WᵀW. Raises OverflowError when it exceeds float64 (use ``mean_gram``)."""
        m = _as_float(self.n_queries, f"Workload '{self.name}'.gram")
        with np.errstate(over="ignore"):
            G = self.mean_gram * m
        if not np.all(np.isfinite(G)):
            raise OverflowError(
                f"Workload '{self.name}' has a Gram matrix beyond float64 range (m = {_fmt(self.n_queries)}). "
                "Use its 'mean_gram' (G/m) and per-query error figures instead."
            )
        return G

    def explicit_matrix(self, *, max_entries: int = MAX_EXPLICIT_ENTRIES) -> np.ndarray:
        """Return W, building it from the family's definition when it is not stored.

        Raises ValueError for Gram-only workloads and when m·n exceeds ``max_entries``.
        """
        if self.matrix is not None:
            return self.matrix
        if self.family == "gram":
            raise ValueError(
                f"Workload '{self.name}' was built from its Gram matrix only, so W is unknown. "
                "Use Workload.from_matrix(W) to keep W."
            )
        n = self.domain_size
        if self.n_queries * n > max_entries:
            raise ValueError(
                f"Workload '{self.name}' has m·n = {_fmt(self.n_queries * n)} entries, more than "
                f"max_entries={max_entries}. Its error figures are available without W: use mmopt.evaluate."
            )
        return _BUILDERS[self.family](n)

    def __repr__(self) -> str:
        return (f"Workload(name={self.name!r}, n={self.domain_size}, m={_fmt(self.n_queries)}, "
                f"family={self.family!r})")


def _fmt(m: int) -> str:
    return str(m) if m < 10**12 else f"~1e{math.log10(m):.1f}"


def _as_float(m: int, what: str) -> float:
    try:
        return float(m)
    except OverflowError:
        return math.inf


# -- explicit builders (used for tests and small n) --------------------------------------------------
def _ranges_matrix(n: int) -> np.ndarray:
    a, b = np.triu_indices(n)  # row-major: a ascending, then b >= a (matches mmopt.error's order)
    cells = np.arange(n)
    return ((cells >= a[:, None]) & (cells <= b[:, None])).astype(np.float64)


def _predicate_matrix(n: int) -> np.ndarray:
    codes = np.arange(1, 2**n, dtype=np.int64)  # row k-1 is the binary code of k, bit j = cell j
    return ((codes[:, None] >> np.arange(n)) & 1).astype(np.float64)


_BUILDERS = {
    "identity": lambda n: np.eye(n),
    "total": lambda n: np.ones((1, n)),
    "prefix": lambda n: np.tril(np.ones((n, n))),
    "all_range": _ranges_matrix,
    "all_predicate": _predicate_matrix,
}


# -- family constructors -----------------------------------------------------------------------------
def identity(n: int) -> Workload:
    """All n unit counts, W = Iₙ (G = I, m = n)."""
    n = v.check_int(n, name="n", caller="identity")
    return Workload(np.eye(n) / n, n, f"identity({n})", None, "identity")


def total(n: int) -> Workload:
    """The single query summing all cells, W = 1ᵀ (G = J, m = 1)."""
    n = v.check_int(n, name="n", caller="total")
    return Workload(np.ones((n, n)), 1, f"total({n})", None, "total")


def prefix(n: int) -> Workload:
    """The n prefix sums x₁+…+x_k; G_ij = n − max(i, j) + 1 (1-indexed)."""
    n = v.check_int(n, name="n", caller="prefix")
    i = np.arange(1, n + 1)
    G = (n - np.maximum.outer(i, i) + 1).astype(np.float64)
    return Workload(G / n, n, f"prefix({n})", None, "prefix")


def all_range(n: int) -> Workload:
    """All n(n+1)/2 interval queries W_R (§6.2); G_ij = min(i, j)·(n − max(i, j) + 1), 1-indexed.

    Examples
    --------
    >>> W = all_range(3)
    >>> W.n_queries, W.gram.tolist()
    (6, [[3.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 3.0]])
    """
    n = v.check_int(n, name="n", caller="all_range")
    i = np.arange(1, n + 1)
    G = (np.minimum.outer(i, i) * (n - np.maximum.outer(i, i) + 1)).astype(np.float64)
    m = n * (n + 1) // 2
    return Workload(G / m, m, f"all_range({n})", None, "all_range")


def all_predicate(n: int) -> Workload:
    """All 2ⁿ−1 non-empty 0/1 predicate queries W_{0/1} (§6.2); G = 2ⁿ⁻²(I + J).

    Stored per query, G/m = (I + J)/(4(1 − 2⁻ⁿ)), finite for every n; m = 2ⁿ − 1 exactly.
    (The paper counts 2ⁿ queries including the empty one, which adds nothing to G.)
    """
    n = v.check_int(n, name="n", caller="all_predicate")
    m = 2**n - 1
    scale = 1.0 / (4.0 * -math.expm1(-n * math.log(2.0)))  # 2^(n-2)/(2^n-1) without overflow
    return Workload(scale * (np.eye(n) + np.ones((n, n))), m, f"all_predicate({n})", None, "all_predicate")


def random_range(n: int, m: int, *, seed=None) -> Workload:
    """m interval queries with endpoints drawn uniformly (a ≤ b), reproducible from ``seed``."""
    n = v.check_int(n, name="n", caller="random_range")
    m = v.check_int(m, name="m", caller="random_range")
    rng = np.random.default_rng(seed)
    ends = np.sort(rng.integers(0, n, size=(m, 2)), axis=1)
    cells = np.arange(n)
    W = ((cells >= ends[:, :1]) & (cells <= ends[:, 1:])).astype(np.float64)
    return Workload.from_matrix(W, name=f"random_range({n},{m})")


def marginals(shape, k: int) -> Workload:
    """All k-way marginals over a domain of the given shape (cells in C order, n = ∏ shape).

    The marginal on attributes S is W_S = ⊗ᵢ (I if i ∈ S else 1ᵀ), so its Gram is ⊗ᵢ (I or J).
    """
    caller = "marginals"
    shape = tuple(v.check_int(d, name="shape", caller=caller) for d in np.atleast_1d(shape).tolist())
    k = v.check_int(k, name="k", caller=caller, low=0, high=len(shape))
    parts = []
    for S in itertools.combinations(range(len(shape)), k):
        factors = [identity(d) if i in S else total(d) for i, d in enumerate(shape)]
        parts.append(_kron_all(factors))
    out = stack(parts)
    return _renamed(out, f"marginals({'x'.join(map(str, shape))},k={k})")


def kron(first: Workload, second: Workload, *, name: str | None = None) -> Workload:
    """Kronecker product W₁ ⊗ W₂ (queries on a product domain): G = G₁ ⊗ G₂, m = m₁·m₂."""
    for label, w in (("first", first), ("second", second)):
        if not isinstance(w, Workload):
            raise TypeError(f"The '{label}' parameter of kron must be a Workload. Got {type(w).__name__}.")
    m = first.n_queries * second.n_queries
    W = None
    small = m * first.domain_size * second.domain_size <= MAX_EXPLICIT_ENTRIES
    if small and _knows_matrix(first) and _knows_matrix(second):
        W = np.kron(first.explicit_matrix(), second.explicit_matrix())
    family = "matrix" if W is not None else "gram"
    return Workload(np.kron(first.mean_gram, second.mean_gram), m,
                    name or f"{first.name}⊗{second.name}", W, family)


def stack(workloads, weights=None, *, name: str | None = None) -> Workload:
    """Weighted union [w₁W₁; w₂W₂; …]: G = Σ wᵢ² Gᵢ, m = Σ mᵢ (queries of all parts, weighted)."""
    caller = "stack"
    workloads = list(workloads)
    if not workloads or not all(isinstance(w, Workload) for w in workloads):
        raise TypeError(f"The 'workloads' parameter of {caller} must be a non-empty list of Workload objects.")
    n = workloads[0].domain_size
    for w in workloads:
        v.check_same_domain(n, w.domain_size, caller=caller)
    weights = np.ones(len(workloads)) if weights is None else v.check_vector(
        weights, name="weights", caller=caller, length=len(workloads))
    if np.any(weights == 0):
        raise ValueError(f"The 'weights' parameter of {caller} must be non-zero. Drop the workload instead.")
    m = sum(w.n_queries for w in workloads)
    # Exact rational shares mᵢ/m, so that 2ⁿ-sized parts mix correctly with small ones.
    G = sum(float(Fraction(w.n_queries, m)) * c**2 * w.mean_gram for w, c in zip(workloads, weights, strict=True))
    W = None
    if m * n <= MAX_EXPLICIT_ENTRIES and all(_knows_matrix(w) for w in workloads):
        W = np.vstack([c * w.explicit_matrix() for w, c in zip(workloads, weights, strict=True)])
    label = name or "+".join(w.name for w in workloads)
    return Workload(G, m, label, W, "matrix" if W is not None else "gram")


def _knows_matrix(w: Workload) -> bool:
    return w.matrix is not None or w.family != "gram"


def _kron_all(parts: list[Workload]) -> Workload:
    out = parts[0]
    for p in parts[1:]:
        out = kron(out, p)
    return out


def _renamed(w: Workload, name: str) -> Workload:
    return Workload(w.mean_gram, w.n_queries, name, w.matrix, w.family)
