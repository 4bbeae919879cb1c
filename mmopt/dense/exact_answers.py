"""The strategy answers A x of a release, computed so that their float64 rounding is part of the privacy proof.

Notation: see README. OpenDP's measurement adds noise calibrated to d_in ≥ ‖ŷ(x) − ŷ(x′)‖ for the vector ŷ it is
given, the *computed* A x, not the exact one. A BLAS product rounds every partial sum: its error is bounded only by
γ_n·|A||x| (γ_n = n·u/(1 − n·u), u = 2⁻⁵³), which grows with the number of cells n and with the counts, and a
neighbouring x′ = x + e_j moves it differently. Measured: a 64×64 lower-triangular strategy with every column at
Δ₁ = 1 and counts up to 2²⁶ (2.1·10⁹ records): ‖ŷ(x′) − ŷ(x)‖₁ = 1 + 1.3·10⁻⁸, where the release's d_in (Δ rounded
upwards) allowed 3·10⁻¹⁴; on the optimised strategy for prefix sums of 256 steps, counts ~10⁶ (2.6·10⁸ records),
1 + 4.9·10⁻⁹ of Δ₁.

Here every entry is the *correctly rounded* exact sum: each product a·x is split exactly into four products of
26-bit halves (Dekker's split; each product of two halves fits float64's 53 bits, so it is exact unless it is
subnormal, where it is off by < 2⁻¹⁰⁷⁴ — never for whole counts, whose products are multiples of 2⁻¹⁰⁷⁴) and
``math.fsum`` rounds their exact sum once. So |ŷ_i − y_i| ≤ u·|y_i| + η with η = (4n + 1)·2⁻¹⁰⁷⁴ (0 in fact for
whole counts, charged anyway), and for neighbours x, x′ (‖x‖₁, ‖x′‖₁ ≤ N + 1)

    ‖ŷ(x) − ŷ(x′)‖_p ≤ Δ_p + u·(‖A x‖_p + ‖A x′‖_p) + 2‖η‖_p ≤ Δ_p·(1 + u·(2N + 1)) + 2·m^{1/p}·η,

since ‖A x‖_p ≤ Σ_j x_j ‖A e_j‖_p ≤ ‖x‖₁·Δ_p. This needs a public bound N on the number of records, the
:data:`MAX_RECORDS` of the guarantee's domain: at 2³² the charge is 9.5·10⁻⁷ of Δ (the noise scale grows by as
much). Where A has integer entries and N·max_i Σ_j |A_ij| < 2⁵³ (the identity, hierarchical and prefix strategies:
every partial sum of A x is then an integer below 2⁵³), BLAS is exact and nothing is charged. The choice between
the two depends on A and N alone, never on the data.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

__all__ = ["MAX_RECORDS", "RELATIVE_CHARGE", "UNIT_ROUNDOFF", "charged_sensitivity", "check_histogram",
           "check_strategy", "cover_roundings", "dekker_split", "exact_answers", "float_up", "gamma",
           "histogram_problem", "integer_exact", "sqrt_up", "two_product", "two_sum"]

#: The guarantee's domain: histograms of at most this many records (2³² ≈ 4.3·10⁹; a release of more is refused
#: before anything is drawn). Public, as it must be: the rounding charge depends on it, never on the data.
MAX_RECORDS = 2**32
#: u = 2⁻⁵³, the unit roundoff of float64: a correctly rounded operation (round to nearest) returns a·(1 + δ),
#: |δ| ≤ u. The one home of the constant in mmopt's rounding proofs (:func:`cover_roundings`).
UNIT_ROUNDOFF = 2.0**-53
#: d_in / Δ − 1 where A x is not exact, but for the subnormal term: u·(2N + 1) = 9.5·10⁻⁷ at N = 2³²
RELATIVE_CHARGE = UNIT_ROUNDOFF * (2.0 * MAX_RECORDS + 1.0)
#: d_in / Δ in a release, at most: the upper sensitivity's (1 + 10⁻⁷), an ulp and the noise lattice's charge
#: (≤ 2⁻³⁰, mmopt._base.opendp), and the charged rounding of A x (twice for the p-Identity stream strategy,
#: whose measurement rounds twice); with :data:`RELEASE_SEARCH_SLACK`, room for OpenDP's search of the scale,
#: the noise a release draws is known from Δ and the budget alone (mmopt.plan, mmopt.answers.answer)
RELEASE_D_IN_RATIO = (1.0 + 2e-7) * (1.0 + 1.01 * RELATIVE_CHARGE) ** 2
RELEASE_SEARCH_SLACK = 1.0 + 1e-6
_SPLIT = 134217729.0  # 2²⁷ + 1: Dekker's split of a float64 into two halves of ≤ 26 significant bits
_TINY_ERROR = 2.0**-1074  # bounds the rounding error of a subnormal product (half of it, 2⁻¹⁰⁷⁵, is 0.0 in float64)
_MAX_MAGNITUDE = 2.0**995  # below it the split's a·(2²⁷ + 1) cannot overflow
_CHUNK = 1 << 21  # product terms summed per batch of rows (4 float64 arrays of this size at most)


def integer_exact(A: np.ndarray, records: int = MAX_RECORDS) -> bool:
    """Whether BLAS computes A x exactly for every histogram x of at most ``records`` records: A integer-valued
    and ``records``·max_i Σ_j |A_ij| < 2⁵³ (every partial sum an integer of that size at most).

    >>> integer_exact(np.tril(np.ones((4, 4)))), integer_exact(np.eye(3) / 3)
    (True, False)
    """
    A = np.asarray(A)
    largest = 0.0
    for rows in _row_blocks(A, A.shape[1] if A.ndim == 2 else 1):  # no temporary of A's size (np.round, |A|)
        block = A[rows]
        if not np.all(np.isfinite(block)) or not np.all(block == np.round(block)):
            return False
        # the row sums of integers below 2⁵³ are exact in float64 up to 2⁵³; past it the test fails anyway
        largest = max(largest, float(np.max(np.abs(block).sum(axis=1), initial=0.0)))
    return largest * records < 2.0**53


def check_strategy(A: np.ndarray, caller: str) -> None:
    """Refuse, from A alone, a strategy whose entries are too large for A x to be computed exactly at every
    histogram of the domain (a refusal that depended on the counts would tell neighbours apart)."""
    a_max = _abs_max(A)
    if not a_max * MAX_RECORDS < 2.0**999:  # exact_answers' own test at any histogram of the domain
        raise ValueError(f"{caller}: the strategy's entries (up to {a_max:.3g}) are too large for A x to be computed "
                         "exactly in float64 at every histogram of up to MAX_RECORDS records. Rescale the strategy "
                         "(A and cA have the same error).")


def charged_sensitivity(sensitivity: float, norm: str, rows: int, columns: int, *, exact: bool,
                        records: int = MAX_RECORDS) -> float:
    """d_in for the computed answers: ``sensitivity`` (a proven upper bound on Δ_p) when ``exact``
    (:func:`integer_exact`), else Δ_p·(1 + u·(2N + 1)) + 2·m^{1/p}·(4n + 1)·2⁻¹⁰⁷⁴ (module docstring), rounded
    upwards.

    >>> charged_sensitivity(1.0, "l1", 4, 4, exact=True)
    1.0
    >>> 0 < charged_sensitivity(1.0, "l1", 4, 4, exact=False) - 1.0 < 1e-6
    True
    """
    if exact:
        return sensitivity
    eta = (4 * columns + 1) * _TINY_ERROR * (rows if norm == "l1" else math.sqrt(rows))
    charged = sensitivity * (1.0 + UNIT_ROUNDOFF * (2.0 * records + 1.0)) + 2.0 * eta  # RELATIVE_CHARGE at MAX_RECORDS
    return cover_roundings(charged, 4)  # the two products' and the sum's roundings


def exact_answers(A: np.ndarray, x: np.ndarray, *, caller: str, integer: bool | None = None) -> np.ndarray:
    """A x with every entry the correctly rounded value of its exact sum (module docstring); the integer case
    (:func:`integer_exact`) by BLAS, which is then exact. Columns where x is 0 add nothing and are skipped.
    ``integer``: :func:`integer_exact` (A) at MAX_RECORDS when the caller knows it and x is a histogram of the
    domain (:func:`check_histogram`); else it is checked at x's own total. Correctly rounded for whole counts; for
    fractional x a subnormal product may be off by ≤ 2⁻¹⁰⁷⁴ (within the charge's η).

    >>> A = np.array([[0.1, 0.2], [1 / 3, 1e-300]])
    >>> bool(exact_answers(A, np.array([3.0, 2**40]), caller="doctest")[0] == 0.1 * 3 + 0.2 * 2**40)
    True
    """
    A, x = np.asarray(A, dtype=float), np.asarray(x, dtype=float)
    if integer is None:
        integer = bool(np.all(x == np.round(x))) and integer_exact(A, records=max(1, int(np.sum(np.abs(x))) + 1))
    if integer:
        return A @ x  # every partial sum an integer below 2⁵³: exact
    support = np.flatnonzero(x)
    x = x[support]
    a_max, x_max = _abs_max(A), _abs_max(x)
    # no split or product overflows, nor a partial sum: their terms add up to ≤ (1 + 2⁻²⁵)·max|A|·Σ|x| (always so
    # in release, where max|A|·2³² < 2⁹⁹⁹ (check_strategy) and Σ|x| ≤ 2³²: no refusal there depends on the counts)
    if not (a_max < _MAX_MAGNITUDE and x_max < _MAX_MAGNITUDE and a_max * float(np.sum(np.abs(x))) < 2.0**999):
        raise ValueError(f"{caller}: the strategy entries or the counts are too large for A x to be computed exactly "
                         "in float64 (figures of the data not printed). Rescale the strategy (A and cA have the same "
                         "error).")
    x_hi, x_lo = dekker_split(x)
    halves = (x_hi, x_lo) if np.any(x_lo) else (x,)  # counts below 2²⁶ are their own 26-bit half: 2 terms, not 4
    out = np.empty(A.shape[0])
    for rows in _row_blocks(A, 2 * len(halves) * x.size):  # blocks of rows: no copy of A
        a_hi, a_lo = dekker_split(A[rows, support])
        terms = np.concatenate([a * h for a in (a_hi, a_lo) for h in halves], axis=1)
        out[rows] = [math.fsum(row) for row in terms.tolist()]
    return out


def check_histogram(x: np.ndarray, caller: str, records: int = MAX_RECORDS) -> np.ndarray:
    """``x`` refused unless it is a histogram of the guarantee's domain: whole counts ≥ 0 (one record moves one
    count by 1, which is what Δ is for: fractional or weighted counts move them by other amounts) of at most
    ``records`` records in all; checked before anything is drawn."""
    problem = histogram_problem(x, records)
    if problem == "negative":
        refuse_negative(x, caller)
    if problem == "fractional":
        raise ValueError(f"The 'x' parameter of {caller} must hold counts of records (whole numbers): adding or "
                         "removing one record moves one count by 1, which is what the noise is calibrated to. Got "
                         "fractional counts (weighted counts?). Release whole counts; for weighted data the "
                         "sensitivity is the largest weight times Δ, which release does not compute.")
    if problem == "records":
        raise ValueError(f"The 'x' parameter of {caller} must hold at most {records:,} records in all (the "
                         "guarantee's domain, mmopt.dense.exact_answers.MAX_RECORDS: the float64 rounding of A x is "
                         "charged for that many). Got more (the total is not printed: a figure of the data). Release "
                         "the data in parts.")
    return x


def refuse_negative(x: np.ndarray, caller: str) -> None:
    """Refuse counts below 0, before anything is drawn, without saying how many (a figure of the data): one
    message for every release and simulation path."""
    if np.any(x < 0):
        raise ValueError(f"The 'x' parameter of {caller} must hold counts >= 0. Got negative counts (how many is "
                         "not printed: a figure of the data).")


def histogram_problem(x: np.ndarray, records: int = MAX_RECORDS) -> str | None:
    """None when ``x`` is a histogram of the domain, else "negative" (a count below 0), "fractional" (a count not
    whole) or "records" (more than ``records`` in all).

    >>> histogram_problem(np.array([0.0, 3.0])), histogram_problem(np.array([-1.0, 3.0]))
    (None, 'negative')
    """
    if np.any(x < 0):  # (a huge negative count would wrap the int64 sum below)
        return "negative"
    if not np.all(x == np.floor(x)):
        return "fractional"
    # integers ≤ 2³² each (else refused at once), so their int64 sum is exact for any n below 2³¹
    top = float(np.max(x)) if x.size else 0.0
    return "records" if top > records or int(x.astype(np.int64).sum()) > records else None


def _abs_max(a: np.ndarray) -> float:
    """max |a| without the copy np.abs(a) makes."""
    return max(float(np.max(a, initial=0.0)), -float(np.min(a, initial=0.0)))


def _row_blocks(A: np.ndarray, width: int):
    """Slices of A's rows, about _CHUNK values each at ``width`` values a row."""
    step = max(1, _CHUNK // max(1, width))
    return (slice(start, start + step) for start in range(0, A.shape[0], step))


def dekker_split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dekker's split: hi + lo = a exactly, each with at most 26 significant bits (27 with lo's sign)."""
    c = _SPLIT * a
    hi = c - (c - a)
    return hi, a - hi


def two_product(a, b):
    """Dekker's TwoProduct: p + e = a·b exactly (no overflow; a product that underflows is off by < 2⁻¹⁰⁷⁴)."""
    p = a * b
    (ah, al), (bh, bl) = dekker_split(a), dekker_split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def float_up(q) -> float:
    """A float ≥ the rational q (a Fraction or an int), within one ulp: a bound computed exactly, handed on.

    >>> from fractions import Fraction
    >>> float_up(Fraction(1, 3)) > 1 / 3, float_up(Fraction(1, 2)) == 0.5
    (True, True)
    """
    r = float(q)
    return r if Fraction(r) >= q else math.nextafter(r, math.inf)


def gamma(n: int) -> float:
    """Higham's γ_n = n·u/(1 − n·u) (u = :data:`UNIT_ROUNDOFF`, n·u < 1): |Π(1 + δᵢ)^{±1} − 1| ≤ γ_n for n
    factors with |δᵢ| ≤ u (Higham, *Accuracy and Stability of Numerical Algorithms*, 2002, Lemma 3.1). The
    float returned is itself rounded; callers use it with a margin.

    >>> gamma(2) > 2 * UNIT_ROUNDOFF, gamma(0)
    (True, 0.0)
    """
    return n * UNIT_ROUNDOFF / (1.0 - n * UNIT_ROUNDOFF)


def cover_roundings(value, k: int):
    """``value``·(1 + k·u) rounded upwards (u = :data:`UNIT_ROUNDOFF`): a float bound on a quantity that ``value``
    computed with at most k roundings.

    For value ≥ 0 and an even integer 0 ≤ k ≤ 2²⁵ (so 1 + k·u is a float), the result r satisfies
    r > value·(1 + k·u)·(1 + u/2) exactly (the last step goes one float past the rounded product, which is at least
    u/2 of it above the product). Hence r ≥ v for every real v ≥ 0 with value ≥ v·(1 − u)^k: v computed by at
    most k correctly rounded operations on exact operands, each a factor in [1 − u, 1 + u] of a product or
    quotient, or of a sum of non-negative terms (v ≤ value/(1 − ku) and (1 − k²u²)(1 + u/2) ≥ 1 for k ≤ 2²⁵).

    Parameters
    ----------
    value : float or ndarray
        The computed value(s), ≥ 0 (elementwise for an array).
    k : int
        The roundings to cover, even.

    Returns
    -------
    float or ndarray
        A float for a scalar ``value`` (``math.nextafter``), an array of ``value``'s shape for an array
        (``np.nextafter``).

    Examples
    --------
    >>> from fractions import Fraction
    >>> r = cover_roundings(0.1, 4)
    >>> Fraction(r) > Fraction(0.1) * (1 + 4 * Fraction(UNIT_ROUNDOFF)), type(r).__name__
    (True, 'float')
    >>> third = 1.0 / 3.0  # one rounding, downwards here
    >>> Fraction(third) < Fraction(1, 3) < Fraction(cover_roundings(third, 2))
    True
    >>> cover_roundings(np.array([0.0, 1.0]), 2).tolist() == [5e-324, 1.0 + 2.0**-51]
    True
    """
    raised = value * (1.0 + k * UNIT_ROUNDOFF)
    return np.nextafter(raised, np.inf) if isinstance(raised, np.ndarray) else math.nextafter(raised, math.inf)


def sqrt_up(q) -> float:
    """A float r with r² ≥ q (q ≥ 0 rational), within a few ulps of √q: a norm bound from an exact sum of squares.

    >>> from fractions import Fraction
    >>> q = Fraction(2**128 + 1)  # √q is just above 2⁶⁴, a float: the root must be raised past it
    >>> Fraction(sqrt_up(q)) ** 2 >= q
    True
    """
    r = math.sqrt(float(q))
    while Fraction(r) ** 2 < q:
        r = math.nextafter(r, math.inf)
    return r


def two_sum(a, b):
    """Knuth's TwoSum: s + e = a + b exactly, s = fl(a + b) (no overflow)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)
