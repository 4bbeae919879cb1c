"""The accountant's records: one :class:`Spend` per use of the data, exact sums, and the JSON ledger file.

Arithmetic. Every budget number is added as the decimal it is written as: its shortest ``repr``, which is also
the text the JSON ledger stores, read exactly as a :class:`fractions.Fraction`. Ten spends of ε = 0.1 then use
exactly ε = 1 (in float64 they sum to 0.9999999999999999, and OpenDP's own compositor, which rounds each
addition upwards, gets 1.0000000000000007 and refuses the tenth). Reading a float as its decimal moves it by
under half an ulp (1.1e-16 relative), far below any meaningful difference in privacy. Amounts handed back to
the caller (what remains) are rounded *down* (:func:`float_down`), so spending them is always accepted.

File. A ledger is a UTF-8 JSON object::

    {"format": "mmopt-privacy-ledger", "version": 2, "composition": "basic" | "zcdp" | "pld",
     "total": {"epsilon": ε, "delta": δ},
     "spends": [{"label", "what", "epsilon", "delta", "rho", "time", "source", "status",
                 "noise", "noise_multiplier"}, ...]}

(version 1, without ``noise`` and ``noise_multiplier``, is still read; this version writes 2, which older mmopt
refuses by its version number rather than misreading)
written atomically (a temporary file beside it, flushed and fsynced, then ``os.replace``): a crash leaves the
old ledger or the new one, never half of one. Reading refuses NaN and infinities, unknown or missing keys and
negative amounts, naming the file and the entry.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, fields
from fractions import Fraction
from pathlib import Path

from mmopt._base.rounding import down, up

FORMAT = "mmopt-privacy-ledger"
VERSION = 2
SOURCES = ("release", "declared")
STATUSES = ("spent", "pending")
NOISES = ("gaussian", "laplace")
COMPOSITIONS = ("basic", "zcdp", "pld")
_FIELDS_V1 = ("label", "what", "epsilon", "delta", "rho", "time", "source", "status")
_FIELDS = (*_FIELDS_V1, "noise", "noise_multiplier")


@dataclass(frozen=True)
class Spend:
    """One use of the data, as the ledger records it.

    Attributes
    ----------
    label : str
        The caller's name for it (default "release k" / "spend k").
    what : str
        What was run: for a release, the noise, strategy, workload, sensitivity and noise scale.
    epsilon, delta : float or None
        The (ε, δ)-DP guarantee of this spend on its own. For a release, OpenDP's verified loss
        (``out.verified_loss``), at most the requested budget. None for a spend declared by ρ alone.
    rho : float or None
        Its ρ-zCDP guarantee: Δ₂²/(2σ²) of the Gaussian noise actually drawn, ε²/2 for an ε-DP spend
        (Bun & Steinke 2016, Prop. 1.4). Always set in a zCDP session; for basic composition, set for
        Gaussian releases (for information) and None otherwise.
    time : str
        When it was recorded, ISO 8601 in UTC.
    source : {"release", "declared"}
        "release": noise drawn by :meth:`Accountant.release` through :func:`mmopt.release` (OpenDP's samplers,
        privacy verified by OpenDP's map), by a records release, or by a synthetic-data run (:mod:`mmopt.synth`:
        many draws, one entry of its (ε, δ) and ρ, no ``noise``). "declared": the caller's :meth:`Accountant.spend`;
        the accountant trusts the stated budget and cannot know how the noise was drawn.
    status : {"spent", "pending"}
        "pending": written before the noise was drawn and never confirmed (the run was interrupted): counted in
        full at the requested budget, which bounds what the release could have used.
    noise, noise_multiplier : str or None, float or None
        For a finished release: "gaussian" or "laplace" and σ/Δ₂ or b/Δ₁ of the noise actually drawn (what PLD
        composition uses, :mod:`mmopt.accounting._pld`); None otherwise.
    """

    label: str
    what: str
    epsilon: float | None
    delta: float | None
    rho: float | None
    time: str
    source: str = "declared"
    status: str = "spent"
    noise: str | None = None
    noise_multiplier: float | None = None


@dataclass(frozen=True)
class Budget:
    """An amount of privacy: (ε, δ), and ρ in a zCDP session.

    For :attr:`Accountant.spent` under zCDP, (ε, δ) is the conversion of ρ at the total's δ; for
    :attr:`Accountant.remaining` under zCDP, ε is what one more Gaussian release at that δ may use.
    """

    epsilon: float
    delta: float
    rho: float | None = None

    def __str__(self) -> str:
        return budget_text(self)


def fmt(x: float | None) -> str:
    """A budget number for people: six significant digits ("—" for None), to the nearest (a total as declared;
    spent and remaining figures take :func:`fmt_up` and :func:`fmt_down`)."""
    return "—" if x is None else f"{x:.6g}"


def fmt_up(x: float | None) -> str:
    """:func:`fmt` rounded up (what was spent: copied into another ledger, it must not record less)."""
    return "—" if x is None else up(x)


def fmt_down(x: float | None) -> str:
    """:func:`fmt` rounded down (what remains, a cap: the nearest was refused when spent; a helper's audit)."""
    return "—" if x is None else down(x)


def budget_text(b: Budget, rounding=fmt) -> str:
    """:class:`Budget`'s text with its figures rounded by ``rounding`` (:func:`fmt_up` for spent,
    :func:`fmt_down` for remaining)."""
    text = f"ε={rounding(b.epsilon)}, δ={rounding(b.delta)}"
    return text if b.rho is None else f"ρ={rounding(b.rho)} (ε={rounding(b.epsilon)} at δ={rounding(b.delta)})"


def exact(x: float) -> Fraction:
    """The decimal a float is written as (its shortest repr), as an exact rational."""
    return _exact(float(x))


@functools.lru_cache(maxsize=4096)
def _exact(x: float) -> Fraction:
    # a ledger's sums read every spend again at each spend, and its spends mostly repeat a few values: parsing
    # their repr was two thirds of a spend's time (1,000 spends of ε = 0.001: 9.1 CPU s)
    return Fraction(repr(x))


def float_down(q: Fraction) -> float:
    """The largest float whose decimal (:func:`exact`) is ≤ q (q ≥ 0)."""
    f = float(q)
    while f > 0 and exact(f) > q:
        f = math.nextafter(f, 0.0)
    return f


def float_up(q: Fraction) -> float:
    """The smallest float whose decimal (:func:`exact`) is ≥ q (q ≥ 0): a sum handed to OpenDP, never below."""
    f = float(q)
    while exact(f) < q:
        f = math.nextafter(f, math.inf)
    return f


def total_of(values) -> Fraction:
    """Σ of the decimals of ``values`` (None counts as 0), exactly."""
    return sum((exact(x) for x in values if x is not None), Fraction(0))


SPEND_FIELDS = fields(Spend)  # the file's keys, in its order


def _row(spend: Spend) -> str:
    """One spend's line of the file. The whole file is rewritten at every spend (atomically, under the lock): with
    asdict's deep copies and indent=2's pure-Python encoder that cost 66 ms a spend at 850 spends (2,000 spends 35
    CPU s); a spend is frozen, so its line is encoded once (json's C encoder) and reused."""
    return _encoded(id(spend), spend)


@functools.lru_cache(maxsize=1 << 16)
def _encoded(_identity: int, spend: Spend) -> str:
    # keyed by the object, not by equality: 0.0 == -0.0, and the file writes each float bit for bit (the cached key
    # holds the spend, so its id is not reused while cached)
    return json.dumps({f.name: getattr(spend, f.name) for f in SPEND_FIELDS}, ensure_ascii=False, allow_nan=False)


# -- the file ------------------------------------------------------------------------------------------------
def dumps(total_epsilon: float, total_delta: float, composition: str, spends) -> str:
    """The ledger as JSON text (floats written as their shortest repr, which reads back bit for bit)."""
    head = json.dumps({"format": FORMAT, "version": VERSION, "composition": composition,
                       "total": {"epsilon": total_epsilon, "delta": total_delta}},
                      indent=2, ensure_ascii=False, allow_nan=False)
    rows = [_row(s) for s in spends]
    body = "[]" if not rows else "[\n    " + ",\n    ".join(rows) + "\n  ]"
    return f'{head[:-2]},\n  "spends": {body}\n}}\n'


def loads(text: str, source: Path) -> tuple[float, float, str, tuple[Spend, ...]]:
    """(ε_total, δ_total, composition, spends) from ledger text; ValueError naming ``source`` and the problem."""
    def fail(what: str):
        raise ValueError(f"Accountant.load: the file '{source}' {what}. Restore the ledger from a copy; "
                         "editing it by hand can hide spent budget.")

    def refuse_constant(token):
        fail(f"holds the non-JSON number {token}")

    def refuse_duplicates(pairs):
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):  # json keeps the last value: a hidden earlier spend could be overwritten
            fail(f"repeats the key {next(k for k in keys if keys.count(k) > 1)!r} in one object")
        return dict(pairs)

    try:
        doc = json.loads(text, parse_constant=refuse_constant, object_pairs_hook=refuse_duplicates)
    except json.JSONDecodeError as exc:
        fail(f"is not valid JSON ({exc})")
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        fail(f"is not an mmopt privacy ledger (no \"format\": \"{FORMAT}\")")
    version = doc.get("version")
    if version not in (1, VERSION) or isinstance(version, bool):
        fail(f"has ledger version {version!r}; this mmopt reads versions 1 and {VERSION}")
    if set(doc) != {"format", "version", "composition", "total", "spends"}:
        fail(f"has keys {sorted(doc)}, not format, version, composition, total, spends")
    composition, total, spends = doc["composition"], doc["total"], doc["spends"]
    if composition not in COMPOSITIONS:
        fail(f"has composition {composition!r}, not one of {', '.join(map(repr, COMPOSITIONS))}")
    if not isinstance(total, dict) or set(total) != {"epsilon", "delta"}:
        fail("has a 'total' that is not {\"epsilon\": ..., \"delta\": ...}")
    eps, delta = (_number(total[k], f"total {k}", fail, optional=False) for k in ("epsilon", "delta"))
    if not isinstance(spends, list):
        fail("has 'spends' that is not a list")
    keys = _FIELDS_V1 if version == 1 else _FIELDS
    return eps, delta, composition, tuple(_spend(entry, i + 1, fail, keys) for i, entry in enumerate(spends))


def _spend(entry, k: int, fail, keys=_FIELDS) -> Spend:
    if not isinstance(entry, dict) or set(entry) != set(keys):
        fail(f"has spend #{k} without exactly the keys {', '.join(keys)}")
    for key in ("label", "what", "time"):
        if not isinstance(entry[key], str):
            fail(f"has spend #{k} whose {key!r} is not a string")
    if entry["source"] not in SOURCES or entry["status"] not in STATUSES:
        fail(f"has spend #{k} with source {entry['source']!r} / status {entry['status']!r}")
    eps, delta, rho = (_number(entry[key], f"spend #{k} {key}", fail) for key in ("epsilon", "delta", "rho"))
    if rho is None and (eps is None or delta is None):
        fail(f"has spend #{k} with neither (epsilon, delta) nor rho")
    noise, multiplier = entry.get("noise"), _number(entry.get("noise_multiplier"), f"spend #{k} noise_multiplier", fail)
    if noise not in (None, *NOISES) or (noise is None) != (multiplier is None) or multiplier == 0:
        fail(f"has spend #{k} with noise {noise!r} and noise_multiplier {multiplier!r} (both null, or a noise and a "
             "multiplier > 0)")
    if noise is not None and entry["source"] != "release":
        # only a release records the noise it drew; a declared entry given one was composed as that Gaussian (PLD),
        # not as the worst (ε, δ) mechanism: a declared (1, 10⁻⁷) read as ε 0.90, not 1.0 (a pending one is read as
        # its (ε, δ) whatever its noise, _pld.term)
        fail(f"has spend #{k} with noise {noise!r} but source {entry['source']!r} (only a release records its noise)")
    _check_agreement(k, eps, delta, rho, noise, multiplier, fail)
    return Spend(entry["label"], entry["what"], eps, delta, rho, entry["time"], entry["source"], entry["status"],
                 noise, multiplier)


#: How far an entry's fields may disagree (relative): they are written from one another to the last bits.
_AGREEMENT = 1e-9


def _check_agreement(k: int, eps, delta, rho, noise, multiplier, fail) -> None:
    """Refuse an entry whose fields contradict one another, each composition reading the one it needs: pure ε
    is ρ = ε²/2, a Laplace release's ε is 1/b, a Gaussian release's ρ is 1/(2m²) and its (ε, δ) holds for m.
    An edit of one field (m = 6.67 → 10⁶ made a PLD session's spend ε = 0.84 read as 0; ρ = 0.02 → 10⁻⁹ a zCDP
    one's 0.90 read as 9·10⁻⁵; m = 10⁻³²⁰ crashed every later call in a division) is refused on load."""
    def off(value: float) -> bool:
        return not abs(value - 1.0) <= _AGREEMENT

    if multiplier is not None and (multiplier * multiplier == 0 or not math.isfinite(1.0 / (multiplier * multiplier))):
        fail(f"has spend #{k} with noise_multiplier {multiplier!r}, too small for any noise drawn")
    pure = None if rho is None or eps is None or delta != 0 else eps * eps / 2  # 0 where ε² underflows: unchecked
    if pure and off(rho / pure):
        fail(f"has spend #{k} with epsilon {eps!r}, delta 0 and rho {rho!r}: pure ε-DP is ρ = ε²/2 = {eps * eps / 2!r}")
    if noise == "laplace" and eps is not None and off(eps * multiplier):
        fail(f"has spend #{k} with Laplace noise_multiplier {multiplier!r} but epsilon {eps!r}, not its 1/b")
    if noise == "gaussian":
        if rho is not None and off(2.0 * rho * multiplier * multiplier):
            fail(f"has spend #{k} with Gaussian noise_multiplier {multiplier!r} but rho {rho!r}, not its 1/(2m²)")
        from mmopt.privacy import gaussian_delta  # lazy: the ledger module stays free of scipy until needed
        if eps is not None and delta is not None and gaussian_delta(multiplier, eps) > delta * (1 + _AGREEMENT):
            fail(f"has spend #{k} with Gaussian noise_multiplier {multiplier!r}, which does not give "
                 f"(epsilon {eps!r}, delta {delta!r})")
        # and the other way: a release's ε is OpenDP's conversion of ρ = 1/(2m²), at most Bun & Steinke's
        # ρ + 2√(ρ log(1/δ)); m ×1000 with ρ /10⁶ (both edited, so they agree) had hidden half a PLD ledger's spend
        rho_m = 1.0 / (2.0 * multiplier * multiplier)
        if eps is not None and delta and eps > (rho_m + 2 * math.sqrt(rho_m * math.log(1 / delta))) * (1 + _AGREEMENT):
            fail(f"has spend #{k} with Gaussian noise_multiplier {multiplier!r}, far more noise than its "
                 f"(epsilon {eps!r}, delta {delta!r}) needs: the noise or rho was edited")


def _number(value, what: str, fail, *, optional: bool = True) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 2**1024:  # math.isfinite raised
        fail(f"has {what} = an integer of {value.bit_length()} bits, past the largest float")  # OverflowError
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        fail(f"has {what} = {value!r:.40}, not a finite number >= 0")
    return float(value)
