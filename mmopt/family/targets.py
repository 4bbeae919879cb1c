"""The accuracy targets of ``optimize(objective="max_variance", targets=...)`` and ``plan``: one positive number
or one per query (a dict per marginal for marginal workloads), checked once for both; and the dense workloads'
size and rows a max-variance search needs."""

from __future__ import annotations

import numpy as np

from mmopt._base.frames import check_positional

__all__ = ["TARGET_RANGE", "check_dense_size", "check_targets", "dense_rows", "marginal_targets"]


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
    """``targets`` as :func:`mmopt.structured.residual.plan` takes them for the marginal workload W: None, or a
    dict {attribute tuple: τ} (one number is every marginal's)."""
    if targets is None or isinstance(targets, dict):
        return targets
    if np.ndim(targets) != 0:
        raise ValueError(f"The 'targets' parameter of {caller} must be one positive number or a dict {{attribute "
                         "tuple: target} (one per marginal) for a workload of marginals (every cell of a marginal "
                         f"has the same variance). Got shape {np.shape(targets)}.")
    t = float(check_targets(targets, 1, caller, per=None)[0])  # (the dict's targets: residual.plan checks them)
    return {A: t for A in W.sets}
