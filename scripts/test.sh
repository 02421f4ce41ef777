#!/usr/bin/env bash
# Sets up (see setup.sh) and runs the whole test suite with CTest (GUI tests offscreen).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$repo/scripts/setup.sh"
build="${HH_BUILD_DIR:-$repo/build}"
export QT_QPA_PLATFORM=offscreen
cd "$build"
ctest --output-on-failure --timeout 900 -j 1 "$@"
