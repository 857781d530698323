#!/bin/sh
# Build tests/target32/poll_capacity_32.c with src/api/config.cpp for a 32-bit target and run it.
# Usage: run.sh C_COMPILER CXX_COMPILER SOURCE_ROOT BUILD_INCLUDE_DIR
# Skips (exit 77, with the reason) when the compilers cannot build 32-bit programs, or when
# the kernel cannot run them and qemu-i386 is not installed, unless KVREG_REQUIRE_M32=1 (set
# by .ci/run, which installs g++-multilib and qemu-user): then that is a failure. A kernel
# without 32-bit support (IA32 emulation off; paravirtualised guests such as PVM have none)
# runs the test under qemu-i386, which executes the same i386 code in user mode.
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
# Where the kernel cannot execute i386 programs, run them under qemu-i386 (Debian qemu-user).
run=""
if ! "$tmp/probe" 2>/dev/null; then
    if command -v qemu-i386 >/dev/null 2>&1 && qemu-i386 "$tmp/probe"; then
        run=qemu-i386
    elif [ "${KVREG_REQUIRE_M32:-0}" = 1 ]; then
        echo "FAIL: this kernel cannot run -m32 programs and qemu-i386 is missing (install qemu-user)" >&2
        exit 1
    else
        echo "SKIP: this kernel cannot run -m32 programs (install qemu-user to run this test under qemu-i386)"
        exit 77
    fi
fi
$cxx -m32 -std=c++20 -DKVREG_BUILDING_LIBRARY -I"$src/include" -I"$inc" -I"$src/src" \
    -c "$src/src/api/config.cpp" -o "$tmp/config.o"
$cc -m32 -std=c99 -I"$src/include" -I"$inc" -c "$src/tests/target32/poll_capacity_32.c" -o "$tmp/test.o"
$cxx -m32 "$tmp/test.o" "$tmp/config.o" -o "$tmp/test"
$run "$tmp/test"
