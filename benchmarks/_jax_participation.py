"""The jax_privacy half of bench_participation.py: run under a separate venv holding jax_privacy, never mmopt.

Run:  /work/jaxvenv/bin/python benchmarks/_jax_participation.py N K OUT.npz [--skip dense,blt] [--beta B]
For the prefix workload on N steps with K fixed epochs (b = N/K, also a (K, b) minimum separation), each of
jax_privacy's optimisers with its default budget: "dense" (``dense.optimize(n, epochs=k)``), "banded toeplitz"
(``toeplitz.optimize_banded_toeplitz(n, bands=b)``), "blt" (``buffered_toeplitz.optimize(n=n, min_sep=b,
max_participations=k, error='mean')``). It saves each strategy's lower-triangular matrix C (or its Toeplitz
coefficients), jax_privacy's own sensitivity² of it, and the CPU seconds (``time.process_time``, every thread)
of the optimisation; bench_participation.py evaluates every strategy with mmopt's exact sensitivity and error.

With ``--beta B`` (> 0) the workload is heavy-ball momentum SGD, jax_privacy's ``momentum_sgd_matrix(B)``
(W_tr = Σ_{j ≤ t−r} B^j, mmopt's ``participation.momentum``): "dense" (``dense.optimize(n, epochs=k, A=W)``) and
"banded" (``banded.optimize(n, bands=b, A=momentum_sgd_matrix(B))``, its column-normalised banded family); its
Toeplitz and BLT optimisers take no workload, so they are not run.
"""

from __future__ import annotations

import argparse
import time

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
from jax_privacy.matrix_factorization import (  # noqa: E402
    banded,
    buffered_toeplitz,
    dense,
    sensitivity,
    streaming_matrix,
    toeplitz,
)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("n", type=int)
    p.add_argument("k", type=int)
    p.add_argument("out")
    p.add_argument("--skip", default="")
    p.add_argument("--beta", type=float, default=0.0)
    a = p.parse_args()
    n, k = a.n, a.k
    b = n // k
    skip = set(filter(None, a.skip.split(",")))
    out: dict[str, np.ndarray] = {}
    if a.beta > 0:
        workload = streaming_matrix.momentum_sgd_matrix(a.beta)
        if "dense" not in skip:
            t = time.process_time()
            C = np.asarray(dense.optimize(n, epochs=k, A=workload.materialize(n)))
            out["dense_seconds"] = np.array(time.process_time() - t)
            out["dense_C"] = C
            out["dense_sens2"] = np.array(sensitivity.fixed_epoch_sensitivity(C, k) ** 2)
        t = time.process_time()
        C = np.asarray(banded.optimize(n, bands=b, A=workload).materialize())
        out["banded_seconds"] = np.array(time.process_time() - t)
        out["banded_C"] = C
        np.savez(a.out, **out)
        return
    if "dense" not in skip:
        t = time.process_time()
        C = np.asarray(dense.optimize(n, epochs=k))
        out["dense_seconds"] = np.array(time.process_time() - t)
        out["dense_C"] = C
        out["dense_sens2"] = np.array(sensitivity.fixed_epoch_sensitivity(C, k) ** 2)
    if "toeplitz" not in skip:
        t = time.process_time()
        c = np.asarray(toeplitz.optimize_banded_toeplitz(n, bands=b))
        out["toeplitz_seconds"] = np.array(time.process_time() - t)
        out["toeplitz_coef"] = c
        out["toeplitz_sens2"] = np.array(toeplitz.minsep_sensitivity_squared(c, min_sep=b, max_participations=k,
                                                                             n=n))
    if "blt" not in skip:
        t = time.process_time()
        blt = buffered_toeplitz.optimize(n=n, min_sep=b, max_participations=k, error="mean")
        out["blt_seconds"] = np.array(time.process_time() - t)
        out["blt_coef"] = np.asarray(blt.toeplitz_coefs(n))
        out["blt_buffers"] = np.array(len(np.atleast_1d(np.asarray(blt.buf_decay))))
    np.savez(a.out, **out)


if __name__ == "__main__":
    main()
