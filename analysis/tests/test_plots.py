import os
from pathlib import Path

import pandas as pd
import pytest

from bbanalysis import (add_bubble_comparison, load_events, load_runs, plot_bubble_vs_m,
                        plot_gantt)
from bbanalysis.plots import KIND_COLORS, representative_iteration


@pytest.fixture(scope="module")
def runs(results_file):
    return add_bubble_comparison(load_runs(results_file))


def test_gantt_one_bar_per_event(runs, tmp_path):
    for _, run in runs.drop_duplicates("schedule").iterrows():
        ev = load_events(run)
        g = plot_gantt(ev, run, tmp_path / f"{run['run_key']}.png")
        of_iter = ev[ev["iter"] == g.iteration]
        assert g.n_events == len(of_iter)
        assert g.n_bars == len(of_iter), run["run_key"]
        assert len(g.ax.patches) == g.n_bars  # the figure really holds one rectangle each
        assert g.counts == of_iter["kind"].value_counts().to_dict()
        assert g.iteration == representative_iteration(ev)
        assert g.path.stat().st_size > 10_000


def test_gantt_of_a_single_iteration_run_draws_every_event(runs, tmp_path):
    single = runs[runs["n_steps"] == 1]
    if single.empty:
        pytest.skip("no run with one timed iteration in this results file")
    run = single.iloc[0]
    g = plot_gantt(load_events(run), run, tmp_path / "one.png")
    assert g.n_bars == run["n_events"]


def test_gantt_colours_and_legend_for_every_kind(tmp_path):
    rows = []
    t = 0.0
    for kind in ["F", "B", "W", "BW", "FB", "wait", "SEND_F", "RECV_F", "SEND_B", "RECV_B",
                 "OPT"]:
        rows.append(dict(iter=0, rank=len(rows) % 2, chunk=0, microbatch=len(rows), kind=kind,
                         t_start_s=t, t_end_s=t + 1e-3))
        t += 1e-3
    ev = pd.DataFrame(rows)
    g = plot_gantt(ev, None, tmp_path / "kinds.png")
    assert g.n_bars == len(ev)
    labels = [t.get_text() for t in g.fig.legends[0].get_texts()]
    for kind in ["F", "B", "W", "BW", "FB", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "OPT"]:
        assert any(lab.split()[0] == kind for lab in labels), (kind, labels)
    assert any("wait" in lab for lab in labels)
    # Each compute kind is drawn in its own colour.
    from matplotlib.colors import to_hex
    colours = {}
    for p in g.ax.patches:
        colours.setdefault(to_hex(p.get_facecolor(), keep_alpha=False), 0)
    for k, c in KIND_COLORS.items():
        assert to_hex(c) in colours, k


def test_gantt_rejects_bad_input():
    with pytest.raises(ValueError):
        plot_gantt(pd.DataFrame(columns=["iter", "rank", "kind", "t_start_s", "t_end_s"]))


def test_bubble_plot_draws_every_run(runs, tmp_path):
    b = plot_bubble_vs_m(runs, tmp_path / "b.png")
    assert b.n_measured == runs["bubble_fraction_measured"].notna().sum()
    assert b.n_sim == runs["bubble_fraction_sim"].notna().sum()
    assert set(b.schedules) == set(runs["schedule"])
    for ax in b.axes:
        assert "M" in ax.get_xlabel() and "bubble fraction" in ax.get_ylabel()


def test_bubble_plot_series_split_by_sync(runs, tmp_path):
    if runs["sync"].nunique() < 2:
        pytest.skip("one sync mode in this results file")
    b = plot_bubble_vs_m(runs, tmp_path / "b.png")
    for ax, sched in zip(b.axes, b.schedules):
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        for sync in runs.loc[runs["schedule"] == sched, "sync"].unique():
            assert any(f"sync={sync}" in lab for lab in labels), (sched, sync, labels)


def _attribution_runs():
    terms = {"1f1b": (0.26, 0.09, 0.0, 0.12, 0.01, 0.04),
             "zb-v": (0.19, 0.03, 0.34, -0.24, 0.0, 0.06)}
    return pd.DataFrame([dict(schedule=s, P=2, M=8, v=2, sync="barrier",
                              bubble_fraction_measured=m, attribution_schedule=a,
                              attribution_imbalance=b, attribution_jitter=c,
                              attribution_communication=d, attribution_residual=e)
                         for s, (m, a, b, c, d, e) in terms.items()])


def test_attribution_bars_stack_to_the_measured_fraction(tmp_path):
    from bbanalysis import plot_attribution
    runs = _attribution_runs()
    p = plot_attribution(runs, tmp_path / "attribution.png")
    assert p.labels == ["1f1b", "zb-v"]
    assert p.n_segments == 8  # the zero terms (one per run) are not drawn
    assert len(p.ax.patches) == 8
    # Positive segments end where the positive terms' sum ends; negative ones start left of 0.
    for i, (_, row) in enumerate(runs.iterrows()):
        bars = [r for r in p.ax.patches if abs(r.get_y() + r.get_height() / 2 - i) < 1e-9]
        pos = sum(float(row[c]) for c in runs.columns
                  if c.startswith("attribution_") and float(row[c]) > 0)
        neg = sum(float(row[c]) for c in runs.columns
                  if c.startswith("attribution_") and float(row[c]) < 0)
        assert max(r.get_x() + r.get_width() for r in bars) == pytest.approx(pos)
        assert min(r.get_x() for r in bars) == pytest.approx(min(neg, 0.0))
        assert pos + neg == pytest.approx(row["bubble_fraction_measured"])
    assert p.path.stat().st_size > 10_000


def test_attribution_without_the_columns_draws_nothing(tmp_path):
    from bbanalysis import plot_attribution
    runs = _attribution_runs().drop(columns=[c for c in _attribution_runs().columns
                                             if c.startswith("attribution_")])
    p = plot_attribution(runs, tmp_path / "none.png")
    assert p.labels == [] and p.n_segments == 0


def test_bubble_plot_panels_share_one_y_scale_with_zero_inside(runs, tmp_path):
    b = plot_bubble_vs_m(runs, tmp_path / "b.png")
    limits = {ax.get_ylim() for ax in b.axes}
    assert len(limits) == 1, limits  # comparable panels
    lo, hi = limits.pop()
    assert lo < 0 < hi  # a point at 0 is drawn whole, not cut by the axis


def test_bubble_plot_legend_names_no_section_the_reader_lacks(runs, tmp_path):
    b = plot_bubble_vs_m(runs, tmp_path / "b.png")
    texts = [t.get_text() for leg in b.fig.legends for t in leg.get_texts()]
    assert not any("design §4" in t and "docs/design.md" not in t for t in texts), texts


def _fake_sim(tmp_path):
    """A stand-in `bubblebench` whose `sim --format csv` answers 0.25 at every M."""
    exe = tmp_path / "bubblebench"
    exe.write_text("#!/bin/sh\n"
                   "M=$(echo \"$@\" | sed 's/.*-M \\([0-9,]*\\).*/\\1/')\n"
                   "echo schedule,P,M,v,bubble_fraction,bubble_fraction_steady\n"
                   "for m in $(echo $M | tr , ' '); do echo x,2,$m,1,0.25,0.125; done\n")
    exe.chmod(0o755)
    return str(exe)


def test_schedules_without_closed_form_get_the_simulators_uniform_line(runs, tmp_path):
    from bbanalysis.model import has_closed_form, simulate_uniform
    assert simulate_uniform(None, "zb-h1", 2, 1, [4, 8]) is None
    d = simulate_uniform(_fake_sim(tmp_path), "zb-h1", 2, 1, [4, 5, 6])
    assert list(d["M"]) == [4, 5, 6] and (d["bubble_fraction"] == 0.25).all()
    d = simulate_uniform(_fake_sim(tmp_path), "zb-h1", 2, 1, [4], sync="none")
    assert list(d["bubble_fraction"]) == [0.125]
    b = plot_bubble_vs_m(runs, tmp_path / "b.png", bubblebench=_fake_sim(tmp_path))
    for ax, sched in zip(b.axes, b.schedules):
        dashed = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
        if has_closed_form(sched):
            assert not dashed, sched
        else:
            # 0.25: a single-step series; 0.125: a steady-state (sync none) one
            assert dashed and all(set(ln.get_ydata()) <= {0.25, 0.125} for ln in dashed), sched


def test_the_module_draws_the_uniform_line_without_a_process(monkeypatch):
    """Where the bubblebench module is importable (ctest sets PYTHONPATH), find_bubblebench()
    picks it and simulate_uniform() spawns no process: the binary's values, refused M left out."""
    from bbanalysis import model
    mod, build = model.simulator_module(), os.environ.get("BB_BUILD_DIR")
    if mod is None or not build:
        pytest.skip("needs the bubblebench module (PYTHONPATH=build/python) and BB_BUILD_DIR")
    assert model.find_bubblebench() is mod
    binary = str(Path(build) / "bubblebench")
    want = {sync: model.simulate_uniform(binary, "dualpipe", 4, 1, [1, 2, 4, 8], sync)
            for sync in ("barrier", "none")}

    def no_process(*args, **kwargs):
        raise AssertionError("spawned a process")

    monkeypatch.setattr(model.subprocess, "run", no_process)
    for sync, frame in want.items():
        got = model.simulate_uniform(mod, "dualpipe", 4, 1, [1, 2, 4, 8], sync)
        assert list(got["M"]) == list(frame["M"]) and len(got) < 4  # M=1 refused
        pd.testing.assert_frame_equal(got, frame)
    assert model.simulate_uniform(mod, "nope", 4, 1, [4]) is None


def test_bubble_plot_subtitle_clears_the_first_rows_titles(runs, tmp_path):
    """The figure's subtitle (two lines: what is compared, the configuration) sits above every
    panel's title with room between them, as drawn in the PNG: with the nine schedules of
    `make run` (three rows of panels) too."""
    zb = runs[runs["schedule"] == "zb-h1"]
    nine = pd.concat([runs] + [zb.assign(schedule=s)
                               for s in ("zb-h2", "zb-v", "dualpipe", "dualpipev")])
    for data in (runs, nine):
        b = plot_bubble_vs_m(data, tmp_path / "b.png")
        renderer = b.fig.canvas.get_renderer()
        subtitle = b.fig._suptitle.get_window_extent(renderer)
        assert "\n" in b.fig._suptitle.get_text()
        gap = 4 / 72 * b.fig.dpi  # 4 points
        for ax in b.axes:
            title = ax.title.get_window_extent(renderer)
            assert title.y1 + gap < subtitle.y0, (len(b.axes), ax.get_title(), title.y1,
                                                  subtitle.y0)
