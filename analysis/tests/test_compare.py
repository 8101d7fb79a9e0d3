import math
import os

import numpy as np
import pytest

from bbanalysis import (add_bubble_comparison, closed_form_bubble_fraction, load_events,
                        load_runs, summarize)
from bbanalysis.compare import bubble_fraction_per_iteration


@pytest.fixture(scope="module")
def summary(results_file):
    return summarize(load_runs(results_file))


def test_closed_form_is_the_files_model_for_gpipe_1f1b(summary):
    s, _ = summary
    rows = s[s["schedule"].isin(["gpipe", "1f1b"])]
    assert len(rows) > 0, "the fixture must hold gpipe or 1f1b runs"
    P, M = rows["P"].astype(float), rows["M"].astype(float)
    expected = (P - 1) / (M + P - 1)
    assert np.allclose(rows["bubble_fraction_closed_form"], expected, rtol=1e-12, atol=0)
    assert np.allclose(rows["bubble_fraction_model"], expected, rtol=1e-9, atol=1e-12)
    assert (rows["closed_form_check"] == "ok").all()


def test_no_closed_form_mismatch(summary):
    s, _ = summary
    assert not (s["closed_form_check"] == "MISMATCH").any(), s[
        ["run_key", "bubble_fraction_model", "bubble_fraction_closed_form"]]


def test_differences(summary):
    s, _ = summary
    ok = s["bubble_fraction_sim"].notna()
    assert np.allclose(s.loc[ok, "diff_measured_sim"],
                       s.loc[ok, "bubble_fraction_measured"] - s.loc[ok, "bubble_fraction_sim"])
    ok = s["bubble_fraction_model"].notna()
    assert np.allclose(s.loc[ok, "diff_measured_model"],
                       s.loc[ok, "bubble_fraction_measured"] - s.loc[ok, "bubble_fraction_model"])
    assert s.loc[~ok, "diff_measured_model"].isna().all()


def test_both_sync_modes_covered(summary):
    """The fixture holds single-step (--sync barrier) and steady-state (--sync none) runs
    (an existing file given with BBANALYSIS_RESULTS may hold either)."""
    s, _ = summary
    if os.environ.get("BBANALYSIS_RESULTS"):
        pytest.skip("BBANALYSIS_RESULTS: the file's own runs")
    assert set(s["sync"]) == {"barrier", "none"}


def test_view_follows_sync(summary):
    s, _ = summary
    assert set(s["sync"]) <= {"barrier", "none"}
    assert (s["view"] == s["sync"].map({"barrier": "single step", "none": "steady state"})).all()
    steady = s["sync"] == "none"
    # docs/runtime.md: period_s is the steady-state period with --sync none, NaN with barrier.
    assert (s.loc[steady, "period_s"] > 0).all()
    assert s.loc[~steady, "period_s"].isna().all()


def test_bubble_from_events_matches_measured(summary):
    s, _ = summary
    single = s["view"] == "single step"
    ev = s.loc[single, "bubble_fraction_events"]
    assert ev.notna().all()
    assert (ev.between(0, 1)).all()
    # Same definition (design §4) from the same timestamps; 0.01 leaves room for a runtime
    # that times on per-rank clocks.
    assert (s.loc[single, "diff_events_measured"].abs() < 0.01).all()
    # Steady-state runs: the events hold each step from its own start, not the period
    # between steps, so there is no events value in their view (n/a), and no single-step
    # value either, which would not be comparable with their measured one.
    assert s.loc[~single, ["bubble_fraction_events", "diff_events_measured"]].isna().all().all()


def test_per_iteration_bubble(results_file):
    runs = load_runs(results_file)
    run = runs.iloc[0]
    per = bubble_fraction_per_iteration(load_events(run), runs)
    assert len(per) == run["n_steps"]
    assert np.allclose(per["makespan_s"].median(), run["step_time_s_median"], rtol=0.05)


def test_memory_vs_model(summary):
    s, mem = summary
    assert len(mem) == s["n_ranks"].sum()
    ok = mem["peak_activation_bytes_model"] > 0
    assert np.allclose(mem.loc[ok, "activation_ratio"], mem.loc[ok, "peak_activation_bytes"]
                       / mem.loc[ok, "peak_activation_bytes_model"])
    assert np.allclose(mem["diff_activation_bytes"], mem["peak_activation_bytes"].astype(float)
                       - mem["peak_activation_bytes_model"].astype(float))
    assert (s["peak_activation_bytes_max"] > 0).all()


def test_closed_form_function():
    assert closed_form_bubble_fraction("gpipe", 4, 8) == pytest.approx(3 / 11)
    assert closed_form_bubble_fraction("1f1b", 4, 8, 1) == pytest.approx(3 / 11)
    assert closed_form_bubble_fraction("interleaved", 4, 8, 2) == pytest.approx(3 / 19)
    assert closed_form_bubble_fraction("naive", 4, 8) == pytest.approx(0.75)
    for name in ("zb-h1", "zb-h2", "zb-v", "dualpipe", "dualpipev", "csv:x.csv"):
        assert math.isnan(closed_form_bubble_fraction(name, 4, 8, 1))
    assert math.isnan(closed_form_bubble_fraction("gpipe", float("nan"), 8))
    assert math.isnan(closed_form_bubble_fraction("gpipe", 4, 0))


def test_check_flags_a_wrong_model():
    import pandas as pd
    df = pd.DataFrame({"schedule": ["gpipe", "gpipe", "zb-h1"], "P": [4, 4, 4], "M": [8, 8, 8],
                       "v": [1, 1, 1], "bubble_fraction_measured": [0.3, 0.3, 0.2],
                       "bubble_fraction_sim": [0.29, 0.29, 0.2],
                       "bubble_fraction_model": [3 / 11, 0.2, 0.1]})
    out = add_bubble_comparison(df)
    assert list(out["closed_form_check"]) == ["ok", "MISMATCH", "n/a"]
