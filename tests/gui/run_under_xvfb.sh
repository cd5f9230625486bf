#!/usr/bin/env bash
# Runs a command on a virtual X server; exit 77 (ctest: skipped) where xvfb-run is missing.
set -euo pipefail
if ! command -v xvfb-run >/dev/null 2>&1; then
  echo "xvfb-run not found: skipping the real-window test"
  exit 77
fi
exec xvfb-run -a -s "-screen 0 2560x1440x24" "$@"
