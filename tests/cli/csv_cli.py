"""Schedule CSV from the command line (docs/csv.md), run by test_csv_cli.sh.

PyTorch's format written by `show --format pytorch-csv` and read back through csv:/--csv, a
hand-written PyTorch file, a byte-order mark, control bytes (exit 2, one escaped line), and
validate's exact problem count. Usage: csv_cli.py path/to/bubblebench
"""
import csv
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

BB = sys.argv[1]
results = {"passed": 0, "failed": 0}


def check(name, ok):
    results["passed" if ok else "failed"] += 1
    if not ok:
        print(f"FAIL: {name}")


def bb(*args, stdin=None):
    """Runs bubblebench; returns (exit code, stdout bytes, stderr bytes)."""
    p = subprocess.run([BB, *map(str, args)], capture_output=True, timeout=60, input=stdin)
    return p.returncode, p.stdout, p.stderr


def reject(want, *args):
    """The command exits 2 with one stderr line holding `want`, no control byte, no stdout."""
    rc, out, err = bb(*args)
    text = err.decode("utf-8", "replace")
    ok = (rc == 2 and err.count(b"\n") == 1 and want in text and not out
          and not any(c < 0x20 for c in err.rstrip(b"\n")))
    check(f"{' '.join(map(str, args))}: exit 2, one line with {want!r} (rc={rc}: {err[:200]!r})", ok)


def pytorch_loader_rules(path, P, M):
    """What PyTorch's _load_csv and its _validate_schedule demand, read with Python's csv
    module as PyTorch reads it: rows = ranks, cells <stage><F|I|B|W><mb> or
    (<F>;<I|B>)OVERLAP_F_B, each stage on one rank, per stage F = M, I = W, B + I = M."""
    raw = Path(path).read_bytes()
    assert raw.endswith(b"\r\n") and b"\n" not in raw.replace(b"\r\n", b""), "rows end in CRLF"
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    assert len(rows) == P, (len(rows), P)
    one = re.compile(r"^(\d+)(F|I|B|W)(\d+)$")
    counts, where = {}, {}
    for rank, row in enumerate(rows):
        for cell in row:
            m = re.match(r"^\((.*);(.*)\)OVERLAP_F_B$", cell)
            for sub in [m.group(1), m.group(2)] if m else [cell]:
                a = one.match(sub)
                assert a, cell
                stage, kind, mb = int(a.group(1)), a.group(2), int(a.group(3))
                assert where.setdefault(stage, rank) == rank, (stage, rank)
                counts.setdefault(stage, {k: set() for k in "FIBW"})[kind].add(mb)
    for stage, c in counts.items():
        f, i, b, w = (len(c[k]) for k in "FIBW")
        assert f == M and i == w and b + i == M, (stage, f, i, b, w)
    assert sorted(counts) == list(range(len(counts))), sorted(counts)


def without_name(csv_bytes):
    return [l for l in csv_bytes.decode().splitlines() if not l.startswith("# name=")]


def main(tmp):
    P, M = 4, 8
    for s in ["gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "zb-v", "dualpipev", "naive"]:
        shape = ["-s", s, "-P", P, "-M", M, "-v", 2]
        rc, out, _ = bb("show", *shape, "--format", "pytorch-csv")
        check(f"{s}: show --format pytorch-csv", rc == 0)
        pt = tmp / f"{s}.pt.csv"
        pt.write_bytes(out)
        try:
            pytorch_loader_rules(pt, P, M)
            check(f"{s}: PyTorch's loader rules", True)
        except AssertionError as e:
            check(f"{s}: PyTorch's loader rules ({e})", False)
        # Back through --csv: the same schedule (bubblebench's CSV of both, but the name).
        _, native, _ = bb("show", *shape, "--format", "csv")
        rc, back, err = bb("show", "--csv", pt, "--format", "csv")
        check(f"{s}: round trip through --csv", rc == 0 and not err
              and without_name(back) == without_name(native))
        rc, again, _ = bb("show", "--csv", pt, "--format", "pytorch-csv")
        check(f"{s}: written again byte for byte", rc == 0 and again == pt.read_bytes())
        rc, _, err = bb("sim", "-s", f"csv:{pt}", "--format", "csv")
        check(f"{s}: sim of the PyTorch file ({err[:200]!r})", rc == 0)
    reject("cannot hold DualPipe's two model copies",
           "show", "-s", "dualpipe", "-P", 4, "-M", 8, "--format", "pytorch-csv")
    reject("drop --lowered", "show", "-s", "1f1b", "-P", 4, "-M", 8, "--format", "pytorch-csv",
           "--lowered")

    # A PyTorch-format file written by hand: loads, validates, simulates; one note for the
    # tokens left out.
    hand = tmp / "hand.csv"
    hand.write_bytes(b"0UNSHARD,0F0,0F1,,0I0,0W0,(0F2;0B1)OVERLAP_F_B,0B2,0RESHARD\r\n"
                     b"1UNSHARD,1F0,1I0,1F1,1B1,1W0,1F2,1B2,1RESHARD\r\n")
    note = (f"note: {hand}: PyTorch's CSV format: 4 actions without compute left out "
            "(2 RESHARD, 2 UNSHARD); bubblebench adds its own communication\n").encode()
    rc, out, err = bb("validate", "--csv", hand)
    check(f"hand-written PyTorch CSV validates, one note (rc={rc}: {err!r})",
          rc == 0 and out.startswith(b"ok: csv P=2 M=3 v=1") and err == note)
    rc, out, err = bb("sim", "-s", f"csv:{hand}", "--t-f", 1, "--t-b", 1, "--t-w", 1,
                      "--format", "json")
    ok = rc == 0 and err == note
    if ok:
        r = json.loads(out)[0]
        ok = r["P"] == 2 and r["M"] == 3 and r["makespan"] > 0
    check(f"hand-written PyTorch CSV simulates (rc={rc}: {err[:200]!r})", ok)
    _, out, _ = bb("show", "--csv", hand)
    check("PyTorch's I, B and OVERLAP_F_B read as B, BW and FB",
          b"\nrank 0: 0F0,0F1,0B0,0W0,(0F2;0BW1)FB,0BW2\n" in out)

    # A UTF-8 byte-order mark is skipped, in both dialects.
    bom = b"\xef\xbb\xbf"
    _, native, _ = bb("show", "-s", "1f1b", "-P", 2, "-M", 4, "--format", "csv")
    for name, body in [("bom_pt", (tmp / "zb-v.pt.csv").read_bytes()), ("bom", native)]:
        f = tmp / f"{name}.csv"
        f.write_bytes(bom + body)
        rc, out, err = bb("validate", "--csv", f)
        check(f"{name}.csv with a byte-order mark validates ({err[:200]!r})",
              rc == 0 and out.startswith(b"ok: "))

    # A NUL or other control byte: exit 2, one line, the byte escaped.
    nul = tmp / "nul.csv"
    nul.write_bytes(b"# P=2\n0F0,0\0BW0\n1F0,1BW0\n")
    reject("CSV line 2: control byte \\x00 at column 6", "validate", "--csv", nul)
    reject("control byte \\x00", "sim", "-s", f"csv:{nul}")
    esc = tmp / "esc.csv"
    esc.write_bytes(b"0F0,0BW0\n1F0,\x1b1BW0\n")
    reject("CSV line 2: control byte \\x1b at column 5", "show", "--csv", esc)

    # A control byte in the file's name is escaped in the message too.
    reject("cannot read schedule CSV '" + str(tmp) + "/no\\x01such.csv'",
           "sim", "-s", f"csv:{tmp}/no\x01such.csv")
    weird = tmp / "bad\x02name.csv"
    weird.write_bytes(b"0F0,0QQ0\n")
    reject(str(tmp) + "/bad\\x02name.csv: CSV line 1: bad action '0QQ0'",
           "validate", "--csv", weird)

    # validate counts every problem: zb-h1 at P=4, M=16 without its W is 64 missing W.
    _, zb, _ = bb("show", "-s", "zb-h1", "-P", 4, "-M", 16, "--format", "csv")
    now = tmp / "now.csv"
    now.write_bytes(re.sub(rb",\d+W\d+", b"", zb))
    rc, out, _ = bb("validate", "--csv", now)
    check(f"validate counts all 64 missing W (rc={rc}: {out[:200]!r})",
          rc == 1 and b"is invalid: 64 problems" in out and b"  ... and 56 more" in out)


with tempfile.TemporaryDirectory() as d:
    main(Path(d))
print(f"{results['passed']} passed, {results['failed']} failed")
sys.exit(1 if results["failed"] else 0)
