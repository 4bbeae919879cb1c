"""Ledger entries: of finished releases (what OpenDP verified and the noise actually drawn), checks and times."""

from __future__ import annotations

import math
from datetime import UTC, datetime

from mmopt._base import opendp as _opendp
from mmopt._base.rounding import up
from mmopt.accounting import _zcdp as z
from mmopt.accounting._compose import Ledger
from mmopt.accounting._ledger import Spend
from mmopt.privacy import Privacy


def verified(pending: Spend, privacy: Privacy, out, composition: str) -> Spend:
    """The ledger entry of a finished release: OpenDP's verified loss and the ρ of the noise actually drawn."""
    loss = out.verified_loss
    if isinstance(loss, tuple):
        eps, delta = float(loss[0]), float(loss[1])
    elif loss is not None:
        eps, delta = float(loss), 0.0
    else:  # never for mmopt.release; the requested budget bounds the loss
        eps, delta = privacy.epsilon, privacy.delta
    gaussian = out.noise == "gaussian"
    multiplier = None
    if gaussian:
        # the sensitivity OpenDP charged on its lattice (mmopt._base.opendp.charged_sensitivity), what the release
        # was calibrated at; a Gaussian drawn on the default lattice is charged it too (≤ 2⁻³⁰ more, never less)
        charged = _opendp.charged_sensitivity(out.sensitivity) if out.sensitivity > 0 else 0.0
        rho = z.gaussian_rho(charged, out.noise_scale)
        multiplier = _down(float(out.noise_scale) / charged) if charged > 0 else None
    else:
        rho = z.pure_rho(eps) if composition == "zcdp" else None
        # b/Δ₁ with Δ₁ as charged on the Laplace lattice (n·2^k more): 1/ε of the ε OpenDP verified, where it did
        if out.sensitivity > 0:
            multiplier = _down(1.0 / eps) if loss is not None and eps > 0 else _down(out.noise_scale / out.sensitivity)
    what = f"{pending.what}, Δ={up(out.sensitivity)}, {'σ' if gaussian else 'b'}={up(out.noise_scale)}"  # (up: a
    # figure copied into another tool must not calibrate less noise than was drawn)
    noise = out.noise if multiplier and out.noise in ("gaussian", "laplace") else None
    return Spend(pending.label, what, eps, delta, rho, pending.time, "release", "spent", noise,
                 multiplier if noise else None)


def _down(multiplier: float) -> float:
    """A noise multiplier rounded down by one ulp: the division's rounding never favours the accounting."""
    return math.nextafter(multiplier, 0.0)


def name_of(obj) -> str:
    name = getattr(obj, "name", None)
    return name if isinstance(name, str) else f"{type(obj).__name__} of shape {getattr(obj, 'shape', '?')}"


def checked(ledger: Ledger, charge, caller: str) -> Ledger:
    """``ledger`` if ``charge`` fits in it, else the refusal (a ValueError stating what remains)."""
    ledger.refuse_unless_fits(charge, caller)
    return ledger


def now() -> str:
    """The time of an entry: UTC, to the second, ISO 8601."""
    return datetime.now(UTC).isoformat(timespec="seconds")
