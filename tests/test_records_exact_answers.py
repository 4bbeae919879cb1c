"""mmopt.records.exact_answers: the records release's answers correctly rounded, and its d_in covering them."""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from mmopt.records import exact_answers as ea
from mmopt.structured.release import upper_sensitivity
from mmopt.structured.residual import marginals as wm
from mmopt.structured.residual import strategy as rs
from mmopt.structured.residual.reconstruct import measure


def _integer_residual(m, S, shape):
    """T_S by Python-int Kronecker matrices: the oracle."""
    M = [[1]]
    for i in S:
        n = shape[i]
        D = [[1, -1]] if n == 2 else [[(n if r == c else 0) - 1 for c in range(n)] for r in range(n)]
        M = [[a * b for a in ra for b in rb] for ra in M for rb in D]
    flat = [int(v) for v in np.asarray(m).ravel().tolist()]
    return [sum(a * b for a, b in zip(row, flat, strict=True)) for row in M]


@pytest.mark.parametrize("seed", range(8))
def test_every_residual_answer_is_the_correctly_rounded_exact_product(seed):
    rng = np.random.default_rng(seed)
    shape = tuple(int(n) for n in rng.integers(2, 6, size=3))
    subsets = [S for k in range(4) for S in itertools.combinations(range(3), k) if rng.random() < 0.8] or [()]
    A = rs.residual_strategy(shape, {S: float(rng.choice([1 / 3, 0.1, 7.25, rng.uniform(0.01, 10)]))
                                     for S in subsets})
    x = rng.multinomial(2**32 - 7 if seed % 2 else 10**6, np.ones(math.prod(shape)) / math.prod(shape))
    x = x.reshape(shape).astype(np.int64)
    got = ea.residual_answers(A, {tuple(range(3)): x}, caller="t")
    kappa = ea.kappa(A)
    for S, k in zip(A.subsets, kappa.tolist(), strict=True):
        m = x.sum(axis=tuple(i for i in range(3) if i not in S))
        want = [float(Fraction(k) * t) for t in _integer_residual(m, S, shape)]
        assert got[S].ravel().tolist() == want
    # and the split path (taken past 2⁵³ for large subsets) gives the same bits on these
    for S, k in zip(A.subsets, kappa.tolist(), strict=True):
        T = ea.integer_residual(x.sum(axis=tuple(i for i in range(3) if i not in S)), S, shape)
        assert np.array_equal(ea._exact_product(k, T), got[S])


def test_neighbours_at_the_domains_size_stay_within_the_charged_d_in():
    """~2³² records on a 3×5×7 domain: the float path (the residual measure, mmopt's simulation) moved neighbours'
    answers past the d_in Δ's 1e-7 slack gave (51 / 25 of 630 pairs, L1 / L2, a helper's check); the exact answers
    stay within the charged d_in for every neighbour."""
    shape = (3, 5, 7)
    subsets = [S for k in range(4) for S in itertools.combinations(range(3), k)]
    rng = np.random.default_rng(2024)
    A = rs.residual_strategy(shape, {S: float(rng.uniform(0.05, 3)) for S in subsets})
    x = rng.multinomial(2**32 - 10, rng.dirichlet(np.full(105, 0.5))).reshape(shape).astype(np.int64)
    full = (0, 1, 2)
    passed_float = 0
    for norm in ("l1", "l2"):
        up = upper_sensitivity(rs.sensitivity(A, norm).value)
        d_in = ea.charged_records_sensitivity(up, norm, A.n_rows, kappa_rounded=True)
        base, old = ea.residual_answers(A, {full: x}, caller="t"), measure(A, {full: x}).values
        for j in range(0, 105, 3):
            x2 = x.copy()
            x2.reshape(-1)[j] += 1
            for answers, bound, exact in ((ea.residual_answers(A, {full: x2}, caller="t"), d_in, True),
                                          (measure(A, {full: x2}).values, up, False)):
                reference = base if exact else old
                diffs = [Fraction(a) - Fraction(b) for S in A.subsets
                         for a, b in zip(answers[S].ravel().tolist(), reference[S].ravel().tolist(), strict=True)]
                size = sum(abs(d) for d in diffs) if norm == "l1" else sum(d * d for d in diffs)
                limit = Fraction(bound) if norm == "l1" else Fraction(bound) ** 2
                if exact:
                    assert size <= limit
                else:
                    passed_float += size > limit
    assert passed_float > 0  # the float path's excess is real: the reason for this module


def test_weighted_marginals_are_one_rounding_and_the_total_is_checked():
    rng = np.random.default_rng(1)
    A = wm.weighted_marginals((3, 4), {(0,): 1 / 3, (0, 1): 0.7})
    x = rng.integers(0, 2**27, size=(3, 4))
    got = ea.weighted_answers(A, {(0, 1): x}, caller="t")
    assert got[(0,)].tolist() == [float(Fraction(1 / 3) * int(v)) for v in x.sum(axis=1)]
    with pytest.raises(ValueError, match=r"t: the records hold more than 4,294,967,296 rows .* not printed"):
        ea.weighted_answers(A, {(0, 1): np.full((3, 4), 2**29)}, caller="t")
    with pytest.raises(ValueError, match="t: the marginal counts must be whole numbers"):
        ea.weighted_answers(A, {(0, 1): np.full((3, 4), 0.5)}, caller="t")
    # counts whose int64 sum wraps around were accepted (a review): each count is checked first
    for wraps in (np.array([[2**62, 2**62, 0, 0], [0] * 4, [0] * 4]), np.array([[2**63, 0, 0, 0], [0] * 4, [0] * 4],
                                                                             dtype=np.uint64)):
        with pytest.raises(ValueError, match="more than 4,294,967,296 rows"):
            ea.weighted_answers(A, {(0, 1): wraps}, caller="t")


def test_the_records_release_calibrates_to_the_charged_d_in():
    """prepare's d_in (what OpenDP's noise is calibrated to) includes the rounding charge, for either family."""
    import mmopt
    from mmopt.records import mechanism as mc
    from mmopt.records.domain import Attribute, Domain
    D = Domain((Attribute("a", ("x", "y", "z")), Attribute("b", ("u", "v"))))
    for privacy in (mmopt.Privacy(1.0), mmopt.Privacy(1.0, 1e-6)):
        prep = mc.prepare(D, [("a", "b")], privacy, None, "t")
        from mmopt.records import plans as rp
        Delta = rp.sensitivity(prep.strategy, privacy.sensitivity_norm)
        assert Delta * (1 + 9.5e-7) < prep.sensitivity < Delta * (1 + 1.2e-6)
