"""MST: 1-way marginals, a private maximum spanning tree of 2-way marginals, and exact sampling from the tree.

McKenna, Miklau & Sheldon, *Winning the NIST Contest: A scalable and general approach to differentially private
synthetic data*, Journal of Privacy and Confidentiality 11(3), 2021 (arXiv:2108.04978), §4 and its reference code
(``mechanisms/mst.py`` of github.com/ryan112358/private-pgm). Notation: see README, :mod:`mmopt.synth.curator`.

Algorithm, with the zCDP budget ρ of ``privacy`` (the largest ρ OpenDP converts to within (ε, δ)) split as
:data:`SPLIT` = (1/5, 1/10, 7/10) — the paper splits in thirds (deviation below):

1. **Measure** the d one-way marginals at ρ/5 (the paper: identity queries; here mmopt's residual strategy for the
   1-way workload, the certified Gaussian optimum for it, :func:`mmopt.structured.residual.plan`).
   **Compress** (``compress=True``, the paper's domain compression, :mod:`mmopt.synth.compress`): the values whose
   noisy count is below 3 standard deviations merge into one cell per attribute; from here on the curator counts on
   the compressed domain. Least-squares 1-way marginals, projected onto the simplex of the noisy total t
   (:func:`mmopt.synth.projection.simplex`) and summed into the compressed cells, give p̂ᵢ.
2. **Select** d − 1 edges by Kruskal's algorithm with a private choice per step: among the pairs (a, b) joining two
   components, the exponential mechanism at ρ/(10(d − 1)) each with the paper's score ‖m_ab − p̂_a p̂_bᵀ/t‖₁: the
   L1 error of the independence model implied by the noisy 1-way marginals (the paper's Private-PGM estimate from
   1-way measurements is that same product) on the exact 2-way marginal (compressed). Adding or removing one
   record moves m_ab by one in one cell and leaves p̂ unchanged (post-processing of step 1), so the sensitivity is
   1. The exact marginal is seen only inside the curator's paid exponential mechanism
   (:meth:`mmopt.synth.curator.Curator.select`). With a ``workload`` (an option; default none), an edge is scored
   instead by its mean L1 gain on the workload marginals containing it (:mod:`mmopt.synth.gain`, which is the
   paper's score when the workload is the edge itself), sensitivity ≤ 3 (stated and checked in that module).
   With two attributes the one edge is taken without a draw (a choice among one reads no data; its share goes to
   step 3).
3. **Measure** the d − 1 selected 2-way marginals with mmopt's residual strategy for them, at the rest of ρ.
4. **Estimate** (post-processing): least squares over both measurements in the residual basis
   (:mod:`mmopt.synth.residuals`; the 1-way subspaces are measured twice and averaged by inverse variance, except
   those of compressed attributes, whose step-1 estimate is on the original cells and is not carried over), then a
   stated projection: each 1-way onto the simplex of t, then each edge table onto the transportation polytope of
   its two projected 1-ways (:func:`mmopt.synth.projection.transport`), and the compressed cells spread back over
   their values by the step-1 shares (:meth:`mmopt.synth.compress.Compression.expand`, which keeps margins). The
   tables are then non-negative and consistent, and as the selected edges form a tree they are exactly the
   marginals of one distribution, sampled exactly (:mod:`mmopt.synth.tree`) — the paper fits the same tree with
   Private-PGM; no JAX, no full domain. When the least-squares marginals are already non-negative and nothing is
   compressed the projections return them unchanged, so with vanishing noise the model's marginals are the exact
   ones.

**Privacy.** Steps 1 and 3 are Gaussian mechanisms whose ρ is OpenDP's map Δ₂²/(2σ²) at the exact sensitivity
(rounded up); each choice of step 2 is ε²/8-zCDP. zCDP composes adaptively by adding ρ (Bun & Steinke 2016,
Lemma 2.3), and the ledger sums them in exact rationals: Σρ ≤ ρ(ε, δ), so the release is (ε, δ)-DP under
add/remove-one-record neighbours. Estimation and sampling are post-processing.

**Deviation.** The split: the tree measurement (mmopt's residual strategy for the d − 1 edges) re-measures every
1-way subspace and the total, so step 1 is needed only for the scores and the compression, and a larger share for
step 3 lowers the error of everything. On CPS 1988 (all 3-way marginals, 20 seeded trials) (1/5, 1/10, 7/10) gave a
model error of 0.1435 at ε = 0.1 and 0.1045 at ε = 1 against 0.1556 and 0.1056 with thirds and 0.1485 / 0.1049
with OpenDP's MST split (1/2 one-way, 1/20 selection, 9/20 tree); the share is a public constant (no data-dependent
tuning at run time). The workload gain (20 paired seeded trials, all 3-way marginals; model error, paper's score
→ gain, ε = 0.1 / 1 / 10): CPS 1988 0.1425 → 0.1522, 0.1045 → 0.1037, 0.1031 → 0.1024; RAND HIE 0.1490 → 0.1642,
0.0884 → 0.0896, 0.0858 → 0.0858; tree15 0.2253 → 0.2942, 0.0593 → 0.0594, 0.0514 → 0.0514. Noise-free it picks
the best tree of CPS 1988, but its sensitivity is 3 (nearly tight; the paper's score is 1 and bounds it above), so
its choices are noisier: at ε = 10 the last one is nearly a coin flip (gap 3.7, exponential-mechanism width 15.7),
and at small ε it costs more than it finds; hence not the default. The merged mass is spread by the noisy 1-way
shares, not uniformly (:mod:`mmopt.synth.compress`).

**Against OpenDP's MST** (0.16, ``opendp/extras/mbi/_mst/__init__.py``, its edge score). It scores an edge by
``np.linalg.norm(exact − model, 1)`` on the 2-D table, which numpy reads as the matrix 1-norm — the largest column
sum of |m_ab − m̂_ab|, not the paper's sum over the cells — and it does not compress the domain; its model from
the 1-way measurements and the sensitivity (1) are the paper's. On CPS 1988 at ε = 10 the two scores differ in a
near-tie: at the fourth choice the paper's ranks wage–region (2,714) above wage–smsa (2,608), the column sum
wage–smsa (1,304) above wage–region (1,096), and the trees differ in that one edge. In development runs (not kept;
5 seeds, all 3-way marginals) the tree models of the exact 2-way marginals score 0.1030 (the paper's tree) and
0.1021 (OpenDP's), this function's estimate on OpenDP's tree 0.1021 and OpenDP with the paper's score 0.1032: the
difference between the two MSTs there (0.1031 against 0.1022 in paper_figures/synth.md) is that score, not the
measurements or the estimate. mmopt keeps the paper's score: the column sum depends on which attribute is the
column. Development runs (not kept) scored every one of CPS 1988's 16,807 spanning trees noise-free (tree models
of the exact 1- and 2-way marginals, checked against a dense joint): the best scores 0.10201, OpenDP's tree
0.10205 (2nd), the paper's 0.10302 (7th), Chow–Liu's (mutual information) 0.11050 (71st); with the two attributes
of every table swapped, OpenDP's rule picks trees scoring 0.1028, 0.1054 and 0.1111 on CPS 1988, RAND HIE and
tree15, where the paper's score reaches the best tree a one-edge search finds (0.0857, 0.0512). The gap to OpenDP
on CPS 1988 at ε = 10 is therefore a near tie that OpenDP's score wins by its attribute order; no score tried
(L1, L2, L∞, Hellinger, mutual information, the workload gain) is at or below OpenDP's there without being worse
elsewhere.
"""

from __future__ import annotations

import itertools
import math
import warnings
from fractions import Fraction

import numpy as np

from mmopt._base import validation as v
from mmopt._base.rounding import up
from mmopt.accounting._zcdp import round_down
from mmopt.adaptive._noise import Noise
from mmopt.records import counts as rc
from mmopt.records.domain import Domain, check_domain
from mmopt.synth import compress as cp
from mmopt.synth import projection as pj
from mmopt.synth.curator import Curator
from mmopt.synth.residuals import ResidualEstimates
from mmopt.synth.result import Synthetic, budget_rho, finite_total, spent
from mmopt.synth.spend import charged, requested
from mmopt.synth.tree import tree_model

__all__ = ["MAX_SCORED_CELLS", "SPLIT", "mst", "noise_for"]

#: The budget's split: one-way marginals, the d − 1 choices, the tree's 2-way marginals (module docstring).
SPLIT = (Fraction(1, 5), Fraction(1, 10), Fraction(7, 10))


#: The most cells of workload marginals (of more than two attributes) the workload gain may count: 5·10⁷ float64
#: counts (0.4 GiB) in the curator's cache.
MAX_SCORED_CELLS = 5 * 10**7


def noise_for(seed, caller: str) -> Noise:
    """OpenDP's vetted samplers (seed None), or numpy seeded with ``seed`` (simulation only, with a warning)."""
    if seed is None:
        return Noise("opendp")
    warnings.warn(f"{caller}: seed={seed} draws the noise with numpy's seeded generator: reproducible, but anyone "
                  "who knows the seed can remove the noise. Use it for tests and simulations; omit 'seed' for a "
                  "real release.", UserWarning, stacklevel=3)
    return Noise("numpy", np.random.default_rng(seed))


class _Components:
    """Union–find over the attributes (Kruskal's bookkeeping)."""

    def __init__(self, d: int) -> None:
        self.up = list(range(d))

    def find(self, i: int) -> int:
        while self.up[i] != i:
            self.up[i] = self.up[self.up[i]]
            i = self.up[i]
        return i

    def join(self, a: int, b: int) -> None:
        self.up[self.find(a)] = self.find(b)


def _share(rho: float, fraction: Fraction) -> float:
    """ρ·fraction rounded down to a float (never a rounded-up share of the budget)."""
    return round_down(Fraction(rho) * fraction)


def mst(records, domain: Domain, privacy, seed=None, *, compress: bool = True, workload=None, accountant=None,
        label: str | None = None) -> Synthetic:
    """MST synthetic data under (ε, δ)-DP (module docstring for the algorithm and its privacy argument).

    Parameters
    ----------
    records : pandas.DataFrame, path, or dask.dataframe.DataFrame
        As :func:`mmopt.records.marginal_counts` (records outside the domain are dropped, a public rule).
    domain : Domain
    privacy : Privacy or "remaining"
        (ε, δ) with δ > 0; spent as ρ-zCDP with ρ the largest OpenDP converts to within (ε, δ). With an
        ``accountant``, ``"remaining"`` spends everything it has left (as :func:`mmopt.records.release_marginals`
        does; refused under PLD composition, :mod:`mmopt.synth.spend`).
    seed : int or None
        None: OpenDP's samplers (a real release). An int: numpy's seeded generator for every draw (simulation
        only; a warning says so) and the default seed of :meth:`Synthetic.records`. Refused with ``accountant``
        (a ledger records releases).
    compress : bool
        Merge the values whose noisy one-way count is below 3 standard deviations (:mod:`mmopt.synth.compress`,
        the paper's domain compression); default True.
    workload : list of tuple or None
        The marginals to preserve (attribute names or indices), e.g. all 3-way marginals. None (default): the
        paper's edge score. Given: each edge is scored by its mean L1 gain on the workload marginals that contain
        it (:mod:`mmopt.synth.gain`; the paper's score for an edge in none of them), at the same ρ per choice.
        That score's sensitivity is about 3 (the paper's: 1), so its choices are noisier: on the three datasets of
        ``python -m experiments.synth`` it was 7–31 % worse at ε = 0.1 and within 1 % at ε = 1 and 10
        (``benchmarks/bench_mst_scores.py``). Pass a workload for large budgets only.
    accountant : mmopt.Accountant or None
        The budget the whole run spends from, as one release of ``privacy``, as :func:`mmopt.synth.aim`'s
        (:mod:`mmopt.synth.spend`: refused before the records are read, pending from before the first draw).
    label : str or None
        With ``accountant``: the ledger's name for the run (default "mst k").

    Returns
    -------
    Synthetic
        ``details``: "edges" (the tree), "compression" (:class:`~mmopt.synth.compress.Compression`), "sigma"
        (the two noise scales), "estimates" (the least-squares :class:`~mmopt.synth.residuals.ResidualEstimates`,
        with their variances). Every field is public or post-processing of the measurements (the CPU seconds it
        once held grew with the number of records: time the call instead).

    Examples
    --------
    >>> import warnings, mmopt
    >>> from mmopt.records.datasets import cps1988
    >>> df, D = cps1988()
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     s = mst(df, D, mmopt.Privacy(1.0, 1e-9), seed=0)
    >>> len(s.details["edges"]), s.rho <= s.budget, round(s.epsilon, 6) <= 1.0
    (6, True, True)
    >>> s.records(5).columns.tolist() == list(D.names)
    True
    """
    caller = "mst"
    privacy, seed = requested(privacy, seed, accountant, label, caller)  # before anything is read or spent
    check_domain(domain, caller=caller)
    rho = budget_rho(privacy, caller)
    compress = v.check_bool(compress, name="compress", caller=caller)
    sets = None if workload is None else rc.check_sets(workload, domain, caller=caller, name="workload",
                                                       distinct=True)  # a repeat weighted its edges twice
    if sets is not None:
        cells = sum(math.prod(domain.shape[i] for i in r) for r in sets if len(r) > 2)
        if cells > MAX_SCORED_CELLS:
            raise ValueError(f"The 'workload' parameter of {caller} would have MST score edges on {cells:,} cells of "
                             f"exact marginals (at most {MAX_SCORED_CELLS:,}: {8 * MAX_SCORED_CELLS / 2**30:.1f} GiB). "
                             "Give fewer or smaller marginals, or none for the paper's score.")
    cur = Curator(records, domain, rho, noise_for(seed, caller), caller)
    d = len(domain.shape)
    one = [(i,) for i in range(d)]
    what = f"mst synthetic data: Gaussian measurements and exponential-mechanism choices, ρ-zCDP (budget ρ={up(rho)})"
    with charged(accountant, privacy, label, what, caller) as outcome:  # checked; pending before the first draw
        first = cur.measure(one, _share(rho, SPLIT[0]) if d > 1 else cur.remaining, "1-way marginals")
        t = finite_total(first.total)
        y = [first.marginal((i,)) for i in range(d)]
        comp = cp.compression(y, [math.sqrt(first.cell_variance((i,))) for i in range(d)], t) if compress and d > 1 \
            else cp.compression(y, [-math.inf] * d, t)
        edges, est = [], first
        if d > 1:
            cur.compress(comp)
            p = [comp.coarsen(pj.simplex(y[i], t), (i,)) for i in range(d)]
            per = _share(rho, SPLIT[1] / (d - 1))
            comps = _Components(d)
            pairs = list(itertools.combinations(range(d), 2))
            independent = {e: np.outer(p[e[0]], p[e[1]]) / t for e in pairs}
            covers = None if sets is None else {e: tuple(r for r in sets if len(r) > 2 and set(e) < set(r))
                                                for e in pairs}
            for k in range(d - 1):
                cand = [e for e in pairs if comps.find(e[0]) != comps.find(e[1])]
                if len(cand) == 1:  # two attributes: a choice among one edge reads no data, so it draws none and its
                    j = 0           # share goes to the tree measurement (it spent 10 % of ρ; a helper's audit)
                else:
                    j = (cur.select(cand, independent, per, f"edge {k + 1}") if covers is None
                         else cur.select_gain(cand, covers, p, t, per, f"edge {k + 1}"))
                edges.append(cand[j])
                comps.join(*cand[j])
            # the first measurement's one-way residuals of merged attributes live on the original cells: they are
            # not carried over (the tree measurement re-measures every one-way subspace); the rest is, unchanged
            keep = [S for S in first.values if not (set(S) & set(comp.merged))]
            prior = ResidualEstimates(comp.shape, {S: first.values[S] for S in keep},
                                      {S: first.variances[S] for S in keep})
            est = prior.combine(cur.measure(edges, cur.remaining, "tree 2-way marginals"))
        t = finite_total(est.total)
        q = [pj.simplex(est.marginal((i,)), t) for i in range(d)]
        tables = {e: comp.expand(pj.transport(est.marginal(e), q[e[0]], q[e[1]]), e) for e in edges}
        model = tree_model(domain.shape, t, [comp.expand(q[i], (i,)) for i in range(d)], tables)
        r, eps = spent(cur.steps, rho, privacy.delta)
        details = {"edges": tuple(edges), "compression": comp,
                   "sigma": tuple(s.scale for s in cur.steps if s.kind == "gaussian"), "estimates": est}
        result = Synthetic("mst", domain, model, tuple(cur.steps), r, privacy.delta, eps, rho,
                           "opendp" if seed is None else "numpy-seeded", seed, details)
        outcome.append(result)  # the ledger's entry: what the steps spent
    return result
