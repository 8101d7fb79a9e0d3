"""Reading bubblebench results files (design §6, schema_version 1 and 2) into pandas DataFrames.

Version 2 (docs/run-record.md) stores the tables' text columns as fixed-length strings, version
1 as variable-length ones; both come back as str here.

A results file holds root attributes (tool_version, git_sha, hostname, slurm_job_id, ...) and
one group per run under /runs/<run_key> with scalar attributes and three datasets:
step_time_s (float64[iters]), events and ranks (compound). Only complete runs count:
groups whose `status` attribute is "complete"; `.partial-*` groups (a crash mid-write) and
anything else are skipped, each with a one-line ResultsWarning.

A run is counted once however it is reached. An array sweep's folder holds task-<i>.h5 files
and jobs/merge_index.py's index.h5, whose /runs are external links to the tasks' runs (or,
with --copy, copies of them listed in /run_sources): a run is identified by the file that
holds its data and its group there, and read from the task file itself when that is read too.
"""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Iterable, Iterator, List, Sequence, Tuple, Union

import h5py
import numpy as np
import pandas as pd

SCHEMA_VERSION = 2
#: The versions this reader reads (others: a warning, then what it recognises).
SCHEMA_VERSIONS = (1, 2)

# The run record's field names come from bubblebench's field table (src/harness/fields.cpp),
# through run_fields.json, which a unit test regenerates and keeps up to date
# (docs/run-record.md documents every field).
_RUN_FIELDS = json.loads(Path(__file__).with_name("run_fields.json").read_text(encoding="utf-8"))
#: Run attributes of design §6, in the order the summary shows them.
RUN_ATTRS = tuple(_RUN_FIELDS["summary_attrs"])
#: Attributes that are NaN rather than missing when absent, so that columns always exist.
FLOAT_ATTRS = tuple(_RUN_FIELDS["float_attrs"])
EVENT_FIELDS = ("iter", "rank", "chunk", "microbatch", "kind", "t_start_s", "t_end_s")
RANK_FIELDS = tuple(_RUN_FIELDS["rank_fields"])
#: Event kinds that are computation (everything else: waits and communication).
COMPUTE_KINDS = ("F", "B", "W", "BW", "FB")
RESULT_SUFFIXES = (".h5", ".hdf5")


class NoResultsError(Exception):
    """No results file, or no complete run, was found."""


class ResultsWarning(UserWarning):
    """A file or group was skipped (not HDF5, not a bubblebench file, ...)."""


RunRef = Union[pd.DataFrame, pd.Series, Tuple[str, str], Sequence[Tuple[str, str]]]


# --- Finding files ----------------------------------------------------------------------------


def find_results_files(paths: Iterable[Union[str, Path]]) -> List[Path]:
    """Files named on the command line as they are; folders searched for *.h5 recursively.

    Raises FileNotFoundError for a path that does not exist. Order: as given, folders sorted.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    out: List[Path] = []
    seen = set()
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix in RESULT_SUFFIXES)
        elif p.is_file():
            found = [p]
        else:
            raise FileNotFoundError(f"{p}: no such file or folder")
        for f in found:
            r = f.resolve()
            if r not in seen:
                seen.add(r)
                out.append(f)
    return out


# --- Values -----------------------------------------------------------------------------------


def decode_value(v):
    """An HDF5 attribute value as a plain Python value (bytes -> str, numpy -> int/float)."""
    if isinstance(v, (bytes, np.bytes_)):
        return bytes(v).decode("utf-8", errors="replace")
    if isinstance(v, np.ndarray):
        if v.size == 1:
            return decode_value(v.reshape(-1)[0])
        return [decode_value(x) for x in v.reshape(-1)]
    if isinstance(v, np.generic):
        return v.item()
    return v


def _decode_column(col: np.ndarray) -> np.ndarray:
    """A structured-array field: vlen strings come back as bytes from h5py 3.7."""
    if col.dtype.kind == "O" or col.dtype.kind == "S":
        return np.array([x.decode("utf-8", errors="replace") if isinstance(x, (bytes, np.bytes_))
                         else ("" if x is None else str(x)) for x in col], dtype=object)
    return col


def compound_frame(ds: h5py.Dataset) -> pd.DataFrame:
    """A 1-D compound dataset as a DataFrame, one column per member, strings decoded."""
    arr = ds[()]
    if arr.dtype.names is None:
        raise ValueError(f"{ds.name}: not a compound dataset")
    arr = np.atleast_1d(arr)
    return pd.DataFrame({name: _decode_column(arr[name]) for name in arr.dtype.names})


def _attrs(obj) -> dict:
    out = {}
    for k in obj.attrs.keys():
        try:
            out[k] = decode_value(obj.attrs[k])
        except (OSError, TypeError, ValueError) as e:  # an attribute h5py cannot read
            warnings.warn(f"{obj.file.filename}:{obj.name}: attribute {k!r} unreadable ({e})",
                          ResultsWarning, stacklevel=3)
    return out


# --- Runs -------------------------------------------------------------------------------------


def _open(path: Path):
    try:
        if not h5py.is_hdf5(path):
            warnings.warn(f"{path}: not an HDF5 file; skipped", ResultsWarning, stacklevel=3)
            return None
        return h5py.File(path, "r")
    except OSError as e:
        warnings.warn(f"{path}: unreadable ({e}); skipped", ResultsWarning, stacklevel=3)
        return None


def _skip(f: h5py.File, key: str, why: str) -> None:
    warnings.warn(f"{f.filename}: /runs/{key}: {why}; skipped", ResultsWarning, stacklevel=3)


def iter_complete_runs(f: h5py.File) -> Iterator[Tuple[str, h5py.Group]]:
    """(run_key, group) of every complete run of an open file, by key.

    Every other member of /runs is skipped with a ResultsWarning (one per member): `.partial-*`
    groups, groups whose `status` is not "complete", groups that cannot be opened, and
    anything that is not a group.
    """
    runs = f.get("runs")
    if not isinstance(runs, h5py.Group):
        return
    for key in sorted(runs.keys()):
        if key.startswith(".partial-"):
            _skip(f, key, "partial run (a write that did not finish)")
            continue
        try:
            g = runs[key]
        except (KeyError, OSError, RuntimeError, ValueError) as e:  # objects not on disk
            _skip(f, key, f"unreadable ({e})")
            continue
        if not isinstance(g, h5py.Group):
            _skip(f, key, "not a group")
            continue
        status = decode_value(g.attrs.get("status", None))
        if status != "complete":
            _skip(f, key, "no status attribute" if status is None else f"status {status!r}")
            continue
        yield key, g


def _dataset_stats(g: h5py.Group) -> dict:
    out = {}
    st = g.get("step_time_s")
    if isinstance(st, h5py.Dataset):
        x = np.asarray(st[()], dtype=float).reshape(-1)
        out["n_steps"] = int(x.size)
        out["step_time_s_median"] = float(np.median(x)) if x.size else np.nan
        out["step_time_s_min"] = float(np.min(x)) if x.size else np.nan
        out["step_time_s_max"] = float(np.max(x)) if x.size else np.nan
    for name in ("events", "ranks"):
        ds = g.get(name)
        out[f"n_{name}"] = int(ds.shape[0]) if isinstance(ds, h5py.Dataset) and ds.shape else 0
    return out


def infer_sync(attrs: dict) -> str:
    """A run's `--sync` mode: its `sync` attribute; for files written before it existed,
    "none" when the run has a finite `period_s` (only steady-state runs have one), else
    "barrier" (the default and, before `--sync none`, the only mode)."""
    sync = attrs.get("sync")
    if isinstance(sync, str) and sync:
        return sync
    try:
        return "none" if np.isfinite(float(attrs.get("period_s", np.nan))) else "barrier"
    except (TypeError, ValueError):
        return "barrier"


#: How a row reached its run, best first: the run's own file, an external link to it, a copy.
VIA_FILE, VIA_LINK, VIA_COPY = 0, 1, 2


def _copied_from(f: h5py.File, path: Path) -> dict:
    """For an index written by `merge_index.py --copy`: {name under /runs: (resolved task
    file, its group)} from /run_sources (task files named relative to the index's folder)."""
    if decode_value(f.attrs.get("index_kind")) != "copy":
        return {}
    src = f.get("run_sources")
    if not isinstance(src, h5py.Dataset) or src.dtype.names is None:
        return {}
    t = compound_frame(src)
    if not {"name", "file", "run_key"} <= set(t.columns):
        return {}
    return {n: (os.path.realpath(path.parent / fn), f"/runs/{k}")
            for n, fn, k in zip(t["name"], t["file"], t["run_key"])}


def _source(f: h5py.File, path: Path, key: str, g: h5py.Group, copies: dict):
    """(identity, via): the file that holds the run's data and its group there."""
    if isinstance(f["runs"].get(key, getlink=True), h5py.ExternalLink):
        # g.file is the file HDF5 opened for the link, as a path from here.
        return (os.path.realpath(g.file.filename), g.name), VIA_LINK
    if key in copies:
        return copies[key], VIA_COPY
    return (os.path.realpath(path), g.name), VIA_FILE


def _fingerprint(row: dict) -> tuple:
    return tuple(repr(row.get(k)) for k in ("makespan_s", "bubble_fraction_measured",
                                            "n_events", "n_steps"))


def _dedupe(rows: List[dict]) -> List[dict]:
    """One row per run: of rows with the same identity, the one read from the run's own file
    (else the first). A copy that differs from its source is not the same run: kept, warned."""
    best = {}
    for i, r in enumerate(rows):
        b = best.get(r["_id"])
        if b is None or r["_via"] < rows[b]["_via"]:
            best[r["_id"]] = i
    dropped = {}  # path -> [(via, the file kept)]
    out = []
    for i, r in enumerate(rows):
        keep = rows[best[r["_id"]]]
        if i != best[r["_id"]]:
            if r["_via"] == VIA_COPY and _fingerprint(r) != _fingerprint(keep):
                warnings.warn(f"{r['path']}: /runs/{r['run_key']}: a copy of "
                              f"{keep['path']}:/runs/{keep['run_key']} with other values; "
                              "both kept", ResultsWarning, stacklevel=3)
            else:
                dropped.setdefault(r["path"], []).append((r["_via"], keep["path"]))
                continue
        out.append(r)
    for path, d in dropped.items():
        what = ("links to" if all(v == VIA_LINK for v, _ in d) else
                "copies of" if all(v == VIA_COPY for v, _ in d) else "links to or copies of")
        files = sorted({k for _, k in d})
        warnings.warn(f"{path}: {len(d)} run(s) are {what} runs read from "
                      f"{', '.join(files[:3])}{' ...' if len(files) > 3 else ''}; "
                      "counted once", ResultsWarning, stacklevel=3)
    return out


def load_runs(paths, *, warn_schema: bool = True) -> pd.DataFrame:
    """One row per complete run of every results file under `paths` (files or folders).

    Columns: `path`, `run_key`, every run attribute (design §6 ones first, then any other,
    e.g. period_s, model_reason), `n_steps`, `step_time_s_median|min|max`, `n_events`,
    `n_ranks`, and the file's root attributes prefixed `file_` (file_git_sha,
    file_hostname, file_slurm_job_id, ...). `sync` is always there (infer_sync()).
    A run reached twice (an index's external link or copy, and the task file it points at)
    is one row: the task file's, with a ResultsWarning per file whose rows were dropped.
    Raises NoResultsError when there is no file or no complete run; FileNotFoundError for a
    path that does not exist.
    """
    files = find_results_files(paths)
    if not files:
        where = ", ".join(str(p) for p in ([paths] if isinstance(paths, (str, Path)) else paths))
        raise NoResultsError(f"no results files (*.h5) found in {where}")
    rows = []
    for path in files:
        f = _open(path)
        if f is None:
            continue
        with f:
            root = _attrs(f)
            if "schema_version" not in root:
                warnings.warn(f"{path}: no schema_version attribute, not a bubblebench results "
                              "file; skipped", ResultsWarning, stacklevel=2)
                continue
            if warn_schema and root["schema_version"] not in SCHEMA_VERSIONS:
                warnings.warn(f"{path}: schema_version {root['schema_version']}, this reader "
                              f"knows {', '.join(map(str, SCHEMA_VERSIONS))}; reading what it "
                              "recognises",
                              ResultsWarning, stacklevel=2)
            copies = _copied_from(f, path)
            for key, g in iter_complete_runs(f):
                row = {"path": str(path), "run_key": key}
                row["_id"], row["_via"] = _source(f, path, key, g, copies)
                attrs = _attrs(g)
                for a in FLOAT_ATTRS:
                    attrs.setdefault(a, np.nan)
                attrs["sync"] = infer_sync(attrs)
                for k, val in attrs.items():
                    if k in ("path", "run_key"):
                        k = "attr_" + k
                    row[k] = np.nan if val is None else val
                row.update(_dataset_stats(g))
                row.update({f"file_{k}": val for k, val in root.items()})
                rows.append(row)
    rows = _dedupe(rows)
    if not rows:
        raise NoResultsError(f"no complete runs in {len(files)} results file(s): "
                             + ", ".join(str(f) for f in files[:5])
                             + (" ..." if len(files) > 5 else ""))
    df = pd.DataFrame(rows).drop(columns=["_id", "_via"])
    known = [c for c in RUN_ATTRS if c in df.columns]
    stats = [c for c in ("n_steps", "step_time_s_median", "step_time_s_min", "step_time_s_max",
                         "n_events", "n_ranks") if c in df.columns]
    files_ = [c for c in df.columns if c.startswith("file_")]
    other = [c for c in df.columns
             if c not in ("path", "run_key") and c not in known and c not in stats
             and c not in files_]
    return df[["path", "run_key"] + known + other + stats + files_].reset_index(drop=True)


# --- Datasets of given runs -------------------------------------------------------------------


def _refs(runs: RunRef) -> List[Tuple[str, str]]:
    if isinstance(runs, pd.DataFrame):
        return list(zip(runs["path"].astype(str), runs["run_key"].astype(str)))
    if isinstance(runs, pd.Series):
        return [(str(runs["path"]), str(runs["run_key"]))]
    if isinstance(runs, tuple) and len(runs) == 2 and all(isinstance(x, (str, Path)) for x in runs):
        return [(str(runs[0]), str(runs[1]))]
    return [(str(p), str(k)) for p, k in runs]


def _per_run(runs: RunRef, dataset: str, read) -> pd.DataFrame:
    frames = []
    by_file = {}
    for p, k in _refs(runs):
        by_file.setdefault(p, []).append(k)
    for p, keys in by_file.items():
        with h5py.File(p, "r") as f:
            for k in keys:
                g = f.get(f"runs/{k}")
                if not isinstance(g, h5py.Group):
                    raise KeyError(f"{p}: no run {k!r}")
                ds = g.get(dataset)
                if not isinstance(ds, h5py.Dataset):
                    raise KeyError(f"{p}: run {k!r} has no {dataset} dataset")
                df = read(ds)
                df.insert(0, "run_key", k)
                df.insert(0, "path", p)
                frames.append(df)
    if not frames:
        return pd.DataFrame(columns=["path", "run_key"])
    return pd.concat(frames, ignore_index=True)


def load_events(runs: RunRef, *, iters=None, kinds=None) -> pd.DataFrame:
    """Events of the given runs (a runs DataFrame or row, or (path, run_key) pairs).

    Columns: path, run_key, iter, rank, chunk, microbatch, kind (str), t_start_s, t_end_s,
    duration_s. `iters`: an int or a list to keep only those timed iterations; `kinds`: a
    list of kinds to keep.
    """
    def read(ds):
        df = compound_frame(ds)
        for c in EVENT_FIELDS:
            if c not in df.columns:
                df[c] = np.nan
        if iters is not None:
            keep = [iters] if np.isscalar(iters) else list(iters)
            df = df[df["iter"].isin(keep)]
        if kinds is not None:
            df = df[df["kind"].isin(list(kinds))]
        df = df.reset_index(drop=True)
        df["duration_s"] = df["t_end_s"] - df["t_start_s"]
        return df

    return _per_run(runs, "events", read)


#: The memory kinds of the `memory` dataset (bubblebench's MemoryKind order).
MEMORY_KINDS = ("weights", "activations", "messages", "workspace", "runtime")


def load_memory(runs: RunRef) -> pd.DataFrame:
    """Memory over the last timed step of the given runs (the `memory` dataset: the memory
    model on the step's measured times; docs/memory.md): columns path, run_key, rank, t_s, the
    MEMORY_KINDS in bytes and total_bytes. Runs written before the dataset existed give no
    rows."""
    frames = []
    for p, k in _refs(runs):
        with h5py.File(p, "r") as f:
            g = f.get(f"runs/{k}")
            if not isinstance(g, h5py.Group):
                raise KeyError(f"{p}: no run {k!r}")
            if "memory" not in g:
                continue
        frames.append(_per_run((p, k), "memory", compound_frame))
    if not frames:
        return pd.DataFrame(columns=["path", "run_key", "rank", "t_s", *MEMORY_KINDS,
                                     "total_bytes"])
    df = pd.concat(frames, ignore_index=True)
    df["total_bytes"] = df[list(MEMORY_KINDS)].sum(axis=1)
    return df


def load_ranks(runs: RunRef) -> pd.DataFrame:
    """The per-rank records (busy/wait/comm seconds, peak bytes, ...) of the given runs."""
    return _per_run(runs, "ranks", compound_frame)


def load_step_times(runs: RunRef) -> pd.DataFrame:
    """step_time_s of the given runs: columns path, run_key, step (0-based), step_time_s."""
    def read(ds):
        x = np.asarray(ds[()], dtype=float).reshape(-1)
        return pd.DataFrame({"step": np.arange(x.size), "step_time_s": x})

    return _per_run(runs, "step_time_s", read)
