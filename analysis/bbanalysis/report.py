"""The report: summary.csv, report.md with tables and the PNGs, and a terminal table."""
from __future__ import annotations

import datetime as _dt
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import pandas as pd

from .compare import SINGLE_STEP, summarize
from .loader import load_events, load_memory, load_ranks, load_runs
from .model import FORMULAS, find_bubblebench
from .plots import (ATTRIBUTION_TERMS, _order_schedules, attribution_columns, config_text,
                    plot_attribution, plot_bubble_vs_m, plot_gantt, plot_memory_over_time,
                    plot_peak_activation)

#: The columns that name a configuration, first in every table.
CONFIG_COLUMNS = [
    ("schedule", "schedule", None),
    ("P", "P", "int"),
    ("M", "M", "int"),
    ("v", "v", "int"),
    ("sync", "sync", None),
]
BUBBLE_TABLE = CONFIG_COLUMNS + [
    ("view", "view", None),
    ("measured", "bubble_fraction_measured", "frac"),
    ("sim", "bubble_fraction_sim", "frac"),
    ("model", "bubble_fraction_model", "frac"),
    ("closed form", "bubble_fraction_closed_form", "frac"),
    ("meas−sim", "diff_measured_sim", "diff"),
    ("meas−model", "diff_measured_model", "diff"),
    ("residual", "attribution_residual", "diff"),
    ("model vs closed form", "closed_form_check", None),
    ("from events", "bubble_fraction_events", "frac"),  # last: n/a in the steady-state view
]
#: "Where the bubble came from": the attribution terms of each run's median step.
ATTRIBUTION_TABLE = CONFIG_COLUMNS + [
    ("measured", "bubble_fraction_measured", "frac"),
] + [(t, f"attribution_{t}", "diff") for t in ATTRIBUTION_TERMS]
#: What the "from events" cell of a steady-state run says (compare.py: not computable).
EVENTS_NA = "n/a"
RUN_TABLE = CONFIG_COLUMNS + [
    ("step ms median", "step_time_s_median", "ms"),
    ("step ms min", "step_time_s_min", "ms"),
    ("step ms max", "step_time_s_max", "ms"),
    ("spread %", "step_spread", "pct"),
    ("period ms", "period_s", "ms"),
    ("t_F ms", "t_f_s", "ms"),
    ("t_B ms", "t_b_s", "ms"),
    ("t_W ms", "t_w_s", "ms"),
    ("iters", "n_steps", "int"),
    ("events", "n_events", "int"),
    ("check", "check", None),
    ("run key", "run_key", None),
]


def _fmt(x, kind) -> str:
    if isinstance(x, str) and kind is not None:  # a note in a numeric column, e.g. "n/a"
        return x
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    try:
        if pd.isna(x):
            return "–"
    except (TypeError, ValueError):
        pass
    if kind == "int":
        try:
            return str(int(x))
        except (TypeError, ValueError):
            return str(x)
    if kind == "frac":
        return f"{float(x):.4f}"
    if kind == "diff":
        x = float(x)
        return f"{0.0 if abs(x) < 5e-5 else x:+.4f}"
    if kind == "ms":
        return f"{float(x) * 1e3:.3f}"
    if kind == "pct":
        return f"{float(x) * 1e2:.1f}"
    if kind == "MiB":
        return f"{float(x) / 2 ** 20:.2f}"
    if kind == "ratio":
        return f"{float(x):.3f}"
    return str(x)


def _with_spread(df: pd.DataFrame) -> pd.DataFrame:
    """`step_spread`: (max − min) / median of a run's step times (summary.csv's columns)."""
    if not {"step_time_s_min", "step_time_s_max", "step_time_s_median"} <= set(df.columns):
        return df
    d = df.copy()
    med = pd.to_numeric(d["step_time_s_median"], errors="coerce")
    d["step_spread"] = (pd.to_numeric(d["step_time_s_max"], errors="coerce")
                        - pd.to_numeric(d["step_time_s_min"], errors="coerce")) / med.where(med > 0)
    return d


def table_rows(df: pd.DataFrame, spec) -> Tuple[List[str], List[List[str]]]:
    spec = [(h, c, k) for h, c, k in spec if c in df.columns]
    header = [h for h, _, _ in spec]
    rows = [[_fmt(r[c], k) for _, c, k in spec] for _, r in df.iterrows()]
    return header, rows


def bubble_table(summary: pd.DataFrame) -> Tuple[List[str], List[List[str]]]:
    """The bubble comparison, with "n/a" from the events for steady-state runs."""
    d = summary
    if "bubble_fraction_events" in d.columns and "view" in d.columns:
        d = d.copy()
        d["bubble_fraction_events"] = d["bubble_fraction_events"].astype(object).where(
            d["view"] == SINGLE_STEP, EVENTS_NA)
    return table_rows(d, BUBBLE_TABLE)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def esc(s):
        return str(s).replace("|", "\\|")
    num = re.compile(r"[-+]?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?|–")
    right = [bool(rows) and all(num.fullmatch(str(r[i])) for r in rows)
             for i in range(len(header))]
    out = ["| " + " | ".join(esc(h) for h in header) + " |",
           "|" + "|".join("---:" if r else "---" for r in right) + "|"]
    out += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    w = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h))
         for i, h in enumerate(header)]
    line = lambda cells: "  ".join(str(c).rjust(w[i]) if i else str(c).ljust(w[i])  # noqa
                                   for i, c in enumerate(cells))
    return "\n".join([line(header), line(["-" * x for x in w])] + [line(r) for r in rows])


def _sort_runs(df: pd.DataFrame) -> pd.DataFrame:
    order = {s: i for i, s in enumerate(_order_schedules(df["schedule"]))}
    key = df["schedule"].map(order)
    by = [c for c in ("_o", "P", "v", "sync", "M", "run_key") if c == "_o" or c in df.columns]
    return df.assign(_o=key).sort_values(by, kind="mergesort").drop(columns="_o")


def choose_config(runs: pd.DataFrame, P: Optional[int] = None, M: Optional[int] = None):
    """(P, M) shown per rank: the one with the most schedules, then the largest P, then M
    closest to 2P (GPipe's M peaks and 1F1B's P−s are both visible; the timeline stays
    readable). P or M given: restricted to it."""
    d = runs
    if P is not None:
        d = d[d["P"] == P]
    if M is not None:
        d = d[d["M"] == M]
    if d.empty:
        return None
    g = d.groupby(["P", "M"])["schedule"].nunique().reset_index(name="n")
    g["_d"] = (g["M"] - 2 * g["P"]).abs()
    g = g.sort_values(["n", "P", "_d", "M"], ascending=[False, False, True, True])
    return int(g["P"].iloc[0]), int(g["M"].iloc[0])


def runs_at(runs: pd.DataFrame, P: int, M: int, by=("schedule", "v")) -> pd.DataFrame:
    """One run per `by` (default: schedule and v) at P and M: the first found."""
    d = runs[(runs["P"] == P) & (runs["M"] == M)]
    by = [c for c in by if c in d.columns]
    return _sort_runs(d.drop_duplicates(by, keep="first"))


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", name).strip("._") or "run"


def _key_rows(runs: pd.DataFrame, key: str) -> pd.DataFrame:
    hit = runs[runs["run_key"] == key]
    if hit.empty and "attr_run_key" in runs.columns:  # through an index: task-<i>.KEY
        hit = runs[runs["attr_run_key"] == key]
    return hit


def find_runs(runs: pd.DataFrame, key: str) -> pd.DataFrame:
    """The runs that `key` names: KEY (a run_key, or the key of a run read through an index,
    where its name is task-<i>.KEY), or FILE:KEY, the one of that results file."""
    hit = _key_rows(runs, key)
    if hit.empty and ":" in key:  # run keys have no ':' (bb::sanitize_key)
        file, k = key.rsplit(":", 1)
        hit = _key_rows(runs, k)
        hit = hit[[p == file or os.path.realpath(p) == os.path.realpath(file)
                   for p in hit["path"]]]
    return hit


def pick_run(runs: pd.DataFrame, key: str) -> pd.Series:
    """The one run `key` names (find_runs). KeyError when there is none, or when several
    files hold that key (the same sweep run twice): it names them, to be picked as FILE:KEY."""
    hit = find_runs(runs, key)
    if hit.empty:
        raise KeyError(f"no run with key {key!r} (keys look like {runs['run_key'].iloc[0]!r})")
    if len(hit) > 1:
        raise KeyError(f"{len(hit)} runs have the key {key!r}; name one as FILE:KEY: "
                       + ", ".join(f"{p}:{k}" for p, k in zip(hit["path"], hit["run_key"])))
    return hit.iloc[0]


def file_tags(paths) -> dict:
    """A short name for each results file: its path below the files' common folder, without
    the suffix (a/sweep.h5, b/sweep.h5 -> a_sweep, b_sweep)."""
    paths = list(dict.fromkeys(str(p) for p in paths))
    full = [os.path.abspath(p) for p in paths]
    base = os.path.commonpath([os.path.dirname(f) for f in full]) if full else ""
    return {p: _safe(os.path.splitext(os.path.relpath(f, base))[0]) for p, f in zip(paths, full)}


def gantt_name(run: pd.Series, runs: pd.DataFrame, prefix: str = "gantt") -> str:
    """gantt_<run_key> (or PREFIX_<run_key>), and .<file> after it when other files of `runs`
    hold that key too."""
    name = f"{prefix}_{_safe(str(run['run_key']))}"
    same = runs.loc[runs["run_key"] == run["run_key"], "path"].astype(str)
    if same.nunique() > 1:
        name += "." + file_tags(runs["path"])[str(run["path"])]
    return name


@dataclass
class Report:
    out_dir: Path
    summary: pd.DataFrame
    memory: pd.DataFrame
    files: List[Path] = field(default_factory=list)  # everything written
    pngs: List[Path] = field(default_factory=list)
    gantt: list = field(default_factory=list)  # GanttPlot results
    terminal: str = ""
    config: Optional[Tuple[int, int]] = None
    attribution: Optional[object] = None  # AttributionPlot, when the runs have the terms
    memory_time: list = field(default_factory=list)  # (run, MemoryTimePlot) per run


def build_report(paths, out_dir, *, gantt_keys: Optional[Sequence[str]] = None,
                 gantt_iter: Optional[int] = None, P: Optional[int] = None,
                 M: Optional[int] = None, events: bool = True, dpi: int = 110,
                 bubblebench: Optional[str] = None) -> Report:
    """Loads every complete run under `paths` (files/folders, or a load_runs() DataFrame)
    and writes the report into `out_dir`.

    gantt_keys: runs to draw timelines of, as KEY or FILE:KEY (pick_run; a KEY that several
    files hold is a KeyError naming them); default: one per schedule, v and sync at the chosen
    (P, M); an empty list: none. Charts are gantt_name()'s, unique per run.
    bubblebench: the binary whose simulator draws the model line of schedules without a closed
    form (default: model.find_bubblebench(): the Python module where importable, else a binary).
    Raises NoResultsError / FileNotFoundError / KeyError."""
    runs = paths if isinstance(paths, pd.DataFrame) else load_runs(paths)
    picks = [pick_run(runs, k)[["path", "run_key"]] for k in (gantt_keys or [])]
    if (P is not None or M is not None) and choose_config(runs, P, M) is None:
        raise KeyError("no runs with" + (f" P={P}" if P is not None else "")
                       + (f" M={M}" if M is not None else ""))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary, mem = summarize(runs, events=events)
    summary = _sort_runs(summary).reset_index(drop=True)
    rep = Report(out, summary, mem)

    csv = out / "summary.csv"
    summary.to_csv(csv, index=False)
    rep.files.append(csv)

    # Figures.
    bub = plot_bubble_vs_m(summary, out / "bubble_vs_M.png", dpi=dpi,
                           bubblebench=find_bubblebench(bubblebench))
    rep.pngs.append(bub.path)
    cfg = choose_config(summary, P, M)
    rep.config = cfg
    chosen = runs_at(summary, *cfg) if cfg else summary.iloc[0:0]
    mem_plot = None
    if not mem.empty and not chosen.empty:
        sel = mem.merge(chosen[["path", "run_key"]], on=["path", "run_key"])
        if not sel.empty:
            suffix = f"P={cfg[0]}, M={cfg[1]}"
            c = config_text(chosen)
            mem_plot = plot_peak_activation(sel, out / "peak_activation.png",
                                            title_suffix=suffix + (f" ({c})" if c else ""),
                                            dpi=dpi)
            rep.pngs.append(mem_plot.path)
    if gantt_keys is None:  # one per schedule, v and sync
        gantt_runs = (runs_at(summary, *cfg, by=("schedule", "v", "sync")) if cfg
                      else summary.iloc[0:0])
    elif picks:
        gantt_runs = pd.DataFrame(picks).merge(summary, on=["path", "run_key"], how="left")
    else:
        gantt_runs = summary.iloc[0:0]
    used = set()
    for _, run in gantt_runs.iterrows():
        ev = load_events(run)
        if ev.empty:
            continue
        name = gantt_name(run, summary)
        while name in used:
            name += "_"
        used.add(name)
        g = plot_gantt(ev, run, out / f"{name}.png", iteration=gantt_iter, dpi=dpi)
        rep.gantt.append((run, g))
        rep.pngs.append(g.path)

    _memory_over_time(rep, summary, out, dpi)

    if attribution_columns(summary):
        rep.attribution = plot_attribution(summary, out / "attribution.png", dpi=dpi)
        rep.pngs.append(rep.attribution.path)

    # Tables.
    header, rows = bubble_table(summary)
    rep.terminal = text_table(header, rows)
    md = _markdown(rep, runs, header, rows, bub, mem_plot)
    path = out / "report.md"
    path.write_text(md, encoding="utf-8")
    rep.files.append(path)
    rep.files += rep.pngs
    return rep


def _memory_over_time(rep: Report, summary: pd.DataFrame, out: Path, dpi: int) -> None:
    """A memory-over-time chart per run that has the memory dataset."""
    used = set()
    for _, run in summary.iterrows():
        mem = load_memory(run)
        if mem.empty:
            continue
        name = gantt_name(run, summary, "memory")
        while name in used:
            name += "_"
        used.add(name)
        g = plot_memory_over_time(mem, load_ranks(run), run, out / f"{name}.png", dpi=dpi)
        rep.memory_time.append((run, g))
        rep.pngs.append(g.path)


def _memory_markdown(rep: Report) -> List[str]:
    if not rep.memory_time:
        return []
    md = ["## Memory over time", "",
          "Per run, each rank's live bytes over the last timed step, stacked by kind (weights, "
          "workspace, runtime in grey; activations blue; messages orange): the memory model "
          "(docs/memory.md) on the step's measured times. The red line is the measured peak "
          "(`peak_memory_bytes`: the allocator's high-water over the timed steps), the dashed "
          "black one the predicted peak (`peak_memory_bytes_model`: the model on the simulated "
          "step); both count every pool at its own high-water, so they may lie above the live "
          "curve.", ""]
    cols = [("rank", "rank", "int"), ("live peak MiB", "live_peak_bytes", "MiB"),
            ("measured peak MiB", "peak_memory_bytes", "MiB"),
            ("predicted peak MiB", "peak_memory_bytes_model", "MiB"),
            ("predicted/measured", "_ratio", "ratio")]
    for run, g in rep.memory_time:
        d = g.peaks.copy()
        d["_ratio"] = d["peak_memory_bytes_model"] / d["peak_memory_bytes"]
        h, r = table_rows(d, cols)
        md += [f"### {run['schedule']} P={int(run['P'])} M={int(run['M'])} "
               f"v={int(run['v']) if not pd.isna(run.get('v')) else 1}", "",
               f"`{run['run_key']}`", "", markdown_table(h, r), "",
               f"![memory over time {run['run_key']}]({g.path.name})", ""]
    return md


def check_lines(summary: pd.DataFrame) -> List[str]:
    """One line per cross-check: closed form vs the file's model; events vs measured."""
    lines = []
    if "view" in summary.columns:
        v = summary["view"].value_counts()
        lines.append("views: " + ", ".join(f"{int(n)} {k}" for k, n in v.items())
                     + " (single step: --sync barrier, T = makespan; steady state: "
                     "--sync none, T = period)")
    c = summary["closed_form_check"].value_counts()
    lines.append(f"closed form vs the file's model: {int(c.get('ok', 0))} agree, "
                 f"{int(c.get('MISMATCH', 0))} differ, {int(c.get('no model', 0))} without a "
                 f"model value, {int(c.get('n/a', 0))} with no P/M/v closed form")
    if "diff_events_measured" in summary.columns:
        d = summary["diff_events_measured"].abs()
        n_steady = int((summary["view"] != SINGLE_STEP).sum()) if "view" in summary else 0
        na = (f"; n/a for {n_steady} steady-state run(s): their events count each step from "
              "its own start, so the period is not in them") if n_steady else ""
        if d.notna().any():
            lines.append(f"bubble fraction from the events vs the runtime's measured value "
                         f"({int(d.notna().sum())} single-step run(s)): largest difference "
                         f"{d.max():.2e} ({summary.loc[d.idxmax(), 'run_key']}){na}")
        elif na:
            lines.append("bubble fraction from the events" + na)
    if "activation_ratio_max" in summary.columns:
        r = summary["activation_ratio_max"]
        if r.notna().any():
            lines.append(f"peak activation bytes measured/model: {r.min():.3f} … {r.max():.3f} "
                         "(largest over ranks, per run)")
    return lines


def _markdown(rep: Report, runs, header, rows, bub, mem_plot) -> str:
    s = rep.summary
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    md = ["# bubblebench results: measured vs simulated vs closed-form bubbles", ""]
    files = s.groupby("path", sort=False)
    md.append(f"{len(s)} complete run(s) from {files.ngroups} results file(s); "
              f"report written {now} by bbanalysis.")
    md.append("")
    fcols = [("file", "path", None), ("runs", "_n", "int"), ("git_sha", "file_git_sha", None),
             ("host", "file_hostname", None), ("created (UTC)", "file_created_utc", None),
             ("tool", "file_tool_version", None), ("SLURM job", "file_slurm_job_id", None)]
    fd = files.first().reset_index()
    fd["_n"] = files.size().to_numpy()
    h, r = table_rows(fd, fcols)
    md += [markdown_table(h, r), ""]
    md += ["## Bubble fraction", "",
           "Bubble fraction = idle / (P·T) (design §4), in the view each run measured "
           "(*view*, set by *sync*): **single step** with `--sync barrier`, T the step's "
           "makespan from the first compute start to the last compute end over all ranks; "
           "**steady state** with `--sync none`, T the period between the ends of "
           "successive steps run back to back (the optimizer step is inside it). A row's "
           "measured, sim and model values are all in its view. *measured*: the runtime's "
           "median over timed steps; *sim*: the simulator fed the run's measured per-action "
           "times; *model*: the closed form as written in the file; *closed form*: "
           "recomputed here from P, M, v (" + "; ".join(f"{k}: {v}" for k, v in FORMULAS.items())
           + "; the same in both views; other schedules have none from P, M alone); *from "
           "events*: the single-step value recomputed from the events dataset (median over "
           f"steps), {EVENTS_NA} for steady-state runs: their events count each step from its "
           "own start, so the period is not in them.", ""]
    md += [markdown_table(header, rows), ""]
    md += ["Cross-checks:", ""] + [f"- {x}" for x in check_lines(s)] + [""]
    md += [f"![Bubble fraction vs M]({bub.path.name})", ""]
    if rep.attribution is not None:
        md += ["## Where the bubble came from", "",
               "Each run's measured bubble fraction split into terms that add up to it (the "
               "median step's; fractions of P·T). The runtime replays the run's lowered schedule "
               "four times on its own records: *schedule* is the bubble with one median time "
               "per action kind and free links; *imbalance* what per-(rank, chunk, kind) "
               "medians add; *jitter* what every action's own time in the step adds; "
               "*communication* what the link costs add; *residual* what no replay explains "
               "(runtime bookkeeping, message progress, launch overhead).", ""]
        h, r = table_rows(s, ATTRIBUTION_TABLE)
        md += [markdown_table(h, r), "", f"![Where the bubble came from]"
               f"({rep.attribution.path.name})", ""]
    md += ["## Runs", "",
           "Step times (T of each timed step, the `step_time_s` dataset): median, min and "
           "max over the timed steps, and their spread (max − min) / median. `makespan_s` "
           "in summary.csv is the median.", ""]
    h, r = table_rows(_with_spread(s), RUN_TABLE)
    md += [markdown_table(h, r), ""]
    md += ["## Peak activation memory", ""]
    mcols = [("schedule", "schedule", None), ("P", "P", "int"), ("M", "M", "int"),
             ("v", "v", "int"), ("measured MiB (max rank)", "peak_activation_bytes_max", "MiB"),
             ("model MiB (max rank)", "peak_activation_bytes_model_max", "MiB"),
             ("measured/model (max)", "activation_ratio_max", "ratio"),
             ("device peak MiB", "peak_device_bytes_max", "MiB"),
             ("params MiB", "param_bytes_max", "MiB")]
    if "peak_activation_bytes_max" in s.columns:
        h, r = table_rows(s, mcols)
        md += ["Per run, the largest value over ranks:", "", markdown_table(h, r), ""]
    if mem_plot is not None:
        d = mem_plot.data.copy()
        d["_series"] = d["_series"].astype(str)
        piv_cols = [("series", "_series", None), ("rank", "rank", "int"),
                    ("measured MiB", "peak_activation_bytes", "MiB"),
                    ("model MiB", "peak_activation_bytes_model", "MiB"),
                    ("measured/model", "activation_ratio", "ratio")]
        h, r = table_rows(d, piv_cols)
        md += [f"Per rank at P={rep.config[0]}, M={rep.config[1]}:", "", markdown_table(h, r), "",
               f"![Peak activation memory per rank]({mem_plot.path.name})", ""]
    md += _memory_markdown(rep)
    if rep.gantt:
        md += ["## Timelines", "",
               "One timed step per chart (the one with the median makespan unless chosen): "
               "ranks as rows, x in ms from the step's start; compute coloured by action kind "
               "and labelled with the micro-batch, waits for an input grey and hatched, "
               "SEND/RECV in the thin lanes under each rank.", ""]
        for run, g in rep.gantt:
            md += [f"### {run['schedule']} P={int(run['P'])} M={int(run['M'])} "
                   f"v={int(run['v']) if not pd.isna(run.get('v')) else 1} "
                   f"sync={run.get('sync', 'barrier')}", "",
                   f"`{run['run_key']}` in `{run['path']}`, iteration {g.iteration}: "
                   f"{g.n_events} events.", "", f"![timeline {run['run_key']}]({g.path.name})", ""]
    return "\n".join(md)
