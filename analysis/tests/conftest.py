"""Fixtures: a results file per design §6, and the report made from it.

`results_file` is a real sweep: with BB_BUILD_DIR set (ctest sets it), it runs

    mpiexec -n 2 $BB_BUILD_DIR/bubblebench run --schedule gpipe,1f1b,interleaved,zb-h1,dualpipe
        -M 2,4,8 -v 2 --compute synthetic ... --out <tmp>/sweep.h5

then appends a single-iteration run and a `--sync none` (steady-state) sweep with --resume,
and a failure of any of them fails the tests. BBANALYSIS_RESULTS=/path/to/file.h5 runs them on
an existing results file instead. Without either (a bare `pytest` in a checkout without a
build), fake_results.py writes a file of exactly the schema src/results/hdf5_file.cpp writes.
The tests only rely on what the schema promises, never on particular numbers.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import h5py
import pytest

TESTS = Path(__file__).resolve().parent
ANALYSIS = TESTS.parent
sys.path.insert(0, str(ANALYSIS))  # bbanalysis without installing it
sys.path.insert(0, str(TESTS))

import fake_results  # noqa: E402


@pytest.fixture(scope="session")
def results_file(tmp_path_factory) -> Path:
    """A bubblebench results file: several schedules, P and M, complete runs only."""
    given = os.environ.get("BBANALYSIS_RESULTS")
    if given:
        return Path(given)
    path = tmp_path_factory.mktemp("results") / "sweep.h5"
    build = os.environ.get("BB_BUILD_DIR")
    if build:
        bb = Path(build) / "bubblebench"
        assert bb.exists(), f"BB_BUILD_DIR={build} has no bubblebench"
        cmd = ["timeout", "300", "mpiexec", "-n", "2", str(bb), "run",
               "--schedule", "gpipe,1f1b,interleaved,zb-h1,dualpipe", "-M", "2,4,8", "-v", "2",
               "--compute", "synthetic", "--t-f", "1ms", "--t-b", "1ms", "--t-w", "1ms",
               "--warmup", "1", "--iters", "3", "--out", str(path)]
        # ... plus one single-iteration run, appended with --resume (its run key differs).
        single = cmd[:7] + ["--schedule", "1f1b", "-M", "4", "--compute", "synthetic",
                            "--t-f", "1ms", "--t-b", "1ms", "--iters", "1", "--resume",
                            "--out", str(path)]
        # ... and steady-state runs (--sync none), where ZB-H2's bubble differs from its
        # single-step one (design §4).
        steady = cmd[:7] + ["--schedule", "1f1b,zb-h2", "-M", "4", "--compute", "synthetic",
                            "--t-f", "1ms", "--t-b", "1ms", "--t-w", "1ms", "--iters", "3",
                            "--sync", "none", "--resume", "--out", str(path)]
        for c in (cmd, single, steady):
            proc = subprocess.run(c, capture_output=True, text=True)
            assert proc.returncode == 0, f"{' '.join(c)}\n{proc.stdout}\n{proc.stderr}"
        return path
    fake_results.write_results_file(path, fake_results.default_sweep())
    return path


def complete_keys(path) -> list:
    """The complete runs of a file, read with h5py alone (independent of bbanalysis)."""
    def text(v):
        return v.decode() if isinstance(v, bytes) else str(v)

    with h5py.File(path, "r") as f:
        return sorted(k for k, g in f["runs"].items()
                      if not k.startswith(".partial-") and isinstance(g, h5py.Group)
                      and text(g.attrs.get("status", "")) == "complete")


def run_cli(*args, cwd=None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ANALYSIS) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("MPLBACKEND", "Agg")
    return subprocess.run([sys.executable, "-m", "bbanalysis", *map(str, args)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="session")
def report(results_file, tmp_path_factory):
    """`python -m bbanalysis report RESULTS --out DIR` once: (out dir, completed process)."""
    out = tmp_path_factory.mktemp("report")
    proc = run_cli("report", results_file, "--out", out)
    return out, proc
