"""The accountant for people: a one-line repr and a summary with one line per spend."""

from __future__ import annotations

import math

from mmopt.accounting._compose import Ledger, down6
from mmopt.accounting._ledger import fmt


def one_line(ledger: Ledger) -> str:
    n = len(ledger.spends)
    return (f"Accountant({ledger.composition}: total ε={fmt(ledger.total.epsilon)}, δ={fmt(ledger.total.delta)}; "
            f"spent {ledger.spent()} in {n} spend{'' if n == 1 else 's'}; remaining {ledger.remaining()})")


def summary(ledger: Ledger) -> str:
    zcdp = ledger.composition == "zcdp"
    spent, left, n = ledger.spent(), ledger.remaining(), len(ledger.spends)
    rule = {"zcdp": "zCDP composition (ρ adds; converted to (ε, δ) by OpenDP)",
            "pld": "PLD composition (privacy loss distributions by dp-accounting; ε at the total's δ)"}
    lines = ["Accountant, " + rule.get(ledger.composition, "basic composition (ε and δ add)"),
             f"  total      ε={fmt(ledger.total.epsilon)}, δ={fmt(ledger.total.delta)}"
             + (f" (ρ ≤ {fmt(ledger.rho_cap())})" if zcdp else ""),
             f"  spent      {spent} in {n} spend{'' if n == 1 else 's'}"]
    if zcdp:
        lines.append(f"  remaining  ρ={fmt(left.rho)}: one Gaussian release at ε={fmt(left.epsilon)}, "
                     f"δ={fmt(left.delta)}, or Laplace at ε={fmt(down6(math.sqrt(2 * left.rho)))}")  # rounded down: the
        # nearest was refused when spent (5 of 152 random ledgers, a helper's audit)
    else:
        lines.append(f"  remaining  {left}")
    if ledger.over():
        lines.append("  OVER BUDGET: the ledger records more than the total (was it edited by hand?).")
    if any(s.status == "pending" for s in ledger.spends):
        lines.append("  pending: a release was interrupted after its entry was written; it counts in full.")
    rows = [("#", "label", "ε", "δ", "ρ", "source", "status", "what", "time (UTC)")]
    rows += [(str(k), s.label, fmt(s.epsilon), fmt(s.delta), fmt(s.rho), s.source, s.status, s.what, s.time)
             for k, s in enumerate(ledger.spends, 1)]
    if n:
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(line.rstrip() for line in lines)
