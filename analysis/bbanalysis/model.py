"""Closed-form bubble fractions (design §4), computed here from P, M, v alone.

This is an independent cross-check of the file's `bubble_fraction_model` (written by the
C++ model): the two must agree wherever a form is listed below. Schedules whose published
form needs the per-action times (ZB-H1/H2, ZB-V, DualPipe, DualPipeV) get NaN here; for
them, simulate_uniform() asks bubblebench's simulator for the bubble with uniform times: the
`bubblebench` Python module where it is importable (README "From Python"), else the binary.
"""
from __future__ import annotations

import io
import math
import os
import shutil
import subprocess
import warnings
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

#: The forms, as text for tables and legends.
FORMULAS = {
    "naive": "1 − 1/P",
    "gpipe": "(P−1)/(M+P−1)",
    "1f1b": "(P−1)/(M+P−1)",
    "interleaved": "(P−1)/(v·M+P−1)",
}


def _num(x) -> float:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return math.nan
    return x


def closed_form_bubble_fraction(schedule, P, M, v=1) -> float:
    """Bubble fraction idle/(P·T) of one step by the published closed form, or NaN.

    gpipe, 1f1b: (P−1)/(M+P−1); interleaved: (P−1)/(v·M+P−1); naive: 1 − 1/P; other
    schedules (or P, M, v missing or < 1): NaN.
    """
    name = str(schedule).strip().lower() if schedule is not None else ""
    P, M, v = _num(P), _num(M), _num(v)
    if not (P >= 1 and M >= 1):  # also false for NaN
        return math.nan
    if name in ("gpipe", "afab", "1f1b"):
        return (P - 1) / (M + P - 1)
    if name == "interleaved":
        if not v >= 1:
            return math.nan
        return (P - 1) / (v * M + P - 1)
    if name == "naive":
        return 1 - 1 / P
    return math.nan


def closed_form_column(runs: pd.DataFrame) -> pd.Series:
    """closed_form_bubble_fraction for every row of a runs DataFrame (schedule, P, M, v)."""
    v = runs["v"] if "v" in runs.columns else pd.Series(1, index=runs.index)
    return pd.Series(
        [closed_form_bubble_fraction(s, p, m, vv)
         for s, p, m, vv in zip(runs["schedule"], runs["P"], runs["M"], v)],
        index=runs.index, dtype=float, name="bubble_fraction_closed_form")


def closed_form_curve(schedule, P, M_values, v=1) -> np.ndarray:
    """The closed form over a (dense, possibly non-integer) range of M, for plotting."""
    return np.array([closed_form_bubble_fraction(schedule, P, m, v) for m in M_values],
                    dtype=float)


def has_closed_form(schedule) -> bool:
    """Whether closed_form_bubble_fraction knows a form for SCHEDULE: those of FORMULAS (and
    GPipe's other name, afab)."""
    name = str(schedule).strip().lower()
    return name in FORMULAS or name == "afab"


def simulator_module():
    """The `bubblebench` Python module (PYTHONPATH=build/python, or pip install .), or None where
    it is not importable."""
    try:
        import bubblebench
    except ImportError:
        return None
    return bubblebench if hasattr(bubblebench, "simulate") else None


def find_bubblebench(explicit=None):
    """The simulator for model lines: EXPLICIT (a binary), else the `bubblebench` module where it
    is importable (no process spawned), else the binary $BB_BUBBLEBENCH, `bubblebench` on PATH,
    or ../build/bubblebench beside this package; None if there is none."""
    if explicit is None and simulator_module() is not None:
        return simulator_module()
    here = Path(__file__).resolve().parents[2] / "build" / "bubblebench"
    for c in (explicit, os.environ.get("BB_BUBBLEBENCH"), shutil.which("bubblebench"), here):
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return str(c)
    return None


def _uniform_rows(bubblebench, schedule, P, v, ms) -> Optional[pd.DataFrame]:
    """`sim --t-f 1 --t-b 1 --t-w 1` of every M: through the module's simulate(), or the
    binary's CSV; None on failure."""
    if not isinstance(bubblebench, (str, os.PathLike)):
        try:
            with warnings.catch_warnings():  # refused M values are left out, as in the CSV
                warnings.simplefilter("ignore")
                rows = bubblebench.simulate(str(schedule), P=int(P), M=ms, v=int(v), t_f=1,
                                            t_b=1, t_w=1)
        except ValueError:
            return None
        return pd.DataFrame(rows)
    cmd = [str(bubblebench), "sim", "--schedule", str(schedule), "-P", str(int(P)),
           "-v", str(int(v)), "-M", ",".join(map(str, ms)), "--t-f", "1", "--t-b", "1",
           "--t-w", "1", "--format", "csv"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    if r.returncode != 0 or not r.stdout.strip():
        return None
    try:
        return pd.read_csv(io.StringIO(r.stdout))
    except (ValueError, pd.errors.ParserError):
        return None


def simulate_uniform(bubblebench, schedule, P, v, M_values,
                     sync: str = "barrier") -> Optional[pd.DataFrame]:
    """The simulator's bubble fraction of SCHEDULE at P, v for each M of M_VALUES with
    uniform action times (F = B = W = 1, `bubblebench sim --t-f 1 --t-b 1 --t-w 1`): the
    schedule's own bubble, as the closed forms give it for the schedules that have one.
    BUBBLEBENCH: the `bubblebench` module (find_bubblebench()) or the path of the binary.
    Columns M, bubble_fraction (the single step, or the steady state for sync "none"); M
    values the schedule refuses are left out. None without a simulator or on failure."""
    if not bubblebench:
        return None
    ms = sorted({int(m) for m in M_values if m >= 1})
    if not ms:
        return None
    d = _uniform_rows(bubblebench, schedule, P, v, ms)
    col = "bubble_fraction_steady" if sync == "none" else "bubble_fraction"
    if d is None or col not in d.columns or "M" not in d.columns:
        return None
    return pd.DataFrame({"M": d["M"].astype(float), "bubble_fraction": d[col].astype(float)})
