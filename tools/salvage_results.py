#!/usr/bin/python3
"""Salvage a damaged bubblebench results file: copy its complete, readable runs into a new file.

usage: /usr/bin/python3 tools/salvage_results.py DAMAGED.h5 SALVAGED.h5

Then `bubblebench run ... --out SALVAGED.h5 --resume` runs exactly the configurations that were
lost. DAMAGED.h5 is only read (a truncated one is read through a zero-padded copy made next to
SALVAGED.h5 and removed afterwards); SALVAGED.h5 must not exist. A run is kept when everything
`--resume` checks holds (status complete; step_time_s, events and ranks 1-D datasets;
step_time_s one row per timed iteration) and every attribute and every dataset under it reads
back whole; anything else is dropped with one line naming the run and why. Exit 0 when the new
file was written (even with runs dropped), 1 when nothing could be read (no root attributes or
no /runs), 2 on bad arguments.
"""
import os
import re
import sys

import h5py

REQUIRED = ("step_time_s", "events", "ranks")


def why_unreadable(group):
    """'' when the run reads back whole, else the first problem found."""
    attrs = {k: group.attrs[k] for k in group.attrs}  # every attribute reads
    if attrs.get("status") != "complete":
        return f"status is {attrs.get('status')!r}, not 'complete'"
    for name in REQUIRED:
        link = group.get(name, getlink=True)
        if not isinstance(link, h5py.HardLink) or not isinstance(group[name], h5py.Dataset):
            return f"no dataset {name}"
        if group[name].ndim != 1:
            return f"{name} is not 1-D"
    if "iters" in attrs and len(group["step_time_s"]) != int(attrs["iters"]):
        return f"step_time_s has {len(group['step_time_s'])} rows, iters is {int(attrs['iters'])}"
    problems = []

    def read(name, obj):
        if isinstance(obj, h5py.Dataset):
            obj[()]  # every chunk decompresses
        for k in obj.attrs:
            obj.attrs[k]

    try:
        group.visititems(read)
    except Exception as e:  # noqa: BLE001 - whatever HDF5 reports, the run is not whole
        problems.append(str(e).splitlines()[0] if str(e) else type(e).__name__)
    return problems[0] if problems else ""


def open_readable(path, scratch):
    """The file opened read-only; a truncated file (end of allocation past end of file, what a
    killed in-place writer of old builds could leave) through a zero-padded copy."""
    try:
        return h5py.File(path, "r", locking=False), None
    except OSError as e:
        m = re.search(r"eof = (\d+), sblock->base_addr = \d+, stored_eof = (\d+)", str(e))
        if not m:
            raise
        with open(path, "rb") as src, open(scratch, "xb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
            dst.truncate(int(m.group(2)))
        print(f"{path}: truncated ({m.group(1)} of {m.group(2)} bytes): read through a "
              "zero-padded copy", file=sys.stderr)
        return h5py.File(scratch, "r", locking=False), scratch


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    damaged, salvaged = argv[1], argv[2]
    if os.path.exists(salvaged):
        print(f"{salvaged} exists: give a new file name", file=sys.stderr)
        return 2
    scratch = salvaged + ".padded"
    try:
        src, padded = open_readable(damaged, scratch)
    except OSError as e:
        print(f"{damaged}: HDF5 cannot open it: {str(e).splitlines()[0]}", file=sys.stderr)
        return 1
    kept = dropped = 0
    tmp = salvaged + ".bb-salvage"
    try:
        with src:
            try:
                root = {k: (src.attrs[k], src.attrs.get_id(k).dtype) for k in src.attrs}
                names = sorted(src["runs"])
            except Exception as e:  # noqa: BLE001
                print(f"{damaged}: no readable root attributes and /runs: {e}", file=sys.stderr)
                return 1
            with h5py.File(tmp, "w-") as dst:
                for k, (value, dtype) in root.items():
                    dst.attrs.create(k, value, dtype=dtype)
                runs = dst.create_group("runs")
                for key in names:
                    why = "a bubblebench internal group" if key.startswith(".") else ""
                    try:
                        if not why and not isinstance(src["runs"].get(key, getlink=True),
                                                      h5py.HardLink):
                            why = "a soft or external link, not a run of this file"
                        why = why or why_unreadable(src["runs"][key])
                        if not why:
                            src.copy(src["runs"][key], runs, name=key)
                    except Exception as e:  # noqa: BLE001
                        why = (str(e).splitlines() or [type(e).__name__])[0]
                    if why:
                        dropped += 1
                        print(f"dropped {key}: {why}", file=sys.stderr)
                    else:
                        kept += 1
        os.rename(tmp, salvaged)
    finally:
        for leftover in (tmp, padded):
            if leftover and os.path.exists(leftover):
                os.remove(leftover)
    print(f"{salvaged}: {kept} runs kept, {dropped} dropped")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
