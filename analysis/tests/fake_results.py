"""Writes bubblebench results files (design §6, schema_version 1) with h5py, for the tests.

What the tests use where no bubblebench build is at hand (conftest.py runs a real sweep when
there is one). The layout mirrors src/results/hdf5_file.cpp (scalar attributes as int64 /
float64 / vlen UTF-8 strings; 1-D chunked, shuffled, deflated datasets; compound `events` and
`ranks` with vlen UTF-8 string members). The numbers come from a small dataflow simulation of
each schedule with noisy per-action times, so the timelines, waits and peaks look like a real
run's; nothing in the tests depends on them beyond what the schema promises.

Runs with sync="none" stand for `--sync none`: their measured and simulated fractions are in
the steady-state view (docs/runtime.md), with the period of a step taken as its longest
per-rank span (design §4, regular schedules) plus an optimizer step; the events and
step_time_s stay those of each step on its own, as the runtime writes them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import h5py
import numpy as np

STR = h5py.string_dtype("utf-8")
EVENT_DTYPE = np.dtype(
    [
        ("iter", "<u4"),
        ("rank", "<u4"),
        ("chunk", "<u4"),
        ("microbatch", "<u4"),
        ("kind", STR),
        ("t_start_s", "<f8"),
        ("t_end_s", "<f8"),
    ]
)
RANK_DTYPE = np.dtype(
    [
        ("rank", "<u4"),
        ("host", STR),
        ("device", "<i4"),
        ("busy_s", "<f8"),
        ("wait_s", "<f8"),
        ("comm_s", "<f8"),
        ("peak_activation_bytes", "<u8"),
        ("peak_device_bytes", "<u8"),
        ("param_bytes", "<u8"),
        ("peak_activation_bytes_model", "<u8"),
    ]
)

COMPUTE = ("F", "B", "W", "BW")


# --- Schedules: per-rank action lists (kind, chunk, microbatch) -------------------------------


def schedule_lists(schedule: str, P: int, M: int, v: int = 1):
    """Static per-rank orders (as `bubblebench show` prints them); zb-h1 is dynamic (None)."""
    out = []
    for s in range(P):
        if schedule == "naive":
            acts = [a for m in range(M) for a in (("F", s, m), ("BW", s, m))]
        elif schedule == "gpipe":
            acts = [("F", s, m) for m in range(M)] + [("BW", s, m) for m in range(M)]
        elif schedule == "1f1b":
            w = min(P - s - 1, M)
            acts = [("F", s, m) for m in range(w)]
            for i in range(M - w):
                acts += [("F", s, w + i), ("BW", s, i)]
            acts += [("BW", s, m) for m in range(M - w, M)]
        elif schedule == "interleaved":
            assert M % P == 0 and v >= 2
            fseq = [(j * P + s, m) for g in range(M // P) for j in range(v)
                    for m in range(g * P, g * P + P)]
            bseq = [(j * P + s, m) for g in range(M // P) for j in reversed(range(v))
                    for m in range(g * P, g * P + P)]
            n = len(fseq)
            w = min((P - s - 1) * 2 + (v - 1) * P, n)
            acts = [("F",) + fseq[i] for i in range(w)]
            for i in range(n - w):
                acts += [("F",) + fseq[w + i], ("BW",) + bseq[i]]
            acts += [("BW",) + b for b in bseq[n - w:]]
        elif schedule == "zb-h1":
            return None
        else:
            raise ValueError(schedule)
        out.append(acts)
    return out


# --- Simulation -------------------------------------------------------------------------------


@dataclass
class Timeline:
    events: list = field(default_factory=list)  # (rank, chunk, mb, kind, start, end)
    peak_units: list = field(default_factory=list)  # per rank, micro-batch-stage units


def simulate(schedule, P, M, v, cost, latency, rng=None, noise=0.0):
    """As-soon-as-possible dataflow run of one step. cost(kind) -> seconds for one stage."""
    C = P * v
    chunk_rank = lambda k: k % P  # noqa: E731  (looped placement)
    share = 1.0 / v
    done = {}  # (kind, chunk, mb) -> end time
    lists = schedule_lists(schedule, P, M, v)
    ptr = [0] * P
    free = [0.0] * P
    tl = Timeline()
    live = [0.0] * P
    peak = [0.0] * P
    # zb-h1 state
    fb_order = None
    pending_w = [[] for _ in range(P)]
    if lists is None:  # zb-h1: 1F1B order of F and B; W placed greedily
        fb_order = []
        for s in range(P):
            w = min(P - s - 1, M)
            acts = [("F", s, m) for m in range(w)]
            for i in range(M - w):
                acts += [("F", s, w + i), ("B", s, i)]
            acts += [("B", s, m) for m in range(M - w, M)]
            fb_order.append(acts)
        lists = fb_order
    live_mb = [0] * P

    def dep(act):
        kind, k, m = act
        if kind == "F":
            return None if k == 0 else ("F", k - 1, m)
        if kind in ("B", "BW"):
            return ("F", k, m) if k == C - 1 else (kind, k + 1, m)
        return ("B", k, m)  # W

    def arrival(act, rank):
        d = dep(act)
        if d is None:
            return 0.0
        if d not in done:
            return None
        return done[d] + (0.0 if chunk_rank(d[1]) == rank else latency)

    def dur(kind):
        base = cost(kind) * share
        if noise and rng is not None:
            base *= math.exp(rng.normal(0.0, noise))
        return base

    total = sum(len(a) for a in lists) + (P * M if fb_order else 0)
    n_done = 0
    while n_done < total:
        best = None
        for r in range(P):
            nxt = lists[r][ptr[r]] if ptr[r] < len(lists[r]) else None
            if fb_order is not None:
                if nxt is None:
                    if pending_w[r]:
                        cand = (free[r], r, pending_w[r][0], True)
                    else:
                        continue
                else:
                    arr = arrival(nxt, r)
                    limited = nxt[0] == "F" and live_mb[r] >= P
                    if not limited and arr is not None and arr <= free[r]:
                        cand = (free[r], r, nxt, False)
                    elif pending_w[r]:
                        cand = (free[r], r, pending_w[r][0], True)
                    elif arr is not None and not limited:
                        cand = (arr, r, nxt, False)
                    else:
                        continue
            else:
                if nxt is None:
                    continue
                arr = arrival(nxt, r)
                if arr is None:
                    continue
                cand = (max(free[r], arr), r, nxt, False)
            if best is None or cand[:2] < best[:2]:
                best = cand
        if best is None:
            raise RuntimeError(f"{schedule} P={P} M={M} v={v}: deadlock in the fake simulator")
        start, r, act, is_w = best
        kind, k, m = act
        if start > free[r]:
            tl.events.append((r, k, m, "wait", free[r], start))
        end = start + dur(kind)
        d = dep(act)
        if d is not None and chunk_rank(d[1]) != r:  # the message this action received
            src = chunk_rank(d[1])
            send_kind = "SEND_F" if kind == "F" else "SEND_B"
            recv_kind = "RECV_F" if kind == "F" else "RECV_B"
            t0 = done[d]
            tl.events.append((src, d[1], m, send_kind, t0, t0 + latency))
            tl.events.append((r, k, m, recv_kind, t0, t0 + latency))
        tl.events.append((r, k, m, kind, start, end))
        done[act] = end
        free[r] = end
        if kind == "F":
            live[r] += share
            live_mb[r] += 1
        elif kind in ("BW", "W"):
            live[r] -= share
            live_mb[r] -= 1
        peak[r] = max(peak[r], live[r])
        if is_w:
            pending_w[r].pop(0)
        else:
            ptr[r] += 1
            if kind == "B":
                pending_w[r].append(("W", k, m))
        n_done += 1
    tl.peak_units = peak
    return tl


def bubble_fraction(events, P):
    comp = [e for e in events if e[3] in COMPUTE]
    T = max(e[5] for e in comp) - min(e[4] for e in comp)
    busy = sum(e[5] - e[4] for e in comp)
    return 1.0 - busy / (P * T)


def closed_form(schedule, P, M, v):
    if schedule in ("gpipe", "1f1b"):
        return (P - 1) / (M + P - 1)
    if schedule == "interleaved":
        return (P - 1) / (v * M + P - 1)
    if schedule == "naive":
        return 1 - 1 / P
    return float("nan")


# --- Writing ----------------------------------------------------------------------------------


def _attr(obj, name, value):
    if isinstance(value, str):
        obj.attrs.create(name, value, dtype=STR)
    elif isinstance(value, (bool, int, np.integer)):
        obj.attrs.create(name, np.int64(value), dtype="<i8")
    else:
        obj.attrs.create(name, np.float64(value), dtype="<f8")


def _dataset(group, name, data):
    n = len(data)
    group.create_dataset(name, data=data, maxshape=(None,), chunks=(max(1, min(n, 4096)),),
                         shuffle=True, compression="gzip", compression_opts=4)


def root_attrs(**extra):
    attrs = {
        "schema_version": 1,
        "tool_version": "0.1.0",
        "git_sha": "74968ba",
        "created_utc": "2025-01-01T00:00:00Z",
        "hostname": "node01",
        "cmdline": "mpiexec -n 4 build/bubblebench run --schedule all -M 4:16:x2 --out r.h5",
        "mpi_library": "MPICH Version: 4.0.2",
        "cuda_version": "",
        "nccl_version": "",
        "slurm_job_id": "",
        "slurm_array_job_id": "",
        "slurm_array_task_id": "",
    }
    attrs.update(extra)
    return attrs


def run_key(schedule, P, M, v, recompute=0, sync="barrier"):
    return f"{schedule}_P={P}_M={M}_v={v}_r={recompute}_sync={sync}"


def steady_period(events, t_opt):
    """A step's period when steps run back to back: its longest per-rank span (first compute
    start to last compute end on one rank) plus the optimizer step."""
    span = {}
    for r, _, _, kind, a, b in events:
        if kind in COMPUTE:
            lo, hi = span.get(r, (a, b))
            span[r] = (min(lo, a), max(hi, b))
    return max(hi - lo for lo, hi in span.values()) + t_opt


def bubble_fraction_steady(events, P, t_opt):
    busy = sum(e[5] - e[4] for e in events if e[3] in COMPUTE)
    return 1.0 - busy / (P * steady_period(events, t_opt))


def make_run(schedule, P, M, v=1, *, iters=4, warmup=1, seed=0, t_f=2e-3, t_b=4e-3, t_w=0.0,
             latency=1.5e-4, hidden=1024, layers=2, mb_size=256, sync="barrier", t_opt=2e-3,
             extra_attrs=None):
    """One run: (key, attrs, step_time_s, events array, ranks array). sync: "barrier" (the
    single-step view) or "none" (steady state; t_opt: the optimizer step's time)."""
    assert sync in ("barrier", "none"), sync
    rng = np.random.default_rng(seed)
    if schedule == "zb-h1":
        t_w = t_w or t_f
        t_b = t_f
    costs = {"F": t_f, "B": t_b, "W": t_w, "BW": t_b + t_w}
    ev_rows, fractions, steps, periods = [], [], [], []
    per_rank = {r: {"busy": [], "wait": [], "comm": []} for r in range(P)}
    durations = {k: [] for k in costs}
    peak_units = None
    for it in range(iters):
        tl = simulate(schedule, P, M, v, costs.__getitem__, latency, rng, noise=0.05)
        peak_units = tl.peak_units
        comp = [e for e in tl.events if e[3] in COMPUTE]
        t0 = min(e[4] for e in comp)
        steps.append(max(e[5] for e in comp) - t0)
        if sync == "barrier":
            fractions.append(bubble_fraction(tl.events, P))
        else:
            fractions.append(bubble_fraction_steady(tl.events, P, t_opt))
            periods.append(steady_period(tl.events, t_opt))
        for (r, k, m, kind, a, b) in tl.events:
            ev_rows.append((it, r, k, m, kind, a, b))
            if kind in COMPUTE:
                per_rank[r]["busy"].append((it, b - a))
                durations[kind].append((b - a) * v)
            elif kind == "wait":
                per_rank[r]["wait"].append((it, b - a))
            else:
                per_rank[r]["comm"].append((it, b - a))
    med = {k: float(np.median(d)) if d else float("nan") for k, d in durations.items()}
    t_f_s = med["F"]
    t_b_s = med["BW"] if schedule != "zb-h1" else med["B"]
    t_w_s = med["W"] if schedule == "zb-h1" else 0.0
    sim_costs = {"F": t_f_s, "B": t_b_s, "W": t_w_s, "BW": t_b_s + t_w_s}
    sim = simulate(schedule, P, M, v, sim_costs.__getitem__, latency)
    attrs = {
        "schedule": schedule, "P": P, "M": M, "v": v, "backend": "cpu", "transport": "mpi",
        "compute": "gemm", "hidden": hidden, "layers": layers, "mb_size": mb_size,
        "dtype": "fp32", "recompute": 0, "warmup": warmup, "iters": iters,
        "t_f_s": t_f_s, "t_b_s": t_b_s, "t_w_s": t_w_s,
        "makespan_s": float(np.median(steps)),
        "bubble_fraction_measured": float(np.median(fractions)),
        "bubble_fraction_model": closed_form(schedule, P, M, v),
        "bubble_fraction_sim": (bubble_fraction(sim.events, P) if sync == "barrier"
                                else bubble_fraction_steady(sim.events, P, t_opt)),
        "check": "pass",
        "sync": sync,
        "run_key": run_key(schedule, P, M, v, sync=sync),
        "period_s": float(np.median(periods)) if periods else float("nan"),
        "overhead_us_per_action": 12.5,
        "stage": "mlp", "seq": 0, "heads": 0, "ffn": 0, "causal": 0,
    }
    # The attribution of an even, free-link fake: the simulated bubble is all schedule, the
    # rest of the measured one residual (the terms add up to the measured fraction).
    attrs.update({"attribution_schedule": attrs["bubble_fraction_sim"],
                  "attribution_imbalance": 0.0, "attribution_jitter": 0.0,
                  "attribution_communication": 0.0,
                  "attribution_residual": attrs["bubble_fraction_measured"]
                  - attrs["bubble_fraction_sim"]})
    if extra_attrs:
        attrs.update(extra_attrs)
    events = np.array(ev_rows, dtype=EVENT_DTYPE)
    # Activation bytes of one micro-batch through one stage: X, Z=XW1, A=act(Z) per layer.
    layers_per_stage = layers * v
    unit = layers_per_stage * mb_size * hidden * 9 * 4
    param = layers_per_stage * 2 * 4 * hidden * hidden * 4
    rk = []
    for r in range(P):
        def med_of(xs):
            by_iter = {}
            for it, d in xs:
                by_iter[it] = by_iter.get(it, 0.0) + d
            return float(np.median(list(by_iter.values()))) if by_iter else 0.0

        model = int(round(peak_units[r] * unit))
        # The interleaved fake keeps the chunk-boundary receive buffers too (+3 %).
        measured = int(model * 1.03) if schedule == "interleaved" else model
        rk.append((r, "node01", -1, med_of(per_rank[r]["busy"]), med_of(per_rank[r]["wait"]),
                   med_of(per_rank[r]["comm"]), measured, measured + param * 4 + (64 << 20),
                   param, model))
    ranks = np.array(rk, dtype=RANK_DTYPE)
    return attrs["run_key"], attrs, np.array(steps, dtype="<f8"), events, ranks


def write_run(h5file, key, attrs, step_time_s, events, ranks, *, status="complete"):
    runs = h5file.require_group("runs")
    g = runs.create_group(key)
    for k, val in attrs.items():
        _attr(g, k, val)
    _dataset(g, "step_time_s", step_time_s)
    _dataset(g, "events", events)
    _dataset(g, "ranks", ranks)
    if status is not None:
        _attr(g, "status", status)
    return g


def write_results_file(path, runs, root=None):
    """runs: iterable of make_run() tuples. Returns the keys written."""
    keys = []
    with h5py.File(path, "w") as f:
        for k, val in (root or root_attrs()).items():
            _attr(f, k, val)
        f.create_group("runs")
        for key, attrs, steps, events, ranks in runs:
            write_run(f, key, attrs, steps, events, ranks)
            keys.append(key)
    return keys


def default_sweep():
    """The sweep of the `results_file` fixture: five schedules over P and M, single-step
    (sync barrier) and a few steady-state (sync none) runs."""
    runs, seed = [], 1
    for schedule, P, Ms, v, sync in [
        ("naive", 4, (4, 8), 1, "barrier"),
        ("gpipe", 4, (4, 8, 16), 1, "barrier"),
        ("1f1b", 4, (4, 8, 16), 1, "barrier"),
        ("interleaved", 4, (4, 8, 16), 2, "barrier"),
        ("zb-h1", 4, (4, 8, 16), 1, "barrier"),
        ("gpipe", 2, (2, 4, 8), 1, "barrier"),
        ("1f1b", 2, (2, 4, 8), 1, "barrier"),
        ("1f1b", 4, (4, 8, 16), 1, "none"),
        ("zb-h1", 4, (4, 8, 16), 1, "none"),
    ]:
        for M in Ms:
            runs.append(make_run(schedule, P, M, v, seed=seed, sync=sync))
            seed += 1
    # One run with a single timed iteration: its Gantt chart shows every event of the run.
    runs.append(make_run("1f1b", 3, 6, 1, iters=1, seed=seed))
    return runs
