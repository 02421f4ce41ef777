#!/usr/bin/env bash
# Regenerates projects/stories/generated.jsonl, the text the stories demo distils and finetunes
# on: 1,600 stories that stories260K itself writes with `hedgehog generate`, each started from <s>
# alone, sampled at temperature 1 with seeds 1 to 1,600, up to 512 tokens each (535,000 tokens in
# all; about 6 minutes on one core). Why that many: docs/jobs.md, "The stories demo".
#   scripts/generate_stories.sh [BUILD_DIR]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-${HH_BUILD_DIR:-$repo/build}}"
cd "$repo"
HH_NUM_THREADS="${HH_NUM_THREADS:-1}" "$build/app/hedgehog" generate projects/stories/teacher --prompt "" \
  --max-tokens 512 --temperature 1.0 --seed 1 --samples 1600 --output projects/stories/generated.jsonl
