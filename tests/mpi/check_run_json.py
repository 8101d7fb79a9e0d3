#!/usr/bin/python3
"""Checks the JSON of `bubblebench run --format json` (tests/mpi).

usage: check_run_json.py MODE FILE [options]
  check    every configuration's --check passed
  peaks    runtime peak activations per rank == bb::peak_activations (units), exactly
  timing   measured bubble fraction within --tol of the simulator (every schedule) and of
           the closed form (--model-schedules, default gpipe,1f1b,interleaved)
  same-model  every configuration runs the same model (--model-layers): one model_params and
           model_layers, and one loss at step 0 (loss_step0 of --check, within 1e-6
           relative); each of --schedules (comma-separated) is among them
  metrics  the study's metrics (docs/run-record.md, "Metrics") present and sane: 0 < utilisation
           <= 1 per run and rank, communication shares in [0, 1), FLOPs per rank > 0 adding up
           to the run's (null with synthetic compute), FLOP/s = FLOPs / T, peak memory >= the
           allocator's peak >= the parameters, no MFU on CPU
Common: --min-configs N (at least N configurations in the file). The file must be strict JSON
(strict_json.py: no NaN/Infinity, no duplicate keys).
"""
import argparse
import sys
from pathlib import Path

from strict_json import load


SCHEDULES = {s["name"]: s for s in load(str(Path(__file__).resolve().parents[2] / "analysis" /
                                            "bbanalysis" / "schedules.json"))}


def chunk_fraction(name, v):
    """The share of a stage one chunk of schedule NAME holds (registry facts): 1/v with v chunks
    per rank, except DualPipe's two copies of a P-stage model (a whole stage per chunk)."""
    s = SCHEDULES.get(name)
    if s is None:  # csv:FILE keeps its own v
        return 1.0 / v
    if s["placement"] == "dualpipe":
        return 1.0
    return 1.0 / (s["fixed_v"] or v)


def metric_problems(r):
    """What is wrong with run R's metrics (empty: nothing)."""
    out = []
    P = r["P"]
    T = r["period_s"] if r["sync"] == "none" else r["makespan_s"]
    # --sync none: a step's busy time need not fit in one period (steps overlap): no bound of 1.
    top = 1 if r["sync"] == "barrier" else float("inf")
    if not 0 < r["utilisation"] <= top:
        out.append(f"utilisation {r['utilisation']} not in (0, 1]")
    if abs(r["utilisation"] - (1 - r["bubble_fraction_measured"])) > 1e-12:
        out.append("utilisation != 1 - bubble_fraction_measured")
    if not 0 <= r["comm_share"] < 1:
        out.append(f"comm_share {r['comm_share']} not in [0, 1)")
    for key in ["rank_utilisation", "rank_comm_share", "rank_flops", "rank_flops_per_s",
                "rank_mfu", "runtime_bytes", "peak_memory_bytes"]:
        if len(r.get(key, [])) != P:
            out.append(f"{key}: not one value per rank")
            return out
    for k in range(P):
        u, c = r["rank_utilisation"][k], r["rank_comm_share"][k]
        if not 0 < u <= top + 1e-12:
            out.append(f"rank {k}: utilisation {u} not in (0, 1]")
        if abs(u - r["busy_s"][k] / T) > 1e-9:
            out.append(f"rank {k}: utilisation != busy_s / T")
        if not 0 <= c < 1:
            out.append(f"rank {k}: comm_share {c} not in [0, 1)")
        # Synthetic compute allocates no parameters (param_bytes is their accounting only).
        params = 0 if r["compute"] == "synthetic" else r["param_bytes"][k]
        if not r["peak_memory_bytes"][k] >= r["peak_device_bytes"][k] >= params:
            out.append(f"rank {k}: peak_memory_bytes >= peak_device_bytes >= param_bytes fails")
        if r["backend"] == "cpu" and (r["runtime_bytes"][k] != 0 or r["rank_mfu"][k] is not None):
            out.append(f"rank {k}: CPU with runtime_bytes or an MFU")
    if r["compute"] == "synthetic":
        if r["flops"] is not None or r["flops_per_s"] is not None:
            out.append("synthetic compute with FLOPs")
        return out
    if min(r["rank_flops"]) <= 0:
        out.append(f"rank FLOPs {r['rank_flops']} not all > 0")
    if abs(sum(r["rank_flops"]) - r["flops"]) > 1e-9 * r["flops"]:
        out.append("flops != the sum of rank_flops")
    if abs(r["flops_per_s"] - r["flops"] / T) > 1e-9 * r["flops_per_s"]:
        out.append("flops_per_s != flops / T")
    if r["backend"] == "cpu" and r["mfu"] is not None:
        out.append("an MFU on CPU")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["check", "peaks", "timing", "same-model", "metrics"])
    ap.add_argument("file")
    ap.add_argument("--min-configs", type=int, default=1)
    ap.add_argument("--tol", type=float, default=0.02)
    ap.add_argument("--model-schedules", default="gpipe,1f1b,interleaved")
    ap.add_argument("--schedules", default="")
    a = ap.parse_args()
    rows = load(a.file)
    fails = []
    if len(rows) < a.min_configs:
        fails.append(f"{len(rows)} configurations, expected >= {a.min_configs}")
    for r in rows:
        name = f"{r['schedule']} P={r['P']} M={r['M']} v={r['v']} recompute={r['recompute']}"
        if a.mode == "check":
            if r["check"] != "pass":
                fails.append(f"{name}: check {r['check']}: {r.get('check_message', '')}")
        elif a.mode == "peaks":
            got, want = r["peak_activations"], r["peak_activations_schedule"]
            if len(got) != r["P"] or any(abs(g - w) > 1e-9 for g, w in zip(got, want)):
                fails.append(f"{name}: peak activations {got} != schedule {want}")
            # Bytes: a held micro-batch keeps 9·L·b·h elements per chunk after F (b·h with
            # recompute) and 10·L·b·h after B, of the run's dtype (bf16: 2 bytes);
            # n = peak chunk-micro-batches held. MLP stages
            # only: a transformer's sizes (docs/transformer.md) are tested in the unit tests.
            if "_transformer_" in r["run_key"] or r["layers"] == 0:  # 0: uneven (--model-layers)
                continue
            frac = chunk_fraction(r["schedule"], r["v"])
            size = 2 if r["dtype"] == "bf16" else 4
            act = size * r["layers"] * r["mb_size"] * r["hidden"]  # bytes of L·b·h elements
            low = (size * r["mb_size"] * r["hidden"]) if r["recompute"] else 9 * act
            for units, b in zip(got, r["peak_activation_bytes"]):
                n = units / frac
                if not (low * n - 1e-6 <= b <= 10 * act * n + 1e-6):
                    fails.append(f"{name}: peak bytes {b} outside [{low * n}, {10 * act * n}]")
        elif a.mode == "same-model":
            print(f"{name}: partition {r['partition']} model_params {r['model_params']} "
                  f"loss_step0 {r.get('loss_step0')!r}")
            first = rows[0]
            for k in ("model_params", "model_layers"):
                if r[k] != first[k]:
                    fails.append(f"{name}: {k} {r[k]} != {first[k]} ({rows[0]['schedule']})")
            if sum(int(b) for b in r["partition"].split(",")) != r["model_layers"]:
                fails.append(f"{name}: partition {r['partition']} does not sum to model_layers")
            l0, l1 = r.get("loss_step0"), first.get("loss_step0")
            if l0 is None or l1 is None or abs(l0 - l1) > 1e-6 * abs(l1):
                fails.append(f"{name}: loss_step0 {l0} != {l1} ({rows[0]['schedule']})")
        elif a.mode == "metrics":
            fails += [f"{name}: {m}" for m in metric_problems(r)]
        else:
            meas, sim, model = (r["bubble_fraction_measured"], r["bubble_fraction_sim"],
                                r["bubble_fraction_model"])
            line = f"{name}: measured {meas:.4f} sim {sim:.4f} model {model}"
            print(line)
            if abs(meas - sim) > a.tol:
                fails.append(f"{line}: |measured - sim| > {a.tol}")
            if r["schedule"] in a.model_schedules.split(","):
                if model is None or abs(meas - model) > a.tol:
                    fails.append(f"{line}: |measured - model| > {a.tol}")
    if a.schedules:
        seen = {r["schedule"] for r in rows}
        fails += [f"no run of {s}" for s in a.schedules.split(",") if s not in seen]
    for f in fails:
        print("FAIL:", f)
    print(f"{a.mode}: {len(rows)} configurations, {len(fails)} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
