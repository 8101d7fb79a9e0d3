import math
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest

import fake_results
from conftest import complete_keys, run_cli

from bbanalysis import (NoResultsError, ResultsWarning, find_results_files, load_events,
                        load_ranks, load_runs, load_step_times)
from bbanalysis.loader import RUN_ATTRS, SCHEMA_VERSIONS

DESIGN_ROOT_ATTRS = ("schema_version", "git_sha", "hostname", "slurm_job_id")


def test_one_row_per_complete_run(results_file):
    runs = load_runs(results_file)
    assert sorted(runs["run_key"]) == complete_keys(results_file)
    assert runs["run_key"].is_unique
    assert (runs["path"] == str(results_file)).all()
    assert (runs["status"] == "complete").all()


def test_columns(results_file):
    runs = load_runs([results_file])
    for a in RUN_ATTRS:
        assert a in runs.columns, a
    for a in DESIGN_ROOT_ATTRS:
        assert f"file_{a}" in runs.columns, a
    # The file's own version: 1 from the fake writer, 2 from bubblebench (BB_BUILD_DIR).
    with h5py.File(results_file, "r") as f:
        version = int(f.attrs["schema_version"])
    assert version in SCHEMA_VERSIONS
    assert (runs["file_schema_version"] == version).all()
    for c in ("n_steps", "step_time_s_median", "n_events", "n_ranks"):
        assert c in runs.columns
    assert runs["schedule"].map(type).eq(str).all()
    assert pd.api.types.is_integer_dtype(runs["P"]) and pd.api.types.is_integer_dtype(runs["M"])


def test_events_and_ranks_decoded(results_file):
    runs = load_runs(results_file)
    run = runs.iloc[0]
    ev = load_events(run)
    assert len(ev) == run["n_events"]
    assert ev["kind"].map(type).eq(str).all(), "vlen strings must be decoded to str"
    assert set(ev.columns) >= {"iter", "rank", "chunk", "microbatch", "kind", "t_start_s",
                               "t_end_s", "duration_s", "path", "run_key"}
    assert np.allclose(ev["duration_s"], ev["t_end_s"] - ev["t_start_s"])
    first = int(ev["iter"].min())
    assert (load_events(run, iters=first)["iter"] == first).all()
    assert set(load_events(run, kinds=["F"])["kind"]) <= {"F"}
    rk = load_ranks(runs)
    assert len(rk) == runs["n_ranks"].sum()
    assert rk["host"].map(type).eq(str).all()
    for _, r in runs.iterrows():
        got = rk[rk["run_key"] == r["run_key"]]
        assert sorted(got["rank"]) == list(range(int(r["P"])))
    st = load_step_times(runs.head(3))
    assert len(st) == runs.head(3)["n_steps"].sum()


def _write(path, runs, root=None, extra=None):
    with h5py.File(path, "w") as f:
        for k, v in (root if root is not None else fake_results.root_attrs()).items():
            fake_results._attr(f, k, v)
        f.create_group("runs")
        for status, run in runs:
            key, attrs, steps, events, ranks = run
            if extra:
                attrs = {**attrs, **extra}
            name = key if status != "partial" else ".partial-" + key
            fake_results.write_run(f, name, attrs, steps, events, ranks,
                                   status="complete" if status == "partial" else status)


def test_skips_partial_incomplete_and_foreign_files(tmp_path):
    a = fake_results.make_run("gpipe", 2, 2, iters=1, seed=1)
    b = fake_results.make_run("1f1b", 2, 4, iters=1, seed=2)
    c = fake_results.make_run("1f1b", 2, 8, iters=1, seed=3)
    _write(tmp_path / "one.h5", [("complete", a), ("partial", b), ("running", c)],
           extra={"period_s": 0.25})
    sub = tmp_path / "deeper" / "still"
    sub.mkdir(parents=True)
    _write(sub / "two.h5", [("complete", b), (None, c)])
    (tmp_path / "garbage.h5").write_bytes(b"not hdf5 at all")
    with h5py.File(tmp_path / "foreign.h5", "w") as f:
        f.create_dataset("x", data=[1, 2, 3])
    (tmp_path / "notes.txt").write_text("ignored")
    assert len(find_results_files([tmp_path])) == 4
    with pytest.warns(ResultsWarning) as w:
        runs = load_runs(tmp_path)
    msgs = " ".join(str(x.message) for x in w)
    assert "garbage.h5" in msgs and "foreign.h5" in msgs
    # One warning per skipped group, naming it: the partial one, the one of another status,
    # and the one without a status.
    groups = [str(x.message) for x in w if "/runs/" in str(x.message)]
    assert len(groups) == 3, groups
    assert any(f"one.h5: /runs/.partial-{b[0]}: partial run" in m for m in groups), groups
    assert any(f"one.h5: /runs/{c[0]}: status 'running'" in m for m in groups), groups
    assert any(f"two.h5: /runs/{c[0]}: no status attribute" in m for m in groups), groups
    assert sorted(runs["run_key"]) == sorted([a[0], b[0]])
    # An attribute outside design §6 is kept as a column (NaN where a run lacks it).
    assert "period_s" in runs.columns
    one = runs[runs["path"].str.endswith("one.h5")].iloc[0]
    assert one["period_s"] == pytest.approx(0.25)
    assert math.isnan(runs[runs["path"].str.endswith("two.h5")].iloc[0]["period_s"])


def test_no_results(tmp_path):
    with pytest.raises(NoResultsError):
        load_runs(tmp_path)
    with pytest.raises(FileNotFoundError):
        load_runs(tmp_path / "missing")
    _write(tmp_path / "empty.h5", [])
    with pytest.raises(NoResultsError, match="no complete runs"):
        load_runs(tmp_path)


# --- Array sweeps: task files and merge_index.py's index.h5 -----------------------------------

MERGE_INDEX = Path(__file__).resolve().parents[2] / "jobs" / "merge_index.py"


def _array_folder(root):
    """results/<id>/task-<i>.h5 of a 3-task array, as jobs/sweep-array.sbatch writes them."""
    d = root / "results" / "4242"
    d.mkdir(parents=True)
    keys = []
    for t, (sched, M) in enumerate([("gpipe", 4), ("1f1b", 4), ("1f1b", 8)]):
        keys += fake_results.write_results_file(
            d / f"task-{t}.h5", [fake_results.make_run(sched, 2, M, iters=2, seed=t)])
    return d, sorted(keys)


def _merge(d, *args):
    proc = subprocess.run([sys.executable, str(MERGE_INDEX), str(d), "-q", *map(str, args)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def _load(paths):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        runs = load_runs(paths)
    return runs, [str(x.message) for x in w]


def test_array_folder_counts_each_run_once(tmp_path):
    d, keys = _array_folder(tmp_path)
    _merge(d)  # index.h5: external links to the tasks' runs
    runs, msgs = _load(d)
    assert sorted(runs["run_key"]) == keys
    assert runs["path"].str.contains("task-").all(), "read from the task files themselves"
    assert [m for m in msgs if "index.h5" in m and "3 run(s) are links to" in m
            and "counted once" in m], msgs
    # The index first on the command line: still the task files' rows.
    runs, _ = _load([d / "index.h5", d])
    assert sorted(runs["run_key"]) == keys
    # The index alone: every run once, through its links (named task-<i>.<run_key>).
    runs, msgs = _load(d / "index.h5")
    assert sorted(runs["attr_run_key"]) == keys and not msgs
    # A moved folder: the links are relative.
    moved = tmp_path / "elsewhere" / "4242"
    shutil.move(str(d), str(moved))
    runs, _ = _load(moved.parent)
    assert sorted(runs["run_key"]) == keys


def test_copied_index_counts_each_run_once(tmp_path):
    d, keys = _array_folder(tmp_path)
    _merge(d)
    _merge(d, "--copy", "--out", d / "sweep-4242.h5")  # in the folder too
    _merge(d, "--copy", "--out", tmp_path / "sweep-4242.h5")  # as the README suggests
    runs, msgs = _load([tmp_path / "sweep-4242.h5", d])
    assert sorted(runs["run_key"]) == keys
    assert runs["path"].str.contains("task-").all()
    assert [m for m in msgs if "copies of" in m and "counted once" in m], msgs
    # Without the task files: the copies, once (the links dangle, each skipped with a line).
    for t in range(3):
        (d / f"task-{t}.h5").unlink()
    runs, msgs = _load([tmp_path / "sweep-4242.h5", d])
    assert sorted(runs["attr_run_key"]) == keys
    assert sum("unreadable" in m for m in msgs) == 3, msgs


def test_copy_that_differs_from_its_task_file_is_kept(tmp_path):
    d, keys = _array_folder(tmp_path)
    _merge(d, "--copy")
    # task-0 re-run after the merge: same key, other numbers; both are kept, with a warning.
    fake_results.write_results_file(
        d / "task-0.h5", [fake_results.make_run("gpipe", 2, 4, iters=2, seed=99)])
    runs, msgs = _load(d)
    assert len(runs) == 4
    assert [m for m in msgs if "with other values; both kept" in m], msgs


def test_report_of_an_array_folder(tmp_path):
    d, keys = _array_folder(tmp_path)
    _merge(d)
    proc = run_cli("report", d, "--out", tmp_path / "out", "--gantt", "none")
    assert proc.returncode == 0, proc.stderr
    assert sorted(pd.read_csv(tmp_path / "out" / "summary.csv")["run_key"]) == keys
