"""PNG figures: bubble fraction vs M, peak activation memory per rank, one run's timeline.

Figures are built on matplotlib's object API with the Agg canvas (no pyplot, no global
backend switch), so the module works headless and inside notebooks alike.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import pandas as pd
from matplotlib import colors as mcolors
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from .loader import COMPUTE_KINDS
from .model import FORMULAS, closed_form_curve, has_closed_form, simulate_uniform

#: The built-in schedules, as bubblebench's registry lists them (`bubblebench list --format
#: json`; a unit test regenerates the file and keeps it up to date).
SCHEDULES = json.loads(Path(__file__).with_name("schedules.json").read_text(encoding="utf-8"))
#: Canonical schedule order for panels and legends: the registry's.
SCHEDULE_ORDER = tuple(s["name"] for s in SCHEDULES)
#: Schedules that take -v (their series name v).
TAKES_V = frozenset(s["name"] for s in SCHEDULES if s["takes_v"])
#: One colour per schedule, by its place in the registry.
_PALETTE = ["#7f7f7f", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
            "#e377c2", "#17becf", "#bcbd22", "#393b79", "#ad494a", "#637939", "#7b4173"]
SCHEDULE_COLORS = {name: _PALETTE[i % len(_PALETTE)] for i, name in enumerate(SCHEDULE_ORDER)}
#: One colour per action kind, the same in every Gantt chart.
KIND_COLORS = {
    "F": "#4C78A8",   # forward: blue
    "B": "#F58518",   # input-gradient backward: orange
    "W": "#54A24B",   # weight-gradient backward: green
    "BW": "#E45756",  # fused full backward (B then W): red
    "FB": "#9D6BBF",  # overlapped F & B pair (DualPipe): purple
}
KIND_LABELS = {
    "F": "F  forward",
    "B": "B  backward (input grad.)",
    "W": "W  backward (weight grad.)",
    "BW": "BW  full backward (B+W)",
    "FB": "FB  overlapped F & B",
}
WAIT_COLOR = "#D0D0D0"
EXTRA_COLORS = ["#B8860B", "#708090", "#20B2AA", "#CD853F", "#6B8E23"]
CONFIG_ATTRS = ("backend", "transport", "compute", "hidden", "layers", "mb_size", "dtype",
                "recompute", "sync")


def _order_schedules(names) -> List[str]:
    names = list(dict.fromkeys(str(n) for n in names))
    known = [s for s in SCHEDULE_ORDER if s in names]
    return known + sorted(n for n in names if n not in SCHEDULE_ORDER)


def schedule_color(name: str, i: int = 0) -> str:
    return SCHEDULE_COLORS.get(str(name), EXTRA_COLORS[i % len(EXTRA_COLORS)])


def _fmt_val(v) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def config_text(runs: pd.DataFrame, attrs=CONFIG_ATTRS) -> str:
    """The configuration shared by all rows, e.g. 'cpu/mpi, gemm, hidden=1024, ...'."""
    parts = []
    for a in attrs:
        if a not in runs.columns:
            continue
        vals = runs[a].dropna().unique()
        if len(vals) == 0:
            continue
        if len(vals) > 1:
            parts.append(f"{a} varies")
        elif a in ("backend", "transport", "compute", "dtype"):
            parts.append(_fmt_val(vals[0]))
        elif a == "recompute":
            if str(vals[0]) not in ("0", "False", "false", "0.0", ""):
                parts.append("recompute")
        else:
            parts.append(f"{a}={_fmt_val(vals[0])}")
    return ", ".join(parts)


def _save(fig: Figure, out, dpi: int) -> Optional[Path]:
    if out is None:
        return None
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)
    fig.savefig(out, dpi=dpi)
    return out


def _int(x, default=1) -> int:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return default
    return default if math.isnan(x) else int(x)


# --- Bubble fraction vs M ---------------------------------------------------------------------


@dataclass
class BubblePlot:
    fig: Figure
    axes: list
    path: Optional[Path]
    schedules: List[str]
    n_measured: int  # measured points drawn
    n_sim: int       # simulated points drawn


@dataclass
class _BubbleCounts:
    """What plot_bubble_vs_m drew, over all panels (for its legend and its result)."""
    measured: int = 0
    sim: int = 0
    file_model: int = 0
    uniform: int = 0
    no_line: int = 0


def _bubble_series(df: pd.DataFrame) -> Dict[str, str]:
    """Adds df["_series"], the configuration of each run ((P, v) and whatever else varies, sync
    included), and gives each series its colour."""
    varying = [a for a in CONFIG_ATTRS if a in df.columns and df[a].nunique(dropna=True) > 1]

    def series_label(row) -> str:
        s = f"P={_int(row['P'])}"
        if _int(row.get("v", 1)) != 1 or row["schedule"] in TAKES_V:
            s += f", v={_int(row.get('v', 1))}"
        for a in varying:
            s += f", {a}={_fmt_val(row[a])}"
        return s

    df["_series"] = [series_label(r) for _, r in df.iterrows()]
    palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
               "#17becf", "#7f7f7f", "#bcbd22"]
    return {lab: palette[i % len(palette)]
            for i, lab in enumerate(sorted(df["_series"].unique(), key=lambda s: (len(s), s)))}


def _bubble_model_line(ax, s: pd.DataFrame, sched: str, c: str, m_range, log: bool,
                       bubblebench: Optional[str], counts: _BubbleCounts) -> float:
    """One series' model line: the closed form over a dense range of M, else the simulator with
    uniform times, else the file's model points. Returns the highest value drawn."""
    P, v = _int(s["P"].iloc[0]), _int(s["v"].iloc[0] if "v" in s else 1)
    lo, hi = m_range
    if has_closed_form(sched):
        mm = (np.geomspace(max(lo / 1.25, 1), hi * 1.25, 200) if log
              else np.linspace(max(lo - 0.5, 1), hi + 0.5, 200))
        yy = closed_form_curve(sched, P, mm, v)
        ax.plot(mm, yy, "-", color=c, lw=1.6, alpha=0.75, zorder=2)
        return float(np.nanmax(yy))
    sync = str(s["sync"].iloc[0]) if "sync" in s.columns else "barrier"
    uniform = simulate_uniform(bubblebench, sched, P, v, range(int(lo), int(hi) + 1), sync)
    if uniform is not None and not uniform.empty:
        ax.plot(uniform["M"], uniform["bubble_fraction"], "--", color=c, lw=1.6, alpha=0.75,
                zorder=2)
        counts.uniform += 1
        return float(np.nanmax(uniform["bubble_fraction"]))
    counts.no_line += 1
    model = pd.to_numeric(s.get("bubble_fraction_model"), errors="coerce")
    ok = model.notna() if model is not None else pd.Series(False, index=s.index)
    if not ok.any():
        return 0.0
    ax.plot(s["M"][ok], model[ok], "D", mfc="none", color=c, ms=7, zorder=2)
    counts.file_model += int(ok.sum())
    return float(np.nanmax(model[ok]))


def _bubble_panel(ax, d: pd.DataFrame, sched: str, colors: Dict[str, str], y_note: str,
                  bubblebench: Optional[str], counts: _BubbleCounts) -> float:
    """One schedule's panel: every series' measured and simulated points and its model line.
    Returns the highest value drawn."""
    m_all = np.sort(d["M"].unique())
    log = len(m_all) > 1 and m_all.max() / m_all.min() >= 4
    handles = []
    ymax = 0.0
    for lab in sorted(d["_series"].unique(), key=lambda s: (len(s), s)):
        s = d[d["_series"] == lab].sort_values("M")
        c = colors[lab]
        meas = pd.to_numeric(s["bubble_fraction_measured"], errors="coerce")
        sim = pd.to_numeric(s["bubble_fraction_sim"], errors="coerce")
        ok = meas.notna()
        ax.plot(s["M"][ok], meas[ok], "o", color=c, ms=6.5, zorder=3, clip_on=False)
        counts.measured += int(ok.sum())
        ok = sim.notna()
        ax.plot(s["M"][ok], sim[ok], "s", mfc="none", color=c, ms=11, mew=1.6, zorder=4,
                clip_on=False)
        counts.sim += int(ok.sum())
        ymax = max(ymax, np.nanmax(np.r_[meas.to_numpy(float), sim.to_numpy(float), 0]))
        ymax = max(ymax, _bubble_model_line(ax, s, sched, c, (m_all.min(), m_all.max()), log,
                                            bubblebench, counts))
        handles.append(Line2D([], [], color=c, marker="o", ls="-", label=lab))
    if log:
        ax.set_xscale("log", base=2)
    # Room on both sides: the first and last M's markers are drawn whole.
    m_lo, m_hi = float(m_all.min()), float(m_all.max())
    ax.set_xlim(*((m_lo / 1.25, m_hi * 1.25) if log else (m_lo - 0.5, m_hi + 0.5)))
    ax.set_xticks(m_all)
    ax.set_xticklabels([_fmt_val(float(m)) for m in m_all])
    ax.minorticks_off()
    ax.set_xlabel("micro-batches per step, M")
    ax.set_ylabel("bubble fraction = idle / (P·T)" + y_note)
    form = FORMULAS.get(sched)
    ax.set_title(f"{sched}: closed form {form}" if form else
                 f"{sched}: line = simulator, uniform F = B = W", fontsize=11)
    ax.grid(True, alpha=0.3)
    ax.legend(handles=handles, fontsize=8, loc="upper right", title="configuration",
              title_fontsize=8)
    return ymax


def _bubble_legend(schedules: List[str], counts: _BubbleCounts) -> List[Line2D]:
    """The figure's legend of marker and line styles, for what was drawn."""
    style = [
        Line2D([], [], color="k", marker="o", ls="none", ms=7, label="measured (runtime, median step)"),
        Line2D([], [], color="k", marker="s", mfc="none", ls="none", ms=11, mew=1.6,
               label="simulated (fed the measured action times)"),
    ]
    if any(has_closed_form(x) for x in schedules):
        style.append(Line2D([], [], color="k", ls="-", lw=1.6,
                            label="closed form from P, M, v (docs/design.md §4)"))
    if counts.uniform:
        style.append(Line2D([], [], color="k", ls="--", lw=1.6,
                            label="simulator, uniform action times F = B = W"))
    if counts.no_line:
        style.append(Line2D([], [], color="none", ls="none",
                            label="(no model line: bubblebench not found for the simulator)"))
    if counts.file_model:
        style.append(Line2D([], [], color="k", marker="D", mfc="none", ls="none",
                            label="model from the file (where no P, M closed form)"))
    return style


def plot_bubble_vs_m(runs: pd.DataFrame, out=None, *, dpi: int = 110,
                     bubblebench: Optional[str] = None) -> BubblePlot:
    """One panel per schedule: bubble fraction against M, measured (filled circles) and
    simulated (hollow squares) per run, and a model line: the closed form over a dense range
    of M where the schedule has one from P, M, v; else (ZB, DualPipe) the simulator's bubble
    with uniform action times (model.simulate_uniform, through BUBBLEBENCH) at every M of the
    panel's range. All panels share one y-scale from 0 (points at 0 drawn whole).
    Series (colours) are the (P, v) configurations and whatever else varies, sync included:
    single-step (barrier) and steady-state (none) runs are separate series."""
    df = runs.copy()
    df["M"] = pd.to_numeric(df["M"], errors="coerce")
    df = df[df["M"].notna()]
    schedules = _order_schedules(df["schedule"])
    n = max(1, len(schedules))
    ncols = min(3, n)
    nrows = math.ceil(n / ncols)
    fig = Figure(figsize=(5.4 * ncols, 4.1 * nrows + 1.3))
    axes = [fig.add_subplot(nrows, ncols, i + 1) for i in range(n)]
    colors = _bubble_series(df)
    syncs = set(df["sync"].dropna().astype(str)) if "sync" in df.columns else {"barrier"}
    y_note = ("" if syncs == {"barrier"} else ", T = period" if syncs == {"none"}
              else "\nT = makespan (sync=barrier) or period (sync=none)")
    counts = _BubbleCounts()
    ymax_all = 0.0
    for ax, sched in zip(axes, schedules):
        ymax_all = max(ymax_all, _bubble_panel(ax, df[df["schedule"] == sched], sched, colors,
                                               y_note, bubblebench, counts))
    # One y-scale for all panels (comparable heights), from a little below 0 so that points
    # at 0 are not cut by the axis.
    top = min(1.0, ymax_all * 1.15 + 0.02) if ymax_all > 0 else 1.0
    for ax in axes:
        ax.set_ylim(-0.03 * top, top)
    style = _bubble_legend(schedules, counts)
    per_row = 4
    fig.legend(handles=style, loc="lower center", ncol=min(per_row, len(style)), fontsize=9.5,
               frameon=False)
    cfg = config_text(df)
    # tight_layout keeps the subtitle's height (and a pad) free at the top of the figure: the
    # subtitle goes there, not at suptitle's default 0.98 (which lowers it into the first row's
    # panel titles on a tall figure).
    fig.suptitle("Bubble fraction vs micro-batches M: measured vs simulated vs model"
                 + (f"\n{cfg}" if cfg else ""), fontsize=13, y=1 - 0.06 / fig.get_figheight())
    rows = math.ceil(len(style) / per_row)
    fig.tight_layout(rect=(0, (0.2 + 0.25 * rows) / fig.get_figheight(), 1, 1))
    path = _save(fig, out, dpi)
    return BubblePlot(fig, axes, path, schedules, counts.measured, counts.sim)


# --- Peak activation memory per rank ----------------------------------------------------------


@dataclass
class MemoryPlot:
    fig: Figure
    ax: object
    path: Optional[Path]
    data: pd.DataFrame  # the rows drawn: one per (series, rank)
    n_bars: int


def _byte_unit(max_bytes: float):
    for unit, scale in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if max_bytes >= scale:
            return unit, scale
    return "bytes", 1


def plot_peak_activation(mem: pd.DataFrame, out=None, *, title_suffix: str = "",
                         dpi: int = 110) -> MemoryPlot:
    """Grouped bars: x = pipeline rank, one bar per schedule (and v) with the measured peak
    activation bytes; a black cap on each bar marks the model's (simulator's) peak.

    `mem`: memory_comparison() rows of the runs to draw (one run per schedule/v, same P)."""
    d = mem.copy()
    d["v"] = d["v"] if "v" in d.columns else 1
    d["_series"] = [f"{s}" + (f" v={_int(v)}" if _int(v) != 1 else "")
                    for s, v in zip(d["schedule"], d["v"])]
    order = []
    for s in _order_schedules(d["schedule"]):
        order += sorted(d.loc[d["schedule"] == s, "_series"].unique())
    ranks = np.sort(pd.to_numeric(d["rank"]).unique())
    meas_all = pd.to_numeric(d["peak_activation_bytes"], errors="coerce").astype(float)
    model_all = pd.to_numeric(d["peak_activation_bytes_model"], errors="coerce").astype(float)
    unit, scale = _byte_unit(np.nanmax(np.r_[meas_all.to_numpy(), model_all.to_numpy(), 1]))
    width = 0.8 / max(1, len(order))
    fig = Figure(figsize=(max(8.0, 1.2 + len(ranks) * (0.45 + 0.32 * len(order))), 5.6))
    ax = fig.add_subplot(1, 1, 1)
    n_bars = 0
    handles = []
    for i, lab in enumerate(order):
        s = d[d["_series"] == lab].sort_values("rank")
        sched = s["schedule"].iloc[0]
        c = schedule_color(sched, i)
        x = s["rank"].to_numpy(float) + (i - (len(order) - 1) / 2) * width
        meas = pd.to_numeric(s["peak_activation_bytes"], errors="coerce").to_numpy(float) / scale
        model = pd.to_numeric(s["peak_activation_bytes_model"],
                              errors="coerce").to_numpy(float) / scale
        bars = ax.bar(x, meas, width * 0.92, color=c, edgecolor="white", lw=0.5, zorder=2)
        n_bars += len(bars)
        ok = ~np.isnan(model)
        ax.hlines(model[ok], x[ok] - width * 0.5, x[ok] + width * 0.5, colors="black", lw=2.2,
                  zorder=3)
        handles.append(Patch(color=c, label=f"{lab} (measured)"))
    handles.append(Line2D([], [], color="black", lw=2.2, label="model (simulator's peak)"))
    ax.set_xticks(ranks)
    ax.set_xticklabels([f"rank {_int(r)}" for r in ranks])
    ax.set_xlabel("pipeline rank (stage)")
    ax.set_ylabel(f"peak activation memory ({unit})")
    ax.grid(True, axis="y", alpha=0.3, zorder=0)
    ax.set_axisbelow(True)
    ax.legend(handles=handles, fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              borderaxespad=0)
    # The title over the whole figure (the legend takes the right): centred on the axes, a
    # long title would run off the figure's left edge.
    fig.suptitle("Peak activation memory per rank: measured (bars) vs model (black caps)"
                 + (f"\n{title_suffix}" if title_suffix else ""), fontsize=12)
    fig.tight_layout()
    path = _save(fig, out, dpi)
    return MemoryPlot(fig, ax, path, d, n_bars)


# --- Memory over time of one run --------------------------------------------------------------


@dataclass
class MemoryTimePlot:
    fig: Figure
    path: Optional[Path]
    #: Per rank: the highest live bytes drawn, the measured peak (peak_memory_bytes) and the
    #: predicted one (peak_memory_bytes_model), NaN where the file has none.
    peaks: pd.DataFrame


def plot_memory_over_time(mem: pd.DataFrame, ranks: pd.DataFrame, run=None, out=None, *,
                          dpi: int = 110) -> MemoryTimePlot:
    """One panel per rank: its live bytes over the last timed step, stacked by kind (weights,
    workspace, runtime, activations, messages: the memory dataset), with the measured peak
    (the allocator's high-water, `peak_memory_bytes`: solid red) and the predicted one (the
    memory model on the simulated step, `peak_memory_bytes_model`: dashed black) marked.

    `mem`: load_memory() rows of one run; `ranks`: its load_ranks() rows."""
    order = ["weights", "workspace", "runtime", "activations", "messages"]
    colors = {"weights": "#9E9E9E", "workspace": "#BDBDBD", "runtime": "#E0E0E0",
              "activations": "#4C78A8", "messages": "#F58518"}
    rank_ids = sorted(int(r) for r in pd.unique(mem["rank"]))
    rk = ranks.set_index(pd.to_numeric(ranks["rank"]).astype(int)) if not ranks.empty else ranks
    peak_col = lambda r, c: (float(rk.loc[r, c]) if not rk.empty and c in rk.columns  # noqa
                             and r in rk.index else float("nan"))
    top = max([float(mem["total_bytes"].max())]
              + [peak_col(r, c) for r in rank_ids
                 for c in ("peak_memory_bytes", "peak_memory_bytes_model")
                 if not math.isnan(peak_col(r, c))])
    unit, scale = _byte_unit(top)
    t0 = float(mem["t_s"].min())
    t1 = float(mem["t_s"].max())
    span = max(t1 - t0, 1e-12)
    fig = Figure(figsize=(10.0, 1.0 + 1.9 * len(rank_ids)))
    rows = []
    for i, r in enumerate(rank_ids):
        ax = fig.add_subplot(len(rank_ids), 1, i + 1)
        d = mem[mem["rank"] == r].sort_values("t_s")
        x = np.r_[(d["t_s"].to_numpy(float) - t0) * 1e3, (t1 - t0 + 0.02 * span) * 1e3]
        ys = [np.r_[d[k].to_numpy(float), d[k].to_numpy(float)[-1]] / scale for k in order]
        ax.stackplot(x, *ys, step="post", colors=[colors[k] for k in order],
                     labels=order if i == 0 else [], lw=0)
        meas, pred = peak_col(r, "peak_memory_bytes"), peak_col(r, "peak_memory_bytes_model")
        if not math.isnan(meas):  # wide and under the dashed prediction: both show when equal
            ax.axhline(meas / scale, color="#C62828", lw=3.0, alpha=0.8,
                       label="measured peak (allocator)" if i == 0 else None)
        if not math.isnan(pred):
            ax.axhline(pred / scale, color="black", lw=1.2, ls="--",
                       label="predicted peak (model)" if i == 0 else None)
        live = float(d["total_bytes"].max())
        ax.set_ylim(0, 1.08 * max(live, meas if not math.isnan(meas) else 0,
                                  pred if not math.isnan(pred) else 0) / scale)
        ax.set_xlim(0, x[-1])
        ax.set_ylabel(f"rank {r}\n{unit}")
        ax.grid(True, alpha=0.3)
        if i + 1 < len(rank_ids):
            ax.tick_params(labelbottom=False)
        rows.append({"rank": r, "live_peak_bytes": live, "peak_memory_bytes": meas,
                     "peak_memory_bytes_model": pred})
    fig.axes[-1].set_xlabel("ms from the step's start (last timed step)")
    title = "Memory over time per rank: live bytes by kind, peaks marked"
    if run is not None:
        title += (f"\n{run['schedule']} P={_int(run['P'])} M={_int(run['M'])} "
                  f"v={_int(run.get('v', 1))}")
    fig.suptitle(title, fontsize=12)
    # The legend under the panels (above them it would run into the title).
    fig.legend(loc="lower center", fontsize=8, ncol=7, frameon=False)
    fig.tight_layout(rect=(0, 0.05 if len(rank_ids) > 1 else 0.1, 1,
                           0.93 if len(rank_ids) > 1 else 0.86))
    path = _save(fig, out, dpi)
    return MemoryTimePlot(fig, path, pd.DataFrame(rows))


# --- Gantt chart of one run -------------------------------------------------------------------


@dataclass
class GanttPlot:
    fig: Figure
    ax: object
    path: Optional[Path]
    iteration: int
    n_bars: int      # rectangles drawn: one per event of that iteration
    n_events: int    # events of the run in that iteration
    counts: Dict[str, int] = field(default_factory=dict)  # bars per kind


def _lighten(color, amount: float):
    r, g, b = mcolors.to_rgb(color)
    return (r + (1 - r) * amount, g + (1 - g) * amount, b + (1 - b) * amount)


def _is_wait(kind: str) -> bool:
    k = kind.lower()
    return k.startswith("wait") or k == "idle"


def _is_comm(kind: str) -> bool:
    k = kind.upper()
    return k.startswith("SEND") or k.startswith("RECV")


def representative_iteration(events: pd.DataFrame) -> int:
    """The timed iteration whose makespan (compute events) is the median one."""
    comp = events[events["kind"].isin(COMPUTE_KINDS)]
    if comp.empty:
        comp = events
    span = comp.groupby("iter").agg(a=("t_start_s", "min"), b=("t_end_s", "max"))
    span = (span["b"] - span["a"]).sort_values(kind="mergesort")
    return int(span.index[(len(span) - 1) // 2])


@dataclass
class _GanttLayout:
    """Where plot_gantt draws: its lanes per rank (y grows downwards after invert_yaxis:
    compute, then SEND, then RECV) and what it knows of the bars' widths and chunks."""
    span: float              # x range (ms)
    axes_w_px: float         # width of the axes in pixels
    label_all: bool          # micro-batch labels on every compute bar (else none)
    local: Dict[tuple, int]  # (rank, chunk) -> the chunk's place among the rank's chunks
    n_local: int             # most chunks on one rank
    comp_y: float = -0.40
    comp_h: float = 0.56
    send_y: float = 0.19
    recv_y: float = 0.31
    comm_h: float = 0.11


def _gantt_comm_bars(ax, g: pd.DataFrame, kind: str, y_rank, left, width, lay: _GanttLayout):
    """SEND (filled, dark) or RECV (hollow) bars of one comm kind in their lanes."""
    fam = kind.upper().split("_")[-1] if "_" in kind else ""
    c = mcolors.to_rgb(KIND_COLORS.get("F" if fam == "F" else "B" if fam == "B" else "",
                                       "#555555"))
    dark = tuple(x * 0.55 for x in c)
    if kind.upper().startswith("SEND"):
        return ax.barh(y_rank + lay.send_y, width, left=left, height=lay.comm_h, align="edge",
                       color=dark, edgecolor=dark, lw=0.4, zorder=2)
    return ax.barh(y_rank + lay.recv_y, width, left=left, height=lay.comm_h, align="edge",
                   color="white", edgecolor=dark, lw=0.9, zorder=2)


def _gantt_compute_bars(ax, g: pd.DataFrame, kind: str, y_rank, left, width, lay: _GanttLayout,
                        extra_colors: Dict[str, str]):
    """Compute bars of one kind, a lighter shade for a rank's later chunks, with micro-batch
    labels where they fit."""
    base = KIND_COLORS.get(kind)
    if base is None:
        base = extra_colors.setdefault(kind, EXTRA_COLORS[len(extra_colors) % len(EXTRA_COLORS)])
    shades = [_lighten(base, 0.5 * lay.local.get((r, c), 0) / max(1, lay.n_local - 1))
              for r, c in zip(g["rank"], g["chunk"])]
    bars = ax.barh(y_rank + lay.comp_y, width, left=left, height=lay.comp_h, align="edge",
                   color=shades, edgecolor="white", lw=0.6, zorder=2)
    if lay.label_all:
        for x, w, yr, m in zip(left, width, y_rank, g["microbatch"]):
            txt = str(int(m))
            if w / lay.span * lay.axes_w_px >= 6 * len(txt) + 2:
                ax.text(x + w / 2, yr + lay.comp_y + lay.comp_h / 2, txt, ha="center",
                        va="center", fontsize=7.5, color="white", zorder=5, fontweight="bold")
    return bars


def _gantt_legend(present: List[str], extra_colors: Dict[str, str], n_local: int) -> list:
    """Kinds present, in canonical order, then wait and communication."""
    handles = []
    for k in list(KIND_COLORS) + sorted(extra_colors):
        if k in present:
            handles.append(Patch(facecolor=KIND_COLORS.get(k, extra_colors.get(k)),
                                 label=KIND_LABELS.get(k, k)))
    if any(_is_wait(k) for k in present):
        handles.append(Patch(facecolor=WAIT_COLOR, edgecolor="#8a8a8a", hatch="////",
                             label="waiting for an input"))

    def comm_order(k):
        u = k.upper()
        return ({"F": 0, "B": 1}.get(u.split("_")[-1], 2), 0 if u.startswith("SEND") else 1, u)

    for k in sorted((k for k in present if _is_comm(k)), key=comm_order):
        fam = k.upper().split("_")[-1]
        c = tuple(x * 0.55 for x in mcolors.to_rgb(KIND_COLORS.get(fam, "#555555")))
        what = "activation" if fam == "F" else "gradient" if fam == "B" else ""
        if k.upper().startswith("SEND"):
            handles.append(Patch(facecolor=c, edgecolor=c, label=f"{k} (send {what})"))
        else:
            handles.append(Patch(facecolor="white", edgecolor=c, lw=1.2,
                                 label=f"{k} (receive {what})"))
    if n_local > 1:
        handles.append(Patch(facecolor=_lighten(KIND_COLORS["F"], 0.5),
                             label="lighter shade: the rank's later chunk"))
    return handles


def _gantt_title(run: Optional[pd.Series], comp: pd.DataFrame, iteration: int,
                 n_iters: int) -> str:
    """The configuration, the drawn step's makespan, and the run's bubble fractions as its
    record gives them (measured: the median over the timed steps)."""
    lines = []
    if run is not None:
        head = (f"{run.get('schedule', '?')}: P={_int(run.get('P'))}, M={_int(run.get('M'))}, "
                f"v={_int(run.get('v', 1))}")
        cfg = config_text(pd.DataFrame([run]))
        lines.append(head + (f"  ({cfg})" if cfg else ""))
    if comp.empty:
        return "\n".join(lines)
    T = comp["t_end_s"].max() - comp["t_start_s"].min()
    sub = f"timed iteration {iteration} ({n_iters} recorded): makespan {T * 1e3:.2f} ms"
    if run is not None:
        steady = str(run.get("sync", "barrier")) == "none"
        bits = []
        period = run.get("period_s")
        if steady and period is not None and not pd.isna(period):
            bits.append(f"period {float(period) * 1e3:.2f} ms")
        for lab, col in (("measured", "bubble_fraction_measured"),
                         ("simulated", "bubble_fraction_sim"),
                         ("closed form", "bubble_fraction_closed_form")):
            val = run.get(col)
            if col == "bubble_fraction_closed_form" and (val is None or pd.isna(val)):
                val = run.get("bubble_fraction_model")
                lab = "model"
            try:
                if val is not None and not pd.isna(val):
                    bits.append(f"{lab} {float(val):.3f}")
            except (TypeError, ValueError):
                pass
        if bits:
            sub += ("; the run's bubble fraction" + (" (steady state)" if steady else "") + ": "
                    + ", ".join(bits))
    lines.append(sub)
    return "\n".join(lines)


def _gantt_layout(ev: pd.DataFrame, comp_mask, has_comm: bool, span: float, fig_w: float,
                  dpi: int, label_microbatches: bool) -> _GanttLayout:
    """A rank's chunks in order (the lighter shades mark the later ones) and whether every
    compute bar gets its micro-batch label: on all, or on none (when the typical bar is too
    narrow for the longest number), so that a missing label never means anything."""
    local: Dict[tuple, int] = {}
    n_local = 1
    for r, g in ev[comp_mask].groupby("rank"):
        chunks = sorted(g["chunk"].unique())
        n_local = max(n_local, len(chunks))
        for i, c in enumerate(chunks):
            local[(r, c)] = i
    axes_w_px = fig_w * 0.82 * dpi
    cw = (ev.loc[comp_mask, "t_end_s"] - ev.loc[comp_mask, "t_start_s"]) * 1e3
    digits = len(str(int(ev.loc[comp_mask, "microbatch"].max()))) if comp_mask.any() else 1
    label_all = bool(label_microbatches and comp_mask.any()
                     and cw.median() / span * axes_w_px >= 7 * digits + 4)
    lay = _GanttLayout(span, axes_w_px, label_all, local, n_local)
    if not has_comm:
        lay.comp_y, lay.comp_h = -0.32, 0.64
    return lay


def plot_gantt(events: pd.DataFrame, run: Optional[pd.Series] = None, out=None, *,
               iteration: Optional[int] = None, dpi: int = 110,
               label_microbatches: bool = True) -> GanttPlot:
    """Timeline of one timed iteration of one run: one row per rank, x in milliseconds.

    Compute actions (F, B, W, BW, FB) are coloured by kind (a lighter shade for a rank's
    later chunks when it holds several) and labelled with the micro-batch; waits for an
    input are grey and hatched; SEND and RECV are thin bars in two lanes under each rank.
    Every event of the iteration is one rectangle: `n_bars` == `n_events`. The title gives the
    run's bubble fractions from its record.

    `events`: load_events() rows of one run (all iterations, or already filtered);
    `iteration`: default the iteration with the median makespan."""
    if events.empty:
        raise ValueError("no events to draw")
    if "run_key" in events.columns and events["run_key"].nunique() > 1:
        raise ValueError("events of several runs given; pass one run's events")
    if iteration is None:
        iteration = representative_iteration(events)
    ev = events[events["iter"] == iteration].copy()
    if ev.empty:
        raise ValueError(f"no events in iteration {iteration}")
    ev["kind"] = ev["kind"].astype(str)
    P = _int(run["P"]) if run is not None and "P" in run else int(ev["rank"].max()) + 1
    P = max(P, int(ev["rank"].max()) + 1)
    ranks = list(range(P))
    comp_mask = ~ev["kind"].map(_is_wait) & ~ev["kind"].map(_is_comm)
    has_comm = bool(ev["kind"].map(_is_comm).any())
    ms = 1e3
    x_lo = min(0.0, ev["t_start_s"].min()) * ms
    x_hi = ev["t_end_s"].max() * ms
    span = max(x_hi - x_lo, 1e-9)
    fig_w = 15.0
    fig = Figure(figsize=(fig_w, 2.3 + 0.62 * P * (1.25 if has_comm else 1.0)))
    ax = fig.add_subplot(1, 1, 1)
    lay = _gantt_layout(ev, comp_mask, has_comm, span, fig_w, dpi, label_microbatches)
    counts: Dict[str, int] = {}
    n_bars = 0
    extra_colors: Dict[str, str] = {}
    for kind, g in ev.groupby("kind", sort=False):
        y_rank = g["rank"].to_numpy(float)
        left = g["t_start_s"].to_numpy(float) * ms
        width = (g["t_end_s"].to_numpy(float) - g["t_start_s"].to_numpy(float)) * ms
        if _is_wait(kind):
            bars = ax.barh(y_rank + lay.comp_y, width, left=left, height=lay.comp_h, align="edge",
                           color=WAIT_COLOR, edgecolor="#8a8a8a", hatch="////", lw=0.4,
                           zorder=1)
        elif _is_comm(kind):
            bars = _gantt_comm_bars(ax, g, kind, y_rank, left, width, lay)
        else:
            bars = _gantt_compute_bars(ax, g, kind, y_rank, left, width, lay, extra_colors)
        counts[kind] = counts.get(kind, 0) + len(bars)
        n_bars += len(bars)
    ax.set_ylim(P - 0.5, -0.5)
    ax.set_xlim(x_lo - 0.01 * span, x_hi + 0.01 * span)
    ax.set_yticks([r + lay.comp_y + lay.comp_h / 2 for r in ranks])
    ax.set_yticklabels([f"rank {r}" for r in ranks])
    if has_comm:
        minor = [r + y + lay.comm_h / 2 for r in ranks for y in (lay.send_y, lay.recv_y)]
        ax.set_yticks(minor, minor=True)
        ax.set_yticklabels(["send", "recv"] * P, minor=True, fontsize=6.5, color="#555555")
        ax.tick_params(axis="y", which="minor", length=0)
    ax.set_xlabel("time since the step's start (ms)")
    ax.grid(True, axis="x", alpha=0.3, zorder=0)
    ax.set_axisbelow(True)
    handles = _gantt_legend(list(ev["kind"].unique()), extra_colors, lay.n_local)
    ncol = len(handles) if len(handles) <= 5 else math.ceil(len(handles) / 2)
    n_rows = math.ceil(len(handles) / ncol)
    legend_h = (0.25 + 0.24 * n_rows) / fig.get_figheight()
    fig.legend(handles=handles, loc="lower center", ncol=ncol, fontsize=8.5, frameon=False,
               bbox_to_anchor=(0.5, 0.0))
    comp = ev[comp_mask & ev["kind"].isin(COMPUTE_KINDS)]
    ax.set_title(_gantt_title(run, comp, iteration, events["iter"].nunique()), fontsize=11)
    fig.tight_layout(rect=(0, legend_h, 1, 1))
    path = _save(fig, out, dpi)
    return GanttPlot(fig, ax, path, int(iteration), n_bars, len(ev), counts)


# --- Where the bubble came from (attribution) -------------------------------------------------

#: The attribution terms of a run (fractions of P·T; they add up to the measured bubble
#: fraction of the step they describe), in stacking order, with colours and labels.
ATTRIBUTION_TERMS = ("schedule", "imbalance", "jitter", "communication", "residual")
ATTRIBUTION_COLORS = {
    "schedule": "#4C78A8",       # the schedule's own bubble: blue
    "imbalance": "#F58518",      # ranks/chunks slower than others: orange
    "jitter": "#B279A2",         # per-step variation of action times: violet
    "communication": "#54A24B",  # link costs: green
    "residual": "#9D9D9D",       # not explained by the replays: grey
}
ATTRIBUTION_LABELS = {
    "schedule": "schedule (uniform replay)",
    "imbalance": "imbalance (per rank/chunk)",
    "jitter": "jitter (per step)",
    "communication": "communication (links)",
    "residual": "residual (runtime)",
}


@dataclass
class AttributionPlot:
    fig: Figure
    ax: object
    path: Optional[Path]
    labels: List[str]  # one bar per run, top to bottom
    n_segments: int    # non-zero segments drawn


def attribution_columns(runs: pd.DataFrame) -> List[str]:
    """The attribution columns present in `runs` (attribution_<term>), in stacking order."""
    return [f"attribution_{t}" for t in ATTRIBUTION_TERMS if f"attribution_{t}" in runs.columns]


def plot_attribution(runs: pd.DataFrame, out=None, *, dpi: int = 110) -> AttributionPlot:
    """"Where the bubble came from": one horizontal stacked bar per run of its attribution
    terms (fractions of P·T of the median step). Positive terms stack right from 0, negative
    ones left; a black tick marks the measured bubble fraction, where the terms' sum ends."""
    cols = attribution_columns(runs)
    df = runs[runs[cols].notna().any(axis=1)] if cols else runs.iloc[0:0]
    if "schedule" in df.columns:
        order = {s: i for i, s in enumerate(_order_schedules(df["schedule"]))}
        by = [c for c in ("P", "v", "M", "sync") if c in df.columns]
        df = df.assign(_o=df["schedule"].map(order)).sort_values(["_o"] + by).drop(columns="_o")
    varying = [a for a in ("P", "M", "v", "sync") if a in df.columns and df[a].nunique() > 1]

    def label(row) -> str:
        s = str(row.get("schedule", "?"))
        for a in varying:
            s += f" {a}={_fmt_val(row[a])}"
        return s

    labels = [label(r) for _, r in df.iterrows()]
    n = max(1, len(labels))
    height = 2.3 + 0.42 * n  # inches: bars, and room for the title and the legend below
    fig = Figure(figsize=(9.0, height))
    ax = fig.add_subplot(1, 1, 1)
    segments = 0
    for i, (_, row) in enumerate(df.iterrows()):
        right = left = 0.0
        for term in ATTRIBUTION_TERMS:
            x = float(row.get(f"attribution_{term}", float("nan")))
            if math.isnan(x) or x == 0:
                continue
            start = right if x > 0 else left + x
            ax.barh(i, abs(x), left=start, height=0.62, color=ATTRIBUTION_COLORS[term],
                    edgecolor="white", lw=0.6)
            segments += 1
            if x > 0:
                right += x
            else:
                left += x
        meas = float(row.get("bubble_fraction_measured", float("nan")))
        if not math.isnan(meas):
            ax.plot([meas, meas], [i - 0.38, i + 0.38], "-", color="black", lw=2.2, zorder=5)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels)
    ax.set_ylim(n - 0.4, -0.6)  # the first run on top
    ax.set_xlabel("fraction of P·T (T: measured makespan, or period with sync=none)")
    cfg = config_text(df) if not df.empty else ""
    ax.set_title("Where the bubble came from" + (f" ({cfg})" if cfg else ""), fontsize=10)
    handles = [Patch(color=ATTRIBUTION_COLORS[t], label=ATTRIBUTION_LABELS[t])
               for t in ATTRIBUTION_TERMS]
    handles.append(Line2D([], [], color="black", lw=2.2, label="measured bubble fraction"))
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    fig.subplots_adjust(left=0.2, right=0.97, top=1 - 0.45 / height, bottom=1.05 / height)
    path = _save(fig, out, dpi)
    return AttributionPlot(fig, ax, path, labels, segments)
