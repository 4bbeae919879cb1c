"""mmopt.toeplitz against published brackets on the factorisation norms of the counting matrix (issue 22).

Notation: M = M_n is the n×n prefix (counting) matrix W, lower-triangular ones. For a factorisation M = L·R,
γ₂(M) = min ‖L‖_{2→∞}‖R‖_{1→2} and γ_F(M) = min ‖L‖_F‖R‖_{1→2}/√n. In mmopt's units (unit privacy, Gaussian
noise, Δ₂) a strategy C is the factorisation R = C, L = W C⁻¹, so for every strategy

* √(max_variance) = ‖L‖_{2→∞}‖R‖_{1→2} ≥ γ₂(M), and
* total_squared_error / n = (‖L‖_F‖R‖_{1→2})²/n ≥ γ_F(M)² = OPT/n (``docs/factorization.md``); γ_F ≤ γ₂.

So a certified lower bound b on OPT gives √(b/n) ≤ γ_F ≤ γ₂: it must not exceed a published upper bound on
γ₂, and no strategy may fall below a published lower bound on γ₂. Statements with explicit constants only:

[Mathias]  γ₂(M_n) ≤ 1 + ln(n)/π. R. Mathias, "The Hadamard operator norm of a circulant and applications"
           (1993), Cor. 3.5; quoted in this form by Dvijotham, McMahan, Pillutla, Steinke & Thakurta,
           arXiv:2404.16706, Eq. (2.8) (see jax_privacy's buffered_toeplitz_test), and by Henzinger, Kalinin &
           Upadhyay, arXiv:2509.14334 (FORC 2026), abstract.
[MNT]      γ₂(M_n) ≥ (2 + ln((2n+1)/3))/π. Matoušek, Nikolov & Talwar, "Factorization norms and hereditary
           discrepancy", IMRN 2020 (arXiv:1408.1376), as quoted in arXiv:2509.14334, abstract.
[Wallis]   c_k = binom(2k, k)/4^k satisfies 1/√(π(k + 4/π − 1)) ≤ c_k < 1/√(π(k + 1/4)) for k ≥ 1 (the best
           constants). C.-P. Chen, "Proof of the best bounds in Wallis' inequality", General Mathematics 13(2)
           (2005) 117–120, Eq. (4); also Chen & Qi, Proc. AMS 133 (2005) 397–401.

Not tested, because their o(1) terms are unspecified: 0.701 + ln(n)/π + o(1) ≤ γ_F(M_n) ≤ γ₂(M_n) ≤
0.846 + ln(n)/π + o(1) and γ_F(M_n) ≤ 0.748 + ln(n)/π + o(1) (Henzinger, Kalinin & Upadhyay, arXiv:2509.14334).
"""

import math

import numpy as np
import pytest
from scipy.special import digamma, poch

import mmopt
from mmopt import toeplitz as T

EPS = np.finfo(float).eps
SIZES = [1, 2, 3, 16, 1024, 2**16]


def mathias_upper(n: int) -> float:
    """[Mathias]: γ₂(M_n) ≤ 1 + ln(n)/π."""
    return 1.0 + math.log(n) / math.pi


def mnt_lower(n: int) -> float:
    """[MNT]: γ₂(M_n) ≥ (2 + ln((2n+1)/3))/π."""
    return (2.0 + math.log((2 * n + 1) / 3)) / math.pi


def wallis_bracket(n: int) -> tuple[float, float]:
    """[Wallis] summed over k = 1..n−1: brackets on S_n = Σ_{k<n} c_k² (c_0 = 1), Σ_{k=1}^{n−1} 1/(k + a) =
    ψ(n + a) − ψ(1 + a)."""
    a = 4.0 / math.pi - 1.0
    lower = 1.0 + (digamma(n + a) - digamma(1.0 + a)) / math.pi
    upper = 1.0 + (digamma(n + 0.25) - digamma(1.25)) / math.pi
    return float(lower), float(upper)


def exact_sqrt_sum(n: int) -> float:
    """S_n = Σ_{k<n} (binom(2k, k)/4^k)² in integer arithmetic, correctly rounded: S_n = N/16^{n−1} with
    N = Σ_k binom(2k, k)²·16^{n−1−k} (Horner). O(n²) bit operations: n ≤ a few thousand."""
    N, b = 0, 1
    for k in range(n):
        if k:
            b = b * 2 * (2 * k - 1) // k  # binom(2k, k) from binom(2k−2, k−1)
        N = (N << 4) + b * b
    return N / (1 << (4 * (n - 1)))  # int / int is correctly rounded in Python


def _strategies(n: int) -> list:
    W = T.prefix(n)
    sqrt = T.sqrt_strategy(n)
    out = [sqrt, T.equalized(sqrt), T.banded(sqrt.coefficients[:4], n), T.blt([0.3, 0.1], [0.9, 0.5], n),
           T.weighted_sqrt(W)]
    if n <= 1024:  # the L-BFGS search: cheap here
        out.append(T.optimize(W, "blt", buffers=3).strategy)
    return out


def _check_bound_below_mathias(n: int) -> None:
    b = T.prefix_bound(n)
    # the certified bound (round-off allowance included) bounds γ_F² ≤ γ₂² from below: it must not exceed
    # [Mathias]'s upper bound; no tolerance is needed, the allowance is already taken off
    assert math.sqrt(b.value / n) <= mathias_upper(n)


@pytest.mark.parametrize("n", SIZES)
def test_certified_bound_is_below_mathias_upper_bound(n):
    _check_bound_below_mathias(n)


def test_bracket_is_tight_at_n_one():
    # M_1 = [1]: γ₂ = γ_F = 1 = [Mathias]'s 1 + ln(1)/π, and the bound meets it up to its allowance 64·u
    b = T.prefix_bound(1)
    assert b.value == pytest.approx(1.0, rel=128 * EPS) and b.value <= 1.0


@pytest.mark.parametrize("n", [8, 64])
def test_dense_certified_gamma_f_is_inside_the_bracket(n):
    # mmopt's dense γ_F (Program 5.2 solved to a certified gap): its certified lower end must not exceed
    # [Mathias]; its upper end is an attained factorisation, so it is at least the closed-form bound
    fn = mmopt.factorization_norm(mmopt.workload.prefix(n))
    assert fn.lower <= fn.upper <= mathias_upper(n)
    assert math.sqrt(T.prefix_bound(n).value / n) <= fn.upper


@pytest.mark.parametrize("n", list(range(1, 65)) + [257, 1000, 2**16])
def test_trace_norm_bound_dominates_mnt(n):
    # mmopt's SVD bound is n·(‖M‖_*/n)²; [MNT]'s constant is what 1/sin x ≥ 1/x and
    # Σ_{k=2}^{n} 1/(2k−1) ≥ ½ ln((2n+1)/3) give for ‖M‖_*/n = (1/n) Σ_k 1/(2 sin((2k−1)π/(2(2n+1)))) (our
    # reconstruction of the proof), so mmopt's bound on γ_F may not fall below it. Margin ≥ 3.9 % (measured).
    assert math.sqrt(T.svd_bound(n) / n) >= mnt_lower(n)


def _check_strategies_above_mnt(n: int) -> None:
    W, b = T.prefix(n), T.prefix_bound(n)
    for C in _strategies(n):
        r = T.evaluate(W, C)
        assert r.max_variance_exact
        # every strategy is a factorisation: √(max variance) ≥ γ₂ ≥ [MNT]
        assert math.sqrt(r.max_variance) >= mnt_lower(n), C.name
        # and max ≥ mean ≥ OPT/n: mmopt's certified bound holds for γ₂² too (and is far above [MNT]²); max =
        # mean when every query has the same variance (rows equalized at n = 2), so allow round-off there
        assert r.max_variance * (1 + 1e-12) >= r.total_squared_error / n >= b.value / n, C.name


@pytest.mark.parametrize("n", SIZES)
def test_strategies_max_error_is_above_mnt_lower_bound(n):
    _check_strategies_above_mnt(n)


@pytest.mark.parametrize("n", [1, 2, 5, 64, 300, 4096])
def test_sqrt_max_variance_is_the_exact_closed_form(n):
    # C = W^{1/2} = T(c): every column norm² ≤ ‖c‖² = S_n (Δ₂² = S_n) and the last row of B = C also has
    # norm² S_n, so the largest variance is S_n², at the full running sum
    S = exact_sqrt_sum(n)
    r = T.evaluate(T.prefix(n), T.sqrt_strategy(n))
    # c_k = c_{k−1}(2k−1)/(2k) carries ≤ k·u relative error, so S ≤ n·u and S² ≤ 2n·u; 4n·u leaves room
    rel = 4 * n * EPS
    assert r.sensitivity ** 2 == pytest.approx(S, rel=rel)
    assert r.max_variance == pytest.approx(S * S, rel=2 * rel)
    assert r.max_variance_query == (0, n - 1)


def _check_sqrt_inside_wallis(n: int) -> None:
    r = T.evaluate(T.prefix(n), T.sqrt_strategy(n))
    S = math.sqrt(r.max_variance)
    # an independent evaluation: c_k = Γ(k + ½)/(√π Γ(k + 1)) = poch(k + 1, −½)/√π, summed exactly (fsum)
    k = np.arange(n, dtype=float)
    reference = math.fsum((poch(k + 1.0, -0.5) ** 2 / math.pi).tolist())
    # mmopt's side: ≤ 2n·u (see above); poch's: measured ≤ 3e-14 relative up to n = 2²⁰
    assert S == pytest.approx(reference, rel=4 * n * EPS + 1e-13)
    lower, upper = wallis_bracket(n)
    # the lower end is attained at n = 2 (c_1 = 1/2 exactly); 1e-13 covers digamma's round-off
    assert lower * (1 - 1e-13) <= S <= upper * (1 + 1e-13)
    if n >= 2:
        assert S < upper  # strict for n ≥ 2: the upper bound is strict for every k ≥ 1


@pytest.mark.parametrize("n", SIZES)
def test_sqrt_max_variance_is_inside_the_wallis_bracket(n):
    _check_sqrt_inside_wallis(n)


@pytest.mark.slow
def test_published_brackets_at_n_2_20():
    n = 2**20
    _check_bound_below_mathias(n)
    _check_strategies_above_mnt(n)
    _check_sqrt_inside_wallis(n)
    assert math.sqrt(T.svd_bound(n) / n) >= mnt_lower(n)
