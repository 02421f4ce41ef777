#!/usr/bin/env bash
# Screenshot of the workbench for docs and reviews, on a virtual X display.
#   scripts/screenshot.sh BINARY OUT.png [DELAY_MS] [-- extra workbench args]
# e.g. scripts/screenshot.sh build/app/hedgehog-workbench shot.png 1000 -- --feature-maps elu --length 128
# The workbench grabs its own main window (hidden --screenshot option) once the first result is
# on screen plus DELAY_MS (default 800), then quits. Needs xvfb-run (package xvfb).
set -euo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: $0 BINARY OUT.png [DELAY_MS] [-- workbench args...]" >&2
  exit 2
fi
binary=$1
out=$2
shift 2
delay=800
if [[ $# -gt 0 && $1 != "--" ]]; then
  delay=$1
  shift
fi
[[ $# -gt 0 && $1 == "--" ]] && shift

if [[ ! -x $binary ]]; then
  echo "$0: '$binary' is not an executable (build the hedgehog-workbench target first)" >&2
  exit 1
fi
if ! command -v xvfb-run > /dev/null; then
  echo "$0: xvfb-run not found (apt-get install xvfb)" >&2
  exit 1
fi
mkdir -p "$(dirname "$out")"
# -a picks a free display number; the screen is large enough for the default 1500 x 950 window.
timeout 180 xvfb-run -a -s "-screen 0 1600x1000x24" \
  "$binary" --screenshot "$out" --screenshot-delay-ms "$delay" "$@"
test -s "$out"
echo "$out"
