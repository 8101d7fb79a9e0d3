#!/usr/bin/python3
"""A results file after a kill (tests/mpi/crash_soak.sh; Debian's python3 + h5py).

usage: crash_check.py FILE.h5
  Opens the file with h5py and reads every byte of every run. Prints one line per run,
  `key<TAB>sha1`, the digest covering the run's attributes and all its datasets. Exit 1 (with
  the reason on stderr) if the file does not open, has no /runs, or holds anything but
  complete, readable runs (a `.partial-*` group, a run without status "complete", a missing or
  unreadable dataset).
"""
import hashlib
import sys


def main():
    import h5py
    import numpy as np
    path = sys.argv[1]
    try:
        with h5py.File(path, "r") as f:
            if "runs" not in f:
                sys.exit(f"{path}: no /runs")
            for key in sorted(f["runs"].keys()):
                g = f["runs"][key]
                status = g.attrs.get("status", b"")
                status = status.decode() if isinstance(status, bytes) else str(status)
                if status != "complete":
                    sys.exit(f"{path}: run {key} is visible with status {status!r}")
                h = hashlib.sha1()
                for name in sorted(g.attrs):
                    h.update(f"{name}={g.attrs[name]!r};".encode())
                for ds in ("step_time_s", "events", "ranks"):
                    if ds not in g:
                        sys.exit(f"{path}: run {key} has no {ds}")
                    data = g[ds][()]
                    h.update(ds.encode())
                    for field in data.dtype.names or [None]:
                        col = data if field is None else data[field]
                        if col.dtype.kind == "O":  # variable-length strings
                            h.update("\0".join(map(str, col.tolist())).encode())
                        else:
                            h.update(np.ascontiguousarray(col).tobytes())
                print(f"{key}\t{h.hexdigest()}")
    except OSError as ex:
        sys.exit(f"{path}: does not open: {ex}")


if __name__ == "__main__":
    main()
