"""The accountant for people: a one-line repr and a summary with one line per spend."""

from __future__ import annotations

import math

from mmopt.accounting._compose import Ledger
from mmopt.accounting._ledger import budget_text, fmt, fmt_down, fmt_up


def one_line(ledger: Ledger) -> str:
    n = len(ledger.spends)
    return (f"Accountant({ledger.composition}: total ε={fmt(ledger.total.epsilon)}, δ={fmt(ledger.total.delta)}; "
            f"spent {budget_text(ledger.spent(), fmt_up)} in {n} spend{'' if n == 1 else 's'}; remaining "
            f"{budget_text(ledger.remaining(), fmt_down)})")  # spent rounded up, what remains down


def summary(ledger: Ledger) -> str:
    zcdp = ledger.composition == "zcdp"
    spent, left, n = ledger.spent(), ledger.remaining(), len(ledger.spends)
    rule = {"zcdp": "zCDP composition (ρ adds; converted to (ε, δ) by OpenDP)",
            "pld": "PLD composition (privacy loss distributions by dp-accounting; ε at the total's δ)"}
    lines = ["Accountant, " + rule.get(ledger.composition, "basic composition (ε and δ add)"),
             f"  total      ε={fmt(ledger.total.epsilon)}, δ={fmt(ledger.total.delta)}"
             + (f" (ρ ≤ {fmt_down(ledger.rho_cap())})" if zcdp else ""),
             f"  spent      {budget_text(spent, fmt_up)} in {n} spend{'' if n == 1 else 's'}"]
    # what remains rounded down, what was spent up: to the nearest, 35 of 60 random zCDP ledgers printed a remaining
    # ρ or ε that can_spend refused, and the Laplace ε 5 of 152 (a helper's audit)
    if zcdp:
        lines.append(f"  remaining  ρ={fmt_down(left.rho)}: one Gaussian release at ε={fmt_down(left.epsilon)}, "
                     f"δ={fmt(left.delta)}, or Laplace at ε={fmt_down(math.sqrt(2 * left.rho))}")
    else:
        lines.append(f"  remaining  {budget_text(left, fmt_down)}")
    if ledger.over():
        lines.append("  OVER BUDGET: the ledger records more than the total (was it edited by hand?).")
    if any(s.status == "pending" for s in ledger.spends):
        lines.append("  pending: a release was interrupted after its entry was written; it counts in full.")
    rows = [("#", "label", "ε", "δ", "ρ", "source", "status", "what", "time (UTC)")]
    rows += [(str(k), s.label, fmt_up(s.epsilon), fmt_up(s.delta), fmt_up(s.rho), s.source, s.status, s.what, s.time)
             for k, s in enumerate(ledger.spends, 1)]
    if n:
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(line.rstrip() for line in lines)
