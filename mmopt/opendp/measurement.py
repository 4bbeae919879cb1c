"""The records release as an OpenDP ``Measurement``: OpenDP's privacy map, OpenDP's noise, mmopt's strategy.

Notation: see README and :mod:`mmopt.records.mechanism`. The measurement is the chain

    records ──T──▶ A x ∈ ℝᵖ ──make_gaussian(σ) / make_laplace(b)──▶ y ──post──▶ RecordsRelease

* **T** (``make_user_transformation``): input domain :func:`records_domain` (tables of records over a public
  :class:`~mmopt.records.Domain`), input metric ``symmetric_distance`` (records added or removed); output
  ``vector_domain(atom_domain(float))`` under ``l2_distance`` (Gaussian) or ``l1_distance`` (Laplace). Its
  stability map is d_in ↦ d_in·Δ, rounded upwards: a record adds a unit vector e_c to the data vector x, so
  records at symmetric distance k give ‖A(x − x')‖ ≤ Σ ‖A e_c‖ ≤ k·Δ (triangle inequality), with equality when the
  k records share a cell — the map is exact in d_in. Δ is the strategy's exact column norm
  (:func:`mmopt.records.plans.sensitivity`), rounded upwards.
* **The noise** is OpenDP's own ``make_gaussian`` (output measure ``zero_concentrated_divergence``: ρ = (d_in·Δ)²/2σ²)
  or ``make_laplace`` (``max_divergence``: ε = d_in·Δ/b). OpenDP composes the two maps, so the privacy map of the
  whole measurement is OpenDP's, and any OpenDP compositor or ``Context`` accounts for it and refuses to overspend.
* **post** (``new_function``): least squares on y (:func:`mmopt.records.mechanism.assemble`), post-processing.

With the same strategy and noise scale, the transformation computes A x exactly as
:func:`~mmopt.records.release_marginals` does and ``post`` computes the same marginals from the same y, bit for bit
(``tests/test_opendp_measurement.py``).

**OpenDP features.** ``contrib`` (``make_gaussian``, ``make_laplace``: the samplers every mmopt release already
uses) and ``honest-but-curious`` (``user_domain``, ``make_user_transformation``, ``new_function``: OpenDP cannot
check user-written maps, so it asks the caller to vouch for them). They are safe here because (1) the domain's
member test is a pure type test; (2) the stability map is the proof above, with Δ exact and rounded upwards; (3)
the function reads the records and nothing else, and raises only on public facts (a missing column, a wrong
dtype, an unreadable file), never on a value of the data; (4) ``post`` is pure least squares, and turns any
failure into a warning. ``honest-but-curious`` is switched on only while these pieces are built and restored to
its previous state afterwards, so the caller's own code is never granted it silently; ``contrib`` stays on, as
elsewhere in mmopt. As in every mmopt release, the map bounds the exact answers A x; their float64 rounding is
that of ``release_marginals``.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
from fractions import Fraction

import numpy as np

from mmopt._base import opendp as _opendp
from mmopt._base import validation as v
from mmopt.privacy import Privacy
from mmopt.records import mechanism as mc
from mmopt.records import read as rd
from mmopt.records.domain import Domain, check_domain
from mmopt.records.read import is_records

__all__ = ["FEATURES", "make_matrix_mechanism", "records_domain", "records_space"]

#: The OpenDP features the measurement is built with (module docstring: why each is safe here).
FEATURES = ("contrib", "honest-but-curious")

_CALLER = "make_matrix_mechanism"


_dp = _opendp.prelude  # opendp.prelude with "contrib" on, or an ImportError saying how to install it


@contextlib.contextmanager
def vouched(dp):
    """``honest-but-curious`` on while mmopt's own user-defined pieces are built, then back as it was."""
    from opendp.mod import GLOBAL_FEATURES
    had = "honest-but-curious" in GLOBAL_FEATURES
    dp.enable_features("honest-but-curious")
    try:
        yield
    finally:
        if not had:
            dp.disable_features("honest-but-curious")


def records_domain(domain: Domain):
    """OpenDP's input domain of the measurement: tables of records over the public ``domain``.

    A ``user_domain`` whose identifier names the domain by its JSON's SHA-256 (two domains chain only if equal)
    and whose member test is :func:`mmopt.records.read.is_records`. Needs OpenDP.
    """
    check_domain(domain, caller="records_domain")
    dp = _dp("records_domain")
    digest = hashlib.sha256(domain.to_json().encode("utf-8")).hexdigest()[:32]
    with vouched(dp):
        return dp.user_domain(f"MmoptRecords(attributes={list(domain.names)}, sha256={digest})", member=is_records)


def records_space(domain: Domain) -> tuple:
    """(:func:`records_domain`, ``symmetric_distance()``): the input space, as ``dp.space_of`` returns one."""
    return records_domain(domain), _dp("records_space").symmetric_distance()


def scaled(d_in, sensitivity: float) -> float:
    """d_in·Δ rounded upwards to a float (exact rational product, then the next float up if inexact).

    Examples
    --------
    >>> scaled(3, 0.1) >= 3 * Fraction(0.1), scaled(0, 2.0)
    (True, 0.0)
    """
    exact = Fraction(int(d_in)) * Fraction(sensitivity)
    out = float(exact)
    return math.nextafter(out, math.inf) if Fraction(out) < exact else out


def _noise_of(dp, output_measure, caller: str) -> str:
    if output_measure == dp.zero_concentrated_divergence():
        return "gaussian"
    if output_measure == dp.max_divergence():
        return "laplace"
    raise ValueError(f"The 'output_measure' parameter of {caller} must be dp.zero_concentrated_divergence() "
                     f"(Gaussian noise, ρ-zCDP) or dp.max_divergence() (Laplace noise, ε-DP). Got {output_measure} "
                     "instead. For (ε, δ), wrap the measurement: dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(m), "
                     "delta).")


def make_matrix_mechanism(input_domain, input_metric, output_measure, domain: Domain, workload, scale=None, *,
                          privacy: Privacy | None = None, strategy=None, batch_size: int = rd.BATCH_ROWS):
    """An OpenDP ``Measurement`` that releases the marginals of ``workload`` from records by the matrix mechanism.

    The signature follows OpenDP's constructors (``make_gaussian(input_domain, input_metric, scale)``, the
    output measure chosen by the caller): the input space is :func:`records_space` (``domain``), the noise is set
    by ``scale`` or calibrated from ``privacy``. Module docstring: the chain, its exact map, the features.

    Parameters
    ----------
    input_domain : opendp Domain
        :func:`records_domain` (``domain``) (checked).
    input_metric : opendp Metric
        ``dp.symmetric_distance()``: d_in records added or removed.
    output_measure : opendp Measure
        ``dp.zero_concentrated_divergence()`` (Gaussian noise; map: ρ = (d_in·Δ₂)²/2σ²) or ``dp.max_divergence()``
        (Laplace noise; map: ε = d_in·Δ₁/b).
    domain : Domain
        The public domain of the records (records outside it are dropped, a public rule).
    workload : int, str or list of tuple
        As :func:`mmopt.records.release_marginals` (``()`` is the grand total).
    scale : float or None
        σ or b of each measured entry; or None with ``privacy``.
    privacy : Privacy or None
        Instead of ``scale``: the noise scale :func:`~mmopt.records.release_marginals` uses for this budget
        (δ > 0 with the zCDP measure, δ = 0 with the max-divergence measure). The measurement's map still reports
        OpenDP's ρ or ε for any d_in.
    strategy : as :func:`mmopt.records.release_marginals`; None: the best for the noise (chosen without data).
    batch_size : int
        Rows per batch when counting.

    Returns
    -------
    opendp.mod.Measurement
        Its function takes a source of records (DataFrame, path, …) and returns a
        :class:`~mmopt.records.RecordsRelease` (``sampler="opendp"``); ``epsilon``/``delta`` are the ``privacy``
        given, or NaN with ``scale`` alone (the loss is then the map's).

    Examples
    --------
    >>> import opendp.prelude as dp, pandas as pd, mmopt
    >>> from mmopt.records import Attribute, Domain
    >>> D = Domain((Attribute("sex", categories=("F", "M")), Attribute("region", categories=("N", "S", "W"))))
    >>> m = make_matrix_mechanism(*records_space(D), dp.zero_concentrated_divergence(), D, [("sex",), ()], 10.0)
    >>> m.map(1) == m.map(2) / 4      # ρ(d_in) = (d_in·Δ₂)²/2σ²: exact in d_in
    True
    >>> r = m(pd.DataFrame({"sex": ["F", "M"] * 50, "region": ["N", "S"] * 50}))
    >>> r.sampler, sorted(r.marginals)
    ('opendp', [(), (0,)])
    """
    T, noise, release = pieces(input_domain, input_metric, output_measure, domain, workload, scale,
                               privacy=privacy, strategy=strategy, batch_size=batch_size)
    return T >> noise >> release


def pieces(input_domain, input_metric, output_measure, domain: Domain, workload, scale=None, *,
           privacy: Privacy | None = None, strategy=None, batch_size: int = rd.BATCH_ROWS) -> tuple:
    """(T, the noise measurement, the post-processing Function) of :func:`make_matrix_mechanism`, unchained:
    for tests and for callers who want A x under their own OpenDP noise."""
    caller = _CALLER
    # checked here, not when the measurement is invoked on data (an OpenDPException wrapping the records' message)
    batch_size = v.check_int(batch_size, name="batch_size", caller=caller)
    dp, noise = check_space(input_domain, input_metric, output_measure, domain, scale, privacy, caller)
    # only the noise and its norm steer the plan; the stand-in budget's ε, δ are not used
    planned = privacy if privacy is not None else (Privacy(1.0, 1e-9) if noise == "gaussian" else Privacy(1.0))
    prep = mc.prepare(domain, workload, planned, strategy, caller)
    Delta = prep.sensitivity
    if privacy is not None:  # the scale release_marginals draws at for this budget (same search, same map)
        _, scale, _ = _opendp.calibrate(prep.n_answers, Delta, privacy, noise_scale=None, caller=caller)
        epsilon, delta = privacy.epsilon, privacy.delta
    else:
        scale = check_scale(scale, caller)
        epsilon = delta = math.nan
    rho = rho_of(Delta, scale) if noise == "gaussian" else None

    def answers(records):
        return mc.strategy_answers(prep, records, batch_size=batch_size, caller=caller)[1].tolist()

    def post(y):
        return mc.assemble(prep, np.asarray(y, dtype=np.float64), noise=noise, scale=scale, epsilon=epsilon,
                           delta=delta, rho=rho, sampler="opendp", caller=caller)

    out_domain = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=prep.n_answers)
    out_metric = dp.l2_distance(T=float) if noise == "gaussian" else dp.l1_distance(T=float)
    with vouched(dp):
        T = dp.t.make_user_transformation(input_domain, input_metric, out_domain, out_metric, function=answers,
                                          stability_map=lambda d_in: scaled(d_in, Delta))
        release = dp.new_function(post, TO="ExtrinsicObject")
    make = dp.m.make_gaussian if noise == "gaussian" else dp.m.make_laplace
    return T, make(out_domain, out_metric, scale), release


def check_space(input_domain, input_metric, output_measure, domain: Domain, scale, privacy, caller: str):
    """(OpenDP's prelude, "gaussian" or "laplace") after checking a records measurement's arguments: the input
    space is :func:`records_space` (``domain``), exactly one of ``scale`` and ``privacy``, and ``privacy``'s noise
    is the output measure's."""
    dp = _dp(caller)
    noise = _noise_of(dp, output_measure, caller)
    if input_metric != dp.symmetric_distance():
        raise ValueError(f"The 'input_metric' parameter of {caller} must be dp.symmetric_distance() (records added "
                         f"or removed). Got {input_metric} instead.")
    check_domain(domain, caller=caller)
    if input_domain != records_domain(domain):
        raise ValueError(f"The 'input_domain' parameter of {caller} must be mmopt.opendp.records_domain(domain) for "
                         f"the same domain. Got {input_domain} instead.")
    if (scale is None) == (privacy is None):
        raise ValueError(f"{caller} needs exactly one of 'scale' (the noise scale) and 'privacy' (a budget to "
                         f"calibrate it). Got {'both' if scale is not None else 'neither'}.")
    if privacy is not None:
        if not isinstance(privacy, Privacy):
            raise TypeError(f"The 'privacy' parameter of {caller} must be a Privacy or None. "
                            f"Got {type(privacy).__name__} instead.")
        if privacy.noise != noise:
            raise ValueError(f"The 'privacy' parameter of {caller} asks for {privacy.noise} noise ({privacy}), but "
                             f"'output_measure' is {output_measure} ({noise} noise). Use delta > 0 with "
                             "zero_concentrated_divergence, delta = 0 with max_divergence.")
    return dp, noise


def check_scale(scale, caller: str) -> float:
    scale = v.check_real(scale, name="scale", caller=caller, low=0.0, low_open=True)
    if not math.isfinite(scale):
        raise ValueError(f"The 'scale' parameter of {caller} must be finite. Got {scale!r} instead.")
    return float(scale)


def rho_of(sensitivity: float, scale: float) -> float:
    from mmopt.accounting._zcdp import gaussian_rho
    return gaussian_rho(sensitivity, scale)
