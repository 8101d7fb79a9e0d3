"""Closed-form bubble fractions (design §4), computed here from P, M, v alone.

This is an independent cross-check of the file's `bubble_fraction_model` (written by the
C++ model): the two must agree wherever a form is listed below. Schedules whose published
form needs the per-action times (ZB-H1/H2, ZB-V, DualPipe, DualPipeV) get NaN here.
"""
from __future__ import annotations

import math

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
    return str(schedule).strip().lower() in ("naive", "gpipe", "afab", "1f1b", "interleaved")
