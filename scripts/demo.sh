#!/usr/bin/env bash
# Sets up (see setup.sh) and runs the main job on the embedded default: the demo conversion
# (projects/demo/demo.json) of the shipped GPT-2-architecture teacher to Hedgehog linear attention:
# distill, finetune, evaluate, export. It ends by printing the run file and the exported model.
# Arguments go to `hedgehog convert` (e.g. --distill-steps 1000 --finetune-steps 500 for a larger
# budget, --feature-map t2r, --run-dir DIR). When the teacher is missing it is trained first
# (scripts/train_demo_teacher.sh).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$repo/scripts/setup.sh"
build="${HH_BUILD_DIR:-$repo/build}"
cd "$repo"
args=()
for a in "$@"; do
  [ "$a" = "--headless" ] || args+=("$a")  # the conversion runs headless (the live dashboard arrives with the workbench)
done
if [ ! -f projects/demo/teacher/model.safetensors ]; then
  echo "demo: no teacher in projects/demo/teacher: training it (scripts/train_demo_teacher.sh)"
  bash scripts/train_demo_teacher.sh
fi
exec "$build/app/hedgehog" convert --config projects/demo/demo.json "${args[@]+"${args[@]}"}"
