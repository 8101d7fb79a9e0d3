"""The Pareto plot of `bubblebench advise` output (bbanalysis.advise): the front, the JSON and
CSV readers, the PNG and the `pareto` command. With BB_BUILD_DIR set, on real advise output
too."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from bbanalysis.advise import load_advice, pareto_front, plot_pareto
from bbanalysis.cli import main


def _row(rank, schedule, M, peak, step, excluded="", recompute=False):
    return {"rank": rank, "schedule": schedule, "M": M, "v": 1, "recompute": recompute,
            "mb_size": 1, "excluded": excluded, "step_time_s": step, "peak_bytes": peak}


# Times per sample (M = 8 for all): 1.0, 1.25, 1.5, 2.0, 1.2 (over the cap: not ranked).
ADVICE = {
    "input": {"P": 4, "memory_cap": 500, "view": "single"},
    "ranked": [
        _row(1, "zb-v", 8, 400, 8.0),
        _row(2, "1f1b", 8, 300, 10.0, recompute=True),
        _row(3, "gpipe", 8, 350, 12.0),  # dominated by #2 (slower, more memory)
        _row(4, "naive", 8, 100, 16.0),
    ],
    "excluded": [
        _row(0, "dualpipe", 8, 900, 9.6, excluded="memory"),
        {"schedule": "interleaved", "M": 8, "v": 1, "recompute": False, "mb_size": 1,
         "excluded": "refused", "reason": "needs v >= 2"},
    ],
}


@pytest.fixture()
def advice_json(tmp_path) -> Path:
    p = tmp_path / "advice.json"
    p.write_text(json.dumps(ADVICE))
    return p


def test_front_is_the_undominated_ranked_configurations(advice_json):
    df = load_advice(advice_json)
    assert len(df) == 6
    front = pareto_front(df)
    assert list(front["schedule"]) == ["zb-v", "1f1b", "naive"]  # fastest first
    assert list(front["rank"]) == [1, 2, 4]


def test_csv_reads_as_the_json(advice_json, tmp_path):
    df = load_advice(advice_json)
    csv = tmp_path / "advice.csv"
    df.drop(columns=["time_per_sample_s"]).to_csv(csv, index=False)
    back = load_advice(csv)
    assert list(pareto_front(back)["rank"]) == [1, 2, 4]
    assert back["recompute"].tolist() == df["recompute"].tolist()


def test_plot_draws_ranked_and_over_the_cap(advice_json, tmp_path):
    pp = plot_pareto(load_advice(advice_json), tmp_path / "p.png")
    assert pp.n_points == 5  # refused has no point
    assert pp.y == "step_time_s"  # one global batch: step time
    assert pp.path.stat().st_size > 10_000


def test_pareto_command(advice_json, tmp_path, capsys):
    assert main(["pareto", str(advice_json), "--out", str(tmp_path / "p.png")]) == 0
    out = capsys.readouterr().out
    assert "3 on the Pareto front" in out
    bad = tmp_path / "bad.json"
    bad.write_text('{"runs": []}')
    assert main(["pareto", str(bad), "--out", str(tmp_path / "q.png")]) == 2


@pytest.mark.skipif(not os.environ.get("BB_BUILD_DIR"), reason="needs BB_BUILD_DIR (ctest)")
def test_real_advise_output(tmp_path):
    bb = Path(os.environ["BB_BUILD_DIR"]) / "bubblebench"
    args = [str(bb), "advise", "-P", "4", "-M", "4:32:x2", "--t-f", "1ms", "--t-b", "1ms",
            "--t-w", "1ms", "--act-bytes", "4M", "--input-bytes", "256K", "--param-bytes",
            "64M", "--memory-cap", "200M"]
    for fmt in ("json", "csv"):
        out = tmp_path / f"a.{fmt}"
        out.write_text(subprocess.run(args + ["--format", fmt], check=True, capture_output=True,
                                      text=True).stdout)
        df = load_advice(out)
        front = pareto_front(df)
        assert front.iloc[0]["rank"] == 1  # the fastest is on the front
        assert (df["excluded"] == "memory").any() and (df["excluded"] == "").any()
        pp = plot_pareto(df, tmp_path / f"p_{fmt}.png")
        assert pp.n_points == int(df["peak_bytes"].notna().sum())
