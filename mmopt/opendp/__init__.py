"""mmopt inside OpenDP: the records release as an OpenDP ``Measurement`` (:func:`make_matrix_mechanism`; grouping
sets over a hierarchy: :func:`make_grouping_sets_mechanism`).

Notation: see README. The measurement's privacy map is OpenDP's (ρ-zCDP for Gaussian noise, ε for Laplace
noise, on records added or removed), its noise is OpenDP's, and it composes in any OpenDP compositor or
``dp.Context``, which then holds the budget and refuses to overspend. :mod:`mmopt.opendp.measurement` says which
OpenDP features it needs and why they are safe here.
"""

from mmopt.opendp.grouping import make_grouping_sets_mechanism
from mmopt.opendp.measurement import FEATURES, make_matrix_mechanism, records_domain, records_space

__all__ = ["FEATURES", "make_grouping_sets_mechanism", "make_matrix_mechanism", "records_domain", "records_space"]
