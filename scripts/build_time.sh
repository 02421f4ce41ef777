#!/usr/bin/env bash
# Sums a build's step times from its .ninja_log: the CPU-side cost of a build, independent of how
# many cores ran it (the figures in docs/performance.md, "Build time", come from here).
#   scripts/build_time.sh BUILD_DIR [TOP]   total seconds, steps, wall span, and the TOP slowest steps
# For a cold figure, build into a fresh folder with an empty ccache, e.g.
#   export CCACHE_DIR=$(mktemp -d); cmake -S . -B /tmp/cold -G Ninja -DCMAKE_BUILD_TYPE=Release
#   cmake --build /tmp/cold; scripts/build_time.sh /tmp/cold
# A step that ran more than once counts with its last run only; a step with several outputs (a
# Qt AUTOGEN step, a PCH) counts once.
set -euo pipefail
log="${1:?usage: build_time.sh BUILD_DIR [TOP]}/.ninja_log"
top="${2:-10}"
[ -f "$log" ] || { echo "build_time: no $log" >&2; exit 2; }
awk -v top="$top" '
  /^#/ { next }
  { start[$4] = $1; end[$4] = $2; hash[$4] = $5 }
  END {
    first = -1; last = 0
    for (o in start) {
      edge = start[o] " " end[o] " " hash[o]  # the outputs of one step share its times and command hash
      if (edge in seen) continue
      seen[edge] = o
      total += (end[o] - start[o]) / 1000.0; n++
      if (first < 0 || start[o] < first) first = start[o]
      if (end[o] > last) last = end[o]
    }
    printf "%d steps, %.0f s summed (%.1f min, %.1f min on 2 cores), wall span %.1f min\n", n, total, total / 60,
           total / 120, (last - first) / 60000.0
    if (top > 0) {
      cmd = "sort -rn | head -n " top
      for (e in seen) { split(e, t, " "); printf "  %6.1f s  %s\n", (t[2] - t[1]) / 1000.0, seen[e] | cmd }
      close(cmd)
    }
  }' "$log"
