#!/bin/sh
# A newcomer's install: `meson setup --prefix=P && meson install` into a private prefix, then
# programs in C, Python, Go and Rust built outside the tree against P, and the installed
# kvreg-replay, all run with no LD_LIBRARY_PATH (the RUNPATHs and the Python package's
# generated libdir find the library). A language whose toolchain is missing is skipped with
# a message; C and kvreg-replay always run.
# Usage: prefix_test.sh SOURCE_ROOT
set -eu
src=$(cd "$1" && pwd)
unset LD_LIBRARY_PATH KVREG_LIBRARY PYTHONPATH PKG_CONFIG_PATH
command -v pkg-config >/dev/null 2>&1 || { echo "SKIP: pkg-config not found"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvreg-prefix.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
P=$tmp/prefix

meson setup "$tmp/build" "$src" --prefix="$P" --buildtype=release -Dtests=disabled \
    -Dbench=false -Dbindings_tests=disabled --wrap-mode=nodownload >"$tmp/setup.log" 2>&1 ||
    { cat "$tmp/setup.log"; exit 1; }
meson compile -C "$tmp/build" >"$tmp/compile.log" 2>&1 || { tail -30 "$tmp/compile.log"; exit 1; }
meson install -C "$tmp/build" --quiet >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; exit 1; }

pc=$(find "$P" -name kvreg.pc)
libdir=$(dirname "$(dirname "$pc")")
export PKG_CONFIG_PATH="$libdir/pkgconfig"
echo "installed into $P; kvreg.pc in ${pc#"$P"/}"
pkg-config --libs kvreg | grep -q -- "-Wl,-rpath,$libdir" || {
    echo "FAIL: kvreg.pc gives no rpath to $libdir: $(pkg-config --libs kvreg)"; exit 1; }

echo "== kvreg-replay (installed)"
"$P/bin/kvreg-replay" --conversations 20 --no-progress | sed -n 1,2p

echo "== C"
# shellcheck disable=SC2046
cc -std=c99 -Wall -Werror -o "$tmp/c-consumer" "$src/tests/install/consumer.c" $(pkg-config --cflags --libs kvreg)
"$tmp/c-consumer"

echo "== Python"
init=$(find "$P" -path '*-packages/kvreg/__init__.py' | head -1)
if [ -z "$init" ] && ! command -v python3 >/dev/null 2>&1; then
    echo "skipped: python3 not found, so meson installed no Python package"
else
    pydir=$(dirname "$init")
    [ -n "$init" ] && [ -f "$pydir/_config.py" ] || {
        echo "FAIL: the Python package or its _config.py was not installed under $P"; exit 1; }
    (cd "$tmp" && PYTHONPATH=$(dirname "$pydir") python3 -c '
import kvreg
b = kvreg.hash_blocks(range(1, 11), 4, kvreg.ROUTER_SALT)
assert [x.sequence_hash for x in b] == [14643705804678351452, 4945711292740353085], b
print("python kvreg", kvreg.__version__, "loaded", kvreg._ffi.lib._name)')
fi

echo "== Go"
if command -v go >/dev/null 2>&1; then
    mkdir "$tmp/go"
    cat >"$tmp/go/go.mod" <<GOMOD
module example.com/consumer

go 1.19

require github.com/libkvreg/libkvreg/bindings/go v0.0.0
replace github.com/libkvreg/libkvreg/bindings/go => $src/bindings/go
GOMOD
    cat >"$tmp/go/main.go" <<'GO'
package main

import (
	"fmt"

	kvreg "github.com/libkvreg/libkvreg/bindings/go"
)

func main() {
	blocks, err := kvreg.HashBlocks([]uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 4, kvreg.RouterSalt)
	if err != nil || blocks[1].SequenceHash != 4945711292740353085 {
		panic(fmt.Sprint("hashes differ from the vectors: ", err))
	}
	fmt.Println("go binding works")
}
GO
    (cd "$tmp/go" && GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local GOCACHE="$tmp/go-cache" \
        GOPATH="$tmp/go-path" go build -o "$tmp/go-consumer" . ) && "$tmp/go-consumer"
else
    echo "skipped: go not found (Debian golang-go)"
fi

echo "== Rust"
if command -v cargo >/dev/null 2>&1; then
    mkdir -p "$tmp/rs/src"
    cat >"$tmp/rs/Cargo.toml" <<TOML
[package]
name = "consumer"
version = "0.1.0"
edition = "2021"

[dependencies]
kvreg = { path = "$src/bindings/rust/kvreg" }

[workspace]
TOML
    cat >"$tmp/rs/src/main.rs" <<'RS'
fn main() {
    let blocks = kvreg::hash_blocks(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 4, kvreg::ROUTER_SALT).unwrap();
    assert_eq!(blocks[1].sequence_hash, 4945711292740353085);
    println!("rust binding works");
}
RS
    # Cargo passes no linker flags from kvreg.pc to a dependent's binary: the documented way
    # (docs/install.md) is RUSTFLAGS with the same rpath.
    (cd "$tmp/rs" && CARGO_HOME="$tmp/cargo-home" CARGO_TARGET_DIR="$tmp/rs-target" \
        RUSTFLAGS="-C link-arg=-Wl,-rpath,$libdir" cargo build --offline --quiet --jobs 2) &&
        "$tmp/rs-target/debug/consumer"
else
    echo "skipped: cargo not found (Debian cargo)"
fi
echo "all programs ran from $P without LD_LIBRARY_PATH"
