#!/bin/sh
# Runs the Rust binding's tests against the library in a Meson build directory.
# Usage: run-tests.sh <meson-build-dir>
# Exit 77 (Meson: skipped) with a reason when the toolchain is missing.
set -eu

if [ $# -ne 1 ]; then
    echo "usage: $0 <meson-build-dir>" >&2
    exit 2
fi
builddir=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)

# rustup installs into ~/.cargo/bin, which a non-login shell may not have on PATH.
cargo=${CARGO:-}
if [ -z "$cargo" ]; then
    if command -v cargo >/dev/null 2>&1; then
        cargo=cargo
    elif [ -x "${HOME:-/nonexistent}/.cargo/bin/cargo" ]; then
        cargo="$HOME/.cargo/bin/cargo"
    else
        echo "SKIP: cargo not found (install Debian's cargo or rustup)"
        exit 77
    fi
fi
if ! command -v "${PKG_CONFIG:-pkg-config}" >/dev/null 2>&1; then
    echo "SKIP: pkg-config not found (kvreg-sys locates libkvreg with it)"
    exit 77
fi

# The uninstalled .pc points at the library in this build dir; pkg-config prefers
# kvreg-uninstalled.pc over an installed kvreg.pc when both are on the path.
export PKG_CONFIG_PATH="$builddir/meson-uninstalled${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="$builddir/src${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CARGO_TARGET_DIR="$builddir/rust-target"
# Cargo writes caches and locks under CARGO_HOME even offline; keep it in the build dir so a
# read-only or shared home does not matter. rustup's proxies find toolchains via RUSTUP_HOME,
# which defaults to ~/.rustup and is unaffected.
if [ -z "${CARGO_HOME:-}" ] || [ ! -w "$CARGO_HOME" ]; then
    export CARGO_HOME="$builddir/rust-cargo-home"
    mkdir -p "$CARGO_HOME"
fi
export KVREG_VECTORS="${KVREG_VECTORS:-$here/../../tests/vectors/public.json}"
# Warnings fail the build, as -Werror does for the C code in CI.
export RUSTFLAGS="${RUSTFLAGS:--D warnings}"
export RUSTDOCFLAGS="${RUSTDOCFLAGS:--D warnings}"

echo "cargo: $("$cargo" --version)"
cd "$here"
# --locked: the committed Cargo.lock (format v3, readable by Debian's cargo) must not change.
exec "$cargo" test --offline --locked --jobs "${KVREG_RUST_JOBS:-2}"
