#!/usr/bin/env python3
"""The trace checker fails where it should: one good trace passes, and each broken copy of it
(one rule broken each) fails with the problem named. Run: python3 test_check_trace.py."""
import copy
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_trace  # noqa: E402


def meta(pid, tid=None, name=None):
    if tid is None:
        return {"name": "process_name", "ph": "M", "pid": pid, "args": {"name": f"rank {pid}"}}
    return {"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}


def x(pid, tid, name, ts, dur, cat="F", **extra):
    args = {"kind": cat, "chunk": 0, "micro_batch": 0, "stage": 0}
    if cat in ("send", "recv"):
        args["bytes"] = 64
    return {"name": name, "cat": cat, "ph": "X", "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": args, **extra}


def good():
    return {"traceEvents": [
        meta(0), meta(1), meta(0, 0, "compute"), meta(0, 2, "send 0"), meta(1, 0, "compute"),
        meta(1, 3, "recv 0"),
        x(0, 0, "0F0", 0, 1), x(0, 0, "0F1", 1, 1),  # touching: disjoint
        x(0, 2, "0SEND_F0", 1, 0.5, "send"),
        {"name": "message", "cat": "message", "ph": "s", "id": 7, "pid": 0, "tid": 2, "ts": 1},
        x(1, 3, "1RECV_F0", 1, 0.5, "recv"),
        {"name": "message", "cat": "message", "ph": "f", "bp": "e", "id": 7, "pid": 1, "tid": 3,
         "ts": 1.25},
        x(1, 0, "1F0", 1.5, 1), x(1, 0, "inner", 1.75, 0.25),  # nested
        counter(0, 0, 100), counter(0, 1, 164.5), counter(1, 0, 0),
    ]}


def counter(pid, ts, activations):
    return {"name": "memory", "cat": "memory", "ph": "C", "pid": pid, "ts": ts,
            "args": {"weights": 10, "activations": activations, "messages": 0, "workspace": 5,
                     "runtime": 0}}


class CheckTrace(unittest.TestCase):
    def problems(self, doc, flows=False):
        return check_trace.check_doc(doc, flows)

    def test_good_trace_passes(self):
        self.assertEqual(self.problems(good(), flows=True), [])

    def test_partial_overlap_on_one_thread(self):
        doc = good()
        doc["traceEvents"].append(x(0, 0, "0B0", 1.5, 1))
        self.assertTrue(any("without nesting" in p for p in self.problems(doc)))

    def test_missing_args(self):
        doc = good()
        del doc["traceEvents"][6]["args"]["micro_batch"]
        self.assertTrue(any("args lack micro_batch" in p for p in self.problems(doc)))

    def test_comm_slice_without_bytes(self):
        doc = good()
        del doc["traceEvents"][8]["args"]["bytes"]
        self.assertTrue(any("args lack bytes" in p for p in self.problems(doc)))

    def test_unpaired_flow(self):
        doc = good()
        doc["traceEvents"] = [e for e in doc["traceEvents"] if e["ph"] != "f"]
        self.assertTrue(any("1 start(s), 0 end(s)" in p for p in self.problems(doc)))

    def test_flow_outside_any_slice(self):
        doc = good()
        doc["traceEvents"][11]["ts"] = 5
        self.assertTrue(any("lies in no slice" in p for p in self.problems(doc)))

    def test_missing_flows_when_required(self):
        doc = good()
        doc["traceEvents"] = [e for e in doc["traceEvents"] if e["ph"] not in "sf"]
        self.assertEqual(self.problems(doc), [])
        self.assertIn("no flow events", self.problems(doc, flows=True))

    def test_missing_names(self):
        doc = good()
        doc["traceEvents"] = doc["traceEvents"][1:2] + doc["traceEvents"][3:]
        found = self.problems(doc)
        self.assertIn("pid 0: no process_name", found)
        self.assertIn("pid 0 tid 0: no thread_name", found)

    def test_required_fields_and_numbers(self):
        for field, value, words in [("dur", -1, "dur"), ("ts", None, "missing ts"),
                                    ("pid", "0", "not integers"), ("ph", "B", "phase")]:
            doc = copy.deepcopy(good())
            if value is None:
                del doc["traceEvents"][6][field]
            else:
                doc["traceEvents"][6][field] = value
            self.assertTrue(any(words in p for p in self.problems(doc)), (field, value))

    def test_memory_tracks(self):
        self.assertEqual(self.problems(good()), [])
        self.assertEqual(check_trace.check_doc(good(), True, True), [])
        doc = good()  # rank 1 without its track
        doc["traceEvents"] = [e for e in doc["traceEvents"] if not (e["ph"] == "C" and e["pid"])]
        self.assertEqual(self.problems(doc), [])
        self.assertIn("pid 1: no memory counter track", check_trace.check_doc(doc, False, True))
        doc = good()  # a kind missing
        del doc["traceEvents"][-1]["args"]["runtime"]
        self.assertTrue(any("need exactly the series" in p
                            for p in check_trace.check_doc(doc, False, True)))
        for bad, words in [(-1, "finite numbers >= 0"), ("3", "finite numbers >= 0")]:
            doc = good()
            doc["traceEvents"][-2]["args"]["messages"] = bad
            self.assertTrue(any(words in p for p in self.problems(doc)), bad)
        doc = good()
        doc["traceEvents"][-2]["args"] = {}
        self.assertTrue(any("series in args" in p for p in self.problems(doc)))
        doc = good()
        del doc["traceEvents"][-2]["ts"]
        self.assertTrue(any("missing ts" in p for p in self.problems(doc)))

    def test_nan_is_not_strict_json(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.json")
            text = json.dumps(good()).replace('"dur": 1,', '"dur": NaN,', 1)
            with open(path, "w") as f:
                f.write(text)
            self.assertTrue(check_trace.check_file(path, False)[0].startswith("not readable"))
            self.assertEqual(check_trace.main([path]), 1)
            with open(path, "w") as f:
                json.dump(good(), f)
            self.assertEqual(check_trace.main([path, "--flows"]), 0)


if __name__ == "__main__":
    unittest.main()
