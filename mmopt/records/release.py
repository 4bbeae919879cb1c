"""Private marginals from records: residual measurements with OpenDP noise, least-squares marginals.

Notation: see README and :mod:`mmopt.structured.residual`. A record adds the unit vector e_cell to the data
vector x (records with an out-of-domain value add nothing: :mod:`mmopt.records.domain`), so under
add/remove-one-record neighbours the sensitivity of the residual strategy A = [c_S K_S] is the norm of one
column of A, the same for every column (:func:`mmopt.structured.residual.sensitivity`, exact):

    Δ₂² = Σ_S c_S² ∏_{i∈S} (1 − 1/nᵢ),        Δ₁ = Σ_S c_S ∏_{i∈S} ‖Bᵢ‖₁.

The answers y_S = c_S (⊗_{i∈S} Bᵢ) m_S need only the marginal counts m_S of the records
(:func:`mmopt.records.marginal_counts`, one group-by per maximal set), never x. Noise is drawn once, after
aggregation, by OpenDP (:mod:`mmopt._base.opendp`: Laplace at Δ₁ for δ = 0, Gaussian at Δ₂ for δ > 0, Δ rounded
upwards, OpenDP's privacy map verified before the draw). The least-squares marginal on A,

    M_A x̂ = Σ_{S⊆A} N_S/(N_A c_S) · (⊗_{i∈S} Bᵢᵀ y_S, repeated along A∖S)
            (:func:`mmopt.structured.residual.reconstruct`),

is post-processing; every cell of it has variance  var_A = s² Σ_{S⊆A} r_S N_S / (N_A² c_S²)  with s² = σ²
(Gaussian) or 2b² (Laplace) — :func:`mmopt.structured.residual.evaluate`'s per-marginal variance for unit
weights. With the default strategy (``residual.plan``) and Gaussian noise the total of these variances is the
SVD lower bound: no matrix mechanism answers the workload with less total squared error (Xiao, He, Zhang,
Kifer, NeurIPS 2023; Li et al., PODS 2010, Thm 5.26).
"""

from __future__ import annotations

import contextlib
import types
import warnings

import numpy as np

from mmopt._base import opendp as _opendp
from mmopt._base import validation as v
from mmopt._base.kept import keep, keeping_draws
from mmopt.privacy import Privacy
from mmopt.records import mechanism as mc
from mmopt.records import read as rd
from mmopt.records.domain import Domain
from mmopt.records.mechanism import up_to
from mmopt.records.result import TABLE_COLUMNS, RecordsRelease

__all__ = ["RecordsRelease", "budget_of", "refuse_label", "refuse_seeded", "release_marginals", "up_to"]


def release_marginals(records, domain: Domain, workload, privacy: Privacy, *, strategy=None, seed=None,
                      batch_size: int = rd.BATCH_ROWS, accountant=None, label: str | None = None) -> RecordsRelease:
    """Release the marginals of ``workload`` from records under (ε, δ)-DP, with their predicted variance.

    The strategy's answers A x (marginal counts times weights, or their residuals) are computed correctly rounded
    (integer residuals times one coefficient) and d_in charges that rounding for at most 2³² records, which are
    refused before any draw past it (:mod:`mmopt.records.exact_answers`, as the dense release's
    :mod:`mmopt.dense.exact_answers`).

    Parameters
    ----------
    records : pandas.DataFrame, path, dask DataFrame, polars LazyFrame or DataFrame, or DuckDB relation
        As :func:`mmopt.records.marginal_counts` (records outside the domain are dropped, a public rule); Polars
        and DuckDB count inside their engine, with the same integers. Only the columns of the attributes the
        strategy measures or the workload names are read, so a gap elsewhere drops no record (and the column need
        not exist). A workload of the total alone (``[()]``) names none: then every domain column is read and a
        record with a gap in any of them is not counted (SQL's ``COUNT(*)`` counts it); give such a release a domain
        of the columns whose gaps should drop a record.
    domain : Domain
    workload : int, str, list of tuple, dict, or MarginalWorkload
        k for all k-way marginals, "k<=K" for every marginal on 1 to K attributes (the 1- and 2-way marginals:
        "k<=2"), a list of attribute tuples (names or indices; the 2-way marginal of sex and age is
        ``[("sex", "age")]``, and a bare ``("sex", "age")`` is refused as ambiguous; each marginal once), a dict
        {attribute tuple: weight} (a marginal of weight w counts w² in the optimised error), or a marginal
        workload over ``domain.shape``.
    privacy : Privacy or "remaining"
        δ = 0: Laplace noise (ε-DP); δ > 0: Gaussian noise ((ε, δ)-DP, also reported as ρ-zCDP). With an
        ``accountant``, ``"remaining"`` spends everything it has left, as :meth:`mmopt.Accountant.release` does.
    strategy : ResidualStrategy, Plan, WeightedMarginals, ImplicitStrategy of weighted marginals, or None
        Any strategy measurable from marginal counts. None: the best found for the noise
        (:func:`mmopt.records.plans.choose`): the residual plan under Gaussian noise (optimal among all matrix
        mechanisms for total squared error), under Laplace noise the best of weighted marginals (a seeded
        heuristic search), each marginal once and the residual plan, by exact expected error; ``message`` of
        the result says which and how far from the lower bound.
    seed : int or None
        None (a real release): OpenDP's sampler. An int: numpy's generator seeded with it, at the same
        OpenDP-verified noise scale — reproducible bit for bit, for tests and simulations only (anyone who knows
        the seed can subtract the noise); a warning says so. Refused with ``accountant`` (a ledger records
        releases).
    batch_size : int
        Rows per batch when counting.
    accountant : mmopt.Accountant or None
        The budget this release spends from: checked before any noise (a refusal draws nothing), written to its
        ledger as pending before the draw, then replaced by OpenDP's verified loss (and the ρ of the noise drawn).
    label : str or None
        The ledger's name for this release (default "release k"); only with ``accountant`` (refused without one).

    Returns
    -------
    RecordsRelease

    Raises
    ------
    ValueError, TypeError
        Bad domain, workload, strategy, privacy or records (missing column, wrong dtype): all before any noise
        is drawn. Nothing raises after the draw (a failing post-processing step warns instead).

    Examples
    --------
    >>> import pandas as pd, mmopt
    >>> from mmopt.records import Attribute, Domain
    >>> D = Domain((Attribute("sex", categories=("F", "M")), Attribute("age", edges=(0, 18, 65, 120)),
    ...             Attribute("region", categories=("N", "S"))))
    >>> df = pd.DataFrame({"sex": ["F", "M", "M", "F"] * 50, "age": [30, 70, 12, 30] * 50,
    ...                    "region": ["N", "S", "S", "N"] * 50})
    >>> r = release_marginals(df, D, 2, mmopt.Privacy(1.0, 1e-6))
    >>> sorted(r.marginals), r.marginals[(0, 1)].shape, r.noise, r.sampler
    ([(0, 1), (0, 2), (1, 2)], (2, 3), 'gaussian', 'opendp')
    >>> r.rho < 0.05, r.table().columns.tolist()
    (True, ['marginal', 'sex', 'age', 'region', 'estimate', 'std_error'])
    """
    # every attribute is a column of RecordsRelease.table: one named like its own columns lost its labels to the
    # set names, estimates or bounds (a helper's probe); refused before any noise, as the hierarchy release does
    if isinstance(domain, Domain) and (clash := [a for a in domain.names if a in TABLE_COLUMNS]):
        raise ValueError(f"The 'domain' parameter of release_marginals names {clash[0]!r}, a column the release's "
                         f"table has of its own ({', '.join(TABLE_COLUMNS)}), whose values would replace its labels. "
                         f"Rename the attribute and the records' column (e.g. '{clash[0]}_group').")
    return release(records, domain, workload, privacy, strategy=strategy, seed=seed, batch_size=batch_size,
                   accountant=accountant, label=label, caller="release_marginals", name="records", stacklevel=3)


def release(records, domain: Domain, workload, privacy: Privacy, *, strategy, seed, batch_size: int, accountant,
            label: str | None, caller: str, name: str, stacklevel: int) -> RecordsRelease:
    """:func:`release_marginals` for the public function ``caller``, whose parameter ``name`` holds the records
    (mmopt.sql's 'source'): refusals name them; ``stacklevel`` points the seeded-noise warning at the user's line."""
    _check_accountant(accountant, caller)
    refuse_label(label, accountant, caller)
    if seed is not None:
        seed = v.check_int(seed, name="seed", caller=caller, low=0)
    refuse_seeded(seed, accountant, caller)
    privacy = budget_of(privacy, accountant, caller)
    prep = mc.prepare(domain, workload, privacy, strategy, caller)
    d_in = prep.sensitivity
    exact, Ax = mc.strategy_answers(prep, records, batch_size=batch_size, caller=caller, name=name)  # schema checks
    # OpenDP's scale lies within 16× the analytic one (its search's bracket): a budget whose variance there is not
    # a finite float is refused before any draw
    _check_noise_scale(_opendp.calibrated_scale(privacy, d_in, caller), privacy, caller)
    what = f"records release of {len(prep.sets)} marginal(s), {privacy.noise} noise on '{prep.strategy.name}'"
    with keeping_draws(caller):  # a Ctrl-C after the draw leaves the noisy values on the exception
        with (accountant.pending_release(privacy, label, what, caller=caller) if accountant is not None
              else contextlib.nullcontext([])) as outcome:  # the ledger: checked, then pending before the draw
            if seed is None:
                y, scale, loss = _opendp.measure(Ax, d_in, privacy, noise_scale=None, caller=caller)
                sampler = "opendp"
            else:  # OpenDP calibrates and verifies the scale (its map does not depend on the data); nothing drawn.
                # Its Laplace lattice depends on the number of measurements: the same n as the unseeded draw
                _, scale, loss = _opendp.calibrate(Ax.shape[0], d_in, privacy, noise_scale=None, caller=caller)
                warnings.warn(f"{caller}: seed={seed} draws the noise with numpy's seeded generator (at OpenDP's "
                              "verified scale): reproducible, but anyone who knows the seed can remove the noise. "
                              "Use it for tests and simulations; omit 'seed' for a real release.", UserWarning,
                              stacklevel=stacklevel)
                y = seeded_noise(Ax, scale, privacy.noise, seed)
                keep(y, scale, loss, caller, privacy.noise)
                sampler = "numpy-seeded"
            outcome.append(types.SimpleNamespace(verified_loss=loss, noise=privacy.noise, sensitivity=d_in,
                                                 noise_scale=float(scale)))
        # -- the noise is drawn: from here on nothing may raise (the budget is spent) --
        rho = (mc.after_draw(caller, lambda: _rho(d_in, scale), "the zCDP conversion") if privacy.noise == "gaussian"
               else None)
        return mc.assemble(prep, y, noise=privacy.noise, scale=float(scale), epsilon=privacy.epsilon,
                           delta=privacy.delta, rho=rho, sampler=sampler, caller=caller)


def _check_accountant(accountant, caller: str) -> None:
    if accountant is not None:
        from mmopt.accounting import Accountant  # lazy: the accounting layer is above this one
        if not isinstance(accountant, Accountant):
            raise TypeError(f"The 'accountant' parameter of {caller} must be an mmopt.Accountant or None. "
                            f"Got {type(accountant).__name__} instead.")


def refuse_seeded(seed, accountant, caller: str) -> None:
    """Refuse a seeded draw with an accountant, before anything is read or spent: it was charged and recorded as
    source "release" ("OpenDP drew the noise") though numpy's seeded generator drew it (mmopt.synth's too)."""
    if seed is not None and accountant is not None:
        raise ValueError(f"{caller}: seed={seed} draws numpy's seeded noise, which anyone who knows the seed can "
                         "remove: a simulation, not a release, and the accountant's ledger records releases. "
                         "Drop 'accountant' to simulate, or drop 'seed' to release through OpenDP's sampler.")


def refuse_label(label, accountant, caller: str) -> None:
    """Refuse a ``label`` given without an ``accountant``, before anything is read or spent: it names an entry of
    the ledger, and dropped without a word it was lost (release_marginals, the grouping-sets releases; mmopt.synth
    refused it first)."""
    if label is not None and accountant is None:
        raise ValueError(f"The 'label' parameter of {caller} names the run's entry in an accountant's ledger. Got "
                         f"label={label!r:.40} without 'accountant'; pass accountant=... too, or drop 'label'.")


def budget_of(privacy, accountant, caller: str, *, run: bool = False, gaussian: bool = False):
    """``privacy``, or with an ``accountant`` the string "remaining" as the Privacy of all it has left (the rule of
    :meth:`mmopt.Accountant.release`). The accountant's refusals told a records release to pass
    privacy='remaining', which it then refused as "must be a Privacy ... Got str" (a newcomer's audit).

    With an ``accountant`` a budget it cannot pay is refused here, as the pending entry would refuse it (``run``:
    a synth run's charge, :func:`mmopt.accounting._pending.charge_of`), before a strategy search or a read: the
    hierarchy route refused only after its plan's search. ``gaussian``: the caller adds Gaussian noise only, so
    "remaining" with no δ left is refused in those words (:func:`mmopt.accounting._pending.requested`)."""
    _check_accountant(accountant, caller)
    if accountant is not None:
        from mmopt.accounting._pending import refuse_unless_fits, requested  # lazy, as above
        privacy = requested(accountant, privacy, caller, gaussian=gaussian)
        refuse_unless_fits(accountant, privacy, caller, run=run)  # nothing written: the pending entry checks again
        return privacy
    if isinstance(privacy, str) and privacy == "remaining":
        raise ValueError(f"The 'privacy' parameter of {caller} is 'remaining', which spends what an accountant has "
                         "left: pass accountant=... too, or give a Privacy(epsilon, delta).")
    return privacy


def seeded_noise(Ax: np.ndarray, scale: float, noise: str, seed: int) -> np.ndarray:
    """A x + numpy noise seeded with ``seed`` at ``scale`` (tests and simulations only: the seed reveals it)."""
    gen = np.random.default_rng(seed)
    draw = gen.normal if noise == "gaussian" else gen.laplace
    _opendp.note_draw()
    return Ax + draw(0.0, scale, Ax.shape)


def _check_noise_scale(scale: float, privacy: Privacy, caller: str) -> None:
    """Refuse, before any draw, a budget whose noise variance (σ², or 2b² for Laplace) leaves float64 at up to 16×
    the analytic ``scale`` (OpenDP's calibration searches within that bracket): at ε = 1e-300 the release reported
    every variance as inf (and its values as noise of scale 1e300) without a word."""
    with np.errstate(over="ignore"):
        s2 = np.float64(16.0 * scale) ** 2 * (2.0 if privacy.noise == "laplace" else 1.0)
    if not np.isfinite(s2):
        raise ValueError(f"{caller}: at epsilon={privacy.epsilon!r} the noise scale (≈ {scale:g}) is so large that "
                         "its variance leaves float64: every released value would be noise and every variance inf. "
                         "Raise 'epsilon'. Nothing was drawn.")


def _rho(d_in: float, scale: float) -> float:
    """ρ = Δ'²/(2σ²) by OpenDP's make_gaussian map (rounded upwards), Δ' the sensitivity charged on the noise's
    lattice (:func:`mmopt._base.opendp.charged_sensitivity`, as the ledger); its errors become ValueError."""
    from mmopt.accounting._zcdp import gaussian_rho, opendp
    dp = opendp("release_marginals")
    try:
        return gaussian_rho(_opendp.charged_sensitivity(d_in), scale)
    except dp.OpenDPException as exc:
        raise ValueError(str(exc)) from None
