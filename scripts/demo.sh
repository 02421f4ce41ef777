#!/usr/bin/env bash
# Sets up (see setup.sh) and runs the main job on the embedded default: the stories conversion
# (projects/stories/stories.json) of stories260K, a real pretrained Llama (Karpathy's TinyStories
# model), to Hedgehog linear attention in every layer: distil on text the teacher wrote, finetune
# towards the teacher, evaluate on real TinyStories text, export; about 3 to 8 minutes on 2 cores. It
# ends by printing the run file and the exported model.
#   - With a display (DISPLAY or WAYLAND_DISPLAY) and the workbench built, the conversion runs in
#     the workbench on its live dashboard; --headless (or no display) runs the CLI.
#   - --project FILE runs another project: projects/demo/demo.json is the GPT-2-architecture demo
#     teacher trained by this tool (docs/jobs.md, "The demo conversion").
#   - Other arguments go to `hedgehog convert` in the CLI (e.g. --distill-steps 1000
#     --finetune-steps 2000 for a larger budget, --feature-map t2r, --run-dir DIR).
#   - On machines with two cores or fewer, OpenMP's idle workers wait passively
#     (OMP_WAIT_POLICY=PASSIVE unless set), which lets Torch use both cores: the conversion took
#     189.7 s against 224.1 s on one thread and 403.5 s on two spinning ones
#     (docs/performance.md). Set OMP_WAIT_POLICY or HH_NUM_THREADS to override.
#   - A missing generated corpus (projects/stories/generated.jsonl) or demo teacher is made first
#     (scripts/generate_stories.sh, scripts/train_demo_teacher.sh).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Only what the demo runs: the CLI, and the workbench when the GUI is built (the test command
# builds the rest).
if [ "${HH_BUILD_GUI:-ON}" = "ON" ]; then bash "$repo/scripts/setup.sh" hedgehog hedgehog-workbench
else bash "$repo/scripts/setup.sh" hedgehog; fi
build="${HH_BUILD_DIR:-$repo/build}"
cd "$repo"
headless=0
project=projects/stories/stories.json
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --headless) headless=1 ;;
    --project) project="${2:?--project needs a file}"; shift ;;
    *) args+=("$1") ;;
  esac
  shift
done
[ -f "$project" ] || { echo "demo: no project file $project" >&2; exit 1; }
if [ "$(nproc)" -le 2 ] && [ -z "${GOMP_SPINCOUNT:-}" ]; then export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"; fi
if grep -q '"projects/stories/generated.jsonl"' "$project" && [ ! -f projects/stories/generated.jsonl ]; then
  echo "demo: no projects/stories/generated.jsonl: the teacher writes it first (scripts/generate_stories.sh)"
  bash scripts/generate_stories.sh "$build"
fi
if grep -q '"projects/demo/teacher"' "$project" && [ ! -f projects/demo/teacher/model.safetensors ]; then
  echo "demo: no teacher in projects/demo/teacher: training it (scripts/train_demo_teacher.sh)"
  bash scripts/train_demo_teacher.sh
fi
if [ "$headless" = 0 ] && [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && [ -x "$build/app/hedgehog-workbench" ] &&
   [ "${#args[@]}" -eq 0 ]; then
  exec "$build/app/hedgehog-workbench" --convert "$project"
fi
exec "$build/app/hedgehog" convert --config "$project" "${args[@]+"${args[@]}"}"
