"""AIM: select, measure, estimate — iteratively, with the paper's budget annealing and quality score.

McKenna, Mullins, Sheldon & Miklau, *AIM: An Adaptive and Iterative Mechanism for Differentially Private
Synthetic Data*, PVLDB 15(11), 2022 (arXiv:2201.12677), Algorithm 1 and its reference code (``mechanisms/aim.py`` of
github.com/ryan112358/private-pgm). Notation: see README and :mod:`mmopt.synth.curator`.

Algorithm, with the zCDP budget ρ of ``privacy`` and T = 16d rounds (``rounds``) as the paper:

* Candidates: the downward closure of the workload's marginals (without ∅), each with the paper's weight
  w_C = Σ_{r∈W} |C ∩ r|.
* σ = √(T/(2·0.9·ρ)), ε = √(8·0.1·ρ/T). **Initialise**: the d one-way marginals measured at d/(2σ²) (the paper
  measures each at σ; here mmopt's residual strategy for the 1-way workload at the same ρ, the certified Gaussian
  optimum for it). With ``initial_share`` s they take s·ρ instead and σ, ε come from (1 − s)·ρ (OpenDP's
  contingency-table AIM: s = 1/2).
* **Each round**: if the budget left is below 2(1/(2σ²) + ε²/8), this is the last round and σ, ε are reset to
  spend exactly what is left (0.9 on the measurement, 0.1 on the selection). Filter the candidates: keep C if the
  model with C added has a junction tree of at most ``max_model_size``·(ρ used)/ρ MB, or if C lies inside a
  measured clique. The paper triangulates the model once per candidate; here one junction tree is kept across
  rounds (the chosen clique contracted into it) with an upper bound per candidate (:mod:`mmopt.synth.model_size`):
  the bound is the size of the tree the model then samples from, so the cap holds for the model itself, and AIM
  runs at d = 100. **Select** C by the
  exponential mechanism at ε with the paper's quality q_C = w_C(‖m_C − m̂_C‖₁ − √(2/π)·σ·N_C) (m̂_C the current
  model's estimate, N_C cells; the expected L1 error of a fresh measurement at σ is subtracted), sensitivity
  max_C w_C — through the curator (:meth:`mmopt.synth.curator.Curator.select`), which alone sees m_C. **Measure**
  C at 1/(2σ²) with mmopt's residual strategy for {C} (for one marginal, as accurate as the identity; Δ₂ = 1).
  **Estimate** (post-processing). **Anneal**: if the model's estimate of C moved by at most √(2/π)·σ·N_C in L1,
  halve σ and double ε.
* **Estimator** (the paper uses Private-PGM's, warm-started every round). ``estimator="junction"``: in the loop and
  at the end, the maximum-likelihood member of the measured cliques' graphical-model family on the model's junction
  tree (:mod:`mmopt.synth.junction`: belief propagation and mirror descent, no whole table), each round's fit
  starting from the last round's θ (:data:`~mmopt.synth.junction.ROUND_ITERATIONS` iterations a round, then
  :data:`~mmopt.synth.junction.ITERATIONS` at the end: iterations, not CPU seconds, so that a seeded run is the
  same on every machine). Why in the loop: the selection scores each candidate against the model's estimate, and
  the residual model's estimate of an unmeasured set is local (maximum entropy inside the set), so on
  tree-structured data AIM kept measuring triples the tree already implied.
  ``"residual"``: :class:`mmopt.synth.estimate.ResidualModel` (least squares in the residual basis, projected; a
  heuristic in parts, stated there) in the loop and out, the cheapest. ``"joint"``: the residual model in the loop,
  and at the end the same family's maximum-likelihood whole table (:mod:`mmopt.synth.joint`; records by systematic
  sampling from it), on domains of at most :data:`mmopt.synth.joint.MAX_CELLS` cells. ``"auto"`` (default): "joint" on
  those domains, else "junction".
  Measured (ε = 1, workload error of the rows; ``benchmarks/results/bench_synth.txt``, 10⁵ records of
  :func:`mmopt.records.datasets.tree_network`, all 2-way marginals): residual → junction in the loop, 0.0209 →
  0.0134 at 50 mixed attributes, 0.0026 → 0.0022 at 50 binary, 0.0557 → 0.0203 at 100 mixed (98 → 305 CPU s),
  0.0074 → 0.0028 at 100 binary (136 s both); the model error on :mod:`experiments.synth`'s tree15 (all 3-way
  marginals) 0.130 → 0.067 (README).
  The joint fit in the loop on the small domains chose no better cliques (a development run, not kept: RAND HIE,
  ε = 0.1, 20 trials: 0.152 against 0.151). At the end it changes the model
  error by −5 % to +1 % (the first 5 seeded trials of ``python -m experiments.synth --full``: RAND HIE
  0.1553 / 0.0433 / 0.0090 → 0.1476 / 0.0413 / 0.0091 at ε = 0.1 / 1 / 10, CPS 1988 within its standard errors).

**Privacy.** As MST's (:mod:`mmopt.synth.mst`): each measurement is a Gaussian mechanism at ρ = Δ₂²/(2σ²) by
OpenDP's map, each selection an ε²/8-zCDP exponential mechanism (|Δq_C| ≤ w_C under add/remove-one-record, since
m̂_C and the bias are functions of earlier releases and public constants); the curator's ledger adds the ρ's in
exact rationals and refuses any step past ρ, so Σρ ≤ ρ(ε, δ) and the output is (ε, δ)-DP. The annealing test and
the filter use only released quantities.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np

from mmopt._base import validation as v
from mmopt._base.rounding import up
from mmopt.accounting._zcdp import RHO_FLOOR
from mmopt.records import counts as rc
from mmopt.records.domain import Domain, check_domain
from mmopt.structured.residual import closure as cl
from mmopt.synth import joint as jt
from mmopt.synth import junction, junction_pairs
from mmopt.synth.curator import Curator
from mmopt.synth.estimate import ResidualModel
from mmopt.synth.model_size import junction_tree
from mmopt.synth.mst import noise_for
from mmopt.synth.result import Synthetic, budget_rho, finite_total, spent
from mmopt.synth.spend import charged, requested

__all__ = ["aim", "candidates"]

#: The paper's split of each round's budget between measurement and selection.
MEASURE_SHARE = 0.9


def candidates(workload) -> dict:
    """{C: w_C} for every non-empty subset C of a workload marginal, w_C = Σ_r |C ∩ r| (the paper's weights).

    Examples
    --------
    >>> candidates([(0, 1), (1, 2)])[(1,)], candidates([(0, 1), (1, 2)])[(0, 1)]
    (2, 3)
    """
    out = {}
    for r in workload:
        for k in range(1, len(r) + 1):
            for C in itertools.combinations(r, k):
                out[C] = None
    # Σ_r |C ∩ r| = Σ_{a ∈ C} #{r : a ∈ r}: one count per attribute, not a pass over the workload per candidate
    holding: dict = {}
    for r in workload:
        for a in set(r):
            holding[a] = holding.get(a, 0) + 1
    return {C: sum(holding[a] for a in C) for C in sorted(out, key=lambda S: (len(S), S))}


def aim(records, domain: Domain, workload, privacy, seed=None, *, rounds: int | None = None,
        max_model_size: float = 80.0, estimator: str = "auto", initial_share: float | None = None,
        accountant=None, label: str | None = None) -> Synthetic:
    """AIM synthetic data under (ε, δ)-DP (module docstring for the algorithm and its privacy argument).

    Parameters
    ----------
    records : pandas.DataFrame, path, or dask.dataframe.DataFrame
        As :func:`mmopt.records.marginal_counts`.
    domain : Domain
    workload : list of tuple
        The marginals to preserve (attribute names or indices), each with weight 1, e.g. all 3-way marginals.
    privacy : Privacy or "remaining"
        (ε, δ) with δ > 0, spent as ρ-zCDP. With an ``accountant``, ``"remaining"`` spends everything it has left
        (as :func:`mmopt.records.release_marginals` does; refused under PLD composition, :mod:`mmopt.synth.spend`).
    seed : int or None
        None: OpenDP's samplers. An int: numpy's seeded generator (simulation only; a warning says so). Refused
        with ``accountant`` (a ledger records releases).
    rounds : int or None
        T (default 16·d, the paper's).
    max_model_size : float
        The paper's model-size cap in MB (default 80).
    initial_share : float or None
        The share of ρ spent on the initial one-way marginals, in (0, 1); the rounds' σ and ε then come from the
        rest. None (default): the paper's d/(2σ²) at the rounds' σ (d·0.9/T of ρ: 5.6 % with T = 16d). OpenDP's
        contingency-table AIM spends 0.5 (its ``oneway_split``). No share suits both real tables of
        ``experiments.synth`` (a helper's measurement, the experiment's seeds, paired differences in model error):
        0.5 gives −0.0066 ± 0.0022 on RAND HIE at ε = 0.1 (60 trials) but +0.0213 ± 0.0023 / +0.0070 ± 0.0006 /
        +0.0020 ± 0.0001 on CPS 1988 at ε = 0.1 / 1 / 10 (20 trials); ``rounds`` = 8d, which doubles the paper's
        one-way share to ~11 %, −0.0047 ± 0.0021 and +0.0124 ± 0.0020 on the same two at ε = 0.1. The paper's
        split is kept. Why RAND HIE at ε = 0.1 wants more (a later helper's analysis of the 60 trials): an attribute
        that no selected clique contains keeps its initial noisy one-way marginal, and with each choice's ε at
        9.4·10⁻⁴ against Δ = 108 the selection is near uniform among the cliques the size penalty admits, so
        mdvis (7 values) stays uncovered in 35 % of trials and disea in 13 %; the error is 0.1392 with every
        attribute covered (32 trials) and 0.1549 with two uncovered, and exact one-ways in place of the noisy
        ones lower it by 0.0089 ± 0.0013 (paired). Checked and fine there: the final fit (400 iterations change
        it by +0.0005 ± 0.0003), the budget shares, the selection's law, the rounds' variances, no stale model.
    estimator : {"auto", "joint", "junction", "residual"}
        The model in the loop and returned (module docstring): "auto" (default) "joint" when the domain has at
        most :data:`mmopt.synth.joint.MAX_CELLS` cells, else "junction"; "joint" (the residual model in the
        loop, the whole-table fit at the end) refuses larger domains before any budget is spent; "junction" the
        family on the model's junction tree in the loop and at the end (:mod:`mmopt.synth.junction`, any domain);
        "residual" the residual model throughout (the fastest).
    accountant : mmopt.Accountant or None
        The budget the whole run spends from, as one release of ``privacy`` (:mod:`mmopt.synth.spend`): checked
        before the records are read (a refusal reads and draws nothing), written to its ledger as pending before the
        first draw (an error or Ctrl-C from then on leaves it counted in full), then replaced by the run's
        ``epsilon``, ``delta`` and ``rho``.
    label : str or None
        With ``accountant``: the ledger's name for the run (default "aim k").

    Returns
    -------
    Synthetic
        ``details``: "selected" (the cliques measured after the 1-way marginals), "sigma" (the noise of each
        measurement), "annealed" (rounds whose σ was halved), "estimates", "estimator" (which: "residual", a
        heuristic whose marginals and records agree only approximately, flagged ``heuristic`` and not
        ``consistent``; or the joint or junction fit's status, iterations and loss). Every field is public or
        post-processing of the measurements: the CPU seconds it once held grew with the number of records, a
        timing channel in an object one saves with the release (a helper's audit); time the call instead.

    Examples
    --------
    >>> import itertools, warnings, mmopt
    >>> from mmopt.records.datasets import cps1988
    >>> df, D = cps1988()
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     s = aim(df, D, list(itertools.combinations(range(7), 2)), mmopt.Privacy(1.0, 1e-9), seed=0)
    >>> s.rho <= s.budget, s.epsilon <= 1.0, len(s.records(10))
    (True, True, 10)
    """
    caller = "aim"
    privacy, seed = requested(privacy, seed, accountant, label, caller)  # before anything is read or spent
    check_domain(domain, caller=caller)
    if isinstance(workload, dict):  # iterating it gave its keys: the weights were dropped without a word
        raise TypeError(f"The 'workload' parameter of {caller} must be a list of attribute tuples, each marginal "
                        f"of weight 1 (the paper's workload). Got a dict, whose weights aim does not take. Pass "
                        f"list(workload) to drop them.")
    sets = rc.check_sets(workload, domain, caller=caller, name="workload", distinct=True)
    if any(len(S) == 0 for S in sets):
        raise ValueError(f"The 'workload' parameter of {caller} must list at least one non-empty marginal. "
                         f"Got {list(sets)!r:.80}.")
    rho = budget_rho(privacy, caller)
    d = len(domain.shape)
    T = d * 16 if rounds is None else v.check_int(rounds, name="rounds", caller=caller, low=1)
    size_cap = v.check_real(max_model_size, name="max_model_size", caller=caller, low=0.0, low_open=True)
    v.check_choice(estimator, name="estimator", caller=caller, choices=("auto", "joint", "junction", "residual"))
    joint_fits = math.prod(domain.shape) <= jt.MAX_CELLS
    if estimator == "joint" and not joint_fits:
        raise ValueError(f"The 'estimator' parameter of {caller} cannot be 'joint' for a domain of "
                         f"{math.prod(domain.shape):,} cells (at most {jt.MAX_CELLS:,}). Use 'residual' or 'auto'.")
    use_junction = estimator == "junction" or (estimator == "auto" and not joint_fits)
    first = None if initial_share is None else v.check_real(initial_share, name="initial_share", caller=caller,
                                                            low=0.0, high=1.0, low_open=True, high_open=True)
    shape = tuple(domain.shape)
    weights = candidates(sets)
    cur = Curator(records, domain, rho, noise_for(seed, caller), caller)

    if first is not None and not rho * first >= RHO_FLOOR:  # ρ·s underflowed: a ZeroDivisionError at the first σ
        raise ValueError(f"The 'initial_share' parameter of {caller} leaves the one-way marginals ρ = "
                         f"{rho * first:.3g} (below {RHO_FLOOR:g}): no Gaussian noise has that ρ in float64. Got "
                         f"{initial_share!r}; give a share of at least 1e-12, or None for the paper's split.")
    if first is None and d * MEASURE_SHARE >= T:  # data-independent, so said before anything is drawn
        warnings.warn(f"{caller}: rounds={T} is at most {MEASURE_SHARE:g}·d = {d * MEASURE_SHARE:g}, so the paper's "
                      "split gives the one-way marginals (all but a sliver of) the budget and nothing of use is "
                      f"selected. Use the default rounds (16·d = {16 * d}), or initial_share to fix the one-way "
                      "share.", UserWarning, stacklevel=2)
    rest = rho if first is None else rho * (1 - first)  # what the rounds' σ and ε are computed from
    sigma = math.sqrt(T / (2 * MEASURE_SHARE * rest))
    eps = math.sqrt(8 * (1 - MEASURE_SHARE) * rest / T)
    one = [(i,) for i in range(d)]
    initial = d / (2 * sigma**2) if first is None else rho * first
    what = (f"aim synthetic data: Gaussian measurements and exponential-mechanism choices, ρ-zCDP (budget "
            f"ρ={up(rho)}), {len(sets)} workload marginal(s)")
    with charged(accountant, privacy, label, what, caller) as outcome:  # checked; pending before the first draw
        est = cur.measure(one, min(initial, cur.remaining), "1-way marginals")
        measured = list(one)
        model = ResidualModel(est, measured, finite_total(est.total))
        selected, annealed, k, tree, warm = [], [], 0, junction_tree(shape, one), None
        base = model
        while cur.remaining > 0:
            k += 1
            left = cur.remaining
            last = left < 2 * (1 / (2 * sigma**2) + eps**2 / 8)
            if last:
                sigma = math.sqrt(1 / (2 * MEASURE_SHARE * left))
                eps = math.sqrt(8 * (1 - MEASURE_SHARE) * left)
            used = float(cur.spent) + eps**2 / 8 + 1 / (2 * sigma**2)
            limit = size_cap * used / rho
            free = {S for C in measured for j in range(1, len(C) + 1) for S in itertools.combinations(C, j)}
            pool = [C for C in weights if C in free or tree.bound_mb(C, limit) <= limit]
            bias = {C: math.sqrt(2 / math.pi) * sigma * cl.cells(shape, C) for C in pool}
            share = 1 / (2 * sigma**2)
            if len(pool) == 1:  # a choice of one reads no data: its budget goes to the measurement (it was spent
                j = 0           # on an exponential mechanism over one candidate, 9.4 % of ρ in a helper's probe)
                share += eps**2 / 8
            else:
                j = cur.select(pool, _marginals(model, pool), min(eps**2 / 8, left * (1 - MEASURE_SHARE))
                               if last else eps**2 / 8, f"round {k}: select", weights=weights, bias=bias)
            C = pool[j]
            before = model.marginal(C)
            est = est.combine(cur.measure([C], cur.remaining if last else min(share, cur.remaining),
                                          f"round {k}: measure {C}"))
            measured.append(C)
            selected.append(C)
            tree = tree.with_clique(C)  # the bound's tree: the model's structure is never larger than the filter
            model = base = ResidualModel(est, measured, finite_total(est.total), structure=tree.cliques)
            if use_junction:  # warm-started from last round's θ: a few iterations a round add up
                model = junction.fit(base, _smaller(tree, shape, base.cliques),
                                     iterations=junction.ROUND_ITERATIONS, start=warm)
                warm = model
            moved = np.abs(model.marginal(C) - before).sum()
            if not last and moved <= math.sqrt(2 / math.pi) * sigma * cl.cells(shape, C):
                sigma, eps = sigma / 2, eps * 2
                annealed.append(k)
            if last:
                break
        # the residual model is a heuristic (mmopt.synth.estimate): its tables agree with each other and with its
        # records only approximately (a helper's probe at ε = 0.1: a one-way table 0.4 L1 from its two-way table's
        # sum), so the result says so where it is read
        fitted = {"estimator": "residual", "heuristic": True, "consistent": False}
        if estimator == "joint" or (estimator == "auto" and joint_fits):  # post-processing of the measurements
            model = jt.fit(base)
            fitted = {"estimator": "joint", "status": model.status, "iterations": model.iterations,
                      "loss": model.loss}
        elif use_junction:
            model = junction.fit(base, _smaller(tree, shape, base.cliques), start=warm)
            fitted = {"estimator": "junction", "status": model.status, "iterations": model.iterations,
                      "loss": model.loss}
        r, e = spent(cur.steps, rho, privacy.delta)
        details = {"selected": tuple(selected), "sigma": tuple(s.scale for s in cur.steps if s.kind == "gaussian"),
                   "annealed": tuple(annealed), "estimates": est, "estimator": fitted}
        result = Synthetic("aim", domain, model, tuple(cur.steps), r, privacy.delta, e, rho,
                           "opendp" if seed is None else "numpy-seeded", seed, details)
        outcome.append(result)  # the ledger's entry: what the steps spent
    return result


def _smaller(tree, shape, cliques):
    """The filter's tree, or a fresh triangulation of the measured cliques if smaller (at ε = 1 on a 15-attribute
    network: 1.8 against 20 MB): a junction-fit iteration costs a few passes over the tree's cells per clique."""
    return min(tree, junction_tree(shape, cliques), key=lambda T: T.mb)


def _marginals(model, pool) -> dict:
    """The model's estimate of every candidate (the junction model's pairs in one walk per attribute)."""
    if isinstance(model, junction.JunctionModel):
        return junction_pairs.marginals(model, pool)
    return {C: model.marginal(C) for C in pool}
