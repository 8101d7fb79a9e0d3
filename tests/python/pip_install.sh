#!/usr/bin/env bash
# `make pip-check`: `pip install .` into a fresh virtual environment (scikit-build-core and
# pybind11 from PyPI; CMake's core-only mode, no MPI), then the module's tests (tests/python/)
# with that environment's Python against the CLI. Not in ctest: it needs PyPI and builds the
# core once more (minutes on 2 cores).
# Usage: tests/python/pip_install.sh BUBBLEBENCH [PYTHON]
set -euo pipefail
bb=$(realpath "$1")
python=${2:-/usr/bin/python3}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$python" -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q pytest
(cd "$root" && "$tmp/venv/bin/pip" install -q .)
cd "$tmp"
"$tmp/venv/bin/python" -c 'import bubblebench as bb; print(bb.__file__, bb.__version__)'
BB_BUBBLEBENCH=$bb "$tmp/venv/bin/python" -m pytest -q -p no:cacheprovider "$root/tests/python"
