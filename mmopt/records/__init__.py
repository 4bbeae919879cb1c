"""Records in, private answers out: marginals released from a table of records, never from a data vector.

Notation: see README. A public :class:`Domain` (attribute names, sizes, and the value → cell rule, with
out-of-domain records dropped) and a table of records — a pandas DataFrame, a Parquet or CSV file, a Dask
DataFrame, a Polars LazyFrame or a DuckDB relation — give exact marginal counts by a map-reduce over batches, or
inside Polars or DuckDB (:func:`marginal_counts`; the same integers from every source);
:func:`release_marginals` measures the residual strategy of :mod:`mmopt.structured.residual` from them with
OpenDP noise and returns the least-squares marginals with their exact variance (:class:`RecordsRelease`).
Nothing of the size of the domain (N = ∏ nᵢ cells) is ever formed.

Running on a cluster: pass a ``dask.dataframe`` (e.g. ``dd.read_parquet("s3://bucket/records/")``) while a
``distributed.Client("tcp://scheduler:8786")`` is active; per-partition counts are computed on the workers and
summed exactly, and the noise is drawn once, on the client, after aggregation; a partition's DataWarnings come
back with its counts and are said on the client.
"""

from mmopt.records.counts import marginal_counts
from mmopt.records.domain import Attribute, Domain
from mmopt.records.release import RecordsRelease, release_marginals

__all__ = ["Attribute", "Domain", "RecordsRelease", "marginal_counts", "release_marginals"]
