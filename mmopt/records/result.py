"""What a records release returns: marginals, their exact per-cell error law, and the measurements.

Notation: see README, :mod:`mmopt.records.release` and :mod:`mmopt.records.plans`.
"""

from __future__ import annotations

import itertools
import math
import operator
import warnings
from dataclasses import dataclass, field

import numpy as np

from mmopt._base import validation as v
from mmopt.records import plans as rp
from mmopt.records.domain import Domain
from mmopt.structured.residual import closure as cl
from mmopt.structured.residual import marginals as wm
from mmopt.structured.residual import strategy as rs
from mmopt.structured.residual.reconstruct import Measurements
from mmopt.structured.residual.workload import MarginalWorkload

#: The columns RecordsRelease.table has of its own: an attribute named like one would lose its labels to them.
TABLE_COLUMNS = ("marginal", "estimate", "std_error", "lower", "upper")

__all__ = ["RecordsRelease"]


class Marginals(dict):
    """{A: value} keyed by sorted tuples of attribute indices, as :class:`RecordsRelease` holds its marginals and
    variances: a missing key raises a KeyError that names the key to use (``marginals[("kids", "sex")]`` and
    ``marginals[(1, 0)]`` raised a bare KeyError, the key being (0, 1): a newcomer's audit). The key is never
    guessed: a marginal's axes follow its sorted attributes, so an unsorted key read back would swap them."""

    def __init__(self, items, names: tuple[str, ...] = ()):
        super().__init__(items)
        self.names = tuple(names)

    def __missing__(self, key):
        wanted = key if isinstance(key, tuple | list) else (key,)
        index = {n: i for i, n in enumerate(self.names)}
        try:  # operator.index: a float is no attribute index (int(3.9) read (3.9, 0) as (3, 0), int(inf) overflowed)
            ids = tuple(index[a] if isinstance(a, str) else operator.index(a) for a in wanted)
        except (KeyError, TypeError):
            ids = None
        sorted_ids = tuple(sorted(ids)) if ids is not None and len(set(ids)) == len(ids) else None
        if sorted_ids is not None and sorted_ids in self:
            axes = ", ".join(self.names[i] for i in sorted_ids) if self.names else str(sorted_ids)
            raise KeyError(f"{key!r}: marginals are keyed by sorted tuples of attribute indices; use {sorted_ids!r} "
                           f"(its axes in that order: {axes}).")
        raise KeyError(f"{key!r}: no such marginal was released; keys are sorted tuples of attribute indices, "
                       f"e.g. {sorted(self)[:6]!r}.")

    def __reduce__(self):  # pickled with its names (a dict subclass with __init__ arguments)
        return (Marginals, (dict(self), self.names))


@dataclass(frozen=True, eq=False)
class RecordsRelease:
    """Marginals released from records, their predicted variance and the privacy spent.

    Attributes
    ----------
    domain : Domain
    workload : MarginalWorkload
    strategy : ResidualStrategy or WeightedMarginals
        What was measured (:mod:`mmopt.records.plans`: by default the best strategy found for the noise).
    measurements : mmopt.structured.residual.Measurements
        The noisy measurements y_S (residual coordinates, or θ_S·marginal counts for weighted marginals): the
        only thing computed from the data.
    marginals : dict
        {A: least-squares estimate of the marginal on A (float array of shape (nᵢ for i in A))}, for every
        attribute set A of the workload (A a sorted tuple of attribute indices).
    cell_variance : dict
        {A: the variance of *each cell* of ``marginals[A]``} (exact for this strategy and noise scale; every cell of
        a marginal has the same; the marginal's expected total squared error is N_A times it). ``variance`` is
        its deprecated former name.
    epsilon, delta : float
        The budget OpenDP verified the release against: (ε, δ)-DP under add/remove-one-record neighbours.
    rho : float or None
        ρ-zCDP of the Gaussian noise, Δ₂²/(2σ²) as OpenDP's map rounds it (None for Laplace noise).
    noise : {"gaussian", "laplace"}
    noise_scale : float
        σ (Gaussian) or b (Laplace) per measured entry.
    sensitivity : float
        The Δ the noise was calibrated to (exact Δ rounded upwards).
    sampler : str
        "opendp" (the private release), or "numpy-seeded" when ``seed`` was given (reproducible, for tests
        and simulations: anyone who knows the seed can remove the noise).
    message : str
        Which strategy was measured and its expected total squared error as a multiple of the SVD lower bound
        (with the candidates compared, when the strategy was chosen).
    """

    domain: Domain
    workload: MarginalWorkload
    strategy: rs.ResidualStrategy
    measurements: Measurements = field(repr=False)
    marginals: dict = field(repr=False)
    cell_variance: dict = field(repr=False)
    epsilon: float
    delta: float
    rho: float | None
    noise: str
    noise_scale: float
    sensitivity: float
    sampler: str = "opendp"
    message: str = ""

    def __post_init__(self):
        names = tuple(a.name for a in self.domain.attributes)
        for name in ("marginals", "cell_variance"):  # a missing key names the key to use
            object.__setattr__(self, name, Marginals(getattr(self, name), names))

    @property
    def variance(self) -> dict:
        """Deprecated: :attr:`cell_variance` (the name said nothing of *per cell*, and was read as per marginal)."""
        warnings.warn("RecordsRelease.variance is the variance of each cell, not of a marginal; it is now named "
                      "cell_variance (variance will be removed).", DeprecationWarning, stacklevel=2)
        return self.cell_variance

    @property
    def expected_total(self) -> float:
        """Σ_A N_A·var_A: the expected total squared error of the released marginals (unit workload weights)."""
        return float(sum(cl.cells(self.domain.shape, A) * var for A, var in self.cell_variance.items()))

    def covariance(self, A, cell_a, B, cell_b) -> float:
        """Cov(estimate of cell ``cell_a`` of marginal ``A``, estimate of cell ``cell_b`` of marginal ``B``).

        With X = N Σ_T ℓ_T Q_T (:mod:`mmopt.records.plans`) and s² the variance of each measured entry,

            Cov = s² Σ_{T ⊆ A∩B} ∏_{i∈T} ([aᵢ = bᵢ] − 1/nᵢ) ∏_{i∈(A∩B)∖T} (1/nᵢ) / (∏_{i∈A∪B} nᵢ · ℓ_T),

        exact (A = B and the same cell give :attr:`cell_variance`). Cells are index tuples in the marginal's
        attribute order.
        """
        caller = "RecordsRelease.covariance"
        shape = self.domain.shape
        A, B = self._released(A, "A", caller), self._released(B, "B", caller)
        ca, cb = self._cell(A, cell_a, "cell_a", caller), self._cell(B, cell_b, "cell_b", caller)
        ell = rp.spectrum(self.strategy, self.workload)
        C = self.workload.closure
        both = tuple(i for i in A if i in B and shape[i] > 1)
        union = math.prod(shape[i] for i in set(A) | set(B))
        total = 0.0
        for k in range(len(both) + 1):
            for T in itertools.combinations(both, k):
                term = 1.0 / (union * ell[C.index[T]])
                for i in both:
                    same = ca[A.index(i)] == cb[B.index(i)]
                    term *= ((1.0 if same else 0.0) - 1.0 / shape[i]) if i in T else 1.0 / shape[i]
                total += term
        return self._noise_variance * total

    @property
    def _noise_variance(self) -> float:
        return self.noise_scale**2 * (2.0 if self.noise == "laplace" else 1.0)

    def _released(self, A, name: str, caller: str) -> tuple:
        # a bool is an int to Python: interval(True) gave marginal (1,)'s intervals; a float raised a bare TypeError
        if isinstance(A, bool | np.bool_) or not (isinstance(A, int | np.integer) or isinstance(A, tuple | list)):
            raise TypeError(f"The '{name}' parameter of {caller} must be a released marginal: a tuple of attribute "
                            f"indices (an int for one attribute). Got {A!r:.60} ({type(A).__name__}) instead.")
        key = tuple(A) if not isinstance(A, int | np.integer) else (int(A),)
        if key not in self.cell_variance:
            raise ValueError(f"The '{name}' parameter of {caller} must be a released marginal (a sorted tuple of "
                             f"attribute indices), one of {sorted(self.cell_variance)[:6]}. Got {A!r} instead.")
        return key

    def _cell(self, A: tuple, cell, name: str, caller: str) -> tuple:
        sizes = tuple(self.domain.shape[i] for i in A)
        # each index checked as an integer: int(0.9) rounded (0.9, 1.5) to cell (0, 1) and True was 1
        given = tuple(cell) if hasattr(cell, "__iter__") and not isinstance(cell, str) else (cell,)  # (no numpy
        # array of them: it turned (True, 1) into (1, 1))
        idx = tuple(v.check_int(c, name=name, caller=caller, low=0) for c in given) if len(A) else ()
        if len(idx) != len(A) or any(not 0 <= c < n for c, n in zip(idx, sizes, strict=True)):
            raise ValueError(f"The '{name}' parameter of {caller} must be a cell of the marginal {A}: {len(A)} indices "
                             f"within {sizes}. Got {cell!r} instead.")
        return idx

    def measurements_table(self, names: bool = True):
        """The noisy measurements, one row each, in a form a third-party GLS (or Private-PGM) can read.

        Columns: ``set`` (the measured attributes joined by "×"), ``kind``, ``weight``, ``entry`` (index tuple
        within the measurement), ``value`` and ``noise_sd`` (√2·b or σ: i.i.d. across rows), ``noise``.
        kind "marginal" (weighted marginals): value = weight × (count of the cell ``entry`` of the marginal on
        ``set``) + noise. kind "residual": value = weight × ((⊗_{i∈set} Bᵢ) m_set)[entry] + noise, with
        Bᵢ = I − J/nᵢ for nᵢ > 2 and [1, −1]/√2 for nᵢ = 2 (:func:`mmopt.structured.residual.residual_basis`).
        """
        names = v.check_bool(names, name="names", caller="RecordsRelease.measurements_table")  # "no" is truthy
        import pandas as pd
        A = self.strategy
        kind = "marginal" if isinstance(A, wm.WeightedMarginals) else "residual"
        sd = math.sqrt(self._noise_variance)
        attrs = self.domain.attributes
        parts = []
        for S, w in zip(A.subsets, A.weights.tolist(), strict=True):
            y = np.asarray(self.measurements.values[S], dtype=float)
            entries = [str(e) for e in np.ndindex(y.shape)] if y.ndim else ["()"]
            parts.append(pd.DataFrame({"set": "×".join(attrs[i].name for i in S) if names else str(S),
                                       "kind": kind, "weight": w, "entry": entries, "value": y.ravel(),
                                       "noise_sd": sd, "noise": self.noise}))
        return pd.concat(parts, ignore_index=True)

    def half_width(self, A, alpha: float = 0.05) -> float:
        """h with P(|estimate − true| ≤ h) = 1 − α exactly, for every cell of the released marginal on ``A``.

        Gaussian noise: z_{1−α/2}·√var at the σ actually drawn. Laplace noise: the exact (1 − α/2)-quantile of
        the cell's error Σⱼ aⱼ zⱼ (:mod:`mmopt.answers.intervals`, proven numerical error far below 1e-8
        relative); every cell of a marginal has the same error law (:mod:`mmopt.records.plans`).
        """
        return self._half_width(A, alpha, "RecordsRelease.half_width")

    def _half_width(self, A, alpha, caller: str) -> float:
        """:meth:`half_width`, its refusals naming ``caller`` (interval's and table's said half_width's)."""
        from mmopt.answers import intervals as iv
        alpha = iv.check_alpha(alpha, caller)
        key = self._released(A, "A", caller)  # an int is a one-attribute set, as covariance's
        if self.noise == "gaussian":
            return iv.half_width("gaussian", alpha, sd=math.sqrt(self.cell_variance[key]))
        iv.check_laplace_alpha(alpha, caller)
        return iv.half_width("laplace", alpha, weights=rp.error_law(self.strategy, self.workload, key),
                             scale=self.noise_scale)

    def interval(self, A, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper): the 1 − α interval of every cell of the released marginal on ``A`` (flattened, C order).

        estimate ± :meth:`half_width`, the width first widened by the round-off of cells reaching Σ|x̂| and the
        bounds rounded outwards (:mod:`mmopt.answers.widths`): at counts of 10¹⁵ the noise's h rounds to nothing.
        A marginal released without noise (h = 0) keeps lower = upper = estimate.
        """
        return self._interval(A, alpha, "RecordsRelease.interval")

    def _interval(self, A, alpha, caller: str) -> tuple[np.ndarray, np.ndarray]:
        from mmopt.answers.widths import allowance, bounds
        key = self._released(A, "A", caller)
        h = self._half_width(key, alpha, caller)  # refusals name the caller, not half_width
        est = self.marginals[key].ravel()
        return bounds(est, h + allowance(float(np.abs(est).sum())) if h > 0 else 0.0)

    def table(self, names: bool = True, *, alpha: float | None = None):
        """The released marginals as a tidy pandas DataFrame, one row per cell of each workload marginal.

        Columns: ``marginal`` (the attribute names joined by "×", or the index tuple when ``names`` is False),
        one column per domain attribute used by the workload (the cell's label — category or bin "[a, b)" —
        or its index when ``names`` is False; empty for attributes outside that marginal), ``estimate`` and
        ``std_error`` (√variance); with ``alpha``, ``lower`` and ``upper``: the exact 1 − α interval of each
        cell (:meth:`half_width`; under Laplace noise estimate ± z·std_error would not be).
        """
        names = v.check_bool(names, name="names", caller="RecordsRelease.table")  # "no" would be truthy
        import pandas as pd

        if alpha is not None:  # checked (and every width computed) before the frame is built
            from mmopt.answers.intervals import check_alpha
            alpha = check_alpha(alpha, "RecordsRelease.table")
            intervals = {A: self._interval(A, alpha, "RecordsRelease.table") for A in self.marginals}
        used = sorted({i for A in self.marginals for i in A})
        attrs = self.domain.attributes
        parts = []
        for A, est in self.marginals.items():
            cells = np.indices(est.shape).reshape(len(A), -1) if A else np.zeros((0, 1), dtype=np.int64)
            frame = {"marginal": "×".join(attrs[i].name for i in A) if names else str(A)}
            for i in used:
                if i in A:
                    k = cells[A.index(i)]
                    frame[attrs[i].name] = (np.asarray(attrs[i].labels, dtype=object)[k] if names
                                            else pd.array(k, dtype="Int64"))
                else:
                    frame[attrs[i].name] = None if names else pd.array([None] * cells.shape[1], dtype="Int64")
            frame["estimate"] = est.ravel()
            frame["std_error"] = math.sqrt(self.cell_variance[A])
            if alpha is not None:
                frame["lower"], frame["upper"] = intervals[A]
            parts.append(pd.DataFrame(frame, index=range(cells.shape[1])))
        return pd.concat(parts, ignore_index=True)
