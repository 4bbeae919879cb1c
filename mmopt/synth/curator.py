"""The curator: the only object that reads the records, and every read is a paid, noisy release in ρ-zCDP.

Notation: see README and :mod:`mmopt.synth.residuals`. MST and AIM never see the records or an exact count; they
ask the :class:`Curator` for one of two things, each charged to its ledger *before* it is computed:

* :meth:`Curator.measure` (sets, ρ): mmopt's residual strategy for those marginals (the certified Gaussian optimum,
  :func:`mmopt.structured.residual.plan`), scaled to Δ₂ = 1 and rounded upwards (exact sensitivity under
  add/remove-one-record, :func:`mmopt.structured.residual.sensitivity`), Gaussian noise σ with OpenDP's own map
  Δ₂²/(2σ²) ≤ ρ (Bun & Steinke 2016, Prop. 1.6; :func:`mmopt.accounting.gaussian_rho`), returning only the
  least-squares residual estimates (:mod:`mmopt.synth.residuals`);
* :meth:`Curator.select` (candidates, public estimates, ρ) — or :meth:`Curator.select_gain`, MST's workload-aware
  edge score with its own stated sensitivity (:mod:`mmopt.synth.gain`): the exponential mechanism over the scores
  q_C = w_C·(‖m_C − m̂_C‖₁ − b_C), where m_C is the exact marginal, m̂_C a public estimate (post-processing of
  earlier releases), w_C and b_C public constants. Adding or removing one record changes m_C by one in one cell,
  so |Δq_C| ≤ |w_C| and Δ = max |w_C| — in floats (1 + 2⁻¹⁸)·max |w_C| (:func:`quality`). At ε = √(8ρ) the
  choice is ε²/8 = ρ-zCDP (the exponential mechanism is ε²/8-zCDP, Cesar & Rogers 2021; OpenDP's Gumbel
  noisy-max map says the same and is checked before sampling, :func:`mmopt.adaptive._opendp_noise.exponential`).
  Only the chosen index leaves the curator.

After :meth:`Curator.compress` (MST's domain compression, :mod:`mmopt.synth.compress`, built from earlier releases)
both questions are asked of the counts summed into the compressed cells: every record still lies in one cell of
every marginal, so both sensitivities above are unchanged.

Adaptive composition of zCDP adds the ρ's (Bun & Steinke, Lemma 2.3), whatever the analyst did with earlier
outputs; the ledger sums them in exact rationals and refuses a step that would exceed the budget, before any noise
is drawn. Noise comes from a :class:`mmopt.adaptive._noise.Noise`: OpenDP's vetted samplers (the release path)
or, with a seed, numpy (simulation only). The one thing besides these that depends on the records is a
:class:`mmopt.DataWarning` from reading them (a column's text dropped under numeric categories): a diagnostic for
the data holder, outside the guarantee, never to be published with the release.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from mmopt._base import opendp as _opendp
from mmopt._base.said_once import data_warnings_once
from mmopt.accounting._zcdp import gaussian_rho, round_down, round_up
from mmopt.records import counts as rc
from mmopt.records import exact_answers as ea
from mmopt.structured.release import upper_sensitivity
from mmopt.structured.residual import plan
from mmopt.structured.residual import strategy as rs
from mmopt.structured.residual.workload import marginal_workload
from mmopt.synth import gain as gn
from mmopt.synth.residuals import ResidualEstimates, from_measurements

__all__ = ["Curator", "Step", "em_epsilon", "gaussian_sigma", "quality", "score_sensitivity"]


@dataclass(frozen=True)
class Step:
    """One paid use of the data: ``kind`` "gaussian" or "exponential", its ρ (what the ledger adds), its scale
    (σ, or the exponential mechanism's ε), the sets it concerned and its sensitivity (Δ₂, or the score's Δ)."""

    label: str
    kind: str
    rho: float
    scale: float
    sets: tuple
    sensitivity: float = 1.0


def gaussian_sigma(sensitivity: float, rho: float) -> float:
    """The smallest float σ ≥ Δ₂/√(2ρ) whose OpenDP map Δ₂²/(2σ²) (rounded up) is at most ρ.

    Examples
    --------
    >>> s = gaussian_sigma(1.0, 0.5)
    >>> s >= 1.0 and gaussian_rho(1.0, s) <= 0.5
    True
    """
    sigma = sensitivity / math.sqrt(2.0 * rho)
    while gaussian_rho(sensitivity, sigma) > rho:
        sigma = math.nextafter(sigma, math.inf)
    return sigma


def em_epsilon(rho: float) -> float:
    """The largest float ε with ε²/8 ≤ ρ in exact arithmetic: the exponential mechanism's ε at zCDP budget ρ.

    Examples
    --------
    >>> e = em_epsilon(0.125)
    >>> e, Fraction(e) ** 2 / 8 <= Fraction(0.125)
    (1.0, True)
    """
    eps = math.sqrt(8.0 * rho)
    while Fraction(eps) ** 2 / 8 > Fraction(rho):
        eps = math.nextafter(eps, 0.0)
    return eps


#: The fixed-point grid of the quality scores (module docstring of :func:`quality`): 2⁻²⁰, values below 2³¹.
GRID_BITS = 20
_CAP = 2**31


def quality(counts, estimate, weight: float, bias: float) -> float:
    """w·(‖m − m̂‖₁ − b), computed so that its change between neighbours is at most |w|(1 + 2⁻¹⁸) *in floats*.

    In exact arithmetic one record moves ‖m − m̂‖₁ by at most 1, but floating-point sums can move it by 1 plus a
    rounding error, which an exponential mechanism calibrated to exactly |w| would not cover. So: the counts are
    clamped to [0, 2³¹] and m̂ and b rounded to the grid 2⁻²⁰ and clamped to [−2³¹, 2³¹] (public post-processing
    of m̂, b; clamping a count is 1-Lipschitz), the L1 distance is summed *exactly* in integers on that grid and
    clamped to [0, 2³²] (1-Lipschitz), so D = ‖m − m̂‖₁ − b (|D| ≤ 1.5·2³²) is an exact float that moves by at
    most 1. Only the product w·D rounds: |fl(wD) − wD| ≤ 2⁻⁵³·|w|·1.5·2³², so the float score moves by at most
    |w|(1 + 1.5·2⁻²⁰) ≤ |w|(1 + 2⁻¹⁸) (:func:`score_sensitivity`).

    Examples
    --------
    >>> quality(np.array([3, 0]), np.array([1.5, 0.25]), 2.0, 0.5)          # 2·(1.5 + 0.25 − 0.5)
    2.5
    """
    scale = 2**GRID_BITS
    m = np.minimum(np.asarray(counts, dtype=np.int64), _CAP) * scale
    e = np.rint(np.clip(np.asarray(estimate, dtype=np.float64), -_CAP, _CAP) * scale).astype(np.int64)
    diff = np.abs(m - e).ravel()  # each ≤ 2⁵³: exact in int64; summed in blocks of 2⁹, then as Python ints
    total = sum(int(diff[k:k + 512].sum()) for k in range(0, diff.size, 512))
    l1 = min(total, 2 * _CAP * scale)
    b = int(np.rint(min(max(float(bias), -_CAP), _CAP) * scale))
    return float(weight) * ((l1 - b) / scale)  # (l1 − b)/2²⁰ is exact: |l1 − b| ≤ 2⁵³·1.5 on a multiple of 1


def score_sensitivity(weight: float) -> float:
    """|w|·(1 + 2⁻¹⁸) rounded up: the float quality's sensitivity (:func:`quality`)."""
    return math.nextafter(abs(weight) * (1.0 + 2.0**-18), math.inf)


class Curator:
    """The records and a ρ-zCDP budget; answers only noisy, paid-for questions (module docstring).

    Parameters
    ----------
    records, domain
        As :func:`mmopt.records.marginal_counts`.
    rho : float
        The budget.
    noise : mmopt.adaptive._noise.Noise
        Where every draw comes from.
    """

    def __init__(self, records, domain, rho: float, noise, caller: str = "Curator") -> None:
        self._records, self._domain, self._caller = records, domain, caller
        self._exact: dict = {}
        self._said: set = set()  # the DataWarnings given (data_warnings_once)
        self.shape = tuple(domain.shape)
        self.budget = float(rho)
        self.noise = noise
        self.steps: list[Step] = []
        self.compression = None

    def compress(self, compression) -> None:
        """From now on, count on the compressed domain of a :class:`mmopt.synth.compress.Compression` (built from
        earlier releases only). Every record still falls in one cell of every marginal, so the sensitivities are
        unchanged; nothing is charged."""
        if tuple(compression.original) != tuple(self._domain.shape):
            raise ValueError(f"Curator.compress: the compression is of a domain of shape {compression.original}, "
                             f"not {tuple(self._domain.shape)}.")
        self.compression, self.shape, self._exact = compression, tuple(compression.shape), {}

    # -- the ledger --------------------------------------------------------------------------------------------
    @property
    def spent(self) -> Fraction:
        """Σ ρ of the steps taken, exactly."""
        return sum((Fraction(s.rho) for s in self.steps), Fraction(0))

    @property
    def remaining(self) -> float:
        """The budget left, rounded down to a float."""
        return round_down(Fraction(self.budget) - self.spent)

    def _charge(self, step: Step) -> None:
        if self.spent + Fraction(step.rho) > Fraction(self.budget):
            raise ValueError(f"Curator: '{step.label}' needs ρ = {step.rho!r}, but only {self.remaining!r} of the "
                             f"budget ρ = {self.budget!r} remains. Nothing was drawn.")
        self.steps.append(step)
        # every charge is followed at once by its draw: counted, so that an accountant's pending entry is kept once
        # one has started (without it an error in a later round removed the entry: charged nothing for a spend)
        _opendp.note_draw()

    # -- the data, never returned ----------------------------------------------------------------------------------
    def _counts(self, sets) -> dict:
        todo = sorted({S for S in sets if S not in self._exact})
        if todo:
            with data_warnings_once(self._said):  # once per Curator, not per read (mst reads twice, aim more)
                got = rc.marginal_counts(self._records, self._domain, todo, caller=self._caller)  # refusals: mst/aim
            c = self.compression
            self._exact.update({S: np.asarray(m, dtype=np.float64) if c is None else c.coarsen(m, S)
                                for S, m in got.items()})
        return {S: self._exact[S] for S in sets}

    # -- the two questions -----------------------------------------------------------------------------------------
    def measure(self, sets, rho: float, label: str) -> ResidualEstimates:
        """The residual strategy for the marginals ``sets`` at zCDP budget ``rho``: least-squares residual estimates."""
        sets = tuple(dict.fromkeys(tuple(sorted(S)) for S in sets))
        A = plan(marginal_workload(self.shape, sets)).strategy
        caller = "Curator.measure"
        ea.check_residual_strategy(A, caller)
        # d_in bounds the change of the *computed* answers: their rounding charged (mmopt.records.exact_answers; the
        # float residual measurement passed Δ·(1 + 1e-7) for 45 of 180 neighbours at ~2³² records, a review)
        d_in = ea.charged_records_sensitivity(upper_sensitivity(rs.sensitivity(A, "l2").value, caller=caller), "l2",
                                              A.n_rows, kappa_rounded=True)
        sigma = gaussian_sigma(d_in, rho)
        step = Step(label, "gaussian", gaussian_rho(d_in, sigma), sigma, sets, d_in)
        # correctly rounded; whole counts of at most 2³² records, refused before the charge
        exact = ea.residual_answers(A, self._counts(rc.maximal(A.subsets)), caller=caller)
        Ax = np.concatenate([exact[S].ravel() for S in A.subsets])
        self._charge(step)  # refused before the draw
        y = np.asarray(self.noise.add_gaussian(Ax, sigma), dtype=np.float64)
        values, at = {}, 0
        for S in A.subsets:
            values[S] = y[at:at + exact[S].size].reshape(exact[S].shape)
            at += exact[S].size
        return from_measurements(A, values, sigma)

    def select(self, candidates, estimates: dict, rho: float, label: str, *, weights=None, bias=None) -> int:
        """The exponential mechanism's choice among ``candidates`` (attribute tuples) by q_C (module docstring).

        ``estimates[C]`` is a public estimate of the marginal on C (same shape); ``weights`` and ``bias`` are
        public {C: w_C} and {C: b_C} (default 1 and 0). Returns the index of the chosen candidate.
        """
        candidates = [tuple(C) for C in candidates]
        w = np.array([1.0 if weights is None else float(weights[C]) for C in candidates])
        b = np.array([0.0 if bias is None else float(bias[C]) for C in candidates])
        eps = em_epsilon(rho)
        sens = score_sensitivity(float(np.max(np.abs(w))))
        step = Step(label, "exponential", round_up(Fraction(eps) ** 2 / 8), eps, tuple(candidates), sens)
        exact = self._counts(candidates)
        scores = np.array([quality(exact[C], estimates[C], w[k], b[k]) for k, C in enumerate(candidates)])
        self._charge(step)
        return int(self.noise.exponential(scores, eps, sens))

    def select_gain(self, candidates, covers: dict, oneway, total: float, rho: float, label: str) -> int:
        """The exponential mechanism's choice among the edges ``candidates`` by their workload gain
        (:mod:`mmopt.synth.gain`): ``covers[e]`` the workload sets r ⊋ e to score e on (empty: e itself, the
        paper's score), ``oneway[i]`` the public p̂ᵢ and ``total`` the public t. Returns the chosen index."""
        candidates = [tuple(e) for e in candidates]
        q = [np.asarray(p, dtype=np.float64) / total for p in oneway]
        sets = {e: tuple(covers.get(e, ())) or (e,) for e in candidates}
        rests = [[q[i] for i in r if i not in e] for e in candidates for r in sets[e]]
        eps = em_epsilon(rho)
        sens = gn.gain_sensitivity(rests)
        step = Step(label, "exponential", round_up(Fraction(eps) ** 2 / 8), eps, tuple(candidates), sens)
        exact = self._counts([r for e in candidates for r in sets[e]])
        scores = []
        for e in candidates:
            g = 0
            for r in sets[e]:
                ind = total * functools.reduce(np.multiply.outer, [q[i] for i in r])
                g += gn.gain(exact[r], tuple(r.index(i) for i in e), ind, [q[i] for i in r if i not in e])
            scores.append(float(Fraction(g, gn.GRID * len(sets[e]))))  # one correctly rounded division
        self._charge(step)
        return int(self.noise.exponential(np.array(scores), eps, sens))
