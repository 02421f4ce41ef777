#!/usr/bin/env bash
# Trains the demo teacher from scratch (the recipe in projects/demo/teacher.train.json: GPT-2
# architecture, 4 layers, 4 heads, n_embd 128, GPT-2's BPE, the Brown corpus, 1000 AdamW steps of
# 16 x 128 tokens) and exports it in float16 to projects/demo/teacher, where the demo project
# expects it. The repository ships the result; scripts/demo.sh runs this only when it is missing.
# About 25 minutes on 2 cores (1.5 s a step). Assumes scripts/setup.sh has run.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${HH_BUILD_DIR:-$repo/build}"
cd "$repo"
"$build/app/hedgehog" train --config projects/demo/teacher.train.json "$@"
"$build/app/hedgehog" export runs/demo-teacher/model --output projects/demo/teacher --dtype float16
