#!/bin/sh
# Build tests/target32/poll_capacity_32.c with src/api_config.cpp for a 32-bit target and run it.
# Usage: run.sh C_COMPILER CXX_COMPILER SOURCE_ROOT BUILD_INCLUDE_DIR
# Skips (exit 77, with the reason) when the compilers cannot build 32-bit programs, unless
# KVREG_REQUIRE_M32=1 (set by .ci/run, which installs g++-multilib): then that is a failure.
set -eu
cc=$1 cxx=$2 src=$3 inc=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! printf 'int main(void){return 0;}\n' | $cc -m32 -x c - -o "$tmp/probe" 2>/dev/null; then
    if [ "${KVREG_REQUIRE_M32:-0}" = 1 ]; then
        echo "FAIL: $cc cannot build -m32 programs (install g++-multilib)" >&2
        exit 1
    fi
    echo "SKIP: $cc cannot build -m32 programs (install g++-multilib to run this test)"
    exit 77
fi
$cxx -m32 -std=c++20 -DKVREG_BUILDING_LIBRARY -I"$src/include" -I"$inc" -I"$src/src" \
    -c "$src/src/api_config.cpp" -o "$tmp/config.o"
$cc -m32 -std=c99 -I"$src/include" -I"$inc" -c "$src/tests/target32/poll_capacity_32.c" -o "$tmp/test.o"
$cxx -m32 "$tmp/test.o" "$tmp/config.o" -o "$tmp/test"
"$tmp/test"
