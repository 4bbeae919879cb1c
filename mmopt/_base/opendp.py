"""The release path's noise: OpenDP's vetted samplers, with the privacy of every measurement verified.

Notation: see README. :func:`measure` adds noise to the exact strategy answers A x through
``opendp.measurements.make_laplace`` (δ = 0; input metric ``l1_distance``, d_in = Δ₁) or ``make_gaussian`` →
``make_zCDP_to_approxDP`` → ``make_fix_delta(δ)`` (δ > 0; ``l2_distance``, d_in = Δ₂), at the smallest
scale OpenDP accepts (``dp.binary_search_param``) or a given one, and checks OpenDP's own privacy map
against (ε, δ) before it touches the data. Shared by the dense and the implicit (product) release.

Both samplers draw on a lattice 2^k coarser than OpenDP's default 2⁻¹⁰⁷⁴, whose arbitrary-precision arithmetic
cost 22 µs a Laplace and 59 µs a Gaussian draw on one core (7–9 and 14–18 µs on the lattices below). OpenDP rounds
the input to the lattice and its map charges the rounding as more sensitivity: n·2^k in L1 (Laplace, k from the
scale and n: :func:`lattice_exponent`; the ledger takes the ε OpenDP verified), 2^k·√n in L2 (Gaussian, k from Δ
alone: :func:`gaussian_lattice`, so that the ledger can recompute the charge from (Δ, σ) without n:
:func:`charged_sensitivity`). Either way at most 2⁻³⁰·Δ.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from mmopt._base import guards, kept
from mmopt._base import validation as v
from mmopt.privacy import Privacy

#: The largest ε at which OpenDP's Gaussian calibration (zCDP → (ε, δ)) is known to work: it overflowed from
#: ε = 2·10⁴ (δ = 10⁻⁶; ε = 26,171 in mmopt.plan), worked at 10⁴
GAUSSIAN_MAX_EPSILON = 1e4
#: the ε past which a release is warned about: e^ε is then above 10⁸ (the US Census Bureau's 2020 redistricting
#: data spent ε ≈ 17.1 in all)
LARGE_EPSILON = 20.0

#: Noise draws started in this process (OpenDP's, and numpy's on the seeded test path): the command line holds
#: Ctrl-C only once one has started (:func:`mmopt.cli.output.signals_held`), so that an interrupted plan or count
#: still stops at once and spends nothing.
DRAWS = 0


def note_draw() -> None:
    """Count a noise draw about to start (see :data:`DRAWS`)."""
    global DRAWS
    DRAWS += 1


def prelude(caller: str):
    """``opendp.prelude`` with the "contrib" feature on, or an ImportError saying how to install OpenDP."""
    try:
        import opendp.prelude as dp
    except ImportError:
        raise ImportError(f"{caller} needs OpenDP. Install it with: pip install opendp "
                          "(from a checkout: pip install -e '.[release]')") from None
    dp.enable_features("contrib")
    return dp


def calibrate(n: int, d_in: float, privacy: Privacy, *, noise_scale: float | None, caller: str):
    """(OpenDP's measurement on float vectors of length n, its scale, its verified loss at d_in); draws nothing.

    ``noise_scale`` None: the smallest scale whose map OpenDP verifies at (ε, δ) (``dp.binary_search_param``).
    """
    dp = prelude(caller)
    gaussian = privacy.noise == "gaussian"
    d_out = (privacy.epsilon, privacy.delta) if gaussian else privacy.epsilon
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=int(n))
    if noise_scale is not None:
        noise_scale = v.check_real(noise_scale, name="noise_scale", caller=caller, low=0.0, low_open=True)
    floor = calibrated_scale(privacy, d_in, caller) if noise_scale is None else noise_scale
    # the lattice is fixed for the whole search (the map stays monotone in the scale): Laplace's from the analytic
    # scale and n; Gaussian's from Δ alone, the search made on the default lattice at the charged sensitivity Δ'
    # (what the ledger recomputes ρ from), the draw on the lattice at Δ, whose map is at most the charged one
    k = gaussian_lattice(d_in) if gaussian else lattice_exponent(floor, d_in, n)
    charged = charged_sensitivity(d_in) if gaussian else d_in

    def make(scale: float, lattice=k):
        if not gaussian:
            return dp.m.make_laplace(domain, dp.l1_distance(T=float), scale, k=lattice)
        meas = dp.m.make_gaussian(domain, dp.l2_distance(T=float), scale, k=lattice)
        return dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(meas), privacy.delta)

    search = (lambda scale: make(scale, None)) if gaussian else make
    if noise_scale is None:
        try:
            scale = dp.binary_search_param(search, d_in=charged, d_out=d_out, bounds=(floor / 2, 16 * floor))
        except (ValueError, dp.OpenDPException) as exc:
            # past ε ≈ 10⁴ OpenDP's zCDP → (ε, δ) conversion overflows (exp of ~766): its message spoke of Rust's
            # inf_exp and "tightening your parameters" (a helper's probe)
            hint = (f" Under Gaussian noise OpenDP's conversion from zCDP to (ε, δ) overflows past epsilon ≈ "
                    f"{GAUSSIAN_MAX_EPSILON:g}: pass epsilon ≤ {GAUSSIAN_MAX_EPSILON:g} (σ is then under 1 % of "
                    "the sensitivity). Nothing was drawn."
                    if gaussian and privacy.epsilon > GAUSSIAN_MAX_EPSILON else "")
            raise ValueError(f"{caller}: OpenDP found no noise scale satisfying {privacy}: {exc}{hint}") from None
    else:
        scale = noise_scale
    meas, charge = make(scale), search(scale)
    try:
        verified = meas.check(d_in, d_out) and charge.check(charged, d_out)
    except dp.OpenDPException:  # e.g. overflow in the map at an extreme scale: not verified
        verified = False
    if not verified:
        raise ValueError(f"{caller}: OpenDP's privacy map does not verify {privacy} at noise scale "
                         f"{scale:.6g} (sensitivity {d_in:.6g}). Omit 'noise_scale' to calibrate it.")
    return meas, float(scale), charge.map(charged)


def lattice_exponent(scale: float, sensitivity: float, n: int) -> int:
    """k of OpenDP's Laplace lattice 2^k for n measurements at this scale and L1 sensitivity Δ:
    k = min(⌊log₂ scale⌋ − 40, ⌊log₂(Δ/n)⌋ − 30), never finer than OpenDP's default 2⁻¹⁰⁷⁴.

    OpenDP draws Laplace noise exactly on the lattice 2^k and rounds the input to it; its privacy map charges the
    rounding as n·2^k more sensitivity, here ≤ 2⁻³⁰·Δ: the loss it verifies moves by ≤ 10⁻⁹ relative, which the
    calibration absorbs (a release reports that verified loss). The default lattice costs arbitrary-precision
    arithmetic per draw: one core drew a sample in 22 µs there and in 7–9 µs on lattices 40 to 80 bits below the
    scale (scale 3.7).

    >>> lattice_exponent(3.7, 1.0, 10), lattice_exponent(3.7, 1.0, 10**6), lattice_exponent(1e-320, 1e-320, 1)
    (-39, -50, -1074)
    """
    k = math.floor(math.log2(scale)) - 40
    if sensitivity > 0:
        k = min(k, math.floor(math.log2(sensitivity / n)) - 30)
    return max(-1074, k)


def gaussian_lattice(sensitivity: float) -> int:
    """k of OpenDP's Gaussian lattice 2^k at L2 sensitivity Δ > 0: max(−1074, ⌊log₂ Δ⌋ − 46), for any number of
    measurements (:func:`charged_sensitivity`). The draw stays fine-grained at every budget a release meets: σ/2^k
    = 2⁴⁶·σ/Δ, over 2²⁶ lattice points a standard deviation down to a noise multiplier σ/Δ of 2⁻²⁰.

    >>> gaussian_lattice(1.0), gaussian_lattice(3.0), gaussian_lattice(1e-320)
    (-46, -45, -1074)
    """
    return max(-1074, math.frexp(sensitivity)[1] - 1 - 46)


#: A factor above √n for every vector OpenDP's Gaussian measurement accepts (its size is an i32: n ≤ 2³¹ − 1)
_ROOT_MAX_SIZE = 46341.0


def charged_sensitivity(sensitivity: float) -> float:
    """Δ' = Δ + 2^k·46,341, rounded up, k = :func:`gaussian_lattice` (Δ): at least the L2 sensitivity OpenDP's
    ``make_gaussian`` charges on the lattice 2^k for any n ≤ 2³¹ − 1 measurements (its map adds 2^k·√n to Δ, rounded
    up: the rounding of the input to the lattice), at most (1 + 2⁻³⁰)·Δ. A Gaussian release is
    calibrated at Δ' (:func:`calibrate`), and its ledger entry's ρ = Δ'²/(2σ²) and noise multiplier σ/Δ' are
    computed from it (:mod:`mmopt.accounting._spends`): the same number, from the release's (Δ, σ) alone.

    >>> d = charged_sensitivity(1.0)
    >>> 1.0 < d <= 1.0 + 2.0 ** -30
    True
    """
    k = gaussian_lattice(sensitivity)
    return math.nextafter(sensitivity + math.ldexp(_ROOT_MAX_SIZE, k), math.inf)


def measure(Ax: np.ndarray, d_in: float, privacy: Privacy, *, noise_scale: float | None, caller: str
            ) -> tuple[np.ndarray, float, float | tuple]:
    """(y = A x + OpenDP noise, the noise scale used, OpenDP's verified loss at d_in).

    ``d_in`` must be an exact sensitivity or a proven upper bound of it (rounded upwards).
    """
    check_sampler_memory(Ax.shape[0], caller)
    if privacy.epsilon > LARGE_EPSILON:
        # ε = 1e300 released the true counts to 14 digits without a word, where δ = 0.5 is warned about (a
        # newcomer's audit); a deliberate choice stays possible
        warnings.warn(f"{caller}: ε = {privacy.epsilon:g} bounds how much one record may change the output's "
                      f"probabilities by a factor e^ε (above 10⁸ past ε = {LARGE_EPSILON:g}): no protection in "
                      "practice, and the answers are close to the true counts. Release at this budget only if "
                      "that is intended.", UserWarning, stacklevel=3)
    meas, scale, loss = calibrate(Ax.shape[0], d_in, privacy, noise_scale=noise_scale, caller=caller)
    note_draw()
    y = np.asarray(meas(Ax.tolist()), dtype=np.float64)
    kept.keep(y, scale, loss, caller, privacy.noise)  # before any check that may raise: the budget is spent
    return finite(y, "the noisy measurements y", caller), scale, loss


#: Bytes OpenDP's vector samplers hold per measurement while they draw (a Python list in, Rust vectors, a list
#: out): ~480 measured at 10⁶ (RSS 89 → 568–586 MB), so 10⁷ measurements need ~5 GB, not the 80 MB of y itself
SAMPLER_BYTES = 512


def check_sampler_memory(n: int, caller: str) -> None:
    """Refuse, before anything is drawn, a draw of ``n`` measurements OpenDP's sampler has no memory for: it aborted
    the process (a Rust allocation failure Python cannot catch) where 8 bytes a measurement had been checked."""
    guards.check_working_set({f"OpenDP's sampler on {n:,} measurements (~{SAMPLER_BYTES} bytes each)":
                              n * SAMPLER_BYTES // 8}, what=f"drawing {n:,} noisy measurements through OpenDP",
                             caller=caller, remedy=" Measure fewer queries (a smaller strategy, fewer marginals), or "
                             "draw on a machine with more memory.")


def calibrated_scale(privacy: Privacy, sensitivity: float, caller: str) -> float:
    """b or σ at this sensitivity; refused when it over- or underflows (no noise, or only inf, would be added)."""
    with np.errstate(over="ignore", under="ignore"):
        unit = privacy.unit_noise_scale
        scale = sensitivity * unit
    if not math.isfinite(scale) or scale < np.finfo(float).tiny:
        raise ValueError(f"{caller}: the noise scale Δ·{'b' if privacy.noise == 'laplace' else 'σ'}(Δ=1) = "
                         f"{sensitivity:.3g}·{unit:.3g} is {scale!r}, outside float64's normal range, so the noise "
                         f"cannot be drawn. Use a moderate {privacy} or rescale the strategy.")
    return scale


def simulation_scale(privacy: Privacy, sensitivity: float, noise_scale, caller: str) -> float:
    """A simulation's b or σ: :func:`calibrated_scale`, or ``noise_scale`` (e.g. a release's ``out.noise_scale``,
    to simulate at the σ OpenDP drew), which must not be below it: noise that small is not the mechanism
    ``privacy`` names, and the output would carry that budget's label."""
    floor = calibrated_scale(privacy, sensitivity, caller)
    if noise_scale is None:
        return floor
    scale = v.check_real(noise_scale, name="noise_scale", caller=caller, low=0.0, low_open=True)
    if scale < floor * (1 - 1e-9):
        from mmopt._base.rounding import up  # rounded up: the floor to the nearest was refused when passed
        raise ValueError(f"The 'noise_scale' parameter of {caller} must be >= {up(floor)}, the scale {privacy} "
                         f"sets at sensitivity {up(sensitivity)}. Got {scale:.6g} instead. Omit it to simulate "
                         "at that scale, or pass a release's out.noise_scale.")
    return scale


def finite(a: np.ndarray, what: str, caller: str) -> np.ndarray:
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{caller}: {what} overflowed float64 (noise or counts too large). Use smaller counts "
                         "or a larger privacy budget.")
    return a


def post_process(caller: str, primary, fallback, what: str):
    """``primary()``, the release's post-processing after its noise was drawn; never loses a spent budget.

    If it fails (a solver that does not converge or runs out of memory, an estimate that overflows), the budget
    is already spent, so raising would throw the measurements away: ``fallback()`` (least squares) runs instead,
    with a warning naming the failure; if that fails too, None (the caller returns the measurements alone).
    A programming error (TypeError, AttributeError, …) still raises; the ledger keeps the spend
    (:mod:`mmopt.accounting._pending`).
    """
    from mmopt.solvers import SolverError  # lazy: keeps this module free of the solver layer at import

    # MemoryError and RuntimeError (a solver's, LAPACK's) lost a spent release (a helper's probe)
    failures = (SolverError, ValueError, ArithmeticError, MemoryError, RuntimeError, np.linalg.LinAlgError)
    try:
        return primary()
    except failures as exc:
        warnings.warn(f"{caller}: the noise was drawn (the budget is spent), but {what} failed: "
                      f"{type(exc).__name__}: {exc} Returning the least-squares estimate instead.", RuntimeWarning,
                      stacklevel=3)
    try:
        return fallback()
    except failures as exc:
        warnings.warn(f"{caller}: the least-squares estimate failed too ({exc}); only the noisy measurements "
                      "are returned.", RuntimeWarning, stacklevel=3)
        return None


def gaussian_sampler(dimension: int, scale: float, caller: str):
    """A function drawing one vector of ``dimension`` independent N(0, ``scale``²) values through OpenDP's
    ``make_gaussian`` (applied to zeros: the noise alone, for a caller that adds it to its own data, e.g. the
    correlated noise of :mod:`mmopt.participation.noise`). Each call counts as a draw (:data:`DRAWS`).

    The privacy of what the noise protects is the caller's to account (e.g.
    :func:`mmopt.participation.noise.run_privacy`) at Δ²/(2σ²): so the draw keeps OpenDP's default lattice (every
    float a multiple of its 2⁻¹⁰⁷⁴), since the caller adds it to data that no lattice rounding protects (on a
    coarser one, x + noise would reveal x modulo the lattice). Here only the scale is checked: positive, finite,
    and large enough for float64 (:func:`calibrated_scale`'s floor).
    """
    dp = prelude(caller)
    p = v.check_int(dimension, name="dimension", caller=caller)
    scale = v.check_real(scale, name="scale", caller=caller, low=0.0, low_open=True)
    if scale < np.finfo(float).tiny:
        raise ValueError(f"{caller}: the noise scale {scale!r} is below float64's normal range; no noise would be "
                         "added.")
    check_sampler_memory(p, caller)
    meas = dp.m.make_gaussian(dp.vector_domain(dp.atom_domain(T=float, nan=False), size=p), dp.l2_distance(T=float),
                              scale)
    zeros = [0.0] * p

    def draw() -> np.ndarray:
        note_draw()
        return finite(np.asarray(meas(zeros), dtype=np.float64), "the Gaussian draws", caller)

    return draw
