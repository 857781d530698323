#!/bin/sh
# The build needs no downloads: configure with --wrap-mode=nodownload (as Debian's debhelper
# does) in a scratch directory (configuring is where dependencies are found). No wrap files
# are vendored. The offline compile itself is the Debian package build (tests/packaging).
# Usage: nodownload.sh SOURCE_ROOT
set -eu
src=$1
if [ -d "$src/subprojects" ] && ls "$src/subprojects"/*.wrap >/dev/null 2>&1; then
    echo "FAIL: wrap files in subprojects/: dependencies must come from the system"
    exit 1
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/kvreg-nodownload.XXXXXX")
trap 'rm -rf "$dir"' EXIT
meson setup --wrap-mode=nodownload -Dtests=disabled -Dexamples=false -Dbench=false \
    -Dbindings_tests=disabled "$dir" "$src" >"$dir.log" 2>&1 || { cat "$dir.log"; rm -f "$dir.log"; exit 1; }
rm -f "$dir.log"
# No compile here: dependencies are found (or not) when configuring, and the offline build
# of the whole library is the Debian package build's (debian/rules, tests/packaging).
echo "configured with --wrap-mode=nodownload"
