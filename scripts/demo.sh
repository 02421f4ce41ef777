#!/usr/bin/env bash
# Sets up (see setup.sh) and runs the main job on the embedded default: the demo conversion
# (projects/demo/demo.json) of the shipped GPT-2-architecture teacher to Hedgehog linear attention
# (distill, finetune, evaluate, export), about 7 minutes on 2 cores. It ends by printing the run
# file and the exported model.
#   - With a display (DISPLAY or WAYLAND_DISPLAY) and the workbench built, the conversion runs in
#     the workbench on its live dashboard; --headless (or no display) runs the CLI.
#   - Other arguments go to `hedgehog convert` in the CLI (e.g. --distill-steps 4000
#     --finetune-steps 500 for a larger budget, --feature-map t2r, --run-dir DIR).
#   - On machines with two cores or fewer, Torch runs one thread (HH_NUM_THREADS=1): measured
#     faster there for this model (docs/performance.md); set HH_NUM_THREADS to override.
#   - When the teacher is missing it is trained first (scripts/train_demo_teacher.sh).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Only what the demo runs: the CLI, and the workbench when the GUI is built (the test command
# builds the rest).
if [ "${HH_BUILD_GUI:-ON}" = "ON" ]; then bash "$repo/scripts/setup.sh" hedgehog hedgehog-workbench
else bash "$repo/scripts/setup.sh" hedgehog; fi
build="${HH_BUILD_DIR:-$repo/build}"
cd "$repo"
headless=0
args=()
for a in "$@"; do
  if [ "$a" = "--headless" ]; then headless=1; else args+=("$a"); fi
done
if [ "$(nproc)" -le 2 ]; then export HH_NUM_THREADS="${HH_NUM_THREADS:-1}"; fi
if [ ! -f projects/demo/teacher/model.safetensors ]; then
  echo "demo: no teacher in projects/demo/teacher: training it (scripts/train_demo_teacher.sh)"
  bash scripts/train_demo_teacher.sh
fi
if [ "$headless" = 0 ] && [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && [ -x "$build/app/hedgehog-workbench" ] &&
   [ "${#args[@]}" -eq 0 ]; then
  exec "$build/app/hedgehog-workbench" --convert projects/demo/demo.json
fi
exec "$build/app/hedgehog" convert --config projects/demo/demo.json "${args[@]+"${args[@]}"}"
