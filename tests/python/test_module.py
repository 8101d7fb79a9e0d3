"""The Python module `bubblebench` against the CLI (ctest python.module): the same dicts as
`bubblebench sim|model|validate|advise --format json` on a grid of every schedule, the same
schedules and lists as `list` and `show`, the CLI's one-line errors as ValueError, and the GIL
released while the core works. Needs PYTHONPATH=<build>/python and BB_BUBBLEBENCH=<binary>."""
import json
import os
import subprocess
import sys
import threading
import warnings

import pytest

import bubblebench as bb

BB = os.environ.get("BB_BUBBLEBENCH", "")
pytestmark = pytest.mark.skipif(not os.access(BB, os.X_OK), reason="needs BB_BUBBLEBENCH")

# Cost sets: the defaults' shape, split backward with messages and bytes, an F&B pair time and
# per-chunk lists are left to the CLI's own tests (they pass through the same text).
COSTS = [
    dict(t_f=1, t_b=2, t_w=0),
    dict(t_f=1, t_b=1, t_w=1, latency=0.25, bandwidth=8, act_bytes=16),
    dict(t_f=1.3, t_b=0.7, t_w=0.45, t_fb=2.1, msg_bytes=3, static_bytes=1000, steps=3),
]
GRID = dict(P=[2, 4], M=[1, 5, 8], v=[1, 2])


def flag(key):
    return "-" + key if len(key) == 1 else "--" + key.replace("_", "-")


def cli(*args):
    return subprocess.run([BB, *map(str, args)], capture_output=True, text=True, timeout=120)


def cli_json(*args):
    r = cli(*args, "--format", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), r.stderr


def cost_flags(costs):
    return [x for k, val in costs.items() for x in (flag(k), repr(val))]


def same(a, b, where="."):
    """Equal values with equal kinds: a number is the same number (the module gives whole
    numbers as int, JSON as 33.0), a bool a bool, a string the same string, the same keys."""
    if isinstance(a, bool) or isinstance(b, bool):
        assert isinstance(a, bool) and isinstance(b, bool) and a == b, (where, a, b)
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)):
        assert float(a) == float(b), (where, a, b)
    elif isinstance(a, dict):
        assert isinstance(b, dict) and sorted(a) == sorted(b), (where, sorted(a), sorted(b))
        for k in a:
            same(a[k], b[k], f"{where}/{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), (where, a, b)
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{where}[{i}]")
    else:
        assert type(a) is type(b) and a == b, (where, a, b)


def test_done_when_line_prints_33():
    code = ('import bubblebench as bb; '
            'print(bb.simulate("1f1b", P=4, M=8, t_f=1, t_b=2)["makespan"])')
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "33\n", (r.stdout, r.stderr)


def test_schedules_are_the_registry():
    rows, _ = cli_json("list")
    assert bb.schedules() == [row["name"] for row in rows]
    assert len(bb.schedules()) >= 10


@pytest.mark.parametrize("P", GRID["P"])
@pytest.mark.parametrize("costs", range(len(COSTS)))
@pytest.mark.parametrize("command", ["sim", "model"])
def test_numbers_are_the_clis_on_a_grid_of_every_schedule(command, costs, P):
    fn = bb.simulate if command == "sim" else bb.model
    kw = COSTS[costs]
    ms, vs = GRID["M"], GRID["v"]
    want, err = cli_json(command, "-s", "all", "-P", P, "-M", ",".join(map(str, ms)),
                         "-v", ",".join(map(str, vs)), *cost_flags(kw))
    assert {row["schedule"] for row in want} == set(bb.schedules())
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        got = fn("all", P=P, M=ms, v=vs, **kw)
    same(got, want)
    # The CLI's skip:/note: lines are the module's warnings.
    assert [str(w.message) for w in said] == err.splitlines()
    # One configuration at a time: a dict, the same as the sweep's row.
    for row in want:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            one = fn(row["schedule"], P=row["P"], M=row["M"], v=row["v"], **kw)
        same(one, row, f"{row['schedule']} P={P} M={row['M']} v={row['v']}")


@pytest.mark.parametrize("P", GRID["P"])
def test_validate_is_the_clis(P):
    for name in bb.schedules():
        for M in GRID["M"]:
            r = cli("validate", "-s", name, "-P", P, "-M", M, "-v", 2, "--format", "json")
            if r.returncode == 2:  # refused: the same line as ValueError
                with pytest.raises(ValueError) as e, warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    bb.validate(name, P=P, M=M, v=2)
                assert r.stderr == f"bubblebench: error: {e.value}\n"
                continue
            assert r.returncode == 0, r.stderr
            with warnings.catch_warnings():  # -v does not apply to most
                warnings.simplefilter("ignore")
                got = bb.validate(name, P=P, M=M, v=2)
            same(got, json.loads(r.stdout))
            assert got["ok"] is True and got["compute_actions"] > 0


def test_validate_reports_an_invalid_schedule(tmp_path):
    lists = bb.schedule("1f1b", P=2, M=2).to_csv().splitlines()
    lists[-1] = lists[-1].replace("1BW1", "1BW0")  # rank 1: micro-batch 0's backward twice
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join(lists) + "\n")
    r = cli("validate", "--csv", bad, "--format", "json")
    assert r.returncode == 1
    got = bb.validate(bb.load_csv(str(bad)))
    same(got, json.loads(r.stdout))
    assert got["ok"] is False and got["report"]


def test_schedule_lists_are_shows():
    s = bb.schedule("zb-v", P=4, M=8)
    assert len(s) == 4 and (s.name, s.P, s.M, s.v, s.placement) == ("zb-v", 4, 8, 2, "v")
    text = cli("show", "-s", "zb-v", "-P", 4, "-M", 8).stdout.splitlines()
    assert [", ".join(s[r]) for r in range(4)] == [ln.split(": ", 1)[1].replace(",", ", ")
                                                  for ln in text[1:]]
    assert list(s) == [s[r] for r in range(4)] and s[-1] == s[3]
    assert all(isinstance(a, str) for rank in s for a in rank)
    assert s.to_csv() == cli("show", "-s", "zb-v", "-P", 4, "-M", 8, "--format", "csv").stdout
    pytorch = subprocess.run([BB, "show", "-s", "zb-v", "-P", "4", "-M", "8", "--format",
                              "pytorch-csv"], capture_output=True, timeout=60).stdout
    assert s.to_pytorch_csv().encode() == pytorch  # PyTorch's \r\n line ends
    with pytest.raises(IndexError):
        s[4]
    assert bb.Schedule.from_csv(s.to_csv()).to_csv() == s.to_csv()
    low = s.lower()
    assert low.lowered and any("SEND_F" in a for a in low[0])


def test_a_schedule_object_simulates_as_its_name():
    s = bb.schedule("interleaved", P=4, M=8, v=2)
    same(bb.simulate(s, t_f=1, t_b=2), bb.simulate("interleaved", P=4, M=8, v=2, t_f=1, t_b=2))
    same(bb.model(s, t_f=1, t_b=2), bb.model("interleaved", P=4, M=8, v=2, t_f=1, t_b=2))
    round_trip = bb.Schedule.from_csv(s.to_csv())
    assert bb.simulate(round_trip)["makespan"] == bb.simulate(s)["makespan"]


def test_advise_is_the_clis():
    kw = dict(schedules="1f1b,zb-h1,interleaved,zb-v", P=4, M=[4, 8], v=[1, 2],
              recompute="both", act_bytes="1M", input_bytes="64K", param_bytes="8M",
              memory_cap="40M", latency="10us", top=3)
    flags = [x for k, val in kw.items() if k != "schedules"
             for x in (flag(k), ",".join(map(str, val)) if isinstance(val, list) else val)]
    want, _ = cli_json("advise", "--schedule", kw["schedules"], *flags)
    got = bb.advise(**kw)
    same(got, want)
    assert got["ranked"] and got["excluded"]


@pytest.mark.parametrize("call,args", [
    ("simulate", ["sim", "-s", "nope"]),
    ("simulate", ["sim", "-s", "dualpipe", "-P", "3"]),
    ("simulate", ["sim", "-P", "0"]),
    ("simulate", ["sim", "-M", "x"]),
    ("simulate", ["sim", "--t-f", "-1"]),
    ("simulate", ["sim", "--t-f", "1,2,3"]),
    ("model", ["model", "--steps", "1"]),
    ("schedule", ["show", "-s", "gpipe,1f1b"]),
    ("advise", ["advise", "--top", "0"]),
])
def test_errors_are_the_clis_one_line(call, args):
    r = cli(*args)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    kw = {}
    it = iter(args[1:])
    names = {"-s": "schedule", "-P": "P", "-M": "M", "--t-f": "t_f", "--steps": "steps",
             "--top": "top"}
    for k, val in zip(it, it):
        kw[names[k]] = int(val) if k in ("-P", "--steps", "--top") else val
    if call == "advise":
        fn = lambda: bb.advise(**kw)  # noqa: E731
    else:
        name = kw.pop("schedule", "1f1b")
        fn = lambda: getattr(bb, call)(name, **kw)  # noqa: E731
    with pytest.raises(ValueError) as e:
        fn()
    assert r.stderr == f"bubblebench: error: {e.value}\n"


def test_a_single_configuration_says_what_it_ignores():
    with pytest.warns(UserWarning, match="1f1b: -v does not apply"):
        assert bb.simulate("1f1b", P=4, M=8, v=2)["v"] == 1
    with pytest.raises(TypeError):
        bb.advise(nope=1)
    with pytest.raises(ValueError, match="takes a number"):
        bb.simulate("1f1b", t_f=True)


def test_the_gil_is_released_while_it_simulates():
    # With a long switch interval, a thread that kept the GIL through the simulation would
    # run it to the end before this thread runs again: then `done` is set when it looks.
    old = sys.getswitchinterval()
    sys.setswitchinterval(100)
    try:
        done = threading.Event()

        def work():
            # zb-auto's search and the simulation: about 0.6 s on the 2-core VM
            bb.simulate("zb-auto", P=32, M=1024, t_f=1, t_b=1, t_w=1, steps=2)
            done.set()

        t = threading.Thread(target=work)
        t.start()
        while not t.is_alive() and not done.is_set():
            pass
        seen_running = not done.is_set()
        t.join()
    finally:
        sys.setswitchinterval(old)
    assert seen_running and done.is_set()


def test_version_is_the_projects():
    import pathlib
    import re
    import tomllib
    root = pathlib.Path(__file__).resolve().parents[2]
    cmake = re.search(r"project\(bubblebench VERSION ([0-9.]+)", (root / "CMakeLists.txt").read_text())
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    assert bb.__version__ == cmake.group(1) == pyproject


def test_zb_auto_orders_by_the_costs_memory_limit_and_message_time_as_the_cli():
    kw = dict(t_f=1, t_b=1.5, t_w=0.7, latency=0.3, mem_limit=6, mem_w=0.5)
    for command, fn in (("sim", bb.simulate), ("model", bb.model)):
        want, _ = cli_json(command, "-s", "zb-auto", "-P", 4, "-M", 12, *cost_flags(kw))
        same(fn("zb-auto", P=4, M=12, **kw), want[0])
    shown = cli("show", "-s", "zb-auto", "-P", 4, "-M", 12, "--mem-limit", 6, "--mem-w", 0.5,
                "--format", "csv").stdout
    assert bb.schedule("zb-auto", P=4, M=12, mem_limit=6, mem_w=0.5).to_csv() == shown
