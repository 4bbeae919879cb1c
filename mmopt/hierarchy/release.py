"""Release grouping sets over hierarchies: OpenDP noise on the strategy's measurements, then exact least squares.

Notation: see README, :mod:`mmopt.hierarchy.basis` and :mod:`mmopt.hierarchy.nodes`. The guarantee is that of
:func:`mmopt.release`: (ε, δ)-DP (Gaussian noise) for adding or removing one record of the data whose histogram is
``x``, with W and A fixed independently of the data; Δ₂ is the strategy's exact closed form (the largest diagonal
of X), rounded upwards. The measurements are

* residual family: y_c = √x_c Q_cᵀ x + z (coefficients of x in the adapted orthonormal basis), whose least-squares
  estimate is x̂ = Σ_c Q_c y_c/√x_c;
* node family: y_{U,h} = √z_{U,h} (1_h ⊗ Q_U)ᵀ x + z (node totals of every component of the other attributes),
  whose least-squares node totals come from the same two tree passes as their variances (a Gaussian tree model:
  Kalman smoothing on a tree), one column per coefficient of U.

Answers and their variances (σ²/Δ₂² times the exact unit variances) are post-processing. Both families'
measurements are computed with their float64 rounding bounded and charged in d_in (:mod:`mmopt.hierarchy.charged`,
about 9.5·10⁻⁷ of Δ; the node family's node sums along the tree first, exact), so ``x`` must hold whole counts of at
most MAX_RECORDS records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from mmopt._base.opendp import finite, measure
from mmopt._base.probe import probe_histogram
from mmopt.dense.exact_answers import check_histogram
from mmopt.hierarchy import basis as hb
from mmopt.hierarchy import charged as hcharged
from mmopt.hierarchy import nodes as hn
from mmopt.hierarchy.strategy import HierarchyStrategy, _check_pair, unit_variances
from mmopt.hierarchy.workload import HierarchyWorkload
from mmopt.privacy import Privacy
from mmopt.structured.charged_answers import charged_sensitivity
from mmopt.structured.release import upper_sensitivity


@dataclass(frozen=True, eq=False)
class HierarchyRelease:
    """One release: ``answers[s]`` and ``variances[s]`` are tensors over grouping set s's groups (attribute order)."""

    answers: list = field(repr=False)
    variances: list = field(repr=False)
    noise_scale: float
    sensitivity: float
    verified_loss: object
    family: str
    measurements: np.ndarray = field(repr=False)
    #: per set, the exact counts of :func:`mmopt._base.probe.probe_histogram` over its groups (what a table checks
    #: its workload against); None for a release built by hand
    probe: list | None = field(default=None, repr=False)
    # what every release output says (OpenDP's noise, least squares), as an OrbitRelease's: the command line's report
    # reads them, and an orbit plan of grouping sets is now released as this class
    path: str = "release"
    reconstruction: object = None

    @property
    def noise(self) -> str:
        """Always "gaussian" (the family's exact L2 sensitivity). Read by :meth:`mmopt.Accountant.release` to settle
        the ledger: without it that release raised AttributeError after the draw, and the noisy answers were lost."""
        return "gaussian"


def level_sums(h, T: np.ndarray, axis: int, level: int) -> np.ndarray:
    """Sums of T over the level-``level`` groups along ``axis``."""
    X = np.moveaxis(T, axis, 0)
    out = np.zeros((h.n_groups[level], *X.shape[1:]))
    np.add.at(out, h.groups[level], X)
    return np.moveaxis(out, 0, axis)


def release(W: HierarchyWorkload, A, x, privacy: Privacy, *, noise_scale: float | None = None,
            caller: str = "release") -> HierarchyRelease:
    """Release every grouping set of ``W`` from the histogram ``x`` (shape ``W.shape``) with strategy ``A``;
    refusals name ``caller`` (release_grouping_sets and mmopt.sql come through here)."""
    if not isinstance(privacy, Privacy) or privacy.noise != "gaussian":
        from mmopt.hierarchy.nodes import NodeStrategy
        from mmopt.hierarchy.strategy import HierarchyStrategy
        # a dense Strategy (auto's, on small grouping sets) was told "for a hierarchy strategy" (a helper's audit)
        other = "" if isinstance(A, HierarchyStrategy | NodeStrategy) else (
            f" The strategy is a {type(A).__name__}: release it on the grouping sets' union of Kronecker products, "
            f"{caller}(W.to_implicit(), A, x, privacy), which takes Laplace noise.")
        raise ValueError(f"The 'privacy' parameter of {caller} must be a Privacy with delta > 0 for grouping sets "
                         f"over hierarchies (Gaussian noise at the strategy's exact L2 sensitivity). Got "
                         f"{privacy!r}.{other}")
    x = np.asarray(x, dtype=float)
    if x.shape == (math.prod(W.shape),) and len(W.shape) > 1:  # flat, cells in C order, as every other family
        x = x.reshape(W.shape)
    if x.shape != W.shape:
        raise ValueError(f"The 'x' parameter of {caller} must be a finite histogram of shape {W.shape} (one count per "
                         f"cell), or flat ({math.prod(W.shape)},). Got shape {x.shape}.")
    if not np.all(np.isfinite(x)):  # said apart: "must be of shape (6, 2) … Got shape (6, 2)" hid the NaN (an audit)
        raise ValueError(f"The 'x' parameter of {caller} must hold finite counts. Got NaN or infinite entries.")
    check_histogram(x.ravel(), caller)  # whole counts ≥ 0, at most MAX_RECORDS records: what Δ and the charge assume
    m = measurements(W, A, caller=caller)
    refuse_unmeasured(m, caller)
    Ax = finite(m.answer(x), "the strategy answers A x", caller)  # refused before any noise is drawn
    y, scale, loss = measure(Ax, m.sensitivity, privacy, noise_scale=noise_scale, caller=caller)
    return replace(m.released(y, scale, loss), probe=probe_counts(W))


def probe_counts(W: HierarchyWorkload) -> list:
    """Per grouping set, the counts of the probe histogram over its groups (unweighted, as the answers)."""
    return set_sums(W, probe_histogram(math.prod(W.shape)).reshape(W.shape))


def set_sums(W: HierarchyWorkload, T: np.ndarray) -> list:
    """Per grouping set of ``W``, the sums of the cell tensor ``T`` over its groups (a tensor per set)."""
    out = []
    for s in W.sets:
        S = T
        for i, (h, a) in enumerate(zip(W.attributes, s, strict=True)):
            S = level_sums(h, S, i, a)
        out.append(S)
    return out


@dataclass(frozen=True, eq=False)
class Measurements:
    """The strategy's side of a release, built without data: ``answer(x)`` = A x (a vector), ``finish(y)`` the
    least-squares answers of every grouping set from noisy y, ``unit`` their variances at unit noise per
    Δ₂ = 1, ``exact`` the strategy's Δ₂ and ``sensitivity`` it rounded upwards (the release's d_in), ``size`` the
    number of measurements (the length of A x)."""

    answer: object = field(repr=False)
    finish: object = field(repr=False)
    unit: list = field(repr=False)
    exact: float
    sensitivity: float
    family: str
    size: int

    def released(self, y: np.ndarray, scale: float, loss) -> HierarchyRelease:
        """The :class:`HierarchyRelease` of noisy measurements ``y`` drawn at ``scale`` (post-processing)."""
        factor = scale * scale / (self.exact * self.exact)
        return HierarchyRelease(self.finish(y), [factor * u for u in self.unit], scale, self.sensitivity, loss,
                                self.family, y)


def refuse_unmeasured(m: Measurements, caller: str) -> None:
    """ValueError, before any data is read or noise drawn, when a grouping set asks what the strategy does not
    measure (an infinite unit variance): its least-squares answer would be a silent 0."""
    if not all(np.isfinite(u).all() for u in m.unit):
        raise ValueError(f"{caller}: a grouping set asks a level the strategy does not measure. Optimise the "
                         "strategy for these grouping sets (omit 'strategy', or mmopt.optimize(workload)).")


def measurements(W: HierarchyWorkload, A, *, caller: str = "measurements") -> Measurements:
    """:class:`Measurements` of strategy ``A`` (a HierarchyStrategy, NodeStrategy or dense Strategy) for ``W``."""
    from mmopt.dense._strategy_core import Strategy
    if isinstance(A, Strategy):  # optimize's "auto" on small irregular grouping sets (mmopt.hierarchy.dense_release)
        from mmopt.hierarchy.dense_release import dense_measurements
        answer, finish, unit, Delta, d_in, size = dense_measurements(W, A, set_sums, caller=caller)
        return Measurements(answer, finish, unit, Delta, d_in, "dense", size)  # A x's rounding charged in d_in
    if not isinstance(A, HierarchyStrategy | hn.NodeStrategy):  # before A.sensitivity(): a raw AttributeError
        raise TypeError(f"The 'strategy' parameter of {caller} must be a HierarchyStrategy, NodeStrategy or dense "
                        "Strategy (e.g. mmopt.optimize(workload).strategy for grouping sets), or None for the "
                        "optimised one; the OrbitStrategy mmopt.plan returns releases through mmopt.release or "
                        f"release_grouping_sets. Got {type(A).__name__}.")
    Delta = A.sensitivity()
    d_in = upper_sensitivity(Delta, caller=caller)
    if isinstance(A, HierarchyStrategy):
        _check_pair(A, W)  # before _residual indexes its weights by W's components (a raw IndexError)
        answer, finish, size, charged_d_in = _residual(W, A, d_in)
        return Measurements(answer, finish, unit_variances(A, _unweighted(W)), Delta, charged_d_in, "residual", size)
    answer, finish, size, charged_d_in = _nodes(W, A, d_in)  # a NodeStrategy
    return Measurements(answer, finish, hn.node_variances(A, _unweighted(W)), Delta, charged_d_in, "nodes", size)


def _unweighted(W: HierarchyWorkload) -> HierarchyWorkload:
    """W with every weight 1: the released answers are the group totals themselves, while the workload's queries
    (and so unit_variances) carry each set's weight w_s — their variances were reported w_s² too large (3·total:
    9×); dividing w_s² back out underflowed to 0/0 below w_s ~ 10⁻¹⁵⁴."""
    return replace(W, weights=np.ones(len(W.sets)))


def _residual(W, A, d_in: float):
    """(answer, finish, size, d_in charged): the measurements computed with their rounding bounded
    (:mod:`mmopt.hierarchy.charged`), and d_in·(1 + c·(2N + 1)) + 2√size·η from the strategy alone."""
    attrs = W.attributes
    xw = A.weights[np.ix_(*[hb.basis(h).component_of for h in attrs])]
    on = xw > 0
    root = np.sqrt(xw[on])
    coefs = [hcharged.coefficients(h) for h in attrs]
    c, eta = hcharged.charge(coefs, float(root.max(initial=0.0)))  # the charge never sees the data
    size = int(on.sum())
    charged_d_in = charged_sensitivity(d_in, c, eta, "l2", size)

    def answer(x):
        return hcharged.measure(coefs, root, on, x)

    def finish(y):
        C = np.zeros(W.shape)
        C[on] = y / root
        xhat = C
        for i, h in enumerate(attrs):
            xhat = hb.along(hb.synthesis, h, xhat, i)
        return set_sums(W, xhat)

    return answer, finish, size, charged_d_in


def _nodes(W, A, d_in: float):
    """(answer, finish, size, d_in charged) of a NodeStrategy: the measurements computed with their rounding bounded
    (:func:`mmopt.hierarchy.charged.measure_nodes`: node sums along the tree first, exact), and
    d_in·(1 + c·(2N + 1)) + 2√size·η from the strategy alone (the other attributes' constants and max √z)."""
    lay, k = A.layout, A.layout.tree
    attrs = W.attributes
    h = attrs[k]
    others = [i for i in range(len(attrs)) if i != k]
    grid = np.ix_(*[hb.basis(attrs[i]).component_of for i in others]) if others else ()
    shape = tuple(int(hb.basis(attrs[i]).component_of.max()) + 1 for i in others)
    flat = np.ravel_multi_index(np.broadcast_arrays(*grid), shape).ravel() if others else np.zeros(1, dtype=int)
    cols = [np.flatnonzero(flat == c) for c in lay.components]
    coefs = [hcharged.coefficients(attrs[i]) for i in others]
    roots = [[np.sqrt(zl) for zl in z] for z in A.weights]
    top = max((float(r.max(initial=0.0)) for rs in roots for r in rs), default=0.0)
    c, eta = hcharged.charge(coefs, top)  # the charge never sees the data
    size = sum(zl.size * cols[u].size for u, z in enumerate(A.weights) for zl in z)

    def answer(x):
        return hcharged.measure_nodes(h, k, coefs, roots, cols, x)

    def finish(y):
        at, est = 0, []
        for u, z in enumerate(A.weights):
            obs = []
            for zl, root in zip(z, roots[u], strict=True):  # the √z the measurements were weighted by
                size = zl.size * cols[u].size
                obs.append(y[at:at + size].reshape(zl.size, cols[u].size) / root[:, None])
                at += size
            est.append(_smooth(h, list(z), obs))
        out = []
        others_shape = tuple(attrs[i].n for i in others)
        for s in W.sets:
            a = s[k]
            E = np.zeros((h.n_groups[a], int(np.prod(others_shape))))
            for u in range(len(A.weights)):
                E[:, cols[u]] += _at_level(h, est[u], a)
            T = E.reshape((h.n_groups[a], *others_shape))
            for j, i in enumerate(others, start=1):
                T = hb.along(hb.synthesis, attrs[i], T, j)
                T = level_sums(attrs[i], T, j, s[i])
            out.append(np.moveaxis(T, 0, k))
        return out

    return answer, finish, size, charged_sensitivity(d_in, c, eta, "l2", size)


def _at_level(h, est: list, a: int):
    """A component's estimates at level a of the tree. Below its deepest measured level T (a strategy planned for
    coarser sets, passed for these) a level-a group that is its level-T ancestor's only descendant is answered by
    that ancestor; the rows were left at exactly 0 there, with finite standard errors (a helper's probe). Where the
    groups split their ancestors the component is not measured at level a: 0, which the query's variance allows
    only when the component cancels in it (the other attributes' sums), else it was refused before the noise."""
    from mmopt.hierarchy.components import ancestor_at
    if a < len(est):
        return est[a]
    up = ancestor_at(h, a, len(est) - 1)
    return est[-1][up] if np.unique(up).size == up.size else 0.0


def _group_rows(parent: np.ndarray, S: np.ndarray, groups: int) -> np.ndarray:
    out = np.zeros((groups, S.shape[1]))
    np.add.at(out, parent, S)
    return out


def _smooth(h, z: list, obs: list) -> list:
    """Least-squares node totals from obs[ℓ] (one row per level-ℓ node, variance 1/z) on the tree cut at len(z)−1."""
    T = len(z) - 1
    par = [None] + [h.parents[ell - 1] for ell in range(1, T + 1)]
    m, v, c, S = [None] * (T + 1), [None] * (T + 1), [None] * (T + 1), [None] * (T + 1)
    m[T], v[T] = obs[T], 1.0 / z[T]
    for ell in range(T - 1, -1, -1):  # upward: own measurement ⊕ the children's sum
        S[ell] = np.bincount(par[ell + 1], v[ell + 1], minlength=z[ell].size)
        c[ell] = _group_rows(par[ell + 1], m[ell + 1], z[ell].size)
        v[ell] = 1.0 / (z[ell] + 1.0 / S[ell])
        m[ell] = v[ell][:, None] * (z[ell][:, None] * obs[ell] + c[ell] / S[ell][:, None])
    out = [m[0]]
    Wv, Wm = 1.0 / z[0], obs[0]  # the root: its own measurement is all that is outside its children
    for ell in range(1, T + 1):  # downward: the parent's outside view minus the siblings
        p = par[ell]
        d = Wv[p] + S[ell - 1][p] - v[ell]
        md = Wm[p] - (c[ell - 1][p] - m[ell])
        V = 1.0 / (1.0 / v[ell] + 1.0 / d)
        out.append(V[:, None] * (m[ell] / v[ell][:, None] + md / d[:, None]))
        if ell < T:
            Wv = 1.0 / (1.0 / d + z[ell])
            Wm = Wv[:, None] * (md / d[:, None] + z[ell][:, None] * obs[ell])
    return out


def is_orbit(strategy) -> bool:
    from mmopt.structured.orbit_strategy import OrbitStrategy
    return isinstance(strategy, OrbitStrategy)


def orbit_release(W: HierarchyWorkload, A, x: np.ndarray, privacy, noise_scale):
    """An OrbitStrategy's release (:func:`mmopt.structured.orbit_release.release`, W x̂ flat in the union's row
    order, each set's rows scaled by its weight) as a HierarchyRelease: per set, the counts over its groups and
    their variances (the weight divided out)."""
    from mmopt.structured.orbit_release import release as release_by_blocks
    out = release_by_blocks(W, A, x, privacy, noise_scale=noise_scale)
    answers, variances, at = [], [], 0
    for levels, weight in zip(W.sets, W.weights, strict=True):
        shape = tuple(int(h.n_groups[a]) for h, a in zip(W.attributes, levels, strict=True))
        size, w = math.prod(shape), float(weight)
        answers.append(out.answers[at:at + size].reshape(shape) / w)
        variances.append(out.variances[at:at + size].reshape(shape) / (w * w))
        at += size
    return HierarchyRelease(answers, variances, out.noise_scale, out.sensitivity, out.verified_loss, "orbit",
                            out.measurements, probe_counts(W))

