"""The half-widths of exact 1 − α intervals for the rows of an answers table (``lower``/``upper`` columns).

Notation: see README and :mod:`mmopt.answers.intervals`. The least-squares answer q x̂ = q x + aᵀz with
a = q A⁺ and z the noise drawn (i.i.d. with scale b or σ). Gaussian noise: h = z_{1−α/2}·standard_error, for
every route. Laplace noise: h is the exact (1 − α/2)-quantile of Σⱼ aⱼ·b·Lⱼ, so a needs listing: on the dense
route (at most 4,096 cells) A⁺ is formed once and a = q A⁺ row by row. Rows whose sorted |a| agree to 12
significant digits share one quantile (identity-like rows cost nothing); at most :data:`MAX_LAPLACE_ROWS`
rows per table, because each distinct law costs milliseconds. Implicit strategies on larger domains are
refused for Laplace intervals (the weights of a union strategy are sums of Kronecker products): records
releases give exact intervals through the marginal algebra (:mod:`mmopt.records.plans`).
"""

from __future__ import annotations

import numpy as np
from scipy import special

from mmopt.answers import intervals as iv
from mmopt.answers.layout import Chunk

#: Laplace intervals list a = q A⁺ per row; past this many rows a table is refused (each distinct law costs ms).
MAX_LAPLACE_ROWS = 50_000


class Widths:
    """h for each row of a chunk, given its standard errors (``of``)."""

    def __init__(self, alpha: float, noise: str, scale: float, rows=None, pinv: np.ndarray | None = None):
        self.alpha, self.noise, self.scale = alpha, noise, scale
        self.z = float(-special.ndtri(alpha / 2.0))
        self.rows, self.pinv, self.cache = rows, pinv, {}

    def of(self, c: Chunk, se: np.ndarray) -> np.ndarray:
        if self.noise == "gaussian":
            return self.z * se
        a = self.rows(c) @ self.pinv  # (rows of the chunk) × p: each row's weights on the measurements
        out = np.empty(a.shape[0])
        for k, row in enumerate(a):
            mag = np.abs(row[row != 0.0])
            if mag.size == 0:
                out[k] = 0.0
                continue
            top = float(mag.max())
            key = np.round(np.sort(mag) / top, 12).tobytes()
            if key not in self.cache:
                self.cache[key] = iv.half_width("laplace", self.alpha, weights=mag / top, scale=1.0)
            out[k] = self.cache[key] * top * self.scale
        return out


def preflight(alpha, model, noise: str, reconstruction: str, name: str, caller: str) -> float:
    """α checked, or a ValueError saying why exact intervals are not available — all before any noise is drawn."""
    alpha = iv.check_alpha(alpha, caller)
    if model is None:
        raise ValueError(f"The 'alpha' parameter of {caller} needs the strategy (intervals come from its exact error "
                         "law). Pass strategy=... as well.")
    if reconstruction != "least_squares":
        raise ValueError(f"The 'alpha' parameter of {caller}: the answers were reconstructed by '{reconstruction}', "
                         "which is biased, so no interval is exact. Release with reconstruct='least_squares' for "
                         "exact intervals.")
    if noise == "gaussian":
        return alpha
    if model.method != "dense":
        raise ValueError(f"The 'alpha' parameter of {caller}: exact Laplace intervals list each answer's weights "
                         f"q A⁺, available for pairs on at most 4,096 cells; '{name}' uses the {model.method} route. "
                         "Use Gaussian noise (closed-form intervals), or records releases "
                         "(mmopt.records.release_marginals: exact intervals in the marginal algebra).")
    if model.layout.n_queries > MAX_LAPLACE_ROWS:
        raise ValueError(f"The 'alpha' parameter of {caller}: exact Laplace intervals cost milliseconds per distinct "
                         f"answer law; '{name}' has {model.layout.n_queries:,} queries (limit {MAX_LAPLACE_ROWS:,}). "
                         "Pass terms=... for fewer rows, or use Gaussian noise (closed-form intervals).")
    return alpha


def widths(alpha, model, workload, strategy, output, meta: dict, caller: str) -> Widths:
    """The :class:`Widths` of a planned table (refusals: :func:`preflight`)."""
    alpha = preflight(alpha, model, output.noise, meta["reconstruction"], meta["workload"], caller)
    if output.noise == "gaussian":
        return Widths(alpha, "gaussian", float(output.noise_scale))
    from mmopt.answers.variance import _dense_workload
    from mmopt.structured.strategies import ImplicitStrategy
    W = _dense_workload(workload, model.layout, caller).explicit_matrix()
    A = strategy.to_strategy().matrix if isinstance(strategy, ImplicitStrategy) else np.asarray(
        getattr(strategy, "matrix", strategy), dtype=float)
    return Widths(alpha, "laplace", float(output.noise_scale), rows=lambda c: W[c.start:c.stop], pinv=np.linalg.pinv(A))
