"""Noise streams for :func:`mmopt.montecarlo.monte_carlo`: one seeded stream per run, whatever the batching.

Run r of a Monte-Carlo study draws exactly what ``default_rng(child_r)`` would give, so its results do not depend
on how many runs share one call of :func:`mmopt.matrix_mechanism` (the batch size), the worker count or the order.
"""

from __future__ import annotations

import numpy as np

from mmopt._base import validation as v

__all__ = ["PerRunStreams", "seed_sequence"]

_CALLER = "monte_carlo"


class PerRunStreams(np.random.Generator):
    """A Generator whose i-th noise row (or i-th 1-D draw) comes from the i-th run's own stream.

    :func:`mmopt.matrix_mechanism` draws z with ``laplace``/``normal`` either once with size (b, p)
    (dense strategies) or b times with size (p,) (implicit ones). Both are served row by row from the runs'
    streams, so run r sees exactly what ``default_rng(child_r).laplace(0, b, p)`` would give. Any other
    draw would silently depend on the batching, so it raises.
    """

    def __init__(self, children) -> None:
        super().__init__(np.random.PCG64(children[0]))
        self._streams = [np.random.default_rng(c) for c in children]
        self._next = 0

    def _rows(self, name: str, loc, scale, size):
        shape = (size,) if isinstance(size, int | np.integer) else tuple(size) if size is not None else ()
        if len(shape) not in (1, 2) or not np.isscalar(loc) or not np.isscalar(scale):
            raise RuntimeError(f"{_CALLER}: matrix_mechanism drew {name}(size={size!r}) with array parameters or "
                               "an unexpected shape; runs could not be kept independent of the batching.")
        k = 1 if len(shape) == 1 else shape[0]
        if self._next + k > len(self._streams):
            raise RuntimeError(f"{_CALLER}: matrix_mechanism drew more noise vectors than runs in the batch.")
        draws = [getattr(g, name)(loc, scale, shape[-1]) for g in self._streams[self._next:self._next + k]]
        self._next += k
        return draws[0] if len(shape) == 1 else np.stack(draws)

    def laplace(self, loc=0.0, scale=1.0, size=None):
        return self._rows("laplace", loc, scale, size)

    def normal(self, loc=0.0, scale=1.0, size=None):
        return self._rows("normal", loc, scale, size)

    def check_consumed(self) -> None:
        if self._next != len(self._streams):
            raise RuntimeError(f"{_CALLER}: matrix_mechanism drew {self._next} noise vectors for "
                               f"{len(self._streams)} runs; runs could not be matched to their seeds.")


def _refuse(name: str):
    def draw(self, *args, **kwargs):
        raise RuntimeError(f"{_CALLER}: matrix_mechanism drew with Generator.{name}, which monte_carlo cannot "
                           "split per run; only laplace and normal noise keeps runs independent of the batching.")
    return draw


for _name in dir(np.random.Generator):
    if not _name.startswith("_") and _name not in ("laplace", "normal", "bit_generator", "spawn") and \
            callable(getattr(np.random.Generator, _name)):
        setattr(PerRunStreams, _name, _refuse(_name))


def seed_sequence(seed) -> np.random.SeedSequence:
    if seed is None:
        return np.random.SeedSequence()
    if isinstance(seed, np.random.SeedSequence):  # a fresh copy: the same object gives the same runs twice
        return np.random.SeedSequence(seed.entropy, spawn_key=seed.spawn_key, pool_size=seed.pool_size)
    if isinstance(seed, int | np.integer) and not isinstance(seed, bool | np.bool_):
        return np.random.SeedSequence(v.check_int(seed, name="seed", caller=_CALLER, low=0))
    raise TypeError(f"The 'seed' parameter of {_CALLER} must be an int >= 0, a numpy.random.SeedSequence or None. "
                    f"Got {seed!r:.60} ({type(seed).__name__}).")
