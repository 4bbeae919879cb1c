"""What every reconstruction shares: the choice names, the result record, input checks and the feasible set.

Notation: see README. The feasible set is C = {h ∈ ℝⁿ : h ≥ 0, h_Z = 0 [, Σh = total]} for the public
structural zeros Z and the optional public total. Projection onto C in the Euclidean metric is the
clamp max(v, 0) (no total) or the projection onto the scaled simplex (Duchi et al., ICML 2008, Fig. 1),
used inside the first-order solver only: it is *not* offered as a reconstruction (see the package docstring).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mmopt._base import validation as v

#: The reconstruction choices of ``matrix_mechanism(..., reconstruct=...)`` and ``release``.
CHOICES = ("least_squares", "nnls", "projection")
ROUND_OFF = 16 * np.finfo(float).eps  # a float64 KKT step's relative accuracy, with room (round_off_floor)


@dataclass(frozen=True)
class Reconstruction:
    """How the estimate h was reconstructed from the noisy measurements y.

    Attributes
    ----------
    method : {"least_squares", "nnls", "projection"}
    solver : str
        "qr" / "svd" (dense least squares), "pinv" / "lsmr" (implicit least squares), "scipy.nnls"
        (active set, exact), "isotonic" (prefix fast path, exact), "clarabel" (interior-point QP, then an
        active-set polish), "fista" (accelerated projected gradient), "admm" (one Kronecker product), or
        "admm+fista" / "fista+admm" (the second solver finished what the first could not).
    iterations : int
        Solver iterations (the largest over draws when ``size`` draws were made; 0 for closed forms).
    optimality : float
        Relative KKT residual ‖h − P_C(h − ∇f(h)/L)‖ / s of the returned h (largest over draws): for the
        iterative solvers (ADMM, FISTA) s = ‖x̂ − P_C(x̂)‖, the correction the constraints force on the
        unconstrained estimate (noise-sized, so the test does not loosen as the counts grow); for the exact
        dense solvers s = max(‖h‖, ‖c‖/L). 0 for least squares, which is exact.
    tol : float
        The tolerance ``optimality`` had to meet; a solve that does not meet it raises ``SolverError``.
    total : float or None
        The public total Σh imposed, if any.
    n_zeros : int
        The number of structural zeros imposed.
    """

    method: str
    solver: str
    iterations: int = 0
    optimality: float = 0.0
    tol: float = 0.0
    total: float | None = None
    n_zeros: int = 0


def check_method(reconstruct, caller: str) -> str:
    return v.check_choice(reconstruct, name="reconstruct", caller=caller, choices=CHOICES)


def check_constraints(reconstruct: str, total, zeros, n: int, caller: str, shape: tuple[int, ...] | None = None
                      ) -> tuple[float | None, np.ndarray | None]:
    """(total, flat boolean zeros mask or None), refused when they are contradictory or meaningless. ``zeros`` is
    flat (n,) or, when ``shape`` (the product domain's) is given, shaped like it: any other shape with n entries
    (a transposed mask) would mark other cells than meant, so it is refused, as ``x`` is."""
    if reconstruct == "least_squares" and (total is not None or zeros is not None):
        raise ValueError(f"The 'total' and 'zeros' parameters of {caller} need reconstruct='nnls' or 'projection'; "
                         "least squares is unconstrained. Got reconstruct='least_squares'.")
    if total is not None:
        total = v.check_real(total, name="total", caller=caller, low=0.0)
    if zeros is not None:
        z = np.asarray(zeros)
        if z.dtype != np.bool_:
            raise TypeError(f"The 'zeros' parameter of {caller} must be a boolean mask of the cells known to be 0. "
                            f"Got dtype {z.dtype}.")
        shapes = [(n,)] + ([tuple(shape)] if shape is not None and len(shape) > 1 else [])
        if z.shape not in shapes:
            raise ValueError(f"The 'zeros' parameter of {caller} must have shape "
                             f"{' or '.join(str(s_) for s_ in shapes)} (one entry per cell, as x). Got shape {z.shape}."
                             + (" Transposed? Its cells are read in the domain's C order."
                                if z.size == n and len(shapes) > 1 else ""))
        zeros = z.reshape(-1)
        if not zeros.any():
            zeros = None
        elif total and zeros.all():
            raise ValueError(f"The 'total' parameter of {caller} is {total:g} but 'zeros' marks every cell as 0: "
                             "no data vector meets both. Check the public facts.")
    return total, zeros


OPTION_KEYS = ("tol", "max_iterations")


def check_options(options, reconstruct: str, caller: str) -> dict:
    """``reconstruct_options`` checked: {} or a mapping with "tol" (in (0, 1)) and/or "max_iterations" (≥ 1).

    They tune the "nnls"/"projection" solvers: ``tol`` is the KKT residual every solver must meet (dense exact
    solvers and the iterative ones), ``max_iterations`` the iterative solvers' budget (implicit pairs).
    """
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise TypeError(f"The 'reconstruct_options' parameter of {caller} must be a dict with keys "
                        f"{list(OPTION_KEYS)}. Got {type(options).__name__}.")
    unknown = sorted(set(options) - set(OPTION_KEYS))
    if unknown:
        raise ValueError(f"The 'reconstruct_options' parameter of {caller} accepts the keys {list(OPTION_KEYS)}. "
                         f"Got {unknown}.")
    if options and reconstruct == "least_squares":
        raise ValueError(f"The 'reconstruct_options' parameter of {caller} tunes reconstruct='nnls' or "
                         "'projection'; least squares is exact and takes none. Drop it, or choose a reconstruction.")
    out = {}
    if "tol" in options:
        out["tol"] = v.check_real(options["tol"], name="reconstruct_options['tol']", caller=caller, low=0.0,
                                  high=1.0, low_open=True, high_open=True)
    if "max_iterations" in options:
        out["max_iterations"] = v.check_int(options["max_iterations"], name="reconstruct_options['max_iterations']",
                                            caller=caller)
    return out


def check_reconstruction(reconstruct, total, zeros, options, n: int, caller: str, shape: tuple[int, ...] | None = None):
    """(reconstruct, total, zeros, options) checked together: what every mechanism and release takes (``shape``:
    the product domain's, if x may be shaped like it)."""
    reconstruct = check_method(reconstruct, caller)
    total, zeros = check_constraints(reconstruct, total, zeros, n, caller, shape)
    return reconstruct, total, zeros, check_options(options, reconstruct, caller)


def check_tol(tol, max_iterations, caller: str) -> tuple[float, int]:
    tol = v.check_real(tol, name="tol", caller=caller, low=0.0, high=1.0, low_open=True)
    return tol, v.check_int(max_iterations, name="max_iterations", caller=caller)


def project_simplex(v_: np.ndarray, total: float) -> np.ndarray:
    """argmin ‖h − v‖ over h ≥ 0, Σh = total > 0 (or h = 0 for total 0): max(v − τ, 0).

    τ by Michelot's algorithm (J. Optim. Theory Appl. 1986; Condat, Math. Program. 2016, §3): τ = (Σ_K v − total)/|K|
    over the set K of entries above the previous τ; τ only grows and K only shrinks, so it ends in at most
    n passes (a handful in practice), each O(|K|) without a sort.
    """
    if total == 0.0:
        return np.zeros_like(v_)
    # where the largest entry is 0 (the projection commutes with a shift of v, τ shifting with it): a total
    # below v's ulp was lost to τ's rounding, K emptied and Michelot divided by |K| = 0 ([3, 3] with total 1e-16;
    # a helper's probe)
    w = v_ - np.max(v_)
    keep = w
    tau = (float(keep.sum()) - total) / keep.size
    while True:
        kept = keep[keep > tau]
        if kept.size == keep.size or kept.size == 0:  # (empty only if total/|K| underflows: the fallback below)
            break
        keep = kept
        tau = (float(keep.sum()) - total) / keep.size
    h = np.maximum(w - tau, 0.0)
    s = float(h.sum())
    # the sum of the positive parts is within n·eps of total; rescaling keeps h >= 0 and meets it to rounding
    return h * (total / s) if s > 0 else np.full_like(v_, total / v_.size)


def unit_size(values: np.ndarray, total: float | None) -> float | None:
    """max(max|values|, |total|) when it is a positive finite number other than 1, else None: the factor a
    reconstruction positively homogeneous in (values, total) is solved at unit size by, so that its solvers' absolute
    floors (an ulp of 1) and products mean the same at every scale of the counts."""
    size = max(float(np.max(np.abs(values), initial=0.0)), abs(total) if total is not None else 0.0)
    return size if 0.0 < size < math.inf and size != 1.0 else None


def project_feasible(x: np.ndarray, total: float | None, zeros: np.ndarray | None) -> np.ndarray:
    """Euclidean projection onto C (flat x); the zeros are fixed at 0 and the rest is clamped or simplex-projected."""
    if zeros is None:
        return np.maximum(x, 0.0) if total is None else project_simplex(x, total)
    h = np.zeros_like(x)
    free = ~zeros
    h[free] = np.maximum(x[free], 0.0) if total is None else project_simplex(x[free], total)
    return h


def kkt_residual(h: np.ndarray, grad: np.ndarray, lipschitz: float, scale: float,
                 total: float | None, zeros: np.ndarray | None) -> float:
    """‖h − P_C(h − ∇f/L)‖ / scale: zero exactly at a minimiser of the convex f over C (KKT)."""
    step = h - project_feasible(h - grad / lipschitz, total, zeros)
    return safe_norm(step) / scale


def safe_norm(v: np.ndarray) -> float:
    """‖v‖₂ without overflow (np.linalg.norm squares the entries: inf past ~10¹⁵⁴, and inf/inf made the KKT test
    NaN, which passed as converged); NaN when v holds a NaN. One pass (np.linalg.norm) where that is a normal
    float — the solvers' loops call it every step — and the rescaled norm only past that range."""
    with np.errstate(over="ignore", under="ignore"):
        out = float(np.linalg.norm(v))
    if np.finfo(float).tiny <= out < math.inf:
        return out
    top = float(np.max(np.abs(v))) if np.size(v) else 0.0
    if top == 0.0 or not math.isfinite(top):
        return top
    return top * float(np.linalg.norm(v / top))


def kkt_scale(start: np.ndarray, c: np.ndarray, lipschitz: float, total: float | None,
              zeros: np.ndarray | None, tol: float) -> float:
    """The iterative solvers' KKT scale: min(‖x̂ − P_C(x̂)‖, ‖P_C(x̂)‖) for the unconstrained minimiser x̂ = ``start``.

    The smaller of the correction the constraints force (noise-sized) and the estimate (count-sized), so the
    test never loosens as either grows: at 10⁷ counts a test relative to ‖h‖ alone stopped a few steps past
    the clamp max(x̂, 0), and the "projection" then had a larger workload error than least squares
    (experiments.postprocess, 2-D); at 10⁶ sparse cells a test relative to the correction alone stopped NNLS
    with 1.4× the workload error of the converged answer (benchmarks/bench_reconstruct.py). Floored at
    :func:`round_off_floor`. When x̂ is already feasible there is no correction, and the scale is
    max(‖x̂‖, ‖c‖/L) (x̂ then passes at once if it is the minimiser).
    """
    p = project_feasible(start, total, zeros)
    gap, size = safe_norm(start - p), safe_norm(p)
    if gap == 0.0:
        return max(size, safe_norm(c) / lipschitz, math.ulp(1.0))
    return max(min(gap, size), round_off_floor(size, tol))


def round_off_floor(size: float, tol: float) -> float:
    """The smallest KKT scale whose test ``tol``·scale a float64 step can pass, for iterates of norm ``size``.

    A projected-gradient step h − P_C(h − ∇f/L) is computed to about ε‖h‖ (each entry to its own ulp, and the
    gradient Qh − c cancels count-sized terms to the same order), so a test below a few ε‖h‖ is never met: the
    former floor 10⁻⁸‖h‖ at tol 10⁻⁸ asked for 10⁻¹⁶‖h‖, half an ulp, and the projection at 10⁹ counts with a
    known total ran out its iterations where the dense route took 0.3 s (a helper's probe). 16ε leaves room
    for the gradient's sums; the 10⁻⁸ keeps the former floor where ``tol`` is loose.
    """
    return max(max(1e-8, ROUND_OFF / tol) * size, math.ulp(1.0))


def combine(records: list[Reconstruction]) -> Reconstruction:
    """One record for several draws: the most iterations and the worst (largest) KKT residual."""
    first = records[0]
    return Reconstruction(first.method, "+".join(sorted({r.solver for r in records})),
                          max(r.iterations for r in records), max(r.optimality for r in records), first.tol,
                          first.total, first.n_zeros)
