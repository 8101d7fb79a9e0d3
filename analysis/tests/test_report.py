import re

import h5py
import matplotlib.image as mpimg
import numpy as np
import pandas as pd

from conftest import complete_keys, run_cli

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_report_runs(report):
    out, proc = report
    assert proc.returncode == 0, proc.stderr
    for name in ("summary.csv", "report.md", "bubble_vs_M.png", "peak_activation.png"):
        assert (out / name).is_file(), name
    assert list(out.glob("gantt_*.png")), "at least one timeline"


def test_summary_has_one_row_per_run(report, results_file):
    out, _ = report
    s = pd.read_csv(out / "summary.csv")
    assert sorted(s["run_key"]) == complete_keys(results_file)
    for c in ("bubble_fraction_measured", "bubble_fraction_sim", "bubble_fraction_model",
              "bubble_fraction_closed_form", "diff_measured_sim", "diff_measured_model",
              "file_git_sha", "path", "run_key"):
        assert c in s.columns, c


def test_summary_closed_form_for_gpipe_1f1b(report):
    out, _ = report
    s = pd.read_csv(out / "summary.csv")
    rows = s[s["schedule"].isin(["gpipe", "1f1b"])]
    assert len(rows) > 0
    expected = (rows["P"] - 1) / (rows["M"] + rows["P"] - 1)
    assert np.allclose(rows["bubble_fraction_closed_form"], expected, rtol=1e-12)
    assert np.allclose(rows["bubble_fraction_model"], expected, rtol=1e-9)


def test_every_png_is_a_real_picture(report):
    out, _ = report
    md = (out / "report.md").read_text()
    linked = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", md)
    pngs = sorted(out.glob("*.png"))
    assert pngs and sorted(linked) == sorted(p.name for p in pngs)
    for p in pngs:
        assert p.read_bytes()[:8] == PNG_MAGIC, p.name
        assert p.stat().st_size > 10_000, p.name
        img = mpimg.imread(p)
        assert img.ndim == 3 and img.shape[1] > 400 and img.shape[0] > 200, (p.name, img.shape)
        assert img[..., :3].std() > 0.05, f"{p.name} looks blank"


def test_report_md_and_terminal_tables(report):
    out, proc = report
    md = (out / "report.md").read_text()
    s = pd.read_csv(out / "summary.csv")
    assert ("| schedule | P | M | v | sync | view | measured | sim | model | closed form |"
            in md)
    for sched in s["schedule"].unique():
        assert f"| {sched} |" in md
        assert sched in proc.stdout
    assert "closed form" in proc.stdout and "meas−sim" in proc.stdout


def test_no_results_is_exit_2(tmp_path):
    (tmp_path / "README.txt").write_text("no results here")
    proc = run_cli("report", tmp_path, "--out", tmp_path / "out")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bbanalysis: error:"), proc.stderr
    assert "no results" in lines[0]


def test_missing_path_is_exit_2(tmp_path):
    proc = run_cli("report", tmp_path / "nope", "--out", tmp_path / "out")
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1


def test_file_without_complete_runs_is_exit_2(tmp_path):
    import fake_results
    fake_results.write_results_file(tmp_path / "empty.h5", [])
    proc = run_cli("report", tmp_path, "--out", tmp_path / "out")
    assert proc.returncode == 2
    assert "no complete runs" in proc.stderr


def test_chosen_timeline(results_file, tmp_path):
    key = complete_keys(results_file)[0]
    proc = run_cli("report", results_file, "--out", tmp_path, "--gantt", key)
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in tmp_path.glob("gantt_*.png")] == [f"gantt_{key}.png"]
    proc = run_cli("report", results_file, "--out", tmp_path / "x", "--gantt", "no-such-run")
    assert proc.returncode == 2 and "no-such-run" in proc.stderr


def test_skipped_groups_warn_one_line_each(tmp_path):
    import fake_results
    runs = [fake_results.make_run("gpipe", 2, m, iters=1, seed=m) for m in (2, 4, 8, 16, 32)]
    with h5py.File(tmp_path / "r.h5", "w") as f:
        for k, v in fake_results.root_attrs().items():
            fake_results._attr(f, k, v)
        f.create_group("runs")
        for (key, attrs, steps, events, ranks), (name, status) in zip(
                runs, [("{}", "complete"), (".partial-{}", "complete"), ("{}", "running"),
                       ("{}", None), ("{}", "complete")]):
            fake_results.write_run(f, name.format(key), attrs, steps, events, ranks,
                                   status=status)
        broken = h5py.h5o.get_info(f["runs"][runs[4][0]].id).addr
    with open(tmp_path / "r.h5", "r+b") as raw:  # the last run's object header: gone
        raw.seek(broken)
        raw.write(b"\xff" * 64)
    proc = run_cli("report", tmp_path / "r.h5", "--out", tmp_path / "out", "--gantt", "none")
    assert proc.returncode == 0, proc.stderr
    warned = [line for line in proc.stderr.splitlines() if line.startswith("bbanalysis: warning:")]
    assert len(warned) == 4, proc.stderr
    for (key, *_), why in zip(runs[1:], ("partial run", "status 'running'", "no status",
                                         "unreadable")):
        hits = [line for line in warned if key in line and why in line and "skipped" in line]
        assert len(hits) == 1, (key, why, proc.stderr)
    assert pd.read_csv(tmp_path / "out" / "summary.csv")["run_key"].tolist() == [runs[0][0]]


def test_steady_state_rows_are_labelled(report):
    out, proc = report
    s = pd.read_csv(out / "summary.csv")
    md = (out / "report.md").read_text()
    rows = [line for line in md.splitlines() if line.startswith("| ") and "| sync |" not in line]
    for view in ("single step", "steady state"):
        n = int((s["view"] == view).sum())
        mine = [line for line in rows if f"| {view} |" in line]
        assert len(mine) == n, (view, mine)
        # "from events" (the last column): a value in the single-step view, n/a in steady state
        assert all(line.endswith("| n/a |") == (view == "steady state") for line in mine), mine
        if n:
            assert view in proc.stdout
    if (s["view"] == "steady state").any():
        assert "steady state" in md and "n/a for" in proc.stdout


def _same_sweep_twice(tmp_path):
    """a/sweep.h5 and b/sweep.h5: the same two configurations measured twice (same keys)."""
    import fake_results
    for i, sub in enumerate(("a", "b")):
        (tmp_path / sub).mkdir()
        runs = [fake_results.make_run(s, 2, 4, iters=2, seed=10 * i + j)
                for j, s in enumerate(("1f1b", "gpipe"))]
        fake_results.write_results_file(tmp_path / sub / "sweep.h5", runs)
    return runs[0][0]


def test_a_run_key_in_two_files_must_be_named_with_its_file(tmp_path):
    key = _same_sweep_twice(tmp_path)
    a, b = tmp_path / "a" / "sweep.h5", tmp_path / "b" / "sweep.h5"
    proc = run_cli("gantt", tmp_path, "--run", key, "--out", tmp_path / "g.png")
    assert proc.returncode == 2, proc.stderr
    assert f"{a}:{key}" in proc.stderr and f"{b}:{key}" in proc.stderr, proc.stderr
    assert not (tmp_path / "g.png").exists()
    proc = run_cli("gantt", tmp_path, "--run", f"{b}:{key}", "--out", tmp_path / "g.png")
    assert proc.returncode == 0, proc.stderr
    assert str(b) in proc.stdout and (tmp_path / "g.png").is_file()
    proc = run_cli("report", tmp_path, "--out", tmp_path / "r1", "--gantt", key)
    assert proc.returncode == 2 and f"{a}:{key}" in proc.stderr, proc.stderr
    proc = run_cli("report", tmp_path, "--out", tmp_path / "r2", "--gantt", f"{a}:{key}",
                   "--gantt", f"{b}:{key}")
    assert proc.returncode == 0, proc.stderr
    names = sorted(p.name for p in (tmp_path / "r2").glob("gantt_*.png"))
    assert names == [f"gantt_{key}.a_sweep.png", f"gantt_{key}.b_sweep.png"], names
    md = (tmp_path / "r2" / "report.md").read_text()
    assert f"`{key}` in `{a}`" in md and f"`{key}` in `{b}`" in md


def test_runs_table_shows_the_step_spread_once(report):
    out, _ = report
    md = (out / "report.md").read_text()
    header = next(line for line in md.splitlines()
                  if line.startswith("| schedule | P | M | v | sync | step ms"))
    cols = [c.strip() for c in header.strip("|").split("|")]
    assert {"step ms median", "step ms min", "step ms max", "spread %"} <= set(cols), cols
    assert "makespan ms" not in cols  # the median step again
    s = pd.read_csv(out / "summary.csv")
    assert (s["step_time_s_min"] <= s["step_time_s_median"]).all()
    assert (s["step_time_s_median"] <= s["step_time_s_max"]).all()
