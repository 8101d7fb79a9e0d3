#!/usr/bin/env python3
"""Every rank's compute order of V-Half and V-Min as sail-sg's own generator builds them: the
reference of tests/unit/test_reference_orders.cpp (tests/unit/data/sail_orders.txt).

The generator is the PipelineGraph class of sail-sg's zero-bubble-pipeline-parallelism
repository, megatron/core/pipeline_parallel/zerobubble/scheduler/zbv_greedy.py (the code of
Qi et al., "Pipeline Parallelism with Controllable Memory", arXiv 2405.15362). This loads that
file as it is from a checkout, with a stand-in for the one module it imports (its graph node
types, which the order does not use), and runs its schedule_from_pattern with its stable
pattern for 'half' and 'min' and unit costs, as its create_schedule does. The order a rank runs
is the stage_order it returns (by slot, independent of the costs); its types 0..5 are F, f, B,
b, W, w: F/B/W of the V's first leg (chunk 0, stage r) and second leg (chunk 1, stage 2P-1-r),
create_schedule's mapping (a backward or weight pass of type chunk c runs chunk 1-c).

Usage: tools/sail-orders.py REPO_ROOT > tests/unit/data/sail_orders.txt
Same format as tools/pytorch-orders.py's: `name P M 2 digest` per configuration and `csv name
P M 2` with the rows of a few small ones.
"""
import importlib.util
import sys
import types

GRAPH = "megatron.core.pipeline_parallel.zerobubble.scheduler.graph"
FILE = "megatron/core/pipeline_parallel/zerobubble/scheduler/zbv_greedy.py"


def load(root):
    parts = GRAPH.split(".")
    for i in range(1, len(parts) + 1):  # stand-in packages down to the graph module
        module = types.ModuleType(".".join(parts[:i]))
        module.__path__ = []
        sys.modules[module.__name__] = module
    for name in ("ScheduledNode", "B", "W", "F", "FuncType"):
        setattr(sys.modules[GRAPH], name, None)
    spec = importlib.util.spec_from_file_location("zbv_greedy", root + "/" + FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.PipelineGraph


def rows(PipelineGraph, kind, P, M):
    g = PipelineGraph(P, M, kind, 1, 1, 1, 0)
    pattern = {"half": g.stable_pattern_v_half, "min": g.stable_pattern_v_min}[kind](P)
    _, _, stage_order = g.schedule_from_pattern(pattern, M, [1] * 6, do_reorder=True)
    out = []
    for r, order in enumerate(stage_order):
        legs = (r, 2 * P - 1 - r)
        cells = []
        for ty, mb in order:
            cat, chunk = ty // 2, ty % 2
            leg = chunk if cat == 0 else 1 - chunk
            cells.append("%d%s%d" % (legs[leg], "FIW"[cat], mb))
        out.append(",".join(cells) + "\r\n")
    return out


def fnv1a64(text):
    h = 0xCBF29CE484222325
    for byte in text.encode():
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


SMALL = ((2, 4), (3, 5), (4, 8))


def main():
    PipelineGraph = load(sys.argv[1] if len(sys.argv) > 1 else ".")
    print("# V-Half and V-Min orders as sail-sg's generator builds them (zbv_greedy.py's "
          "PipelineGraph for 'half' and")
    print("# 'min', run by tools/sail-orders.py); tests/unit/test_reference_orders.cpp. "
          "Same format as pytorch_orders.txt.")
    small = []
    for name, kind in (("v-half", "half"), ("v-min", "min")):
        for P, M in [(P, M) for P in range(1, 9) for M in range(1, 4 * P + 1)] + [(12, 36),
                                                                                   (16, 48)]:
            r = rows(PipelineGraph, kind, P, M)
            print(name, P, M, 2, fnv1a64("".join(r)))
            if (P, M) in SMALL:
                small.append((name, P, M, r))
    for name, P, M, r in small:
        print("csv", name, P, M, 2)
        sys.stdout.write("".join(line.replace("\r\n", "\n") for line in r))


if __name__ == "__main__":
    main()
