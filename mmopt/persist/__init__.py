"""save / load: strategies and optimisation results as portable ``.npz`` files, checked when read back.

Notation: see README. A file is a numpy ``.npz`` archive (``numpy.savez_compressed``, never pickled:
``allow_pickle=False`` both ways, so loading cannot run code) with the strategy's arrays and one JSON entry,
``metadata`` (UTF-8 bytes in a uint8 vector), holding: ``format`` ("mmopt.strategy"), ``format_version``,
``mmopt_version``, ``created`` (UTC, ISO 8601), ``strategy`` (kind — one of
:data:`mmopt.persist._format.KINDS` — name, shape [p, N] of A, attribute sizes, and per kind the factor names,
term structure, marginal attributes, …; see :mod:`mmopt.persist._format`), ``arrays`` (each array's dtype and
shape), ``result`` (for an
:class:`~mmopt.OptimizeResult`: :meth:`~mmopt.OptimizeResult.to_dict` without its strategy summary — method,
solver, status, objective, lower bound, gap, iterations, seconds, seed, history, extra), ``privacy`` (ε, δ,
calibration, noise), ``workload`` (name, attribute sizes, N, m, and up to 4,096 cells a sketch of its Gram,
:mod:`mmopt.persist._workload`: loading with other queries warns) and ``checksum`` (SHA-256 of the arrays and
of the rest of the metadata). Other languages can read it with any zip and .npy reader.

:func:`load` returns a :class:`SavedStrategy` (the rebuilt strategy plus the metadata), not an
OptimizeResult: a result's ``history`` and ``extra`` may hold arbitrary objects that are saved only as JSON
summaries, so a rebuilt OptimizeResult would be a lossy copy posing as a fresh run. The strategy itself is
rebuilt bit for bit, so ``mmopt.evaluate`` gives identical figures.
"""

from __future__ import annotations

import json
import math
import os
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mmopt._base.intent import PARTICIPATION, marked, participation_schema, unstated_norm
from mmopt._base.jsonable import jsonable, to_float
from mmopt._base.result import OptimizeResult
from mmopt.dense._strategy_core import Strategy
from mmopt.persist import _envelope as envelope
from mmopt.persist import _files as pf
from mmopt.persist import _format as fmt
from mmopt.persist._workload import attribute_sizes as _attribute_sizes
from mmopt.persist._workload import check_recorded_attributes as _check_recorded_attributes
from mmopt.persist._workload import differs
from mmopt.persist._workload import workload_metadata as _workload_metadata
from mmopt.privacy import Privacy
from mmopt.structured.strategies import ImplicitStrategy

__all__ = ["SavedStrategy", "load", "save"]


@dataclass(frozen=True, eq=False)
class SavedStrategy:
    """What :func:`load` returns: the strategy, rebuilt exactly, and the file's metadata (read-only).

    Attributes
    ----------
    strategy : Strategy or mmopt.structured.ImplicitStrategy
    metadata : mapping
        The JSON metadata (see the module docstring), as read-only mappings and tuples; :meth:`to_dict`
        gives a plain copy. Non-finite floats are the strings "inf", "-inf", "nan".
    path : str
        The file read.
    """

    strategy: Strategy | ImplicitStrategy
    metadata: Mapping[str, Any]
    path: str

    @property
    def kind(self) -> str:
        """One of :data:`mmopt.persist._format.KINDS`: "dense", "product", "union", "marginals", "toeplitz",
        "weighted_sqrt", "tree", "p_identity", "residual", "hierarchy_residual", "hierarchy_nodes" or "orbit"."""
        return self.metadata["strategy"]["kind"]

    @property
    def result(self) -> Mapping[str, Any] | None:
        """The saved OptimizeResult's summary (method, status, objective, ...), or None."""
        return self.metadata["result"]

    @property
    def privacy(self) -> Privacy | None:
        """The privacy budget saved with the strategy, or None."""
        p = self.metadata["privacy"]
        return None if p is None else Privacy(to_float(p["epsilon"]), to_float(p["delta"]), p["calibration"])

    def to_dict(self) -> dict:
        """The metadata as plain dicts and lists (JSON-serialisable)."""
        return json.loads(json.dumps(self.metadata, default=pf.thaw))

    def __repr__(self) -> str:
        res = self.result
        tail = f", method={res.get('method')!r}, status={res.get('status')!r}" if res else ""
        return f"SavedStrategy({self.strategy!r}, kind={self.kind!r}{tail}, path={self.path!r})"


def save(path, strategy_or_result, *, workload=None, privacy=None, overwrite: bool = False) -> Path:
    """Write a strategy, or an OptimizeResult with its strategy, to a portable ``.npz`` file.

    Parameters
    ----------
    path : str or os.PathLike
        The file to write. ``.npz`` is appended when the name does not end with it (as numpy does), so
        ``save("best", ...)`` writes ``best.npz``; the name written is returned.
    strategy_or_result : Strategy, implicit strategy, or OptimizeResult
        A dense :class:`~mmopt.Strategy`; a product, union or marginals strategy
        (:func:`mmopt.strategy.kron`, :func:`~mmopt.strategy.stack`, :func:`~mmopt.strategy.marginals`);
        a :mod:`mmopt.toeplitz` strategy (stored in O(n): its coefficients, never the n×n matrix); a residual
        strategy (what a Gaussian records release measured; stored by its subsets and weights, and loaded as
        itself, so that ``release_marginals(..., strategy=loaded.strategy)`` measures it again); weighted
        marginals (stored as the marginals strategy they stand for, which loads as that implicit strategy); or
        what :func:`mmopt.optimize` returned (its strategy plus a summary of the run).
    workload : Workload or ImplicitWorkload, optional
        Recorded by name, attribute sizes and query count; its domain must be the strategy's.
    privacy : Privacy, optional
        Recorded (ε, δ, calibration). With a result, its noise must match the result's norm (ValueError).
    overwrite : bool, default=False
        Replace an existing file. Without it an existing file is never touched (FileExistsError).

    Returns
    -------
    pathlib.Path
        The file written. It appears complete or not at all: the data go to a temporary file in the same
        directory, which is then renamed (``os.replace``, or a hard link when overwriting is refused, so a
        file created meanwhile is not clobbered either).

    Examples
    --------
    >>> import os, tempfile, mmopt
    >>> W = mmopt.workload.prefix(8)
    >>> res = mmopt.optimize(W, method="hierarchical")
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     written = save(os.path.join(tmp, "prefix8"), res, workload=W, privacy=mmopt.Privacy(1.0))
    ...     saved = load(written, workload=W)
    >>> written.name, saved.kind, saved.result["method"], saved.metadata["workload"]["name"]
    ('prefix8.npz', 'dense', 'hierarchical', 'prefix(8)')
    >>> p = saved.privacy
    >>> mmopt.evaluate(W, saved.strategy, p).to_row() == mmopt.evaluate(W, res.strategy, p).to_row()  # identical
    True
    """
    caller = "save"
    if isinstance(strategy_or_result, str | os.PathLike) and not isinstance(path, str | os.PathLike):
        # torch.save and pickle.dump take the object first; numpy's np.save, and this, the path
        raise TypeError(f"{caller} takes the path first: save(path, strategy_or_result), as numpy's np.save. Got "
                        f"save({type(path).__name__}, {os.fspath(strategy_or_result)!r}).")
    from mmopt.dispatch import as_implicit  # lazy: dispatch sits above every family, this module beside them
    # weighted marginals are stored as the marginals strategy they are; a residual strategy as itself (its kind)
    strategy_or_result, workload = _stored(strategy_or_result), as_implicit(workload)
    target = pf.npz_name(path, caller)
    if not isinstance(overwrite, bool | np.bool_):
        raise TypeError(f"The 'overwrite' parameter of {caller} must be True or False. Got {type(overwrite).__name__}.")
    result = None
    if isinstance(strategy_or_result, OptimizeResult):
        strategy = _stored(strategy_or_result.strategy)  # a max-variance result on marginals holds a residual one
        try:
            fmt.kind_of(strategy, caller)
        except TypeError:  # the generic refusal listed "or an OptimizeResult" to a caller who had passed one
            raise TypeError(f"The 'strategy_or_result' parameter of {caller} is an OptimizeResult whose strategy is a "
                            f"{type(strategy).__name__} (method={strategy_or_result.method!r}), which the file format "
                            "does not hold: save stores dense, Kronecker/union/marginal, residual, p-Identity and "
                            f"mmopt.toeplitz strategies.{fmt.REMEDIES.get(type(strategy).__name__, '')}") from None
        result = strategy_or_result.to_dict()
        del result["strategy"]  # the strategy has its own, fuller, section
    else:
        strategy = strategy_or_result
    desc, arrays = fmt.encode(strategy, caller)
    if privacy is not None and not isinstance(privacy, Privacy):
        raise TypeError(f"The 'privacy' parameter of {caller} must be a Privacy or None, e.g. Privacy(epsilon=1.0). "
                        f"Got {type(privacy).__name__}.")
    if result is not None and privacy is not None and result["norm"] != privacy.sensitivity_norm:
        # the file would record an objective in one norm beside a budget whose noise is set by the other
        raise ValueError(f"The 'privacy' parameter of {caller} ({privacy.noise} noise, Δ in "
                         f"{privacy.sensitivity_norm}) disagrees with the result, optimised under {result['norm']}: "
                         "its objective would not be the error of a release under that budget. Optimise under this "
                         "privacy, or save the strategy alone (result.strategy) with it.")
    wmeta = None if workload is None else _workload_metadata(workload, strategy, caller, "'workload' parameter")
    if target.is_dir():  # "already exists, pass overwrite=True" led to a second refusal (a helper's audit)
        raise ValueError(f"The 'path' parameter of {caller} names a directory, '{target}'. Give a file name.")
    if target.exists() and not overwrite:
        raise FileExistsError(pf.exists_message(target))
    meta = envelope.header(fmt.FORMAT, fmt.FORMAT_VERSION) | {
        "strategy": desc, "result": result,
        "privacy": None if privacy is None else jsonable({"epsilon": privacy.epsilon, "delta": privacy.delta,
                                                          "calibration": privacy.calibration, "noise": privacy.noise}),
        "workload": wmeta}
    if (unstated := unstated_norm(strategy)) is not None:
        # optimised with no budget given: the mark that warns when it meets the other noise travels with the file
        # (a loaded strategy was silent where the one in memory warned; a helper's probe), with a budget saved
        # beside it too (the budget need not be the noise it was optimised for; a helper's audit); absent
        # otherwise, so such files are as before
        meta["unstated_norm"] = unstated
    if (schema := participation_schema(strategy)) is not None:  # likewise the training schema's mark (a review)
        meta["participation"] = schema
    envelope.write(target, meta, arrays, overwrite)  # adds the arrays' listing and the checksums
    return target


def _stored(obj):
    """What save stores for ``obj``: itself for a residual strategy, else its implicit form (dispatch.as_implicit)."""
    from mmopt.dispatch import as_implicit
    from mmopt.structured.residual.strategy import ResidualStrategy
    return obj if isinstance(obj, ResidualStrategy) else as_implicit(obj)


def load(path, *, workload=None) -> SavedStrategy:
    """Read a file written by :func:`save`, verify it, and rebuild its strategy exactly.

    Parameters
    ----------
    path : str or os.PathLike
        The file; when it does not exist and its name lacks ``.npz``, ``path + ".npz"`` is read (so
        ``load("best")`` reads what ``save("best", ...)`` wrote).
    workload : Workload or ImplicitWorkload, optional
        The workload the strategy will answer: its domain must be the strategy's, and, over several attributes,
        their sizes those of the workload the file records (if any), else ValueError.

    Returns
    -------
    SavedStrategy

    Raises
    ------
    ValueError
        Naming the file and what is wrong, when it is not an ``.npz`` archive (e.g. truncated), would need
        unpickling, has an unknown format name or a newer format version, fails its SHA-256 checksums (a
        corrupted or edited file), describes shapes that disagree (e.g. factors whose column counts do not
        multiply to the domain size), holds non-finite values, or does not fit ``workload``.
    FileNotFoundError
        When there is no such file.
    """
    source, fail, meta, raw = envelope.read(path)  # format, version and checksums checked
    strategy = fmt.decode(meta.get("strategy"), raw, fail, written_by=meta.get("mmopt_version"))
    if (unstated := meta.get("unstated_norm")) is not None:
        if unstated not in ("l1", "l2"):
            fail(f"records an unknown 'unstated_norm' {unstated!r:.40}")
        strategy = marked(strategy, unstated)
    if (schema := meta.get("participation")) is not None:
        # only what optimize writes (a schema of more than one participation): "" or "Single()" loaded, and warned
        # "optimised for private training under  (a record in several steps)" (a helper's audit)
        ks = re.fullmatch(r"FixedEpochs\(epochs=(\d+)\)|MinSeparation\(separation_steps=[1-9]\d*, "
                          r"max_participations=(\d+)\)", schema) if isinstance(schema, str) else None
        if ks is None or int(ks.group(1) or ks.group(2)) < 2:
            fail(f"records a 'participation' that is not a schema of several participations: {schema!r:.60}")
        strategy = marked(strategy, schema, attribute=PARTICIPATION)
    for section in ("result", "privacy", "workload"):
        fmt.field(meta, section, (dict, type(None)), "metadata", fail)
    if meta["privacy"] is not None:
        p = meta["privacy"]
        try:
            Privacy(to_float(p["epsilon"]), to_float(p["delta"]), p["calibration"])
        except (KeyError, TypeError, ValueError) as exc:
            fail(f"records an invalid privacy budget {p!r:.80} ({exc})")
        # a result in one norm beside a budget in the other, which save now refuses to write, is not refused here:
        # mmopt 0.1 wrote it (tests/data/saved_0.1/dense_result.npz), and load reads the budget alone
    if meta["workload"] is not None:
        _check_workload_section(meta["workload"], strategy, fail)
    if workload is not None:
        from mmopt.dispatch import as_implicit  # RecordsRelease.workload, as save takes it
        given = _workload_metadata(as_implicit(workload), strategy, f"load('{source}')", "'workload' parameter")
        _check_recorded_attributes(given, meta["workload"], f"load('{source}')")
        if differs(given["gram_sketch"], (meta["workload"] or {}).get("gram_sketch")):
            warnings.warn(f"load('{source}'): the strategy was saved with workload '{meta['workload']['name']}', "
                          f"whose queries differ from those of the 'workload' given ('{given['name']}'): it may be "
                          "far from the best strategy for these. Optimise for this workload, or pass the one it was "
                          "saved with.", UserWarning, stacklevel=2)
    return SavedStrategy(strategy, pf.frozen(meta), str(source))


def _check_workload_section(recorded: dict, strategy, fail) -> None:
    """The recorded workload's attribute sizes: whole numbers ≥ 1 whose product is the strategy's N (and its
    sizes, for a strategy over attributes). Unchecked, a hand-edited file (its checksum recomputed: the checksum is
    no signature) gave a bare TypeError naming neither load nor the file, or skipped the layout check (an
    auditor's probe)."""
    sizes = recorded.get("domain_shape")
    whole = isinstance(sizes, list) and sizes and all(
        isinstance(k, int) and not isinstance(k, bool) and k >= 1 for k in sizes)
    N, shape = strategy.domain_size, _attribute_sizes(strategy)
    if not whole or math.prod(sizes) != N or (shape is not None and len(shape) > 1 and tuple(sizes) != tuple(shape)):
        fail(f"records a workload over attribute sizes {sizes!r:.60}, which are not whole numbers ≥ 1 whose product "
             f"is the strategy's {N:,} cells" + (f" over {tuple(shape)}" if shape is not None and len(shape) > 1
                                                 else ""))
    if recorded.get("domain_size", N) != N or not isinstance(recorded.get("name", ""), str):
        fail(f"records a workload ({recorded.get('name')!r:.40}, N = {recorded.get('domain_size')!r:.20}) that is not "
             f"over the strategy's {N:,} cells")
    # the sketch load compares a given workload with: strings raised a bare ValueError, a number a bare TypeError,
    # and NaNs silenced the mismatch warning (every comparison False; a helper's audit)
    sketch = recorded.get("gram_sketch")
    if sketch is not None and not (isinstance(sketch, list) and len(sketch) in (3, 5) and all(
            (isinstance(q, float) and math.isfinite(q)) or (isinstance(q, int) and not isinstance(q, bool)
                                                            and abs(q) < 2**1023) for q in sketch)):
        fail(f"records a workload sketch {sketch!r:.60}, not 3 or 5 finite numbers")
