"""Public data shipped with mmopt (package data): see :mod:`mmopt.records.datasets` for loaders and sources.

``cps1988.parquet`` / ``cps1988.domain.json``: 28,155 records of the March 1988 Current Population Survey
(AER's CPS1988; US federal survey data, public domain in the US), rebuilt by ``python -m experiments.data_cps1988``.
"""
