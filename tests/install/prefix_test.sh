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

# KVREG_PREFIX_BUILD=DIR (CI): DIR is a build tree configured with a private, empty prefix of
# its own; install it there instead of building the library once more (.ci/run).
if [ -n "${KVREG_PREFIX_BUILD:-}" ]; then
    P=$(meson introspect "$KVREG_PREFIX_BUILD" --buildoptions |
        /usr/bin/python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
    case $P in /usr | /usr/local) echo "FAIL: $KVREG_PREFIX_BUILD has the system prefix $P"; exit 1 ;; esac
    [ ! -e "$P" ] || [ -z "$(ls -A "$P")" ] || { echo "FAIL: the prefix $P is not empty"; exit 1; }
    meson install -C "$KVREG_PREFIX_BUILD" --no-rebuild --quiet >"$tmp/install.log" 2>&1 ||
        { cat "$tmp/install.log"; exit 1; }
    trap 'rm -rf "$tmp" "$P"' EXIT
else
    meson setup "$tmp/build" "$src" --prefix="$P" --buildtype=release -Dtests=disabled \
        -Dbench=false -Dbindings_tests=disabled --wrap-mode=nodownload >"$tmp/setup.log" 2>&1 ||
        { cat "$tmp/setup.log"; exit 1; }
    meson compile -C "$tmp/build" >"$tmp/compile.log" 2>&1 || { tail -30 "$tmp/compile.log"; exit 1; }
    meson install -C "$tmp/build" --quiet >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; exit 1; }
fi

pc=$(find "$P" -name kvreg.pc)
libdir=$(dirname "$(dirname "$pc")")
export PKG_CONFIG_PATH="$libdir/pkgconfig"
echo "installed into $P; kvreg.pc in ${pc#"$P"/}"
pkg-config --libs kvreg | grep -q -- "-Wl,-rpath,$libdir" || {
    echo "FAIL: kvreg.pc gives no rpath to $libdir: $(pkg-config --libs kvreg)"; exit 1; }

# Every installed program, with an empty environment (no PATH, HOME, LD_LIBRARY_PATH): its
# --help and one real command. A program installed without a command here fails the test, so
# a new tool gets checked too.
echo "== every installed program, under env -i"
n=0
for prog in "$P"/bin/*; do
    name=${prog##*/}
    env -i "$prog" --help >"$tmp/out" 2>&1 || { cat "$tmp/out"; echo "FAIL: env -i $name --help"; exit 1; }
    grep -qi usage "$tmp/out" || { cat "$tmp/out"; echo "FAIL: $name --help prints no usage"; exit 1; }
    case $name in
    kvreg-replay)
        env -i "$prog" --conversations 20 --no-progress >"$tmp/out" 2>&1 ||
            { cat "$tmp/out"; echo "FAIL: env -i $name --conversations 20"; exit 1; }
        grep -q 'requests' "$tmp/out" || { cat "$tmp/out"; echo "FAIL: $name printed no report"; exit 1; } ;;
    kvreg-events)
        # one Dynamo RouterEvent (a Remove of block 42), decoded from stdin
        printf '%s' '{"worker_id":1,"event":{"event_id":7,"data":{"removed":{"block_hashes":[42]}},"dp_rank":0}}' |
            env -i "$prog" decode --format dynamo-json - >"$tmp/out" 2>&1 && rc=0 || rc=$?
        if grep -q 'not built\|ENOTSUP\|not supported' "$tmp/out"; then
            # a library without the wire feature: the tool still ran and said why
            [ "$rc" = 1 ] || { cat "$tmp/out"; echo "FAIL: $name decode without wire: exit $rc, not 1"; exit 1; }
        else
            grep -q '"type":"BlockRemoved","block_hashes":\[42\]' "$tmp/out" && [ "$rc" = 0 ] ||
                { cat "$tmp/out"; echo "FAIL: env -i $name decode (exit $rc)"; exit 1; }
        fi ;;
    *)
        echo "FAIL: $name is installed but $0 runs no command of it: add one"; exit 1 ;;
    esac
    echo "$name: --help and a real command ran with an empty environment"
    n=$((n + 1))
done
[ "$n" -ge 2 ] || { echo "FAIL: expected kvreg-replay and kvreg-events in $P/bin, found $n programs"; exit 1; }

echo "== manual pages and bash completions"
for f in share/man/man1/kvreg-replay.1 share/man/man1/kvreg-events.1 share/man/man3/libkvreg.3 \
         share/bash-completion/completions/kvreg-replay share/bash-completion/completions/kvreg-events; do
    [ -s "$P/$f" ] || { echo "FAIL: not installed: $f"; exit 1; }
done
# man finds the pages from PATH alone (man-db maps <prefix>/bin to <prefix>/share/man)
if command -v man >/dev/null 2>&1; then
    page=$(env -i PATH="$P/bin:/usr/bin:/bin" man -w kvreg-events) &&
        [ "$page" = "$P/share/man/man1/kvreg-events.1" ] ||
        { echo "FAIL: man -w kvreg-events with $P/bin on PATH gave '${page:-}'"; exit 1; }
fi
echo "installed: kvreg-replay.1 kvreg-events.1 libkvreg.3 and both completions"

echo "== the installed examples, built with only the installed headers and kvreg.pc"
exdir=$P/share/doc/libkvreg/examples
mkdir "$tmp/examples"
for c in "$src"/examples/*.c; do
    name=${c##*/}
    [ -f "$exdir/$name" ] || { echo "FAIL: examples/$name is not installed in $exdir"; exit 1; }
done
# only the installed copies: nothing from the source tree or a build tree on the include path
cp "$exdir"/*.c "$exdir"/*.h "$tmp/examples/"
for c in "$tmp"/examples/*.c; do
    name=$(basename "$c" .c)
    # shellcheck disable=SC2046
    cc -std=c99 -Wall -Wextra -Werror -o "$tmp/examples/$name" "$c" $(pkg-config --cflags --libs kvreg) -ldl ||
        { echo "FAIL: examples/$name.c does not build against $P"; exit 1; }
done
for name in basic tiers prefix_match batch; do
    env -i "$tmp/examples/$name" >"$tmp/out" 2>&1 || { cat "$tmp/out"; echo "FAIL: example $name"; exit 1; }
done
env -i "$tmp/examples/dlopen" "$libdir/libkvreg.so.0" >"$tmp/out" 2>&1 ||
    { cat "$tmp/out"; echo "FAIL: example dlopen"; exit 1; }
echo "built $(ls "$tmp"/examples/*.c | wc -l) examples; ran basic tiers prefix_match batch dlopen"

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
    # without pkg-config (bindings/go/link_default.go): PKG_CONFIG=false proves it is not asked
    (cd "$tmp/go" && PKG_CONFIG=false CGO_CFLAGS="-I$P/include" \
        CGO_LDFLAGS="-L$libdir -Wl,-rpath,$libdir" GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local \
        GOCACHE="$tmp/go-cache" GOPATH="$tmp/go-path" \
        go build -tags kvreg_nopkgconfig -o "$tmp/go-consumer-nopc" . ) && "$tmp/go-consumer-nopc"
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
