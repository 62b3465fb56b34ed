#!/usr/bin/env bash
# Builds hcasim and runs its test suite twice: a normal build, then the same
# tests under AddressSanitizer and UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/../.."
testbench/scripts/setup.sh
jobs=$(nproc)
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs"
(cd build && ctest -j"$jobs" --output-on-failure)

cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DHCASIM_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"
# SystemC threads switch stacks; ASan's fake stacks do not follow them.
export ASAN_OPTIONS=detect_stack_use_after_return=0:detect_leaks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
(cd build-asan && ctest -j"$jobs" --output-on-failure)
