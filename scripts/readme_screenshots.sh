#!/usr/bin/env bash
# Regenerates the README's screenshots in docs/screenshots under Xvfb (scripts/screenshot.sh).
#   scripts/readme_screenshots.sh [BINARY]     (default build/app/hedgehog-workbench)
# Needs a GUI build and the demo conversion's output in runs/demo (bash scripts/demo.sh). The
# live-dashboard shot runs the demo project again into runs/screenshot-demo and grabs it mid-run.
# Settings (window geometry, layouts, recent files) go to a throw-away folder, so every shot
# starts from the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/app/hedgehog-workbench}
out=docs/screenshots
text=projects/demo/inspector_text.txt
if [[ ! -d runs/demo/model ]]; then
  echo "$0: runs/demo/model is missing: run the demo conversion first (bash scripts/demo.sh --headless)" >&2
  exit 1
fi
XDG_CONFIG_HOME=$(mktemp -d)
export XDG_CONFIG_HOME HH_NUM_THREADS=1
trap 'rm -rf "$XDG_CONFIG_HOME"' EXIT

shot() {  # NAME DELAY_MS ARGS...
  scripts/screenshot.sh "$bin" "$out/$1" "$2" -- "${@:3}"
}
shot inspector.png 500 --model runs/demo/model --tab inspector --text-file "$text" --inspect-head 2,2 \
  --inspect-view difference
shot comparison-model-head.png 500 --model runs/demo/model --tab comparison --text-file "$text" --head 2,2 \
  --feature-maps trained,hedgehog,t2r,elu,performer,cosformer,taylor
shot comparison-taylor.png 500 --tab comparison --feature-maps taylor,hedgehog --length 128 --head-dim 16
shot run-browser.png 1500 --tab runs
# The Layer ranking tab on a fresh ranking of stories260K (the CLI beside the workbench; about 70 s).
"$(dirname "$bin")/hedgehog" rank projects/stories/teacher --corpus projects/stories/generated.jsonl --seq-len 256 \
  --steps 100 --run-dir runs/screenshot-rank >/dev/null
shot rank-view.png 3000 --model projects/stories/teacher --rank runs/screenshot-rank/rank.json
project=$(mktemp --suffix=.json)
/usr/bin/python3 - "$project" <<'PY'
import json, sys
config = json.load(open("projects/demo/demo.json"))
config["run_dir"] = "runs/screenshot-demo"
json.dump(config, open(sys.argv[1], "w"), indent=2)
PY
shot dashboard-live.png 75000 --convert "$project"
rm -f "$project"
