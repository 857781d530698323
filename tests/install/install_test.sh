#!/bin/sh
# Install test: `meson install --destdir` into a temporary directory, then build and run an
# out-of-tree program with nothing but the installed kvreg.pc, header and library.
# Usage: install_test.sh BUILD_ROOT SOURCE_DIR PREFIX LIBDIR CC
set -eu
build=$1 src=$2 prefix=$3 libdir=$4 cc=$5
case $libdir in /*) ;; *) libdir=$prefix/$libdir ;; esac

if ! command -v pkg-config >/dev/null 2>&1; then
    echo "SKIP: pkg-config not found"
    exit 77
fi
dest=$(mktemp -d "${TMPDIR:-/tmp}/kvreg-install.XXXXXX")
trap 'rm -rf "$dest"' EXIT

meson install -C "$build" --destdir "$dest" --no-rebuild --quiet >"$dest.log" 2>&1 || {
    cat "$dest.log"; rm -f "$dest.log"; exit 1; }
rm -f "$dest.log"

for f in "$prefix/include/kvreg.h" "$prefix/include/kvreg_wire.h" "$prefix/include/kvreg_version.h" \
         "$libdir/libkvreg.so.0" \
         "$libdir/libkvreg.so" "$libdir/pkgconfig/kvreg.pc"; do
    [ -e "$dest$f" ] || { echo "FAIL: not installed: $f"; exit 1; }
done
# the development symlink points at the SONAME, which points at the real file
[ "$(readlink "$dest$libdir/libkvreg.so")" = libkvreg.so.0 ] || { echo "FAIL: libkvreg.so link"; exit 1; }
readelf -d "$dest$libdir/libkvreg.so.0" | grep -q 'SONAME.*libkvreg\.so\.0\]' || {
    echo "FAIL: SONAME is not libkvreg.so.0"; exit 1; }

# A system prefix gets no RUNPATH (distributions reject them; ldconfig finds the library):
# neither in installed programs nor in what kvreg.pc gives programs built against it.
case $prefix in /usr | /usr/local)
    if [ -e "$dest$prefix/bin/kvreg-replay" ] &&
       readelf -d "$dest$prefix/bin/kvreg-replay" | grep -Eq '\((RUNPATH|RPATH)\)'; then
        echo "FAIL: kvreg-replay has a RUNPATH under the system prefix $prefix"; exit 1
    fi
    if grep -q -- '-rpath' "$dest$libdir/pkgconfig/kvreg.pc"; then
        echo "FAIL: kvreg.pc gives an rpath under the system prefix $prefix"; exit 1
    fi ;;
esac

# Only the destdir: the sysroot prefixes every -I/-L the .pc file gives.
export PKG_CONFIG_PATH="$dest$libdir/pkgconfig"
export PKG_CONFIG_SYSROOT_DIR="$dest"
export PKG_CONFIG_LIBDIR="$dest$libdir/pkgconfig:/usr/lib/pkgconfig:/usr/share/pkgconfig:$(pkg-config --variable pc_path pkg-config 2>/dev/null || true)"
flags=$(pkg-config --cflags --libs kvreg)
echo "pkg-config kvreg: $flags"
case $flags in *"$dest"*) ;; *) echo "FAIL: flags do not point into the destdir"; exit 1 ;; esac
# shellcheck disable=SC2086
$cc -std=c99 -Wall -Wextra -pedantic -Werror -o "$dest/consumer" "$src/consumer.c" $flags
LD_LIBRARY_PATH="$dest$libdir" "$dest/consumer"
# and it really ran against the installed copy
LD_LIBRARY_PATH="$dest$libdir" ldd "$dest/consumer" | grep -q "$dest$libdir/libkvreg.so.0" || {
    echo "FAIL: the consumer did not load the installed library"; exit 1; }
