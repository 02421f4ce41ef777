#!/usr/bin/env bash
# kill -9 soak: N SIGKILLs (default 100) spread over `hedgehog distill`, `hedgehog finetune`
# (LoRA) and `hedgehog export` on the tiny GPT-2 fixture, each followed by the checks of the
# engine.jobs.crash_safety suite (run files open with RunReader and hold contiguous, finite
# steps up to the checkpoint's; checkpoints, adapters and model folders are complete or absent;
# `--resume` completes with every step once and the same result as an uninterrupted run).
# It runs that suite scaled up (HH_CRASH_CYCLES, HH_CRASH_EXPORT_KILLS) with a fresh seed and
# totals its TALLY lines:
#   scripts/kill_soak.sh [N]          (HH_BUILD_DIR: the build folder, default ./build;
#                                      HH_CRASH_SEED: the seed, default the current time)
# Prints runs, kills, files readable, resumes that completed, failures; exits 1 on a failure.
set -euo pipefail
n=${1:-100}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${HH_BUILD_DIR:-$root/build}
[ -x "$build/tests/hh_engine_tests" ] && [ -x "$build/app/hedgehog" ] || { echo "kill_soak: build hedgehog and hh_engine_tests in $build" >&2; exit 2; }
# Private copies: a concurrent build relinking the CLI mid-soak would otherwise fail runs at random.
bin=$(mktemp -d /tmp/kill_soak_bin.XXXXXX)
trap 'rm -rf "$bin"' EXIT
cp "$build/tests/hh_engine_tests" "$build/app/hedgehog" "$bin/"
tests=$bin/hh_engine_tests
# Each distill or finetune cycle aims two kills; export gets the rest (about 1.5 per round).
cycles=$(( (n * 35 / 100 + 1) / 2 ))
exports=$(( (n - 4 * cycles) * 2 / 3 ))
[ "$cycles" -ge 1 ] || cycles=1
[ "$exports" -ge 2 ] || exports=2
seed=${HH_CRASH_SEED:-$(date +%s)}
log=$(mktemp /tmp/kill_soak.XXXXXX.log)
echo "kill_soak: N=$n -> $cycles distill cycles, $cycles finetune cycles, $exports export re-exports; seed $seed; log $log"
start=$(date +%s)
status=0
HH_CLI=$bin/hedgehog HH_CRASH_SEED=$seed HH_CRASH_CYCLES=$cycles HH_CRASH_EXPORT_KILLS=$exports HH_NUM_THREADS=${HH_NUM_THREADS:-1} \
  "$tests" engine.jobs.crash_safety distillSurvivesKills finetuneSurvivesKills killedExportKeepsAModel >"$log" 2>&1 || status=$?
grep -E "TALLY|FAILURE|FAIL!|Totals" "$log" || true
awk '/TALLY/ { for (i = 1; i <= NF; ++i) if (split($i, kv, "=") == 2) sum[kv[1]] += kv[2] }
     END { printf "runs %d, kills %d, files readable %d, resumes completed %d, failures %d\n",
                  sum["runs"], sum["kills"], sum["readable"], sum["resumed"], sum["failures"] }' "$log"
echo "kill_soak: $(( $(date +%s) - start )) s, test exit status $status"
[ "$status" -eq 0 ]
