#!/usr/bin/python3
"""One collection from the task files of a job array (jobs/sweep-array.sbatch).

    /usr/bin/python3 jobs/merge_index.py results/<array job id> [--expect N] [--copy]
                                                                [--out FILE]

reads every DIR/task-<i>.h5 and writes DIR/index.h5 (atomically: a temporary file renamed
into place), laid out like a results file of design §6, so the analysis opens it like any
other:

  /runs/task-<i>.<run_key>   every complete run of every task file. By default an HDF5
                             *external link* to task-<i>.h5:/runs/<run_key> — nothing is
                             copied, the index is tiny and instant, and h5py/HDF5 follow the
                             links transparently (attributes and datasets read through them).
                             The links are relative (task-<i>.h5), so the directory can be
                             moved or copied as a whole; keep the task files beside index.h5.
                             With --copy the runs are copied instead: one self-contained file
                             (for sending somewhere), as large as all task files together.
  /tasks/task-<i>            the task file's root ("/": external link, or with --copy a group
                             carrying its root attributes): per-task slurm_job_id,
                             slurm_array_task_id, hostname, cmdline, ...
  /run_sources               table (name, task, file, run_key) of the runs above
  / attributes               every root attribute that is the same in all task files
                             (schema_version, tool_version, slurm_array_job_id, ...), plus
                             index_kind ("external-links" | "copy"), index_files, index_runs,
                             index_created_utc

Runs whose status is not "complete" and `.partial-*` groups (a task killed while writing) are
left out. A task file that is missing (with --expect) or unreadable is reported; the index is
still written from the rest, and the exit status is 1. Exit 2: bad arguments or no task file;
4: the index cannot be written.
Needs h5py (Debian: python3-h5py; use /usr/bin/python3).
"""
import argparse
import datetime
import os
import re
import sys

import h5py
import numpy as np

TASK_FILE = re.compile(r"^task-(\d+)\.h5$")


def attr_equal(a, b):
    try:
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    except Exception:  # noqa: BLE001 - incomparable types are simply different
        return False


def as_str(v):
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, np.ndarray) and v.shape == ():
        return as_str(v[()])
    return str(v)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="results/<array job id>: the folder of task-<i>.h5 files")
    ap.add_argument("--out", help="index file (default: DIR/index.h5)")
    ap.add_argument("--copy", action="store_true",
                    help="copy the runs into one self-contained file instead of linking")
    ap.add_argument("--expect", type=int, metavar="N",
                    help="the array had N tasks (0..N-1): report missing ones, exit 1")
    ap.add_argument("-q", "--quiet", action="store_true")
    a = ap.parse_args(argv)

    def say(msg):
        if not a.quiet:
            print(f"merge_index: {msg}")

    d = os.path.abspath(a.dir)
    if not os.path.isdir(d):
        print(f"merge_index: error: no folder {a.dir}", file=sys.stderr)
        return 2
    out = os.path.abspath(a.out or os.path.join(d, "index.h5"))
    tasks = sorted((int(m.group(1)), name) for name in os.listdir(d)
                   if (m := TASK_FILE.match(name)))
    problems = []
    if a.expect is not None:
        have = {t for t, _ in tasks}
        missing = [t for t in range(a.expect) if t not in have]
        if missing:
            problems.append(f"missing task files: {', '.join(f'task-{t}.h5' for t in missing)}")
    if not tasks:
        print(f"merge_index: error: no task-<i>.h5 in {a.dir}", file=sys.stderr)
        for p in problems:
            print(f"merge_index: {p}", file=sys.stderr)
        return 2

    # Read every task file: its root attributes and its complete runs.
    found = []  # (task, file name, root attrs dict, [run keys])
    for t, name in tasks:
        path = os.path.join(d, name)
        try:
            with h5py.File(path, "r") as f:
                attrs = {k: f.attrs[k] for k in f.attrs}
                keys = []
                runs = f.get("runs")
                if isinstance(runs, h5py.Group):
                    for key in sorted(runs):
                        g = runs.get(key)
                        if key.startswith(".") or not isinstance(g, h5py.Group):
                            continue
                        if as_str(g.attrs.get("status", "")) != "complete":
                            continue
                        keys.append(key)
        except (OSError, KeyError) as e:
            problems.append(f"{name}: unreadable ({e})")
            continue
        if not keys:
            problems.append(f"{name}: no complete run")
        found.append((t, name, attrs, keys))
    if not found:
        for p in problems:
            print(f"merge_index: {p}", file=sys.stderr)
        print("merge_index: error: no readable task file", file=sys.stderr)
        return 1

    versions = {as_str(x[2].get("schema_version", "?")) for x in found}
    if len(versions) > 1:
        problems.append(f"task files of different schema versions: {sorted(versions)}")

    # Root attributes common to every task file.
    common = dict(found[0][2])
    for _, _, attrs, _ in found[1:]:
        for k in list(common):
            if k not in attrs or not attr_equal(common[k], attrs[k]):
                del common[k]

    tmp = out + f".tmp-{os.getpid()}"
    out_dir = os.path.dirname(out)
    rows = []
    try:
        with h5py.File(tmp, "w") as idx:
            for k, v in common.items():
                idx.attrs[k] = v
            str_t = h5py.string_dtype()
            idx.attrs["index_kind"] = "copy" if a.copy else "external-links"
            idx.attrs.create("index_files", np.array([n for _, n, _, _ in found], dtype=object),
                             dtype=str_t)
            idx.attrs["index_created_utc"] = datetime.datetime.now(
                datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            runs = idx.create_group("runs")
            tasks_g = idx.create_group("tasks")
            for t, name, attrs, keys in found:
                # links are relative to the index's folder (HDF5 looks beside the parent file)
                rel = os.path.relpath(os.path.join(d, name), out_dir)
                if a.copy:
                    g = tasks_g.create_group(f"task-{t}")
                    for k, v in attrs.items():
                        g.attrs[k] = v
                    with h5py.File(os.path.join(d, name), "r") as src:
                        for key in keys:
                            src.copy(src["runs"][key], runs, name=f"task-{t}.{key}")
                else:
                    tasks_g[f"task-{t}"] = h5py.ExternalLink(rel, "/")
                    for key in keys:
                        runs[f"task-{t}.{key}"] = h5py.ExternalLink(rel, f"/runs/{key}")
                rows += [(f"task-{t}.{key}", t, rel, key) for key in keys]
            dt = np.dtype([("name", str_t), ("task", np.int64), ("file", str_t),
                           ("run_key", str_t)])
            idx.create_dataset("run_sources", data=np.array(rows, dtype=dt))
            idx.attrs["index_runs"] = len(rows)
        os.replace(tmp, out)
    except OSError as e:
        print(f"merge_index: error: cannot write {out}: {e}", file=sys.stderr)
        return 4
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)

    # Read back through the index: every run reachable, status complete.
    with h5py.File(out, "r") as idx:
        for name, *_ in rows:
            if as_str(idx["runs"][name].attrs.get("status", "")) != "complete":
                problems.append(f"{name}: not readable through the index")

    say(f"{out}: {len(rows)} run(s) from {len(found)} task file(s)"
        f" ({'copied' if a.copy else 'external links'})")
    for p in problems:
        print(f"merge_index: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
