"""The noise a strategy was optimised for when no budget said it: ``optimize(W)`` minimises the L2 objective
(Gaussian noise) and ``optimize(W, method="auto")`` the L1 one (Laplace); the strategy then met the other noise in
:func:`mmopt.evaluate` or :func:`mmopt.release` without a word (all_range(64): RMSE 12.16 under Laplace noise
where ``auto`` for it gives 5.55 and the identity 6.63; a newcomer's audit). The result's strategy carries the norm
(a copy, so a shared construction is never marked), and those calls warn on a mismatch. A norm chosen through
``privacy`` or ``norm=`` is the user's own and is not marked: optimize warns there itself."""

from __future__ import annotations

import copy
import warnings

_ATTRIBUTE = "_mmopt_unstated_norm"
_EXAMPLE = {"l2": "all ranges on 64 cells, optimize(W)'s strategy has RMSE 12.16 under Laplace noise, "
                  "optimize(W, privacy=Privacy(1))'s 5.55",
            "l1": "all ranges on 64 cells, optimize(W, method='auto')'s strategy has RMSE 16.29 under Gaussian noise "
                  "at (1, 10⁻⁶), optimize(W)'s 9.73"}
_NOISE = {"l1": "Laplace noise (ε-DP, L1 sensitivity)", "l2": "Gaussian noise ((ε, δ)-DP, L2 sensitivity)"}


def marked(strategy, norm: str, *, attribute: str = _ATTRIBUTE):
    """A shallow copy of ``strategy`` that records ``norm`` as optimised for without a stated budget (or, with
    ``attribute``, another fact of its optimisation); the strategy itself where it cannot carry it (a type with
    slots)."""
    twin = copy.copy(strategy)
    try:
        object.__setattr__(twin, attribute, norm)
    except (AttributeError, TypeError):
        return strategy
    return twin


#: The participation schema a strategy was optimised under (optimize(..., participation=...), not single()):
#: evaluate and release, which take each record once, gave its error ~3× below the run's without a word (an audit).
PARTICIPATION = "_mmopt_participation"


def unstated_norm(strategy) -> str | None:
    """The norm ``strategy`` was marked with by :func:`marked`, or None (saved and restored by mmopt.persist)."""
    return getattr(strategy, "__dict__", {}).get(_ATTRIBUTE)


def participation_schema(strategy) -> str | None:
    """The participation schema ``strategy`` was marked with (:data:`PARTICIPATION`), or None."""
    return getattr(strategy, "__dict__", {}).get(PARTICIPATION)


def warn_mismatch(strategy, privacy, norm, caller: str) -> None:
    """Warn when ``privacy``'s noise (``norm`` absent) is not the one ``strategy`` was optimised for unasked, or
    when it was optimised for training under a participation schema."""
    if (schema := participation_schema(strategy)) is not None:
        shape = getattr(getattr(strategy, "matrix", None), "shape", None)
        # run_privacy takes a square causal C; objective="last_iterate" measures the one sum (a 1×n strategy), which
        # run_privacy refuses as not square: its sensitivity under the schema is the advice there (a helper's audit)
        how = ("mmopt.participation.noise.run_privacy(strategy, schema, noise_multiplier)"
               if shape is None or shape[0] == shape[1] else
               "the Gaussian mechanism at sensitivity² mmopt.participation.sensitivity_squared(strategy, schema)")
        warnings.warn(f"{caller}: strategy '{getattr(strategy, 'name', 'strategy')}' was optimised for private "
                      f"training under {schema} (a record in several steps); {caller} takes each record once, so its "
                      f"error and privacy are not the run's. For those use the optimize result's objective and {how}.",
                      UserWarning, stacklevel=3)
    own = unstated_norm(strategy)
    wanted = getattr(privacy, "sensitivity_norm", None)
    if own is None or wanted is None or norm is not None or own == wanted:
        return
    warnings.warn(f"{caller}: strategy '{getattr(strategy, 'name', 'strategy')}' was optimised with no privacy "
                  f"given, for {_NOISE[own]}; here it meets {_NOISE[wanted]}, where it can be far from the best "
                  f"(for example, on another workload: {_EXAMPLE[own]}). Optimise it with privacy={privacy!r}.",
                  UserWarning, stacklevel=3)
