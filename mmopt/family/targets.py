"""The accuracy targets of ``optimize(objective="max_variance", targets=...)`` and ``plan``: one positive number
or one per query (for marginal workloads also a dict per marginal; one per query there equal within each marginal),
checked once for both; and the dense workloads' size and rows a max-variance search needs."""

from __future__ import annotations

import numpy as np

from mmopt._base.frames import check_positional

__all__ = ["SAME_TARGET", "TARGET_RANGE", "check_dense_size", "check_targets", "dense_rows", "marginal_targets"]


def check_targets(targets, m: int, caller: str, name: str = "targets", *, per: str | None = "query") -> np.ndarray:
    """τ as m positive finite numbers (a scalar is every query's); ``per`` names what each of the m belongs to in
    the messages ("query", "grouping set"), or None where only one number is taken (a dict per marginal is
    :func:`marginal_targets`'s)."""
    many = "" if per is None else f" or {m:,} (one per {per}" + (
        ", in the workload's row order)" if per == "query" else ")")
    if isinstance(targets, dict):
        raise ValueError(f"The '{name}' parameter of {caller} is a dict (one target per marginal), which needs a "
                         "workload of marginals (mmopt.workload.marginals, records workloads); this one is not. Give "
                         f"one positive number{many}.")
    # a relabelled Series or a masked array: refused, not misread
    check_positional(targets, name=name, caller=caller, item=per or "query")
    # None would become NaN, "4" 4.0 and True 1.0: none of them is a number given as one (nor in an array: a bool,
    # text or complex dtype, which np.asarray(…, float) converted silently, dropping an imaginary part)
    text = isinstance(targets, str | bytes | bool | np.bool_) or (
        isinstance(targets, list | tuple) and any(isinstance(t, str | bytes | bool | np.bool_) for t in targets))
    try:
        raw = None if targets is None or text else np.asarray(targets)
        tau = None if raw is None or raw.dtype.kind not in "iufO" else np.asarray(raw, dtype=float)
    except (TypeError, ValueError):
        tau = None
    if tau is None:  # e.g. plan(W, Privacy(1.0)): the budget is what plan finds, not an input
        from mmopt.privacy import Privacy
        hint = (" plan finds the budget: give the accuracy wanted (targets=4.0, kind='se'), not a Privacy."
                if isinstance(targets, Privacy) else "")
        raise TypeError(f"The '{name}' parameter of {caller} must be one positive number{many}. "
                        f"Got {type(targets).__name__} instead.{hint}")
    scalar = tau.ndim == 0
    if scalar:
        tau = np.full(m, float(tau))
    if tau.shape != (m,) or not np.all(np.isfinite(tau)) or np.any(tau <= 0):
        nonfinite = tau[~np.isfinite(tau)]
        if scalar:  # one number, as given: not the m copies it was broadcast to ("16 not finite")
            what = f"{float(tau[0])!r}"
        else:
            what = f"shape {np.shape(targets)}" + (
                "" if tau.size == 0 else f", {nonfinite.size} not finite (e.g. {nonfinite[0]})" if nonfinite.size
                else f", smallest {np.min(tau):.3g}")
        raise ValueError(f"The '{name}' parameter of {caller} must be one positive number{many}. Got {what} instead.")
    low, high = TARGET_RANGE
    if np.any(tau < low) or np.any(tau > high):  # 1/τ weights the Gram: past these its eigensolves failed
        # inside LAPACK ("the 'gram' parameter of solve_l2 must be finite", "Eigenvalues did not converge")
        raise ValueError(f"The '{name}' parameter of {caller} must lie in [{low:g}, {high:g}] (variances in the "
                         f"counts' units, squared). Got targets from {np.min(tau):.3g} to {np.max(tau):.3g}; "
                         "rescale the counts.")
    return tau


TARGET_RANGE = (1e-120, 1e120)


def check_dense_size(workload, caller: str, gaussian: bool = True) -> None:
    """Refuse, at once, a max-variance search on a dense workload past the dense limit: each of its steps is an n×n
    L2 solve, and prefix(8,192) ran for minutes without a word (the prefix-coordinates route stops at 4,096 too).
    ``gaussian`` False (plan under Laplace noise, where no structured route runs) says so instead."""
    from mmopt.structured._checks import DENSE_LIMIT
    from mmopt.structured.workloads import ImplicitWorkload
    n = getattr(workload, "domain_size", 0)
    if n > DENSE_LIMIT:
        # plan has no 'objective': its remedy is the domain (optimize's is also the total)
        if caller != "plan":
            remedy = "Optimise the total error instead (objective='total'), or coarsen the domain"
        elif gaussian or not isinstance(workload, ImplicitWorkload):  # Gaussian noise would not route it either
            remedy = "Coarsen the domain, or build the workload as a product (mmopt.workload.kron/marginals)"
        else:
            remedy = ("Under Laplace noise (delta = 0) only the dense search runs: plan under Gaussian noise "
                      "(delta > 0), or coarsen the domain")
        what = "the targets" if caller == "plan" else "objective='max_variance'"
        raise ValueError(f"{caller}: {what} on '{workload.name}' ({n:,} cells) would search over "
                         f"dense {n:,}×{n:,} Grams; it runs up to {DENSE_LIMIT:,} cells on dense workloads (and on "
                         "prefix sums and all ranges), and at any size on products of factors of ≤ "
                         f"{DENSE_LIMIT:,} cells, unions of marginals and grouping sets (Gaussian noise). {remedy}.")


def dense_rows(workload, caller: str):
    """(dense workload, W) for a max-variance search: W's rows are needed, not only its Gram."""
    from mmopt.family.dense import _dense
    W = _dense(workload, "max_variance")
    try:
        return W, W.explicit_matrix()
    except ValueError as exc:
        raise ValueError(f"{caller}: objective='max_variance' needs the workload's queries: {exc}") from None


def marginal_targets(W, targets, caller: str) -> dict | None:
    """``targets`` as :func:`mmopt.structured.residual.plan` takes them for the literal marginal workload W: None, or a
    dict {attribute tuple: τ}. One number is every marginal's. An array is one target per query, in W's row order:
    marginal after marginal in the order of ``W.sets``, each its N_A cells (the order of the dense rows of
    :func:`mmopt.workload.marginals` and of a union's terms); it is taken when constant within each marginal, since
    the residual strategy gives every cell of a marginal the same variance, and refused when it varies there.

    An array of one target per marginal (length ``len(W.sets)``, not the number of queries) is refused, pointing to
    the dict: an array means one per query on every other route of ``caller`` (Laplace noise, dense workloads,
    products), so accepting it here would give one call two meanings by ``delta``. Where the two lengths are equal
    no ambiguity arises: m = Σ N_A ≥ len(W.sets) with equality only when every marginal is one cell, and then its
    target per query is its target per marginal."""
    if targets is None or isinstance(targets, dict):
        return targets
    m, k = W.n_queries, len(W.sets)
    try:
        shape = np.shape(targets)
    except ValueError:  # a ragged list: check_targets' own refusal (not numpy's "inhomogeneous shape")
        check_targets(targets, m, caller)
        raise
    if shape == ():
        t = float(check_targets(targets, 1, caller, per=None)[0])  # (the dict's targets: residual.plan checks them)
        return {A: t for A in W.sets}
    dict_form = "a dict {attribute tuple: target} (one per marginal)"
    if shape not in ((m,), (k,)):
        raise ValueError(f"The 'targets' parameter of {caller} must be one positive number, {m:,} (one per query, in "
                         f"the workload's row order, equal within each marginal) or {dict_form} for a workload of "
                         f"marginals. Got shape {shape} instead.")
    if shape != (m,):  # one per marginal: the dict, whose keys say which marginal each target is for
        tau = check_targets(targets, k, caller, per="marginal")
        raise ValueError(f"The 'targets' parameter of {caller} holds {k} targets, as many as the workload's "
                         f"marginals, for its {m:,} queries; an array of targets is one per query (in the workload's "
                         f"row order). Give one per marginal as {dict_form}: targets={_preview(W.sets, tau)}.")
    tau = check_targets(targets, m, caller)
    starts = np.concatenate(([0], np.cumsum(W.set_cells.astype(np.int64))[:-1]))
    low, high = np.minimum.reduceat(tau, starts), np.maximum.reduceat(tau, starts)
    smallest = {}  # each attribute set's binding target: its smallest (a set asked twice has one entry in the dict)
    for A, t in zip(W.sets, low.tolist(), strict=True):
        smallest[A] = min(t, smallest.get(A, t))
    varies = np.flatnonzero(high > low * (1 + SAME_TARGET))
    if varies.size:
        j = int(varies[0])
        from mmopt.structured._checks import DENSE_LIMIT
        dense = (" Or, to let a marginal's cells differ, give the workload as its rows alone, "
                 "mmopt.Workload.from_matrix(rows), whose dense minimax takes any per-query targets (up to "
                 f"{DENSE_LIMIT:,} cells)." if W.domain_size <= DENSE_LIMIT else "")
        raise ValueError(
            f"The 'targets' parameter of {caller} varies within marginal {W.sets[j]} (rows {int(starts[j]):,}–"
            f"{int(starts[j] + W.set_cells[j]) - 1:,} of the workload, its {int(W.set_cells[j]):,} cells: targets from "
            f"{float(low[j])!r} to {float(high[j])!r}; {varies.size} of {k} marginals vary). A union of marginals is "
            "optimised under Gaussian noise with the residual strategy, which gives every cell of a marginal the "
            "same variance, so each marginal's smallest target is the one that binds: pass the minimum per "
            f"marginal, as {dict_form}: targets={_preview(list(smallest), list(smallest.values()))}.{dense}")
    copies = [A for A, t in zip(W.sets, low.tolist(), strict=True) if t > smallest[A] * (1 + SAME_TARGET)]
    if copies:  # the dict holds one target per attribute set, the residual route one per set
        A = copies[0]
        raise ValueError(f"The 'targets' parameter of {caller} gives marginal {A}, which the workload asks "
                         f"{W.sets.count(A)} times, different targets in different copies; a workload of marginals "
                         f"takes one target per attribute set. Give every copy its smallest, {smallest[A]!r}, as "
                         f"{dict_form}: targets={_preview(list(smallest), list(smallest.values()))}.")
    return smallest


#: the relative spread within a marginal still read as one target (then its smallest, so none is missed): per-cell
#: arithmetic such as 0.1 * 3 against 0.3 leaves a few ulps (2.2e-16 each), a decimal written and read back is the
#: same double; 1e-12 is ~4,500 ulps and far below a target meant to differ (targets are given to a few digits)
SAME_TARGET = 1e-12


def _preview(sets, values, shown: int = 4) -> str:
    """``{set: value, …}`` for a message: the first ``shown`` entries, each value as repr gives it (read back, the
    same double: a rounded minimum copied from the message would have been a looser target)."""
    body = ", ".join(f"{A!r}: {float(t)!r}" for A, t in list(zip(sets, values, strict=True))[:shown])
    return "{" + body + (", …" if len(sets) > shown else "") + "}"
