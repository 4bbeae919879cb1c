"""Private helpers every layer uses: input checks and messages (:mod:`.validation`), guards on work and memory
(:mod:`.guards`), BLAS threads and progress (:mod:`.runtime`), seeded parallel restarts (:mod:`.parallel`), atomic
files (:mod:`.atomic`), OpenDP's vetted samplers (:mod:`.opendp`), the Gaussian δ (:mod:`.gaussian_delta`), and the
result types a search hands to :func:`mmopt.optimize` (:mod:`.solution`) and it returns (:mod:`.result`,
:mod:`.jsonable`).

Nothing here imports a workload family or a search; every other subpackage may import from here.
"""
