"""Transform strategies on product domains: Privelet's Haar wavelets per attribute, and the Fourier basis.

Notation: see README. Both are implicit (:class:`~mmopt.structured.ImplicitStrategy`): their factors are
per-attribute matrices, so :func:`mmopt.evaluate` is exact at any size (Privelet is one Kronecker product;
every factor Gram of the Fourier strategy is αI + βJ, the structured layer's exact "algebra" path), and
:func:`mmopt.release` draws their noise through OpenDP.

:func:`haar_quadratics` gives qᵀGq for every normalised Haar vector q, from products G·u alone, so the error
of any strategy whose Gram is diagonal in the Haar basis (Y, Privelet, H₂, the quad-tree) is exact at
n = 8,192 without an n×n matrix; :func:`haar_evaluate` does the same on product domains (the quad-tree).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from mmopt._base import validation as v
from mmopt._base.guards import Unsupported
from mmopt.dense._classic import wavelet
from mmopt.dense._error_common import check_privacy, resolve_norm
from mmopt.dense._interval_trees import GramOperator
from mmopt.dense._strategy_core import Strategy
from mmopt.dense.support import support_tolerance
from mmopt.structured import _checks as ck
from mmopt.structured.strategies import ImplicitStrategy, StrategyProduct, _kron_vectors, kron_strategy, sensitivity
from mmopt.structured.workloads import ImplicitWorkload, _check_attributes

__all__ = ["downward_closure", "fourier", "fourier_factor", "haar_basis", "haar_evaluate", "haar_factor",
           "haar_quadratics", "privelet"]


def haar_factor(n: int) -> Strategy:
    """Privelet's one-attribute strategy: the unnormalised Haar matrix Y of :func:`mmopt.strategy.wavelet`
    (rows ±1, Δ₁ = 1 + log₂n′, n′ = n rounded up to a power of two) restricted to the first n columns.

    For n not a power of two Privelet pads the domain with empty cells; keeping only the first n columns
    of Y_{n′} is that padding with the padded cells publicly zero (Y is invertible, so any n of its columns
    still have full rank and the restricted strategy supports every workload on n cells).
    """
    n = v.check_int(n, name="n", caller="haar_factor")
    size = 1 << max(n - 1, 0).bit_length()
    Y = wavelet(size).matrix[:, :n]
    Y = Y[np.any(Y != 0, axis=1)]  # rows that only touch padded cells measure nothing
    return Strategy(Y, f"Y{n}")


def privelet(shape, *, name: str = "Privelet") -> ImplicitStrategy:
    """Privelet for multi-dimensional ranges (Xiao, Wang & Gehrke, ICDE 2010, §4–5): Y₁ ⊗ … ⊗ Y_d.

    Privelet applies the Haar wavelet transform along each ordinal attribute in turn; a coefficient's
    weight is the product of its one-dimensional weights and the generalised sensitivity is
    ∏ᵢ(1 + log₂nᵢ) (their Lemma 3 and §5). In matrix-mechanism form (Li et al., PODS 2010, §6) this is the
    Kronecker product of the unnormalised Haar matrices Yᵢ (±1 entries), whose Δ₁ is that product.

    Choices: ordinal attributes only (Privelet's nominal-attribute transform needs a user-given hierarchy);
    sizes that are not powers of two are padded with empty cells (:func:`haar_factor`).

    Examples
    --------
    >>> A = privelet((4, 8))
    >>> A.shape, A.sensitivity("l1")          # (1 + 2)·(1 + 3)
    ((4, 8), 12.0)
    """
    shape = ck.check_shape(shape, caller="privelet")
    return kron_strategy(*[haar_factor(n) for n in shape], name=name)


def fourier_factor(n: int) -> Strategy:
    """The non-trivial characters of ℤₙ in real form: √2·cos(2πjk/n), √2·sin(2πjk/n) for 0 < j < n/2, and
    (−1)ᵏ when n is even. Rows are orthogonal with squared norm n, so BᵀB = nI − J (for n = 2: [1, −1])."""
    n = v.check_int(n, name="n", caller="fourier_factor", low=2)
    k = np.arange(n)
    rows = []
    for j in range(1, (n + 1) // 2):
        rows += [math.sqrt(2) * np.cos(2 * np.pi * j * k / n), math.sqrt(2) * np.sin(2 * np.pi * j * k / n)]
    if n % 2 == 0:
        rows.append((-1.0) ** k)
    return Strategy(np.array(rows), f"F{n}")


def downward_closure(sets) -> list[tuple[int, ...]]:
    """Every subset of every set in ``sets`` (with the empty set), smallest first."""
    out = {tuple(sorted(T)) for S in sets for r in range(len(S) + 1) for T in itertools.combinations(sorted(S), r)}
    return sorted(out, key=lambda T: (len(T), T))


def fourier(shape, k: int | None = None, *, attributes=None, name: str = "Fourier") -> ImplicitStrategy:
    """The Fourier strategy for marginals (Barak, Chaudhuri, Dwork, Kale, McSherry & Talwar, PODS 2007).

    A marginal on attributes S is a linear function of the Fourier coefficients f_α with α ⪯ S (their
    Theorem 4.1), so the strategy measures, with equal weights, every character χ_α of the domain whose
    support α lies in the downward closure of the requested marginals (``k``: all k-way marginals, or
    ``attributes``: a list of attribute tuples, as :func:`mmopt.workload.marginals`). On binary
    attributes χ_α = ⊗ᵢ∈α [1, −1] ⊗ᵢ∉α [1, 1], entries ±1, Δ₁ = number of coefficients — exactly the paper's
    mechanism (equal Laplace noise per coefficient) followed by least squares instead of its linear program.

    Choices: general domains use the real form of the characters of ℤₙ per attribute (:func:`fourier_factor`,
    the paper treats {0, 1}ᵈ), every coefficient weighted 1 as in the paper. Term T is ⊗ᵢ∈T Bᵢ ⊗ᵢ∉T 1ᵀ.

    Examples
    --------
    >>> A = fourier((2, 2, 2), 1)             # closure of the 1-way marginals: ∅, {0}, {1}, {2}
    >>> A.n_rows, A.sensitivity("l1")
    (4, 4.0)
    """
    caller = "fourier"
    shape = ck.check_shape(shape, caller=caller)
    d = len(shape)
    if (k is None) == (attributes is None):
        raise ValueError(f"{caller} needs exactly one of 'k' (all k-way marginals) or 'attributes' (a list of "
                         f"attribute tuples). Got k={k!r}, attributes={attributes!r}.")
    if k is not None:
        k = v.check_int(k, name="k", caller=caller, low=0, high=d)
        sets = list(itertools.combinations(range(d), k))
    else:
        sets = [tuple(sorted(_check_attributes(S, d))) for S in attributes]
        if not sets:
            raise ValueError(f"The 'attributes' parameter of {caller} must list at least one attribute set. Got [].")
    small = [i for i, n in enumerate(shape) if n < 2]
    if small:
        raise ValueError(f"The 'shape' parameter of {caller} must have every attribute of size >= 2. Got {shape}.")
    B = {n: fourier_factor(n) for n in set(shape)}
    one = {n: Strategy(np.ones((1, n)), f"T{n}") for n in set(shape)}
    terms = tuple(StrategyProduct(tuple(B[n] if i in T else one[n] for i, n in enumerate(shape)), 1.0)
                  for T in downward_closure(sets))
    return ImplicitStrategy(terms, name)


def haar_basis(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(Q, s): the orthonormal Haar basis as rows (Y's rows normalised, n a power of two) and each row's
    support size s (n for the constant row)."""
    Y = wavelet(n).matrix  # refuses n×n past mmopt's allocation limit
    s = np.sum(Y != 0, axis=1).astype(float)
    return Y / np.sqrt(s)[:, None], s


def haar_quadratics(op: GramOperator) -> tuple[np.ndarray, np.ndarray]:
    """(g, s): gₖ = qₖᵀ G qₖ for the Haar vectors qₖ of :func:`haar_basis` and their support sizes, from
    n products G·q (O(n) each for prefix and all ranges): O(n²) time, O(n) memory."""
    if not isinstance(op, GramOperator):
        raise TypeError("The 'op' parameter of haar_quadratics must be a GramOperator (mmopt.baselines.hierarchies."
                        f"gram_operator(W), prefix_gram(n) or all_range_gram(n)). Got {type(op).__name__} instead.")
    n = op.n
    if n & (n - 1):
        raise ValueError(f"haar_quadratics: n must be a power of two. Got n={n}.")
    g, s = [float(op.matvec(np.full(n, 1.0)).sum()) / n], [float(n)]
    size = n
    while size > 1:
        half = size // 2
        for lo in range(0, n, size):
            q = np.zeros(n)
            q[lo:lo + half], q[lo + half:lo + size] = 1.0, -1.0
            g.append(float(q[lo:lo + size] @ op.matvec(q)[lo:lo + size]) / size)
            s.append(float(size))
        size = half
    return np.array(g), np.array(s)


def haar_evaluate(workload: ImplicitWorkload, strategy: ImplicitStrategy, privacy=None, *,
                  norm: str | None = None) -> float:
    """Exact total squared error of an implicit strategy whose every factor Gram is diagonal in the Haar
    basis (identity, H₂, Y, Privelet, the quad-tree; sizes powers of two), at any size.

    With Q the orthonormal Haar basis per attribute, Xᵢ⁽ᵏ⁾ = Qᵀ diag(dᵢ⁽ᵏ⁾) Q, so X = (⊗Q)ᵀ D (⊗Q) with
    D = Σₖ θₖ² ⊗ᵢ dᵢ⁽ᵏ⁾, and for G = Σⱼ wⱼ² ⊗ᵢ Gᵢ⁽ʲ⁾: tr(G X⁺) = Σⱼ wⱼ² Σ_cells (⊗ᵢ gᵢ⁽ʲ⁾)/D with
    gᵢ = diag(Q Gᵢ Qᵀ). Raises ValueError when a factor is not Haar-diagonal or A does not support W.
    Δ from :func:`mmopt.structured.sensitivity` (exact for these strategies).
    """
    caller = "haar_evaluate"
    if not isinstance(workload, ImplicitWorkload) or not isinstance(strategy, ImplicitStrategy):
        raise TypeError(f"{caller}: needs an ImplicitWorkload and an ImplicitStrategy. Got "
                        f"{type(workload).__name__} and {type(strategy).__name__}.")
    ck.same_shape(workload.shape, strategy.shape, caller=caller, what="the workload and the strategy")
    check_privacy(privacy, caller)
    norm = resolve_norm(privacy, norm, caller)
    v.check_allocation(strategy.domain_size * 2, what="the Haar spectrum of the strategy", caller=caller)
    if any(n & (n - 1) for n in strategy.shape):
        raise ValueError(f"{caller}: the Haar basis needs attribute sizes that are powers of two. Got the domain "
                         f"{tuple(strategy.shape)}. mmopt.evaluate(workload, strategy, privacy) takes any size.")
    Q = {n: haar_basis(n)[0] for n in set(strategy.shape)}
    D = 0.0
    for t in strategy.terms:
        ds = []
        for f in t.factors:
            Qf = Q[f.domain_size]
            Y = Qf @ f.gram @ Qf.T
            d = np.diagonal(Y).copy()
            if float(np.abs(Y - np.diag(d)).max()) > 1e-9 * max(float(d.max()), 1e-300):
                raise ValueError(f"{caller}: strategy factor '{f.name}' is not diagonal in the Haar basis.")
            ds.append(d)
        D = D + t.weight**2 * _kron_vectors(ds)
    unit = 0.0
    for t in workload.terms:
        gs = [np.einsum("ij,jk,ik->i", Q[f.domain_size], f.mean_gram * float(f.n_queries), Q[f.domain_size])
              for f in t.factors]
        g = t.weight**2 * _kron_vectors(gs)
        pos = D > 1e-12 * float(np.max(D))
        if float(np.sum(g[~pos])) > support_tolerance(g.size) * float(np.sum(g)):
            raise Unsupported(f"{caller}: strategy '{strategy.name}' does not support workload '{workload.name}'.")
        unit += float(np.sum(g[pos] / D[pos]))
    c = 1.0 if privacy is None else privacy.variance_factor
    return c * sensitivity(strategy, norm).value ** 2 * unit
