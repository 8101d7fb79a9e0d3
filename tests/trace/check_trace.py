#!/usr/bin/env python3
"""Checks Chrome-trace JSON files against the Trace Event Format's rules and this project's
promises (docs/traces.md). Standard library only (Debian's /usr/bin/python3).

  check_trace.py FILE.json... [--flows] [--memory]

For each file:
  - strict JSON (no NaN or Infinity), an object with a list `traceEvents`;
  - each event has the fields its phase needs: X (name, cat, ph, ts, dur >= 0, pid, tid,
    args with kind, chunk, micro_batch, stage; bytes on send/recv slices), M (process_name,
    process_sort_index, thread_name, thread_sort_index with pid, tid where a thread's, args),
    s / f (name, cat, id, pid, tid, ts; an f binds to its enclosing slice: bp "e"),
    C (name, pid, ts, args: one or more series, each a finite number >= 0);
    no other phase;
  - on each (pid, tid) the slices are nested or disjoint (no partial overlap);
  - flows pair up: every id has exactly one s and one f, each inside a slice of its thread;
  - every pid with events has a process name, every (pid, tid) with slices a thread name.
With --flows: at least one flow (a trace of two or more ranks that exchange messages).
With --memory: every process (rank) has a counter track `memory` whose series are exactly the
memory kinds (weights, activations, messages, workspace, runtime; docs/traces.md).
Exit 0 when every file passes, 1 otherwise (each problem on a line, at most 20 per file),
2 on usage errors.
"""
import argparse
import bisect
import json
import math
import sys
from collections import defaultdict

SLICE_ARGS = ("kind", "chunk", "micro_batch", "stage")
COMM_CATS = ("send", "recv")
MEMORY_KINDS = {"weights", "activations", "messages", "workspace", "runtime"}
META_NAMES = ("process_name", "process_sort_index", "thread_name", "thread_sort_index")
EPS = 1e-6  # µs: ts + dur as written and read back may differ in the last bit


def strict_constant(name):
    raise ValueError(f"not strict JSON: {name}")


def is_num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def check_fields(i, e, problems):
    """The fields of event I's phase; False when it cannot be used further."""
    ph = e.get("ph")
    where = f"event {i} ({e.get('name')!r}, ph {ph!r})"
    need = {"X": ("name", "cat", "ts", "dur", "pid", "tid", "args"),
            "M": ("name", "pid", "args"),
            "s": ("name", "cat", "id", "ts", "pid", "tid"),
            "f": ("name", "cat", "id", "ts", "pid", "tid", "bp"),
            "C": ("name", "ts", "pid", "args")}
    if ph not in need:
        problems.append(f"{where}: phase not used by these traces")
        return False
    missing = [k for k in need[ph] if k not in e]
    if missing:
        problems.append(f"{where}: missing {', '.join(missing)}")
        return False
    if not is_int(e["pid"]) or ("tid" in e and not is_int(e["tid"])):
        problems.append(f"{where}: pid/tid not integers")
        return False
    if "ts" in e and not is_num(e["ts"]):
        problems.append(f"{where}: ts {e['ts']!r} is not a finite number")
        return False
    if ph == "X":
        if not is_num(e["dur"]) or e["dur"] < 0:
            problems.append(f"{where}: dur {e['dur']!r} is not a number >= 0")
            return False
        args = e["args"]
        want = SLICE_ARGS + (("bytes",) if e["cat"] in COMM_CATS else ())
        lacking = [k for k in want if not isinstance(args, dict) or k not in args]
        if lacking:
            problems.append(f"{where}: args lack {', '.join(lacking)}")
    elif ph == "M":
        if e["name"] not in META_NAMES:
            problems.append(f"{where}: unknown metadata")
        elif e["name"].startswith("thread") and "tid" not in e:
            problems.append(f"{where}: thread metadata without tid")
        elif e["name"].endswith("_name") and not isinstance(e["args"].get("name"), str):
            problems.append(f"{where}: no name in args")
    elif ph == "C":
        args = e["args"]
        if not isinstance(args, dict) or not args:
            problems.append(f"{where}: a counter needs its series in args")
        elif not all(is_num(v) and v >= 0 for v in args.values()):
            problems.append(f"{where}: counter values must be finite numbers >= 0")
    elif ph == "f" and e["bp"] != "e":
        problems.append(f"{where}: bp {e['bp']!r}, expected 'e' (bind to the enclosing slice)")
    return True


def check_nesting(thread, slices, problems):
    """Slices of one thread: nested or disjoint."""
    slices.sort(key=lambda e: (e["ts"], -e["dur"]))
    stack = []  # (end, name) of the open slices, innermost last
    for e in slices:
        start, end = e["ts"], e["ts"] + e["dur"]
        while stack and stack[-1][0] <= start + EPS:
            stack.pop()
        if stack and end > stack[-1][0] + EPS:
            problems.append(f"pid {thread[0]} tid {thread[1]}: {e['name']!r} [{start}, {end}] "
                            f"overlaps {stack[-1][1]!r} (ends {stack[-1][0]}) without nesting")
        stack.append((end, e["name"]))


def inside_a_slice(ev, slices, starts):
    """Whether EV's ts lies in one of SLICES (sorted by ts; STARTS their ts)."""
    t = ev["ts"]
    k = bisect.bisect_right(starts, t + EPS)
    return any(slices[j]["ts"] + slices[j]["dur"] + EPS >= t for j in range(k - 1, -1, -1))


def check_memory(counters, pids, problems):
    """Every pid has a counter track `memory` with the memory kinds as its series."""
    for pid in sorted(pids):
        track = [e for e in counters.get(pid, []) if e["name"] == "memory"]
        if not track:
            problems.append(f"pid {pid}: no memory counter track")
        elif any(set(e["args"]) != MEMORY_KINDS for e in track):
            problems.append(f"pid {pid}: memory counters need exactly the series "
                            f"{', '.join(sorted(MEMORY_KINDS))}")


def check_doc(doc, want_flows, want_memory=False):
    problems = []
    counters = defaultdict(list)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return ["not an object with a list 'traceEvents'"]
    by_thread = defaultdict(list)
    flows = defaultdict(lambda: {"s": [], "f": []})
    process_names, thread_names, pids = set(), set(), set()
    for i, e in enumerate(doc["traceEvents"]):
        if not isinstance(e, dict):
            problems.append(f"event {i}: not an object")
            continue
        if not check_fields(i, e, problems):
            continue
        ph = e["ph"]
        if ph == "X":
            by_thread[(e["pid"], e["tid"])].append(e)
            pids.add(e["pid"])
        elif ph == "C":
            counters[e["pid"]].append(e)
            pids.add(e["pid"])
        elif ph == "M":
            if e["name"] == "process_name":
                process_names.add(e["pid"])
            elif e["name"] == "thread_name":
                thread_names.add((e["pid"], e["tid"]))
        else:
            flows[e["id"]][ph].append(e)
            pids.add(e["pid"])
    for thread, slices in sorted(by_thread.items()):
        check_nesting(thread, slices, problems)
        if thread not in thread_names:
            problems.append(f"pid {thread[0]} tid {thread[1]}: no thread_name")
    starts = {t: [e["ts"] for e in s] for t, s in by_thread.items()}  # sorted by check_nesting
    for pid in sorted(pids - process_names):
        problems.append(f"pid {pid}: no process_name")
    for fid, ends in flows.items():
        if len(ends["s"]) != 1 or len(ends["f"]) != 1:
            problems.append(f"flow {fid}: {len(ends['s'])} start(s), {len(ends['f'])} end(s)")
            continue
        for ev in (ends["s"][0], ends["f"][0]):
            thread = (ev["pid"], ev["tid"])
            if not inside_a_slice(ev, by_thread.get(thread, []), starts.get(thread, [])):
                problems.append(f"flow {fid}: its {ev['ph']} at {ev['ts']} (pid {ev['pid']} tid "
                                f"{ev['tid']}) lies in no slice of its thread")
    if want_flows and not flows:
        problems.append("no flow events")
    if want_memory:
        check_memory(counters, pids | process_names, problems)
    return problems


def check_file(path, want_flows, want_memory=False):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f, parse_constant=strict_constant)
    except (OSError, ValueError) as err:
        return [f"not readable as strict JSON: {err}"]
    return check_doc(doc, want_flows, want_memory)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--flows", action="store_true", help="require at least one flow")
    ap.add_argument("--memory", action="store_true",
                    help="require a memory counter track per rank")
    a = ap.parse_args(argv)
    bad = 0
    for path in a.files:
        problems = check_file(path, a.flows, a.memory)
        if problems:
            bad += 1
            for p in problems[:20]:
                print(f"{path}: {p}")
            if len(problems) > 20:
                print(f"{path}: ... {len(problems) - 20} more")
    print(f"check_trace: {len(a.files) - bad} of {len(a.files)} traces pass")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
