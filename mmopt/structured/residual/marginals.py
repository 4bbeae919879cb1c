"""Weighted marginals measured from records: HDMM's M(θ) indexed by a downward closure, at any d.

Notation: see README and :mod:`mmopt.structured.residual.error`. A weighted-marginals strategy measures, for
every attribute set S of its support, θ_S·m_S (m_S the marginal counts on S). One record adds 1 to one cell
of every marginal, so Δ₁ = Σ_S θ_S and Δ₂ = ‖θ‖₂ exactly. Its Gram Σ_S θ_S² ⊗ᵢ(I if i∈S else J) is a scalar
on each residual subspace Q_T (:mod:`mmopt.multidim.marginals` for the {I, J} algebra): with X = N Σ_T ℓ_T Q_T,

    ℓ_T = Σ_{S ⊇ T} θ_S² / N_S,

so the unit error is Δ² Σ_T r_T ν_T / ℓ_T over the workload's closure (never 2ᵈ, never N). Under Laplace noise
this family (HDMM's OPT_M, McKenna et al., PVLDB 2018, §5) is far better than residual bases, whose L1 column
norms grow with nᵢ: on CPS 1988's 2-way marginals the Hölder residual allocation has 9.9× OPT_M's error.

**Least squares without x.** Aᵀy projected on Q_T is the broadcast of u_T = Σ_{S⊇T} θ_S·center_T(mean_{S∖T}
y_S) (center along the attributes of T, average along the rest of S), and X acts there as N ℓ_T, so the
least-squares marginal on A is

    M_A x̂ = Σ_{T ⊆ A} broadcast_A(u_T) / (N_A ℓ_T),

at the cost of the marginals themselves. Cell c of M_A puts on cell s of y_S the weight
θ_S Σ_{T⊆A∩S} ∏_{i∈T}([sᵢ = cᵢ] − 1/nᵢ) ∏_{i∈S∖T} (1/nᵢ) / (N_A ℓ_T), which depends on s only through
P = {i ∈ A∩S : sᵢ = cᵢ}: :func:`cell_weights` lists each value once with its multiplicity, for exact intervals
(:mod:`mmopt.answers.intervals`). Permuting the categories of an attribute maps cells to cells and leaves the
strategy unchanged, so every cell of a marginal has the same error law.
"""

from __future__ import annotations

import itertools
import math
import numbers
from dataclasses import dataclass, field

import numpy as np

from mmopt._base.guards import Unsupported
from mmopt._base.readonly import read_only
from mmopt.search._local_objectives import lbfgs
from mmopt.structured.residual import closure as cl
from mmopt.structured.residual.workload import MarginalWorkload

__all__ = ["WeightedMarginals", "cell_weights", "each_once", "from_implicit", "marginal_terms", "measure",
           "reconstruct_all", "solve", "spectrum", "support", "weighted_marginals"]


@dataclass(frozen=True, eq=False)
class WeightedMarginals:
    """θ_S·(marginal counts on S) for each attribute set S of ``subsets`` (sorted tuples), θ_S > 0."""

    shape: tuple[int, ...]
    subsets: tuple[tuple[int, ...], ...]
    weights: np.ndarray = field(repr=False)
    name: str = "weighted marginals"

    def __post_init__(self):
        # Δ₁ = Σθ and Δ₂ = ‖θ‖ hold for distinct sorted subsets only: a subset listed twice was measured with the
        # last θ for both copies (a dict by subset), so ((0, 1), (0, 1)) with θ = (1, 2) was released at Δ₁ = 3
        # where its columns reach 4 — and its estimates were off
        d = len(self.shape)
        for S in self.subsets:
            if (not isinstance(S, tuple) or any(isinstance(i, bool) or not isinstance(i, numbers.Integral) for i in S)
                    or list(S) != sorted(set(S)) or any(not 0 <= i < d for i in S)):
                raise ValueError(f"The 'subsets' parameter of WeightedMarginals must hold tuples of distinct attribute "
                                 f"indices in increasing order, each in 0..{d - 1}. Got {S!r}.")
        if len(set(self.subsets)) != len(self.subsets):
            twice = sorted({S for S in self.subsets if self.subsets.count(S) > 1})
            raise ValueError(f"The 'subsets' parameter of WeightedMarginals lists {twice} more than once. List each "
                             "marginal once, with one θ (two measurements at θ₁, θ₂ answer as one at √(θ₁² + θ₂²)).")
        # a negative θ made Δ₁ = Σθ too small: θ = (−1, 1, 1) released at Δ₁ = 1 where the columns reach 3, an ε
        # three times the one reported (the weighted_marginals factory drops θ ≤ 0; the class took anything)
        w = np.asarray(self.weights, dtype=float)
        if w.shape != (len(self.subsets),) or not np.all(np.isfinite(w)) or np.any(w <= 0):
            raise ValueError(f"The 'weights' parameter of WeightedMarginals must hold one finite θ > 0 per subset "
                             f"({len(self.subsets)}). Got {np.asarray(self.weights).tolist()!r:.80}. Drop a subset "
                             "rather than weighting it 0 or less.")
        object.__setattr__(self, "weights", read_only(w))  # Δ = Σθ or ‖θ‖ is charged from them: no edit in place

    def sensitivity(self, norm: str) -> float:
        """Δ₁ = Σθ or Δ₂ = ‖θ‖₂: every record adds 1 to one cell of each measured marginal (exact; θ > 0)."""
        w = np.abs(self.weights)
        return float(w.sum()) if norm == "l1" else float(np.linalg.norm(w))

    def to_implicit(self):
        """The same strategy as an :class:`mmopt.structured.ImplicitStrategy` (for evaluate, optimize, plot)."""
        from mmopt.structured.strategies import marginals_strategy
        return marginals_strategy(self.shape, dict(zip(self.subsets, self.weights.tolist(), strict=True)),
                                  name=self.name)

    def __repr__(self) -> str:
        return f"WeightedMarginals(name={self.name!r}, d={len(self.shape)}, marginals={len(self.subsets)})"


def weighted_marginals(shape, weights: dict, *, name: str = "weighted marginals") -> WeightedMarginals:
    """{S: θ_S} → a WeightedMarginals (zero weights dropped)."""
    kept = [(S, float(w)) for S, w in weights.items() if w > 0]
    # (0, 1) and (1, 0), one marginal under two keys: the shared check, as for plan's targets and measure's counts
    keys = cl.check_sets([S for S, _ in kept], shape, name="weights", caller="weighted_marginals", distinct=True)
    items = sorted(zip(keys, (w for _, w in kept), strict=True), key=lambda kv: (len(kv[0]), kv[0]))
    return WeightedMarginals(tuple(shape), tuple(S for S, _ in items), np.array([w for _, w in items]), name)


def from_implicit(strategy) -> WeightedMarginals:
    """An ImplicitStrategy whose factors are all identities or constant rows (HDMM's M(θ), what optimize returns
    for marginal workloads), as WeightedMarginals (copies of one marginal merged, θ² adding: the same Gram, another
    noise law); a ValueError naming the first other factor."""
    weights: dict = {}
    for S, w in marginal_terms(strategy):
        weights[S] = weights.get(S, 0.0) + w * w  # stacked copies of one marginal: θ² adds
    return weighted_marginals(strategy.shape, {S: math.sqrt(t) for S, t in weights.items()}, name=strategy.name)


def marginal_terms(strategy) -> list[tuple[tuple[int, ...], float]]:
    """(S, θ) per term of an ImplicitStrategy of identities and constant rows, copies of a marginal kept apart
    (each is measured with its own noise: the law of an answer's error needs them one by one)."""
    shape, out = strategy.shape, []
    for term in strategy.terms:
        w, S = float(term.weight), []
        for i, f in enumerate(term.factors):
            M = f.matrix
            if M.shape == (shape[i], shape[i]) and np.array_equal(M, np.eye(shape[i])):
                S.append(i)
            elif M.shape == (1, shape[i]) and M[0, 0] > 0 and np.all(M == M[0, 0]):
                w *= float(M[0, 0])
            else:
                raise ValueError(f"'{strategy.name}' has a factor on attribute {i} that is neither the identity nor a "
                                 "constant row, so its answers are not computable from marginal counts.")
        out.append((tuple(S), w))
    return out


def spectrum(strategy: WeightedMarginals, closure: cl.Closure) -> np.ndarray:
    """ℓ_T = Σ_{S⊇T} θ_S²/N_S for every member T of ``closure`` (module docstring)."""
    ell = np.zeros(len(closure))
    shape = strategy.shape
    for S, th in zip(strategy.subsets, strategy.weights, strict=True):
        live = tuple(i for i in S if shape[i] > 1)
        share = th * th / cl.cells(shape, S)
        for k in range(len(live) + 1):
            for T in itertools.combinations(live, k):
                at = closure.index.get(T)
                if at is not None:
                    ell[at] += share
    return ell


def each_once(W: MarginalWorkload) -> WeightedMarginals:
    """Every maximal marginal of the workload measured once (θ = 1): the baseline a user would build."""
    return weighted_marginals(W.shape, dict.fromkeys(cl.maximal(W.sets), 1.0), name="each marginal once")


def _objective(W: MarginalWorkload, inc, cells: np.ndarray):
    """θ ↦ (Δ₁² Σ r ν/ℓ, gradient); inc[S, T] = [T ⊆ S] (support × W's closure), cells = N_S per support set."""
    rv = W.closure.multiplicity * W.eigenvalues
    need = rv > 0

    def f(theta):
        ell = inc.T @ (theta * theta / cells)
        if np.any(ell[need] <= 0):
            return np.inf, np.zeros_like(theta)
        safe = np.where(need, ell, 1.0)
        inv = np.where(need, rv / safe, 0.0)
        U, D = float(inv.sum()), float(theta.sum())
        grad = 2 * D * U - D * D * (2 * theta / cells) * (inc @ (inv / safe))
        return D * D * U, grad
    return f


#: Flops the weighted-marginals search may spend (~1 CPU s): restarts and evaluations are cut to fit.
SEARCH_WORK = 1e9
#: Candidate supersets (unions of two maximal workload sets) are added to the support up to this many: OPT_M's
#: optimum on CPS 1988's 2-way marginals measures six 3- and 4-way marginals and only two 2-way ones.
MAX_UNIONS = 4096


def support(W: MarginalWorkload) -> tuple[tuple[int, ...], ...]:
    """The sets θ may weight: W's closure, plus unions of two maximal workload sets (≤ :data:`MAX_UNIONS`)."""
    shape = W.shape
    top = sorted(cl.maximal([tuple(i for i in A if shape[i] > 1) for A in W.sets]))
    found = set(W.closure.members)
    unions = set()
    if len(top) * (len(top) - 1) // 2 <= MAX_UNIONS:
        unions = {tuple(sorted(set(a) | set(b))) for a, b in itertools.combinations(top, 2)}
    return tuple(sorted(found | unions, key=lambda S: (len(S), S)))


def _incidence(sets, closure: cl.Closure):
    from scipy import sparse
    rows, cols = [], []
    for r, S in enumerate(sets):
        for k in range(len(S) + 1):
            for T in itertools.combinations(S, k):
                at = closure.index.get(T)
                if at is not None:
                    rows.append(r)
                    cols.append(at)
    return sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(sets), len(closure)))


def solve(W: MarginalWorkload, *, restarts: int = 50, seed: int = 0, max_iterations: int = 2000):
    """The best weighted marginals for Laplace noise (L1) over :func:`support`: (strategy, unit error).

    The unit error is Δ₁²·Σ_T r_T ν_T/ℓ_T (multiply by 2/ε² for the expected total squared error).
    Non-convex (HDMM's OPT_M landscape): L-BFGS-B from "each marginal once" and from ``restarts`` uniform
    random starts (seeded: the strategy never depends on data, so a fixed seed costs no privacy); the best
    point evaluated is kept, so the result is never worse than each marginal once. A heuristic. Restarts and
    evaluations are cut to :data:`SEARCH_WORK` (deterministic: a work count, not a clock).
    """
    C = W.closure
    sets = support(W)
    cells = np.array([float(cl.cells(W.shape, S)) for S in sets])
    inc = _incidence(sets, C)
    f = _objective(W, inc, cells)
    # a work budget, not a clock: each evaluation costs ~4·nnz; at most SEARCH_WORK in all, so a closure of
    # 20,876 sets (50 binary attributes, all 3-way marginals) runs ~10 starts instead of 201 (73 CPU s)
    evaluations = max(100, int(SEARCH_WORK / (4.0 * max(inc.nnz, 1))))
    restarts = min(restarts, max(0, evaluations // 200 - 1))
    per_run = max(50, evaluations // (restarts + 1))
    where = {S: k for k, S in enumerate(sets)}
    base = each_once(W)
    start = np.full(len(sets), 1e-3)
    for S in base.subsets:
        start[where[tuple(i for i in S if W.shape[i] > 1)]] = 1.0
    gen = np.random.default_rng(seed)
    best_theta, best = start, f(start)[0]
    for z0 in [start] + [gen.uniform(0, 1, len(sets)) for _ in range(restarts)]:
        z0 = z0 / z0.sum()
        f0 = f(z0)[0]
        theta, value, _, _ = lbfgs(f, z0, f0 if np.isfinite(f0) and f0 > 0 else 1.0, max_iterations, 1e-10,
                                   max_evaluations=per_run)
        if value < best:
            best_theta, best = theta, value
    best_theta = best_theta / best_theta.sum()
    pruned = np.where(best_theta > 1e-9, best_theta, 0.0)
    if f(pruned)[0] <= f(best_theta)[0] * (1 + 1e-12):
        best_theta = pruned
    A = weighted_marginals(W.shape, dict(zip(sets, best_theta, strict=True)), name="weighted marginals")
    return A, float(f(best_theta)[0])


def measure(strategy: WeightedMarginals, counts: dict) -> dict:
    """{S: θ_S·m_S}: the exact (noise-free) answers, from counts covering every S (summed down as needed)."""
    from mmopt.structured.residual.reconstruct import _sources
    m = _sources(strategy.subsets, counts, "release_marginals")
    return {S: th * m[S].astype(np.float64) for S, th in zip(strategy.subsets, strategy.weights, strict=True)}


def _project(y: np.ndarray, S: tuple, T: tuple) -> np.ndarray:
    """center_T(mean_{S∖T} y), a T-array (y over S, T ⊆ S)."""
    drop = tuple(p for p, i in enumerate(S) if i not in T)
    u = y.mean(axis=drop) if drop else y
    for ax in range(u.ndim):
        u = u - u.mean(axis=ax, keepdims=True)
    return u


def reconstruct_all(strategy: WeightedMarginals, y: dict, sets) -> dict:
    """{A: least-squares marginal on A} from noisy y_S = θ_S m_S + z_S (module docstring)."""
    shape = strategy.shape
    sets = tuple(dict.fromkeys(sets))
    closure = cl.downward_closure(shape, sets)
    ell = spectrum(strategy, closure)
    unmeasured = [T for T in closure.members if ell[closure.index[T]] == 0 and all(shape[i] > 1 for i in T)]
    if unmeasured:  # no measured set contains T: its residual has no estimate (it raised a bare IndexError)
        raise Unsupported(f"reconstruct_all: strategy '{strategy.name}' does not support the marginals asked: no "
                         f"measured set contains {unmeasured[0]}. Measure a superset of each marginal.")
    u = {}
    for T in closure.members:
        acc = 0.0
        for S, th in zip(strategy.subsets, strategy.weights, strict=True):
            if set(T) <= set(S):
                acc = acc + th * _project(y[S], S, T)
        u[T] = acc
    out = {}
    for A in sets:
        NA = float(cl.cells(shape, A))
        est = np.zeros(tuple(shape[i] for i in A))
        for k in range(len(A) + 1):
            for T in itertools.combinations(A, k):
                at = closure.index.get(T)
                if at is None:
                    continue
                idx = tuple(slice(None) if i in T else None for i in A)
                est = est + np.asarray(u[T])[idx] / (NA * ell[at])
        out[A] = est
    return out


def cell_weights(strategy: WeightedMarginals, A: tuple, ell_of: dict) -> tuple[np.ndarray, np.ndarray]:
    """(values, counts): the weights cell 0 of M_A puts on the measured entries, each distinct value with its
    multiplicity (module docstring); ``ell_of`` maps a closure member T to ℓ_T."""
    shape = strategy.shape
    NA = float(cl.cells(shape, A))
    values, counts = [], []
    for S, th in zip(strategy.subsets, strategy.weights, strict=True):
        shared = tuple(i for i in S if i in A)
        rest = math.prod(shape[i] for i in S if i not in A)
        for k in range(len(shared) + 1):
            for P in itertools.combinations(shared, k):  # the attributes of A∩S where s agrees with cell 0
                w = 0.0
                for j in range(len(shared) + 1):
                    for T in itertools.combinations(shared, j):
                        if T not in ell_of:
                            continue
                        term = 1.0 / (NA * ell_of[T])
                        for i in T:
                            term *= (1.0 if i in P else 0.0) - 1.0 / shape[i]
                        for i in S:
                            if i not in T:
                                term /= shape[i]
                        w += term
                values.append(th * w)
                counts.append(rest * math.prod(1 if i in P else shape[i] - 1 for i in shared))
    return np.array(values), np.array(counts, dtype=np.float64)
