#!/usr/bin/python3
"""Checks what `bubblebench run --out/--trace` wrote (tests/mpi; Debian's python3 + h5py).

usage:
  check_results.py hdf5 FILE.h5 --lowered DIR --dump DUMP.json --runs N [--iters N]
      every root attribute and run attribute of design §6 with its type; step_time_s has
      `iters` rows; events: every lowered action (compute and SEND/RECV) of every rank for
      every timed iteration, exactly once (the lowered lists: DIR/<schedule>_M<M>.csv from
      `bubblebench show --lowered --format csv`); ranks; the same values read by the C++
      reader (DUMP.json from h5dump_runs); the analysis loader reads the file.
  check_results.py keys FILE.h5
      prints `key<TAB>sha1 of step_time_s` of every complete run (one per line) after
      checking that every visible run is complete.
  check_results.py trace DIR --lowered DIR --runs N
      each DIR/<run_key>.json: one compute slice per compute action and one comm slice per
      SEND/RECV of each rank's lowered list (the last timed iteration), on the threads named
      compute / send K / recv K, waits on the thread named wait (docs/traces.md).
"""
import argparse
import hashlib
import json
import math
import os
import re
import socket
import sys
from collections import Counter
from pathlib import Path

fails = []


def fail(msg):
    fails.append(msg)


ROOT_ATTRS = {
    "schema_version": int, "tool_version": str, "git_sha": str, "created_utc": str,
    "hostname": str, "cmdline": str, "mpi_library": str, "build_cuda": str,
    "build_nccl": str, "slurm_job_id": str, "slurm_array_job_id": str,
    "slurm_array_task_id": str,
}
RUN_ATTRS = {
    "schedule": str, "P": int, "M": int, "v": int, "backend": str, "transport": str,
    "compute": str, "hidden": int, "layers": int, "mb_size": int, "dtype": str,
    "recompute": int, "warmup": int, "iters": int, "status": str, "t_f_s": float,
    "t_b_s": float, "t_w_s": float, "makespan_s": float, "bubble_fraction_measured": float,
    "bubble_fraction_model": float, "bubble_fraction_sim": float, "check": str, "sync": str,
    "period_s": float,
}
EVENT_FIELDS = [("iter", "u4"), ("rank", "u4"), ("chunk", "u4"), ("microbatch", "u4"),
                ("kind", "O"), ("t_start_s", "f8"), ("t_end_s", "f8")]
# The ranks table's columns, in order: the run record's field table's rank columns, as the
# generated analysis/bbanalysis/run_fields.json lists them (one list, src/harness/fields.cpp).
RANK_FIELDS = json.loads((Path(__file__).resolve().parents[2] / "analysis" / "bbanalysis" /
                          "run_fields.json").read_text())["rank_fields"]
MEMORY_FIELDS = ["rank", "t_s", "weights", "activations", "messages", "workspace", "runtime"]
COMPUTE = {"F", "B", "W", "BW", "FB"}
COMM = {"SEND_F", "RECV_F", "SEND_B", "RECV_B"}


def value(v):
    import numpy as np
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, np.generic):
        return v.item()
    return v


def typed(v, t):
    if t is int:
        return isinstance(v, int) and not isinstance(v, bool)
    if t is float:
        return isinstance(v, float)
    return isinstance(v, str)


def parse_lowered(path):
    """Per rank: list of (kind, chunk, mb, name) of `show --lowered --format csv`."""
    ranks = []
    for line in Path(path).read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        acts = []
        for cell in line.split(","):
            m = re.fullmatch(r"\((\d+)F(\d+);(\d+)(BW|B)(\d+)\)FB", cell)
            if m:
                acts.append(("FB", int(m[1]), int(m[2]), cell))
                continue
            m = re.fullmatch(r"(\d+)(SEND_F|RECV_F|SEND_B|RECV_B|BW|F|B|W)(\d+)", cell)
            if not m:
                fail(f"{path}: cannot parse action {cell!r}")
                continue
            acts.append((m[2], int(m[1]), int(m[3]), cell))
        ranks.append(acts)
    return ranks


def lowered_for(lowered_dir, schedule, M):
    return parse_lowered(Path(lowered_dir) / f"{schedule}_M{M}.csv")


def same(a, b):
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, float) and math.isnan(a):
        return b is None
    if isinstance(b, float) and math.isnan(b):
        return a is None
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and abs(a - b) <= 1e-12 * max(1, abs(a))
    return a == b


def check_hdf5(a):
    import h5py
    import numpy as np
    import numpy as np
    dump = json.load(open(a.dump))
    with h5py.File(a.file, "r") as f:
        root = {k: value(f.attrs[k]) for k in f.attrs}
        for k, t in ROOT_ATTRS.items():
            if k not in root:
                fail(f"root attribute {k} missing")
            elif not typed(root[k], t):
                fail(f"root attribute {k}={root[k]!r} is not {t.__name__}")
        if root.get("schema_version") != 2:
            fail(f"schema_version {root.get('schema_version')}")
        if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", str(root.get("created_utc"))):
            fail(f"created_utc {root.get('created_utc')!r} is not ISO 8601 UTC")
        if root.get("hostname") != socket.gethostname():
            fail(f"hostname {root.get('hostname')!r}")
        if "--out" not in str(root.get("cmdline")) or " run " not in str(root.get("cmdline")):
            fail(f"cmdline {root.get('cmdline')!r}")
        if not str(root.get("mpi_library")) or "\n" in str(root.get("mpi_library")):
            fail(f"mpi_library {root.get('mpi_library')!r}")
        for k in ("slurm_job_id", "slurm_array_job_id", "slurm_array_task_id"):
            if root.get(k) != os.environ.get(k.upper(), ""):
                fail(f"{k}={root.get(k)!r}")
        if not root.get("git_sha") or not root.get("tool_version"):
            fail("git_sha / tool_version empty")
        for k, v in root.items():
            if not same(v, dump["root"].get(k)):
                fail(f"root {k}: h5py {v!r} vs C++ {dump['root'].get(k)!r}")

        runs = f["runs"]
        names = list(runs.keys())
        if any(n.startswith(".partial-") for n in names):
            fail(f"partial runs left: {names}")
        if len(names) != a.runs:
            fail(f"{len(names)} runs, expected {a.runs}: {names}")
        if set(names) != set(dump["runs"]):
            fail(f"C++ reader sees runs {sorted(dump['runs'])}, h5py {sorted(names)}")
        for key in names:
            g = runs[key]
            at = {k: value(g.attrs[k]) for k in g.attrs}
            for k, t in RUN_ATTRS.items():
                if k not in at:
                    fail(f"{key}: attribute {k} missing")
                elif not typed(at[k], t):
                    fail(f"{key}: attribute {k}={at[k]!r} is not {t.__name__}")
            if any(k not in at for k in RUN_ATTRS):
                continue
            if at["status"] != "complete" or at["check"] not in ("pass", "skipped"):
                fail(f"{key}: status {at['status']} check {at['check']}")
            for k in ("cuda_version", "cuda_driver_version", "nccl_version"):
                if k in at and at["backend"] != "cuda":  # what the run used, not the build
                    fail(f"{key}: a {at['backend']} run records {k}")
            if at.get("run_key") != key:
                fail(f"{key}: run_key attribute {at.get('run_key')!r}")
            if not key.startswith(f"{at['schedule']}_P={at['P']}_M={at['M']}_v={at['v']}_"):
                fail(f"{key}: key does not start with the configuration")
            if at["iters"] != a.iters:
                fail(f"{key}: iters {at['iters']}")
            for k in ("t_f_s", "t_b_s", "makespan_s", "bubble_fraction_measured",
                      "bubble_fraction_sim"):
                if not math.isfinite(at[k]) or at[k] < 0:
                    fail(f"{key}: {k}={at[k]}")
            if not (0 <= at["bubble_fraction_measured"] < 1 and 0 <= at["bubble_fraction_sim"] < 1):
                fail(f"{key}: bubble fractions out of [0, 1)")
            has_model = at["schedule"] in ("gpipe", "1f1b", "naive", "interleaved")
            if has_model != math.isfinite(at["bubble_fraction_model"]):
                fail(f"{key}: bubble_fraction_model {at['bubble_fraction_model']}")
            if at["sync"] == "barrier" and not math.isnan(at["period_s"]):
                fail(f"{key}: period_s {at['period_s']} with --sync barrier")
            for k, v in at.items():
                if not same(v, dump["runs"][key]["attrs"].get(k)):
                    fail(f"{key}: attr {k}: h5py {v!r} vs C++ {dump['runs'][key]['attrs'].get(k)!r}")

            st = g["step_time_s"]
            if st.dtype != np.float64 or st.shape != (a.iters,):
                fail(f"{key}: step_time_s {st.dtype} {st.shape}")
            steps = st[()]
            if not (steps > 0).all():
                fail(f"{key}: step_time_s {steps}")
            if abs(float(np.median(steps)) - at["makespan_s"]) > 1e-12:
                fail(f"{key}: makespan_s {at['makespan_s']} != median(step_time_s)")
            if list(steps) != dump["runs"][key]["step_time_s"]:
                fail(f"{key}: step_time_s differs from the C++ reader")

            ev = g["events"]
            got_fields = [n for n in ev.dtype.names]
            if got_fields != [n for n, _ in EVENT_FIELDS]:
                fail(f"{key}: events fields {got_fields}")
                continue
            for n, t in EVENT_FIELDS:
                if t != "O" and ev.dtype[n] != np.dtype(t):
                    fail(f"{key}: events.{n} is {ev.dtype[n]}")
            e = ev[()]
            lowered = lowered_for(a.lowered, at["schedule"], at["M"])
            want_n = at["iters"] * sum(len(r) for r in lowered)
            if len(e) != want_n:
                fail(f"{key}: {len(e)} events, expected iters x lowered actions = {want_n}")
            if len(e) != len(dump["runs"][key]["events"]):
                fail(f"{key}: the C++ reader sees {len(dump['runs'][key]['events'])} events")
            got = Counter()
            for row, crow in zip(e, dump["runs"][key]["events"]):
                kind = value(row["kind"])
                got[(int(row["iter"]), int(row["rank"]), kind, int(row["chunk"]),
                     int(row["microbatch"]))] += 1
                if not row["t_start_s"] <= row["t_end_s"]:
                    fail(f"{key}: event {row} ends before it starts")
                if not -0.01 < row["t_start_s"] < 60:
                    fail(f"{key}: event {row} far from the step's start")
                if [int(row["iter"]), int(row["rank"]), int(row["chunk"]), int(row["microbatch"]),
                        kind, float(row["t_start_s"]), float(row["t_end_s"])] != crow:
                    fail(f"{key}: event {row} vs C++ {crow}")
                    break
            want = Counter((it, r, kind, c, m) for it in range(at["iters"])
                           for r, acts in enumerate(lowered) for kind, c, m, _ in acts)
            if got != want:
                missing = list((want - got).elements())[:5]
                extra = list((got - want).elements())[:5]
                fail(f"{key}: events differ from the lowered lists: missing {missing} extra {extra}")
            # Per iteration, the compute events on the common time line span the step time.
            for it in range(at["iters"]):
                comp = [r for r in e if r["iter"] == it and value(r["kind"]) in COMPUTE]
                span = max(r["t_end_s"] for r in comp) - min(r["t_start_s"] for r in comp)
                if abs(span - steps[it]) > 1e-9:
                    fail(f"{key}: iteration {it}: compute events span {span}, step_time_s {steps[it]}")

            rk = g["ranks"][()]
            if list(rk.dtype.names) != RANK_FIELDS:
                fail(f"{key}: ranks fields {rk.dtype.names}")
                continue
            if [int(x) for x in rk["rank"]] != list(range(at["P"])):
                fail(f"{key}: ranks {rk['rank']}")
            for row, crow in zip(rk, dump["runs"][key]["ranks"]):
                if value(row["host"]) != socket.gethostname() or int(row["device"]) != -1:
                    fail(f"{key}: rank {row['rank']} host {row['host']} device {row['device']}")
                if not (row["busy_s"] > 0 and row["wait_s"] >= 0 and row["comm_s"] >= 0):
                    fail(f"{key}: rank times {row}")
                model = int(row["peak_activation_bytes_model"])
                meas = int(row["peak_activation_bytes"])
                # The model counts the F-time footprint (9·L·b·h floats per chunk-micro-batch),
                # the runtime also what B keeps for W (10·L·b·h): model <= measured <= 10/9 model.
                if not (0 < model <= meas <= model * 10 / 9 + 1):
                    fail(f"{key}: rank {row['rank']}: peak bytes {meas} vs model {model}")
                cpus = value(row["cpus"])  # e.g. "0-1": the rank's affinity list
                if not cpus or not all(p.replace("-", "").isdigit() for p in cpus.split(",")) \
                        or int(row["mps"]) != 0:
                    fail(f"{key}: rank {row['rank']}: cpus {cpus!r} mps {row['mps']}")
                if int(row["param_bytes"]) <= 0 and at["compute"] == "gemm":
                    fail(f"{key}: param_bytes {row['param_bytes']}")
                for k in RANK_FIELDS:
                    if not same(value(row[k]), crow[k]):
                        fail(f"{key}: ranks.{k}: h5py {row[k]} vs C++ {crow[k]}")
                # The memory model: within 5 % of the allocator's peak (docs/memory.md).
                pm, pp = int(row["peak_memory_bytes"]), int(row["peak_memory_bytes_model"])
                if not (pm > 0 and abs(pp / pm - 1) <= 0.05):
                    fail(f"{key}: rank {row['rank']}: peak memory {pm}, model {pp}")
            # Memory over the last timed step: every rank's live bytes by kind, in time order,
            # never negative, never above the rank's predicted peak.
            mem = g["memory"][()]
            if list(mem.dtype.names) != MEMORY_FIELDS:
                fail(f"{key}: memory fields {mem.dtype.names}")
                continue
            for r in range(at["P"]):
                m = mem[mem["rank"] == r]
                total = sum(m[k] for k in MEMORY_FIELDS[2:])
                if len(m) == 0 or (total < 0).any() or not (np.diff(m["t_s"]) > 0).all():
                    fail(f"{key}: rank {r}: memory samples {m}")
                elif total.max() > int(rk["peak_memory_bytes_model"][r]) + 1:
                    fail(f"{key}: rank {r}: live bytes {total.max()} above the model's peak")

    # The analysis package reads the real file.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "analysis"))
    try:
        from bbanalysis import loader
        runs = loader.load_runs(a.file)
        if len(runs) != a.runs:
            fail(f"bbanalysis.load_runs: {len(runs)} runs")
        events = loader.load_events(runs)
        if len(events) == 0:
            fail("bbanalysis.load_events: no events")
    except Exception as ex:  # noqa: BLE001
        fail(f"bbanalysis cannot read the file: {ex!r}")


def check_keys(a):
    import h5py
    with h5py.File(a.file, "r") as f:
        for key in sorted(f["runs"].keys()):
            if key.startswith(".partial-"):
                continue  # a crash mid-write: not a run (readers skip it, --resume drops it)
            g = f["runs"][key]
            if value(g.attrs.get("status", "")) != "complete":
                fail(f"{key}: visible with status {g.attrs.get('status')!r}")
                continue
            digest = hashlib.sha1(g["step_time_s"][()].tobytes()).hexdigest()
            g["events"][()], g["ranks"][()]  # readable, every byte of them
            print(f"{key}\t{digest}")


def check_trace(a):
    files = sorted(Path(a.dir).glob("*.json"))
    if len(files) != a.runs:
        fail(f"{len(files)} trace files in {a.dir}, expected {a.runs}")
    for path in files:
        m = re.match(r"(.+?)_P=(\d+)_M=(\d+)_", path.name)
        if not m:
            fail(f"{path.name}: not a run_key name")
            continue
        schedule, P, M = m[1], int(m[2]), int(m[3])
        lowered = lowered_for(a.lowered, schedule, M)
        doc = json.load(open(path))
        slices = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
        meta = [e for e in doc["traceEvents"] if e.get("ph") == "M" and e["name"] == "process_name"]
        if sorted(e["pid"] for e in meta) != list(range(P)):
            fail(f"{path.name}: process names for pids {[e['pid'] for e in meta]}")
        # Threads by name (docs/traces.md): compute, wait, send K, recv K.
        tname = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"]
                 if e.get("ph") == "M" and e["name"] == "thread_name"}

        def lane(e):
            return tname.get((e["pid"], e["tid"]), "?").split(" ")[0]

        for r, acts in enumerate(lowered):
            mine = [e for e in slices if e["pid"] == r]
            compute = Counter(e["name"] for e in mine if lane(e) == "compute")
            comm = Counter(e["name"] for e in mine if lane(e) in ("send", "recv"))
            want_compute = Counter(n for k, _, _, n in acts if k in COMPUTE)
            want_comm = Counter(n for k, _, _, n in acts if k in COMM)
            if compute != want_compute:
                fail(f"{path.name}: rank {r}: compute slices {dict(compute)} != {dict(want_compute)}")
            if comm != want_comm:
                fail(f"{path.name}: rank {r}: comm slices {dict(comm)} != {dict(want_comm)}")
            for e in mine:
                if e["dur"] < 0 or lane(e) not in ("compute", "wait", "send", "recv"):
                    fail(f"{path.name}: bad slice {e}")
                if lane(e) == "wait" and (e["cat"] != "wait" or e["dur"] <= 0):
                    fail(f"{path.name}: bad wait slice {e}")
                if lane(e) in ("send", "recv") and e["cat"] != lane(e):
                    fail(f"{path.name}: bad comm slice {e}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["hdf5", "keys", "trace"])
    ap.add_argument("file", nargs="?")
    ap.add_argument("--dir")
    ap.add_argument("--lowered")
    ap.add_argument("--dump")
    ap.add_argument("--runs", type=int, default=0)
    ap.add_argument("--iters", type=int, default=3)
    a = ap.parse_args()
    if a.mode == "hdf5":
        check_hdf5(a)
    elif a.mode == "keys":
        check_keys(a)
    else:
        a.dir = a.dir or a.file
        check_trace(a)
    for f in fails[:40]:
        print("FAIL:", f, file=sys.stderr)
    if a.mode != "keys":
        print(f"{a.mode}: {len(fails)} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
