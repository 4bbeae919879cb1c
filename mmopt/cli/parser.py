"""The ``mmopt`` command line's argument parser: every sub-command, its options, and the examples its --help
shows (:func:`build_parser`; :func:`mmopt.cli.main` runs it)."""

from __future__ import annotations

import argparse
import re

import mmopt
from mmopt.cli import commands, release_sql
from mmopt.cli import synth as synth_cli
from mmopt.cli._numbers import integer, number
from mmopt.optimize import METHODS, MULTIDIM_METHODS, TOEPLITZ_METHODS

__all__ = ["build_parser"]

_RAW = argparse.RawDescriptionHelpFormatter
_EXAMPLES = {
    None: """examples:
  mmopt workloads                                    # every workload and strategy spec, with examples
  mmopt evaluate all_range:64 --strategy H2          # expected error of H2 on all ranges, ε = 1
  mmopt optimize prefix:64 --method min_error --save best.npz
  mmopt evaluate prefix:64 --strategy best.npz --epsilon 0.5 --json
  mmopt release prefix:64 --data counts.csv --epsilon 1 --out answers.csv""",
    "workloads": """examples:
  mmopt workloads
  mmopt workloads --json""",
    "evaluate": """examples:
  mmopt evaluate all_range:256 --strategy H2 --epsilon 0.5
  mmopt evaluate 'kron(prefix:50,identity:100)' --strategy 'kron(H2,identity)' --json
  mmopt evaluate sf1 --epsilon 1 --delta 1e-6 --out sf1_identity.csv
  mmopt evaluate 'stack(2*prefix:8,all_range:8)' --strategy wavelet
  mmopt evaluate prefix:64 --strategy best.npz        # saved by 'mmopt optimize --save', at its recorded budget""",
    "optimize": """examples:
  mmopt optimize all_range:64                                 # auto, for Laplace noise (ε-DP, --delta 0)
  mmopt optimize all_range:64 --epsilon 1 --delta 1e-6        # auto, for Gaussian noise ((ε,δ)-DP)
  mmopt optimize prefix:128 --method min_error --seed 1 --option restarts=4 --verbose
  mmopt optimize 'marginals:4x4x4x4:k=2' --method auto --json --out result.json
  mmopt optimize all_range:16 --method min_error --save best16.npz
  mmopt optimize all_range:16 --method min_sensitivity --initial best16.npz  # Program 5.3: small n (~10 s at 16)
  mmopt optimize all_range:64 --delta 1e-6 --objective max_variance  # the largest variance, certified""",
    "plan": """examples:
  mmopt plan prefix:64 --target 5 --kind se --delta 1e-9       # every prefix sum within standard error 5
  mmopt plan all_range:32 --target 10 --kind halfwidth --alpha 0.05 --delta 1e-6 --json
  mmopt plan all_range:32 --target 25                           # variances, Laplace noise (ε-DP)""",
    "release": """examples:
  mmopt release prefix:64 --data counts.npy --epsilon 1 --strategy H2 --out answers.csv
  mmopt release sf1 --data sf1.npy --epsilon 1 --out sf1.parquet --estimate xhat.npy
  mmopt release all_range:32 --data counts.csv --epsilon 0.5 --delta 1e-6 --reconstruct projection \\
      --out answers.npy --json
  mmopt release ranges_2d:128 --data x.npy --epsilon 1 --strategy 'kron(H2,H2)' --estimate xhat.npy
  mmopt release --records people.parquet --domain domain.json --workload 'marginals:k=2' --epsilon 1 \\
      --delta 1e-9 --out marginals.csv
  mmopt release --sql "SELECT state, sex, COUNT(*) FROM people GROUP BY ROLLUP(state, sex)" \\
      --records people.parquet --domain domain.json --epsilon 1 --delta 1e-9 --alpha 0.05 --out counts.csv
The data file holds the true histogram x (counts >= 0, one per cell; C order for a product domain). Noise
comes from OpenDP's vetted samplers with a verified (ε, δ) guarantee (mmopt.release; needs opendp).
--out FILE.csv / FILE.parquet: one row per query (its labels, answer, standard_error; needs pyarrow, the
'tables' extra); FILE.npy: the bare vector W x̂. A table of more than 10,000,000 rows needs --allow-large-output.
With --records FILE --domain DOMAIN.json --workload 'marginals:...', the marginals are counted from the records
(never the N-cell histogram) and released by the best strategy found for the noise (the optimal residual
strategy under Gaussian noise; under Laplace noise the best of weighted marginals, each marginal once and the
residual strategy); --out FILE.csv/.parquet gets one row per marginal cell (marginal, attribute labels,
estimate, std_error). --alpha 0.05 adds exact 95% intervals (lower, upper) to either table.""",
    "synth": """examples:
  mmopt synth --records people.parquet --domain domain.json --workload 'marginals:k=3' --epsilon 1 \\
      --out synth.parquet
  mmopt synth --records people.csv --domain domain.json --method mst --epsilon 1 --delta 1e-9 --out synth.csv
  mmopt synth --records people.csv --domain domain.json --epsilon 0.5 --out synth.csv \\
      --ledger budget.json --ledger-total 2,1e-6
AIM (default; McKenna et al. 2022) or MST (McKenna, Miklau & Sheldon 2021) on mmopt's residual measurements
(mmopt.synth), spending the budget as ρ-zCDP with OpenDP's samplers. --out gets as many synthetic rows as the
noisy number of records (--rows N for another number), each column labelled by the domain: categories, and for
binned attributes a number in each bin, its left edge where finite (a number the domain bins again: the file can
be read back as records), or with --bins labels its label '[a, b)' (for reading only). --ledger spends the
run from a privacy ledger shared with 'mmopt release' (one spend of --epsilon, --delta).""",
}


def _privacy_args(p: argparse.ArgumentParser, required: bool = False, *, saved: bool = False) -> None:
    """--epsilon/--delta; ``saved``: when neither is given, a saved strategy's recorded budget (evaluate), so
    that 'optimize --save F' then 'evaluate --strategy F' score it under the budget it was made for."""
    tail = "; a flag not given is taken from a FILE.npz strategy's recorded budget" if saved else ""
    p.add_argument("--epsilon", "-e", type=number, required=required, default=None if required or saved else 1.0,
                   help="privacy budget ε > 0" + ("" if required else f" (default 1{tail})"))
    # release (required): None until read, so that a plan file's δ > 0 is not released as Laplace noise unasked
    p.add_argument("--delta", "-d", type=number, default=None if saved or required else 0.0,
                   help=f"δ in [0, 1): 0 = Laplace noise (ε-DP), > 0 = Gaussian noise ((ε,δ)-DP) (default 0{tail})")


def _output_args(p: argparse.ArgumentParser, *, force: bool = True) -> None:
    p.add_argument("--json", action="store_true", help="print JSON with every number instead of a table")
    p.add_argument("--out", "-o", metavar="FILE", help="also write the result to FILE (.json or .csv)")
    if force:
        p.add_argument("--force", action="store_true", help="overwrite an existing --out file")


def _ledger_args(p: argparse.ArgumentParser, spends: str) -> None:
    """--ledger, --ledger-total and --composition (:mod:`mmopt.cli.ledger`); ``spends`` says how the command spends."""
    p.add_argument("--ledger", metavar="FILE.json", help=f"spend from this privacy ledger (mmopt.Accountant): {spends}")
    p.add_argument("--ledger-total", metavar="EPS[,DELTA]",
                   help="with --ledger, for a ledger file that does not exist yet: its total budget")
    p.add_argument("--composition", choices=("basic", "zcdp", "pld"), default=None,
                   help="with --ledger-total: how the new ledger composes spends (default basic; pld, the tightest "
                        "for several Gaussian releases, needs mmopt[accounting])")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mmopt", formatter_class=_RAW, epilog=_EXAMPLES[None],
        description="The matrix mechanism (Li et al., PODS 2010): exact error, optimised strategies, private "
                    "release.\nSPEC names a workload, e.g. prefix:64, all_range:256, 'kron(prefix:50,identity:100)', "
                    "sf1; see 'mmopt workloads'.")
    parser.add_argument("--version", action="version", version=f"mmopt {mmopt.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def add(name: str, help_: str, fn) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_, epilog=_EXAMPLES[name], formatter_class=_RAW)
        p.set_defaults(func=fn)
        return p

    p = add("workloads", "list the workload and strategy specs, with a description and an example each",
            commands.workloads)
    p.add_argument("--json", action="store_true", help="print the list as JSON")

    p = add("evaluate", "the exact expected error of a strategy on a workload, the SVD lower bound and their ratio",
            commands.evaluate)
    p.add_argument("spec", metavar="SPEC", help="the workload (see 'mmopt workloads')")
    p.add_argument("--strategy", "-s", default="identity",
                   help="identity (default), hierarchical[:B] / H2, wavelet, kron(S, ...), FILE.npz (saved), FILE.npy")
    _privacy_args(p, saved=True)
    _output_args(p)

    methods = ", ".join(m for m in (*METHODS, *MULTIDIM_METHODS) if m != "auto")  # auto last, after the stream ones
    stream = ", ".join(TOEPLITZ_METHODS)
    p = add("optimize", "find a strategy for a workload (mmopt.optimize) and report its expected error",
            commands.optimize)
    p.add_argument("spec", metavar="SPEC", help="the workload (see 'mmopt workloads')")
    p.add_argument("--method", "-m", default="auto",
                   help=f"one of {methods}; for prefix sums and all ranges also {stream}; or auto (the default: "
                        "the best of every method that applies and takes seconds)")
    p.add_argument("--seed", type=integer, default=0,
                   help="seed of the random restarts (default 0: reproducible); a method that draws nothing "
                        "(identity, hierarchical, wavelet, the certified optima, …) reads none, as mmopt.optimize")
    p.add_argument("--budget", default=None, metavar="fast|default|thorough|SECONDS",
                   help="with --method auto: the CPU seconds its candidates may be expected to take (fast 5, default "
                        "60, thorough 600, or a number); what does not fit is skipped, and the report says why")
    _privacy_args(p)
    p.add_argument("--norm", choices=("l1", "l2"), default=None,
                   help="expert override of the objective's sensitivity norm (default: the budget's: l1 for Laplace "
                        "noise, --delta 0; l2 for Gaussian noise, --delta > 0)")
    p.add_argument("--max-iterations", type=integer, default=None, help="the method's iteration budget")
    p.add_argument("--tol", type=number, default=None, help="the method's convergence tolerance, in (0, 1)")
    p.add_argument("--initial", metavar="STRATEGY",
                   help="a strategy spec (as for evaluate --strategy): min_error's warm start, min_sensitivity's input")
    p.add_argument("--option", action="append", metavar="KEY=VALUE",
                   help="a method option, repeatable (e.g. restarts=4, engine=local, polish=false)")
    p.add_argument("--save", metavar="FILE.npz", help="save the strategy (mmopt.save) with the workload and privacy")
    p.add_argument("--force", action="store_true", help="overwrite an existing --save or --out file")
    talk = p.add_mutually_exclusive_group()
    talk.add_argument("--verbose", "-v", dest="verbose", action="store_const", const=True, default=None,
                      help="print progress to stderr from the start (default: once a run passes 10 s)")
    talk.add_argument("--quiet", "-q", dest="verbose", action="store_const", const=False,
                      help="print no progress")
    p.add_argument("--objective", choices=("total", "max_variance"), default=None,
                   help="what is minimised: the total squared error (default) or the largest single-query variance "
                        "(a certified minimax search on dense workloads up to 4,096 cells)")
    p.add_argument("--target", type=number, default=None,
                   help="minimise the largest variance / TARGET (one for every query); implies --objective "
                        "max_variance, as mmopt.optimize(targets=...)")
    _output_args(p, force=False)

    p = add("plan", "the smallest budget at which every query meets an accuracy target (mmopt.plan)", commands.plan)
    p.add_argument("spec", metavar="SPEC", help="the workload (see 'mmopt workloads'; dense up to 4,096 cells, "
                   "products, marginals, census workloads)")
    p.add_argument("--target", type=number, required=True, help="every query's target, in the unit --kind names")
    p.add_argument("--kind", choices=("variance", "se", "halfwidth"), default="variance",
                   help="the target is a variance (default), a standard error, or an interval half-width at --alpha")
    p.add_argument("--alpha", type=number, default=None,
                   help="with --kind halfwidth: 1 − the interval's level (default 0.05)")
    p.add_argument("--delta", "-d", type=number, default=0.0,
                   help="δ in [0, 1): 0 = Laplace noise (ε-DP), > 0 = Gaussian noise ((ε,δ)-DP) (default 0)")
    p.add_argument("--max-iterations", type=integer, default=None, help="the max-variance search's L2 solves at most")
    p.add_argument("--tol", type=number, default=None, help="the max-variance search's relative gap, in (0, 1)")
    p.add_argument("--calibration", choices=("release", "analytic"), default="release",
                   help="the noise the targets hold for: what 'mmopt release' draws (OpenDP; default) or the "
                        "analytic Gaussian mechanism")
    p.add_argument("--save", metavar="FILE.npz",
                   help="save the planned strategy (mmopt.save) with the workload and the planned budget, for "
                        "'mmopt release --strategy FILE.npz': the targets hold for that strategy only")
    _output_args(p)

    p = add("release", "answer a workload on real data with OpenDP noise (mmopt.release)", release_sql.dispatch)
    p.add_argument("spec", metavar="SPEC", nargs="?", help="the workload (see 'mmopt workloads'); not with --records")
    p.add_argument("--data", metavar="FILE", help="the true histogram x, .npy or .csv")
    p.add_argument("--records", metavar="FILE", help="instead of SPEC and --data: a table of records (.parquet, .csv, "
                   "or a folder of Parquet files) whose marginals are released (mmopt.records.release_marginals)")
    p.add_argument("--domain", metavar="DOMAIN.json", help="with --records: the public domain (attribute names, "
                   "categories or bin edges; records outside it are dropped)")
    p.add_argument("--workload", metavar="WORKLOAD", help="with --records: 'marginals:k=2' (all 2-way marginals), "
                   "'marginals:k<=2' (every 1- and 2-way marginal) or 'marginals:A*B,C' (named attribute sets)")
    p.add_argument("--sql", metavar="QUERY", help="with --records and --domain, instead of --workload: a read-only "
                   "'SELECT cols, COUNT(*) FROM t GROUP BY ... | GROUPING SETS | ROLLUP | CUBE' query (mmopt.sql; "
                   "--records may also be a .duckdb file holding table t; needs sqlglot)")
    _privacy_args(p, required=True)
    p.add_argument("--strategy", "-s", default="auto",
                   help="as for evaluate, or auto (the default): mmopt.optimize's best strategy for this budget "
                        "(on the workload alone, no data), within --budget")
    p.add_argument("--budget", default=None, metavar="fast|default|thorough|SECONDS",
                   help="with --strategy auto: the CPU seconds the search may plan to spend (default fast, 5 s)")
    p.add_argument("--reconstruct", choices=("least_squares", "nnls", "projection"), default="least_squares",
                   help="how x̂ is estimated from the noisy measurements (post-processing; default least_squares)")
    p.add_argument("--total", type=number, default=None, help="a public total Σx to impose (nnls, projection)")
    p.add_argument("--out", "-o", metavar="FILE",
                   help="the answers: .csv or .parquet, a table with each query's labels, answer and standard error; "
                        ".npy, the bare vector W x̂")
    p.add_argument("--estimate", metavar="FILE",
                   help="the estimate x̂ (.npy or .csv); without --out, only x̂ is written (any workload size)")
    p.add_argument("--force", action="store_true", help="overwrite an existing --out or --estimate file (else "
                   "refused before any noise: a release's answers are not replaced by accident)")
    p.add_argument("--alpha", type=number, default=None, metavar="ALPHA",
                   help="with --out FILE.csv/.parquet: add columns lower and upper, each answer's exact 1 - ALPHA "
                        "interval (e.g. 0.05; under Laplace noise the exact quantile, not ± z·standard error)")
    p.add_argument("--allow-large-output", action="store_true",
                   help="write a --out table of more than 10,000,000 rows (about 1 GB of CSV per 10 million)")
    _ledger_args(p, "the release is refused before any noise if it does not fit, recorded as pending before the "
                    "draw and as verified after it")
    p.add_argument("--json", action="store_true", help="print the release report as JSON instead of a table")
    talk = p.add_mutually_exclusive_group()  # the release's progress line names --quiet: it must exist here too
    talk.add_argument("--verbose", "-v", dest="verbose", action="store_const", const=True, default=None,
                      help="print the release's progress to stderr from the start (default: once it passes 10 s)")
    talk.add_argument("--quiet", "-q", dest="verbose", action="store_const", const=False, help="print no progress")

    p = add("synth", "synthetic records from a table of records by AIM or MST (mmopt.synth)", synth_cli.synth)
    p.add_argument("--records", metavar="FILE", required=True, help="the records (.parquet, .csv, or a folder of "
                   "Parquet files)")
    p.add_argument("--domain", metavar="DOMAIN.json", required=True, help="the public domain (records outside it are "
                   "dropped)")
    p.add_argument("--method", choices=("aim", "mst"), default="aim", help="the algorithm (default aim)")
    p.add_argument("--workload", metavar="WORKLOAD", default=None,
                   help="AIM's workload: 'marginals:k=3' (default; k = d below 3 attributes), 'marginals:k<=2' or "
                        "'marginals:A*B,C'; with --method mst, MST scores its tree's edges by their gain on it "
                        "(default: the paper's score, better at small ε: the gain's choices are noisier)")
    p.add_argument("--epsilon", "-e", type=number, required=True, help="privacy budget ε > 0")
    p.add_argument("--delta", "-d", type=number, default=1e-9, help="δ in (0, 1) (default 1e-9)")
    p.add_argument("--rows", type=integer, default=None, help="synthetic rows (default: the noisy number of records)")
    p.add_argument("--bins", choices=("values", "labels"), default="values",
                   help="binned attributes as each bin's left edge (values, default) or its label '[a, b)'")
    p.add_argument("--seed", type=integer, default=None,
                   help="numpy's seeded noise instead of OpenDP's (a reproducible simulation, not a release)")
    p.add_argument("--out", "-o", metavar="FILE", help="the synthetic rows, .parquet or .csv")
    p.add_argument("--save-model", metavar="FILE.npz", default=None,
                   help="also save the fitted model, which mmopt.synth.load reads back to draw more rows or read "
                        "marginals later at no privacy cost")
    p.add_argument("--force", action="store_true", help="overwrite an existing --out (or --save-model) file")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    _ledger_args(p, "the whole run is refused before the records are read if it does not fit, recorded as pending "
                    "before its first draw and as what it spent after it (one spend of --epsilon, --delta)")
    parser.commands = sub.choices  # name → sub-command parser: an unknown option is refused by its own parser
    for each in (parser, *sub.choices.values()):
        # "--epsilon -1e-3" is a (bad) value, not an option: Python 3.11's argparse knows -1 and -0.5 but not
        # -1e-3, and said "expected one argument" (a helper's audit); 3.13 takes any "-" before a digit
        each._negative_number_matcher = re.compile(r"^-\.?\d")
    return parser
