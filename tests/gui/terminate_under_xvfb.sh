#!/usr/bin/env bash
# The real tessera-gui on a virtual X server: it opens its window, and SIGTERM
# closes it like the close button (exit status 0, window state saved).
# Exit 77 (ctest: skipped) where xvfb-run is missing.
set -uo pipefail
gui=$1
if ! command -v xvfb-run >/dev/null 2>&1; then
  echo "xvfb-run not found: skipping"
  exit 77
fi
export XDG_CONFIG_HOME=$(mktemp -d)  # QSettings of this run only
trap 'rm -rf "$XDG_CONFIG_HOME"' EXIT
xvfb-run -a "$gui" &
runner=$!
pid=""
for _ in $(seq 100); do  # up to 10 s for the window's process to appear
  pid=$(pgrep -P "$runner" -x tessera-gui || true)
  [ -n "$pid" ] && sleep 2 && break
  sleep 0.1
done
if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
  echo "FAIL: tessera-gui did not start or exited early"
  wait "$runner"
  exit 1
fi
kill -TERM "$pid"
wait "$runner"
status=$?
if [ "$status" -ne 0 ]; then
  echo "FAIL: SIGTERM gave exit status $status (expected 0)"
  exit 1
fi
if ! ls "$XDG_CONFIG_HOME"/Tessera/*.conf >/dev/null 2>&1; then
  echo "FAIL: no window state saved under $XDG_CONFIG_HOME/Tessera"
  exit 1
fi
echo "ok: window opened, SIGTERM closed it with status 0 and saved its state"
