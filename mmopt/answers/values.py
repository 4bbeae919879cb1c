"""The answers W x̂ block by block, from the estimate x̂ and the workload's factors (never all m at once).

Notation: see README. For a term w·⊗ᵢWᵢ and a block of :meth:`~mmopt.answers.layout.Layout.chunks` —
prefix (r₁, …, r_k), rows b₀ … b₁ − 1 of factor k + 1, every row of the factors after it — the answers are

    w · (W_{k+1}[b₀:b₁] ⊗ W_{k+2} ⊗ … ⊗ W_d) (r₁ᵀ ⊗ … ⊗ r_kᵀ ⊗ I) x̂,

formed as x̂ contracted with every trailing factor once per term (``tail``, of size n₁⋯n_{k+1}·∏_{i>k+1} mᵢ,
checked before it is allocated), then with the prefix's rows (cached while the prefix lasts) and the block's
rows. The closed-form families apply their fast products (:mod:`mmopt.dense._family_answers`) along each axis; a
term of one closed-form factor is answered whole by its fast product, once (prefix(10⁶) is a cumulative sum, where
its block rows were 10⁶ × 10⁶ dense), when its answers fit the tail's limit.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from mmopt.answers.layout import Chunk, Layout, factor_rows
from mmopt.dense import _family_answers as family_answers
from mmopt.structured import _checks as ck

_TAIL_LIMIT = 5 * 10**7  # float64 entries of one term's partial contraction (400 MB)


def apply_factor(W, x: np.ndarray, axis: int) -> np.ndarray:
    """W applied along ``axis`` of x (closed form for the families, W itself otherwise)."""
    if W.matrix is None and W.family in family_answers.FAMILIES:
        return family_answers.apply(W.family, x, axis)
    return np.moveaxis(np.tensordot(W.explicit_matrix(), x, axes=(1, axis)), 0, axis)


def iter_values(layout: Layout, estimate: np.ndarray, chunks) -> Iterator[tuple[Chunk, np.ndarray]]:
    """(chunk, answers of its rows) for every chunk of ``chunks`` (in order), from x̂ shaped like the domain."""
    x = np.asarray(estimate, dtype=float).reshape(layout.shape)
    cache: dict = {}
    for c in chunks:
        yield c, _chunk_values(layout, x, c, cache)


def _chunk_values(layout: Layout, x: np.ndarray, c: Chunk, cache: dict) -> np.ndarray:
    t = layout.terms[c.term]
    k, grid = c.axis, t.grid
    f = t.factors[0]
    if len(grid) == 1 and f.matrix is None and f.family in family_answers.FAMILIES and grid[0] <= _TAIL_LIMIT:
        if cache.get("whole_key") != c.term:
            cache.clear()
            cache.update(whole_key=c.term, whole=apply_factor(f, x, 0))
        out = cache["whole"][c.local:c.local + c.stop - c.start]
        return out * t.weight if t.weight != 1.0 else out
    key = (c.term, k)
    if cache.get("tail_key") != key:
        cache.clear()
        size = math.prod(layout.shape[:k + 1]) * math.prod(grid[k + 1:])
        ck.check_allocation(size, what=f"a partial answer of term {c.term} of '{layout.name}'",
                            caller="answers", limit=_TAIL_LIMIT,
                            remedy=" Pass a smaller chunk_rows (the block then splits an earlier attribute).")
        y = x
        for i in range(len(grid) - 1, k, -1):
            y = apply_factor(t.factors[i], y, i)
        cache.update(tail_key=key, tail=y)
    if cache.get("prefix_key") != (key, c.prefix):
        y = cache["tail"]
        for i, r in enumerate(c.prefix):  # contract the leading axes with their rows, one at a time
            y = np.tensordot(factor_rows(t.factors[i], r, r + 1)[0], y, axes=(0, 0))
        cache.update(prefix_key=(key, c.prefix), head=y)
    head = cache["head"]  # shape (n_{k+1}, m_{k+2}, …)
    b0, b1 = c.block
    rows = factor_rows(t.factors[k], b0, b1)
    out = (rows @ head.reshape(head.shape[0], -1)).ravel()
    inner = math.prod(grid[k + 1:])
    base = int(np.ravel_multi_index((*c.prefix, b0), grid[:k + 1])) * inner  # the block's first row in the term
    lo = c.local - base
    out = out[lo:lo + c.stop - c.start]
    return out * t.weight if t.weight != 1.0 else out


def check_answers(layout: Layout, estimate: np.ndarray, answers, caller: str) -> None:
    """ValueError unless the released ``answers`` are W x̂ for ``layout``'s workload, on the rows of
    :func:`probe_chunks`: another workload with as many queries had its answers labelled as this one's."""
    if not layout.n_queries:
        return
    answers = np.ravel(np.asarray(answers, dtype=float))  # one draw of size=1 is (1, m): rows, not draws
    # relative to the data's own scale (an absolute floor of 10⁻⁸ let any workload's answers pass on data held
    # as fractions): a 0/1 query's round-off is at most ~n·eps·‖x̂‖₁ however the family computes it
    scale = max(float(np.abs(answers).max(initial=0.0)), float(np.abs(estimate).sum()))
    for chunk, mine in iter_values(layout, estimate, probe_chunks(layout)):  # one pass: each term's tail once
        if not np.allclose(mine, answers[chunk.start:chunk.stop], rtol=1e-8,
                           atol=1e-8 * max(scale, np.finfo(float).tiny)):
            raise ValueError(f"The 'output' parameter of {caller} holds answers that are not W x̂ for workload "
                             f"'{layout.name}' (some of queries {chunk.start:,} to {chunk.stop - 1:,}, in its term "
                             f"'{layout.terms[chunk.term].name}', differ from the estimate's). Pass the workload "
                             "the output was released for.")


def probe_chunks(layout: Layout, rows: int = 4096) -> Iterator[Chunk]:
    """The rows :func:`check_answers` recomputes: the first ``rows`` (or fewer) of every term, in blocks as
    :meth:`~mmopt.answers.layout.Layout.chunks` cuts them (each term's partial contraction once). The first term's
    alone passed another workload whose first term was the same: marginals listed in another order after a shared
    total had every later answer labelled with the wrong group, and sf1 with one table weighted 3× showed the
    weight beside unweighted answers (a helper's audit). Rows past a term's first ``rows`` are not checked: the
    first and last of each term, and 8 at random between, cost 5–11× the table on 10⁷ cells and refused domains
    past 5·10⁷ cells (single-row blocks contract the whole estimate; the review of that change)."""
    offset = 0
    for t in layout.terms:
        m = t.n_queries
        yield from layout.chunks(rows, offset, offset + min(m, rows))
        offset += m
