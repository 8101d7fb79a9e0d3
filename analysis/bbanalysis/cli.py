"""Command line: `python -m bbanalysis report RESULTS... --out DIR` (and `gantt`, `pareto`).

Exit codes (as bubblebench's): 0 success; 2 bad arguments, a missing path, or no results
files / no complete runs found (one line on stderr); 4 an I/O error writing the output.
"""
from __future__ import annotations

import argparse
import sys
import warnings

from . import __version__

PROG = "bbanalysis"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=f"python -m {PROG}",
        description="bubblebench results (HDF5) -> comparison tables and plots.")
    p.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    r = sub.add_parser("report", help="summary.csv, report.md and PNGs from results files",
                       description="Reads every complete run of the results files (folders are "
                       "searched for *.h5 recursively) and writes summary.csv (one row per "
                       "run), report.md (tables, PNGs embedded), bubble_vs_M.png, "
                       "peak_activation.png and gantt_<run>.png into --out; prints the bubble "
                       "table.")
    r.add_argument("results", nargs="+", metavar="RESULTS", help="results files or folders")
    r.add_argument("--out", required=True, metavar="DIR", help="output folder (created)")
    r.add_argument("--gantt", action="append", metavar="RUN_KEY",
                   help="draw the timeline of this run (repeatable), FILE:RUN_KEY where several "
                   "files hold the key; default: one per schedule (and sync) at the per-rank "
                   "configuration; 'none' for no timeline")
    r.add_argument("--gantt-iter", type=int, metavar="N",
                   help="timed iteration to draw (default: the one with the median makespan)")
    r.add_argument("-P", type=int, help="P of the per-rank memory plot and default timelines")
    r.add_argument("-M", type=int, help="M of the per-rank memory plot and default timelines")
    r.add_argument("--no-events", action="store_true",
                   help="skip recomputing the bubble fraction from every run's events")
    r.add_argument("--dpi", type=int, default=110, help="PNG resolution (default 110)")
    r.add_argument("--bubblebench", metavar="PATH",
                   help="bubblebench binary whose simulator draws the model line (uniform "
                   "action times) of schedules without a closed form, e.g. ZB and DualPipe "
                   "(default: the bubblebench Python module where importable, else "
                   "$BB_BUBBLEBENCH, bubblebench on PATH, or ../build/bubblebench)")

    g = sub.add_parser("gantt", help="the timeline of one run as a PNG")
    g.add_argument("results", nargs="+", metavar="RESULTS", help="results files or folders")
    g.add_argument("--run", required=True, metavar="RUN_KEY",
                   help="the run's key; FILE:RUN_KEY where several files hold it")
    g.add_argument("--iter", type=int, metavar="N", help="timed iteration (default: median)")
    g.add_argument("--out", required=True, metavar="FILE.png")
    g.add_argument("--dpi", type=int, default=110)

    pa = sub.add_parser("pareto", help="step time vs peak memory of `bubblebench advise` output",
                        description="Reads the JSON (or CSV) of `bubblebench advise` and draws "
                        "every simulated configuration: step time (time per sample when M x "
                        "micro-batch size varies) against peak memory per rank, the Pareto "
                        "front and the memory cap marked; prints the front.")
    pa.add_argument("advice", metavar="FILE", help="advise --format json (or csv) output")
    pa.add_argument("--out", required=True, metavar="FILE.png")
    pa.add_argument("--top", type=int, default=5, help="ranks to number (default 5)")
    pa.add_argument("--dpi", type=int, default=110)
    return p


def _pareto(a) -> int:
    from .advise import front_lines, load_advice, plot_pareto

    df = load_advice(a.advice)
    pp = plot_pareto(df, a.out, top=a.top, dpi=a.dpi)
    for line in front_lines(pp.front, pp.y):
        print(line)
    print(f"wrote {pp.path}: {pp.n_points} configurations, {len(pp.front)} on the Pareto front")
    return 0


def _report(a) -> int:
    from .loader import load_runs

    runs = load_runs(a.results)  # fails (exit 2) before matplotlib is even imported
    from .report import build_report, check_lines

    keys = a.gantt
    if keys is not None and [k.lower() for k in keys] == ["none"]:
        keys = []
    rep = build_report(runs, a.out, gantt_keys=keys, gantt_iter=a.gantt_iter, P=a.P, M=a.M,
                       events=not a.no_events, dpi=a.dpi, bubblebench=a.bubblebench)
    print(rep.terminal)
    print()
    for line in check_lines(rep.summary):
        print(line)
    print(f"\nwrote {len(rep.summary)} run(s) to {rep.out_dir}: "
          + ", ".join(p.name for p in rep.files))
    return 0


def _gantt(a) -> int:
    from .compare import add_bubble_comparison
    from .loader import load_events, load_runs
    from .plots import plot_gantt
    from .report import pick_run

    runs = load_runs(a.results)
    run = add_bubble_comparison(runs.loc[[pick_run(runs, a.run).name]]).iloc[0]
    g = plot_gantt(load_events(run), run, a.out, iteration=a.iter, dpi=a.dpi)
    print(f"wrote {g.path}: {run['run_key']} of {run['path']}, iteration {g.iteration}, "
          f"{g.n_bars} bars")
    return 0


def main(argv=None) -> int:
    from .loader import NoResultsError

    a = _parser().parse_args(argv)

    def show(message, category, filename, lineno, file=None, line=None):
        print(f"{PROG}: warning: {message}", file=sys.stderr)

    warnings.showwarning = show
    try:
        command = {"report": _report, "gantt": _gantt, "pareto": _pareto}[a.command]
        return command(a)
    except (NoResultsError, FileNotFoundError, KeyError, ValueError) as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"{PROG}: error: {msg}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 4
