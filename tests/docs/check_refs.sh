#!/usr/bin/env bash
# Checks that the repository's words point at things that exist (ctest `docs.refs`):
#   1. every "design §N" / "design §N.M" (also "design §3, §7") in src/, bench/, tests/,
#      analysis/, jobs/, tools/, README.md and docs/ names a section heading of docs/design.md
#      ("## §N ..." or "### §N.M ...");
#   2. every file path named in a comment of src/, bench/ or tests/ (C++/CUDA `//`, shell and
#      Python `#`) exists: a path with a directory, relative to the repository root, to src/, to
#      the commenting file's folder, or as the end of a tracked path; a bare file name with a
#      source extension (.hpp .cpp .cu .sh .py .md .cmake) as the name of some tracked file.
#      Not checked: C headers (`.h`: the project's own headers are .hpp, so these are the
#      libraries'), names on a line with a URL (another project's files), bare names with other
#      extensions (.txt, .json: usually files a run writes);
#   3. the include rules of design §2.1: the transport (src/runtime/transport.hpp,
#      mpi_transport.*) includes no CUDA or NCCL header and nothing under runtime/cuda/; the pure
#      core (src/schedule, src/sim, src/model) includes no MPI, CUDA, NCCL, HDF5 or BLAS header;
#      in src/ and bench/, CUDA toolkit headers are included only under src/runtime/cuda/ and
#      HDF5 headers only under src/results/;
#   4. the rooms of design §2.1, in the order that section states (`common < schedule < ...`,
#      lowest first; rooms on one level are peers): a file under src/ROOM/ (or bench/, the top)
#      includes project headers only of its own room and of rooms on lower levels;
#   5. every relative link of a Markdown page (`[text](path)`) leads to a file or folder;
#   6. given BUILD_DIR: the same order at link time. Every object file of the build's sources
#      (compile_commands.json) refers only to symbols defined in its own room or a lower one
#      (nm), but for the exceptions listed below with their reason.
# Usage: check_refs.sh [REPO_ROOT [BUILD_DIR]]   (default: two levels above this script)
# Prints one line per problem and exits 1 if there is any, else prints a summary and exits 0.
set -euo pipefail

root=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
cd "$root"
design=docs/design.md
[[ -f $design ]] || { echo "check_refs: $design is missing"; exit 1; }

# Tracked files (plus untracked, not ignored ones, so a new file counts before its commit).
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files --cached --others --exclude-standard | sort -u)
else
  mapfile -t files < <(find . -type f -not -path './.git/*' -not -path './build*' | sed 's|^\./||' | sort)
fi

exec "${PYTHON:-python3}" - "$design" "${2:-}" "${files[@]}" <<'PY'
import json
import os
import re
import shlex
import subprocess
import sys

design, build, files = sys.argv[1], sys.argv[2], sys.argv[3:]
tracked = {f for f in files if os.path.isfile(f)}
basenames = {os.path.basename(f) for f in tracked}
# What is read: all but tests/docs/ (this checker and its self-test, whose fixtures are wrong
# on purpose).
existing = sorted(f for f in tracked if not f.startswith("tests/docs/"))
problems = []

# 1. Section references.
sections = set()
with open(design, encoding="utf-8") as fh:
    for line in fh:
        m = re.match(r"#{2,4}\s+§(\d+(?:\.\d+)*)\b", line)
        if m:
            sections.add(m.group(1))
ref_roots = ("src/", "bench/", "tests/", "analysis/", "jobs/", "tools/", "docs/")
cite = re.compile(r"design\s+§(\d+(?:\.\d+)*)((?:\s*(?:,|and)\s*§\d+(?:\.\d+)*)*)")
more = re.compile(r"§(\d+(?:\.\d+)*)")
n_refs = 0
for f in existing:
    if not (f.startswith(ref_roots) or f == "README.md") or f == design:
        continue
    try:
        text = open(f, encoding="utf-8").read()
    except (UnicodeDecodeError, OSError):
        continue
    for no, line in enumerate(text.splitlines(), 1):
        for m in cite.finditer(line):
            for sec in [m.group(1)] + more.findall(m.group(2)):
                n_refs += 1
                sec = sec.rstrip(".")
                if sec not in sections:
                    problems.append(f"{f}:{no}: design §{sec} is not a section of {design}")
# Cross-references inside design.md itself.
for no, line in enumerate(open(design, encoding="utf-8").read().splitlines(), 1):
    if re.match(r"#{1,4}\s", line):
        continue
    for sec in more.findall(line):
        sec = sec.rstrip(".")
        n_refs += 1
        if sec not in sections:
            problems.append(f"{design}:{no}: §{sec} is not a section of {design}")

# 2. File paths named in comments.
path_re = re.compile(
    r"(?<![A-Za-z0-9_./*<-])([A-Za-z0-9_][A-Za-z0-9_./-]*"
    r"\.(?:hpp|cpp|h|cu|cuh|md|sh|py|cmake|txt|sbatch|json|csv))(?![A-Za-z0-9_])")
source_ext = (".hpp", ".cpp", ".cu", ".cuh", ".sh", ".py", ".md", ".cmake")
comment = {".cpp": "//", ".hpp": "//", ".cu": "//", ".cuh": "//", ".sh": "#", ".py": "#"}
n_paths = 0


def comment_start(line, mark):
    """Where a comment starts on LINE, or -1. `#` counts at the line's start or after a
    blank, outside quotes (shell and Python); `//` anywhere (C++)."""
    if mark == "//":
        return line.find("//")
    stripped = line.lstrip()
    if stripped.startswith(("#!", "#include")):
        return -1
    for i, ch in enumerate(line):
        if ch == "#" and (i == 0 or line[i - 1] in " \t"):
            before = line[:i]
            if before.count("'") % 2 == 0 and before.count('"') % 2 == 0:
                return i
    return -1


def exists(name, where):
    if "/" not in name:
        return name in basenames
    name = name.lstrip("./") if name.startswith("./") else name
    for cand in (name, os.path.join("src", name), os.path.normpath(os.path.join(where, name))):
        if cand in tracked or os.path.isdir(cand):
            return True
    return any(t.endswith("/" + name) for t in tracked)


for f in existing:
    if not f.startswith(("src/", "bench/", "tests/")):
        continue
    mark = comment.get(os.path.splitext(f)[1])
    if mark is None:
        continue
    try:
        lines = open(f, encoding="utf-8").read().splitlines()
    except (UnicodeDecodeError, OSError):
        continue
    previous = ""
    for no, line in enumerate(lines, 1):
        pos = comment_start(line, mark)
        text = line[pos + len(mark):] if pos >= 0 else ""
        # Another project's files: named on a line with its URL, or the line after one.
        url = "://" in text or "github.com/" in text
        skip, previous = url or "://" in previous or "github.com/" in previous, text
        if pos < 0 or skip:
            continue
        for name in path_re.findall(text):
            if name.endswith(".h"):
                continue
            if "/" not in name and not name.endswith(source_ext):
                continue
            n_paths += 1
            if not exists(name, os.path.dirname(f)):
                problems.append(f"{f}:{no}: the comment names '{name}', which does not exist")

# 3. Include rules.
include = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]')
toolkit_hdr = re.compile(r"^(cuda|cublas|cudnn|curand|nccl|nvtx|thrust/|cub/)")
cuda_hdr = re.compile(toolkit_hdr.pattern + r"|^runtime/cuda/")
hdf5_hdr = re.compile(r"^(hdf5|H5)")
edge_hdr = re.compile(r"^(mpi|hdf5|H5|cblas|openblas|lapack)|" + toolkit_hdr.pattern)
transport_files = {"src/runtime/transport.hpp", "src/runtime/mpi_transport.hpp",
                   "src/runtime/mpi_transport.cpp"}
n_includes = 0
for f in existing:
    if not f.startswith(("src/", "bench/")) or not f.endswith((".hpp", ".cpp", ".cu", ".h")):
        continue
    rules = []
    if f in transport_files:
        rules.append((cuda_hdr, "the transport includes a CUDA header (host staging belongs to "
                                "the Backend)"))
    if f.startswith(("src/schedule/", "src/sim/", "src/model/", "src/advise/")):
        rules.append((edge_hdr, "the pure core includes an edge header"))
    if not f.startswith("src/runtime/cuda/"):
        rules.append((toolkit_hdr, "a CUDA toolkit header outside src/runtime/cuda/"))
    if not f.startswith("src/results/"):
        rules.append((hdf5_hdr, "an HDF5 header outside src/results/"))
    for no, line in enumerate(open(f, encoding="utf-8").read().splitlines(), 1):
        m = include.match(line)
        if not m:
            continue
        n_includes += 1
        for rule, what in rules:
            if rule.search(m.group(1)):
                problems.append(f"{f}:{no}: {what}: {m.group(1)}")
                break

def room_label(room):
    return "bench/" if room == "bench" else f"src/{room}"


# 4. Rooms (design §2.1): the order design.md states, lowest first; a room may use its own and
# lower levels only.
level = {}
order = re.search(r"`(common\s*<[^`]*)`", open(design, encoding="utf-8").read())
if order:
    for n, group in enumerate(order.group(1).split("<")):
        for room in group.split(","):
            level[room.strip()] = n
else:
    problems.append(f"{design}: states no room order (`common < schedule < ...`)")
project = re.compile(r'^\s*#\s*include\s*"([a-z_]+)/')


def room_of(path):
    """The room of a source file: src/ROOM/..., or bench/ (the top); None for others."""
    parts = path.split("/")
    if len(parts) >= 3 and parts[0] == "src" and parts[1] in level:
        return parts[1]
    if parts[0] == "bench" and "bench" in level:
        return "bench"
    return None


def may_use(room, other):
    return other == room or level[other] < level[room]


for f in existing:
    room = room_of(f)
    if room is None or not f.endswith((".hpp", ".cpp", ".cu", ".h")):
        continue
    for no, line in enumerate(open(f, encoding="utf-8").read().splitlines(), 1):
        m = project.match(line)
        if not m or m.group(1) not in level or may_use(room, m.group(1)):
            continue
        problems.append(f"{f}:{no}: {room_label(room)} may not use src/{m.group(1)} (design §2.1)")

# 6. Rooms at link time: per object file of the build, its undefined symbols against the rooms
# whose objects define them. Known exceptions (object path ending, symbol): none may be added
# without its reason here.
link_exceptions = set()
n_objects = 0
if build:
    objects = {}  # object path -> room
    try:
        commands = json.load(open(os.path.join(build, "compile_commands.json"), encoding="utf-8"))
    except OSError as e:
        commands = []
        problems.append(f"{build}: no compile_commands.json ({e})")
    for c in commands:
        src = os.path.relpath(c["file"], ".")
        args = shlex.split(c["command"])
        room = room_of(src)
        if room is None or "-o" not in args:
            continue
        obj = os.path.join(c["directory"], args[args.index("-o") + 1])
        if os.path.isfile(obj):
            objects[obj] = (room, src)

    defined = {}  # symbol -> rooms defining it
    for obj, (room, src) in objects.items():
        out = subprocess.run(["nm", "-C", "--defined-only", obj], capture_output=True,
                             text=True).stdout
        for line in out.splitlines():
            if len(line) > 19 and line[17] in "TDBRVWu":
                defined.setdefault(line[19:], set()).add(room)
    for obj, (room, src) in sorted(objects.items()):
        n_objects += 1
        out = subprocess.run(["nm", "-C", "-u", obj], capture_output=True, text=True).stdout
        for line in out.splitlines():
            sym = line.strip()[2:].strip()
            rooms = defined.get(sym)
            if not rooms or any(may_use(room, r) for r in rooms):
                continue
            if any(src.endswith(e) and sym == s for e, s in link_exceptions):
                continue
            problems.append(f"{src}: {room_label(room)} refers to {sym}, defined in "
                            f"{', '.join('src/' + r for r in sorted(rooms))} (design §2.1)")

# 5. Relative links of the Markdown pages.
link = re.compile(r"\]\(([^)\s]+)\)")
n_links = 0
for f in existing:
    if not f.endswith(".md"):
        continue
    for no, line in enumerate(open(f, encoding="utf-8").read().splitlines(), 1):
        for target in link.findall(line):
            if "://" in target or target.startswith(("#", "mailto:")):
                continue
            n_links += 1
            path = os.path.normpath(os.path.join(os.path.dirname(f), target.split("#")[0]))
            if path not in tracked and not os.path.isdir(path):
                problems.append(f"{f}:{no}: the link ({target}) leads nowhere")

for p in problems:
    print(p)
if problems:
    print(f"check_refs: {len(problems)} problem(s)")
    sys.exit(1)
print(f"check_refs: ok ({n_refs} section references, {n_paths} paths in comments, "
      f"{n_includes} includes, {n_links} links, {n_objects} objects' symbols checked; "
      f"{len(sections)} sections in {design})")
PY
