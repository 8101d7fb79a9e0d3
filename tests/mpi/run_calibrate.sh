#!/usr/bin/env bash
# `bubblebench calibrate` at P ranks: every directed pair measured at every size (8 B doubling
# to --max-bytes), times > 0, both fits and their errors in the JSON, /links in the HDF5 file
# (h5py), and `sim --links` reading that file. Then its refusals: one rank (exit 2), a bad
# --max-bytes (exit 2), --out over a file that is not HDF5 (exit 4, the file untouched).
# Fit quality is reported, not asserted (it depends on the machine's load).
# usage: run_calibrate.sh BUBBLEBENCH MPIEXEC P
BB=${1:?usage: $0 bubblebench mpiexec P}
MPIEXEC=${2:?}
P=${3:?}
PY=/usr/bin/python3
. "$(dirname "$0")/../check_lib.sh"  # strict mode, $HERE, $tmp, check, finish, run_or_exit

timeout 300 "$MPIEXEC" -n "$P" "$BB" calibrate --pairs all --reps 5 --warmup 1 --max-bytes 64K \
  --rounds 2 --timeout 60 --json --out "$tmp/links.h5" >"$tmp/c.json" 2>"$tmp/err.txt"
rc=$?
[ $rc = 0 ] || { echo "calibrate exit $rc"; cat "$tmp/err.txt"; }
check "calibrate --json --out" $rc

$PY - "$tmp/c.json" "$tmp/links.h5" "$P" <<'PY'
import json, sys
import h5py
j = json.load(open(sys.argv[1]))
P = int(sys.argv[3])
sizes = [8 * 2**k for k in range(14)]  # 8 B .. 64 KiB
pairs = sorted((l["src"], l["dst"]) for l in j["links"])
assert pairs == [(a, b) for a in range(P) for b in range(P) if a != b], pairs
assert j["transport"] == "mpi" and j["reps"] == 5 and j["max_bytes"] == 65536, j
assert j["rounds"] == 2, j
for l in j["links"]:
    assert [s["bytes"] for s in l["samples"]] == sizes, l["samples"]
    assert all(s["time_s"] > 0 for s in l["samples"]), l
    assert l["alpha_s"] >= 0 and l["beta_bytes_per_s"] >= 0, l
    assert 1 <= len(l["regimes"]) <= 6, l["regimes"]
    assert l["regimes"][0]["lo_bytes"] == 8 and l["regimes"][-1]["hi_bytes"] == 65536
    for k in ("max_rel_error", "median_rel_error", "regimes_max_rel_error",
              "regimes_median_rel_error"):
        assert l[k] >= 0, (k, l)
    assert l["regimes_max_rel_error"] <= l["max_rel_error"] + 1e-12, l
    for s in l["samples"]:  # the quartiles around the median; the fit's time and error
        assert 0 < s["q25_s"] <= s["time_s"] <= s["q75_s"], s
        assert s["fit_s"] > 0, s
        assert abs(s["rel_error"] - (s["fit_s"] - s["time_s"]) / s["time_s"]) < 1e-9, s
    worst = max(abs(s["rel_error"]) for s in l["samples"])
    assert abs(worst - l["regimes_max_rel_error"]) < 1e-12, l
    print(f'{l["src"]}->{l["dst"]}: line max {l["max_rel_error"]:.1%}, '
          f'{len(l["regimes"])} regimes max {l["regimes_max_rel_error"]:.1%}')
with h5py.File(sys.argv[2], "r") as f:
    g = f["links"]
    assert len(g["samples"]) == len(sizes) * len(pairs)
    assert len(g["fits"]) == len(pairs)
    assert set(g["samples"].dtype.names) == {"src", "dst", "bytes", "time_s"}
    assert g.attrs["transport"] == "mpi" and g.attrs["ranks"] == P
    fits = {(int(r["src"]), int(r["dst"])): r for r in g["fits"][:]}
    for l in j["links"]:
        r = fits[(l["src"], l["dst"])]
        assert r["alpha_s"] == l["alpha_s"] and r["regimes"] == len(l["regimes"])
PY
check "JSON and /links" $?

# The table: per pair and size the median, quartiles, fit, error and regime; per pair its
# largest |error|; the verdict against 10 %; the note when ranks outnumber the CPUs.
timeout 300 "$MPIEXEC" -n "$P" "$BB" calibrate --reps 10 --warmup 1 --max-bytes 4K --timeout 60 \
  >"$tmp/table.txt" 2>"$tmp/err.txt"
rc=$?
[ $rc = 0 ] || { echo "calibrate (table) exit $rc"; cat "$tmp/err.txt"; }
check "calibrate (table)" $rc
$PY - "$tmp/table.txt" "$P" "$(nproc)" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
P, cpus = int(sys.argv[2]), int(sys.argv[3])
lines = text.splitlines()
head = lines.index(next(l for l in lines if l.startswith("pair  bytes")))
assert lines[head].split() == ["pair", "bytes", "median_us", "q25_us", "q75_us", "fit_us",
                               "error", "regime"], lines[head]
pairs = [f"{a}->{b}" for a in range(P) for b in range(P) if a != b]
sizes = [8 << k for k in range(10)]  # 8 B .. 4 KiB
rows = [l.split() for l in lines[head + 1:head + 1 + len(pairs) * len(sizes)]]
assert [(r[0], int(r[1])) for r in rows] == [(p, s) for p in pairs for s in sizes], rows
for r in rows:
    median, q25, q75, fit = map(float, r[2:6])
    assert 0 < q25 <= median <= q75 and fit > 0, r
    assert re.fullmatch(r"[+-]\d+\.\d%", r[6]), r
    assert abs(float(r[6][:-1]) - 100 * (fit - median) / median) < 0.2, r  # printed digits
for p in pairs:
    assert re.search(rf"^{p}: max \|error\| \d+\.\d% at \d+ B \(\d regimes; one line: ", text,
                     re.M), p
m = re.search(rf"^largest \|error\| over {len(pairs)} pairs: (\d+\.\d)% \(\d->\d at \d+ B\): "
              r"(NOT )?within 10\.0%$", text, re.M)
assert m, text
assert (m.group(2) is None) == (float(m.group(1)) <= 10.0), m.group(0)
assert ("note: %d ranks on" % P in text) == (P > cpus), text
print(m.group(0))
PY
check "calibrate's table" $?

# The file feeds the simulator (seconds: compute times in seconds).
timeout 60 "$BB" sim -s 1f1b -P "$P" -M 8 --t-f 0.001 --t-b 0.002 --msg-bytes 4096 \
  --links "$tmp/links.h5" --format json >"$tmp/sim.json" 2>"$tmp/err.txt"
check "sim --links FILE.h5" $?
timeout 60 "$BB" sim -s 1f1b -P "$P" -M 8 --t-f 0.001 --t-b 0.002 --format json >"$tmp/free.json"
$PY - "$tmp/sim.json" "$tmp/free.json" <<'PY'
import json, sys
a, b = (json.load(open(p))[0] for p in sys.argv[1:3])
assert a["makespan"] > b["makespan"], (a["makespan"], b["makespan"])
PY
check "links lengthen the simulated step" $?
timeout 60 "$BB" sim -s 1f1b -P "$P" -M 8 --links "$tmp/c.json" --format csv >/dev/null
check "sim --links FILE.json" $?

# `run` calibrates the pairs its schedules use before the timed steps and keeps each run's
# own pairs (JSON "links", HDF5 the run's links group); --no-calibrate leaves them out.
SCHEDS=1f1b,interleaved
timeout 300 "$MPIEXEC" -n "$P" "$BB" run -s "$SCHEDS" -M "$((2 * P))" -v 2 --compute synthetic \
  --t-f 100us --t-b 200us --hidden 16 --mb-size 4 --warmup 0 --iters 2 --timeout 60 \
  --format json --out "$tmp/runs.h5" >"$tmp/run.json" 2>"$tmp/err.txt"
rc=$?
[ $rc = 0 ] || cat "$tmp/err.txt"
check "run with calibration" $rc
grep -q "^links: .* pairs calibrated, 8 B..1024 B" "$tmp/err.txt"
check "run prints one links line ($(grep links "$tmp/err.txt"))" $?
timeout 300 "$MPIEXEC" -n "$P" "$BB" run -s 1f1b -M "$P" --compute synthetic --t-f 100us \
  --t-b 200us --warmup 0 --iters 1 --no-calibrate --format json >"$tmp/plain.json" 2>"$tmp/err2.txt"
check "run --no-calibrate" $?
! grep -q "^links:" "$tmp/err2.txt"
check "no links line with --no-calibrate" $?
$PY - "$tmp/run.json" "$tmp/runs.h5" "$tmp/plain.json" "$P" <<'PY'
import json, sys
import h5py
runs = json.load(open(sys.argv[1]))
P = int(sys.argv[4])
want = {"1f1b": sorted([(a, a + 1) for a in range(P - 1)] + [(a + 1, a) for a in range(P - 1)])}
want["interleaved"] = sorted(set(want["1f1b"]) | {(P - 1, 0), (0, P - 1)})
assert sorted(r["schedule"] for r in runs) == sorted(want), [r["schedule"] for r in runs]
with h5py.File(sys.argv[2], "r") as f:
    for r in runs:
        pairs = sorted((l["src"], l["dst"]) for l in r["links"])
        assert pairs == want[r["schedule"]], (r["schedule"], pairs)
        for l in r["links"]:  # 16 x 4 floats = 256 B messages: sizes up to 4x that
            assert [s["bytes"] for s in l["samples"]] == [8 << k for k in range(8)], l
            assert len(l["regimes"]) <= 2, l  # one regime per 3 sizes at most
        g = f["runs"][r["run_key"]]["links"]
        assert len(g["fits"]) == len(pairs), r["run_key"]
        assert g.attrs["transport"] == "mpi" and g.attrs["max_bytes"] == 1024
plain = json.load(open(sys.argv[3]))
assert all("links" not in r for r in plain), plain
PY
check "each run keeps its own pairs" $?

# Refusals.
timeout 60 "$MPIEXEC" -n 1 "$BB" calibrate >"$tmp/out" 2>"$tmp/err.txt"
rc=$?
[ $rc = 2 ] && grep -q "at least 2 ranks" "$tmp/err.txt"
check "one rank: exit 2 (got $rc: $(cat "$tmp/err.txt"))" $?
timeout 60 "$MPIEXEC" -n "$P" "$BB" calibrate --max-bytes 12Q >"$tmp/out" 2>"$tmp/err.txt"
rc=$?
[ $rc = 2 ] && [ "$(grep -c -- '--max-bytes' "$tmp/err.txt")" = 1 ]
check "bad --max-bytes: exit 2 and one line (got $rc: $(cat "$tmp/err.txt"))" $?
echo "not hdf5" >"$tmp/text.h5"
timeout 60 "$MPIEXEC" -n "$P" "$BB" calibrate --reps 1 --warmup 0 --max-bytes 16 \
  --out "$tmp/text.h5" >"$tmp/out" 2>"$tmp/err.txt"
rc=$?
[ $rc = 4 ] && grep -q "not an HDF5 file" "$tmp/err.txt" && [ "$(cat "$tmp/text.h5")" = "not hdf5" ]
check "--out over a text file: exit 4 (got $rc: $(cat "$tmp/err.txt"))" $?

[ "$fails" = 0 ] && echo "run_calibrate P=$P: ok"
[ "$fails" = 0 ]
