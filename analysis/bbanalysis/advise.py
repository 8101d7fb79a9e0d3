"""`bubblebench advise` output (docs/advise.md) -> a table and the Pareto plot of step time
against peak memory per rank.

    from bbanalysis.advise import load_advice, pareto_front, plot_pareto
    df = load_advice("advice.json")      # or the --format csv output
    plot_pareto(df, "pareto.png").front  # the configurations on the front, fastest first

Command line: ``/usr/bin/python3 -m bbanalysis pareto advice.json --out pareto.png``.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import pandas as pd

#: Columns every configuration row has (refused rows leave the times and bytes NaN).
ADVICE_COLUMNS = ("rank", "schedule", "M", "v", "recompute", "mb_size", "step_time_s",
                  "peak_bytes", "excluded", "reason")


def load_advice(path) -> pd.DataFrame:
    """One row per configuration of an advise JSON (its `ranked` then `excluded`) or CSV
    output; `rank` is 0 for excluded rows, `excluded` "" for ranked ones. The JSON's input
    (memory cap, global batch) is kept in ``df.attrs["input"]``."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("{"):
        j = json.loads(text)
        if "ranked" not in j or "excluded" not in j:
            raise ValueError(f"{path}: not the JSON of bubblebench advise (no 'ranked')")
        rows = list(j["ranked"]) + list(j["excluded"])
        df = pd.DataFrame(rows)
        df.attrs["input"] = j.get("input", {})
    else:
        df = pd.read_csv(path, keep_default_na=False, na_values=[""])
        df.attrs["input"] = {}
    missing = [c for c in ("schedule", "M", "v", "recompute", "excluded") if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: not bubblebench advise output (missing {', '.join(missing)})")
    for c in ADVICE_COLUMNS:
        if c not in df.columns:
            df[c] = math.nan
    df["rank"] = pd.to_numeric(df["rank"], errors="coerce").fillna(0).astype(int)
    df["excluded"] = df["excluded"].fillna("").astype(str)
    df["recompute"] = df["recompute"].map(lambda x: str(x).lower() in ("1", "true"))
    for c in ("M", "v", "mb_size", "step_time_s", "peak_bytes"):
        df[c] = pd.to_numeric(df[c], errors="coerce")
    df["time_per_sample_s"] = df["step_time_s"] / (df["M"] * df["mb_size"])
    return df


def _y_column(df: pd.DataFrame) -> str:
    """Step time where every configuration runs the same global batch, else time per sample."""
    batch = (df["M"] * df["mb_size"]).dropna().unique()
    return "step_time_s" if len(batch) == 1 else "time_per_sample_s"


def pareto_front(df: pd.DataFrame) -> pd.DataFrame:
    """The ranked configurations no other ranked one beats in both time (per sample) and peak
    memory, fastest first (equal points: the first in rank order)."""
    ok = df[(df["excluded"] == "") & df["peak_bytes"].notna()]
    ok = ok.sort_values(["time_per_sample_s", "peak_bytes", "rank"])
    front, best_mem = [], math.inf
    for idx, row in ok.iterrows():
        if row["peak_bytes"] < best_mem:
            front.append(idx)
            best_mem = row["peak_bytes"]
    return ok.loc[front]


@dataclass
class ParetoPlot:
    fig: object
    ax: object
    path: Optional[Path]
    n_points: int       # configurations drawn (ranked and over the cap)
    front: pd.DataFrame  # pareto_front(df)
    y: str              # the column on the y axis


def plot_pareto(df: pd.DataFrame, out=None, *, top: int = 5, dpi: int = 110) -> ParetoPlot:
    """Step time (or time per sample) against peak memory per rank, one point per simulated
    configuration: colour by schedule, filled circles without recompute, triangles with it,
    grey crosses over the memory cap (a dashed line marks it when the JSON names it); the
    Pareto front as a step line, the top `top` numbered."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    from .plots import _byte_unit, _order_schedules, _save, schedule_color

    y = _y_column(df)
    drawn = df[df["peak_bytes"].notna() & df[y].notna()]
    unit, scale = _byte_unit(float(drawn["peak_bytes"].max()) if not drawn.empty else 0.0)
    fig = Figure(figsize=(8.5, 5.6))
    ax = fig.add_subplot(1, 1, 1)
    ms = 1e3 if y == "step_time_s" else 1e6
    over = drawn[drawn["excluded"] == "memory"]
    ax.scatter(over["peak_bytes"] / scale, over[y] * ms, marker="x", color="#9a9a9a", s=22,
               lw=0.9, zorder=2)
    ranked = drawn[drawn["excluded"] == ""]
    schedules = _order_schedules(ranked["schedule"].unique())
    for i, name in enumerate(schedules):
        of = ranked[ranked["schedule"] == name]
        for rc, marker in ((False, "o"), (True, "^")):
            pts = of[of["recompute"] == rc]
            if not pts.empty:
                ax.scatter(pts["peak_bytes"] / scale, pts[y] * ms, marker=marker, s=26,
                           color=schedule_color(name, i), alpha=0.85, zorder=3,
                           edgecolors="white", linewidths=0.4)
    front = pareto_front(df)
    if not front.empty:
        by_memory = front.sort_values("peak_bytes")  # the staircase: least memory first
        fx = list(by_memory["peak_bytes"] / scale)
        fy = list(by_memory[y] * ms)
        ax.step(fx, fy, where="post", color="black", lw=1.2, zorder=4)
        ax.scatter(fx, fy, s=70, facecolors="none", edgecolors="black", lw=1.1, zorder=5)
    best = ranked[ranked["rank"].between(1, top)].sort_values("rank")
    for k, (_, row) in enumerate(best.iterrows()):
        ax.annotate(f"#{row['rank']}", (row["peak_bytes"] / scale, row[y] * ms),
                    textcoords="offset points", xytext=(6, 10 - 9 * k), fontsize=8, zorder=6,
                    arrowprops={"arrowstyle": "-", "lw": 0.5, "color": "#444"})
    cap = float(df.attrs.get("input", {}).get("memory_cap", 0) or 0)
    if cap > 0:
        ax.axvline(cap / scale, color="#c44", ls="--", lw=1.0)
    ax.set_xlabel(f"peak memory per rank ({unit}): parameters, gradients, optimizer state, "
                  "activations")
    ax.set_ylabel("step time (ms)" if y == "step_time_s" else "time per sample (µs)")
    inp = df.attrs.get("input", {})
    view = "steady state" if inp.get("view") == "steady" else "single step"
    ax.set_title(f"bubblebench advise: {len(ranked)} configurations under the cap, "
                 f"{len(over)} over it ({view}" + (f", P={inp['P']}" if "P" in inp else "")
                 + ")", fontsize=10)
    handles = [Line2D([], [], marker="o", ls="", color=schedule_color(s, i), label=s)
               for i, s in enumerate(schedules)]
    handles += [Line2D([], [], marker="o", ls="", color="#555", label="recompute off"),
                Line2D([], [], marker="^", ls="", color="#555", label="recompute on"),
                Line2D([], [], marker="x", ls="", color="#9a9a9a", label="over the memory cap"),
                Line2D([], [], color="black", lw=1.2, marker="o", mfc="none",
                       label="Pareto front")]
    if cap > 0:
        handles.append(Line2D([], [], color="#c44", ls="--", label="memory cap"))
    ax.legend(handles=handles, fontsize=8, loc="upper right", framealpha=0.9)
    ax.set_yscale("log")  # slow outliers (naive) beside the close race at the front
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    path = _save(fig, out, dpi)
    return ParetoPlot(fig, ax, path, len(ranked) + len(over), front, y)


def front_lines(front: pd.DataFrame, y: str) -> List[str]:
    """The Pareto front as text lines, fastest first."""
    out = []
    for _, r in front.iterrows():
        t = r[y] * (1e3 if y == "step_time_s" else 1e6)
        out.append(f"#{r['rank']} {r['schedule']} M={r['M']:g} v={r['v']:g}"
                   f"{' recompute' if r['recompute'] else ''}: "
                   f"{t:.4g} {'ms' if y == 'step_time_s' else 'µs/sample'}, "
                   f"{r['peak_bytes'] / 2 ** 20:.4g} MiB")
    return out
