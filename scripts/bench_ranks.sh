#!/usr/bin/env bash
# Data-parallel throughput of `hedgehog distill` on this machine: the same job (demo teacher,
# Brown corpus, a global batch of B sequences of T tokens) on 1 process and on N processes
# (`--nproc`). Each setting runs twice, for S and 2S steps, and the difference of the wall times
# over S steps is the time of one training step with the fixed costs (loading, the first and the
# last evaluation) taken out. Prints a markdown table for docs/distributed.md.
#   scripts/bench_ranks.sh [BUILD_DIR] [PROCESSES...]      (default: build 1 2)
#   HH_BENCH_STEPS=S HH_BENCH_BATCH=B HH_BENCH_SEQ=T       (default: 20 8 128)
#   HH_NUM_THREADS=K                                       threads per process (default: cores / N)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$repo/build}"
shift || true
procs=("$@")
[ ${#procs[@]} -gt 0 ] || procs=(1 2)
steps="${HH_BENCH_STEPS:-20}" batch="${HH_BENCH_BATCH:-8}" seq="${HH_BENCH_SEQ:-128}"
cli="$build/app/hedgehog"
model="$repo/projects/demo/teacher"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

wall() {  # wall seconds of one distill run: $1 processes, $2 steps
  local dir="$tmp/p$1s$2" start end
  start=$(date +%s.%N)
  "$cli" distill "$model" --run-dir "$dir" --corpus brown --steps "$2" --batch-size "$batch" --seq-len "$seq" \
    --max-train 512 --eval-every 1000000 --nproc "$1" > "$dir.log" 2>&1 || { cat "$dir.log" >&2; exit 1; }
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { print b - a }'
}

echo "distill of projects/demo/teacher, global batch $batch x $seq tokens, $(nproc) cores; $steps vs $((2 * steps)) steps"
echo
echo "| processes | threads each | s per step | sequences/s | tokens/s | speed-up |"
echo "|---|---|---|---|---|---|"
base=""
for n in "${procs[@]}"; do
  short=$(wall "$n" "$steps")
  long=$(wall "$n" $((2 * steps)))
  per=$(awk -v l="$long" -v s="$short" -v n="$steps" 'BEGIN { print (l - s) / n }')
  threads="${HH_NUM_THREADS:-$(( $(nproc) / n ))}"; [ "$threads" -ge 1 ] || threads=1
  [ -n "$base" ] || base="$per"
  awk -v n="$n" -v t="$threads" -v p="$per" -v b="$batch" -v q="$seq" -v base="$base" \
    'BEGIN { printf "| %d | %d | %.3f | %.1f | %.0f | %.2fx |\n", n, t, p, b / p, b * q / p, base / p }'
done
