#!/usr/bin/python3
"""A results file in the standard HDF5 clients (issue 22): PyTables, pandas and h5py.

usage: standard_clients.py BUBBLEBENCH MPIEXEC H5DUMP_RUNS

1. `mpiexec -n 2 bubblebench run ... --out r.h5` (two schedules, synthetic 1 ms actions; each
   run calibrates its links, so every run has its `links` tables), then `calibrate --out r.h5`
   adds /links: the file is replaced by a new one (a commit: another inode), not changed in
   place, and keeps its runs.
2. EVERY dataset of the file is read with h5py, with PyTables (`tables.open_file`) and with
   pandas (`pd.read_hdf` of a table, else a DataFrame of PyTables' rows); the three agree.
   Each table has the attributes `row` and `<column>_meaning` for every column; events has
   `time_origin`; step_time_s `unit`.
3. What the run used: a CPU run has no cuda_version / nccl_version attribute; the root has
   the build's build_cuda / build_nccl.
4. schema_version 1 (variable-length strings, written here with h5py) is still read by the
   C++ reader (h5dump_runs).
Exit 0 when all holds, else 1 with one line per failure.
"""
import json
import os
import subprocess
import sys
import tempfile
import warnings

import h5py
import numpy as np
import pandas as pd
import tables

fails = []


def fail(msg):
    fails.append(msg)
    print("FAIL:", msg)


def text(x):
    """A cell as comparable text: bytes decoded, NaN (a null real, e.g. rank_mfu without a known
    peak) as "nan", so two readers that both see NaN agree."""
    if isinstance(x, (float, np.floating)) and np.isnan(x):
        return "nan"
    return x.decode() if isinstance(x, (bytes, np.bytes_)) else x


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()[-2000:]}")
    return r


def datasets(path):
    out = []
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: out.append("/" + name)
                     if isinstance(obj, h5py.Dataset) else None)
    return out


def check_dataset(path, name, h5, pt):
    """One dataset in h5py, PyTables and pandas."""
    ds = h5[name]
    a = ds[()]
    node = pt.get_node(name)
    b = node.read()
    if a.dtype.names is None:  # step_time_s: a plain array
        if not np.array_equal(np.asarray(a), np.asarray(b)):
            fail(f"{name}: PyTables reads {b!r}, h5py {a!r}")
        if "unit" not in ds.attrs or "row" not in ds.attrs:
            fail(f"{name}: no unit/row attribute")
        return
    if not isinstance(node, tables.Table):
        fail(f"{name}: PyTables sees a {type(node).__name__}, not a Table")
    if list(b.dtype.names) != list(a.dtype.names):
        fail(f"{name}: PyTables columns {b.dtype.names}, h5py {a.dtype.names}")
        return
    for c in a.dtype.names:
        if a.dtype[c].kind == "O":
            fail(f"{name}.{c}: a variable-length column ({a.dtype[c]})")
        if [text(x) for x in a[c]] != [text(x) for x in b[c]]:
            fail(f"{name}.{c}: PyTables and h5py differ")
        if f"{c}_meaning" not in ds.attrs:
            fail(f"{name}: no {c}_meaning attribute")
    if not str(text(ds.attrs.get("row", ""))):
        fail(f"{name}: no row attribute")
    # pandas: read_hdf of the table (a generic PyTables table), else PyTables' rows.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            df = pd.read_hdf(path, name)
        except Exception as e:  # noqa: BLE001 - reported, then the documented way
            fail(f"{name}: pd.read_hdf: {type(e).__name__}: {e}")
            df = None
    if df is not None:
        if list(df.columns) != list(a.dtype.names) or len(df) != len(a):
            fail(f"{name}: pandas {list(df.columns)} x {len(df)}, h5py {a.dtype.names} x {len(a)}")
        else:
            for c in a.dtype.names:
                if [text(x) for x in df[c]] != [text(x) for x in a[c]]:
                    fail(f"{name}.{c}: pandas and h5py differ")
    df2 = pd.DataFrame(b)
    if len(df2) != len(a):
        fail(f"{name}: pd.DataFrame(PyTables rows) has {len(df2)} rows")


def check_file(path, runs):
    names = datasets(path)
    with h5py.File(path, "r") as h5, tables.open_file(path, "r") as pt:
        root = {k: text(h5.attrs[k]) for k in h5.attrs}
        if root.get("schema_version") != 2:
            fail(f"schema_version {root.get('schema_version')}")
        for k in ("build_cuda", "build_nccl"):
            if not isinstance(root.get(k), str) or not root[k]:
                fail(f"root attribute {k} {root.get(k)!r}")
        for k in ("cuda_version", "nccl_version", "cuda_driver_version"):
            if k in root:
                fail(f"root attribute {k}: what a run used belongs to the run")
        keys = list(h5["runs"])
        if len(keys) != runs:
            fail(f"{len(keys)} runs, expected {runs}")
        for key in keys:
            g = h5["runs"][key]
            if text(g.attrs.get("backend")) != "cpu":
                fail(f"{key}: backend {g.attrs.get('backend')}")
            for k in ("cuda_version", "cuda_driver_version", "nccl_version"):
                if k in g.attrs:
                    fail(f"{key}: a CPU run records {k}={text(g.attrs[k])!r}")
            if "time_origin" not in g["events"].attrs:
                fail(f"{key}: events without time_origin")
            for ds in ("step_time_s", "events", "ranks", "links/samples", "links/fits",
                       "links/regimes"):
                if f"/runs/{key}/{ds}" not in names:
                    fail(f"{key}: no {ds}")
            ev = pd.read_hdf(path, f"/runs/{key}/events")
            kinds = {text(k) for k in ev["kind"]}
            if not ({"F", "SEND_F", "RECV_F"} <= kinds and kinds & {"B", "BW"}):
                fail(f"{key}: event kinds {sorted(kinds)}")
        for name in names:
            check_dataset(path, name, h5, pt)
    return names


def write_v1(path):
    """A schema_version 1 file as bubblebench wrote it: vlen strings in the compounds."""
    s = h5py.string_dtype()
    with h5py.File(path, "w") as f:
        f.attrs["schema_version"] = 1
        f.attrs["cuda_version"] = "none"
        g = f.create_group("runs/r1")
        g.attrs["status"] = "complete"
        g.attrs["iters"] = 1
        g.create_dataset("step_time_s", data=np.array([0.5]))
        ev = np.array([(0, 1, 0, 2, "SEND_F", 0.1, 0.2)],
                      dtype=[("iter", "<u4"), ("rank", "<u4"), ("chunk", "<u4"),
                             ("microbatch", "<u4"), ("kind", s), ("t_start_s", "<f8"),
                             ("t_end_s", "<f8")])
        g.create_dataset("events", data=ev)
        rk = np.array([(0, "hostA", -1, 1.0, 0.5, 0.25, 10, 20, 30, 9, "0-1", 0)],
                      dtype=[("rank", "<u4"), ("host", s), ("device", "<i4"), ("busy_s", "<f8"),
                             ("wait_s", "<f8"), ("comm_s", "<f8"),
                             ("peak_activation_bytes", "<u8"), ("peak_device_bytes", "<u8"),
                             ("param_bytes", "<u8"), ("peak_activation_bytes_model", "<u8"),
                             ("cpus", s), ("mps", "<i8")])
        g.create_dataset("ranks", data=rk)


def main():
    bb, mpiexec, dump = sys.argv[1:4]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.h5")
        run([mpiexec, "-n", "2", bb, "run", "--schedule", "1f1b,zb-h1", "-M", "4", "--hidden",
             "16", "--compute", "synthetic", "--t-f", "1ms", "--t-b", "1ms", "--t-w", "1ms",
             "--iters", "2", "--timeout", "60", "--out", out])
        if fails:
            return 1
        inode = os.stat(out).st_ino
        run([mpiexec, "-n", "2", bb, "calibrate", "--reps", "3", "--warmup", "1",
             "--max-bytes", "4K", "--timeout", "60", "--out", out])
        if os.stat(out).st_ino == inode:
            fail("calibrate --out changed the results file in place (same inode), not by a commit")
        if os.path.exists(out + ".bb-tmp") or os.path.exists(out + ".lock"):
            fail("calibrate --out left its temporary or lock file")
        names = check_file(out, runs=2)
        for t in ("samples", "fits", "regimes"):
            if f"/links/{t}" not in names:
                fail(f"no /links/{t} after calibrate --out")
        print(f"read {len(names)} datasets with h5py, PyTables {tables.__version__} and pandas "
              f"{pd.__version__}")

        v1 = os.path.join(tmp, "v1.h5")
        write_v1(v1)
        r = run([dump, v1])
        if r.returncode == 0:
            d = json.loads(r.stdout)["runs"]["r1"]
            if d["events"] != [[0, 1, 0, 2, "SEND_F", 0.1, 0.2]]:
                fail(f"v1 events read back as {d['events']}")
            k = d["ranks"][0]
            if (k["host"], k["cpus"], k["device"], k["peak_activation_bytes_model"]) != \
                    ("hostA", "0-1", -1, 9):
                fail(f"v1 ranks read back as {k}")
        r = subprocess.run([dump, "--help"], capture_output=True, text=True, timeout=30)
        if r.returncode != 0 or "usage: h5dump_runs" not in r.stdout:
            fail(f"h5dump_runs --help: exit {r.returncode}, {r.stdout!r} {r.stderr!r}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
