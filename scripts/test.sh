#!/usr/bin/env bash
# Sets up (see setup.sh) and runs the whole test suite with CTest (GUI tests offscreen), then
# builds the engine, the CLI and their tests with AddressSanitizer + UndefinedBehaviorSanitizer
# and runs the engine suites and the bad-input CLI suite under them (docs/reliability.md),
# the CUDA kernels' emulated suite included: there ASan is the CPU's compute-sanitizer memcheck.
#   HH_SANITIZE_TESTS  1 (default) runs the sanitizer step, 0 skips it
#   HH_ASAN_BUILD_DIR  its build directory (default: <repo>/build-asan)
#   HH_TEST_JOBS       suites run at once in each step (default: 2, as on CI's two cores)
# Extra arguments go to the first ctest run (e.g. -R engine.io).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$repo/scripts/setup.sh"
build="${HH_BUILD_DIR:-$repo/build}"
export QT_QPA_PLATFORM=offscreen
tests="${HH_TEST_JOBS:-2}"
(cd "$build" && ctest --output-on-failure --timeout 900 -j "$tests" "$@")

[ "${HH_SANITIZE_TESTS:-1}" = "1" ] || exit 0
asan="${HH_ASAN_BUILD_DIR:-$repo/build-asan}"
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
export CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
printf '\033[1m[test]\033[0m sanitizer build in %s (address;undefined)\n' "$asan"
if [ ! -f "$asan/CMakeCache.txt" ]; then
  cmake -S "$repo" -B "$asan" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHH_BUILD_GUI=OFF -DHH_BUILD_BENCHMARKS=OFF \
        "-DHH_SANITIZE=address;undefined" -DHH_DATA_DIR="${HH_DATA_DIR:-$HOME/.cache/hedgehog}" >/dev/null
fi
cmake --build "$asan" -j "${HH_JOBS:-$(nproc)}" --target hedgehog hh_engine_tests hh_cli_tests hh_cuda_emulation_tests
# Leaks are not checked: LibTorch, OpenBLAS and HDF5 keep process-lifetime allocations that
# LeakSanitizer reports at exit. Any ASan or UBSan report fails the test that triggers it.
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# The emulated CUDA suite runs about 6 minutes under the sanitizers here (339 s on 2026-11-27):
# one function could pass Qt Test's 5-minute watchdog on a slower machine, so the watchdog waits 20.
export QTEST_FUNCTION_TIMEOUT=1200000
(cd "$asan" && ctest --output-on-failure --timeout 1800 -j "$tests" -R '^(engine|app\.cli)\.')
