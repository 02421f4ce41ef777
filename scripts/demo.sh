#!/usr/bin/env bash
# Sets up (see setup.sh) and runs the main job on the embedded default.
# Today the main job is `hedgehog compare`: every feature map against softmax on one head, then
# a Hedgehog feature map distilled onto it; it grows into the demo conversion.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$repo/scripts/setup.sh"
build="${HH_BUILD_DIR:-$repo/build}"
exec "$build/app/hedgehog" compare "$@"
