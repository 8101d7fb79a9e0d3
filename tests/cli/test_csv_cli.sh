#!/usr/bin/env bash
# Schedule CSV from the command line (docs/csv.md): tests/cli/csv_cli.py does the work.
# usage: test_csv_cli.sh path/to/bubblebench
exec /usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/csv_cli.py" "${1:?usage: $0 path/to/bubblebench}"
