"""The file behind :meth:`mmopt.synth.Synthetic.save` and :func:`mmopt.synth.load`: a fitted MST or AIM model.

Notation: see README and :mod:`mmopt.persist`, whose envelope it shares (:mod:`mmopt.persist._envelope`): a numpy
``.npz`` archive written with ``allow_pickle=False`` (loading cannot run code), named arrays and one JSON entry,
``metadata``, with ``format`` ("mmopt.synthetic"), ``format_version``, ``mmopt_version``, ``created``, the
listing of the arrays and SHA-256 checksums of the arrays and of the rest of the metadata (they catch corruption
and edits; they are no signature). The metadata holds:

- ``sampler`` ("opendp", a release, or "numpy-seeded", a simulation) and ``simulation`` (a bool), with a
  ``note`` saying so for a simulation, whose noise anyone who knows its ``seed`` (saved too) can remove;
- ``synthetic``: ``method``, ``domain`` (:meth:`mmopt.records.Domain.to_json`'s form), the public ``steps``
  (label, kind, ρ, scale, attribute sets, sensitivity: what each paid use of the data was, no data),
  ``rho``, ``delta``, ``epsilon``, ``budget`` and ``seed``;
- ``model``: the fitted model's kind and structure, its arrays ``model_*`` (:mod:`mmopt.synth.saved_models`);
- ``details``: its keys in order, the plain-JSON ones (sets, noise scales, the fit's status; sequences come back as
  tuples), the least-squares estimates and MST's compression as arrays (``details_<position>_*``), and the keys
  left out (any other object).

Everything saved is public or post-processing of the noisy measurements: saving, loading, sampling rows and
reading marginals spend no privacy. A loaded model is rebuilt bit for bit: its marginals, and its records under a
seed, are those of the model saved. Saving runs load's checks on what it is about to write, so it never writes a
file that load refuses (a Synthetic edited by hand, e.g. a seed beside OpenDP's sampler).
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np

from mmopt._base.jsonable import number
from mmopt.persist import _envelope as envelope
from mmopt.persist import _files as pf
from mmopt.persist import _format as fmt
from mmopt.records.domain import Domain
from mmopt.synth import saved_models as sm
from mmopt.synth.compress import Compression
from mmopt.synth.curator import Step
from mmopt.synth.residuals import ResidualEstimates

__all__ = ["FORMAT", "FORMAT_VERSION", "read", "write"]

FORMAT = "mmopt.synthetic"
FORMAT_VERSION = 1
SAMPLERS = ("opendp", "numpy-seeded")
DAMAGED = ("Restore the file from a copy, or save the model again with Synthetic.save; load does not repair a "
           "damaged file.")
NOTE = ("a simulation: the noise was drawn by numpy's generator seeded with 'seed', so anyone who knows the seed "
        "can remove it; not a private release")


def write(s, path, overwrite: bool = False) -> Path:
    """Write the Synthetic ``s`` to ``path`` (``.npz`` appended when missing); the name written."""
    caller = "Synthetic.save"
    target = pf.npz_name(path, caller, "model.npz")
    if not isinstance(overwrite, bool | np.bool_):
        raise TypeError(f"The 'overwrite' parameter of {caller} must be True or False. Got {type(overwrite).__name__}.")
    model, arrays = sm.encode_model(s.model, s.domain.shape)
    details, more = _encode_details(s.details, s.model)
    if target.exists() and not overwrite:  # after the model is known to be savable: say the first problem first
        raise FileExistsError(pf.exists_message(target, caller))
    simulation = s.sampler == "numpy-seeded"
    meta = envelope.header(FORMAT, FORMAT_VERSION) | {
        "sampler": s.sampler, "simulation": simulation,
        "synthetic": {"method": s.method, "domain": {"attributes": [a.to_dict() for a in s.domain.attributes]},
                      "steps": [{"label": st.label, "kind": st.kind, "rho": number(st.rho), "scale": number(st.scale),
                                 "sets": [[int(i) for i in S] for S in st.sets],
                                 "sensitivity": number(st.sensitivity)} for st in s.steps],
                      "rho": number(s.rho), "delta": number(s.delta), "epsilon": number(s.epsilon),
                      "budget": number(s.budget), "seed": None if s.seed is None else int(s.seed)},
        "model": model, "details": details}
    if simulation:
        meta["note"] = NOTE
    arrays |= more

    def refuse(what, remedy=None):
        raise ValueError(f"{caller}: the file {what}, which mmopt.synth.load refuses. Nothing was written.")

    # read back in memory first (as load will parse it): a Synthetic edited by hand (a seed with OpenDP's sampler,
    # a budget that does not add up) is refused here rather than written to a file no load accepts
    _decode(json.loads(fmt.canonical(meta)), dict(arrays), refuse)
    envelope.write(target, meta, arrays, overwrite, caller)
    return target


def _plain(x):
    """``x`` as plain JSON (tuples as lists, numpy scalars as numbers), or a TypeError."""
    if isinstance(x, np.generic):
        x = x.item()
    if x is None or isinstance(x, bool | str | int):
        return x
    if isinstance(x, float) and math.isfinite(x):
        return x
    if isinstance(x, tuple | list):
        return [_plain(y) for y in x]
    if isinstance(x, dict) and all(isinstance(k, str) for k in x):
        return {k: _plain(y) for k, y in x.items()}
    raise TypeError(type(x).__name__)


def _encode_details(details: dict, model) -> tuple[dict, dict]:
    out: dict = {"keys": [str(k) for k in details], "json": {}, "omitted": []}
    arrays: dict = {}
    for j, (key, val) in enumerate(details.items()):
        if isinstance(val, ResidualEstimates) and val is getattr(model, "estimates", None):
            out["json"][key] = None
            out.setdefault("same_as_model", []).append(key)  # the residual model's own estimates: stored once
        elif isinstance(val, ResidualEstimates | Compression):
            encode = sm.encode_estimates if isinstance(val, ResidualEstimates) else sm.encode_compression
            desc, more = encode(val, f"details_{j}")  # by position: a key is no safe file name
            out.setdefault("arrays", {})[key] = {"type": type(val).__name__, **desc}
            arrays |= more
        else:
            try:
                out["json"][key] = _plain(val)
            except TypeError:  # an object with no exact plain form: said, not saved as a lossy repr
                out["omitted"].append(key)
    return out, arrays


def _tuples(x):
    """Lists back to tuples, recursively (dicts kept)."""
    if isinstance(x, list):
        return tuple(_tuples(y) for y in x)
    if isinstance(x, dict):
        return {k: _tuples(y) for k, y in x.items()}
    return x


def read(path) -> dict:
    """The fields of the Synthetic saved at ``path`` (:func:`mmopt.synth.load` builds it), every part checked."""
    caller = "mmopt.synth.load"
    _, fail, meta, raw = envelope.read(path, name=FORMAT, version=FORMAT_VERSION, what="mmopt synthetic-data file",
                                       caller=caller, writer="Synthetic.save", damaged=DAMAGED)
    return _decode(meta, raw, fail)


def _decode(meta: dict, raw: dict, fail) -> dict:
    """The Synthetic's fields from the parsed metadata and the arrays (removed from ``raw`` as they are used)."""
    syn = sm.entry(meta, "synthetic", dict, "metadata", fail)
    try:
        domain = Domain.from_json(sm.entry(syn, "domain", dict, "synthetic", fail))
    except (TypeError, ValueError) as exc:
        fail(f"records a domain that is not valid ({exc})")
    shape, d = tuple(domain.shape), len(domain.shape)
    method = sm.entry(syn, "method", str, "synthetic", fail)
    sampler = sm.entry(meta, "sampler", str, "metadata", fail)
    seed = sm.entry(syn, "seed", (int, type(None)), "synthetic", fail)
    if method not in ("mst", "aim") or sampler not in SAMPLERS:
        fail(f"records method {method!r:.20} and sampler {sampler!r:.20}, not one of ('mst', 'aim') and {SAMPLERS}")
    simulation = sm.entry(meta, "simulation", bool, "metadata", fail)
    # a seed is what makes a run a simulation: a file that paired them otherwise would hide which one it holds
    if not (simulation == (sampler == "numpy-seeded") == (seed is not None and seed >= 0)):
        fail(f"records sampler {sampler!r} with seed {seed!r:.20} and simulation {simulation!r}, which disagree "
             "(numpy-seeded runs, and only they, have a seed)")
    steps = tuple(_step(st, d, k, fail) for k, st in enumerate(sm.entry(syn, "steps", list, "synthetic", fail)))
    rho, delta, epsilon, budget = (sm.real(syn, key, "synthetic", fail) for key in ("rho", "delta", "epsilon",
                                                                                   "budget"))
    if not (0 < delta < 1 and epsilon >= 0 and sum(Fraction(st.rho) for st in steps) <= Fraction(rho) <= budget):
        fail(f"records a budget that does not add up (ρ = {rho!r}, budget {budget!r}, δ = {delta!r}, ε = "
             f"{epsilon!r}, the steps' ρ summing to {float(sum(Fraction(st.rho) for st in steps))!r})")
    model = sm.decode_model(sm.entry(meta, "model", dict, "metadata", fail), raw, shape, fail)
    details = _decode_details(sm.entry(meta, "details", dict, "metadata", fail), raw, model, fail)
    if raw:
        fail(f"holds arrays {sorted(raw)[:6]} that its model and details do not use")
    return {"method": method, "domain": domain, "model": model, "steps": steps, "rho": rho, "delta": delta,
            "epsilon": epsilon, "budget": budget, "sampler": sampler, "seed": seed, "details": details}


def _step(st, d: int, k: int, fail) -> Step:
    where = f"synthetic.steps[{k}]"
    label, kind = sm.entry(st, "label", str, where, fail), sm.entry(st, "kind", str, where, fail)
    rho, scale, sensitivity = (sm.real(st, key, where, fail) for key in ("rho", "scale", "sensitivity"))
    if kind not in ("gaussian", "exponential") or rho < 0 or scale <= 0 or sensitivity <= 0:
        fail(f"has a step {k} of kind {kind!r:.20}, ρ {rho!r}, scale {scale!r}, sensitivity {sensitivity!r}, "
             "not a Gaussian measurement's or an exponential mechanism's")
    return Step(label, kind, rho, scale, sm.attribute_sets(sm.entry(st, "sets", list, where, fail), d,
                                                            f"{where}.sets", fail), sensitivity)


def _decode_details(desc, raw: dict, model, fail) -> dict:
    keys = sm.entry(desc, "keys", list, "details", fail)
    plain = sm.entry(desc, "json", dict, "details", fail)
    stored = sm.entry(desc, "arrays", dict, "details", fail) if "arrays" in desc else {}
    same = sm.entry(desc, "same_as_model", list, "details", fail) if "same_as_model" in desc else []
    omitted = sm.entry(desc, "omitted", list, "details", fail)
    if not all(isinstance(k, str) for k in keys) or sorted(keys) != sorted([*plain, *stored, *omitted]) \
            or not set(same) <= set(plain) or len(set(keys)) != len(keys):
        fail("has details whose keys do not match what it stores")
    if same and not isinstance(model, sm.ResidualModel):
        fail(f"has details {same} said to be the model's estimates, but the model has none")
    out = {}
    for j, key in enumerate(keys):
        if key in same:
            out[key] = model.estimates
        elif key in stored:
            entry = stored[key]
            kind = entry.get("type") if isinstance(entry, dict) else None
            if kind not in ("ResidualEstimates", "Compression"):
                fail(f"has details '{key}' of unknown type {kind!r:.40}")
            decode = sm.decode_estimates if kind == "ResidualEstimates" else sm.decode_compression
            out[key] = decode(entry, raw, f"details_{j}", fail)
        elif key in plain:
            out[key] = _tuples(plain[key])
    return out
