#!/usr/bin/env python3
"""Every rank's compute order as PyTorch's own schedule classes build it, for the schedules
bubblebench also has: the reference of tests/unit/test_reference_orders.cpp.

PyTorch need not be installed (nor importable): this loads torch/distributed/pipelining/
schedules.py and _utils.py from an unpacked torch wheel (any platform's: the Python is the
same, e.g. `pip download torch==2.15.0 --no-deps --only-binary=:all: --platform
macosx_14_0_arm64 --python-version 3.11` and `unzip` its torch/distributed/pipelining/ and
torch/version.py) and stands every other torch module it imports in with an empty stand-in
(a schedule's order is plain Python over its stage count, rank and micro-batch count). Each
class is built as a training run builds it (its constructor runs PyTorch's own validation and
lowering), and rank r's order is its pipeline_order[r] without the idle slots and tokens
without compute, written as PyTorch's _dump_csv writes a row.

Usage: tools/pytorch-orders.py TORCH_ROOT > tests/unit/data/pytorch_orders.txt
One line per configuration: `name P M v digest`, the digest the FNV-1a 64-bit hash of all
rows (each ending in CRLF, as bubblebench's dump_pytorch_csv and PyTorch's csv.writer), or
`name P M v refused` where the constructor raised; and `csv name P M v` followed by the rows
for a few small ones (read by the test as they are).
"""
import importlib.util
import sys
import types


class _Meta(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _stand_in(name)

    def __getitem__(cls, item):
        return cls


class _StandIn(metaclass=_Meta):
    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):  # decorators return what they decorate
        return args[0] if len(args) == 1 and callable(args[0]) else _StandIn()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _StandIn()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _stand_in(name):
    return _Meta(name, (_StandIn,), {})


class _StandInModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = _stand_in(name)
        setattr(self, name, value)
        return value


REAL = ("torch.distributed.pipelining.schedules", "torch.distributed.pipelining._utils")


class _Finder:
    """Any torch module but the two read from the wheel is a stand-in package."""

    def find_spec(self, fullname, path, target=None):
        if (fullname == "torch" or fullname.startswith("torch.")) and fullname not in REAL:
            return importlib.util.spec_from_loader(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StandInModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


def load_schedules(root):
    sys.meta_path.insert(0, _Finder())
    import torch.distributed.pipelining  # noqa: F401  (the stand-in parent package)
    pkg = root + "/torch/distributed/pipelining/"
    for name in REAL[::-1]:
        spec = importlib.util.spec_from_file_location(name, pkg + name.rsplit(".", 1)[1] + ".py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[REAL[0]]


class FakeStage:
    def __init__(self, P, stages, index):
        self.group_size, self.num_stages, self.group_rank, self.stage_index = P, stages, 0, index
        self.submod = None
        self.is_first, self.is_last = index == 0, index == stages - 1


def rows(S, cls, P, M, v, single):
    if single:
        sched = cls(FakeStage(P, P, 0), M, loss_fn=None)
    else:
        sched = cls([FakeStage(P, P * v, c * P) for c in range(v)], M, loss_fn=None)
    compute = ("F", "I", "B", "W", "OVERLAP_F_B")
    return ["".join(",".join(str(a) for a in sched.pipeline_order[r]
                             if a is not None and a.computation_type.value in compute) + "\r\n")
            for r in range(P)]


def fnv1a64(text):
    h = 0xCBF29CE484222325
    for byte in text.encode():
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


# bubblebench name -> (PyTorch class, single-stage class, the v values it runs).
def table(S):
    return [
        ("looped-bfs", S.ScheduleLoopedBFS, False, (1, 2, 3, 4)),
        ("interleaved-zb", S.ScheduleInterleavedZeroBubble, False, (1, 2, 3, 4)),
        ("interleaved", S.ScheduleInterleaved1F1B, False, (1, 2, 3, 4)),
        ("gpipe", S.ScheduleGPipe, True, (1,)),
        # Not Schedule1F1B: its pipeline_order (an IR for tools; its run follows
        # _step_microbatches) starts the last rank at micro-batch 1 (2.15.0: 1F1,1B0,1F2,...).
        ("zb-v", S.ScheduleZBVZeroBubble, False, (2,)),
        ("dualpipev", S.ScheduleDualPipeV, False, (2,)),
    ]


SMALL = {("looped-bfs", 2, 3, 2), ("interleaved-zb", 2, 4, 2), ("interleaved-zb", 3, 3, 2),
         ("interleaved-zb", 4, 8, 2)}


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    S = load_schedules(root)
    version = open(root + "/torch/version.py").read().split("__version__ = ")[1].split("\n")[0]
    print("# Every rank's order as PyTorch " + version.strip("'\"") +
          "'s own classes build it (tools/pytorch-orders.py; tests/unit/test_reference_orders.cpp)")
    small = []
    for name, cls, single, vs in table(S):
        for P in range(1, 9):
            for M in range(1, 4 * P + 1):
                for v in vs:
                    try:
                        r = rows(S, cls, P, M, v, single)
                    except Exception:  # PyTorch refuses this configuration
                        print(name, P, M, 1 if single else v, "refused")
                        continue
                    print(name, P, M, 1 if single else v, fnv1a64("".join(r)))
                    if (name, P, M, v) in SMALL:
                        small.append((name, P, M, v, r))
    for name, P, M, v, r in small:
        print("csv", name, P, M, v)
        sys.stdout.write("".join(line.replace("\r\n", "\n") for line in r))


if __name__ == "__main__":
    main()
