"""Memory over time: the `memory` dataset read back, its chart per run with the measured and
predicted peaks marked, and its section in the report."""
from __future__ import annotations

import math

import h5py
import numpy as np
import pandas as pd

import fake_results
from bbanalysis.loader import MEMORY_KINDS, load_memory, load_ranks, load_runs
from bbanalysis.plots import plot_memory_over_time
from bbanalysis.report import build_report

MEMORY_DTYPE = np.dtype([("rank", "<u4"), ("t_s", "<f8")] + [(k, "<f8") for k in MEMORY_KINDS])


def _with_memory(path):
    """A results file of two 1F1B runs at P = 2, the first with a memory dataset (a rank's
    activations rising to two micro-batches and back) and peak fields in its ranks table."""
    runs = [fake_results.make_run("1f1b", 2, 4, seed=3), fake_results.make_run("gpipe", 2, 4)]
    keys = fake_results.write_results_file(path, runs)
    with h5py.File(path, "a") as f:
        g = f["runs"][keys[0]]
        rows = []
        for r in range(2):
            for t, act, msg in [(0.0, 0, 0), (0.001, 100, 10), (0.002, 200, 20), (0.004, 0, 0)]:
                rows.append((r, t, 1000, act, msg, 50, 0))
        g.create_dataset("memory", data=np.array(rows, dtype=MEMORY_DTYPE))
        ranks = g["ranks"][()]
        dt = np.dtype([(n, ranks.dtype[n]) for n in ranks.dtype.names]
                      + [("peak_memory_bytes", "<u8"), ("peak_memory_bytes_model", "<u8")])
        new = np.zeros(len(ranks), dtype=dt)
        for name in ranks.dtype.names:
            new[name] = ranks[name]
        new["peak_memory_bytes"] = [1300, 1280]
        new["peak_memory_bytes_model"] = [1290, 1270]
        del g["ranks"]
        g.create_dataset("ranks", data=new)
    return keys


def test_memory_dataset_reads_back(tmp_path):
    path = tmp_path / "m.h5"
    keys = _with_memory(path)
    m = load_memory((str(path), keys[0]))
    assert len(m) == 8 and set(m["rank"]) == {0, 1}
    assert list(m["total_bytes"][:3]) == [1050, 1160, 1270]
    assert load_memory((str(path), keys[1])).empty  # a run without the dataset: no rows


def test_chart_marks_measured_and_predicted_peaks(tmp_path):
    path = tmp_path / "m.h5"
    keys = _with_memory(path)
    run = load_runs([path]).set_index("run_key").loc[keys[0]]
    run["run_key"] = keys[0]
    mem = load_memory((str(path), keys[0]))
    g = plot_memory_over_time(mem, load_ranks((str(path), keys[0])), run, tmp_path / "m.png")
    assert g.path.exists() and g.path.stat().st_size > 5000
    p = g.peaks.set_index("rank")
    assert p.loc[0, "live_peak_bytes"] == 1270
    assert p.loc[0, "peak_memory_bytes"] == 1300 and p.loc[1, "peak_memory_bytes_model"] == 1270
    axes = g.fig.axes
    assert len(axes) == 2  # one panel per rank
    # Each panel: the red measured and the dashed predicted line at their heights (KiB here).
    lines = [(ln.get_color(), ln.get_linestyle(), ln.get_ydata()[0] * 1024)
             for ln in axes[0].lines]
    assert ("#C62828", "-", 1300) in lines and ("black", "--", 1290) in lines
    # Without the peak fields (older files) the chart still draws, without the lines.
    g2 = plot_memory_over_time(mem, pd.DataFrame(), run)
    assert all(math.isnan(x) for x in g2.peaks["peak_memory_bytes"])
    assert not g2.fig.axes[0].lines


def test_report_has_a_memory_section_per_run_with_the_dataset(tmp_path):
    path = tmp_path / "m.h5"
    keys = _with_memory(path)
    rep = build_report([path], tmp_path / "out", gantt_keys=[])
    assert [r["run_key"] for r, _ in rep.memory_time] == [keys[0]]
    md = (tmp_path / "out" / "report.md").read_text()
    assert "## Memory over time" in md and f"memory_{keys[0]}.png" in md
    assert "predicted/measured" in md
