"""pandas objects and masked arrays passed where mmopt reads plain numbers by position: refused where numpy would
drop what they say (a label that disagrees with the position, a mask).

numpy reads a Series by position and drops its index. When that index is an integer one other than 0, 1, …, n−1
in order (a sorted-descending or filtered Series, or cells numbered from 1) the position and the label of an entry
differ, and a data vector read by position puts each count in another cell than its label says, silently. Such
an input is refused with both remedies; a one-column DataFrame is pointed at its column.
"""

from __future__ import annotations

import numpy as np

__all__ = ["check_positional"]


def _is_pandas(obj) -> bool:
    return type(obj).__module__.split(".", 1)[0] == "pandas"


def check_positional(value, *, name: str, caller: str, item: str = "cell") -> None:
    """Refuse a pandas Series with an integer index other than 0..n−1 in order, a DataFrame of one column and a
    masked array; ``item`` names what the positions number ("cell", "query").

    Examples
    --------
    >>> import pandas as pd
    >>> check_positional(pd.Series([3.0, 4.0]), name="x", caller="release")          # 0, 1: by position
    >>> check_positional(pd.Series([3.0, 4.0], index=[1, 0]), name="x", caller="release")
    Traceback (most recent call last):
    ...
    ValueError: The 'x' parameter of release is a pandas Series whose integer index is not 0, 1, …, 1 in order (it \
reads [1, 0]); mmopt reads it by position, so its entry labelled 1 would stand for cell 0. Pass x.sort_index() if \
the index numbers the cells, or x.to_numpy() if the entries are already in cell order.
    """
    if np.ma.isMaskedArray(value):  # np.asarray drops the mask: a masked entry's stale value would be read as data
        raise ValueError(f"The '{name}' parameter of {caller} is a numpy masked array, whose mask mmopt would drop "
                         f"(its masked entries read as numbers). Pass {name}.filled(value) with the value the masked "
                         "entries stand for.")
    if not _is_pandas(value):
        return
    kind = type(value).__name__
    if kind == "DataFrame" and value.shape[1] == 1:
        column = value.columns[0]
        # x is a histogram: a one-column table is as likely one record per row (its ages, say), whose column would
        # then be released as counts, at the wrong sensitivity (a newcomer's audit)
        records = (" if it holds one count per cell (the histogram, in cell order); a table of records, one row per "
                   "person, is counted by mmopt.records.marginal_counts or released by "
                   "mmopt.records.release_marginals") if name == "x" else ""
        raise ValueError(f"The '{name}' parameter of {caller} is a pandas DataFrame with one column ({column!r}); "
                         f"pass that column: {name}[{column!r}]{records}.")
    index = getattr(value, "index", None)
    if kind != "Series" or index is None:
        return
    labels = np.asarray(index) if index.dtype.kind in "iu" else _integer_text(index)
    if labels is None:
        return
    moved = np.flatnonzero(labels != np.arange(labels.size))  # entries whose label is not their position
    if not moved.size:
        return
    text = index.dtype.kind not in "iu"
    shown = ", ".join(repr(str(k)) if text else str(k) for k in labels[:4].tolist())
    shown += ", …" if labels.size > 4 else ""
    items = item[:-1] + "ies" if item.endswith("y") else item + "s"
    first = int(moved[0])
    # text labels sort as text ("10" before "2"): sort them as the integers they spell
    order = f"{name}.set_axis({name}.index.astype(int)).sort_index()" if text else f"{name}.sort_index()"
    raise ValueError(f"The '{name}' parameter of {caller} is a pandas Series whose {'text' if text else 'integer'} "
                     f"index is not 0, 1, …, {labels.size - 1} in order (it reads [{shown}]); mmopt reads it by "
                     f"position, so its entry labelled {labels[first]} would stand for {item} {first}. Pass {order} if "
                     f"the index numbers the {items}, or {name}.to_numpy() if the entries are already in {item} "
                     "order.")


def _integer_text(index) -> np.ndarray | None:
    """The integers an index of text labels spells ("7", "6", … from value_counts() of string-coded buckets), else
    None: such a Series was read by position without a word, its cells permuted (a helper's probe)."""
    if index.dtype.kind not in "OUT" and str(index.dtype) not in ("string", "str"):
        return None
    out = np.empty(len(index), dtype=np.int64)
    for k, label in enumerate(index):
        if not isinstance(label, str) or not label.strip().lstrip("+-").isdigit():
            return None
        out[k] = int(label)
    return out
