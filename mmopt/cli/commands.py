"""The sub-commands of ``mmopt``: workloads, evaluate, optimize (release lives in :mod:`mmopt.cli.release`).

Each takes the parsed arguments and returns the exit code; errors propagate to :func:`mmopt.cli.main`, which
turns them into exit codes.

Every number printed comes from the library (``mmopt.evaluate``, ``mmopt.svd_bound``, ``mmopt.optimize``,
``mmopt.release``); nothing is recomputed here. ``release`` is the only command that touches data, and it
goes through OpenDP's vetted samplers (:func:`mmopt.release`), never the seeded simulation path.
"""

from __future__ import annotations

import math
import shlex
import sys

import mmopt
from mmopt._base.guards import log10_variance_factor
from mmopt.cli import output as out
from mmopt.cli._numbers import is_number
from mmopt.cli.spec import COMPOSITES, EBNF, FORMS, build_workload
from mmopt.cli.strategies import STRATEGY_FORMS, build_strategy, persistence, saved_file
from mmopt.structured import svd_bound as implicit_svd_bound
from mmopt.workload import ImplicitWorkload

__all__ = ["evaluate", "optimize", "parse_option", "workloads"]

def _emit(args, record: dict, text: str) -> None:
    if getattr(args, "out", None) and args.command != "release":
        out.write_record(args.out, record)
    if args.json:
        out.write_json(record)
    else:
        print(text)


def workloads(args) -> int:
    """List every workload spec form and strategy spec form, with an example each."""
    record = {"workloads": [{"form": f.pattern, "description": f.description, "example": f.example}
                            for f in FORMS.values()] +
                           [{"form": p, "description": d, "example": e} for p, d, e in COMPOSITES],
              "strategies": [{"form": p, "description": d, "example": e} for p, d, e in STRATEGY_FORMS],
              "grammar": EBNF}
    if args.json:
        out.write_json(record)
        return 0
    for title, rows in (("Workload specs (mmopt evaluate SPEC, mmopt optimize SPEC, mmopt release SPEC):",
                         record["workloads"]), ("Strategy specs (--strategy):", record["strategies"])):
        w1 = max(len(r["form"]) for r in rows)
        w2 = max(len(r["description"]) for r in rows)
        print(title)
        for r in rows:
            print(f"  {r['form']:<{w1}}  {r['description']:<{w2}}  e.g. {r['example']}")
        print()
    print("Workload spec grammar (EBNF; spaces between tokens are ignored):")
    print("\n".join("  " + line for line in EBNF.splitlines()))
    print("A spec that is a whole existing file path is read as a file. Quote specs with ( ) * in a shell.")
    return 0


def _privacy(args) -> mmopt.Privacy:
    return mmopt.Privacy(args.epsilon, args.delta)


def _saved(args, W):
    """The saved strategy file evaluate scores, read once (with its check against W), when --strategy is an
    existing FILE.npz; None otherwise (build_strategy reads the spec). Its recorded budget fills --epsilon and
    --delta where they are not given: optimize --save F under (ε, δ) then evaluate --strategy F scored it under
    ε = 1, δ = 0 (Laplace) unless the user repeated the flags, and with --epsilon alone under δ = 0 — another
    mechanism than the one it was made for."""
    return saved_file(args.strategy, W)


def _workload_info(W) -> dict:
    info = {"name": W.name, "domain_size": W.domain_size, "n_queries": W.n_queries}
    if isinstance(W, ImplicitWorkload):
        info["shape"] = list(W.shape)
    return info


def _evaluation(W, A, P) -> dict:
    """evaluate's report, the SVD bound at the same privacy, and their ratio (per query: finite for any m)."""
    report = mmopt.evaluate(W, A, P)
    record = out.record_of(report)
    if isinstance(W, ImplicitWorkload):
        b = implicit_svd_bound(W, P)
        bound, bound_exact, per_query = b.value, b.exact, b.value / W.n_queries
    else:
        bound, bound_exact = mmopt.svd_bound(W, P), True
        per_query = mmopt.svd_bound(W, P, per_query=True)
    ratio = report.mean_squared_error / per_query if per_query > 0 else float("inf")
    if not (math.isfinite(ratio) and ratio > 0) and per_query == per_query:
        # both figures past float64 at an extreme ε (1e-200 gave nan, 1e308 inf): the ratio does not depend on ε
        unit = implicit_svd_bound(W, None).value if isinstance(W, ImplicitWorkload) else mmopt.svd_bound(W, None)
        ratio = (10.0 ** (report.log10_total - math.log10(unit) - log10_variance_factor(P)) if unit > 0
                 else float("inf"))
    record.update(_release_noise(P))
    # not 'ratio': optimize's is its objective over its own lower bound (OptimizeResult.ratio), another number for
    # the same strategy (2.317 against this 2.494 on prefix:16; a helper's audit)
    record.update(svd_bound=bound, svd_bound_exact=bound_exact, ratio_to_svd_bound=ratio)
    return record


def _release_noise(P) -> dict:
    """The noise calibration of these figures, and the variance of the noise 'mmopt release' draws over theirs:
    evaluate's σ is the analytic Gaussian mechanism's (Privacy's), release's OpenDP's zCDP-calibrated one
    (mmopt.planning.calibration.variance_factor, an upper bound) — an auditor found evaluate's total 19 % below
    release's own figure at ε = 0.5, δ = 1e-5, with nothing said. None past OpenDP's range (ε > 10⁴)."""
    from mmopt.planning.calibration import MAX_EPSILON, variance_factor
    if P.delta == 0:  # release's b is d_in/ε, d_in at most Δ·(1 + 2·10⁻⁷): a ratio free of ε (taken at ε = 1)
        return {"calibration": "b = Δ/ε",
                "release_variance_ratio": variance_factor(1.0, 0.0, "release") / mmopt.Privacy(1.0).variance_factor}
    ratio = (variance_factor(P.epsilon, P.delta, "release") / P.variance_factor
             if P.epsilon <= MAX_EPSILON and 0 < P.variance_factor < math.inf else None)
    return {"calibration": f"{P.calibration} ('mmopt release' draws OpenDP's zCDP-calibrated σ: variance × "
                           "release_variance_ratio)", "release_variance_ratio": ratio}


def evaluate(args) -> int:
    if args.out:
        out.check_extension(args.out, (".json", ".csv"), "--out")
        out.check_writable(args.out, "--out", force=args.force)  # before the work: it was found after it
    W = build_workload(args.spec)
    saved = _saved(args, W)
    A = build_strategy(args.strategy, W) if saved is None else saved.strategy
    recorded = None if saved is None else saved.privacy
    if recorded is not None and args.epsilon is None and args.delta is None:
        P = recorded  # its calibration too
    else:  # a flag not given: the recorded budget's, else ε = 1, δ = 0
        eps = args.epsilon if args.epsilon is not None else getattr(recorded, "epsilon", 1.0)
        delta = args.delta if args.delta is not None else getattr(recorded, "delta", 0.0)
        calibration = getattr(recorded, "calibration", "analytic")
        if calibration != "analytic" and delta > 0 and eps > 1:  # theorem_5_22 holds for ε ≤ 1 only:
            # "Use calibration='analytic'" named a setting the CLI has no flag for (a helper's audit)
            print(f"mmopt: warning: the file's calibration '{calibration}' does not hold at ε = {eps:g}, δ = "
                  f"{delta:g}; evaluating with the analytic one.", file=sys.stderr, flush=True)
            calibration = "analytic"
        P = mmopt.Privacy(eps, delta, calibration=calibration)
        if saved is not None and recorded is None and args.epsilon is None and args.delta is None:
            # a file saved without a budget was evaluated at ε = 1, δ = 0 without a word (a helper's audit)
            print(f"mmopt: note: '{args.strategy.strip()}' records no privacy budget and none was given: evaluated "
                  "at ε = 1, δ = 0 (Laplace noise). Pass --epsilon (and --delta > 0 for Gaussian noise).",
                  file=sys.stderr, flush=True)
    if recorded is not None and recorded.noise != P.noise:  # release says so; evaluate was silent (a helper's audit)
        print(f"mmopt: warning: the strategy in '{args.strategy.strip()}' was optimised for {recorded.noise} noise "
              f"(δ = {recorded.delta:g}); this evaluation is of {P.noise} noise (δ = {P.delta:g}), for which it may be "
              "far from the best.", file=sys.stderr, flush=True)
    record = _evaluation(W, A, P)
    _emit(args, record, out.table(record.items(), f"Expected error of {record['strategy']} on {W.name}:"))
    return 0


def parse_option(text: str) -> tuple[str, object]:
    """'key=value' → (key, value) with value an int, float, bool (true/false) or string."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"The --option value must look like key=value (e.g. restarts=4). Got '{text}'.")
    low = raw.strip().lower()
    if low in ("true", "false"):
        return key.strip(), low == "true"
    if "_" in raw and is_number(raw):  # int() and float() read 1_0 as 10: a typo is as likely
        raise ValueError(f"The --option value '{text}' has a digit separator '_': write the number plainly "
                         "(e.g. restarts=10).")
    for kind in (int, float):
        try:
            return key.strip(), kind(raw)
        except ValueError:
            pass
    return key.strip(), raw



def _extra(extra) -> dict:
    """The JSON-representable entries of OptimizeResult.extra (others, e.g. strategy objects, are left out)."""
    clean = {}
    for k, v in dict(extra).items():
        try:
            clean[str(k)] = out.jsonable(v)
        except TypeError:
            continue
    return clean


def _without(record: dict, *keys: str) -> dict:
    return {k: val for k, val in record.items() if k not in keys and not k.startswith(tuple(f"{x}_" for x in keys))}


def _rows(A) -> int:
    """Measurements p of a strategy: implicit ones say it, dense ones by their matrix; the stream strategies
    (Toeplitz, weighted square root, p-Identity) held in O(n) are square, or n + p rows."""
    if isinstance(A, mmopt.Strategy):
        return int(A.matrix.shape[0])
    if getattr(A, "n_rows", None):
        return int(A.n_rows)
    return int(A.domain_size + getattr(A, "p", 0))  # never A.matrix: it would be n×n


def optimize(args) -> int:
    if args.out:
        out.check_extension(args.out, (".json", ".csv"), "--out")
        out.check_writable(args.out, "--out", force=args.force)  # a missing folder was found after the run
    if args.save:
        out.check_extension(args.save, (".npz",), "--save")
        out.check_writable(args.save, "--save", force=args.force)  # before the run, not after it
        save, _ = persistence()  # refused before a long run, not after
    if args.objective == "total" and args.target is not None:  # the target silently made it max_variance
        raise ValueError("--target sets a variance target for --objective max_variance; it was given with "
                         "--objective total. Drop one of them.")
    W = build_workload(args.spec)
    P = _privacy(args)
    if args.save and args.norm is not None and args.norm != P.sensitivity_norm:
        # mmopt.save refuses a strategy optimised in another norm than its budget's noise, and the command line
        # saves with its budget: this failed after the whole run (14 CPU s for all_range:16; a helper's audit)
        raise ValueError(f"--save stores the strategy with its budget ({P.noise} noise, Δ in {P.sensitivity_norm}), "
                         f"which --norm {args.norm} contradicts. Drop --norm (the budget picks the norm), or pass "
                         f"{'--delta' if args.norm == 'l2' else 'no --delta'} to match it.")
    options = {}
    for key, value in (parse_option(o) for o in args.option or ()):
        if key in options and options[key] != value:  # the last had won without a word (a newcomer's audit)
            raise ValueError(f"--option {key} is given twice ({options[key]!r} and {value!r}). Give it once.")
        options[key] = value
    initial = None if args.initial is None else build_strategy(args.initial, W)
    res = mmopt.optimize(W, privacy=P, method=args.method, seed=args.seed, norm=args.norm, tol=args.tol,
                         initial=initial, max_iterations=args.max_iterations, verbose=args.verbose,
                         options=options or None, budget=out.budget_arg(args.budget),
                         objective=args.objective, targets=args.target)  # (None: targets imply max_variance)
    A = res.strategy
    record = {"workload": _workload_info(W), "method": res.method, "status": res.status, "success": res.success,
              "solver": res.solver, "norm": res.norm, "objective": res.objective, "lower_bound": res.lower_bound,
              "gap": res.gap, "ratio": res.ratio, "iterations": res.iterations, "seconds": res.seconds,
              "objective_per_query": res.objective_per_query, "lower_bound_per_query": res.lower_bound_per_query,
              "message": res.message,
              "strategy": {"name": A.name, "rows": _rows(A),
                           "domain_size": A.domain_size, "implicit": not isinstance(A, mmopt.Strategy)},
              # the error at the budget; its bound and ratio are the lower_bound and ratio above (one ratio)
              "extra": _extra(res.extra), "evaluate": _without(_evaluation(W, A, P), "svd_bound", "ratio_to_svd_bound"),
              "saved": None}
    if args.save:
        save(args.save, res, workload=W, privacy=P, overwrite=bool(args.force))
        record["saved"] = args.save
    text = out.table([(k, v) for k, v in record.items() if k not in ("evaluate", "extra")],
                     f"optimize({W.name}, method={args.method!r}):")
    # objective and lower_bound are unit-noise figures (c = 1), beside an error at the budget: say how they relate
    figure = "max_variance" if res.extra.get("objective") == "max_variance" else "total_squared_error"
    # with --target the objective is the largest variance over the target (it said c·objective: 4.99 for 19.97)
    relation = (f"{figure} = c·objective·target with c = {P.variance_factor:.6g}, target = {args.target:g}"
                if args.target is not None else f"{figure} = c·objective with c = {P.variance_factor:.6g}")
    if res.norm != P.sensitivity_norm:  # --norm: the objective is in the other norm, the error in the budget's
        relation = (f"the objective is in {res.norm}, the error below in {P.sensitivity_norm} ({P.noise} noise), "
                    "so they are not c·objective apart")
    text += "\n\n" + out.table(record["evaluate"].items(), f"Its expected error at ε={P.epsilon:g}, δ={P.delta:g} "
                                f"(objective and lower_bound above are at unit noise; {relation}):")
    _emit(args, record, text)
    return 0


def plan(args) -> int:
    if args.alpha is not None and args.kind != "halfwidth":  # it was ignored, silently
        raise ValueError(f"--alpha is the level of --kind halfwidth's intervals; --kind {args.kind} has none. Drop "
                         "--alpha, or pass --kind halfwidth.")
    if args.out:  # before the search, which can take minutes: a missing folder was found after it
        out.check_extension(args.out, (".json", ".csv"), "--out")
        out.check_writable(args.out, "--out", force=args.force)
    if args.save:
        out.check_extension(args.save, (".npz",), "--save")
        out.check_writable(args.save, "--save", force=args.force)
        save, _ = persistence()
    W = build_workload(args.spec)
    alpha = 0.05 if args.alpha is None else args.alpha  # plan's default, recorded
    p = mmopt.plan(W, targets=args.target, kind=args.kind, alpha=args.alpha, delta=args.delta, tol=args.tol,
                   max_iterations=args.max_iterations, calibration=args.calibration)
    record = {"workload": _workload_info(W), "target": args.target, "kind": args.kind,
              "calibration": args.calibration,
              "alpha": alpha if args.kind == "halfwidth" else None, "delta": args.delta,
              "epsilon": p.epsilon, "epsilon_lower_bound": p.lower_bound, "ratio": p.ratio, "rho": p.rho,
              "rho_lower_bound": p.rho_lower_bound, "status": p.status, "strategy": p.strategy.name,
              "largest_variance": float(p.per_query_variance.max()), "variance_target": float(p.targets.max()),
              "message": p.result.message, "saved": None}
    if "× the proven lower bound" in p.result.message:  # two ratios, two units (a helper's audit): say which
        record["message"] += (f" (That ratio is of variances at unit privacy; 'ratio' {p.ratio:.6g} is ε over "
                              "epsilon_lower_bound.)")
    if args.save:
        save(args.save, p.result, workload=W, privacy=p.privacy, overwrite=bool(args.force))
        record["saved"] = args.save
    # the targets hold for the planned strategy at this ε, in full (a rounded-down ε missed them by ~1e-5): release
    # with another strategy (release's default) missed them silently
    delta = f" --delta {args.delta!r}" if args.delta else ""
    if args.calibration == "analytic" and args.delta:  # release's OpenDP σ is larger: at this ε the targets missed
        # (an auditor's probe: prefix:8, target 5 → variance 5.66 from the printed command), so no command is printed
        record["release_with"] = None
        record["release_note"] = ("the targets hold for the analytic Gaussian mechanism at this ε; 'mmopt release' "
                                  "draws OpenDP's larger σ and would miss them: plan with --calibration release "
                                  "(the default) for a release command")
    else:
        # a command that pastes into a shell: "(plan --save FILE.npz)" inside it was a syntax error (a newcomer's
        # audit), so without --save the note says how to get the file
        record["release_with"] = (f"mmopt release {shlex.quote(args.spec)} --data FILE --strategy "
                                  f"{shlex.quote(args.save) if args.save else 'FILE.npz'} "
                                  f"--epsilon {p.epsilon!r}{delta} --out answers.csv")
        if not args.save:
            record["release_note"] = "FILE.npz: plan again with --save FILE.npz (the planned strategy meets them)"
    shown = dict(record, epsilon=out.up(p.epsilon), rho=None if p.rho is None else out.up(p.rho))
    text = out.table(list(shown.items()), f"plan({W.name}, {args.kind} <= {args.target:g}):")
    _emit(args, record, text)
    return 0
