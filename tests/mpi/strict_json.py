#!/usr/bin/python3
"""Strict JSON (RFC 8259) for the tests: one document per file, no NaN/Infinity/-Infinity (which
Python's json module and Google Benchmark's reporter allow, but strict parsers refuse) and no
duplicate keys in an object.

As a module: load(path), loads(text). As a command: strict_json.py FILE... prints one line per
file that is not strict JSON and exits 1 if any (0: all strict).
"""
import json
import sys


def _no_constant(name):
    raise ValueError(f"not strict JSON: {name}")


def _no_duplicates(pairs):
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise ValueError(f"not strict JSON: duplicate key {key!r}")
        obj[key] = value
    return obj


def loads(text):
    return json.loads(text, parse_constant=_no_constant, object_pairs_hook=_no_duplicates)


def load(path):
    with open(path, encoding="utf-8") as f:
        return loads(f.read())


def main(paths):
    bad = 0
    for path in paths:
        try:
            load(path)
        except (OSError, ValueError) as e:  # json.JSONDecodeError is a ValueError
            print(f"{path}: {e}")
            bad += 1
    return 1 if bad or not paths else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
