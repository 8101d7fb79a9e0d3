"""Measured vs simulated vs closed-form bubble fractions, and peak memory vs the model.

Each run's fractions are in one of the two views of design §4, set by its `sync` (column
`view`): with `--sync barrier` the *single step*, T = the step's makespan; with `--sync none`
the *steady state*, T = the period between the ends of successive steps (`period_s`).
bubble_fraction = 1 − busy/(P·T) per timed step, busy = Σ compute durations (F, B, W, BW,
FB) over all ranks; a run's value is the median over its steps. The file's measured, sim and
model values are all in the run's view.

`bubble_fraction_measured` in the file is the runtime's own figure; the events give an
independent one (`bubble_fraction_events`) that must match it. That is possible in the
single-step view only: every step's event times count from that step's own origin, so the
time between steps, and with it the period, is not in the events. Steady-state runs get NaN
there (n/a), not a single-step value that would not be comparable.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .loader import COMPUTE_KINDS, load_events, load_ranks
from .model import closed_form_column

#: Two fractions "agree" within this (the C++ model and ours are the same algebra).
CLOSED_FORM_RTOL = 1e-9
CLOSED_FORM_ATOL = 1e-12

COMPARISON_COLUMNS = [
    "schedule", "P", "M", "v", "sync", "view", "bubble_fraction_measured", "bubble_fraction_sim",
    "bubble_fraction_model", "bubble_fraction_closed_form", "diff_measured_sim",
    "diff_measured_model", "diff_model_closed_form", "closed_form_check",
]


#: The view of design §4 each `sync` mode measures.
VIEWS = {"barrier": "single step", "none": "steady state"}
SINGLE_STEP = VIEWS["barrier"]


def _agree(a, b):
    return np.isclose(a, b, rtol=CLOSED_FORM_RTOL, atol=CLOSED_FORM_ATOL)


def view_column(runs: pd.DataFrame) -> pd.Series:
    """The view of every run's fractions: "single step" (sync barrier), "steady state"
    (sync none), or "sync=<mode>?" for a mode this reader does not know."""
    sync = runs["sync"] if "sync" in runs.columns else pd.Series("barrier", index=runs.index)
    return pd.Series([VIEWS.get(str(x), f"sync={x}?") for x in sync], index=runs.index,
                     dtype=object, name="view")


def add_bubble_comparison(runs: pd.DataFrame) -> pd.DataFrame:
    """A copy of `runs` with the closed form and the differences added.

    bubble_fraction_closed_form: this package's closed form from P, M, v (model.py);
    diff_measured_sim = measured − sim; diff_measured_model = measured − model (file);
    diff_model_closed_form = model (file) − closed form (ours);
    closed_form_check: "ok" | "MISMATCH" | "no model" (a form exists, the file has NaN) |
    "n/a" (no closed form here); view: the view of the run's fractions (view_column). The
    closed forms hold in both views (design §4: rank 0 spans the whole step).
    """
    df = runs.copy()
    if "sync" not in df.columns:
        df["sync"] = "barrier"
    df["view"] = view_column(df)
    for c in ("bubble_fraction_measured", "bubble_fraction_sim", "bubble_fraction_model"):
        df[c] = pd.to_numeric(df[c], errors="coerce") if c in df.columns else np.nan
    cf = closed_form_column(df)
    df["bubble_fraction_closed_form"] = cf
    df["diff_measured_sim"] = df["bubble_fraction_measured"] - df["bubble_fraction_sim"]
    df["diff_measured_model"] = df["bubble_fraction_measured"] - df["bubble_fraction_model"]
    df["diff_model_closed_form"] = df["bubble_fraction_model"] - cf
    model = df["bubble_fraction_model"]
    check = np.where(cf.isna(), "n/a",
                     np.where(model.isna(), "no model",
                              np.where(_agree(model.fillna(-1), cf.fillna(-2)), "ok", "MISMATCH")))
    df["closed_form_check"] = check
    return df


def bubble_fraction_per_iteration(events: pd.DataFrame, runs: pd.DataFrame = None) -> pd.DataFrame:
    """Per (path, run_key, iter): makespan_s, busy_s, P and bubble_fraction from events.

    P is the run's attribute P when `runs` is given, else the number of ranks seen.
    """
    cols = ["path", "run_key", "iter", "makespan_s", "busy_s", "P", "bubble_fraction"]
    if "kind" not in events.columns:  # load_events() of no runs
        return pd.DataFrame(columns=cols)
    comp = events[events["kind"].isin(COMPUTE_KINDS)]
    if comp.empty:
        return pd.DataFrame(columns=cols)
    dur = comp["t_end_s"] - comp["t_start_s"]
    g = comp.assign(_d=dur).groupby(["path", "run_key", "iter"], sort=True)
    it = g.agg(t0=("t_start_s", "min"), t1=("t_end_s", "max"), busy_s=("_d", "sum"),
               ranks_seen=("rank", "nunique")).reset_index()
    it["makespan_s"] = it["t1"] - it["t0"]
    if runs is not None and "P" in runs.columns:
        p = runs[["path", "run_key", "P"]].drop_duplicates(["path", "run_key"])
        it = it.merge(p, on=["path", "run_key"], how="left")
        it["P"] = pd.to_numeric(it["P"], errors="coerce").fillna(it["ranks_seen"])
    else:
        it["P"] = it["ranks_seen"]
    with np.errstate(divide="ignore", invalid="ignore"):
        it["bubble_fraction"] = 1.0 - it["busy_s"] / (it["P"] * it["makespan_s"])
    return it[cols]


def add_events_bubble(runs: pd.DataFrame, events: pd.DataFrame = None) -> pd.DataFrame:
    """A copy of `runs` with bubble_fraction_events (median over iterations, from the events)
    and diff_events_measured = events − measured (file), for single-step runs; NaN for
    steady-state ones (module docstring). Loads the events when not given."""
    df = runs.copy()
    view = df["view"] if "view" in df.columns else view_column(df)
    single = df[view == SINGLE_STEP]
    if events is None:
        events = load_events(single)
    else:
        events = events.merge(single[["path", "run_key"]], on=["path", "run_key"])
    per = bubble_fraction_per_iteration(events, single)
    med = (per.groupby(["path", "run_key"])["bubble_fraction"].median()
           .rename("bubble_fraction_events").reset_index())
    df = df.drop(columns=[c for c in ("bubble_fraction_events", "diff_events_measured")
                          if c in df.columns])
    df = df.merge(med, on=["path", "run_key"], how="left")
    df["bubble_fraction_events"] = df["bubble_fraction_events"].astype(float)
    df["diff_events_measured"] = df["bubble_fraction_events"] - pd.to_numeric(
        df.get("bubble_fraction_measured", np.nan), errors="coerce")
    return df


def memory_comparison(ranks: pd.DataFrame, runs: pd.DataFrame = None) -> pd.DataFrame:
    """Per (run, rank): measured peak activation bytes vs the model's, with
    diff_activation_bytes = measured − model and activation_ratio = measured / model.
    With `runs`, the schedule, P, M, v columns are joined in."""
    df = ranks.copy()
    if "peak_activation_bytes_model" not in df.columns:
        df["peak_activation_bytes_model"] = np.nan
    meas = pd.to_numeric(df["peak_activation_bytes"], errors="coerce").astype(float)
    model = pd.to_numeric(df["peak_activation_bytes_model"], errors="coerce").astype(float)
    df["diff_activation_bytes"] = meas - model
    with np.errstate(divide="ignore", invalid="ignore"):
        df["activation_ratio"] = np.where(model > 0, meas / model, np.nan)
    if runs is not None:
        keep = [c for c in ("schedule", "P", "M", "v") if c in runs.columns]
        df = df.merge(runs[["path", "run_key"] + keep], on=["path", "run_key"], how="left")
        front = ["path", "run_key"] + keep
        df = df[front + [c for c in df.columns if c not in front]]
    return df


def memory_per_run(mem: pd.DataFrame) -> pd.DataFrame:
    """Per run: the largest measured and model peak activation bytes over ranks, the
    largest measured/model ratio, and the largest device peak and parameter bytes."""
    agg = {"peak_activation_bytes_max": ("peak_activation_bytes", "max"),
           "peak_activation_bytes_model_max": ("peak_activation_bytes_model", "max"),
           "activation_ratio_max": ("activation_ratio", "max")}
    if "peak_device_bytes" in mem.columns:
        agg["peak_device_bytes_max"] = ("peak_device_bytes", "max")
    if "param_bytes" in mem.columns:
        agg["param_bytes_max"] = ("param_bytes", "max")
    if mem.empty:
        return pd.DataFrame(columns=["path", "run_key"] + list(agg))
    return mem.groupby(["path", "run_key"], sort=False).agg(**agg).reset_index()


def summarize(runs: pd.DataFrame, *, events: bool = True, ranks: bool = True):
    """The summary table: one row per run, every column of `runs`, plus the comparison.

    Returns (summary, mem) where mem is the per-rank memory comparison (empty when
    ranks=False). With events=True the events of every run are read to add
    bubble_fraction_events.
    """
    df = add_bubble_comparison(runs)
    if events:
        df = add_events_bubble(df)
    mem = pd.DataFrame()
    if ranks:
        mem = memory_comparison(load_ranks(df), df)
        df = df.merge(memory_per_run(mem), on=["path", "run_key"], how="left")
    front = ["path", "run_key"] + COMPARISON_COLUMNS
    if events:
        front += ["bubble_fraction_events", "diff_events_measured"]
    front += [c for c in ("peak_activation_bytes_max", "peak_activation_bytes_model_max",
                          "activation_ratio_max") if c in df.columns]
    front = [c for c in front if c in df.columns]
    df = df[front + [c for c in df.columns if c not in front]]
    return df.reset_index(drop=True), mem
