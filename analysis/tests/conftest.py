"""Fixtures: a results file per design §6, and the report made from it.

`results_file` is written with h5py by fake_results.py (exactly the schema that
src/results/hdf5_file.cpp writes) until `bubblebench run --out` produces real files; to
switch to a real sweep, make it run e.g.

    mpiexec -n 2 build/bubblebench run --schedule gpipe,1f1b,interleaved -M 2:8:x2 -v 2 \
        --iters 3 --out <tmp>/sweep.h5

and return that path. Meanwhile BBANALYSIS_RESULTS=/path/to/file.h5 runs the tests on an
existing results file. The tests only rely on what the schema promises, never on the fake's
numbers.
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
