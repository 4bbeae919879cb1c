"""Many marginals of a junction model at once: every pair from one walk over the tree per attribute.

AIM scores every candidate against the model each round: at d = 100 that is up to 4,950 pairs, most of them in
no clique of the tree, and :meth:`mmopt.synth.junction.JunctionModel.marginal` eliminates a subtree for each.
Here the pairs sharing an attribute a share the work. Walk the smallest subtree holding a's clique and its
partners' cliques, outward from a's clique, carrying P(x_a, x_K). At a's clique K_0 that is μ_{K_0} with a's axis
copied. Across an edge K → L with separator S = K ∩ L the tree's conditional independence (L's other attributes ⊥
everything on K's side, given x_S) gives

    P(x_a, x_L) = P(x_a, x_S) · μ_L / μ_S          (0 where μ_S = 0),

and P(x_a, x_j) is that summed onto j at j's clique (P(x_a) P(x_j) for j on another tree of a forest). The cost
is n_a × the subtree's cells once, where the per-pair route pays it once per pair. The oracle is the per-pair
route (the test compares them on every pair).
"""

from __future__ import annotations

import numpy as np

from mmopt.synth.junction import JunctionModel, _conditional, _contract
from mmopt.synth.model_size import subtree

__all__ = ["marginals"]

#: The label of a's copied axis in the contractions (attributes are non-negative).
_COPY = -1


def marginals(model: JunctionModel, sets) -> dict:
    """{S: the model's marginal on S (counts)} for the sorted tuples ``sets``: pairs that lie in no clique from
    the walks above, every other set by :meth:`~mmopt.synth.junction.JunctionModel.marginal`.

    Examples
    --------
    >>> from mmopt.synth.junction import fit
    >>> from mmopt.synth.estimate import ResidualModel
    >>> from mmopt.synth.model_size import junction_tree
    >>> from mmopt.synth.residuals import ResidualEstimates
    >>> r = {(): np.array(60.0), (0,): np.array([-10.0, 10.0]), (1,): np.array([0.0, 10.0, -10.0])}
    >>> P = fit(ResidualModel(ResidualEstimates((2, 3), r, {S: 1.0 for S in r}), [(0,), (1,)], 60.0),
    ...         junction_tree((2, 3), [(0,), (1,)]))
    >>> marginals(P, [(0, 1)])[(0, 1)].round(2).tolist()      # two one-attribute trees: P(x_0) P(x_1)
    [[6.67, 10.0, 3.33], [13.33, 20.0, 6.67]]
    """
    sets = [tuple(S) for S in sets]
    holder = {}   # each attribute's first clique, as JunctionModel.marginal takes it
    for k, K in enumerate(model.cliques):
        for i in K:
            holder.setdefault(i, k)
    inside = [set(K) for K in model.cliques]
    out, partners = {}, {}
    for S in sets:
        if len(S) == 2 and not any(set(S) <= K for K in inside):
            partners.setdefault(S[0], []).append(S[1])
        elif S not in out:
            out[S] = model.marginal(S)
    conditionals: dict = {}
    for a, js in partners.items():
        for j, table in _walk(model, a, js, holder, conditionals).items():
            out[(a, j)] = table
    return {S: out[S] for S in sets}


def _walk(model: JunctionModel, a: int, partners, holder: dict, conditionals: dict) -> dict:
    """{j: P(x_a, x_j) as counts} for every j in ``partners``: the walk of the module docstring."""
    K0 = model.cliques[holder[a]]
    nodes = subtree(model.parent, [holder[a]] + [holder[j] for j in partners])
    neighbours: dict = {k: [] for k in nodes}
    for k in nodes:
        p = model.parent[k]
        if p in neighbours:
            neighbours[k].append(p)
            neighbours[p].append(k)
    wanted: dict = {}
    for j in partners:
        wanted.setdefault(holder[j], []).append(j)
    n = model.shape[a]
    # P(x_a, x_K0): μ_K0 times δ(x_a' = x_a), a' the copy on the first axis
    joint = np.eye(n).reshape((n,) + tuple(n if i == a else 1 for i in K0)) * model.beliefs[holder[a]] / model.total
    stack = [(holder[a], -1, joint)]
    got = {}
    while stack:
        k, came, joint = stack.pop()
        K = model.cliques[k]
        for j in wanted.get(k, ()):
            got[j] = model.total * _contract([(joint, (_COPY,) + K)], (_COPY, j))
        for q in neighbours[k]:
            if q == came:
                continue
            L = model.cliques[q]
            S = tuple(i for i in L if i in K)
            if (q, S) not in conditionals:
                conditionals[(q, S)] = _conditional(model.beliefs[q], L, S)
            sep = _contract([(joint, (_COPY,) + K)], (_COPY,) + S)
            on_L = tuple(model.shape[i] if i in S else 1 for i in L)   # S's axes where L has them
            stack.append((q, k, sep.reshape((n,) + on_L) * conditionals[(q, S)]))
    if len(got) < len(partners):  # j on another tree of the forest: P is the product of the trees' distributions
        joint_a = model.marginal((a,)) / model.total
        for j in partners:
            if j not in got:
                got[j] = model.total * np.multiply.outer(joint_a, model.marginal((j,)) / model.total)
    return got
