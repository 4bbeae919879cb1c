"""Ledger entries: of finished releases (what OpenDP verified and the noise actually drawn), checks and times."""

from __future__ import annotations

from datetime import UTC, datetime

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
    if gaussian:
        rho = z.gaussian_rho(out.sensitivity, out.noise_scale)
    else:
        rho = z.pure_rho(eps) if composition == "zcdp" else None
    what = f"{pending.what}, Δ={out.sensitivity:.6g}, {'σ' if gaussian else 'b'}={out.noise_scale:.6g}"
    multiplier = float(out.noise_scale) / float(out.sensitivity) if out.sensitivity > 0 else None
    noise = out.noise if multiplier and out.noise in ("gaussian", "laplace") else None
    return Spend(pending.label, what, eps, delta, rho, pending.time, "release", "spent", noise,
                 multiplier if noise else None)


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
