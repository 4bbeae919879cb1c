"""Lower-triangular Toeplitz strategies for prefix sums and ranges at any n, stored by their first column.

Notation: see README and :mod:`mmopt.toeplitz._series`. A strategy C = T(c) (C_{ij} = c_{i−j}, i ≥ j) is kept
as c, or as the parameters that generate c. The prefix workload is W = T(𝟙) (the series 1/(1 − x)), so the
decoder of the factorisation W = B C is B = W C⁻¹ = T(b), b = cumsum(1/c): B is Toeplitz too and nothing
n×n is ever formed (``to_dense`` refuses past mmopt's allocation limit).

Three families:

* :func:`sqrt_strategy` — C = W^{1/2}, c_k = binom(2k, k)/4^k, the coefficients of (1 − x)^{−1/2} (Henzinger,
  Upadhyay, Upadhyay, SODA 2023; Fichtenberger, Henzinger, Upadhyay, ICML 2023). Then B = C.
* :func:`banded` — c_k = 0 for k ≥ bands (McKenna, ICLR 2025: banded factorisations; here single participation).
* :func:`blt` — buffered linear Toeplitz, c_0 = 1, c_k = Σ_i θ_i ω_i^{k−1} (Dvijotham, McMahan, Pillutla,
  Steinke, Thakurta, 2024): C and C⁻¹ apply online with a state of d buffers (:mod:`mmopt.toeplitz.streaming`).

Any of them can be row-scaled by :func:`equalized`: C = D·T(c) with every column of unit norm, B = T(b)·D⁻¹.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from mmopt._base import validation as v
from mmopt._base.readonly import read_only
from mmopt.dense.profile import SAFE_EXPONENT, power_of_two_scale
from mmopt.toeplitz import _series

__all__ = ["ToeplitzStrategy", "banded", "blt", "equalized", "sqrt_coefficients", "sqrt_strategy"]

# The largest n the Toeplitz layer accepts. Its arrays are O(n), but the FFTs have length up to 4n + 2 and the
# weighted square root peaks at ~200 bytes per cell (202 MB measured at n = 2²⁰): 2²⁴ stays near 3.5 GB.
MAX_N = 2**24


def check_n(n, caller: str) -> int:
    return v.check_int(n, name="n", caller=caller, low=1, high=MAX_N)


@dataclass(frozen=True, eq=False)
class ToeplitzStrategy:
    """The strategy C = T(c), n×n lower-triangular Toeplitz, stored implicitly.

    Attributes
    ----------
    coefficients : ndarray
        c, the first column (length ≤ n; entries past its length are zero, as for a banded C).
    n : int
        The domain size (number of time steps).
    name : str
    kind : {"sqrt", "banded", "toeplitz", "blt"}
    params : dict
        For "blt": ``theta`` and ``omega`` (length d each). Empty otherwise.
    row_scale : ndarray or None
        y = d² for the row-scaled strategy C = D·T(c), D = diag(d) (None: D = I). :func:`equalized` picks y so
        that every column of C has norm 1; the decoder is then B = W C⁻¹ = T(b)·D⁻¹, still O(n) to store.
    """

    coefficients: np.ndarray
    n: int
    name: str
    kind: str
    params: dict = field(default_factory=dict)
    row_scale: np.ndarray | None = None

    def __post_init__(self):
        # the factories check their own arguments; a direct construction reached sensitivity_squared with an
        # all-zero column and failed there with an IndexError, and n = 3.5, a negative or short row scale, kind
        # "sqrt" over other coefficients or an unknown kind gave numbers, not errors (helpers' probes)
        check_n(self.n, "ToeplitzStrategy")
        c = np.asarray(self.coefficients)
        if c.ndim != 1 or not 1 <= c.size <= self.n or not c[0] or not np.all(np.isfinite(c)):
            raise ValueError(f"The 'coefficients' parameter of ToeplitzStrategy must be a finite vector of 1 to n = "
                             f"{self.n} entries with a non-zero first entry (C invertible). Got shape {c.shape}"
                             f"{f' with first entry {float(c.flat[0]):g}' if c.size else ''}; "
                             "mmopt.toeplitz.banded builds one from a column and checks it.")
        _check_kind(self.kind, c, self.n, self.params)
        if self.row_scale is not None:
            y = v.check_vector(self.row_scale, name="row_scale", caller="ToeplitzStrategy")
            if y.size != self.n or not np.all(y > 0):
                raise ValueError(f"The 'row_scale' parameter of ToeplitzStrategy must be n = {self.n} positive "
                                 f"numbers (y = d², C = D·T(c)). Got {y.size} entries, smallest {y.min():g} instead; "
                                 "mmopt.toeplitz.equalized computes the row scales that equalise the columns.")
        # read-only copies (and a dict of its own): Δ² and the error are read from them, and factories share arrays
        # (equalized(S) edited in place changed S's error 318 → 497; a helper's probe)
        object.__setattr__(self, "coefficients", read_only(c))
        if isinstance(self.params, dict):
            object.__setattr__(self, "params", {k: read_only(val) if isinstance(val, np.ndarray) else val
                                                for k, val in self.params.items()})
        if self.row_scale is not None:
            object.__setattr__(self, "row_scale", read_only(y))

    @property
    def domain_size(self) -> int:
        return self.n

    @property
    def column(self) -> np.ndarray:
        """c padded to length n."""
        return np.pad(self.coefficients, (0, self.n - len(self.coefficients)))

    def inverse_column(self) -> np.ndarray:
        """g = 1/c mod xⁿ, the first column of C⁻¹ (closed form for sqrt and BLT, O(n log n) otherwise)."""
        if self.kind == "sqrt":  # (1 − x)^{1/2}: g_0 = 1, g_k = −c_k/(2k − 1)
            k = np.arange(self.n, dtype=float)
            return -self.coefficients / np.maximum(2 * k - 1, 1) * np.where(k == 0, -1.0, 1.0)
        if self.kind == "blt":
            theta_hat, omega_hat = _series.blt_inverse(self.params["theta"], self.params["omega"])
            return _series.first_order_sum(-theta_hat, omega_hat, self.n)
        return _series.reciprocal(self.coefficients, self.n)

    def decoder_column(self) -> np.ndarray:
        """b = cumsum(1/c): the first column of B = W C⁻¹ for the prefix workload W = T(𝟙)."""
        if self.kind == "sqrt":
            return self.coefficients.copy()
        return np.cumsum(self.inverse_column())

    def json_summary(self) -> dict:
        """The JSON summary :meth:`mmopt.OptimizeResult.to_dict` records (the strategy itself is not stored)."""
        return {"kind": "toeplitz", "name": self.name, "shape": [self.n, self.n], "domain_shape": [self.n],
                "domain_size": self.n, "n_rows": self.n}

    def sensitivity(self, norm: str = "l2") -> float:
        """The largest column norm of C: column 0 holds every coefficient, column j drops the last j."""
        norm = v.check_choice(norm, name="norm", caller="ToeplitzStrategy.sensitivity", choices=("l1", "l2"))
        unit, e = self.normalised()  # c @ c overflowed from |c| ~ 1e154 on (inf for a representable norm)
        c = unit.coefficients
        if unit.row_scale is None:
            value = float(np.abs(c).sum()) if norm == "l1" else float(np.sqrt(c @ c))
        else:  # column j of D·T(c) holds d_i c_{i−j}, i ≥ j: one correlation over all j
            weights, entries = (np.sqrt(unit.row_scale), np.abs(c)) if norm == "l1" else (unit.row_scale, c * c)
            sums, err = _series.correlate_tail_accurate(np.pad(entries, (0, self.n - len(c))), weights, self.n,
                                                        caller="ToeplitzStrategy.sensitivity")
            value = float(sums.max()) + err  # every sum is ≥ 0: the largest plus its round-off bounds Δ above
            value = value if norm == "l1" else math.sqrt(value)
        return float(np.ldexp(value, e))

    def normalised(self) -> tuple[ToeplitzStrategy, int]:
        """(C′, e) with C = 2ᵉ·C′ exactly, C′'s coefficients and row scales near 1: every error figure is invariant
        to C's scale, and C′ keeps c∘c, b = cumsum(1/c) and b∘b within float64 where C's overflowed (|c| past
        1e154 or below 1e-154). The closed-form kinds (sqrt, BLT: c₀ = 1, their inverse from their parameters) keep
        their coefficients; only their row scales are normalised."""
        e_c = power_of_two_scale(self.coefficients) if self.kind in ("banded", "toeplitz") else 0
        e_y = power_of_two_scale(self.row_scale) // 2 if self.row_scale is not None else 0  # d = √y: 4^e_y for y
        e_c, e_y = (e if abs(e) > SAFE_EXPONENT else 0 for e in (e_c, e_y))  # a usual C is itself (its c kept)
        if e_c == 0 and e_y == 0:
            return self, 0
        y = None if self.row_scale is None else np.ldexp(self.row_scale, -2 * e_y)
        return dataclasses.replace(self, coefficients=np.ldexp(self.coefficients, -e_c), row_scale=y), e_c + e_y

    def to_strategy(self):
        """C as a dense :class:`~mmopt.Strategy` (small n only, as :meth:`to_dense`)."""
        from mmopt.dense._strategy_core import Strategy
        return Strategy(self.to_dense(), self.name)

    def to_dense(self) -> np.ndarray:
        """C as an n×n array (small n only: refused past mmopt's allocation limit, before allocating)."""
        v.check_allocation(self.n * self.n, what=f"the dense {self.n:,}×{self.n:,} strategy",
                           caller="ToeplitzStrategy.to_dense",
                           remedy=" The Toeplitz layer never needs it: use mmopt.toeplitz.evaluate.")
        from scipy.linalg import toeplitz
        C = toeplitz(self.column, np.zeros(self.n))
        return C if self.row_scale is None else np.sqrt(self.row_scale)[:, None] * C


KINDS = ("sqrt", "banded", "toeplitz", "blt")


def _check_kind(kind, c: np.ndarray, n: int, params) -> None:
    """The closed-form kinds are read from their parameters (sqrt: B = C; BLT: its inverse from θ, ω): their
    coefficients must be the ones those generate."""
    caller = "ToeplitzStrategy"
    kind = v.check_choice(kind, name="kind", caller=caller, choices=KINDS)
    if kind == "sqrt" and not (c.size == n and np.allclose(c, sqrt_coefficients(n), rtol=1e-12, atol=0.0)):
        raise ValueError(f"The 'coefficients' parameter of {caller} must be the square root's (binom(2k, k)/4^k, "
                         "k < n) when kind = 'sqrt'. Got other coefficients instead; use kind = 'toeplitz', or "
                         "mmopt.toeplitz.sqrt_strategy(n).")
    if kind == "blt":
        theta, omega = (params or {}).get("theta"), (params or {}).get("omega")
        if theta is None or omega is None:
            raise ValueError(f"The 'params' parameter of {caller} must hold 'theta' and 'omega' when kind = 'blt'. "
                             f"Got keys {sorted(params or {})} instead; use mmopt.toeplitz.blt(theta, omega, n).")
        reference = _series.first_order_sum(*_blt_parameters(theta, omega, caller), n)
        if c.size != n or not np.allclose(c, reference, rtol=1e-9, atol=1e-12 * float(np.abs(reference).max())):
            raise ValueError(f"The 'coefficients' parameter of {caller} must be the ones θ and ω generate when "
                             "kind = 'blt'. Got other coefficients instead; use mmopt.toeplitz.blt(theta, omega, n).")


def equalized_scale(coefficients: np.ndarray, n: int) -> np.ndarray:
    """y = d² with every column of D·T(c) of unit L2 norm: T(c∘c)ᵀ y = 𝟙, i.e. y reversed = cumsum(1/(c∘c)).

    Raises ValueError when some y_t ≤ 0 (then no positive row scaling equalises the columns).
    """
    q = np.asarray(coefficients, dtype=float) ** 2
    y = np.cumsum(_series.reciprocal(q, n))[::-1].copy()
    if not np.all(y > 0) or not np.all(np.isfinite(y)):
        raise ValueError("equalized: no positive row scaling gives every column of D·T(c) unit norm for these "
                         "coefficients (the partial sums of 1/(c∘c) change sign); use the unscaled strategy.")
    return y


def equalized(strategy: ToeplitzStrategy) -> ToeplitzStrategy:
    """The row-scaled strategy D·T(c) whose columns all have unit L2 norm (same c — up to a power of two when |c| is
    extreme —, same online structure).

    Row scaling keeps B = T(b)·D⁻¹ cheap and spends the sensitivity budget on every column, as the optimal
    dense strategy does (its diagonal constraint diag(AᵀA) ≤ 1 is active everywhere).

    Examples
    --------
    >>> C = equalized(sqrt_strategy(3)).to_dense()
    >>> np.round(np.linalg.norm(C, axis=0), 12).tolist()
    [1.0, 1.0, 1.0]
    """
    if not isinstance(strategy, ToeplitzStrategy):
        raise TypeError(f"The 'strategy' parameter of equalized must be a ToeplitzStrategy. "
                        f"Got {type(strategy).__name__} instead.")
    # from C′ = C/2ᵉ: the same matrix D·T(c) (D absorbs 2ᵉ), where c∘c of |c| past 1e154 overflowed ("the partial
    # sums of 1/(c∘c) change sign", untrue) and below 1e-200 scipy's filter refused its a[0] == 0
    unit = strategy.normalised()[0] if strategy.row_scale is None else strategy
    y = equalized_scale(unit.coefficients, strategy.n)
    return ToeplitzStrategy(unit.coefficients, strategy.n, f"{strategy.name}+rows", strategy.kind,
                            strategy.params, y)


def sqrt_coefficients(n: int) -> np.ndarray:
    """c_k = binom(2k, k)/4^k, k < n (the series of (1 − x)^{−1/2}), by the stable ratio c_k = c_{k−1}(2k−1)/(2k)."""
    n = check_n(n, "sqrt_coefficients")
    k = np.arange(1, n, dtype=float)
    return np.concatenate([[1.0], np.cumprod((2 * k - 1) / (2 * k))])


def sqrt_strategy(n: int) -> ToeplitzStrategy:
    """The square-root factorisation C = B = W^{1/2} of the n×n prefix matrix.

    Examples
    --------
    >>> C = sqrt_strategy(4)
    >>> C.coefficients.tolist(), (C.to_dense() @ C.to_dense()).astype(int).tolist()[-1]
    ([1.0, 0.5, 0.375, 0.3125], [1, 1, 1, 1])
    """
    n = check_n(n, "sqrt_strategy")
    return ToeplitzStrategy(sqrt_coefficients(n), n, "sqrt", "sqrt")


def banded(coefficients, n: int, *, name: str | None = None) -> ToeplitzStrategy:
    """The banded Toeplitz strategy with first column ``coefficients`` (length = number of bands ≤ n).

    ``coefficients[0]`` must be non-zero (C invertible). A full-length column is a general Toeplitz strategy.

    Examples
    --------
    >>> banded([1.0, 0.5], 3).to_dense().tolist()
    [[1.0, 0.0, 0.0], [0.5, 1.0, 0.0], [0.0, 0.5, 1.0]]
    """
    caller = "banded"
    n = check_n(n, caller)
    c = v.check_vector(coefficients, name="coefficients", caller=caller)
    if not 1 <= len(c) <= n:
        raise ValueError(f"The 'coefficients' parameter of {caller} must have between 1 and n = {n} entries. "
                         f"Got {len(c)} instead.")
    if c[0] == 0:
        raise ValueError(f"The 'coefficients' parameter of {caller} must have a non-zero first entry (C must be "
                         f"invertible). Got coefficients[0] = 0 instead.")
    kind = "toeplitz" if len(c) == n and n > 1 else "banded"
    return ToeplitzStrategy(c, n, name or (f"banded({len(c)})" if kind == "banded" else "toeplitz"), kind)


def blt(theta, omega, n: int, *, name: str | None = None) -> ToeplitzStrategy:
    """The buffered-linear-Toeplitz strategy c_0 = 1, c_k = Σ_i θ_i ω_i^{k−1} (k ≥ 1), d = len(θ) buffers.

    Parameters
    ----------
    theta, omega : array_like, length d
        Real; |ω_i| < 1 so that the coefficients decay.
    n : int

    Examples
    --------
    >>> C = blt([0.5], [0.5], 4)            # 1 + 0.5x/(1 − 0.5x)
    >>> C.coefficients.tolist()
    [1.0, 0.5, 0.25, 0.125]
    """
    caller = "blt"
    n = check_n(n, caller)
    th, om = _blt_parameters(theta, omega, caller)
    c = _series.first_order_sum(th, om, n)
    d = len(th)
    return ToeplitzStrategy(c, n, name or f"blt({d})", "blt", {"theta": th, "omega": om})


def _blt_parameters(theta, omega, caller: str) -> tuple[np.ndarray, np.ndarray]:
    th = v.check_vector(theta, name="theta", caller=caller)
    om = v.check_vector(omega, name="omega", caller=caller)
    if len(om) != len(th):
        raise ValueError(f"The 'omega' parameter of {caller} must have as many entries as 'theta' ({len(th)}). "
                         f"Got {len(om)} instead.")
    if len(th) == 0:
        raise ValueError(f"The 'theta' parameter of {caller} must have at least one entry. Got 0 instead.")
    if np.any(np.abs(om) >= 1):
        raise ValueError(f"The 'omega' parameter of {caller} must have every |ω_i| < 1. Got max |ω| = "
                         f"{np.abs(om).max():.6g} instead.")
    return th, om

