"""Consistent, non-negative marginals (and synthetic records) from residual measurements, by Private-PGM.

Optional: needs the ``pgm`` extra (``pip install 'mmopt[pgm]'``: the ``mbi`` package, which pulls in JAX —
about 380 MB installed, jaxlib 350 MB of it). Everything here is post-processing of measurements already
released, so it spends no privacy budget.

Notation: see README and :mod:`mmopt.structured.residual.reconstruct`. Measurement S of a residual strategy is

    y_S = c_S·(⊗_{i∈S} Bᵢ) m_S + z_S,      z_S i.i.d., standard deviation σ (Laplace: √2·b),

a linear measurement of the marginal m_S with known noise: exactly an ``mbi.LinearMeasurement`` on the clique
S whose query is c_S·⊗Bᵢ (:class:`ResidualQuery`). A weighted-marginals strategy (the default of ε-DP
releases, :mod:`mmopt.structured.residual.marginals`) measures y_S = θ_S m_S + z_S: passed as y_S/θ_S, a
measurement of m_S itself with standard deviation σ/θ_S (mbi's default query).

Private-PGM (McKenna, Sheldon, Miklau, "Graphical-model based estimation and inference for differential
privacy", ICML 2019, arXiv 1901.09136) fits a graphical model whose marginals μ minimise
Σ_S ‖c_S(⊗Bᵢ)μ_S − y_S‖²/(2σ²) over the marginals of non-negative data with the estimated total (mirror
descent); those marginals are mutually consistent and non-negative, and the model samples synthetic records.

**The mis-match** (the source documents' "mis-match between strategy optimisation and inference"). The
strategy was chosen to minimise the error of the *least-squares* marginals, and that is the error
``evaluate`` predicts (exactly: least squares is unbiased). The residual strategy measures the whole downward
closure, so the loss above equals ‖A(μ − μ̂_LS)‖²/(2σ²) + const: PGM returns the projection of the
least-squares answer onto the non-negative, consistent marginals in the norm weighted by the strategy
(c_S² on residual subspace S), not in the workload's unweighted norm. When the least-squares marginals are
already non-negative PGM returns them (up to its convergence); otherwise it is biased, its error is not what
``evaluate`` predicts, and it is usually smaller where many true cells are near zero (small ε, sparse
marginals). ``python -m experiments.records`` measures both on the same draws.

Examples
--------
>>> import numpy as np
>>> from mmopt import Privacy
>>> from mmopt.structured import residual as rp
>>> W = rp.marginal_workload((3, 2, 4), [(0, 1), (1, 2)])
>>> x = np.random.default_rng(0).integers(0, 50, 24).astype(float)
>>> m = rp.measure(rp.plan(W).strategy, x, Privacy(1e4, 1e-6), rng=0)  # nearly noiseless: PGM recovers the marginals
>>> est = pgm_marginals(m, ("a", "b", "c"), iters=3000)  # doctest: +SKIP
>>> bool(np.allclose(est.marginals[(0, 1)], rp.marginal_counts(x, (3, 2, 4), [(0, 1)])[(0, 1)], atol=0.5))
... # doctest: +SKIP
True
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from mmopt._base import validation as v
from mmopt.records.rows import MAX_ROWS, check_seed, labelled_rows
from mmopt.structured.residual import closure as cl
from mmopt.structured.residual import marginals as wm
from mmopt.structured.residual import strategy as rs
from mmopt.structured.residual.reconstruct import Measurements, reconstruct

__all__ = ["PGMEstimate", "ResidualQuery", "pgm_marginals", "to_mbi_measurements"]

EXTRA_HINT = "pip install 'mmopt[pgm]' (the mbi package, with JAX)"
# PGM's junction tree holds every maximal clique's table in float64; past this many MB we refuse before fitting
# (all 2-way marginals of d attributes give one clique over all d when the graph is complete).
MAX_MODEL_MB = 512.0


def _require_mbi(caller: str):
    try:
        with warnings.catch_warnings():  # mbi's import-time advice: we run in float64 (jax.enable_x64) anyway
            warnings.filterwarnings("ignore", message="JAX (is running in float32|persistent compilation cache)",
                                    category=UserWarning)
            import mbi
    except ImportError as exc:
        raise ImportError(f"{caller} needs the mbi package (Private-PGM), which is not installed: "
                          f"{EXTRA_HINT}.") from exc
    return mbi


@dataclass(frozen=True, eq=False)
class ResidualQuery:
    """The linear query c·(⊗ Bᵢ) of one residual measurement, applied to an mbi Factor on its clique.

    ``bases`` are the per-attribute residual bases (:func:`mmopt.structured.residual.residual_basis`) in the
    clique's order. Each has operator norm 1 (a projector, or a unit row for nᵢ = 2), so ‖c·⊗Bᵢ‖₂² = c²,
    which mbi uses for the step size. Hashed by identity, as JAX needs for a static query.
    """

    weight: float
    bases: tuple = field(repr=False)

    def __call__(self, factor):
        import jax.numpy as jnp

        y = factor.datavector(flatten=False)
        for ax, B in enumerate(self.bases):  # B applied along axis ax, as reconstruct._along does
            y = jnp.moveaxis(jnp.tensordot(jnp.asarray(B), y, axes=([1], [ax])), 0, ax)
        return self.weight * y.reshape(-1)

    def op_norm_sq(self) -> float:
        return float(self.weight) ** 2

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other) -> bool:
        return self is other


def _noise_std(measurements: Measurements, caller: str, param: str = "measurements") -> float:
    if measurements.noise == "gaussian":
        return float(measurements.noise_scale)
    if measurements.noise == "laplace":  # Laplace(b) has variance 2b²
        return math.sqrt(2.0) * float(measurements.noise_scale)
    raise ValueError(f"The '{param}' parameter of {caller} must be noisy (Gaussian or Laplace noise). Got "
                     f"noise={measurements.noise!r}: without noise the least-squares marginals are exact.")


def to_mbi_measurements(measurements: Measurements, names) -> list:
    """One ``mbi.LinearMeasurement`` per measured non-empty subset S (module docstring).

    The total's measurement (S = ∅) is not passed: PGM fixes the total itself (``known_total``), and
    :func:`pgm_marginals` sets it to the least-squares total.
    """
    caller = "to_mbi_measurements"
    mbi = _require_mbi(caller)
    names = _check_inputs(measurements, names, caller)
    std = _noise_std(measurements, caller)
    A = measurements.strategy
    if isinstance(A, wm.WeightedMarginals):
        return [mbi.LinearMeasurement(np.asarray(measurements.values[S], dtype=float).ravel() / th,
                                      tuple(names[i] for i in S), std / th)
                for S, th in zip(A.subsets, A.weights.tolist(), strict=True) if S]
    shape = A.shape
    bases = {n: rs.residual_basis(n) for n in set(shape) if n > 1}
    out = []
    for S, c in zip(measurements.strategy.subsets, measurements.strategy.weights.tolist(), strict=True):
        if not S:
            continue
        q = ResidualQuery(float(c), tuple(bases[shape[i]] for i in S))
        out.append(mbi.LinearMeasurement(np.asarray(measurements.values[S], dtype=float).ravel(),
                                         tuple(names[i] for i in S), std, q))
    return out


def _check_inputs(measurements, names, caller: str, param: str = "measurements") -> tuple:
    """``names`` checked against ``measurements`` (passed as ``param``: pgm_marginals' is 'source')."""
    if not isinstance(measurements, Measurements):
        what = "a RecordsRelease or its .measurements" if param == "source" else "residual Measurements (a " \
            "RecordsRelease's .measurements)"
        raise TypeError(f"The '{param}' parameter of {caller} must be {what}. Got {type(measurements).__name__} "
                        "instead.")
    if measurements.batch:
        raise ValueError(f"The '{param}' parameter of {caller} must hold one draw. Got a batch of shape "
                         f"{measurements.batch}; fit each draw on its own.")
    _noise_std(measurements, caller, param)
    d = len(measurements.strategy.shape)
    names = tuple(names) if names is not None and not isinstance(names, str) else None
    if names is None or len(names) != d or len(set(names)) != d or not all(isinstance(n, str) for n in names):
        raise ValueError(f"The 'names' parameter of {caller} must hold {d} distinct attribute names (str), one per "
                         "axis of the strategy's domain.")
    return names


@dataclass(frozen=True, eq=False)
class PGMEstimate:
    """Private-PGM's marginals: non-negative, consistent, each summing to ``total``.

    Attributes
    ----------
    marginals : dict
        Attribute tuple A → float array of shape (nᵢ for i in A).
    total : float
        The total every marginal sums to: the least-squares total, at least 1.
    iterations : int
        The mirror-descent iterations run: a fixed budget, not a convergence test (no optimality certificate;
        compare ``loss`` across budgets to judge convergence).
    loss : float
        The final weighted loss Σ_S ‖c_S(⊗Bᵢ)μ_S − y_S‖²/(2σ²).
    model : object
        The fitted ``mbi.MarkovRandomField`` (e.g. for other marginals: ``model.project(names)``).
    names : tuple of str
    domain : Domain or None
        The records domain, when fitted from a release (for labelled synthetic records).
    """

    marginals: dict = field(repr=False)
    total: float
    iterations: int
    loss: float
    model: object = field(repr=False)
    names: tuple = ()
    domain: object = field(default=None, repr=False)

    def synthetic(self, rows: int | None = None, *, seed: int | None = None, labels: bool = False,
                  bins: str = "values"):
        """Synthetic records drawn from the model: a pandas DataFrame, one column per attribute.

        Values are cell indices (int), or with ``labels=True`` labelled by the domain (needs the estimate to come
        from a records release) as :meth:`mmopt.synth.result.Synthetic.records` labels its rows: a category, or for
        a binned attribute a number inside its bin (``bins="values"``, rows that count again) or the bin's label such
        as "[250, 500)" (``bins="labels"``, for reading: counting drops labels, so labelled rows counted again saw
        zero rows in binned attributes before, the only kind there was). ``rows`` (an int in [1, 10⁸]) defaults
        to the rounded total. mbi samples with numpy's global generator: it is seeded for the call — with ``seed``
        (an int in [0, 2¹²⁸)), or without one from fresh entropy — and restored afterwards, so the caller's global
        random state is unchanged (unseeded calls drew the same rows each time, the state restored before the next;
        a helper's audit).
        """
        import pandas as pd

        caller = "PGMEstimate.synthetic"
        if rows is None:
            rows = max(1, round(self.total))  # mbi's own default truncates (int(total)), and reads 0 as "default"
        # mbi read 0 as its default, -3 as one row, 2.7 as 2; 10¹¹ rows was numpy's MemoryError (93 GiB)
        rows = v.check_int(rows, name="rows", caller=caller, low=1, high=MAX_ROWS)
        v.check_allocation(rows * (len(self.names) + 4), what=f"{rows:,} synthetic rows", caller=caller,
                           remedy=" Draw fewer rows per call and concatenate, with a different seed per call.")
        seed = check_seed(seed, caller)  # numpy's bare "Seed must be between 0 and 2**32 - 1" for -1 or 2**33 before
        labels = v.check_bool(labels, name="labels", caller=caller)  # "no" was read as True
        bins = v.check_choice(bins, name="bins", caller=caller, choices=("labels", "values"))
        if labels and self.domain is None:
            raise ValueError("PGMEstimate.synthetic: labels=True needs the records domain; this estimate was fitted "
                             "to bare measurements. Fit it from a RecordsRelease, or use cell indices.")
        import jax

        state = np.random.get_state()  # noqa: NPY002 — mbi samples with the legacy global generator
        # a seed below 2³² seeds the legacy generator as it always did; a larger one, or none, through SeedSequence
        entropy = seed if seed is not None and seed < 2**32 else np.random.SeedSequence(seed).generate_state(4)
        try:
            np.random.seed(entropy)  # noqa: NPY002
            with jax.enable_x64(True):  # the model was fitted in float64
                data = self.model.synthetic_data(int(rows))
        finally:
            np.random.set_state(state)  # noqa: NPY002
        cols = {n: np.asarray(data.data[n], dtype=np.int64) for n in self.names}
        if labels:
            return labelled_rows(self.domain, np.column_stack([cols[a.name] for a in self.domain.attributes]), bins)
        return pd.DataFrame(cols)


def pgm_marginals(source, names=None, sets=None, *, iters: int = 2000,
                  max_model_mb: float = MAX_MODEL_MB) -> PGMEstimate:
    """Consistent, non-negative marginals on ``sets`` fitted by Private-PGM to residual measurements.

    Parameters
    ----------
    source : RecordsRelease or Measurements
        A records release (its measurements, attribute names and workload are used), or residual
        :class:`~mmopt.structured.residual.Measurements` of one draw with ``names``.
    names : sequence of str, optional
        Attribute names, one per axis: required with bare measurements; with a release, its domain's (omit
        them, or give exactly those).
    sets : list of attribute tuples, optional
        The marginals to return (default: the release's workload, or every maximal measured subset).
    iters : int
        Mirror-descent iterations (mbi's ``MirrorDescent`` with its Armijo step; 2000 by default).
    max_model_mb : float
        Refuse (ValueError, before fitting) a model whose junction tree needs more memory than this.

    Returns
    -------
    PGMEstimate
    """
    caller = "pgm_marginals"
    measurements = getattr(source, "measurements", source)
    if hasattr(source, "domain"):
        if names is not None and (isinstance(names, str) or tuple(names) != tuple(source.domain.names)):
            # the model would name the axes by ``names`` while synthetic(labels=True) reads them by the domain's:
            # a reordered list put one attribute's values under another's label (a helper's probe)
            raise ValueError(f"The 'names' parameter of {caller} must be the release's own attribute names in "
                             f"order, {tuple(source.domain.names)}, when 'source' is a release. Got {names!r} "
                             "instead; omit 'names'.")
        names = source.domain.names
    names = _check_inputs(measurements, names, caller, "source")
    shape = measurements.strategy.shape
    if sets is None:
        W = getattr(source, "workload", None)
        sets = list(W.sets) if W is not None else _maximal(measurements.strategy.subsets)
    sets = cl.check_sets(sets, shape, name="sets", caller=caller)
    if not isinstance(iters, int | np.integer) or isinstance(iters, bool):
        raise TypeError(f"The 'iters' parameter of {caller} must be an int. Got {type(iters).__name__} instead.")
    if iters < 1:
        raise ValueError(f"The 'iters' parameter of {caller} must be >= 1. Got {iters!r} instead.")
    mbi = _require_mbi(caller)
    import jax

    domain = mbi.Domain(names, shape)
    mbi_measurements = to_mbi_measurements(measurements, names)
    cliques = [m.clique for m in mbi_measurements] + [tuple(names[i] for i in A) for A in sets]
    size = mbi.junction_tree.hypothetical_model_size(domain, cliques)
    if size > max_model_mb:
        raise ValueError(f"{caller}: the graphical model of these marginals needs {size:,.0f} MB (its junction tree's "
                         f"largest cliques), more than max_model_mb={max_model_mb:g}. Fit fewer attributes, or pass a "
                         "larger max_model_mb if the memory is there.")
    if isinstance(measurements.strategy, wm.WeightedMarginals):  # the least-squares total
        ls_total = wm.reconstruct_all(measurements.strategy, measurements.values, [()])[()]
    else:
        ls_total = reconstruct(measurements, ())  # y_∅ / c_∅
    total = max(1.0, float(ls_total))
    with jax.enable_x64(True):  # float32 stalls on totals past ~10⁵ (mbi's own warning)
        model = mbi.estimation.MirrorDescent().estimate(domain, mbi_measurements, known_total=total,
                                                        iters=int(iters))
        loss_fn = mbi.marginal_loss.from_linear_measurements(mbi_measurements, domain)
        loss = float(loss_fn(model.marginals))
        out = {A: np.asarray(model.project(tuple(names[i] for i in A)).datavector(flatten=False), dtype=float)
               for A in sets}
    return PGMEstimate(out, total, int(iters), loss, model, names, getattr(source, "domain", None))


def _maximal(subsets) -> list:
    """The measured subsets that no other measured subset contains."""
    sets = [set(S) for S in subsets]
    return [S for S, s in zip(subsets, sets, strict=True) if S and not any(s < t for t in sets)]
