"""Privacy-loss-distribution composition (``composition="pld"``) through Google's ``dp-accounting``.

Notation: see README. The privacy loss distribution of a mechanism (Meiser & Mohammadi 2018; Sommer, Meiser &
Mohammadi 2019; Koskela et al. 2020) composes by convolution, and its hockey-stick divergence gives the
tightest (ε, δ) of the composition that the mechanisms' own noise allows — tighter than zCDP, which bounds
each Gaussian by its Rényi curve. ``dp-accounting`` computes it with *pessimistic* discretisation (every
rounding of the loss moves it upwards). Gaussian releases compose exactly into one Gaussian, whose PLD is built
once (:func:`_gaussians_as_one`); other spends compose by dp-accounting's FFT convolutions, whose floating-point
round-off (~10⁻¹⁵ of the mass per grid point) is not directed: 50 FFT-composed Gaussians at σ/Δ = 1 came out
2·10⁻⁶ below the exact ε at δ = 10⁻⁹ before the merge, and declared spends whose ε lies on the grid (where the
pessimistic rounding adds nothing) came out below the exact composition (Kairouz, Oh & Viswanath's, in mpmath):
5,000 × (0.01, 0) at δ = 10⁻⁶ reported an ε whose exact δ is 1 + 5.5·10⁻⁸ times 10⁻⁶ (a helper's probe). The δ
lost is absolute and grows with the number of composed terms k, not with the grid: measured 1.6·10⁻¹⁴,
6.5·10⁻¹⁴ and 2.5·10⁻¹³ at k = 1,000, 5,000 and 20,000 (ε of 0.002 … 0.1, δ of 10⁻⁵ … 10⁻¹¹), at most
k·u/14 (u = 2⁻⁵³). ε is therefore read at δ − k·u (:data:`FFT_DELTA_PER_TERM`; ≥ 14 times the loss measured,
not a proven bound), δ = 0 as it is (the largest loss, no sum). A single term is composed with nothing, but
reading its ε sums the tail too: ε = 2 at δ = 10⁻¹⁶ came out one ulp low (1.9999999999999998, where randomized
response needs δ = 1.96·10⁻¹⁶ there), so it is read at δ − u as well, and every ε read is rounded up by two
ulps.

What each spend contributes:

* a release whose noise is known — Gaussian of σ at Δ₂, Laplace of b at Δ₁ — the mechanism's own PLD at the
  noise multiplier σ/Δ₂ or b/Δ₁ actually drawn (:attr:`~mmopt.accounting.Spend.noise_multiplier`);
* the check *before* a release draws: the same mechanism at the analytic scale of the requested
  :class:`~mmopt.privacy.Privacy` (σ/Δ from ``Privacy.noise_scale``, b/Δ = 1/ε), which OpenDP's calibration
  never undercuts (its σ is 6–9 % larger), so the drawn noise is at least as private as what was checked;
* a spend declared as (ε, δ) (:meth:`Accountant.spend`) or a pending entry left by an interrupted run: the
  worst (ε, δ)-DP mechanism's PLD (``from_privacy_parameters``), which bounds every (ε, δ)-DP mechanism.

The total is checked as ε(δ_total) of the composition ≤ ε_total. When every term is a Gaussian release they are
one Gaussian exactly, and its own privacy curve decides, on no grid (:func:`one_gaussian`).

The grid of the loss is :func:`grid`: dp-accounting's default 10⁻⁴ for totals ε ≥ 1, 10⁻⁴·ε_total below. The
pessimistic rounding lifts each loss to the grid point above, so a fixed 10⁻⁴ charged a spend of ε = 5·10⁻⁵ as
10⁻⁴ (twelve fitted in a total of 10⁻³, where basic composition fits twenty) and refused every spend under a
total of 10⁻⁴. Relative to the total the rounding costs each spend at most 10⁻⁴ of the total, and the number of
grid points stays that of a total of 1 — for spends of the total's size: a composition whose loss range would
need more than :data:`MAX_POINTS` points is discretised coarser (:func:`loss_grid`; still pessimistic), so that
a spend far past a small total is refused in seconds, not gigabytes.
"""

from __future__ import annotations

import functools
import math

#: dp-accounting's default grid for the privacy loss (its error is bounded by the pessimistic rounding), used for
#: totals ε ≥ 1; below, the grid is this share of the total (:func:`grid`).
DISCRETIZATION = 1e-4


#: δ set aside per composed term for the FFT's undirected round-off (module docstring): u = 2⁻⁵³.
FFT_DELTA_PER_TERM = 2.0**-53
#: the smallest total δ a PLD session takes: room for ~900 composed terms (Gaussians merge into one)
MIN_DELTA = 1e-13


def grid(total_epsilon: float) -> float:
    """The loss grid of a ledger with total ε (module docstring): min(10⁻⁴, 10⁻⁴·ε_total)."""
    return min(DISCRETIZATION, DISCRETIZATION * float(total_epsilon))


#: The most grid points a composition's loss range may take (16 MB a distribution). The grid 10⁻⁴·ε_total of a
#: small total made a spend far past it a distribution of range/grid points: under a total ε of 0.01, checking a
#: Laplace release at ε = 5 took 35–72 s and 3.3 GB before answering no, under 0.001 ε = 1 raised MemoryError
#: at 5.8 GB, and a ledger holding a large Gaussian spend was OOM-killed at 24 GB (a helper's probe).
MAX_POINTS = 2_000_000


def _span(kind: str, a: float, b: float) -> float:
    """An estimate of one term's privacy-loss range: Laplace ±1/b; (ε, δ) ±ε; Gaussian at multiplier σ, losses
    (1 ± 2x)/(2σ²) for |x| ≤ 10σ (dp-accounting cuts its tails at mass e⁻⁵⁰)."""
    if kind == "laplace":
        return 2.0 / a
    if kind == "gaussian":
        return 20.0 / a + 1.0 / (a * a)
    return 2.0 * a


def loss_grid(groups, fine: float) -> float:
    """The loss grid for composing ``groups`` ((term, count), …): ``fine`` (:func:`grid`), or coarser when the
    composition's loss range would need more than :data:`MAX_POINTS` points. dp-accounting's discretisation is
    pessimistic at any grid, so a coarser one only overstates ε (and only for spends far past a small total).

    >>> fine = grid(0.01)
    >>> loss_grid([(("laplace", 0.2, 0.0), 1)], fine) > fine == loss_grid([(("laplace", 200.0, 0.0), 1)], fine)
    True
    """
    span = math.fsum(k * _span(*t) for t, k in groups)
    return max(fine, span / MAX_POINTS) if math.isfinite(span) else fine


def alone_exceeds(term, total_epsilon: float, delta: float) -> bool:
    """True when one release ``term`` = (kind, multiplier, 0) is by itself, exactly, past ``total_epsilon`` at
    ``delta``: every composition with it is too (its output contains this release's), so the check refuses at once
    instead of building the composition's PLD (seconds and up to 2·10⁶ points, :func:`loss_grid`). Exact ε(δ):
    Laplace at b/Δ = a, ε = 1/a + 2 ln(1 − δ); Gaussian at σ/Δ = a, the root of Φ(1/(2a) − εa) −
    eᵉΦ(−1/(2a) − εa) = δ (Balle & Wang 2018), decreasing in ε. A margin of 10⁻⁶ of the total leaves anything
    near the line to the PLD.

    >>> alone_exceeds(("laplace", 0.2, 0.0), 0.01, 1e-6), alone_exceeds(("laplace", 200.0, 0.0), 0.01, 1e-6)
    (True, False)
    """
    from scipy.special import log_ndtr
    kind, a, _ = term
    line = total_epsilon * (1 + 1e-6) + 1e-12
    if kind == "laplace":
        return 1.0 / a + 2.0 * math.log1p(-delta) > line
    if kind != "gaussian" or not delta > 0:
        return False

    def profile(eps: float) -> float:  # δ(ε) of the Gaussian mechanism, in logs (e^ε Φ(·) under- and overflows)
        hi, lo = log_ndtr(0.5 / a - eps * a), eps + log_ndtr(-0.5 / a - eps * a)
        return math.exp(hi) * -math.expm1(lo - hi) if lo < hi else 0.0

    return profile(line) > delta  # δ(ε) decreasing: the release needs more than the total at this δ


EXTRA_HINT = "pip install 'mmopt[accounting]' (Google's dp-accounting)"


def dp_accounting(caller: str):
    """The dp_accounting.pld module, or an ImportError naming the extra."""
    try:
        from dp_accounting.pld import common, privacy_loss_distribution
    except ImportError as exc:
        raise ImportError(f"{caller}: composition='pld' needs Google's dp-accounting, which is not installed: "
                          f"{EXTRA_HINT}.") from exc
    return privacy_loss_distribution, common


@functools.lru_cache(maxsize=4096)
def _one(kind: str, a: float, b: float, step: float):
    pld, common = dp_accounting("Accountant")
    if kind == "gaussian":
        return pld.from_gaussian_mechanism(standard_deviation=a, sensitivity=1.0,
                                           value_discretization_interval=step)
    if kind == "laplace":
        return pld.from_laplace_mechanism(parameter=a, sensitivity=1.0, value_discretization_interval=step)
    return pld.from_privacy_parameters(common.DifferentialPrivacyParameters(a, b),
                                       value_discretization_interval=step)


def term(spend) -> tuple[str, float, float]:
    """(kind, a, b) of one ledger entry: ("gaussian"|"laplace", multiplier, 0) or ("generic", ε, δ)."""
    if (spend.source == "release" and spend.status == "spent" and spend.noise in ("gaussian", "laplace")
            and spend.noise_multiplier):
        return spend.noise, float(spend.noise_multiplier), 0.0
    return "generic", float(spend.epsilon), float(spend.delta)


@functools.lru_cache(maxsize=64)
def _composed(groups: tuple, step: float):
    """The PLD of ((term, count), …): equal spends self-compose (one FFT power, not k convolutions; the Gaussians
    arrive merged into one, :func:`_gaussians_as_one`). Cached, so
    the ledger's recorded spends are composed once for all the checks made against them (remaining's bisection
    asks ~25)."""
    out = None
    for t, k in groups:
        part = _one(*t, step) if k == 1 else _one(*t, step).self_compose(k)
        out = part if out is None else out.compose(part)
    return out


def epsilon(terms, delta: float, extra=(), step: float = DISCRETIZATION) -> float:
    """ε at ``delta`` of the composition of ``terms`` and then ``extra`` (0 for none) on the loss grid ``step``
    (:func:`grid`); inf when no finite ε holds at that δ."""
    from collections import Counter
    terms = _gaussians_as_one([*terms, *extra])
    sigma = one_gaussian(terms)
    if sigma is not None and delta > 0:  # one Gaussian: its exact profile, rounded up, on no grid
        from mmopt.privacy import gaussian_epsilon
        return gaussian_epsilon(sigma, delta)
    groups = tuple(sorted(Counter(terms).items()))
    base = _composed(groups, loss_grid(groups, step)) if terms else None
    if base is None:
        return 0.0
    if delta > 0:  # the FFT's round-off, set aside (module docstring); one term too: get_epsilon_for_delta's sum
        delta -= FFT_DELTA_PER_TERM * len(terms)
        if delta <= 0:
            return math.inf
    # rounded up by two ulps: the ε computed from the tail is the float nearest the exact one, below it half the
    # time (one ε = 1 spend read at δ = 10⁻⁹: 0.9999999986321205, whose exact δ is (1 + 2.5·10⁻⁸)·10⁻⁹)
    e = float(base.get_epsilon_for_delta(delta))
    return math.nextafter(math.nextafter(e, math.inf), math.inf) if e > 0 else e


def one_gaussian(terms) -> float | None:
    """σ/Δ₂ of the one Gaussian that ``terms`` compose into exactly (:func:`_gaussians_as_one`), or None when some
    term is not a Gaussian release (or there is none).

    Its (ε, δ) is then exact: the Gaussian's own privacy curve (Balle & Wang 2018), read without dp-accounting's
    grid and without the δ − u allowance for its FFT (a single term read at δ − u refused a release of exactly the
    total at δ = 10⁻⁹, ε read 3.5·10⁻⁹ above it at ε = 1, that basic and zCDP composition accept).

    >>> one_gaussian([("gaussian", 2.0, 0.0)] * 4), one_gaussian([("gaussian", 2.0, 0.0), ("laplace", 1.0, 0.0)])
    (0.9999999999999992, None)
    """
    merged = _gaussians_as_one(list(terms))
    return merged[0][1] if len(merged) == 1 and merged[0][0] == "gaussian" else None


def _gaussians_as_one(terms: list) -> list:
    """The Gaussian releases as one Gaussian of multiplier (Σ 1/σᵢ²)^{−1/2}, the others as they are.

    Gaussian mechanisms compose *exactly* into a Gaussian (their privacy-loss distributions are Gaussians whose
    means and variances add; Dong, Roth & Su 2022, Cor. 2), so one pessimistically discretised PLD replaces k
    convolutions. Those were FFT products, whose round-off is not rounded in the safe direction: 50 releases at
    σ/Δ = 1 reported ε = 66.687987 at δ = 10⁻⁹ where the exact one is 66.687989. The merged multiplier is at most
    the exact (Σ 1/σᵢ²)^{−1/2}, which only adds loss: every correctly rounded step is moved one float in the safe
    direction (1/σᵢ, its square, the sum and the root up, the last reciprocal down). Two ulps off the nearest
    float were not enough: the five roundings reach ~3u, two ulps near the top of a binade only 2u (90 of 200,000
    ledgers of 2–50 equal σ ∈ [0.05, 10⁴] merged up to 0.65u above the exact σ; a helper's Fraction oracle)."""
    gaussian = [t for t in terms if t[0] == "gaussian"]
    if len(gaussian) < 2:
        return terms
    def up(a: float) -> float:  # the next float up: above the exact value that ``a`` is the correct rounding of
        return math.nextafter(a, math.inf)

    def square_up(a: float) -> float:
        r = up(1.0 / a)  # ≥ 1/a
        return up(r * r)  # ≥ 1/a²

    precision = up(math.fsum(square_up(t[1]) for t in gaussian))  # ≥ Σ 1/σᵢ²; inf past float64: not merged
    sigma = math.nextafter(1.0 / up(math.sqrt(precision)), 0.0)  # ≤ (Σ 1/σᵢ²)^{−1/2}
    if not sigma > 0.0:
        return terms
    return [t for t in terms if t[0] != "gaussian"] + [("gaussian", sigma, 0.0)]
