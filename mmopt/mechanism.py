"""Run the mechanisms on data: noisy measurements y = A x + z, least-squares x̂ = A⁺y, answers W x̂.

Notation: see README. Two noise paths, named by ``MechanismOutput.path``:

* ``"simulation"`` (:func:`matrix_mechanism`, :func:`laplace_mechanism`): fast numpy noise from a
  seedable Generator, for Monte-Carlo checks of :func:`mmopt.evaluate`. **Not for releasing real data**:
  textbook floating-point Laplace/Gaussian sampling leaks through the low-order bits of its output
  (Mironov 2012, "On significance of the least significant bits for differential privacy").
* ``"release"`` (:func:`release`): noise from OpenDP's vetted samplers, with the privacy of the
  measurement verified by OpenDP's own privacy map. Needs the optional extra ``mmopt[release]``.

Least squares never forms A⁺: :func:`factorize` keeps a QR factorisation of A (an SVD when A is
ill-conditioned or rank-deficient, giving the minimum-norm solution), reusable across noise draws. It and
:class:`LeastSquares` live in :mod:`mmopt.dense.least_squares` and are re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mmopt._base import validation as v
from mmopt._base.guards import Unsupported
from mmopt._base.hints import missing_attribute
from mmopt._base.opendp import calibrated_scale as _noise_scale
from mmopt._base.opendp import finite as _finite
from mmopt._base.opendp import measure, post_process, simulation_scale
from mmopt._base.probe import matrix_probe
from mmopt.dense._error_common import as_strategy as _as_strategy
from mmopt.dense._mechanism_inputs import answer_plan as _answer_plan
from mmopt.dense._mechanism_inputs import answers_available  # noqa: F401  (for the command line)
from mmopt.dense._mechanism_inputs import answers_of as _answers
from mmopt.dense._mechanism_inputs import check_size as _check_size
from mmopt.dense._mechanism_inputs import check_types as _check_types
from mmopt.dense._mechanism_inputs import check_x as _check_x
from mmopt.dense._mechanism_inputs import domain_shape as _domain_shape
from mmopt.dense._mechanism_inputs import noisy as _noisy
from mmopt.dense._mechanism_inputs import product as _product
from mmopt.dense._strategy_analysis import supports
from mmopt.dense._strategy_core import max_column_norm_upper
from mmopt.dense.exact_answers import charged_sensitivity, check_histogram, check_strategy, exact_answers, integer_exact
from mmopt.dense.least_squares import LeastSquares, factorize
from mmopt.privacy import Privacy
from mmopt.reconstruct import Reconstruction, check_reconstruction
from mmopt.reconstruct import dense as _recon
from mmopt.strategy import max_column_norm
from mmopt.workload import Workload

__all__ = ["LeastSquares", "MechanismOutput", "factorize", "laplace_mechanism", "matrix_mechanism", "release"]

@dataclass(frozen=True, eq=False)
class MechanismOutput:
    """One run (or ``size`` runs, stacked along axis 0) of a mechanism.

    Attributes
    ----------
    answers : ndarray (m,) or (size, m), or None
        W x̂ (matrix mechanism) or W x + z (Laplace mechanism). The closed-form families (identity, total,
        prefix, all_range, all_predicate) are answered by their fast products (:mod:`mmopt.dense._family_answers`),
        never by forming W. None only for a Gram-only workload (W unknown), or with a warning when the
        ``size`` × m answers would pass the allocation limit (all_predicate beyond n ≈ 26).
    estimate : ndarray (n,) or (size, n), or None
        The reconstructed data vector: x̂ = A⁺y for ``reconstruct="least_squares"``, else the non-negative
        h of :mod:`mmopt.reconstruct` (None for the Laplace mechanism).
    measurements : ndarray (p,) or (size, p)
        The noisy strategy answers y = A x + z.
    noise_scale, noise, sensitivity : float, {"laplace", "gaussian"}, float
        Laplace b or Gaussian σ of each entry of z, and the Δ (L1 or L2) it was set from.
    privacy, path : Privacy, {"simulation", "release"}
    verified_loss : float, tuple or None
        Release path only: OpenDP's privacy map at ``sensitivity`` (ε, or (ε, δ)).
    reconstruction : Reconstruction or None
        Which reconstruction produced ``estimate`` and its solver record (None for the Laplace mechanism).
    shape : tuple of int or None
        The product domain's shape of a dense workload built as a product (``mmopt.workload.kron`` under 4,096
        cells), else None: :func:`mmopt.answers.answer` reads range specs on it, one item per attribute, as it
        does above 4,096 cells (``estimate`` stays flat, cells in C order).
    strategy_probe : tuple of float or None
        The strategy's :func:`mmopt._base.probe.gram_probe`, by which :mod:`mmopt.answers` refuses standard errors
        asked with another strategy (None: not recorded, not checked).
    """

    answers: np.ndarray | None = field(repr=False)
    estimate: np.ndarray | None = field(repr=False)
    measurements: np.ndarray = field(repr=False)
    noise_scale: float
    noise: str
    privacy: Privacy
    path: str
    sensitivity: float
    verified_loss: float | tuple | None = None
    reconstruction: Reconstruction | None = None
    shape: tuple[int, ...] | None = None
    strategy_probe: tuple[float, float] | None = None

    def __getattr__(self, name: str):  # only for names the class lacks: where the answers' table lives
        raise missing_attribute(self, name)


def matrix_mechanism(workload: Workload, strategy, x, privacy: Privacy, *, rng=None, size: int | None = None,
                     reconstruct: str = "least_squares", total: float | None = None, zeros=None,
                     reconstruct_options: dict | None = None, noise_scale: float | None = None) -> MechanismOutput:
    """Simulate the matrix mechanism M_A(W, x) = W A⁺(A x + z) (Prop. 3; §4 Thm 5.22 for δ > 0).

    z has i.i.d. Laplace(b) entries, b = Δ₁(A)/ε, when δ = 0, or N(0, σ²) with σ = ``privacy``'s
    Gaussian scale at Δ₂(A) when δ > 0. Expected total squared error is ``mmopt.evaluate(...)``.
    **Simulation only** (numpy noise; see the module docstring): use :func:`release` for real data.

    Parameters
    ----------
    workload : Workload
        Must be supported by A (Def. 3.1). Answers need W (stored, or built from its family).
    strategy : Strategy or array_like of shape (p, n)
    x : array_like of shape (n,)
        Cell counts, finite and >= 0 (integers are not required).
    privacy : Privacy
    rng : numpy.random.Generator, int or None
        Seed or Generator; the same seed gives identical output.
    size : int or None
        Number of independent draws, stacked along axis 0; one :func:`factorize` serves all of them.
    reconstruct : {"least_squares", "nnls", "projection"}
        How x is estimated from y (:mod:`mmopt.reconstruct`): x̂ = A⁺y (default; W x̂ is unbiased for Wx whenever
        A supports W, x̂ itself only when A has full column rank — else E[x̂] = A⁺Ax, the projection of x on A's
        row space); non-negative least squares in A's metric; or the projection mechanism in W's metric,
        min (h − x̂)ᵀG(h − x̂) over h ≥ 0, which never increases ‖W(h − x)‖. All are post-processing of y: the
        privacy guarantee holds.
    total, zeros : float or None, boolean mask of shape (n,) or None
        Public facts imposed by "nnls"/"projection": Σh = total, h = 0 where ``zeros``. They must not be
        computed from the private data (post-processing keeps privacy only for public inputs).
    reconstruct_options : dict or None
        {"tol": t} for "nnls"/"projection": the relative KKT residual their exact solvers must meet (default
        1e-7; a solve that misses it raises SolverError). "max_iterations" is accepted and unused here (the
        dense solvers have no iteration budget; implicit pairs use it).
    noise_scale : float or None
        b or σ to draw at instead of ``privacy``'s (never below it): a release's ``out.noise_scale`` simulates
        that release, whose Gaussian σ (OpenDP's, through zCDP) is 4–9 % above the analytic σ used by default.

    Examples
    --------
    >>> import mmopt
    >>> W, H = mmopt.workload.prefix(4), mmopt.strategy.hierarchical(4)
    >>> out = matrix_mechanism(W, H, [3, 0, 2, 5], mmopt.Privacy(1.0), rng=7)
    >>> out.answers.shape, out.noise_scale, out.path
    ((4,), 3.0, 'simulation')
    >>> np.array_equal(out.answers, matrix_mechanism(W, H, [3, 0, 2, 5], mmopt.Privacy(1.0), rng=7).answers)
    True
    """
    caller = "matrix_mechanism"
    strategy, x, answered = _prepare(workload, strategy, x, privacy, caller)
    reconstruct, total, zeros, options = check_reconstruction(reconstruct, total, zeros, reconstruct_options,
                                                              strategy.domain_size, caller, _domain_shape(workload))
    tol = _dense_tol(options)
    gen = v.check_rng(rng, name="rng", caller=caller)
    A = strategy.matrix
    draws = _check_size(size, (A.shape[0], A.shape[1], workload.n_queries if answered else 0), caller)
    sens = strategy.sensitivity(privacy.sensitivity_norm)
    scale = simulation_scale(privacy, sens, noise_scale, caller)
    y = _noisy(_product(A, x, caller), privacy.noise, scale, gen, draws, caller)
    xhat, how = _recon.estimate(workload, strategy, y, reconstruct, total=total, zeros=zeros, **tol)
    answers = _answers(workload, answered, xhat, caller)
    return MechanismOutput(answers, _finite(xhat, "x̂", caller), y, scale, privacy.noise, privacy,
                           "simulation", sens, reconstruction=how, shape=_domain_shape(workload),
                           strategy_probe=matrix_probe(A))


def laplace_mechanism(workload: Workload, x, privacy: Privacy, *, rng=None, size: int | None = None
                      ) -> MechanismOutput:
    """Simulate the Laplace mechanism L(W, x) = W x + (Δ_W/ε) b̃ (Prop. 2), or its Gaussian analogue.

    For δ > 0 the noise is N(0, σ²) at W's L2 sensitivity. Expected total squared error
    (2/ε²) Δ_W² m for Laplace, σ² m for Gaussian. Needs explicit W; ``mmopt.laplace_mechanism`` also takes
    product, marginal and stream workloads (:mod:`mmopt.dispatch.laplace`). **Simulation only.**

    Examples
    --------
    >>> import mmopt
    >>> out = laplace_mechanism(mmopt.workload.prefix(4), [3, 0, 2, 5], mmopt.Privacy(1.0), rng=0, size=2)
    >>> out.answers.shape, out.sensitivity, out.estimate is None
    ((2, 4), 4.0, True)
    """
    caller = "laplace_mechanism"
    _check_types(workload, privacy, caller)
    try:
        W = workload.explicit_matrix()
    except ValueError as exc:
        raise ValueError(f"{caller} needs the explicit query matrix W: {exc}") from None
    x = _check_x(x, workload.domain_size, caller)
    gen = v.check_rng(rng, name="rng", caller=caller)
    draws = _check_size(size, (W.shape[0],), caller)
    sens = max_column_norm(W, privacy.sensitivity_norm)
    scale = _noise_scale(privacy, sens, caller)
    y = _noisy(_product(W, x, caller), privacy.noise, scale, gen, draws, caller)
    return MechanismOutput(y, None, y, scale, privacy.noise, privacy, "simulation", sens)


def release(workload: Workload, strategy, x, privacy: Privacy, *, noise_scale: float | None = None,
            reconstruct: str = "least_squares", total: float | None = None, zeros=None,
            reconstruct_options: dict | None = None) -> MechanismOutput:
    """Release W x̂ for real data, with OpenDP noise and an OpenDP-verified (ε, δ) guarantee.

    The vector A x is passed to ``opendp.measurements.make_laplace`` (δ = 0; input metric
    ``l1_distance``, d_in = Δ₁(A)) or to ``make_gaussian`` → ``make_zCDP_to_approxDP`` →
    ``make_fix_delta(δ)`` (δ > 0; ``l2_distance``, d_in = Δ₂(A)). Under the paper's neighbouring
    relation (add/remove one record: x, x' differ by 1 in one cell) ‖A(x − x')‖ is a column norm of A,
    at most Δ (computed here rounded upwards). The noise scale is the smallest OpenDP accepts
    (``dp.binary_search_param``), or ``noise_scale`` if given; either way OpenDP's privacy map is
    checked against (ε, δ) and a ValueError is raised if it does not hold.

    Guarantee: OpenDP proves that its measurement is ε-DP (Laplace) or (ε, δ)-DP (Gaussian, through
    ρ-zCDP) for inputs within d_in; its samplers draw exactly from discrete Laplace/Gaussian
    distributions on a fine grid, so they are immune to Mironov's floating-point attack. The
    least-squares x̂ and W x̂ are post-processing of y and keep the guarantee, so the whole output is
    (ε, δ)-DP with respect to adding/removing one record of the data whose histogram is ``x``, provided
    ``x`` holds the true counts (not already-noised or data-dependently clipped values), A and W do not
    depend on the data, and this is the only use of the data (further releases compose). ``x`` must hold
    whole counts of at most :data:`~mmopt.dense.exact_answers.MAX_RECORDS` (2³²) records: A x is computed
    with every entry correctly rounded, and d_in charges that rounding for histograms of that size
    (:mod:`mmopt.dense.exact_answers`: 9.5·10⁻⁷ of Δ; nothing where A is integer-valued, as I, H and Y, so
    that A x is exact).

    The Gaussian σ is above the analytic σ of :class:`Privacy` (OpenDP's zCDP → (ε, δ) conversion is not
    tight for the Gaussian), so its error exceeds ``mmopt.evaluate`` by the factor (σ/σ_analytic)²: σ is
    5-10% above for ε from 0.3 to 10 and δ from 10⁻⁹ to 10⁻³ (the factor 1.10-1.20), 13% at ε = 0.01
    (1.29), 26% at δ = 0.1 (1.58), 3% at ε = 50, δ = 10⁻¹⁰ (1.06); ``noise_scale`` is the σ drawn.
    Noise comes from OpenDP's system randomness: it cannot be seeded.

    Parameters are those of :func:`matrix_mechanism` (no ``rng``, ``size``; ``reconstruct``, ``total`` and
    ``zeros`` as there, all post-processing of y with public facts); ``noise_scale`` (b or σ)
    overrides the calibrated scale and is accepted only if OpenDP's map verifies it.

    Raises
    ------
    ImportError
        When opendp is not installed (``pip install -e '.[release]' (from a checkout)``).
    ValueError
        When OpenDP cannot verify (ε, δ) at the noise scale (e.g. ``noise_scale`` too small).

    Examples
    --------
    >>> import mmopt
    >>> W, H = mmopt.workload.prefix(4), mmopt.strategy.hierarchical(4)
    >>> out = release(W, H, [3, 0, 2, 5], mmopt.Privacy(1.0))
    >>> out.path, out.answers.shape, round(out.noise_scale, 9), out.verified_loss  # b = Δ₁/ε (+ OpenDP's lattice)
    ('release', (4,), 3.0, 1.0)
    """
    caller = "release"
    strategy, x, answered = _prepare(workload, strategy, x, privacy, caller)
    reconstruct, total, zeros, options = check_reconstruction(reconstruct, total, zeros, reconstruct_options,
                                                              strategy.domain_size, caller, _domain_shape(workload))
    tol = _dense_tol(options)
    A = strategy.matrix
    check_strategy(A, caller)  # from A alone: a refusal that read the counts would tell neighbours apart
    x = check_histogram(x, caller)
    # d_in bounds the change of the *computed* A x (its float rounding charged, from A and MAX_RECORDS alone)
    exact = integer_exact(A)
    d_in = charged_sensitivity(_upper_sensitivity(A, privacy.sensitivity_norm, caller), privacy.sensitivity_norm,
                               *A.shape, exact=exact)
    Ax = _finite(exact_answers(A, x, caller=caller, integer=exact), "A x", caller)  # refused before any draw
    y, scale, loss = measure(Ax, d_in, privacy, noise_scale=noise_scale, caller=caller)

    def finish(method: str):
        xhat, how = _recon.estimate(workload, strategy, y, method, total=total, zeros=zeros, **tol)
        xhat = _finite(xhat, "x̂", caller)
        return xhat, _answers(workload, answered, xhat, caller), how

    done = post_process(caller, lambda: finish(reconstruct), lambda: finish("least_squares"),
                        f"reconstruct={reconstruct!r}")
    xhat, answers, how = done if done is not None else (None, None, None)
    return MechanismOutput(answers, xhat, y, scale, privacy.noise, privacy, "release", d_in, loss, how,
                           _domain_shape(workload), matrix_probe(A))


# -- helpers ------------------------------------------------------------------------------------------
def _dense_tol(options: dict) -> dict:
    """The dense solvers are exact (no iteration budget): only ``tol``, the KKT residual they must meet."""
    return {"tol": options["tol"]} if "tol" in options else {}



def _prepare(workload, strategy, x, privacy, caller: str):
    _check_types(workload, privacy, caller)
    strategy = _as_strategy(strategy, caller)
    v.check_same_domain(workload.domain_size, strategy.domain_size, caller=caller)
    x = _check_x(x, strategy.domain_size, caller, workload)
    if not supports(workload, strategy):
        raise Unsupported(f"{caller}: strategy '{strategy.name}' does not support workload '{workload.name}' "
                         "(some queries lie outside the row space of A). Add rows to A, e.g. a scaled "
                         "identity (§3.3).")
    return strategy, x, _answer_plan(workload, caller)


def _upper_sensitivity(A: np.ndarray, norm: str, caller: str) -> float:
    """A proven upper bound on the largest column L1/L2 norm of A, for OpenDP's d_in.

    :func:`mmopt.dense._strategy_core.max_column_norm_upper`, the rounding-error bound of the one scale-safe
    sensitivity computation (every other Δ in mmopt is the same computation rounded to nearest): A is scaled
    by 2⁻ᵉ (exact) so no sum overflows and no square that matters underflows, the computed maximum is
    inflated past every rounding of its sums and squares, and the square root is rounded upwards. A Δ that
    is not a normal float64 is refused: the noise could not be calibrated to it.
    """
    return max_column_norm_upper(A, norm, what="the strategy", caller=caller)
