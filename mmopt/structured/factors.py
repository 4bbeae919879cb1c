"""Per-attribute numerics shared by the structured error, bound and mechanism code.

Notation: see README. For a strategy factor A (p×n) with SVD A = U S Vᵀ and numerical rank r (LAPACK's rule,
as :func:`mmopt.error.numerical_rank`), X⁺ = (AᵀA)⁺ = B Bᵀ with B = V_r S_r⁻¹ and A⁺ = V_r S_r⁻¹ U_rᵀ; the
null space of A is V[:, r:]. For a workload factor W, G = WᵀW = F Fᵀ with F = Wᵀ (when W is small) or
F = V diag(√λ) from eigh(G). Traces are taken as tr(G X⁺) = ‖BᵀF‖²_F, a sum of squares, so they are never
negative (a sum(G*M) can be, on a near-singular factor).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

import numpy as np
from scipy import linalg

from mmopt.dense import _queries
from mmopt.dense._strategy_core import Strategy
from mmopt.dense._workload_core import Workload
from mmopt.dense.profile import CHOLESKY_MAX_RELATIVE_ERROR
from mmopt.error import numerical_rank

# Use W itself as the Gram root when it has at most this many entries (exact for 0/1 predicate matrices).
_EXPLICIT_ROOT_ENTRIES = 10**6
# Build one row of a factor from its explicit matrix only up to this many entries.
_ROW_ENTRIES = 10**7


@dataclass(frozen=True, eq=False)
class FactorInverse:
    """Pseudo-inverse data of one strategy factor A: X⁺ = B Bᵀ, A⁺ = ``pinv``, null-space basis ``null``."""

    B: np.ndarray = field(repr=False)
    null: np.ndarray = field(repr=False)
    pinv: np.ndarray = field(repr=False)
    rank: int

    @property
    def profile(self) -> np.ndarray:
        return self.B @ self.B.T

    @property
    def certified(self) -> bool:
        """Whether sums of the profile's entries are accurate: n·eps·κ(AᵀA) ≤ 10⁻⁸, the rule of
        :mod:`mmopt.dense.profile` (B's columns are A's right singular vectors over its singular values)."""
        norms = np.sqrt(np.einsum("ij,ij->j", self.B, self.B))
        if norms.size == 0:
            return True
        kappa = (norms.max() / norms.min()) ** 2
        return self.B.shape[0] * np.finfo(float).eps * kappa <= CHOLESKY_MAX_RELATIVE_ERROR


def strategy_inverse(A: Strategy) -> FactorInverse:
    """SVD-based pseudo-inverse of one factor (exact rank handling, as mmopt.error's SVD path)."""
    M = A.matrix
    # Full U is only needed for a wide factor (p < n), where it is small; a tall one's Vt is already n×n.
    U, s, Vt = linalg.svd(M, full_matrices=M.shape[0] < M.shape[1], check_finite=False)
    r = numerical_rank(s, M.shape)
    B = Vt[:r].T / s[:r]
    return FactorInverse(B, Vt[r:].T.copy(), B @ U[:, :r].T, r)


def root_is_rows(W: Workload) -> bool:
    """Whether :func:`workload_root` returns W's own rows (exact), not an eigen-root of its Gram."""
    closed = W.matrix is None and W.family in ("identity", "total")
    return closed or (W.domain_size * W.n_queries <= _EXPLICIT_ROOT_ENTRIES and W.knows_rows)


def workload_root(W: Workload) -> np.ndarray:
    """F (n×k) with F Fᵀ = G = WᵀW (the full Gram, not G/m)."""
    n, m = W.domain_size, W.n_queries
    # W's own rows are a root when small enough, and always for I and 1ᵀ (no n×n eigh: minutes at 10⁴ values)
    if root_is_rows(W):
        return W.explicit_matrix().T
    lam, V = linalg.eigh(W.mean_gram * float(m), check_finite=False, driver="evd")
    keep = lam > n * np.finfo(float).eps * max(lam[-1], 0.0)
    return V[:, keep] * np.sqrt(lam[keep])


def workload_gram(W: Workload) -> np.ndarray:
    from mmopt.dense._strategy_core import _gram_of  # F Fᵀ as (Fᵀ)ᵀFᵀ: sparse when F is (an identity on 10⁴ values)
    return _gram_of(workload_root(W).T)


def singular_values(W: Workload) -> np.ndarray:
    """σ(W) = √λ(G), with mmopt's one rank rule: eigenvalues ≤ n·eps·λ_max are round-off and count as 0.

    Without the cut, √(round-off) ≈ 1e-8 per direction inflates Σσ — and with it every SVD bound built
    from it, which must stay a *lower* bound (total(n) has one singular value, √n, not n of them).
    """
    if W.matrix is None and W.family in ("identity", "total"):  # closed forms: I has n ones, 1ᵀ one √n
        n = W.domain_size
        return np.ones(n) if W.family == "identity" else np.concatenate([[math.sqrt(n)], np.zeros(n - 1)])
    lam = linalg.eigvalsh(workload_gram(W), check_finite=False, driver="evd")[::-1]
    lam = np.clip(lam, 0.0, None)
    lam[numerical_rank(lam, (len(lam), len(lam))):] = 0.0
    return np.sqrt(lam)


def row_stats(W: Workload) -> tuple[np.ndarray, np.ndarray]:
    """(‖q‖², 1ᵀq) over the distinct such pairs among W's rows (every pair is attained by a real row)."""
    n, fam = W.domain_size, W.family
    if W.matrix is None and fam in ("prefix", "all_range", "all_predicate"):
        L = np.arange(1, n + 1, dtype=float)  # 0/1 rows of every length 1..n occur
        return L, L
    if W.matrix is None and fam in ("identity", "total"):
        L = np.array([1.0 if fam == "identity" else float(n)])
        return L, L
    M = W.explicit_matrix()
    pairs = np.unique(np.stack([np.einsum("ij,ij->i", M, M), M.sum(axis=1)], axis=1), axis=0)
    return pairs[:, 0], pairs[:, 1]


def query_terms_max(W: Workload, M: np.ndarray) -> tuple[float, float, int | None]:
    """(max found, proven upper, argmax row or None) of w M wᵀ over W's rows (families: from M alone); for a
    Gram-only factor (None, tr(G M), None)."""
    if W.matrix is not None or W.family in ("identity", "total", "prefix", "all_range"):
        terms = _queries.per_query_terms(W, M) if not (W.matrix is None and W.family == "all_range") else None
        if terms is None:
            V = _queries.range_terms(M)[np.triu_indices(M.shape[0])]
            r = int(np.argmax(V))
            return float(V[r]), float(V[r]), r
        r = int(np.argmax(terms))
        return float(terms[r]), float(terms[r]), r
    found = _queries.max_term(W, M, None)
    if found is None:  # Gram-only: no row to rank, but each row's term is at most their sum tr(G M) (M ⪰ 0); it
        # raised here, and optimize(kron(from_gram(…), prefix(3)), method='residual') failed, needing no row at all
        G = W.mean_gram * float(W.n_queries)
        return None, max(float(np.sum(G * M)), 0.0), None
    return found[0], found[1], None


def factor_row(W: Workload, r: int) -> np.ndarray | None:
    """Row r of W (in explicit_matrix order), built without W for the closed-form families."""
    n = W.domain_size
    if W.matrix is not None:
        return W.matrix[r]
    cells = np.arange(n)
    if W.family == "identity":
        return (cells == r).astype(float)
    if W.family == "total":
        return np.ones(n)
    if W.family == "prefix":
        return (cells <= r).astype(float)
    if W.family == "all_range":
        a, b = np.triu_indices(n)
        return ((cells >= a[r]) & (cells <= b[r])).astype(float)
    if W.family != "gram" and W.n_queries * n <= _ROW_ENTRIES:
        return W.explicit_matrix()[r]
    return None


def content_key(A: Strategy) -> tuple:
    """A strategy factor's identity by content (shape and a digest of its read-only matrix): two equal factors built
    apart (``st.hierarchical(n)`` called twice) are one factor, as :func:`mmopt.save` stores them."""
    M = A.matrix
    return M.shape, hashlib.sha1(np.ascontiguousarray(M).tobytes()).digest()


class Cache:
    """Per-call memo of factor computations: strategy factors by content (their matrix is read-only),
    workload factors by identity (terms share factor objects)."""

    def __init__(self) -> None:
        self._store: dict = {}

    def get(self, fn, obj):
        same = (fn.__name__, "object", id(obj))  # this very object, seen before: no hash of its matrix again
        if same in self._store:
            return self._store[same][1]
        if isinstance(obj, Strategy):
            key = (fn.__name__, *content_key(obj))
        else:
            key = same
        if key not in self._store:
            self._store[key] = (obj, fn(obj))  # keep obj alive so its id is not reused
        self._store[same] = (obj, self._store[key][1])
        return self._store[key][1]
