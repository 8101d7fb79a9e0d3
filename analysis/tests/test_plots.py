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
