"""What MST and AIM return: a model of the records, synthetic rows from it, and the privacy spent (ε, δ, ρ).

Notation: see README and :mod:`mmopt.synth.curator`. Everything here is post-processing of the curator's noisy
releases: sampling rows, computing marginals and reporting the budget spend no privacy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from mmopt._base import validation as v
from mmopt.accounting._zcdp import epsilon_of_rho, max_rho, round_up
from mmopt.privacy import Privacy
from mmopt.records import counts as rc
from mmopt.records.domain import Domain
from mmopt.records.rows import MAX_ROWS, check_seed

__all__ = ["Synthetic", "budget_rho", "load", "rows_per_call"]



def rows_per_call(n_attributes: int) -> int:
    """The most rows one :meth:`Synthetic.records` call draws for ``n_attributes``: :data:`MAX_ROWS`, or fewer where
    the codes and the sampler's temporaries (n·(d + 4) entries) would pass the allocation limit."""
    return max(1, min(MAX_ROWS, v.MAX_ALLOCATION_ENTRIES // (int(n_attributes) + 4)))


def budget_rho(privacy, caller: str) -> float:
    """ρ of the budget: the largest ρ whose OpenDP conversion to (ε, δ)-DP is within ``privacy`` (δ > 0)."""
    if not isinstance(privacy, Privacy):
        raise TypeError(f"The 'privacy' parameter of {caller} must be a Privacy with delta > 0, e.g. "
                        f"Privacy(epsilon=1.0, delta=1e-9). Got {type(privacy).__name__} instead.")
    if privacy.delta == 0:
        raise ValueError(f"The 'privacy' parameter of {caller} must have delta > 0: the algorithm is ρ-zCDP "
                         f"(Gaussian noise), converted to (ε, δ). Got {privacy} instead.")
    try:
        return max_rho(privacy.epsilon, privacy.delta)
    except ValueError as exc:  # ε past what OpenDP's conversion evaluates: say whose parameter it was
        raise ValueError(f"The 'privacy' parameter of {caller}: {exc}") from None


@dataclass(frozen=True, eq=False)
class Synthetic:
    """A private model of the records (MST's or AIM's) and the budget it spent.

    Attributes
    ----------
    method : str
        "mst" or "aim".
    domain : Domain
    model
        The fitted model: ``marginal(attrs)`` (counts) and ``sample(n, rng)`` (cell codes).
    steps : tuple of mmopt.synth.curator.Step
        Every paid use of the data, in order (Gaussian measurements and exponential-mechanism choices).
    rho : float
        Σ ρ of the steps, rounded up (at most the budget's ρ).
    delta : float
        The δ of the budget.
    epsilon : float
        OpenDP's conversion of ``rho`` to ε at ``delta`` (Canonne, Kamath & Steinke 2020).
    budget : float
        The budget's ρ (``rho`` is at most this).
    sampler : str
        "opendp" (release) or "numpy-seeded" (simulation only).
    seed : int or None
    details : dict
        Algorithm-specific record (selected sets, rounds, noise scales).
    """

    method: str
    domain: Domain
    model: object = field(repr=False)
    steps: tuple = field(repr=False)
    rho: float
    delta: float
    epsilon: float
    budget: float
    sampler: str
    seed: int | None = None
    details: dict = field(default_factory=dict, repr=False)

    @property
    def default_rows(self) -> int:
        """The rows :meth:`records` draws by default: the model's total (its noisy record count), at least 1."""
        return max(1, int(round(float(self.model.total))))

    @property
    def measured(self) -> tuple:
        """The attribute sets of every Gaussian measurement, in order."""
        return tuple(S for s in self.steps if s.kind == "gaussian" for S in s.sets)

    def marginal(self, attrs) -> np.ndarray:
        """The model's marginal on ``attrs`` (names or indices) in counts, its axes in the order asked (they were
        in the domain's order whatever the order asked: ("a1", "a0") gave the (a0, a1) table, a transpose that
        went unseen when the two sizes agree)."""
        from mmopt.records.domain import _unordered
        if (why := _unordered(attrs)) is not None:  # the axes follow the order asked: a set's was a silent transpose
            raise TypeError(f"The 'attrs' parameter of Synthetic.marginal must be a tuple or list of attribute names "
                            f"or indices (the table's axes follow its order). Got a {type(attrs).__name__}: {why}. "
                            f"Pass a tuple, e.g. {tuple(sorted(map(str, attrs)))!r}.")
        # once, before the check reads it: an iterator was used up there, and the table came back in domain order
        asked = (attrs,) if isinstance(attrs, str) or not hasattr(attrs, "__iter__") else tuple(attrs)
        (A,) = rc.check_sets([asked], self.domain, caller="Synthetic.marginal", name="attrs")
        v.check_allocation(2 * math.prod(self.domain.shape[i] for i in A), what=f"the marginal on {A}",
                           caller="Synthetic.marginal", remedy=" Ask for a marginal on fewer attributes.")
        order = [self.domain.index(a) if isinstance(a, str) else int(a) for a in asked]
        # a copy: the residual model hands out its cached table, and editing the returned one changed the model
        table = np.array(self.model.marginal(A), dtype=np.float64, copy=True)
        return table.transpose([A.index(i) for i in order]) if sorted(order) == list(A) else table

    def records(self, n: int | None = None, *, seed=None, bins: str = "values"):
        """``n`` synthetic rows (default: the model's total, rounded) as a DataFrame labelled by the domain.

        Column i holds a pandas Categorical whose categories are attribute i's categories, or for a binned
        attribute a number inside each bin, its left edge where finite (``bins="values"``, the default: rows the
        domain counts again) or its bin labels "[a, b)" (``bins="labels"``, for reading only:
        :func:`mmopt.records.marginal_counts` reads numbers into bins and drops the labels, as it drops any value
        outside the domain — with labels by default, counting or fitting MST on the synthetic rows saw zero rows,
        a helper's probe). ``seed`` (default: the algorithm's seed) seeds the sampler: post-processing, so a seeded
        numpy draw costs no privacy.
        """
        caller = "Synthetic.records"
        bins = v.check_choice(bins, name="bins", caller=caller, choices=("labels", "values"))
        if n is None:
            n = self.default_rows
            if n > MAX_ROWS:  # the default, not the caller's n: say where it came from
                raise ValueError(f"{caller}: the model's total (its noisy record count) is {n:,}, more rows than one "
                                 f"call draws ({MAX_ROWS:,}). Pass n= (at most {MAX_ROWS:,}) and draw in batches, "
                                 "with a different seed per batch.")
        n = v.check_int(n, name="n", caller=caller, low=0, high=MAX_ROWS)
        # the codes (n × d int64) and the sampler's temporaries (a few n-vectors), before any is allocated
        v.check_allocation(n * (len(self.domain.shape) + 4), what=f"{n:,} synthetic rows", caller=caller,
                           remedy=f" Draw at most {rows_per_call(len(self.domain.shape)):,} rows per call "
                           "(rows_per_call) and concatenate, with a different seed per call.")
        rng = np.random.default_rng(self.seed if seed is None else check_seed(seed, caller))  # (numpy's bare
        # "expected non-negative integer" for seed=-1 before)
        return self._frame(self.model.sample(n, rng), bins)

    def batches(self, n: int | None = None, *, rows_per_batch: int | None = None, seed=None, bins: str = "values"):
        """``n`` synthetic rows (default: the model's total) as DataFrames of at most ``rows_per_batch`` rows each.

        For more rows than one :meth:`records` call draws (:func:`rows_per_call`), e.g. to stream them into a
        Parquet file with ``pyarrow.parquet.ParquetWriter``. The first batch is ``records(m, seed=seed)``'s rows; batch
        i ≥ 1 is seeded by numpy's SeedSequence(seed, spawn_key=(i,)) (no batch repeats another's, nor a batch of a
        run with another seed, as seed + i would, and as the entropy [seed, i] did that of seed + i·2³²: the review),
        fresh entropy when there is no seed. Post-processing: any number of batches costs no privacy.

        >>> import warnings, mmopt
        >>> from mmopt.records.datasets import cps1988
        >>> from mmopt.synth import mst
        >>> df, D = cps1988()
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")  # seed=0: numpy's sampler, a simulation
        ...     s = mst(df, D, mmopt.Privacy(1.0, 1e-9), seed=0)
        >>> [len(b) for b in s.batches(1_000, rows_per_batch=400)]
        [400, 400, 200]
        """
        caller = "Synthetic.batches"
        bins = v.check_choice(bins, name="bins", caller=caller, choices=("labels", "values"))
        total = self.default_rows if n is None else v.check_int(n, name="n", caller=caller, low=0)
        most = rows_per_call(len(self.domain.shape))
        step = most if rows_per_batch is None else v.check_int(rows_per_batch, name="rows_per_batch",
                                                               caller=caller, low=1, high=most)
        base = self.seed if seed is None else check_seed(seed, caller)
        for i, start in enumerate(range(0, total, step)):
            size = min(step, total - start)
            if i == 0:
                yield self.records(size, seed=base, bins=bins)
            else:
                rng = np.random.default_rng(None if base is None else np.random.SeedSequence(base, spawn_key=(i,)))
                yield self._frame(self.model.sample(size, rng), bins)

    def save(self, path, *, overwrite: bool = False):
        """Write the model, the domain, the steps and the budget to a portable ``.npz`` file (:mod:`mmopt.synth.saved`).

        Post-processing: the file holds only the noisy measurements' estimates, the fitted model and public facts
        (each step's kind, ρ, noise scale and attribute sets), so saving it, and sampling or reading marginals from
        what :func:`load` returns, spends no privacy. A simulation (``sampler="numpy-seeded"``) is saved as one,
        with its seed.

        Parameters
        ----------
        path : str or os.PathLike
            ``.npz`` is appended when the name does not end with it.
        overwrite : bool, default=False
            Replace an existing file (else FileExistsError). The file appears complete or not at all.

        Returns
        -------
        pathlib.Path
            The file written.

        Examples
        --------
        >>> import os, tempfile, warnings, mmopt, pandas as pd
        >>> from mmopt.records import Attribute, Domain
        >>> D = Domain((Attribute("a", categories=("x", "y")), Attribute("b", categories=(0, 1, 2))))
        >>> df = pd.DataFrame({"a": ["x", "y"] * 50, "b": [0, 1, 2, 2] * 25})
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")  # seed=0: numpy's sampler, a simulation
        ...     s = mmopt.synth.mst(df, D, mmopt.Privacy(1.0, 1e-9), seed=0)
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     back = load(s.save(os.path.join(tmp, "model")))
        >>> back.sampler, bool((back.marginal(("a", "b")) == s.marginal(("a", "b"))).all())
        ('numpy-seeded', True)
        >>> back.records(5, seed=1).equals(s.records(5, seed=1))
        True
        """
        from mmopt.synth import saved  # lazy: mmopt.persist's envelope is needed only to write a file
        return saved.write(self, path, overwrite)

    def _frame(self, codes: np.ndarray, bins: str):
        """The rows of cell ``codes`` (n × d) as the DataFrame :meth:`records` describes."""
        from mmopt.records.rows import labelled_rows
        return labelled_rows(self.domain, codes, bins)


def load(path) -> Synthetic:
    """Read a file written by :meth:`Synthetic.save`, verify it, and rebuild the Synthetic exactly.

    Its marginals are the saved model's bit for bit and its records under a seed the same rows; ``sampler``
    says whether it was a release ("opendp") or a simulation ("numpy-seeded", with its ``seed``). ``details``
    holds what the file could hold exactly (:mod:`mmopt.synth.saved`).

    Parameters
    ----------
    path : str or os.PathLike
        The file; ``path + ".npz"`` when ``path`` does not exist and lacks the suffix.

    Returns
    -------
    Synthetic

    Raises
    ------
    ValueError
        Naming the file and what is wrong: not an ``.npz`` archive (e.g. empty or truncated), another format (a
        strategy saved by :func:`mmopt.save`), a newer format version, failed SHA-256 checksums (corrupted or
        edited), or a model, domain or budget whose parts disagree.
    FileNotFoundError
        When there is no such file.
    """
    from mmopt.synth import saved
    return Synthetic(**saved.read(path))


def spent(steps, budget: float, delta: float) -> tuple[float, float]:
    """(ρ, ε): Σ ρ of the steps in exact rationals rounded up, and its ε at δ; a ValueError past the budget."""
    total = sum((Fraction(s.rho) for s in steps), Fraction(0))
    if total > Fraction(budget):  # the curator refuses first; this is the last line of defence
        raise ValueError(f"The steps spent ρ = {float(total)!r} > the budget {budget!r}.")
    rho = round_up(total)
    return rho, (epsilon_of_rho(rho, delta) if rho > 0 else 0.0)


def finite_total(total: float) -> float:
    """The model's total: the noisy number of records, at least 1 (a non-positive estimate says almost nothing)."""
    return max(float(total), 1.0) if math.isfinite(total) else 1.0
