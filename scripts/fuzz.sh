#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (clang-14, ASan + UBSan) and runs each for a given time.
#   scripts/fuzz.sh [SECONDS_PER_TARGET (default 60)] [TARGET ...]   (default: every fuzz/fuzz_*.cpp)
#   HH_FUZZ_BUILD_DIR  build directory (default: <repo>/build-fuzz)
#   HH_JOBS            parallel build jobs (default: 2)
#   HH_FUZZ_SKIP_BUILD=1  run the targets as last built (no configure, no build)
# Per target: seeds assembled from tests/data fixtures (shrunk where large) and fuzz/seeds/<target>
# into <build>/seeds/<target>; the corpus grows in <build>/corpus/<target> across runs; crashes,
# timeouts, leaks and OOMs land in <build>/crashes/<target>/; libFuzzer's log in <build>/logs/.
# A summary row per target (date, target, seconds, execs, exec/s, corpus files, new crashes) is
# printed and appended to <build>/fuzz_summary.tsv. Exit status 1 when any target found a crash.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${HH_FUZZ_BUILD_DIR:-$repo/build-fuzz}"
jobs="${HH_JOBS:-2}"
seconds="${1:-60}"
[ $# -gt 0 ] && shift
log() { printf '\033[1m[fuzz]\033[0m %s\n' "$*"; }

# ---- compiler and libFuzzer runtime (apt-get) ------------------------------------------------
missing=()
for p in clang-14 libclang-rt-14-dev cmake make; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing: ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then echo "fuzz: need root to install packages (run as root or with sudo)" >&2; exit 1; fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# ---- build -----------------------------------------------------------------------------------
if [ ! -f "$build/CMakeCache.txt" ] && [ "${HH_FUZZ_SKIP_BUILD:-0}" != 1 ]; then
  log "configuring $build"
  CC=clang-14 CXX=clang++-14 cmake -S "$repo" -B "$build" -DHH_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug \
    -DHH_BUILD_GUI=OFF -DHH_BUILD_TESTS=OFF -DHH_BUILD_BENCHMARKS=OFF -DHH_TCMALLOC=OFF >/dev/null
fi
if [ $# -gt 0 ]; then targets=("$@"); else
  targets=()
  for f in "$repo"/fuzz/fuzz_*.cpp; do targets+=("$(basename "$f" .cpp)"); done
fi
if [ "${HH_FUZZ_SKIP_BUILD:-0}" != 1 ]; then
  log "building ${targets[*]}"
  # The lock is shared with the other builds on this machine (see the project notes).
  (cd "$build" && nice -n 10 flock /tmp/hh-build.lock cmake --build . -j "$jobs" --target "${targets[@]}" >"$build/build.log" 2>&1) ||
    { tail -30 "$build/build.log"; exit 1; }
fi

# ---- seed corpora ----------------------------------------------------------------------------
# Large fixtures are shrunk to a few KB: libFuzzer mutates small inputs much faster, and the
# structure (keys, dtypes, token kinds) is what matters to it.
seeds="$build/seeds"
rm -rf "$seeds"
/usr/bin/python3 - "$repo" "$seeds" <<'PY'
import glob, json, os, struct, sys
repo, out = sys.argv[1], sys.argv[2]
data = os.path.join(repo, "tests", "data")
SEP = b"\n#--hh-fuzz-next-file--\n"

def put(target, name, blob):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(blob if isinstance(blob, bytes) else blob.encode())

def safetensors(header, payload):
    h = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(h)) + h + payload

# safetensors: each fixture's tensors of at most 512 bytes (real names, dtypes, shapes), re-tiled.
for path in sorted(glob.glob(os.path.join(data, "*", "*.safetensors"))):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    small, payload = {}, b""
    if "__metadata__" in header: small["__metadata__"] = header["__metadata__"]
    for name, e in sorted(header.items()):
        if name == "__metadata__" or e["data_offsets"][1] - e["data_offsets"][0] > 512 or len(small) > 12: continue
        begin, end = e["data_offsets"]
        small[name] = {"dtype": e["dtype"], "shape": e["shape"], "data_offsets": [len(payload), len(payload) + end - begin]}
        payload += raw[8 + n + begin:8 + n + end]
    put("fuzz_safetensors", os.path.basename(os.path.dirname(path)) + "-" + os.path.basename(path), safetensors(small, payload))
put("fuzz_safetensors", "dtypes.safetensors", safetensors(
    {"b": {"dtype": "BOOL", "shape": [2], "data_offsets": [0, 2]}, "h": {"dtype": "F16", "shape": [1], "data_offsets": [2, 4]},
     "i": {"dtype": "I8", "shape": [2, 1], "data_offsets": [4, 6]}, "e": {"dtype": "F64", "shape": [0, 3], "data_offsets": [6, 6]},
     "s": {"dtype": "I32", "shape": [], "data_offsets": [6, 10]}}, b"\x01\x00\x00\x3c\x7f\x80\x01\x02\x03\x04"))

# tokenizer.json: vocabularies cut to the first 300 ids (merges to those among them).
def cut_vocab(vocab, limit):
    return {t: i for t, i in vocab.items() if i < limit}
for path in sorted(glob.glob(os.path.join(data, "*", "tokenizer.json"))):
    folder = os.path.dirname(path)
    tj = json.load(open(path, encoding="utf-8"))
    model = tj.get("model") or {}
    if isinstance(model.get("vocab"), dict): model["vocab"] = cut_vocab(model["vocab"], 300)
    if isinstance(model.get("merges"), list):
        kept = []
        for m in model["merges"]:
            a, b = m.split(" ", 1) if isinstance(m, str) else m
            if a in model["vocab"] and b in model["vocab"] and a + b in model["vocab"]: kept.append(m)
        model["merges"] = kept[:200]
    blob = json.dumps(tj, ensure_ascii=False, separators=(",", ":")).encode()
    name = os.path.basename(folder)
    put("fuzz_tokenizer_json", name + ".json", blob)
    cfg = os.path.join(folder, "tokenizer_config.json")
    if os.path.exists(cfg): put("fuzz_tokenizer_json", name + "-with-config.json", blob + SEP + open(cfg, "rb").read())

# vocab.json + merges.txt (+ tokenizer_config.json), cut the same way.
for vocab_path in sorted(glob.glob(os.path.join(data, "*", "vocab.json"))):
    folder = os.path.dirname(vocab_path)
    vocab = cut_vocab(json.load(open(vocab_path, encoding="utf-8")), 400)
    lines = open(os.path.join(folder, "merges.txt"), encoding="utf-8").read().split("\n")
    merges = [l for l in lines[1:] if len(l.split(" ")) == 2 and "".join(l.split(" ")) in vocab][:200]
    blob = json.dumps(vocab, ensure_ascii=False).encode() + SEP + "\n".join([lines[0]] + merges).encode() + b"\n"
    name = os.path.basename(folder)
    put("fuzz_tokenizer_bpe", name + ".txt", blob)
    cfg = os.path.join(folder, "tokenizer_config.json")
    if os.path.exists(cfg): put("fuzz_tokenizer_bpe", name + "-with-config.txt", blob + SEP + open(cfg, "rb").read())

# vocab.txt: the first 300 lines (special tokens, [unused]), some single characters, a few words.
for vocab_path in sorted(glob.glob(os.path.join(data, "*", "vocab.txt"))):
    folder = os.path.dirname(vocab_path)
    lines = open(vocab_path, "rb").read().split(b"\n")
    blob = b"\n".join(lines[:300] + lines[1996:2100] + [b"##s", b"##ing", b"hello", b"world"]) + b"\n"
    name = os.path.basename(folder)
    put("fuzz_tokenizer_wordpiece", name + ".txt", blob)
    cfg = os.path.join(folder, "tokenizer_config.json")
    if os.path.exists(cfg): put("fuzz_tokenizer_wordpiece", name + "-with-config.txt", blob + SEP + open(cfg, "rb").read())

# tokenizer.model: stories260K's whole (7.6 KB; Llama 2's 500 KB model is too large a seed).
for model_path in sorted(glob.glob(os.path.join(data, "*", "tokenizer.model"))):
    folder = os.path.dirname(model_path)
    blob = open(model_path, "rb").read()
    if len(blob) > 65536: continue
    name = os.path.basename(folder)
    put("fuzz_tokenizer_sentencepiece", name + ".model", blob)
    cfg = os.path.join(folder, "tokenizer_config.json")
    if os.path.exists(cfg): put("fuzz_tokenizer_sentencepiece", name + "-with-config.model", blob + SEP + open(cfg, "rb").read())

# config.json of every fixture and project; the project files themselves.
for path in sorted(glob.glob(os.path.join(data, "*", "config.json")) + glob.glob(os.path.join(repo, "projects", "**", "config.json"), recursive=True)):
    put("fuzz_model_config", os.path.relpath(path, repo).replace(os.sep, "_"), open(path, "rb").read())
for path in sorted(glob.glob(os.path.join(repo, "projects", "**", "*.json"), recursive=True)):
    base = os.path.basename(path)
    if base in ("config.json", "vocab.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"): continue
    if os.path.getsize(path) <= 16384: put("fuzz_job_config", os.path.relpath(path, repo).replace(os.sep, "_"), open(path, "rb").read())
PY
for d in "$repo"/fuzz/seeds/*/; do
  t="fuzz_$(basename "$d")"
  mkdir -p "$seeds/$t"
  cp "$d"* "$seeds/$t/"
done

# The run file's seed is written by the target itself (a small valid run file from RunWriter).
for t in "${targets[@]}"; do
  if [ "$t" = fuzz_run_file ]; then
    mkdir -p "$seeds/$t"
    HH_FUZZ_WRITE_SEED="$seeds/$t/run.h5" "$build/fuzz/$t" >/dev/null 2>&1 || log "$t: no seed written"
  fi
done

# ---- run -------------------------------------------------------------------------------------
summary="$build/fuzz_summary.tsv"
[ -f "$summary" ] || printf 'date\ttarget\tseconds\texecs\texec_per_s\tcorpus\tcrashes\n' >"$summary"
mkdir -p "$build/logs"
status=0
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t" crashes="$build/crashes/$t"
  mkdir -p "$corpus" "$crashes" "$seeds/$t"
  before=$(find "$crashes" -type f | wc -l)
  # Twice the largest seed: longer inputs mostly cost time (a 64 KB vocabulary per exec) without
  # reaching new code.
  max_len=16384
  # A run file is HDF5: its smallest valid form (the seed) is about 200 KB of metadata and chunks.
  # Leaks are not reported there: libhdf5 1.10 itself loses ~4 KB of metadata cache (H5FL blocks
  # under H5Gopen2 -> H5O_obj_type) on some damaged object headers (docs/reliability.md).
  extra=()
  asan="${ASAN_OPTIONS:-}"
  if [ "$t" = fuzz_run_file ]; then
    max_len=262144
    extra=(-detect_leaks=0)
    asan="detect_leaks=0${asan:+:$asan}"  # nor at exit
  fi
  log "$t: ${seconds}s"
  # Limits from the hardening brief: > 10 s per input, > 2 GB resident or a single 1 GB
  # allocation is a crash. Leak detection stays on (libFuzzer reports leaks per input), except as
  # said above.
  ASAN_OPTIONS="$asan" nice -n 10 "$build/fuzz/$t" "$corpus" "$seeds/$t" -dict="$repo/fuzz/hh.dict" -max_len=$max_len "${extra[@]}" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
    -artifact_prefix="$crashes/" -print_final_stats=1 >"$build/logs/$t.log" 2>&1 || status=1
  # Scratch folders of this target's processes that died without their atexit clean-up.
  for d in /dev/shm/hh-fuzz-"${t#fuzz_}"-* "${TMPDIR:-/tmp}"/hh-fuzz-"${t#fuzz_}"-*; do
    [ -d "$d" ] && ! kill -0 "${d##*-}" 2>/dev/null && rm -rf "$d"
  done
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$build/logs/$t.log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$build/logs/$t.log" | tail -1)
  files=$(find "$corpus" -type f | wc -l)
  found=$(( $(find "$crashes" -type f | wc -l) - before ))
  row="$(date -u +%FT%TZ)	$t	$seconds	${execs:-?}	${rate:-?}	$files	$found"
  printf '%s\n' "$row" >>"$summary"
  printf '%s\n' "$row"
  if [ "$found" -gt 0 ]; then
    log "$t: $found new artifact(s) in $crashes; the report:"
    grep -E "ERROR|SUMMARY|runtime error|Test unit written" "$build/logs/$t.log" | head -10
  fi
done
log "summary: $summary"
exit $status
