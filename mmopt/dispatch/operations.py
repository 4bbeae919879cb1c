"""The public operations on a (workload, strategy) pair of any family: each routes the pair
(:func:`mmopt.dispatch.routing.route`) and runs its family's function from :data:`mmopt.dispatch.handlers.OPS`."""

from __future__ import annotations

import numpy as np

from mmopt import error
from mmopt._base import runtime as _runtime
from mmopt._base.guards import Unsupported
from mmopt._base.hints import unexpected_keywords
from mmopt._base.intent import warn_mismatch
from mmopt._base.kept import keeping_draws
from mmopt.dispatch.handlers import OPS, product_twin_report
from mmopt.dispatch.routing import as_implicit as _as_implicit
from mmopt.dispatch.routing import route

_SIMULATE_KEYWORDS = ("rng", "size", "reconstruct", "total", "zeros", "reconstruct_options", "noise_scale",
                      "verbose")
_SIMULATE_HINTS = dict.fromkeys(("seed", "random_state"), "pass rng=seed (an int or a numpy Generator).")
_RELEASE_KEYWORDS = ("noise_scale", "reconstruct", "total", "zeros", "reconstruct_options", "verbose")
# a release's noise comes from OpenDP's samplers, seeded by the operating system: a seed would make it predictable
_RELEASE_HINTS = dict.fromkeys(("seed", "rng", "random_state"), (
    "a release draws its noise from OpenDP's vetted samplers, which cannot be seeded (a known seed would make the "
    "noise predictable, and the release not private). To simulate a run, seeded: "
    "mmopt.matrix_mechanism(W, A, x, privacy, rng=seed) (numpy noise at the analytic Gaussian σ, which under "
    "δ > 0 is 4–9 % below the σ OpenDP draws for a release; Laplace noise at the same b). Add "
    "noise_scale=out.noise_scale to simulate at a release's own scale."))


def evaluate(workload, strategy, privacy=None, *, norm: str | None = None, per_query: bool | None = None):
    """Exact expected error of the matrix mechanism (Prop. 4.4), for dense or implicit W and A.

    Dense pairs return :class:`mmopt.error.ErrorReport` (see :func:`mmopt.error.evaluate`); implicit pairs
    return :class:`mmopt.structured.ImplicitErrorReport`, whose ``total_exact`` and ``sensitivity_exact``
    say whether a figure is exact or a proven upper bound (never an underestimate). With ``privacy=None`` and
    ``norm=None`` the figures are at unit privacy (c = 1) with Δ₁, whatever the family; a Gaussian-only strategy
    (a hierarchy's, an orbit's or the weighted square root's, whose Δ₁ is not computed here) uses Δ₂.

    Examples
    --------
    >>> import mmopt
    >>> W = mmopt.workload.sf1()                                   # 29,440 cells, 4,151 queries
    >>> A = mmopt.strategy.kron(*[mmopt.strategy.identity(d) for d in W.shape])
    >>> r = mmopt.evaluate(W, A, mmopt.Privacy(1.0))
    >>> round(r.total_squared_error), r.n_queries, r.total_exact   # 2 · (query, cell) incidences
    (2235124, 4151, True)
    """
    _given(strategy, "evaluate")
    with _runtime.blas_threads(_runtime.default_blas_threads()):
        # before route(), which would form the N×N strategy the twin does without
        if not per_query and (report := product_twin_report(workload, strategy, privacy, norm, "evaluate")) is not None:
            warn_mismatch(strategy, privacy, norm, "evaluate")
            return report
        family, W, A = route(workload, strategy, "evaluate")
        warn_mismatch(strategy, privacy, norm, "evaluate")
        return OPS[family]["evaluate"](W, A, privacy, norm, per_query)


def expected_error(workload, strategy, privacy=None, *, norm: str | None = None) -> float:
    """Total expected squared error; shorthand for ``evaluate(...).total_squared_error``."""
    _given(strategy, "expected_error")
    if (report := product_twin_report(workload, strategy, privacy, norm, "expected_error")) is not None:  # as evaluate
        warn_mismatch(strategy, privacy, norm, "expected_error")
        return report.total_squared_error
    family, W, A = route(workload, strategy, "expected_error")
    warn_mismatch(strategy, privacy, norm, "expected_error")
    if family == "dense":  # the dense path's own shorthand skips the per-query report
        return error.expected_error(W, A, privacy, norm=norm)
    with _runtime.blas_threads(_runtime.default_blas_threads()):  # evaluate's work, not its warning a second time
        return OPS[family]["evaluate"](W, A, privacy, norm, None).total_squared_error


def supports(workload, strategy) -> bool:
    """Whether every query of the workload lies in the row space of the strategy (Def. 3.1), for a pair of any
    family: False exactly where :func:`evaluate` would refuse the pair as unsupported (``mmopt.Unsupported``).

    Dense pairs: :func:`mmopt.error.supports` (each stored query judged by its own norm). Implicit pairs are
    judged by the rule their evaluation applies (per Kronecker factor, per residual subspace or per eigenspace of
    the marginal algebra), so this costs one evaluation; any other refusal (a numerically singular strategy)
    still raises.

    Examples
    --------
    >>> import mmopt, numpy as np
    >>> W = mmopt.workload.kron(mmopt.workload.prefix(100), mmopt.workload.prefix(100))   # 10,000 cells: implicit
    >>> mmopt.supports(W, mmopt.strategy.kron(mmopt.strategy.identity(100), mmopt.strategy.identity(100)))
    True
    >>> half = mmopt.Strategy(np.eye(100)[:50], name="first half")            # never measures cells 50..99
    >>> mmopt.supports(W, mmopt.strategy.kron(mmopt.strategy.identity(100), half))
    False
    """
    family, W, A = route(workload, strategy, "supports")
    if family == "dense":
        return error.supports(W, A)
    try:
        OPS[family]["evaluate"](W, A, None, None, None)
    except Unsupported:
        return False
    except (ValueError, TypeError) as exc:  # a refusal of the pair, in evaluate's words: said in supports' name
        if type(exc) not in (ValueError, TypeError):
            raise
        raise type(exc)(f"supports (checking the pair as evaluate does): {exc}") from None
    return True


def svd_bound(workload, privacy=None, *, per_query: bool = False) -> float:
    """The SVD lower bound c·(Σσᵢ(W))²/n on every strategy's total error (Thm 5.26).

    For an implicit workload it is exact for a single product and for marginals; for other unions it is a
    proven lower bound below the SVD bound (``mmopt.structured.svd_bound(W).exact`` says which, and
    ``.method`` how it was obtained).
    """
    family, W, _ = route(workload, None, "svd_bound")
    return OPS[family]["svd_bound"](W, privacy, per_query)


def matrix_mechanism(workload, strategy, x, privacy, *, rng=None, size: int | None = None,
                     reconstruct: str = "least_squares", total: float | None = None, zeros=None,
                     reconstruct_options: dict | None = None, noise_scale: float | None = None,
                     verbose: bool | None = None, **unexpected):
    """Simulate M_A(W, x) = W A⁺(A x + z), dense or implicit (see :func:`mmopt.mechanism.matrix_mechanism`).

    Implicit pairs reconstruct x̂ factor-wise (product strategies) or by LSMR with a checked residual
    (unions), with memory O(N + Σ factor sizes); ``x`` is flat (N,) or shaped like the domain, and the
    output's ``estimate`` is shaped like the domain (a dense pair's is flat: :func:`release`'s docstring).
    ``reconstruct`` is "least_squares" (x̂ = A⁺y), "nnls" or "projection" (:mod:`mmopt.reconstruct`), with the
    optional public facts ``total`` (Σh) and ``zeros`` (cells known to be 0); all are post-processing.
    ``reconstruct_options`` = {"tol": …, "max_iterations": …} tunes their solvers (the KKT residual to meet,
    default 1e-7 dense / 1e-8 implicit; the iterative solvers' budget, implicit only).
    **Simulation only**: numpy noise, at the scale :func:`evaluate` assumes: Laplace's b as :func:`release`
    draws it, and the analytic Gaussian σ, which under δ > 0 is 4–9 % below the σ OpenDP draws for a release
    (its output's ``noise_scale``), so a simulation's Gaussian error is 8–19 % below a release's; pass that
    ``noise_scale=out.noise_scale`` (never below ``privacy``'s) to simulate at the release's own scale.
    ``verbose``: progress on stderr — None (default) once the call passes 10 s, True from the start, False never.
    """
    if unexpected:
        raise unexpected_keywords("matrix_mechanism", unexpected, _SIMULATE_KEYWORDS, _SIMULATE_HINTS)
    _given(strategy, "matrix_mechanism")
    family, W, A = route(workload, strategy, "matrix_mechanism")
    kw = dict(rng=rng, size=size, reconstruct=reconstruct, total=total, zeros=zeros,
              reconstruct_options=reconstruct_options, noise_scale=noise_scale)
    talk = _runtime.check_verbose(verbose, "matrix_mechanism")
    with _runtime.heavy_call(talk):  # one BLAS thread; the iterative reconstructions report once they pass 10 s
        return OPS[family]["matrix_mechanism"](W, A, x, privacy, **kw)


def laplace_mechanism(workload, x, privacy, *, rng=None, size: int | None = None, **unexpected):
    """Simulate the Laplace mechanism L(W, x) = W x + (Δ_W/ε)·b̃ (Prop. 2), or its Gaussian analogue, for a
    workload of any family: the baseline a strategy's error is compared with.

    Dense workloads: :func:`mmopt.mechanism.laplace_mechanism` (W explicit). Products, unions of products and
    marginals, and stream workloads: :func:`mmopt.dispatch.laplace.laplace_mechanism` (W x by the factors or by
    prefix sums, Δ_W from the factors' column norms; nothing N×N). **Simulation only**: numpy noise.

    Examples
    --------
    >>> import mmopt, numpy as np
    >>> W = mmopt.workload.kron(mmopt.workload.prefix(100), mmopt.workload.prefix(100))  # 10,000 cells: implicit
    >>> out = mmopt.laplace_mechanism(W, np.ones(10_000), mmopt.Privacy(1.0), rng=0)
    >>> out.sensitivity, out.answers.shape, out.shape                    # column (0, 0) is in every 2-D prefix sum
    (10000.0, (10000,), (100, 100))
    """
    from mmopt import mechanism
    from mmopt.dispatch import laplace
    from mmopt.family import family_of
    if unexpected:
        raise unexpected_keywords("laplace_mechanism", unexpected, ("rng", "size"), _SIMULATE_HINTS)
    workload = _as_implicit(workload)
    family = family_of(workload, "laplace_mechanism").name
    if family == "dense":
        return mechanism.laplace_mechanism(workload, x, privacy, rng=rng, size=size)
    if family in ("stream", "product"):
        return laplace.laplace_mechanism(workload, x, privacy, rng=rng, size=size)
    also = (", or pass its queries as a union of products, W.to_implicit(), which laplace_mechanism takes"
            if callable(getattr(workload, "to_implicit", None)) else "")
    raise TypeError(f"laplace_mechanism takes a dense, product, marginal or stream workload. Got a {family} "
                    f"workload ({type(workload).__name__}); answer it with a strategy through "
                    f"mmopt.matrix_mechanism instead{also}.")


def release(workload, strategy, x, privacy, *, noise_scale: float | None = None, reconstruct: str = "least_squares",
            total: float | None = None, zeros=None, reconstruct_options: dict | None = None,
            verbose: bool | None = None, **unexpected):
    """Release W x̂ for real data with OpenDP noise and a verified (ε, δ) guarantee, dense or implicit.

    Dense pairs: :func:`mmopt.mechanism.release`. Implicit pairs: :func:`mmopt.structured.release.release`
    (noise on A x at Δ exact or a proven upper bound, rounded upwards; x̂ by factor-wise or LSMR least
    squares, then ``reconstruct`` as in :func:`matrix_mechanism`). Needs OpenDP (``pip install opendp``;
    from a checkout ``pip install -e '.[release]'``).

    The output's ``estimate`` x̂ is flat (n,) for a dense pair (a dense workload, or an implicit workload with a
    dense strategy, which goes the dense way) and shaped like the domain (n₁, …, n_d) for an implicit pair —
    ``kron``, ``stack`` and ``marginals`` return implicit workloads past 4,096 cells, so
    ``out.estimate.ravel()`` (C order, as ``x`` flat) is the form that reads the same at every size.
    ``verbose``: progress on stderr — None (default) once the call passes 10 s, True from the start, False never.
    """
    if unexpected:
        raise unexpected_keywords("release", unexpected, _RELEASE_KEYWORDS, _RELEASE_HINTS)
    _given(strategy, "release")
    strategy = _matrix_on_grouping_sets(workload, strategy)
    if _dense_on_grouping_sets(workload, strategy, reconstruct, total, zeros, reconstruct_options):
        # auto's dense optimum on small grouping sets releases as the families' strategies do (x shaped or flat,
        # answers per grouping set): through the dense path a shaped x was refused (a test of the change). Decided
        # before route(), which would densify the workload for the dense path only to be set aside
        family, W, A = "hierarchy", workload, strategy
    else:
        family, W, A = route(workload, strategy, "release")
    warn_mismatch(strategy, privacy, None, "release")
    kw = dict(noise_scale=noise_scale, reconstruct=reconstruct, total=total, zeros=zeros,
              reconstruct_options=reconstruct_options)
    talk = _runtime.check_verbose(verbose, "release")  # before the draw, as every check
    with _runtime.heavy_call(talk), keeping_draws("release"):  # a Ctrl-C after the draw keeps y on the exception
        return OPS[family]["release"](W, A, x, privacy, **kw)


def _given(strategy, caller: str) -> None:
    """A TypeError for a missing strategy, one message for every workload: each family's own check said it
    differently, naming internal functions, and a stream workload's per-query evaluate raised AttributeError (a
    helper's audit)."""
    if strategy is None:
        raise TypeError(f"The 'strategy' parameter of {caller} must be a strategy: a Strategy or a 2-D array, an "
                        "implicit, Toeplitz or grouping-set strategy, or the .strategy of an OptimizeResult "
                        "(optimize(W, privacy=...) returns one). Got None instead. The lower bound alone, with no "
                        "strategy, is mmopt.svd_bound(W).")


def _matrix_on_grouping_sets(workload, strategy):
    """A 2-D array on a HierarchyWorkload as the Strategy it is: as an array it went the dense way (another output
    type and layout than the same matrix as a Strategy; a helper's audit)."""
    from mmopt.dense._strategy_core import Strategy
    from mmopt.hierarchy.workload import HierarchyWorkload
    if isinstance(workload, HierarchyWorkload) and isinstance(strategy, np.ndarray) and strategy.ndim == 2:
        return Strategy(strategy)
    return strategy


def _dense_on_grouping_sets(workload, strategy, reconstruct, total, zeros, options) -> bool:
    """A HierarchyWorkload with a dense Strategy, released by least squares (the hierarchy release's one)."""
    from mmopt.dense._strategy_core import Strategy
    from mmopt.hierarchy.workload import HierarchyWorkload
    return (isinstance(workload, HierarchyWorkload) and isinstance(strategy, Strategy)
            and reconstruct == "least_squares" and total is None and zeros is None and not options)
