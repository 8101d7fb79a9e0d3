"""bbanalysis: bubblebench results files (HDF5, design §6) → tables and plots.

    from bbanalysis import load_runs, load_events, summarize, plot_gantt
    runs = load_runs(["results/"])               # one row per complete run
    summary, mem = summarize(runs)               # + closed form, differences, memory
    ev = load_events(summary.iloc[0])            # events of one run
    plot_gantt(ev, summary.iloc[0], "gantt.png").n_bars

Command line: ``/usr/bin/python3 -m bbanalysis report RESULTS... --out DIR``.
The plotting and report functions import matplotlib on first use.
"""
from .compare import (add_bubble_comparison, add_events_bubble, bubble_fraction_per_iteration,
                      memory_comparison, memory_per_run, summarize)
from .loader import (COMPUTE_KINDS, NoResultsError, ResultsWarning, find_results_files,
                     load_events, load_ranks, load_runs, load_step_times)
from .model import closed_form_bubble_fraction, closed_form_column

__version__ = "0.1.0"

_LAZY = {
    "plot_bubble_vs_m": "plots", "plot_gantt": "plots", "plot_peak_activation": "plots",
    "plot_attribution": "plots",
    "build_report": "report",
}

__all__ = [
    "COMPUTE_KINDS", "NoResultsError", "ResultsWarning", "add_bubble_comparison",
    "add_events_bubble", "bubble_fraction_per_iteration", "build_report",
    "closed_form_bubble_fraction", "closed_form_column", "find_results_files", "load_events",
    "load_ranks", "load_runs", "load_step_times", "memory_comparison", "memory_per_run",
    "plot_attribution", "plot_bubble_vs_m", "plot_gantt", "plot_peak_activation", "summarize",
]


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
