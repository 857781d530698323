#!/bin/sh
# Runs the Go binding's checks against a Meson build tree: gofmt, go vet, go test (with
# GODEBUG=cgocheck=2, which catches Go pointers stored in C memory) and go test -race.
# Usage: run-tests.sh <meson build dir> [race]. With "race", only go test -race (suite long:
# the race-instrumented build and run take most of this script's time).
# Exit 77 (skipped) when the Go toolchain is missing.
set -eu

if [ $# -lt 1 ] || [ $# -gt 2 ] || { [ $# -eq 2 ] && [ "$2" != race ]; }; then
    echo "usage: $0 <meson build dir> [race]" >&2
    exit 2
fi
mode=${2:-plain}
builddir=$(cd "$1" && pwd)
srcdir=$(cd "$(dirname "$0")" && pwd)

if ! command -v go >/dev/null 2>&1; then
    echo "SKIP: 'go' not found in PATH (install golang-go to run the Go binding tests)"
    exit 77
fi
if ! command -v pkg-config >/dev/null 2>&1; then
    echo "SKIP: 'pkg-config' not found; cgo needs it to find kvreg"
    exit 77
fi

if [ ! -f "$builddir/meson-uninstalled/kvreg-uninstalled.pc" ]; then
    echo "FAIL: $builddir/meson-uninstalled/kvreg-uninstalled.pc missing (not a configured build dir?)" >&2
    exit 1
fi

# Build against the uninstalled library of this build tree only: no network, no module
# proxy, caches inside the build dir so concurrent builds never share state.
GOFLAGS=-mod=mod
GOPROXY=off
GOCACHE=$builddir/go-cache
GOPATH=$builddir/go-path
GOTOOLCHAIN=local
CGO_ENABLED=1
PKG_CONFIG_PATH=$builddir/meson-uninstalled${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
LD_LIBRARY_PATH=$builddir/src${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
KVREG_VECTORS=${KVREG_VECTORS:-$srcdir/../../tests/vectors/public.json}
# The cgo preambles and generated code must be as warning-clean as the C library.
# Go's build cache does not see changes to headers outside the package, so a digest of
# the ones we include goes into the flags: a changed header then means a fresh cgo build.
headers_sum=$(cat "$srcdir/../../include/kvreg.h" "$srcdir/../../include/kvreg_wire.h" \
    "$srcdir/../../include/kvreg_index.h" "$srcdir/../../include/kvreg_nats.h" \
    "$builddir/include/kvreg_version.h" | cksum | cut -d' ' -f1)
CGO_CFLAGS="${CGO_CFLAGS:--g -O2} -Wall -Wextra -pedantic -Werror -DKVREG_GO_HEADERS_SUM=$headers_sum"
export GOFLAGS GOPROXY GOCACHE GOPATH GOTOOLCHAIN CGO_ENABLED PKG_CONFIG_PATH LD_LIBRARY_PATH \
    KVREG_VECTORS CGO_CFLAGS

cd "$srcdir"
echo "== $(go version)"

if [ "$mode" = race ]; then
    # The race detector exists only on some platforms; say so instead of failing elsewhere.
    case "$(go env GOOS)/$(go env GOARCH)" in
        linux/amd64 | linux/arm64 | linux/ppc64le | linux/s390x | darwin/amd64 | darwin/arm64 | \
            freebsd/amd64 | netbsd/amd64 | windows/amd64)
            echo "== go test -race ./..."
            go test -race -count=1 -timeout 240s ./...
            echo "== Go binding: race checks passed"
            exit 0
            ;;
        *)
            echo "SKIP: no race detector on $(go env GOOS)/$(go env GOARCH)"
            exit 77
            ;;
    esac
fi

echo "== gofmt -l"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
    echo "FAIL: not gofmt-formatted: $unformatted" >&2
    exit 1
fi

echo "== go vet ./..."
go vet ./...

# -count=1: the test cache does not notice a rebuilt libkvreg.so, so never reuse results.
# Full pointer checking is GODEBUG=cgocheck=2 up to Go 1.20; from 1.21 the runtime refuses
# that setting and the same checks are GOEXPERIMENT=cgocheck2 at build time.
go_minor=$(go env GOVERSION | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
if [ -n "$go_minor" ] && [ "$go_minor" -ge 21 ]; then
    echo "== GOEXPERIMENT=cgocheck2 go test ./..."
    GOEXPERIMENT=cgocheck2 go test -count=1 -timeout 240s ./...
else
    echo "== GODEBUG=cgocheck=2 go test ./..."
    GODEBUG=cgocheck=2 go test -count=1 -timeout 240s ./...
fi

echo "== Go binding: all checks passed (go test -race: the go-race test, suite long)"
